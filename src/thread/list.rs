//! `thread list`: the active threads and, when asked, the finished ones, filtered and newest
//! first, each with its workflow and the role that runs next.

use super::Result;
use super::chain::{chain_in, load_workflow};
use super::id::{ThreadId, time_of};
use super::ops::{Status, current_role_cached, phase_status};
use crate::cas::{NodeId, Value};
use crate::store::{HistoryEntry, Snapshot, Store};
use crate::workflow::nodes::START_NODE;
use crate::workflow::{self, Jsonata};
use std::collections::HashMap;

/// Filters and paging of `thread list`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListFilter {
    /// Statuses to keep; `None` keeps active threads (and finished ones with `all`).
    pub statuses: Option<Vec<Status>>,
    /// Include finished threads when no status filter is given.
    pub all: bool,
    /// Keep threads whose id time is strictly after this (ms).
    pub after: Option<u64>,
    /// Keep threads whose id time is strictly before this (ms).
    pub before: Option<u64>,
    /// Rows to skip.
    pub skip: usize,
    /// Rows to keep at most.
    pub take: Option<usize>,
    /// Active threads that a background run holds (running markers), shown as running even
    /// between two steps, when no lease is held.
    pub background: std::collections::HashSet<ThreadId>,
}

/// One thread of `thread list`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Listed {
    /// The thread id.
    pub thread: String,
    /// The workflow id (`None` when the chain does not say).
    pub workflow: Option<String>,
    /// The head node id.
    pub head: String,
    /// The lifecycle state.
    pub status: Status,
    /// The role that runs next (active threads only).
    pub current_role: Option<String>,
}

struct Row {
    thread: String,
    workflow: Option<String>,
    head: NodeId,
    head_text: String,
    status: Status,
    time: Option<u64>,
}

/// `thread list`: the threads `f` keeps, newest first.
///
/// # Errors
/// Store failures.
pub(crate) fn list(store: &Store, f: &ListFilter) -> Result<Vec<Listed>> {
    let wants = |s: Status| f.statuses.as_ref().is_none_or(|v| v.contains(&s));
    let mut rows = rows(store, f)?;
    rows.retain(|r| wants(r.status));
    if f.after.is_some() || f.before.is_some() {
        rows.retain(|r| {
            r.time
                .is_some_and(|t| f.after.is_none_or(|a| t > a) && f.before.is_none_or(|b| t < b))
        });
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.time.unwrap_or(0)));
    let take = f.take.unwrap_or(usize::MAX);
    listed(store, rows.into_iter().skip(f.skip).take(take))
}

/// The active threads, and the finished ones when `f` asks for them (each thread's latest
/// history entry), unfiltered.
fn rows(store: &Store, f: &ListFilter) -> Result<Vec<Row>> {
    let with_finished = match &f.statuses {
        Some(v) => v.iter().any(|s| !s.is_active()),
        None => f.all,
    };
    let leases: HashMap<ThreadId, bool> = store
        .leases()?
        .into_iter()
        .map(|(t, l)| (t, l.is_live()))
        .collect();
    let phases: HashMap<ThreadId, crate::store::Phase> = store
        .thread_states()?
        .into_iter()
        .map(|(t, s)| (t, s.phase))
        .collect();
    let mut rows = Vec::new();
    let active = store.threads()?;
    let active_ids: std::collections::HashSet<String> =
        active.iter().map(|(t, _)| t.to_string()).collect();
    for (t, r) in active {
        let status = if leases.get(&t).copied().unwrap_or(false) || f.background.contains(&t) {
            Status::Running
        } else {
            phase_status(phases.get(&t).copied().unwrap_or_default())
        };
        rows.push(Row {
            time: time_of(t.as_str()),
            workflow: r.workflow.map(|w| w.to_wire()),
            head_text: r.head.to_wire(),
            head: r.head,
            thread: t.to_string(),
            status,
        });
    }
    if with_finished {
        let mut last: indexmap::IndexMap<String, HistoryEntry> = indexmap::IndexMap::new();
        store.for_each_history(|h| -> Result<()> {
            if !active_ids.contains(&h.thread) {
                last.insert(h.thread.clone(), h);
            }
            Ok(())
        })?;
        for (t, h) in last {
            rows.push(Row {
                time: time_of(&t),
                head: h.head.id().unwrap_or(NodeId(0)),
                workflow: Some(h.workflow.into_text()),
                head_text: h.head.into_text(),
                status: h.reason.status(),
                thread: t,
            });
        }
    }
    Ok(rows)
}

/// The `rows` as listed, with the workflow and the role that runs next of active threads.
fn listed(store: &Store, rows: impl Iterator<Item = Row>) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    let mut workflows = HashMap::new();
    let evaluator = Jsonata::default();
    let snap = store.snapshot()?;
    // The role of a thread still at its StartNode, by workflow: under a status-map graph it
    // depends on the graph alone (no step, no condition), so it is decided once per workflow.
    let mut at_start: HashMap<NodeId, Option<String>> = HashMap::new();
    for r in rows {
        let active = r.status.is_active();
        if active
            && let Some(wf) = r.workflow.as_deref().and_then(|w| NodeId::parse(w).ok())
            && snap.type_of(r.head).ok().flatten() == Some(START_NODE)
            && let Some(role) = at_start
                .entry(wf)
                .or_insert_with(|| role_at_start(&snap, wf, &evaluator))
        {
            out.push(Listed {
                thread: r.thread,
                workflow: r.workflow,
                head: r.head_text,
                status: r.status,
                current_role: Some(role.clone()),
            });
            continue;
        }
        let chain = if active {
            chain_in(&snap, r.head).ok()
        } else {
            None
        };
        let workflow = r.workflow.or_else(|| {
            chain
                .as_ref()
                .and_then(|c| c.workflow_id().ok())
                .map(|w| w.to_wire())
        });
        let current_role = chain
            .as_ref()
            .and_then(|c| current_role_cached(&snap, c, &mut workflows, &evaluator));
        out.push(Listed {
            thread: r.thread,
            workflow,
            head: r.head_text,
            status: r.status,
            current_role,
        });
    }
    Ok(out)
}

/// The role a thread at its StartNode runs first, when its workflow's graph is a status map
/// (which decides from the graph alone); `None` otherwise, or when there is none.
fn role_at_start(snap: &Snapshot, wf: NodeId, evaluator: &Jsonata) -> Option<String> {
    let wf = load_workflow(snap, wf).ok()?;
    if !matches!(wf.graph, workflow::Graph::StatusMap(_)) {
        return None;
    }
    let history = workflow::History {
        start: Value::Null,
        steps: Vec::new(),
    };
    let d = workflow::next(&wf, &history, evaluator).ok()?;
    (!d.is_end()).then_some(d.role)
}
