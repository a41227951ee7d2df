//! The answer of `uwf limits list`: each workflow's limits and budgets kept in the store, by
//! name; the runner's dashboard shows the same entry for each workflow.

use super::error::CliResult;
use crate::store::{Budget, Store, WorkflowLimits};
use serde::Serialize;

/// One workflow's limits and budgets (the budgets only where set).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LimitsOut {
    pub workflow: String,
    pub concurrency: Option<u32>,
    pub overflow: &'static str,
    pub max_queue: Option<u32>,
    pub max_retries: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_per_thread: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_thread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_per_day: Option<f64>,
}

impl LimitsOut {
    /// The entry of `workflow` with limits `l` and budget `b` (each when set).
    pub(crate) fn of(workflow: &str, l: Option<&WorkflowLimits>, b: Option<&Budget>) -> LimitsOut {
        let l = l.copied().unwrap_or(NO_LIMITS);
        let b = b.copied().unwrap_or_default();
        LimitsOut {
            workflow: workflow.to_string(),
            concurrency: (l.concurrency > 0).then_some(l.concurrency),
            overflow: if l.drop { "drop" } else { "queue" },
            max_queue: l.max_queue,
            max_retries: l.max_retries,
            max_cost_per_thread: b.max_cost_per_thread,
            max_tokens_per_thread: b.max_tokens_per_thread,
            max_cost_per_day: b.max_cost_per_day,
        }
    }
}

/// A workflow without limits of its own.
pub(crate) const NO_LIMITS: WorkflowLimits = WorkflowLimits {
    concurrency: 0,
    drop: false,
    max_queue: None,
    max_retries: None,
};

/// `uwf limits list`: every name with limits or budgets in the store (`*` for the defaults),
/// in name order.
///
/// # Errors
/// Store failures.
pub(crate) fn list(s: &Store) -> CliResult<Vec<LimitsOut>> {
    let limits = s.workflow_limits()?;
    let budgets = s.budgets()?;
    let mut names: Vec<&str> = limits
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(budgets.iter().map(|(n, _)| n.as_str()))
        .collect();
    names.sort_unstable();
    names.dedup();
    Ok(names
        .iter()
        .map(|n| {
            let l = limits.iter().find(|(k, _)| k == n).map(|(_, l)| l);
            let b = budgets.iter().find(|(k, _)| k == n).map(|(_, b)| b);
            LimitsOut::of(n, l, b)
        })
        .collect())
}
