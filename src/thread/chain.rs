//! Reading a thread from the store: the chain of StepNodes back to the StartNode, the workflow,
//! and the moderator's history.

use super::{Result, ThreadError};
use crate::cas::value::Map;
use crate::cas::{NodeId, Value};
use crate::store::{Snapshot, Store, StoreError};
use crate::workflow::nodes::{START_NODE, STEP_NODE, StartNode, StepNode, is_workflow_type};
use crate::workflow::{History, StepView, StoredWorkflow};
use std::collections::{HashMap, HashSet};

/// One StepNode of a chain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepRecord {
    /// Its id.
    pub id: NodeId,
    /// The step, typed.
    pub node: StepNode,
    /// Its payload as stored, for printing fields the way the TypeScript tool prints them;
    /// `None` in a chain a runner keeps between steps (the engine reads `node`), whose memory
    /// it would double.
    pub payload: Option<Value>,
    /// When it was first stored, ms since the epoch.
    pub timestamp: u64,
}

/// A thread's nodes from the StartNode to a head.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chain {
    /// The StartNode's id.
    pub start_id: NodeId,
    /// The StartNode, typed.
    pub start_node: StartNode,
    /// The StartNode's payload as stored (the moderator's `start`).
    pub start: Value,
    /// When the StartNode was first stored.
    pub start_timestamp: u64,
    /// The steps, oldest first.
    pub steps: Vec<StepRecord>,
}

impl Chain {
    /// The head: the last step, or the StartNode.
    pub(crate) fn head(&self) -> NodeId {
        self.steps.last().map_or(self.start_id, |s| s.id)
    }

    /// The workflow id of the StartNode.
    ///
    /// # Errors
    /// [`ThreadError::Chain`] when the StartNode has none.
    pub(crate) fn workflow_id(&self) -> Result<NodeId> {
        self.start_node.workflow.ok_or_else(|| ThreadError::Chain {
            node: self.start_id.to_wire(),
            problem: "the StartNode has no workflow id".into(),
        })
    }

    /// The StartNode's `cwd` ("" when absent).
    pub(crate) fn cwd(&self) -> &str {
        &self.start_node.cwd
    }

