//! The typed domain nodes: the built-in type ids, the StartNode and StepNode payloads, the
//! "is a Workflow node" rule, and how a thread ends and what state it is in.
//!
//! Every place that writes a StartNode or StepNode builds it here, so the key set (and with it
//! the node id) is the same wherever it is written; readers go through [`StartNode::from_value`]
//! and [`StepNode::from_value`], which are as lenient as the TypeScript tool's readers (a field
//! of the wrong kind reads as absent).

use crate::cas::value::Map;
use crate::cas::{NodeId, Value};

pub use crate::model::types::{START_NODE, STEP_NODE, TEXT, WORKFLOW, WORKFLOW_EXT};

/// Whether a node of type `type_id` is a Workflow: the 7a0c Workflow schema or uwf's
/// WorkflowExt. Import, export, `thread start` and `workflow show` all use this one rule.
pub fn is_workflow_type(type_id: NodeId) -> bool {
    type_id == WORKFLOW || type_id == WORKFLOW_EXT
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn id(v: &Value, key: &str) -> Option<NodeId> {
    v.get(key)
        .and_then(Value::as_str)
        .and_then(NodeId::parse_strict)
}

fn ms(v: &Value, key: &str) -> Option<u64> {
    v.get(key)
        .and_then(Value::as_f64)
        .filter(|n| *n >= 0.0)
        .map(|n| n as u64)
}

/// A thread's first node: `{workflow, prompt, cwd}` (type [`START_NODE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartNode {
    /// The workflow id; `None` when the payload names none (a damaged or foreign node).
    pub workflow: Option<NodeId>,
    /// The task ("" when absent).
    pub prompt: String,
    /// The working directory ("" when absent).
    pub cwd: String,
}

impl StartNode {
    /// The payload as every writer writes it: `{workflow, prompt, cwd}`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::with_capacity_and_hasher(3, Default::default());
        m.insert(
            "workflow".into(),
            self.workflow
                .map_or(Value::Null, |w| Value::str(w.to_wire())),
        );
        m.insert("prompt".into(), Value::str(&self.prompt));
        m.insert("cwd".into(), Value::str(&self.cwd));
        Value::Object(m)
    }

    /// Reads a StartNode payload; missing or mistyped fields read as absent.
    pub fn from_value(v: &Value) -> StartNode {
        StartNode {
            workflow: id(v, "workflow"),
            prompt: text(v, "prompt").unwrap_or_default(),
            cwd: text(v, "cwd").unwrap_or_default(),
        }
    }
}

/// One step of a thread (type [`STEP_NODE`]), with all of 7a0c's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepNode {
    /// The thread's StartNode.
    pub start: NodeId,
    /// The previous step; `None` for the first step (stored as `null`).
    pub prev: Option<NodeId>,
    /// The role that ran.
    pub role: String,
    /// The output node ("" id when absent: the moderator sees `{}`).
    pub output: Option<NodeId>,
    /// The detail node (a text node of the raw output, or an agent's detail).
    pub detail: Option<NodeId>,
    /// The agent that ran the step.
    pub agent: String,
    /// The prompt on the edge that chose the role; written only when non-empty.
    pub edge_prompt: Option<String>,
    /// When the agent started, ms since the epoch.
    pub started_at_ms: Option<u64>,
    /// When the step was written, ms since the epoch.
    pub completed_at_ms: Option<u64>,
    /// The working directory the agent ran in.
    pub cwd: String,
    /// The assembled prompt's node; uwf writes `null`.
    pub assembled_prompt: Option<NodeId>,
}

/// Why a StepNode payload cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StepNodeError {
    /// `start` is missing or not an id.
    #[error("the StepNode has no start")]
    NoStart,
    /// `prev` is a string that is not an id.
    #[error("bad prev id")]
    BadPrev,
}

