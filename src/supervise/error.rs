//! What a step, or an agent's turn inside it, can fail with.

use super::process::SpawnError;
use crate::cas::NodeId;
use crate::interchange::transfer::TransferError;
use crate::thread::ThreadError;
use crate::workflow;

/// Why a step failed. The head is unchanged; a StepNode the agent wrote stays stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// The thread, its workflow, the moderator, the config or the store failed.
    #[error(transparent)]
    Thread(#[from] ThreadError),
    /// The agent program could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The agent ran past its time limit.
    #[error("agent timed out after {secs}s ({command}); its process tree was killed")]
    Timeout {
        /// The agent command line.
        command: String,
        /// The limit in seconds.
        secs: f64,
    },
    /// An agent called with uwf's protocol answered with the usage of the TypeScript tool's.
    #[error(
        "agent command failed ({command}): {stderr}; it looks like an agent for the TypeScript tool's protocol; set protocol: 7a0c on its config entry or pass --agent-protocol 7a0c"
    )]
    WrongProtocol {
        /// The agent command line.
        command: String,
        /// The tail of its stderr, on one line.
        stderr: String,
    },
    /// The files a 7a0c agent works on could not be written or read back.
    #[error(transparent)]
    Files(TransferError),
    /// The agent exited unsuccessfully.
    #[error("agent command failed ({command}): {}", if .stderr.is_empty() { .status.as_str() } else { .stderr.as_str() })]
    Failed {
        /// The agent command line.
        command: String,
        /// `exit code N` or `killed by signal N`.
        status: String,
        /// The tail of its stderr, on one line.
        stderr: String,
    },
    /// The agent's stdout does not end with a node id or `{"stepHash": …}`.
    #[error("{message} ({command})")]
    BadOutput {
        /// The agent command line.
        command: String,
        /// What is wrong.
        message: String,
    },
    /// The agent returned an id that is not stored.
    #[error("agent returned {id}, which is not in the store")]
    Missing {
        /// The id it printed.
        id: NodeId,
    },
    /// The agent returned a node that is not a StepNode.
    #[error("agent returned hash that is not a StepNode: {id} (type {type_id})")]
    NotStep {
        /// The node.
        id: NodeId,
        /// Its type.
        type_id: NodeId,
    },
    /// The agent returned a step of another thread.
    #[error(
        "agent returned step {id} of another thread: its start is {found}, expected {expected}"
    )]
    WrongThread {
        /// The step.
        id: NodeId,
        /// Its `start`.
        found: String,
        /// This thread's StartNode.
        expected: NodeId,
    },
    /// The agent returned a step that does not continue the head.
    #[error("agent returned step {id} whose prev is {found}, expected {expected} (the head)")]
    WrongPrev {
        /// The step.
        id: NodeId,
        /// Its `prev`, as JSON.
        found: String,
        /// The head, as JSON.
        expected: String,
    },
    /// The agent returned a step for another role.
    #[error("agent returned step {id} for role \"{found}\", expected role \"{expected}\"")]
    WrongRole {
        /// The step.
        id: NodeId,
        /// Its role.
        found: String,
        /// The role the moderator chose.
        expected: String,
    },
    /// Another live process is running a step of the thread.
    #[error("thread {thread} is busy: step in progress by pid {pid}")]
    Busy {
        /// The thread.
        thread: String,
        /// The lease owner.
        pid: u32,
    },
    /// The head moved between the start and the end of the step.
    #[error(
        "thread advanced concurrently: {thread} head is {found}, expected {expected}; step {kept} is kept in the store"
    )]
    Advanced {
        /// The thread.
        thread: String,
        /// The head the step started from.
        expected: NodeId,
        /// The head found at the end.
        found: NodeId,
        /// The node the step produced.
        kept: NodeId,
    },
    /// A node the step adds was removed by a garbage collection while the step ran.
    #[error(
        "node {missing} that step {kept} reaches was removed by garbage collection while the step ran; run the step again"
    )]
    Collected {
        /// The thread.
        thread: String,
        /// The node that is gone.
        missing: NodeId,
        /// The node the step produced.
        kept: NodeId,
    },
    /// The thread was finished (cancelled, say) while the step ran.
    #[error("thread {thread} was archived while its step ran; step {kept} is kept in the store")]
    Archived {
        /// The thread.
        thread: String,
        /// The node the step produced.
        kept: NodeId,
    },
    /// The thread waits for room under its workflow's concurrency limit.
    #[error(
        "thread {thread} is queued: its workflow is at its concurrency limit; it starts when another thread of it ends (\"uwf run\" starts it then)"
    )]
    Queued {
        /// The thread.
        thread: String,
    },
    /// A budget holds the step back: the thread's (it is paused for it) or its workflow's day.
    #[error(transparent)]
    Budget(#[from] crate::thread::Overrun),
    /// The thread is paused.
    #[error("thread {thread} is paused; \"uwf thread resume {thread}\" lets it go on")]
    Paused {
        /// The thread.
        thread: String,
    },
    /// The step failed, and with it the thread: its `maxRetries`-th failure in a row.
    #[error(
        "{last}; thread {thread} failed after {attempts} failed steps in a row (\"uwf thread resume {thread}\" retries it)"
    )]
    FailedForGood {
        /// The thread.
        thread: String,
        /// The failures in a row.
        attempts: u32,
        /// The last failure.
        last: Box<StepError>,
    },
    /// The thread took as many steps as its round limit allows; it failed.
    #[error("thread {thread} reached its round limit of {rounds} steps and failed")]
    RoundLimit {
        /// The thread.
        thread: String,
        /// The limit.
        rounds: u32,
    },
    /// A model call of a built-in agent failed.
    #[error("model call failed: {0}")]
    Model(#[from] crate::llm::LlmError),
    /// A signal ended the step; its agent was killed and its lease released.
    #[error("interrupted by signal {signal}; the agent was stopped and the thread is unchanged")]
    Interrupted {
        /// The signal.
        signal: i32,
    },
}

