//! The runner's dashboard: the steps running now across every process that shares the store
//! (`uwf ps`, from the live step leases), the steps and failed steps per UTC minute over the
//! last hour (the store's aggregate, [`crate::store::MinuteRow`]), and each workflow's
//! threads by state with the limits and budgets they run under (`uwf ps --stats`, and `uwf
//! serve`'s `/runs` and `/api/runs`). Everything is read from the store, so the runners of
//! other processes and machines count alike.

use super::error::CliResult;
use super::limits::LimitsOut;
use crate::store::{Budget, MINUTE_MS, Phase, Store, WorkflowLimits, minute_of};
use crate::thread::chain::WorkflowNames;
use crate::thread::{self, Config, ThreadId};
use crate::time::format_iso;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The minutes the dashboard shows: the last hour, the current minute its last.
pub(crate) const HOUR_MINUTES: u32 = 60;

/// A row of `uwf ps`: a step running now.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Running {
    pub thread: String,
    /// The workflow's name (empty when the thread's chain does not read).
    pub workflow: String,
    /// The role whose step runs, when the moderator's choice reads.
    pub role: Option<String>,
    /// The agent this machine's config runs for that role.
    pub agent: Option<String>,
    /// The process holding the step's lease.
    pub pid: u32,
    /// When it took the lease, ms since the epoch (its clock).
    pub since: u64,
    pub elapsed_ms: u64,
    /// The lease's holder as a server's lease row names it: `boot id:pid:start time` (the boot
    /// id tells machines apart).
    pub holder: String,
    /// Whether the holder runs on this machine (in the boot this process runs in).
    pub this_machine: bool,
}

/// `uwf ps`: the steps of live processes, by thread id, at `now` (ms since the epoch).
///
/// # Errors
/// Store failures.
pub(crate) fn running(store: &Store, config: &Config, now: u64) -> CliResult<Vec<Running>> {
    let boot = crate::proc::boot_id();
    let mut rows = Vec::new();
    for (t, l) in store.leases()? {
        if !l.is_live() {
            continue;
        }
        let (workflow, role) = thread::running_role(store, &t).unwrap_or_default();
        let agent = role
            .as_deref()
            .and_then(|r| config.agent_for(&workflow, r).ok())
            .map(|a| a.display());
        rows.push(Running {
            thread: t.to_string(),
            workflow,
            role,
            agent,
            pid: l.pid,
            since: l.since_ms,
            elapsed_ms: now.saturating_sub(l.since_ms),
            holder: format!("{}:{}:{}", l.boot_id, l.pid, l.start_ticks),
            this_machine: l.boot_id.is_empty() || l.boot_id == boot,
        });
    }
    Ok(rows)
}

/// Steps and failed steps.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub(crate) struct Counts {
    pub steps: u64,
    pub failures: u64,
}

/// One minute of the last hour.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Minute {
    /// Its start, as JavaScript's `toISOString()` writes it.
    pub minute: String,
    /// Its start, ms since the epoch.
    #[serde(skip)]
    pub start_ms: u64,
    pub steps: u64,
    pub failures: u64,
    /// Per workflow name, those with any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_workflow: BTreeMap<String, Counts>,
}

/// The last hour added up.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hour {
    /// The start of its first minute.
    pub from: String,
    /// Now.
    pub to: String,
    pub steps: u64,
    pub failures: u64,
    /// Its steps over its 60 minutes.
    pub steps_per_minute: f64,
    /// Its steps over its 3,600 seconds.
    pub steps_per_second: f64,
}

/// A workflow's threads by state, its last hour, and what limits it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkflowRuns {
    /// Its name (the name the workflow gives itself, which its limits are set under).
    pub workflow: String,
    /// Threads with a step running now.
    pub running: u32,
    /// Active threads that are not queued (running, idle or paused): what its concurrency
    /// limit counts.
    pub in_progress: u32,
    /// Threads waiting for room under its concurrency limit: its queue's depth.
    pub queued: u32,
    /// Threads paused, by hand or for their budget.
    pub paused: u32,
    pub steps_last_hour: u64,
    pub failures_last_hour: u64,
    /// Its limits and budgets as `uwf limits list` prints them, those of config.yaml where the
    /// store has none (the store's `*` budgets under its own); `None` when nothing limits it.
    pub limits: Option<LimitsOut>,
    /// Where the concurrency limit comes from: `store`, `config`, or `None`.
    pub limits_from: Option<&'static str>,
    /// What its calls cost today (the UTC day its day budget counts), USD, where it has a
    /// day budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spent_today_usd: Option<f64>,
}

/// `uwf ps --stats`: the dashboard at `now`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Runs {
    pub now: String,
    /// Now, ms since the epoch.
    #[serde(skip)]
    pub now_ms: u64,
    pub running: Vec<Running>,
    pub last_hour: Hour,
    /// The last hour's minutes, oldest first, every one of them.
    pub minutes: Vec<Minute>,
    pub workflows: Vec<WorkflowRuns>,
}

