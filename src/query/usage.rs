//! The answer of `uwf usage`: model usage added up from the store's aggregate (never from the
//! steps), for the whole store, one thread or one workflow, since a day, grouped on request.

use super::error::CliResult;
use crate::cas::NodeId;
use crate::store::{DAY_MS, Store, UsageRow, UsageTotals};
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
    let rows = s.usage_rows(sel.thread.as_deref())?;
    let workflows = match &sel.workflow {
        Some(w) => Some(workflow_ids(s, w, cwd)?),
        None => None,
    };
    let from_day = sel.since_ms.map(|ms| ms / DAY_MS);
    let names = match sel.by {
        Some(By::Workflow) => s.registry()?,
        _ => Vec::new(),
    };
    let mut all = UsageTotals::default();
    let mut groups: BTreeMap<String, UsageTotals> = BTreeMap::new();
    for r in rows.iter().filter(|r| {
        from_day.is_none_or(|d| u64::from(r.day) >= d)
            && workflows
                .as_ref()
                .is_none_or(|ws| r.workflow.is_some_and(|w| ws.contains(&w)))
    }) {
        all.add(&r.totals);
        if let Some(by) = sel.by {
            groups
                .entry(group_key(by, r, &names))
                .or_default()
                .add(&r.totals);
        }
    }
    Ok(Usage {
        totals: Totals::from(&all),
        by: sel.by.map(|by| {
            groups
                .iter()
                .map(|(k, t)| Group {
                    key: BTreeMap::from([(by.key(), shown_key(by, k))]),
                    totals: Totals::from(t),
                })
                .collect()
        }),
    })
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

/// A group's key as printed: a day's date (`YYYY-MM-DD`), the others as they are.
fn shown_key(by: By, k: &str) -> String {
    match (by, k.parse::<u64>()) {
        (By::Day, Ok(day)) => crate::time::format_iso(day * DAY_MS)[..10].to_string(),
        _ => k.to_string(),
    }
}

fn group_key(by: By, r: &UsageRow, names: &[(String, NodeId)]) -> String {
    match by {
        By::Thread => r.thread.clone(),
        By::Role => r.role.clone(),
        By::Model => r.model.clone(),
        // The day's number, in order; its date only once a group (see `shown_key`).
        By::Day => format!("{:010}", r.day),
        By::Workflow => match r.workflow {
            Some(w) => names
                .iter()
                .find(|(_, id)| *id == w)
                .map_or_else(|| w.to_string(), |(n, _)| n.clone()),
            None => "(unknown)".into(),
        },
    }
}