impl StepNode {
    /// The payload as uwf writes it: `start, prev, role, output, detail, agent,
    /// [edgePrompt], startedAtMs, completedAtMs, cwd, assembledPrompt` (`edgePrompt` only when
    /// present; `prev` and `assembledPrompt` are `null` when absent).
    pub fn to_value(&self) -> Value {
        let ref_or_null = |r: Option<NodeId>| r.map_or(Value::Null, |x| Value::str(x.to_wire()));
        let ref_or_empty =
            |r: Option<NodeId>| Value::str(r.map(NodeId::to_wire).unwrap_or_default());
        let num = |n: Option<u64>| n.map_or(Value::Null, |n| Value::Number(n as f64));
        // Sized once: a map grown field by field reallocates its entries as it goes.
        let mut m = Map::with_capacity_and_hasher(11, Default::default());
        m.insert("start".into(), Value::str(self.start.to_wire()));
        m.insert("prev".into(), ref_or_null(self.prev));
        m.insert("role".into(), Value::str(&self.role));
        m.insert("output".into(), ref_or_empty(self.output));
        m.insert("detail".into(), ref_or_empty(self.detail));
        m.insert("agent".into(), Value::str(&self.agent));
        if let Some(e) = &self.edge_prompt {
            m.insert("edgePrompt".into(), Value::str(e));
        }
        m.insert("startedAtMs".into(), num(self.started_at_ms));
        m.insert("completedAtMs".into(), num(self.completed_at_ms));
        m.insert("cwd".into(), Value::str(&self.cwd));
        m.insert("assembledPrompt".into(), ref_or_null(self.assembled_prompt));
        Value::Object(m)
    }

    /// Reads a StepNode payload: `start` must be an id and `prev` an id or absent; other
    /// fields of the wrong kind read as absent ("" for strings).
    ///
    /// # Errors
    /// [`StepNodeError`] naming the link that cannot be followed.
    pub fn from_value(v: &Value) -> Result<StepNode, StepNodeError> {
        let start = id(v, "start").ok_or(StepNodeError::NoStart)?;
        let prev = match v.get("prev") {
            Some(Value::String(p)) => Some(NodeId::parse_strict(p).ok_or(StepNodeError::BadPrev)?),
            _ => None,
        };
        Ok(StepNode {
            start,
            prev,
            role: text(v, "role").unwrap_or_default(),
            output: id(v, "output"),
            detail: id(v, "detail"),
            agent: text(v, "agent").unwrap_or_default(),
            edge_prompt: text(v, "edgePrompt"),
            started_at_ms: ms(v, "startedAtMs"),
            completed_at_ms: ms(v, "completedAtMs"),
            cwd: text(v, "cwd").unwrap_or_default(),
            assembled_prompt: id(v, "assembledPrompt"),
        })
    }
}

pub use crate::model::{FinishReason, ThreadStatus};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::bootstrap::{by_name, ids};

    #[test]
    fn each_const_is_its_crockford_string() {
        for (c, s) in [
            (TEXT, ids::TEXT),
            (WORKFLOW, ids::WORKFLOW),
            (START_NODE, ids::START_NODE),
            (STEP_NODE, ids::STEP_NODE),
            (WORKFLOW_EXT, "5Y17TTMQ6FQF1"),
        ] {
            assert_eq!(c, NodeId::parse(s).unwrap(), "{s}");
        }
        for (c, name) in [
            (TEXT, "@ocas/string"),
            (WORKFLOW, "uwf/Workflow"),
            (START_NODE, "uwf/StartNode"),
            (STEP_NODE, "uwf/StepNode"),
        ] {
            assert_eq!(by_name(name).unwrap().id, c, "{name}");
        }
    }

    #[test]
    fn step_node_round_trips_with_the_writer_key_set() {
        let text = r#"{"start":"44P8EP6N3NXZ5","prev":null,"role":"r","output":"7VQ43ZSJTEWA7","detail":"944RT37WX1PQ5","agent":"a","edgePrompt":"go","startedAtMs":1,"completedAtMs":2,"cwd":"/","assembledPrompt":null}"#;
        let v = Value::from_json_str(text).unwrap();
        let n = StepNode::from_value(&v).unwrap();
        assert_eq!(n.to_value().to_json(), text);
        let mut no_edge = n.clone();
        no_edge.edge_prompt = None;
        assert!(!no_edge.to_value().to_json().contains("edgePrompt"));
    }

    #[test]
    fn finish_reasons_keep_their_spelling() {
        for s in ["completed", "cancelled", "timeout"] {
            assert_eq!(FinishReason::parse(s).as_str(), s);
        }
        assert_eq!(FinishReason::parse("x").status(), ThreadStatus::Completed);
        assert_eq!(FinishReason::Cancelled.status(), ThreadStatus::Cancelled);
    }
}
