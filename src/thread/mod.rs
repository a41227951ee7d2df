//! Threads as functions over the store: start, step, fork, kill, show, list, steps, read, and
//! the store side of the agent kit (context, submit, the scripted agent).
//!
//! Nothing here reads the environment or the clock: the CLI passes the time, the working
//! directory and the agent settings in as values. A step itself is the engine's.
//!
//! Invariants:
//! - a head moves only by compare-and-swap inside one write transaction; a step that finds the
//!   head moved fails with [`crate::engine::StepError::Advanced`], and the node it produced stays stored;
//! - a thread has at most one live step lease; a lease whose owner process is gone is taken over;
//! - the last head move of a thread, its removal from the active threads and its history record
//!   are written in the same transaction.

pub(crate) mod chain;
pub(crate) mod config;
mod id;
pub(crate) mod kit;
pub(crate) mod lifecycle;
pub(crate) mod ops;
mod read;
pub(crate) mod registry;
pub(crate) mod time;

pub(crate) use chain::{load_workflow, workflow_of};
pub(crate) use config::{AgentCommand, AgentProtocol, Config, ModelSetup};
pub use id::ThreadId;
pub use kit::{Fallback, SubmitInput, scripted_reply, submit};
pub(crate) use kit::{RoleBrief, agent_context, role_brief, submit_unless_fallback};
pub(crate) use lifecycle::{Admission, pause, promote, record_failure, remove, resume};
pub(crate) use ops::{
    ListFilter, Listed, Steps, fork, kill, latest_step_of_role, list, resolve_step, resolve_thread,
    running_role, start_with, step_details, steps,
};
pub use ops::{StartInput, Status, StepOutput, show, start};
pub(crate) use read::{DEFAULT_QUOTA, ReadOptions, parse_quota, read, read_step, with_newline};
pub(crate) use registry::register_def;
pub use registry::register_workflow;

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
