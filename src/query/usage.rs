//! The answer of `uwf usage`: model usage added up from the store's aggregate (never from the
//! steps), for the whole store, one thread or one workflow, since a day, grouped on request.

use super::error::CliResult;
use crate::cas::NodeId;
use crate::store::{DAY_MS, GroupKey, Store, UsageGroup, UsageQuery, UsageTotals};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// What `--by` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum By {
    /// Each thread.
    Thread,
    /// Each workflow (its registered name where it has one, else its id).
    Workflow,
    /// Each role.
    Role,
    /// Each model (the name under `models:`, or what a CLI reported).
    Model,
    /// Each UTC day.
    Day,
}

impl By {
    fn group(self) -> UsageGroup {
        match self {
            By::Thread => UsageGroup::Thread,
            By::Workflow => UsageGroup::Workflow,
            By::Role => UsageGroup::Role,
            By::Model => UsageGroup::Model,
            By::Day => UsageGroup::Day,
        }
    }

    fn key(self) -> &'static str {
        match self {
            By::Thread => "thread",
            By::Workflow => "workflow",
            By::Role => "role",
            By::Model => "model",
            By::Day => "day",
        }
    }
}

/// Which usage to add up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    /// One thread's.
    pub thread: Option<String>,
    /// A workflow's, by registered name (every version of it) or node id.
    pub workflow: Option<String>,
    /// From this time on (ms since the epoch; whole UTC days).
    pub since_ms: Option<u64>,
    /// Grouped.
    pub by: Option<By>,
}

/// Totals as `uwf usage` prints them. `costUsd` adds up the costs that are known (reported by
/// the provider or priced in `config.yaml`); null when none is.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Totals {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub cost_usd: Option<f64>,
}

impl From<&UsageTotals> for Totals {
    fn from(t: &UsageTotals) -> Totals {
        Totals {
            calls: t.calls,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cached_input_tokens: t.cached_input_tokens,
            cost_usd: t.cost(),
        }
    }
}

/// One group of `--by`: its key under the group's name, then its totals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Group {
    #[serde(flatten)]
    pub key: BTreeMap<&'static str, String>,
    #[serde(flatten)]
    pub totals: Totals,
}

/// `uwf usage`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Usage {
    #[serde(flatten)]
    pub totals: Totals,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<Vec<Group>>,
}

/// The usage `sel` selects (a workflow file resolved from `cwd`).
///
/// # Errors
/// A workflow that names nothing known, store failures.
pub(crate) fn usage(s: &Store, sel: &Selection, cwd: &Path) -> CliResult<Usage> {
    let workflows = match &sel.workflow {
        Some(w) => Some(workflow_ids(s, w, cwd)?),
        None => None,
    };
    let q = UsageQuery {
        thread: sel.thread.as_deref(),
        workflows: workflows.as_deref(),
        from_day: sel
            .since_ms
            .map(|ms| u32::try_from(ms / DAY_MS).unwrap_or(u32::MAX)),
        by: sel.by.map(By::group),
    };
    let sums = s.usage_sums(&q)?;
    let mut all = UsageTotals::default();
    sums.iter().for_each(|(_, t)| all.add(t));
    let by = match sel.by {
        Some(by) => Some(groups(s, by, sums)?),
        None => None,
    };
    Ok(Usage {
        totals: Totals::from(&all),
        by,
    })
}

/// The groups of `--by`, in the order of their printed keys (days in time order).
fn groups(s: &Store, by: By, sums: Vec<(GroupKey, UsageTotals)>) -> CliResult<Vec<Group>> {
    let names = match by {
        By::Workflow => s.registry()?,
        _ => Vec::new(),
    };
    let mut out: BTreeMap<String, (String, UsageTotals)> = BTreeMap::new();
    for (k, t) in sums {
        let (order, shown) = match k {
            GroupKey::All => continue,
            GroupKey::Text(t) => (t.clone(), t),
            GroupKey::Day(d) => (
                format!("{d:010}"),
                crate::time::format_iso(u64::from(d) * DAY_MS)[..10].to_string(),
            ),
            GroupKey::Workflow(w) => {
                let shown = match w {
                    Some(w) => names
                        .iter()
                        .find(|(_, id)| *id == w)
                        .map_or_else(|| w.to_string(), |(n, _)| n.clone()),
                    None => "(unknown)".into(),
                };
                (shown.clone(), shown)
            }
        };
        out.entry(order)
            .or_insert_with(|| (shown, UsageTotals::default()))
            .1
            .add(&t);
    }
    Ok(out
        .into_values()
        .map(|(shown, t)| Group {
            key: BTreeMap::from([(by.key(), shown)]),
            totals: Totals::from(&t),
        })
        .collect())
}

/// The workflow nodes `w` names: every version registered under the name, or the workflow a
/// file or node id names.
fn workflow_ids(s: &Store, w: &str, cwd: &Path) -> CliResult<Vec<NodeId>> {
    let mut ids: Vec<NodeId> = s
        .registry_history(w)?
        .into_iter()
        .map(|e| e.workflow)
        .collect();
    ids.push(super::workflow::workflow_id(s, w, cwd)?);
    Ok(ids)
}
