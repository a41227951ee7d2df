//! The command line: argument parsing, output formats, errors and exit codes. Only this module
//! reads argv, the environment and the clock; it passes them to the library as values.

mod agent;
mod cas;
mod interchange;
mod output;
mod thread;
pub mod workflow;

pub use output::Format;

use crate::ErrorKind;
use crate::cas::Value;
use crate::engine::StepError;
use crate::store::{self, Store, StoreError};
use crate::thread::{ThreadError, ThreadId};
use clap::{Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// A failed command: the one-line message for stderr, hints, and its kind (the exit code).
#[derive(Debug)]
pub struct CliError {
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
}

impl CliError {
    /// A user error (exit code 1).
    pub fn new(message: impl Into<String>) -> CliError {
        CliError::of(ErrorKind::User, message)
    }

    /// An error of `kind`.
    pub fn of(kind: ErrorKind, message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            kind,
            hints: Vec::new(),
            retryable: kind == ErrorKind::Retry,
            quiet: false,
        }
    }

    /// Adds a `hint:` line.
    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    /// The process exit code.
    pub fn code(&self) -> i32 {
        if self.quiet { 0 } else { self.kind.exit_code() }
    }

    /// Prints the message and hints to stderr, and with `json` a JSON error object after them.
    fn report(&self, json: bool) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if !self.message.is_empty() {
            let _ = writeln!(err, "{}", self.message);
        }
        for h in &self.hints {
            let _ = writeln!(err, "hint: {h}");
        }
        if json {
            let o = output::obj([(
                "error",
                output::obj([
                    ("kind", Value::str(self.kind.name())),
                    ("code", Value::Number(f64::from(self.code()))),
                    ("message", Value::str(&self.message)),
                    (
                        "hints",
                        Value::Array(self.hints.iter().map(Value::str).collect()),
                    ),
                    ("retryable", Value::Bool(self.retryable)),
                ]),
            )]);
            let _ = writeln!(err, "{}", o.to_json());
        }
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        CliError::of(e.kind(), e.to_string())
    }
}

impl From<ThreadError> for CliError {
    fn from(e: ThreadError) -> Self {
        match e {
            ThreadError::Store(s) => s.into(),
            e => CliError::of(e.kind(), e.to_string()),
        }
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

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::of(ErrorKind::Internal, e.to_string())
    }
}

/// Result of a command.
pub type CliResult<T = ()> = Result<T, CliError>;

#[derive(Parser, Debug)]
#[command(
    name = "uwf",
    version,
    about = "A stateless workflow engine for AI agents"
)]
struct Cli {
    /// Output format (default json). With an explicit `--format json`, an error also prints
    /// a JSON error object on stderr.
    #[arg(long, global = true, value_enum)]
    format: Option<Format>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The content-addressed store.
    #[command(subcommand)]
    Cas(cas::CasCommand),
    /// Workflows: register, show, list, validate, history, rollback.
    #[command(subcommand)]
    Workflow(workflow::WorkflowCommand),
    /// Write the store as the TypeScript tool's file layout (cas/, threads.yaml, …).
    Export {
        /// Target directory (may be the storage root itself).
        dir: PathBuf,
    },
    /// Read a file layout (cas/<ID>.bin or cas/nodes/<ID>.bin, threads, registry, history).
    Import {
        /// Source directory.
        dir: PathBuf,
        /// Replace thread heads and workflow names that exist with other values.
        #[arg(long)]
        overwrite: bool,
    },
    /// Threads: start, step, show, list, read, fork, kill.
    #[command(subcommand)]
    Thread(thread::ThreadCommand),
    /// Steps of a thread (the TypeScript tool's later names).
    #[command(subcommand)]
    Step(thread::StepCommand),
    /// The agent kit and the built-in scripted agent.
    #[command(subcommand)]
    Agent(agent::AgentCmd),
}