    /// The StartNode's `prompt` ("" when absent).
    pub(crate) fn prompt(&self) -> &str {
        &self.start_node.prompt
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
pub(crate) fn load_chain(store: &Store, head: NodeId) -> Result<Chain> {
    chain_in(&store.snapshot()?, head)
}

/// [`load_chain`] in a snapshot.
pub(crate) fn chain_in(snap: &Snapshot, head: NodeId) -> Result<Chain> {
    let mut steps = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = head;
    let mut start_of_head: Option<NodeId> = None;
    snap.read_chain_ahead(head, STEP_NODE)?;
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
        if node.type_id == START_NODE {
            if let Some(s) = start_of_head
                && s != cur
            {
                return Err(broken(cur, format!("steps name StartNode {s}")));
            }
            steps.reverse();
            return Ok(Chain {
                start_id: cur,
                start_node: StartNode::from_value(&payload),
                start: payload,
                start_timestamp: node.timestamp,
                steps,
            });
        }
        if node.type_id != STEP_NODE {
            return Err(broken(
                cur,
                format!(
                    "type {} is neither a StartNode nor a StepNode",
                    node.type_id
                ),
            ));
        }
        let step = StepNode::from_value(&payload).map_err(|e| broken(cur, e.to_string()))?;
        let s = step.start;
        match start_of_head {
            None => start_of_head = Some(s),
            Some(x) if x != s => {
                return Err(broken(cur, format!("the step belongs to StartNode {s}")));
            }
            Some(_) => {}
        }
        let prev = step.prev;
        steps.push(StepRecord {
            id: cur,
            node: step,
            payload: Some(payload),
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
pub(crate) fn load_workflow(snap: &Snapshot, id: NodeId) -> Result<StoredWorkflow> {
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

/// The payload of the output node `id` names (`{}` when there is none or it is not stored): a
/// step's output as the moderator sees it.
pub(crate) fn expand_output(snap: &Snapshot, id: Option<NodeId>) -> Result<Value> {
    match id {
        Some(n) => Ok(payload_of(snap, n)?.unwrap_or_else(|| Value::Object(Map::default()))),
        None => Ok(Value::Object(Map::default())),
    }
}

/// The workflow of a thread whose head is `head`: a StartNode names it, a StepNode names its
/// StartNode. `None` when a node on the way is missing, of another type, or names none.
///
/// # Errors
/// A store failure.
pub(crate) fn workflow_of(snap: &Snapshot, head: NodeId) -> Result<Option<NodeId>, StoreError> {
    let Some(n) = snap.get(head)? else {
        return Ok(None);
    };
    let start = if n.type_id == STEP_NODE {
        match StepNode::from_value(&n.payload()?) {
            Ok(s) => s.start,
            Err(_) => return Ok(None),
        }
    } else {
        head
    };
    let Some(s) = snap.get(start)? else {
        return Ok(None);
    };
    if s.type_id != START_NODE {
        return Ok(None);
    }
    Ok(StartNode::from_value(&s.payload()?).workflow)
}

/// The moderator's history of `chain`: the StartNode payload and each step with its output
/// expanded.
///
/// # Errors
/// A store failure.
pub(crate) fn load_history(store: &Store, chain: &Chain) -> Result<History> {
    history_in(&store.snapshot()?, chain)
}

/// [`load_history`] in a snapshot.
pub(crate) fn history_in(snap: &Snapshot, chain: &Chain) -> Result<History> {
    snap.read_ahead(chain.steps.iter().filter_map(|s| s.node.output))?;
    let mut steps = Vec::with_capacity(chain.steps.len());
    for s in &chain.steps {
        steps.push(StepView {
            role: s.node.role.clone(),
            output: expand_output(snap, s.node.output)?,
            detail: s.node.detail.map(NodeId::to_wire).unwrap_or_default(),
            agent: s.node.agent.clone(),
        });
    }
    Ok(History {
        start: chain.start.clone(),
        steps,
    })
}

/// A thread at a head as the moderator sees it: its chain, its workflow and the history.
#[derive(Clone)]
pub(crate) struct Moderated {
    /// The chain from the StartNode to the head.
    pub(crate) chain: Chain,
    /// The StartNode's workflow id.
    pub(crate) wf_id: NodeId,
    /// That workflow.
    pub(crate) wf: StoredWorkflow,
    /// The moderator's history of the chain.
    pub(crate) history: History,
    /// Whether `chain.steps` and `history.steps` hold only the last step (what the moderator
    /// of a status-map workflow reads); [`Moderated::complete`] loads the others.
    pub(crate) partial: bool,
}

impl Moderated {
    /// Loads every step, when only the last one was read.
    ///
    /// # Errors
    /// As [`load_chain`].
    pub(crate) fn complete(&mut self, store: &Store) -> Result<()> {
        if !self.partial {
            return Ok(());
        }
        let snap = store.snapshot()?;
        self.chain = chain_in(&snap, self.chain.head())?;
        self.history = history_in(&snap, &self.chain)?;
        self.partial = false;
        Ok(())
    }
}

/// Reads the thread ending at `head` for the moderator, in one snapshot. The moderator of a
/// status-map workflow reads only the last step's role and output, so for one only the head,
/// the StartNode and the workflow are read, whatever the thread's length (`partial`); a
/// workflow with transitions gets every step.
///
/// # Errors
/// As [`load_chain`] and [`load_workflow`].
pub(crate) fn load_moderated(store: &Store, head: NodeId) -> Result<Moderated> {
    let snap = store.snapshot()?;
    let tip = chain_tip(&snap, head)?;
    let wf_id = tip.workflow_id()?;
    let wf = load_workflow(&snap, wf_id)?;
    let partial = matches!(wf.graph, crate::workflow::Graph::StatusMap(_));
    let chain = if partial { tip } else { chain_in(&snap, head)? };
    let history = history_in(&snap, &chain)?;
    Ok(Moderated {
        chain,
        wf_id,
        wf,
        history,
        partial,
    })
}

/// The chain at `head` with only its last step: the head's StepNode and the StartNode it
/// names (checked as [`chain_in`] checks them).
fn chain_tip(snap: &Snapshot, head: NodeId) -> Result<Chain> {
    let Some(node) = snap.get(head)? else {
        return Err(ThreadError::NodeNotFound(head.to_wire()));
    };
    if node.type_id != STEP_NODE {
        return chain_in(snap, head);
    }
    let payload = node.payload()?;
    let step = StepNode::from_value(&payload).map_err(|e| broken(head, e.to_string()))?;
    let last = StepRecord {
        id: head,
        node: step,
        payload: Some(payload),
        timestamp: node.timestamp,
    };
    let start = last.node.start;
    let Some(s) = snap.get(start)? else {
        return Err(broken(start, "the node is missing from the store"));
    };
    if s.type_id != START_NODE {
        return Err(broken(start, "the step's start is not a StartNode"));
    }
    let payload = s.payload()?;
    Ok(Chain {
        start_id: start,
        start_node: StartNode::from_value(&payload),
        start: payload,
        start_timestamp: s.timestamp,
        steps: vec![last],
    })
}

/// The names of the workflows of threads, each workflow node read once.
#[derive(Default)]
pub(crate) struct WorkflowNames(HashMap<NodeId, String>);

impl WorkflowNames {
    /// The name of the workflow of the thread at `rec` in `snap`: its record's workflow, else
    /// the one its StartNode names; `None` when neither names one, an empty name when that
    /// workflow cannot be read.
    pub(crate) fn of(
        &mut self,
        snap: &Snapshot,
        rec: &crate::store::ThreadRecord,
    ) -> Option<String> {
        let wf = match rec.workflow {
            Some(wf) => wf,
            None => workflow_of(snap, rec.head).ok()??,
        };
        let name = self
            .0
            .entry(wf)
            .or_insert_with(|| load_workflow(snap, wf).map(|w| w.name).unwrap_or_default());
        Some(name.clone())
    }
}
