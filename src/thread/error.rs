//! The errors of the thread layer.

use crate::cas::NodeId;
use crate::store::StoreError;
use crate::workflow::{ModeratorError, WorkflowError};

/// Errors of the thread layer. Every message is one line naming the thread, node or value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadError {
    /// A store failure.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A budget holds the thread back.
    #[error(transparent)]
    Budget(#[from] super::Overrun),
    /// A workflow that cannot be read.
    #[error("{}", .0.to_string().replace('\n', " "))]
    Workflow(#[from] WorkflowError),
    /// The moderator could not decide.
    #[error(transparent)]
    Moderator(#[from] ModeratorError),
    /// No active or finished thread has this id.
    #[error("thread not found: {0}")]
    NotFound(String),
    /// The thread is finished.
    #[error("thread not active: {thread} ({reason})")]
    NotActive {
        /// The thread.
        thread: String,
        /// `completed` or `cancelled`.
        reason: String,
    },
    /// `thread start` could not find the workflow.
    #[error("workflow not found: {0}; run \"uwf workflow list\" to see registered names")]
    WorkflowNotFound(String),
    /// A name that is not registered (`workflow rollback`, `workflow show`).
    #[error("unknown workflow \"{0}\"; run \"uwf workflow list\" to see registered names")]
    UnknownName(String),
    /// A node that should be a Workflow is not one.
    #[error("node {id} is not a Workflow (type {type_id})")]
    NotWorkflow {
        /// The node.
        id: NodeId,
        /// Its type.
        type_id: NodeId,
    },
    /// A node that is not stored.
    #[error("CAS node not found: {0}")]
    NodeNotFound(String),
    /// A node of the wrong type for the command.
    #[error("node {id} is not a {expected}")]
    WrongType {
        /// The node.
        id: NodeId,
        /// What it should be.
        expected: &'static str,
    },
    /// A thread whose chain of nodes is broken.
    #[error("thread chain broken at {node}: {problem}")]
    Chain {
        /// The node where the chain breaks.
        node: String,
        /// What is wrong.
        problem: String,
    },
    /// `config.yaml` problems.
    #[error("{0}")]
    Config(String),
    /// An agent's output could not be turned into the role's output.
    #[error(
        "cannot extract output for role \"{role}\": {message}; the raw output is kept as text node {raw}"
    )]
    Extract {
        /// The role.
        role: String,
        /// What is missing or invalid.
        message: String,
        /// The text node holding the raw output.
        raw: NodeId,
    },
    /// A bad argument value.
    #[error("{0}")]
    Invalid(String),
}

/// Result alias of the thread layer.
pub(crate) type Result<T, E = ThreadError> = std::result::Result<T, E>;