/// What a command needs from its surroundings.
pub struct Env {
    /// The storage root.
    pub root: PathBuf,
    /// Output format.
    pub format: Format,
    /// Milliseconds since the epoch, read once.
    pub now_ms: u64,
    /// Whether stderr is a terminal (progress bars).
    pub stderr_tty: bool,
    /// The working directory.
    pub cwd: PathBuf,
    /// A fixed clock (`UWF_TEST_NOW_MS`, for tests): every reading of the time gives it.
    fixed_now: Option<u64>,
    /// A fixed random seed (`UWF_TEST_SEED`, for tests) and how many ids it has made.
    seed: Option<(u64, std::cell::Cell<u64>)>,
}

/// Milliseconds since the epoch from the system clock.
fn system_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Env {
    /// The time now, ms since the epoch (the fixed clock in tests).
    pub fn clock(&self) -> u64 {
        self.fixed_now.unwrap_or_else(system_now_ms)
    }

    /// A new thread id for the time of the command: random bits from the system, or from the
    /// fixed seed in tests (each id of a process from the next number).
    pub fn new_thread_id(&self) -> ThreadId {
        match &self.seed {
            None => ThreadId::generate(self.now_ms),
            Some((seed, n)) => {
                let i = n.get();
                n.set(i + 1);
                let a = twox_hash::XxHash64::oneshot(*seed, &i.to_le_bytes()).to_be_bytes();
                let b = twox_hash::XxHash64::oneshot(!*seed, &i.to_le_bytes()).to_be_bytes();
                let mut r = [0u8; 10];
                r[..8].copy_from_slice(&a);
                r[8..].copy_from_slice(&b[..2]);
                ThreadId::new(self.now_ms, r)
            }
        }
    }

    /// The store file of the root.
    pub fn db_path(&self) -> PathBuf {
        self.root.join(store::DB_FILE)
    }

    /// Opens the store for writing, creating it on first use.
    ///
    /// # Errors
    /// A store that cannot be opened.
    pub fn open_rw(&self) -> CliResult<Store> {
        if let Some(s) = interchange::auto_import(self)? {
            return Ok(s);
        }
        Ok(Store::open(&self.db_path())?)
    }

    /// Opens the store for reading; creates it when it does not exist yet.
    ///
    /// # Errors
    /// A store that cannot be opened.
    pub fn open_ro(&self) -> CliResult<Store> {
        let p = self.db_path();
        if p.exists() {
            Ok(Store::open_read_only(&p)?)
        } else {
            self.open_rw()
        }
    }
}

/// The command tree (for help, completions and manual pages).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Runs the CLI with `args`, printing to stdout/stderr; returns the exit code.
pub fn run(args: Vec<std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            // clap's whole message: usage errors name what is wrong and how to get help.
            let _ = e.print();
            return if e.use_stderr() {
                ErrorKind::Usage.exit_code()
            } else {
                0
            };
        }
    };
    // Hidden settings for reproducible tests: a fixed clock and a fixed random seed.
    let number = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let fixed_now = number("UWF_TEST_NOW_MS");
    let env = Env {
        root: store::resolve_root(|k| std::env::var(k).ok()),
        format: cli.format.unwrap_or(Format::Json),
        now_ms: fixed_now.unwrap_or_else(system_now_ms),
        stderr_tty: std::io::stderr().is_terminal(),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        fixed_now,
        seed: number("UWF_TEST_SEED").map(|s| (s, std::cell::Cell::new(0))),
    };
    // The store catches the database engine's panics in its own operations; this catches
    // those of the few reads that run outside them (a table a command iterates itself).
    let r = store::catching_damage(&env.db_path(), || match cli.command {
        Command::Cas(c) => cas::run(c, &env),
        Command::Workflow(c) => workflow::run(c, &env),
        Command::Export { dir } => interchange::export(&env, &dir),
        Command::Import { dir, overwrite } => interchange::import(&env, &dir, overwrite),
        Command::Thread(c) => thread::run(c, &env),
        Command::Step(c) => thread::run_step(c, &env),
        Command::Agent(c) => agent::run(c, &env),
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            e.report(cli.format == Some(Format::Json));
            e.code()
        }
    }
}
