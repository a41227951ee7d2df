//! The command line: argument parsing, output formats, errors and exit codes. Only this module
//! reads argv, the environment and the clock; it passes them to the library as values.

mod agent;
mod cas;
mod interchange;
mod output;
mod thread;
pub mod workflow;

pub use output::Format;

use crate::store::{self, Store, StoreError};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;

/// A failed command: the one-line message for stderr and the exit code.
#[derive(Debug)]
pub struct CliError {
    /// Printed to stderr.
    pub message: String,
    /// Process exit code.
    pub code: i32,
}

impl CliError {
    /// An error with exit code 1.
    pub fn new(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: 1,
        }
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        CliError::new(e.to_string())
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::new(e.to_string())
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
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Json)]
    format: Format,
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
}

impl Env {
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

/// Runs the CLI with `args`, printing to stdout/stderr; returns the exit code.
pub fn run(args: Vec<std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            // One line, like every other error; `--help` has the details.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!(
                "{}; see \"uwf --help\"",
                first.trim_start_matches("error: ")
            );
            return 1;
        }
        Err(e) => {
            let _ = e.print();
            return 0;
        }
    };
    let env = Env {
        root: store::resolve_root(|k| std::env::var(k).ok()),
        format: cli.format,
        now_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        stderr_tty: std::io::stderr().is_terminal(),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
    };
    let r = match cli.command {
        Command::Cas(c) => cas::run(c, &env),
        Command::Workflow(c) => workflow::run(c, &env),
        Command::Export { dir } => interchange::export(&env, &dir),
        Command::Import { dir, overwrite } => interchange::import(&env, &dir, overwrite),
        Command::Thread(c) => thread::run(c, &env),
        Command::Step(c) => thread::run_step(c, &env),
        Command::Agent(c) => agent::run(c, &env),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            if !e.message.is_empty() {
                eprintln!("{}", e.message);
            }
            e.code
        }
    }
}
