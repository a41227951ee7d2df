//! How a thread ends, and the lifecycle states a thread goes through.

/// How a thread finished, as the history records it (stored as its string).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// It reached `$END`.
    Completed,
    /// `thread kill` cancelled it.
    Cancelled,
    /// Its steps failed `maxRetries` times in a row, or it reached its round limit.
    Failed,
    /// Its workflow's concurrency limit turned it away (`overflow: drop`, or the oldest of a
    /// full queue).
    Dropped,
    /// Any other reason an imported history line gave, kept as written.
    Other(String),
}

impl FinishReason {
    /// The stored spelling.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            FinishReason::Completed => "completed",
            FinishReason::Cancelled => "cancelled",
            FinishReason::Failed => "failed",
            FinishReason::Dropped => "dropped",
            FinishReason::Other(s) => s,
        }
    }

    /// Reads the stored spelling.
    pub(crate) fn parse(s: &str) -> FinishReason {
        match s {
            "completed" => FinishReason::Completed,
            "cancelled" => FinishReason::Cancelled,
            "failed" => FinishReason::Failed,
            "dropped" => FinishReason::Dropped,
            other => FinishReason::Other(other.to_string()),
        }
    }

    /// The status of a thread that finished for this reason: cancelled, failed, dropped, or
    /// else completed.
    pub(crate) fn status(&self) -> ThreadStatus {
        match self {
            FinishReason::Cancelled => ThreadStatus::Cancelled,
            FinishReason::Failed => ThreadStatus::Failed,
            FinishReason::Dropped => ThreadStatus::Dropped,
            _ => ThreadStatus::Completed,
        }
    }
}

impl From<&str> for FinishReason {
    fn from(s: &str) -> FinishReason {
        FinishReason::parse(s)
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A thread's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadStatus {
    /// Active, waiting for room under its workflow's concurrency limit.
    Queued,
    /// Active, ready for its next step.
    Idle,
    /// Active, a live process holds its step lease.
    Running,
    /// Active, paused by hand.
    Paused,
    /// Finished by reaching `$END`.
    Completed,
    /// Finished after failing `maxRetries` steps in a row (or at its round limit).
    Failed,
    /// Finished by `thread kill`.
    Cancelled,
    /// Turned away by its workflow's concurrency limit.
    Dropped,
}

impl ThreadStatus {
    /// The name printed and accepted by `--status`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Queued => "queued",
            ThreadStatus::Idle => "idle",
            ThreadStatus::Running => "running",
            ThreadStatus::Paused => "paused",
            ThreadStatus::Completed => "completed",
            ThreadStatus::Failed => "failed",
            ThreadStatus::Cancelled => "cancelled",
            ThreadStatus::Dropped => "dropped",
        }
    }

    /// Whether the thread is still active (queued, idle, running or paused).
    pub fn is_active(self) -> bool {
        matches!(
            self,
            ThreadStatus::Queued
                | ThreadStatus::Idle
                | ThreadStatus::Running
                | ThreadStatus::Paused
        )
    }
}
