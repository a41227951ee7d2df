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
pub(crate) mod materialize;
pub(crate) mod model;
pub(crate) mod moderator;
pub(crate) mod mustache;
pub mod nodes;
pub(crate) mod render;
pub(crate) mod thread_id;
pub(crate) mod validate;
pub(crate) mod yaml;

pub use condition::{ConditionEvaluator, Jsonata};
pub use materialize::{Materialized, SchemaNode, extended_schema, materialize};
pub use model::{
    Brief, Condition, END, Graph, Role, START, StoredWorkflow, Target, Transition, Workflow,
    WorkflowDef,
};
pub use moderator::{Decision, History, ModeratorError, StepView, next};
pub use nodes::{FinishReason, StartNode, StepNode, ThreadStatus, is_workflow_type};
pub use render::{GraphFormat, render_graph};
pub use thread_id::ThreadId;

use crate::cas::schema::SchemaError;
use std::path::Path;

/// Why a workflow could not be read, checked or materialised.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The workflow file does not exist.
    #[error("file not found: {0}")]
    FileNotFound(String),
    /// The workflow file exists but cannot be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The system's message.
        message: String,
    },
    /// Text that is not valid YAML (or an included `.json` that is not JSON).
    #[error("invalid YAML: {origin}: {message}")]
    Yaml {
        /// The file (or description of the text).
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// An `!include` that cannot be followed.
    #[error("invalid YAML: {origin}: !include \"{target}\": {problem}")]
    Include {
        /// The including file.
        origin: String,
        /// The include path as written.
        target: String,
        /// What is wrong: `path traversal blocked`, `file not found`, ….
        problem: String,
    },
    /// A document that does not have the shape of a workflow.
    #[error("invalid workflow YAML: {0}")]
    Shape(String),
    /// The declared name does not match the file name.
    #[error(
        "workflow name mismatch: file \"{file}\" implies name \"{expected}\" but YAML declares name \"{declared}\""
    )]
    NameMismatch {
        /// The file name.
        file: String,
        /// The name it implies.
        expected: String,
        /// The name in the YAML.
        declared: String,
    },
    /// Semantic problems, all of them.
    #[error("workflow validation failed:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<String>),
    /// A role's output schema that the store would refuse.
    #[error("role \"{role}\" output schema: {source}")]
    Schema {
        /// The role.
        role: String,
        /// Why.
        source: SchemaError,
    },
}

/// Parses workflow YAML text; `base_dir` resolves `!include` (refused when `None`).
///
/// Checks the shape only; call [`validate()`] for the semantic checks.
///
/// # Errors
/// [`WorkflowError::Yaml`], [`WorkflowError::Include`] or [`WorkflowError::Shape`].
pub fn parse_str(text: &str, base_dir: Option<&Path>) -> Result<WorkflowDef, WorkflowError> {
    let doc = yaml::parse_str(text, base_dir, "<input>")?;
    WorkflowDef::from_yaml_value(&doc)
}

/// Reads a workflow file: YAML with includes, shape, name against the file name, semantics.
///
/// # Errors
/// Any [`WorkflowError`]; semantic problems come together in [`WorkflowError::Invalid`].
pub fn load_file(
    path: &Path,
    evaluator: &dyn ConditionEvaluator,
) -> Result<WorkflowDef, WorkflowError> {
    let doc = yaml::load_file(path)?;
    let def = WorkflowDef::from_yaml_value(&doc)?;
    model::check_name(path, &def.name)?;
    validate(&def, evaluator)?;
    Ok(def)
}

/// Runs the semantic checks of `validate::semantic_errors`.
///
/// # Errors
/// [`WorkflowError::Invalid`] with every problem found.
pub fn validate(
    def: &WorkflowDef,
    evaluator: &dyn ConditionEvaluator,
) -> Result<(), WorkflowError> {
    let errors = validate::semantic_errors(def, evaluator);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(WorkflowError::Invalid(errors))
    }
}
