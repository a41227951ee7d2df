//! Reading a thread from the store: the chain of StepNodes back to the StartNode, the workflow,
//! and the moderator's history.

use super::{Result, ThreadError};
use crate::cas::bootstrap::ids;
use crate::cas::value::Map;
use crate::cas::{NodeId, Value};
use crate::store::{Snapshot, Store};
use crate::workflow::materialize::is_workflow_type;
use crate::workflow::{History, StepView, StoredWorkflow};
use std::collections::HashSet;

/// The StartNode type id.
pub(crate) fn start_type() -> NodeId {
    NodeId::parse(ids::START_NODE).expect("a valid id")
}

/// The StepNode type id.
pub(crate) fn step_type() -> NodeId {
    NodeId::parse(ids::STEP_NODE).expect("a valid id")
}

/// The text type id.
pub(crate) fn text_type() -> NodeId {
    NodeId::parse(ids::TEXT).expect("a valid id")
}

/// One StepNode of a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// Its id.
    pub id: NodeId,
    /// Its payload.
    pub payload: Value,
    /// When it was first stored, ms since the epoch.
    pub timestamp: u64,
}

impl StepRecord {
    /// A string field of the payload ("" when absent).
    pub fn field(&self, key: &str) -> &str {
        self.payload.get(key).and_then(Value::as_str).unwrap_or("")
    }

    /// An integer field of the payload.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.payload
            .get(key)
            .and_then(Value::as_f64)
            .filter(|n| *n >= 0.0)
            .map(|n| n as u64)
    }
}

/// A thread's nodes from the StartNode to a head.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// The StartNode's id.
    pub start_id: NodeId,
    /// The StartNode's payload (`{workflow, prompt, cwd}`).
    pub start: Value,
    /// When the StartNode was first stored.
    pub start_timestamp: u64,
    /// The steps, oldest first.
    pub steps: Vec<StepRecord>,
}

impl Chain {
    /// The head: the last step, or the StartNode.
    pub fn head(&self) -> NodeId {
        self.steps.last().map_or(self.start_id, |s| s.id)
    }

    /// The workflow id of the StartNode.
    ///
    /// # Errors
    /// [`ThreadError::Chain`] when the StartNode has none.
    pub fn workflow_id(&self) -> Result<NodeId> {
        self.start
            .get("workflow")
            .and_then(Value::as_str)
            .and_then(NodeId::parse_strict)
            .ok_or_else(|| ThreadError::Chain {
                node: self.start_id.to_wire(),
                problem: "the StartNode has no workflow id".into(),
            })
    }

    /// The StartNode's `cwd` ("" when absent).
    pub fn cwd(&self) -> &str {
        self.start.get("cwd").and_then(Value::as_str).unwrap_or("")
    }

