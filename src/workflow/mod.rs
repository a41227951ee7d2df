//! Workflows: YAML with `!include`, the model with both role and graph forms, semantic
//! validation, materialisation into CAS nodes, the moderator and graph drawing; the typed
//! domain nodes and built-in type ids (`nodes`).
//!
//! Everything here is pure except [`load_file`] and the YAML reader it uses, which read the
//! workflow file and the files it includes.
//!
//! ```
//! use uwf::workflow::{self, condition::Jsonata};
//! let text = "name: hello\ndescription: d\nroles:\n  greeter:\n    description: greets\n    goal: g\n    capabilities: []\n    procedure: p\n    output: o\n    frontmatter: {type: object}\ngraph:\n  $START: {_: {role: greeter, prompt: Say hello}}\n  greeter: {_: {role: $END, prompt: done}}\n";
//! let def = workflow::parse_str(text, None).unwrap();
//! workflow::validate(&def, &Jsonata::default()).unwrap();
//! let m = workflow::materialize(&def).unwrap();
//! assert_eq!(m.workflow_type.to_string(), "AZF3FA1TN3D4A");
//! ```

pub mod condition;
mod error;
mod load;
pub(crate) mod materialize;
pub(crate) mod model;
pub(crate) mod moderator;
pub(crate) mod mustache;
pub mod nodes;
pub(crate) mod render;

pub(crate) mod validate;
pub(crate) mod yaml;

pub use crate::model::ThreadId;
pub use condition::{ConditionEvaluator, Jsonata};
pub use error::WorkflowError;
pub use load::{load_file, parse_str, validate};
pub use materialize::{Materialized, SchemaNode, extended_schema, materialize};
pub use model::{
    Brief, Condition, END, Graph, Role, START, StoredWorkflow, Target, Transition, Workflow,
    WorkflowDef,
};
pub use moderator::{Decision, History, ModeratorError, StepView, next};
pub use nodes::{FinishReason, StartNode, StepNode, ThreadStatus, is_workflow_type};
pub use render::{GraphFormat, render_graph};