/// The dashboard of `store` at `now` (ms since the epoch), `config` giving the agents and the
/// limits the store does not set.
///
/// # Errors
/// A malformed limit in the config, store failures.
pub(crate) fn runs(store: &Store, config: &Config, now: u64) -> CliResult<Runs> {
    let running = running(store, config, now)?;
    let last = minute_of(now);
    let first = last.saturating_sub(HOUR_MINUTES - 1);
    let mut minutes: Vec<Minute> = (first..=last)
        .map(|m| {
            let start_ms = u64::from(m) * MINUTE_MS;
            Minute {
                minute: format_iso(start_ms),
                start_ms,
                steps: 0,
                failures: 0,
                by_workflow: BTreeMap::new(),
            }
        })
        .collect();
    let mut per: BTreeMap<String, WorkflowRuns> = BTreeMap::new();
    for r in store.step_minutes(first)? {
        let Some(m) = minutes.get_mut((r.minute - first) as usize) else {
            // A minute ahead of this clock (another machine's).
            continue;
        };
        m.steps += r.counts.steps;
        m.failures += r.counts.failures;
        let c = m.by_workflow.entry(r.workflow.clone()).or_default();
        c.steps += r.counts.steps;
        c.failures += r.counts.failures;
        let w = entry(&mut per, &r.workflow);
        w.steps_last_hour += r.counts.steps;
        w.failures_last_hour += r.counts.failures;
    }
    for r in &running {
        entry(&mut per, &r.workflow).running += 1;
    }
    threads_by_state(store, &mut per)?;
    let limits = store.workflow_limits()?;
    let budgets = store.budgets()?;
    for name in limits
        .iter()
        .map(|(n, _)| n)
        .chain(budgets.iter().map(|(n, _)| n))
    {
        if name != "*" {
            entry(&mut per, name);
        }
    }
    let defaults = budget_of(&budgets, "*").unwrap_or_default();
    let mut today = None;
    for w in per.values_mut() {
        let own_limits = limits
            .iter()
            .find(|(n, _)| *n == w.workflow)
            .map(|(_, l)| *l);
        let own_budget = budget_of(&budgets, &w.workflow);
        let from_config = match own_limits {
            Some(_) => None,
            None => config.limits(&w.workflow)?.map(|l| WorkflowLimits {
                concurrency: l.concurrency,
                drop: l.overflow == thread::Overflow::Drop,
                max_queue: l.max_queue,
                max_retries: None,
            }),
        };
        let budget = own_budget.unwrap_or_default().over(&defaults);
        w.limits_from = match (own_limits, from_config) {
            (Some(l), _) if l.concurrency > 0 => Some("store"),
            (None, Some(_)) => Some("config"),
            _ => None,
        };
        let l = own_limits.or(from_config);
        w.limits = (l.is_some() || !budget.is_empty())
            .then(|| LimitsOut::of(&w.workflow, l.as_ref(), Some(&budget)));
        if budget.max_cost_per_day.is_some() {
            let day = match today {
                Some(d) => d,
                None => *today.insert(store.today(now)?),
            };
            w.spent_today_usd = Some(store.day_usage(&w.workflow, day)?.cost_usd);
        }
    }
    let (steps, failures) = minutes
        .iter()
        .fold((0, 0), |(s, f), m| (s + m.steps, f + m.failures));
    Ok(Runs {
        now: format_iso(now),
        now_ms: now,
        running,
        last_hour: Hour {
            from: format_iso(u64::from(first) * MINUTE_MS),
            to: format_iso(now),
            steps,
            failures,
            steps_per_minute: steps as f64 / f64::from(HOUR_MINUTES),
            steps_per_second: steps as f64 / f64::from(HOUR_MINUTES * 60),
        },
        minutes,
        workflows: per.into_values().collect(),
    })
}

/// Workflow `name`'s entry, made empty when new.
fn entry<'a>(per: &'a mut BTreeMap<String, WorkflowRuns>, name: &str) -> &'a mut WorkflowRuns {
    per.entry(name.to_string()).or_insert_with(|| WorkflowRuns {
        workflow: name.to_string(),
        running: 0,
        in_progress: 0,
        queued: 0,
        paused: 0,
        steps_last_hour: 0,
        failures_last_hour: 0,
        limits: None,
        limits_from: None,
        spent_today_usd: None,
    })
}

fn budget_of(budgets: &[(String, Budget)], name: &str) -> Option<Budget> {
    budgets.iter().find(|(n, _)| n == name).map(|(_, b)| *b)
}

/// Counts the active threads of each workflow name by state into `per`: each distinct
/// workflow node is read once, in one snapshot.
fn threads_by_state(store: &Store, per: &mut BTreeMap<String, WorkflowRuns>) -> CliResult<()> {
    let phases: HashMap<ThreadId, Phase> = store
        .thread_states()?
        .into_iter()
        .map(|(t, s)| (t, s.phase))
        .collect();
    let snap = store.snapshot()?;
    let mut names = WorkflowNames::default();
    for (t, r) in store.threads()? {
        let Some(name) = names.of(&snap, &r) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let w = entry(per, &name);
        match phases.get(&t).copied().unwrap_or_default() {
            Phase::Queued => w.queued += 1,
            Phase::Paused | Phase::PausedForBudget => {
                w.paused += 1;
                w.in_progress += 1;
            }
            Phase::Ready => w.in_progress += 1,
        }
    }
    Ok(())
}
