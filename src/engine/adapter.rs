//! The one interface through which the engine runs an agent, whatever runs it.

use super::options::StepOptions;
use crate::cas::NodeId;
use crate::supervise::{Interrupt, Result, StepError};
use crate::thread::AgentCommand;
use crate::thread::chain::Moderated;
use crate::workflow::Decision;
use std::path::Path;
use std::time::Duration;

/// One agent's turn, as the engine hands it to an adapter.
pub(super) struct AgentCall<'a> {
    /// The step's options.
    pub opts: &'a StepOptions<'a>,
    /// The thread's chain, workflow and history.
    pub moderated: &'a Moderated,
    /// What the moderator chose: the role, its edge prompt.
    pub decision: &'a Decision,
    /// The agent command the config or `--agent` names.
    pub agent: &'a AgentCommand,
    /// Where the agent runs.
    pub cwd: &'a Path,
    /// When the agent was started, ms since the epoch (`UWF_STEP_STARTED_MS`).
    pub started_ms: u64,
    /// The agent's time limit.
    pub timeout: Duration,
    /// Where an agent run in process leaves the step's writes for the head move.
    pub hold: &'a crate::thread::HeldStep,
}

impl AgentCall<'_> {
    /// The variables added to an agent program's environment: `opts.env` and the `UWF_*`
    /// ones.
    pub fn env(&self) -> Vec<(String, String)> {
        let opts = self.opts;
        let mut env = opts.env.to_vec();
        env.extend([
            ("UWF_HOME".to_string(), opts.root.display().to_string()),
            ("UWF_THREAD".to_string(), opts.thread.to_string()),
            ("UWF_ROLE".to_string(), self.decision.role.clone()),
            (
                "UWF_EDGE_PROMPT".to_string(),
                self.decision.prompt.clone().unwrap_or_default(),
            ),
            ("UWF_CWD".to_string(), self.cwd.display().to_string()),
            (
                "UWF_STEP_STARTED_MS".to_string(),
                self.started_ms.to_string(),
            ),
        ]);
        env
    }
}

/// How the engine runs an agent: in process, or as a program speaking one of the protocols.
pub(super) trait Adapter {
    /// Whether the agent reads the thread's earlier steps (the engine loads them first).
    fn reads_history(&self) -> bool {
        false
    }

    /// Runs the agent's turn; returns the id of the StepNode it wrote and notes for stderr.
    fn run(&self, call: &AgentCall<'_>) -> Result<(NodeId, Vec<String>)>;

    /// Whether `e`, an error of [`Adapter::run`], is a failed step that counts towards the
    /// thread's `maxRetries` and leaves its last error.
    fn counts_as_failure(&self, e: &StepError) -> bool {
        e.counts_as_failure()
    }
}

/// Fails with [`StepError::Interrupted`] once `i` is set.
pub(super) fn interrupted(i: Option<&Interrupt>) -> Result<()> {
    match i.and_then(Interrupt::signal) {
        Some(signal) => Err(StepError::Interrupted { signal }),
        None => Ok(()),
    }
}
