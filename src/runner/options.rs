//! What `uwf run` is asked to do, and how it is asked to stop.

use crate::engine::Interrupt;
use crate::thread::{self, AgentCommand, ThreadId};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// What `uwf run` drives and how.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The storage root.
    pub root: PathBuf,
    /// Steps at once.
    pub jobs: usize,
    /// Only threads of these workflow names (all when empty).
    pub workflows: Vec<String>,
    /// Only these threads (all when empty).
    pub threads: Vec<ThreadId>,
    /// Return when nothing is left to do instead of waiting for new threads.
    pub until_idle: bool,
    /// How long running steps may go on after a stop request.
    pub grace: Duration,
    /// `--agent`: overrides the config for every step.
    pub agent: Option<AgentCommand>,
    /// `--timeout`: the agent time limit.
    pub timeout: Option<Duration>,
    /// Variables added to agents' environments (`.env`).
    pub env: Vec<(String, String)>,
    /// Where agents run when a thread's directory does not exist here.
    pub fallback_cwd: PathBuf,
    /// This program, for agent commands named `uwf`.
    pub self_exe: Option<PathBuf>,
    /// Where the submit socket holds agents' submissions for their steps' head moves.
    pub submissions: Option<Arc<thread::Submissions>>,
}

/// A stop request and the kill that follows it.
#[derive(Debug)]
pub struct Stop {
    requests: AtomicU32,
    signal: AtomicU32,
    pub(super) kill: Interrupt,
}

impl Stop {
    /// No request yet.
    ///
    /// # Errors
    /// The system cannot create the interrupt's socket pair.
    pub fn new() -> std::io::Result<Stop> {
        Ok(Stop {
            requests: AtomicU32::new(0),
            signal: AtomicU32::new(0),
            kill: Interrupt::new()?,
        })
    }

    /// A stop request (`signal` is what asked): the first stops new steps, the second kills
    /// the running ones.
    pub fn request(&self, signal: i32) {
        self.signal.store(signal as u32, Ordering::SeqCst);
        if self.requests.fetch_add(1, Ordering::SeqCst) >= 1 {
            self.kill.trigger(signal);
        }
    }

    pub(super) fn requested(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s as i32),
        }
    }
}
