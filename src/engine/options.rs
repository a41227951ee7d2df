//! What a step needs from its caller, and what it gives back.

use crate::store::Store;
use crate::supervise::Interrupt;
use crate::thread::{AgentCommand, Config, StepOutput, ThreadId};
use std::path::Path;
use std::time::Duration;

/// The agent time limit when neither `--timeout` nor `timeoutSeconds` is given.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// What one step needs from its caller.
pub(crate) struct StepOptions<'a> {
    /// The open store; held for the whole step.
    pub store: &'a Store,
    /// The storage root (`UWF_HOME` of the agent).
    pub root: &'a Path,
    /// The thread.
    pub thread: &'a ThreadId,
    /// `--agent` (with its protocol): overrides the config.
    pub agent: Option<&'a AgentCommand>,
    /// `config.yaml`.
    pub config: &'a Config,
    /// The models of the config, for built-in agents and model extraction.
    pub models: &'a crate::builtin::Models,
    /// Consecutive failed steps after which the thread fails.
    pub max_retries: u32,
    /// `--timeout`: overrides the config.
    pub timeout: Option<Duration>,
    /// Variables added to the agent's environment (e.g. from `.env`).
    pub env: &'a [(String, String)],
    /// Where the agent runs when the thread's directory does not exist on this machine.
    pub fallback_cwd: &'a Path,
    /// This process.
    pub pid: u32,
    /// The clock, ms since the epoch.
    pub now: &'a dyn Fn() -> u64,
    /// This program: an agent command named `uwf` runs it, so the built-in agents work
    /// without `uwf` on `PATH`.
    pub self_exe: Option<&'a Path>,
    /// Ends the agent and the step when set.
    pub interrupt: Option<&'a Interrupt>,
    /// The agent is this process's only child (see `Limits::sole_child`).
    pub sole_child: bool,
    /// The chains of a runner's threads at the heads their last steps made.
    pub memo: Option<&'a super::Memo>,
    /// The step's lease is kept when its head move commits (the thread not finished), for
    /// this process's next step of the thread, which then takes it without a write; and this
    /// process may hold the thread's lease from its previous step. A runner going on with a
    /// thread sets it, and gives back what it still holds when it stops
    /// ([`super::release_kept`]).
    pub keep_lease: bool,
    /// The store's budgets as a runner read them at its last look at the store (at most a
    /// second ago); `None`: read at the step.
    pub budgets: Option<&'a [(String, crate::store::Budget)]>,
    /// Where a runner holds what its agents' `uwf agent submit` handed to its socket, for the
    /// head move; `None`: an agent program's submission is written when it is made.
    pub submissions: Option<&'a crate::thread::Submissions>,
    /// The thread's lease, record and state as the caller read them just before the step (a
    /// runner reads those of many threads at once), for a lease kept from this process's last
    /// step of the thread; `None`: the step reads them.
    pub leased: Option<crate::store::LeasedThread>,
}

/// The result of one step, and notes for stderr.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepResult {
    /// The thread's state after the step.
    pub output: StepOutput,
    /// Things the user should know (e.g. a fallback working directory).
    pub notes: Vec<String>,
}
