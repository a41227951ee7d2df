//! The answers about threads: "thread show", "thread list", "thread steps".

use super::error::CliResult;
use super::output::NodeIdStr;
use super::running::live_marker;
use crate::cas::{NodeId, Value};
use crate::store::Store;
use crate::thread::{self, Listed, Status, StepOutput, Steps, ThreadId};
use serde::Serialize;
use std::path::Path;

/// The state `thread show` prints ([`State::from`] makes the output of it).
///
/// # Errors
/// An unknown thread, a broken chain, store failures.
pub(crate) fn shown(root: &Path, s: &Store, t: &ThreadId) -> CliResult<StepOutput> {
    let mut out = thread::show(s, t)?;
    // Between two steps a background run holds no lease; its marker still says running.
    if out.status == Status::Idle && live_marker(root, t).is_some() {
        out.status = Status::Running;
    }
    Ok(out)
}

/// The output of `thread list` for the threads `thread::list` gave.
pub(crate) fn list_rows(rows: &[Listed]) -> Vec<ListRow<'_>> {
    rows.iter().map(ListRow::from).collect()
}

/// A thread's state: `thread show`, each step of `thread step`, `thread exec --background`
/// (`background` is true there, null elsewhere).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct State<'a> {
    pub workflow: &'a str,
    pub thread: &'a str,
    pub head: &'a str,
    pub status: &'static str,
    pub current_role: Option<&'a str>,
    pub done: bool,
    pub background: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError<'a>>,
    /// The process running a step now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<Running>,
    /// Why the thread was paused, when not by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_for: Option<&'static str>,
}

/// `running`: the process that holds the thread's step lease.
#[derive(Serialize)]
pub(crate) struct Running {
    pid: u32,
    since: u64,
}

/// The last failed step of a thread (only when it has one).
#[derive(Serialize)]
pub(crate) struct LastError<'a> {
    time: u64,
    agent: &'a str,
    message: &'a str,
}

impl<'a> From<&'a StepOutput> for State<'a> {
    fn from(o: &'a StepOutput) -> Self {
        State {
            workflow: &o.workflow,
            thread: o.thread.as_str(),
            head: &o.head,
            status: o.status.as_str(),
            current_role: o.current_role.as_deref(),
            done: o.done,
            background: None,
            last_error: o.last_error.as_ref().map(|e| LastError {
                time: e.time_ms,
                agent: &e.agent,
                message: &e.message,
            }),
            running: o.running.map(|(pid, since)| Running { pid, since }),
            paused_for: o.paused_for,
        }
    }
}

/// One row of `thread list`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListRow<'a> {
    thread: &'a str,
    workflow: Option<&'a str>,
    head: &'a str,
    status: &'static str,
    current_role: Option<&'a str>,
}

impl<'a> From<&'a Listed> for ListRow<'a> {
    fn from(l: &'a Listed) -> Self {
        ListRow {
            thread: &l.thread,
            workflow: l.workflow.as_deref(),
            head: &l.head,
            status: l.status.as_str(),
            current_role: l.current_role.as_deref(),
        }
    }
}

/// `thread steps`: the start, then the steps.
#[derive(Serialize)]
pub(crate) struct StepsOut<'a> {
    thread: &'a str,
    workflow: NodeIdStr,
    steps: Vec<StepsRow<'a>>,
}

/// A row of [`StepsOut`].
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum StepsRow<'a> {
    /// The StartNode.
    Start {
        hash: NodeIdStr,
        workflow: NodeIdStr,
        prompt: &'a str,
        timestamp: u64,
    },
    /// A StepNode; `detail` is `""` when it has none.
    #[serde(rename_all = "camelCase")]
    Step {
        hash: NodeIdStr,
        role: &'a str,
        output: &'a Value,
        detail: String,
        agent: &'a str,
        timestamp: u64,
        duration_ms: Option<f64>,
    },
}

impl<'a> StepsOut<'a> {
    /// The output of `thread steps` for `thread`.
    pub(crate) fn new(thread: &'a str, s: &'a Steps) -> Self {
        let start = StepsRow::Start {
            hash: NodeIdStr(s.start),
            workflow: NodeIdStr(s.workflow),
            prompt: &s.prompt,
            timestamp: s.start_timestamp,
        };
        let steps = s.steps.iter().map(|st| StepsRow::Step {
            hash: NodeIdStr(st.id),
            role: &st.role,
            output: &st.output,
            detail: st.detail.map(NodeId::to_wire).unwrap_or_default(),
            agent: &st.agent,
            timestamp: st.timestamp,
            duration_ms: st.duration_ms,
        });
        StepsOut {
            thread,
            workflow: NodeIdStr(s.workflow),
            steps: std::iter::once(start).chain(steps).collect(),
        }
    }
}
