//! Why a workflow could not be read, checked or materialised.

use crate::cas::schema::SchemaError;

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
