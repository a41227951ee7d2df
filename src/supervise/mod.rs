//! An agent's run under supervision, the latch that interrupts it, and what a step can fail
//! with: the parts that the engine and the built-in agents share.
//!
//! The agent runs in its own process group, killed with uwf, its output capped and a time
//! limit held against descendants that keep the pipes open (`process`); an [`Interrupt`]
//! (SIGINT/SIGTERM) ends it at once. Every failure is a [`StepError`] that says whether a retry
//! of the same step may succeed ([`StepError::retryable`]).

mod error;
mod interrupt;
mod process;

pub(crate) use error::Result;
pub use error::StepError;
pub(crate) use interrupt::Interrupt;
pub(crate) use process::{Ending, Limits, adopt_orphans, guard_agents, run, run_with_input};
pub use process::{GUARD_ARG, guard_main};
