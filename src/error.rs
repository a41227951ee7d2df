//! What kind of failure an error is: each layer's error names its kind, and the CLI turns the
//! kind into its exit code (docs/commands.md, "Exit codes").

use crate::store::StoreError;
use crate::supervise::StepError;
use crate::thread::ThreadError;

/// The kind of a failure, for callers that decide what to do next (retry, report, give up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad input or an operation that failed for a reason the user can act on: a value, a
    /// file, a workflow, a config, an agent that failed or returned something unusable.
    User,
    /// The command line itself is wrong (clap's usage errors).
    Usage,
    /// A thread, workflow or registered name that does not exist.
    NotFound,
    /// The store or a file it reads is damaged, or `uwf cas verify` found damage.
    Damaged,
    /// A bug or a failure of the system underneath (I/O, the database engine).
    Internal,
    /// Try again: the thread is busy with another step or moved on meanwhile.
    Retry,
    /// A budget holds the step back: the thread's spend reached its budget (it is paused), or
    /// its workflow's spend today reached its day budget.
    Budget,
    /// A signal ended the command.
    Interrupted(i32),
}

impl ErrorKind {
    /// The process exit code of this kind: 1, 2, 3, 4, 65, 70, 75, or 128 + the signal.
    pub(crate) fn exit_code(self) -> i32 {
        match self {
            ErrorKind::User => 1,
            ErrorKind::Usage => 2,
            ErrorKind::NotFound => 3,
            ErrorKind::Budget => 4,
            ErrorKind::Damaged => 65,
            ErrorKind::Internal => 70,
            ErrorKind::Retry => 75,
            ErrorKind::Interrupted(sig) => 128 + sig,
        }
    }

    /// A short name for machine callers (`--format json` error objects).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorKind::User => "user",
            ErrorKind::Usage => "usage",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Budget => "budget",
            ErrorKind::Damaged => "damaged",
            ErrorKind::Internal => "internal",
            ErrorKind::Retry => "retry",
            ErrorKind::Interrupted(_) => "interrupted",
        }
    }
}

impl StoreError {
    /// The kind of this failure. A node that is not stored is a user error (exit 1), as the
    /// TypeScript tool's `cas get` and `cas refs` answer it.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Open { .. }
            | StoreError::Corrupt(_)
            | StoreError::CorruptRecord { .. }
            | StoreError::HashCollision(_)
            | StoreError::Damaged { .. } => ErrorKind::Damaged,
            StoreError::Db(e) if crate::store::db_damage(e) => ErrorKind::Damaged,
            StoreError::Db(_) | StoreError::Internal(_) | StoreError::ReadOnly => {
                ErrorKind::Internal
            }
            StoreError::GcRunning { .. }
            | StoreError::InUse
            | StoreError::Server { retry: true, .. } => ErrorKind::Retry,
            _ => ErrorKind::User,
        }
    }
}

impl ThreadError {
    /// The kind of this failure.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            ThreadError::Store(e) => e.kind(),
            ThreadError::NotFound(_)
            | ThreadError::WorkflowNotFound(_)
            | ThreadError::Workflow(crate::workflow::WorkflowError::FileNotFound(_)) => {
                ErrorKind::NotFound
            }
            ThreadError::Chain { .. } => ErrorKind::Damaged,
            ThreadError::Budget(_) => ErrorKind::Budget,
            _ => ErrorKind::User,
        }
    }
}

impl StepError {
    /// The kind of this failure: [`ErrorKind::Retry`] for a busy or advanced thread.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            StepError::Thread(e) => e.kind(),
            StepError::Busy { .. } | StepError::Advanced { .. } | StepError::Collected { .. } => {
                ErrorKind::Retry
            }
            StepError::Interrupted { signal } => ErrorKind::Interrupted(*signal),
            StepError::Budget(_) => ErrorKind::Budget,
            StepError::Files(_) => ErrorKind::Internal,
            _ => ErrorKind::User,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct() {
        let kinds = [
            ErrorKind::User,
            ErrorKind::Usage,
            ErrorKind::NotFound,
            ErrorKind::Budget,
            ErrorKind::Damaged,
            ErrorKind::Internal,
            ErrorKind::Retry,
            ErrorKind::Interrupted(2),
            ErrorKind::Interrupted(15),
        ];
        let codes: Vec<i32> = kinds.iter().map(|k| k.exit_code()).collect();
        assert_eq!(codes, [1, 2, 3, 4, 65, 70, 75, 130, 143]);
    }
}
