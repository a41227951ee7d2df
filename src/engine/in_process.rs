//! Built-in agents, run in process.

use super::adapter::{Adapter, AgentCall, interrupted};
use crate::builtin::{Agent, Turn};
use crate::cas::NodeId;
use crate::supervise::{Result, StepError};

/// A built-in agent (`uwf agent …` as the agent command), run in this process.
pub(super) struct InProcess(pub std::sync::Arc<dyn Agent>);

impl Adapter for InProcess {
    // A built-in agent reads the thread's earlier steps (its prompt, its script).
    fn reads_history(&self) -> bool {
        true
    }

    fn run(&self, call: &AgentCall<'_>) -> Result<(NodeId, Vec<String>)> {
        let opts = call.opts;
        let decision = call.decision;
        let turn = Turn {
            store: opts.store,
            root: opts.root,
            thread: opts.thread,
            role: &decision.role,
            edge_prompt: decision.prompt.as_deref(),
            cwd: call.cwd,
            now: opts.now,
            timeout: call.timeout,
            interrupt: opts.interrupt,
            models: opts.models,
            env: opts.env,
            moderated: Some(call.moderated),
            hold: Some(call.hold),
        };
        let started = std::time::Instant::now();
        let id = self.0.run(&turn);
        tracing::info!(
            tag = "8VDW5NMT",
            thread = %opts.thread,
            role = %decision.role,
            agent = %call.agent.display(),
            status = if id.is_ok() { "ok" } else { "error" },
            duration_ms = started.elapsed().as_millis() as u64,
            "agent exit (in process)"
        );
        let id = id?;
        interrupted(opts.interrupt)?;
        Ok((id, Vec::new()))
    }

    // Whatever a built-in agent fails with is its step's failure, as an agent program's exit
    // status is (its script unreadable, its output refused, its model unreachable), save an
    // interrupt and what a retry of the same step may get past without the agent (a busy
    // thread, a store connection lost).
    fn counts_as_failure(&self, e: &StepError) -> bool {
        e.counts_as_failure() || !(matches!(e, StepError::Interrupted { .. }) || e.retryable())
    }
}
