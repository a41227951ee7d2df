//! The usage tables of the store in memory: each step's calls, the aggregate per thread, UTC
//! day, role and model, a workflow's days by its name, the budgets and the steps per minute;
//! the maps the redb file keeps in `usage_calls`, `usage_totals`, `usage_days`, `budgets` and
//! `step_minutes`.

use crate::cas::NodeId;
use crate::store::backend::Each;
use crate::store::minutes::{MinuteRow, StepCounts};
use crate::store::usage::{Budget, DAY_MS, StepCalls, StepUsage, UsageRow, UsageTotals, by_model};
use std::collections::BTreeMap;

/// A row of the usage aggregate: (thread, day, role, model).
type UsageKey = (String, u32, String, String);

/// The usage part of the state.
#[derive(Clone, Default)]
pub(super) struct Usage {
    /// StepNode id → its calls.
    calls: BTreeMap<u64, StepCalls>,
    /// The aggregate: the thread's workflow and the totals.
    totals: BTreeMap<UsageKey, (Option<NodeId>, UsageTotals)>,
    /// (workflow name, day) → the totals.
    days: BTreeMap<(String, u32), UsageTotals>,
    /// Workflow name (`*` for the defaults) → its budget.
    budgets: BTreeMap<String, Budget>,
    /// (UTC minute, workflow name) → its steps and failed steps.
    minutes: BTreeMap<(u32, String), StepCounts>,
}

impl Usage {
    /// The aggregate's rows, of `thread` only when given.
    pub(super) fn rows(&self, thread: Option<&str>) -> Vec<UsageRow> {
        self.totals
            .iter()
            .filter(|((t, ..), _)| thread.is_none_or(|th| th == t))
            .map(
                |((thread, day, role, model), (workflow, totals))| UsageRow {
                    thread: thread.clone(),
                    day: *day,
                    role: role.clone(),
                    model: model.clone(),
                    workflow: *workflow,
                    totals: *totals,
                },
            )
            .collect()
    }

    /// The calls recorded with `step`.
    pub(super) fn step(&self, step: NodeId) -> Option<StepCalls> {
        self.calls.get(&step.0).cloned()
    }

    /// Every step's calls, in id order.
    pub(super) fn each_step(&self, f: Each<'_, (NodeId, StepCalls)>) {
        for (id, c) in &self.calls {
            if f((NodeId(*id), c.clone())).is_break() {
                break;
            }
        }
    }

    /// Workflow `name`'s totals on `day`.
    pub(super) fn day(&self, name: &str, day: u32) -> UsageTotals {
        self.days
            .get(&(name.to_string(), day))
            .copied()
            .unwrap_or_default()
    }

    /// Workflow `name`'s days with their totals, oldest first.
    pub(super) fn days(&self, name: &str) -> Vec<(u32, UsageTotals)> {
        let (from, to) = ((name.to_string(), 0), (name.to_string(), u32::MAX));
        self.days
            .range(from..=to)
            .map(|((_, day), t)| (*day, *t))
            .collect()
    }

    /// Every budget, in name order.
    pub(super) fn budgets(&self) -> Vec<(String, Budget)> {
        self.budgets.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    /// Sets or removes workflow `name`'s budget; returns the old one.
    pub(super) fn set_budget(&mut self, name: &str, budget: Option<&Budget>) -> Option<Budget> {
        match budget {
            Some(b) => self.budgets.insert(name.to_string(), *b),
            None => self.budgets.remove(name),
        }
    }

    /// Records `u`'s calls and adds them to the aggregate, on `u.day` or the UTC day of
    /// `now_ms`; a step's calls count once.
    pub(super) fn add(&mut self, u: &StepUsage<'_>, now_ms: u64) {
        if self.calls.contains_key(&u.step.0) {
            return;
        }
        let day = u
            .day
            .unwrap_or_else(|| u32::try_from(now_ms / DAY_MS).unwrap_or(u32::MAX));
        self.calls.insert(u.step.0, StepCalls::of(u, day));
        for (model, add) in by_model(u.calls) {
            let key = (
                u.thread.to_string(),
                day,
                u.role.to_string(),
                model.to_string(),
            );
            self.totals
                .entry(key)
                .or_insert((u.workflow, UsageTotals::default()))
                .1
                .add(&add);
        }
        let t = self
            .days
            .entry((u.workflow_name.to_string(), day))
            .or_default();
        u.calls.iter().for_each(|c| t.add_call(c));
    }

    /// The steps per minute from minute `from` on, in key order.
    pub(super) fn minutes(&self, from: u32) -> Vec<MinuteRow> {
        self.minutes
            .range((from, String::new())..)
            .map(|((minute, workflow), counts)| MinuteRow {
                minute: *minute,
                workflow: workflow.clone(),
                counts: *counts,
            })
            .collect()
    }

    /// Adds `rows` to the steps per minute; drops the minutes before `prune_before`.
    pub(super) fn add_minutes(&mut self, rows: &[MinuteRow], prune_before: Option<u32>) {
        for r in rows {
            self.minutes
                .entry((r.minute, r.workflow.clone()))
                .or_default()
                .add(&r.counts);
        }
        if let Some(before) = prune_before {
            self.minutes = self.minutes.split_off(&(before, String::new()));
        }
    }
}