    /// The StartNode's `prompt` ("" when absent).
    pub fn prompt(&self) -> &str {
        self.start
            .get("prompt")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

fn broken(node: NodeId, problem: impl Into<String>) -> ThreadError {
    ThreadError::Chain {
        node: node.to_wire(),
        problem: problem.into(),
    }
}

/// Reads the chain ending at `head` (a StartNode or a StepNode).
///
/// # Errors
/// [`ThreadError::NodeNotFound`] for a missing head, [`ThreadError::Chain`] for a missing or
/// mistyped node further back, a cycle, or steps of another thread.
pub fn load_chain(store: &Store, head: NodeId) -> Result<Chain> {
    chain_in(&store.snapshot()?, head)
}

/// [`load_chain`] in a snapshot.
pub(crate) fn chain_in(snap: &Snapshot, head: NodeId) -> Result<Chain> {
    let (start, step) = (start_type(), step_type());
    let mut steps = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = head;
    let mut start_of_head: Option<NodeId> = None;
    loop {
        if !seen.insert(cur) {
            return Err(broken(cur, "the prev links form a cycle"));
        }
        let Some(node) = snap.get(cur)? else {
            if cur == head {
                return Err(ThreadError::NodeNotFound(cur.to_wire()));
            }
            return Err(broken(cur, "the node is missing from the store"));
        };
        let payload = node.payload()?;
        if node.type_id == start {
            if let Some(s) = start_of_head
                && s != cur
            {
                return Err(broken(cur, format!("steps name StartNode {s}")));
            }
            steps.reverse();
            return Ok(Chain {
                start_id: cur,
                start: payload,
                start_timestamp: node.timestamp,
                steps,
            });
        }
        if node.type_id != step {
            return Err(broken(
                cur,
                format!(
                    "type {} is neither a StartNode nor a StepNode",
                    node.type_id
                ),
            ));
        }
        let s = payload
            .get("start")
            .and_then(Value::as_str)
            .and_then(NodeId::parse_strict)
            .ok_or_else(|| broken(cur, "the StepNode has no start"))?;
        match start_of_head {
            None => start_of_head = Some(s),
            Some(x) if x != s => {
                return Err(broken(cur, format!("the step belongs to StartNode {s}")));
            }
            Some(_) => {}
        }
        let prev = match payload.get("prev") {
            Some(Value::String(p)) => {
                Some(NodeId::parse_strict(p).ok_or_else(|| broken(cur, "bad prev id"))?)
            }
            _ => None,
        };
        steps.push(StepRecord {
            id: cur,
            payload,
            timestamp: node.timestamp,
        });
        cur = prev.unwrap_or(s);
    }
}

/// Reads the Workflow node `id`.
///
/// # Errors
/// [`ThreadError::NodeNotFound`], [`ThreadError::NotWorkflow`], or a payload that is not a
/// workflow.
pub fn load_workflow(snap: &Snapshot, id: NodeId) -> Result<StoredWorkflow> {
    let node = snap
        .get(id)?
        .ok_or_else(|| ThreadError::NodeNotFound(id.to_wire()))?;
    if !is_workflow_type(node.type_id) {
        return Err(ThreadError::NotWorkflow {
            id,
            type_id: node.type_id,
        });
    }
    Ok(StoredWorkflow::from_payload(&node.payload()?)?)
}

/// The payload of node `id`, or `None` when it is not stored.
pub(crate) fn payload_of(snap: &Snapshot, id: NodeId) -> Result<Option<Value>> {
    match snap.get(id)? {
        Some(n) => Ok(Some(n.payload()?)),
        None => Ok(None),
    }
}

/// The payload a string id names (`{}` when it is not an id or not stored): a step's output as
/// the moderator sees it.
pub(crate) fn expand_output(snap: &Snapshot, id: &str) -> Result<Value> {
    match NodeId::parse_strict(id) {
        Some(n) => Ok(payload_of(snap, n)?.unwrap_or_else(|| Value::Object(Map::new()))),
        None => Ok(Value::Object(Map::new())),
    }
}

/// The moderator's history of `chain`: the StartNode payload and each step with its output
/// expanded.
///
/// # Errors
/// A store failure.
pub fn load_history(store: &Store, chain: &Chain) -> Result<History> {
    history_in(&store.snapshot()?, chain)
}

/// [`load_history`] in a snapshot.
pub(crate) fn history_in(snap: &Snapshot, chain: &Chain) -> Result<History> {
    let mut steps = Vec::with_capacity(chain.steps.len());
    for s in &chain.steps {
        steps.push(StepView {
            role: s.field("role").to_string(),
            output: expand_output(snap, s.field("output"))?,
            detail: s.field("detail").to_string(),
            agent: s.field("agent").to_string(),
        });
    }
    Ok(History {
        start: chain.start.clone(),
        steps,
    })
}

/// A thread at a head as the moderator sees it: its chain, its workflow and the history.
pub(crate) struct Moderated {
    /// The chain from the StartNode to the head.
    pub(crate) chain: Chain,
    /// The StartNode's workflow id.
    pub(crate) wf_id: NodeId,
    /// That workflow.
    pub(crate) wf: StoredWorkflow,
    /// The moderator's history of the chain.
    pub(crate) history: History,
}

/// Reads the thread ending at `head` for the moderator, in one snapshot.
///
/// # Errors
/// As [`load_chain`] and [`load_workflow`].
pub(crate) fn load_moderated(store: &Store, head: NodeId) -> Result<Moderated> {
    let snap = store.snapshot()?;
    let chain = chain_in(&snap, head)?;
    let wf_id = chain.workflow_id()?;
    let wf = load_workflow(&snap, wf_id)?;
    let history = history_in(&snap, &chain)?;
    Ok(Moderated {
        chain,
        wf_id,
        wf,
        history,
    })
}
