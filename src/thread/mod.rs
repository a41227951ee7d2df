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

mod admission;
pub(crate) mod budget;
pub(crate) mod chain;
pub(crate) mod config;
mod error;
mod id;
pub(crate) mod kit;
pub(crate) mod lifecycle;
mod list;
pub(crate) mod ops;
mod overrun;
mod read;
pub(crate) mod registry;
pub(crate) mod time;

pub(crate) use admission::{Admission, Overflow};
pub(crate) use chain::{load_workflow, workflow_of};
pub(crate) use config::{AgentCommand, AgentProtocol, Config, ModelSetup};
pub(crate) use error::Result;
pub use error::ThreadError;
pub use id::ThreadId;
pub(crate) use id::random_bytes;
pub(crate) use kit::{Expected, StepWrite, Submissions};
pub use kit::{Fallback, HeldStep, SubmitInput, scripted_reply, submit};
pub(crate) use kit::{RoleBrief, agent_context, role_brief, submit_unless_fallback};
pub(crate) use lifecycle::{pause, promote, record_failure, remove, resume};
pub(crate) use list::{ListFilter, Listed, list};
pub use ops::{StartInput, Status, StepOutput, show, start};
pub(crate) use ops::{
    StartLine, Steps, fork, kill, latest_step_of_role, resolve_step, resolve_thread, running_role,
    start_many, start_with, step_details, steps,
};
pub use overrun::Overrun;
pub(crate) use read::{DEFAULT_QUOTA, ReadOptions, parse_quota, read, read_step, with_newline};
pub(crate) use registry::register_def;
pub use registry::register_workflow;