impl StepError {
    /// Whether this is a failure of the step's agent or its output, which counts towards the
    /// thread's `maxRetries` (not a busy, queued, paused or finished thread, an interrupt, a
    /// config or store failure).
    pub fn counts_as_failure(&self) -> bool {
        matches!(
            self,
            StepError::Spawn(_)
                | StepError::Timeout { .. }
                | StepError::WrongProtocol { .. }
                | StepError::Failed { .. }
                | StepError::BadOutput { .. }
                | StepError::Missing { .. }
                | StepError::NotStep { .. }
                | StepError::WrongThread { .. }
                | StepError::WrongPrev { .. }
                | StepError::WrongRole { .. }
                | StepError::Model(_)
                | StepError::Thread(ThreadError::Extract { .. })
        )
    }

    /// Whether the same step may succeed if run again with nothing changed: the thread was
    /// busy or moved on, or the agent failed in a way that may not repeat (time limit, exit
    /// status, unusable output).
    pub fn retryable(&self) -> bool {
        if let StepError::Model(e) = self {
            return e.retryable();
        }
        // A lost connection to the store's server, or a transaction it aborted: nothing
        // half-written, the step may run again.
        if let StepError::Thread(ThreadError::Store(crate::store::StoreError::Server {
            retry: true,
            ..
        })) = self
        {
            return true;
        }
        matches!(
            self,
            StepError::Busy { .. }
                | StepError::Advanced { .. }
                | StepError::Collected { .. }
                | StepError::Timeout { .. }
                | StepError::Failed { .. }
                | StepError::BadOutput { .. }
        )
    }
}

impl From<crate::store::StoreError> for StepError {
    fn from(e: crate::store::StoreError) -> Self {
        StepError::Thread(e.into())
    }
}

impl From<TransferError> for StepError {
    fn from(e: TransferError) -> Self {
        match e {
            TransferError::Store(s) => s.into(),
            e => StepError::Files(e),
        }
    }
}

impl From<workflow::ModeratorError> for StepError {
    fn from(e: workflow::ModeratorError) -> Self {
        StepError::Thread(e.into())
    }
}

/// Result alias of a step.
pub(crate) type Result<T, E = StepError> = std::result::Result<T, E>;
