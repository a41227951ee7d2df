//! The ids of the built-in node types, checked against their Crockford strings and the bootstrap
//! table by `workflow::nodes`'s tests.

use crate::cas::NodeId;

/// `{type:"string"}` `7VQ43ZSJTEWA7`: text nodes (raw agent output, step details).
pub const TEXT: NodeId = NodeId::from_crockford("7VQ43ZSJTEWA7");
/// The TypeScript tool's (7a0c) Workflow schema `AZF3FA1TN3D4A`.
pub const WORKFLOW: NodeId = NodeId::from_crockford("AZF3FA1TN3D4A");
/// uwf's extended Workflow schema (`uwf/WorkflowExt`, see
/// `workflow::extended_schema`); a test checks it against the schema's hash.
pub const WORKFLOW_EXT: NodeId = NodeId::from_crockford("5Y17TTMQ6FQF1");
/// The StartNode schema `44P8EP6N3NXZ5`.
pub const START_NODE: NodeId = NodeId::from_crockford("44P8EP6N3NXZ5");
/// The StepNode schema `108DB063KRQWW`.
pub const STEP_NODE: NodeId = NodeId::from_crockford("108DB063KRQWW");
