//! The error of a command, and of an answer to one: the message, `hint:` lines and the kind
//! that gives the exit code. The CLI prints it to stderr; the web view answers with its JSON
//! object.

use crate::ErrorKind;
use crate::store::StoreError;
use crate::supervise::StepError;
use crate::thread::ThreadError;

/// A failed command: the one-line message for stderr, hints, and its kind (the exit code).
#[derive(Debug)]
pub(crate) struct CliError {
    /// Printed to stderr (nothing when empty).
    pub message: String,
    /// The kind, which gives the exit code.
    pub kind: ErrorKind,
    /// Printed after the message as `hint: …` lines.
    pub hints: Vec<String>,
    /// A retry of the same command may succeed.
    pub retryable: bool,
    /// Exit 0 without a message (a closed stdout pipe).
    pub quiet: bool,
    /// The name or thread id that matched nothing, for a "did you mean" hint.
    pub(crate) missing: Option<Missing>,
}

/// What a command looked for and did not find.
#[derive(Debug, Clone)]
pub(crate) enum Missing {
    /// A thread id (or the start of one).
    Thread(String),
    /// A registered workflow name.
    Workflow(String),
}

impl CliError {
    /// A user error (exit code 1).
    pub(crate) fn new(message: impl Into<String>) -> CliError {
        CliError::of(ErrorKind::User, message)
    }

    /// An error of `kind`.
    pub(crate) fn of(kind: ErrorKind, message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            kind,
            hints: Vec::new(),
            retryable: kind == ErrorKind::Retry,
            quiet: false,
            missing: None,
        }
    }

    /// Marks the error as about `m`, which matched nothing.
    pub(crate) fn missing(mut self, m: Missing) -> CliError {
        self.missing = Some(m);
        self
    }

    /// Adds a `hint:` line.
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    /// The process exit code.
    pub(crate) fn code(&self) -> i32 {
        if self.quiet { 0 } else { self.kind.exit_code() }
    }

    /// The JSON error object of `--format json` (and of `uwf serve`'s API), one line.
    pub(crate) fn to_json(&self) -> String {
        let o = ErrorOut {
            error: ErrorBody {
                kind: self.kind.name(),
                code: self.code(),
                message: &self.message,
                hints: &self.hints,
                retryable: self.retryable,
            },
        };
        super::output::to_value(&o).to_json()
    }
}

/// The JSON error object on stderr (`--format json`).
#[derive(serde::Serialize)]
struct ErrorOut<'a> {
    error: ErrorBody<'a>,
}

/// What [`ErrorOut`] says of the error.
#[derive(serde::Serialize)]
struct ErrorBody<'a> {
    kind: &'static str,
    code: i32,
    message: &'a str,
    hints: &'a [String],
    retryable: bool,
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        CliError::of(e.kind(), e.to_string())
    }
}

impl From<ThreadError> for CliError {
    fn from(e: ThreadError) -> Self {
        let missing = match &e {
            ThreadError::NotFound(t) => Some(Missing::Thread(t.clone())),
            ThreadError::WorkflowNotFound(w) => Some(Missing::Workflow(w.clone())),
            _ => None,
        };
        let mut c = match e {
            ThreadError::Store(s) => s.into(),
            e => CliError::of(e.kind(), e.to_string()),
        };
        c.missing = missing;
        c
    }
}

impl From<StepError> for CliError {
    fn from(e: StepError) -> Self {
        let retryable = e.retryable();
        let hint = match &e {
            StepError::Busy { thread, .. } => Some(format!(
                "wait for that step to end; \"uwf thread show {thread}\" shows when it has"
            )),
            StepError::Advanced { .. } => Some("run the step again from the new head".to_string()),
            _ => None,
        };
        let mut c = match e {
            StepError::Thread(t) => t.into(),
            e => CliError::of(e.kind(), e.to_string()),
        };
        c.retryable = retryable;
        if let Some(h) = hint {
            c = c.hint(h);
        }
        c
    }
}

/// An output struct serde_json could not write (an output struct always can).
impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        CliError::of(ErrorKind::Internal, e.to_string())
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::of(ErrorKind::Internal, e.to_string())
    }
}

/// Result of a command.
pub(crate) type CliResult<T = ()> = Result<T, CliError>;
