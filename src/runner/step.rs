//! What one step of a run needs, owned, so that its parts can run on other threads than the
//! runner's own.

use super::options::{RunOptions, Stop};
use crate::builtin::Models;
use crate::engine::{self, StepOptions};
use crate::store::Store;
use crate::thread::{Config, ThreadId};
use std::sync::Arc;

/// What a step of the run needs, owned, so that its parts can run on other threads.
pub(super) struct StepEnv {
    pub(super) store: Arc<Store>,
    pub(super) config: Arc<Config>,
    pub(super) models: Arc<Models>,
    pub(super) opts: Arc<RunOptions>,
    pub(super) now: Arc<dyn Fn() -> u64 + Send + Sync>,
    pub(super) stop: Arc<Stop>,
    pub(super) memo: Arc<engine::Memo>,
    pub(super) budgets: Arc<Vec<(String, crate::store::Budget)>>,
    pub(super) thread: ThreadId,
    pub(super) keep_lease: bool,
    pub(super) max_retries: u32,
}

impl StepEnv {
    pub(super) fn options(&self) -> StepOptions<'_> {
        self.options_with(None)
    }

    /// The step's options, with the thread's rows read beforehand (`leased`), if any.
    pub(super) fn options_with(
        &self,
        leased: Option<crate::store::LeasedThread>,
    ) -> StepOptions<'_> {
        StepOptions {
            store: &self.store,
            root: &self.opts.root,
            thread: &self.thread,
            agent: self.opts.agent.as_ref(),
            config: &self.config,
            models: &self.models,
            max_retries: self.max_retries,
            timeout: self.opts.timeout,
            env: &self.opts.env,
            fallback_cwd: &self.opts.fallback_cwd,
            pid: crate::proc::pid(),
            now: &*self.now,
            self_exe: self.opts.self_exe.as_deref(),
            interrupt: Some(&self.stop.kill),
            sole_child: false,
            memo: Some(&self.memo),
            keep_lease: self.keep_lease,
            budgets: Some(&self.budgets),
            submissions: self.opts.submissions.as_deref(),
            leased,
        }
    }
}
