//! The command line: argument parsing, output formats, errors and exit codes. Only this module
//! reads argv, the environment and the clock; it passes them to the library as values.

mod agent;
pub(crate) mod background;
mod cas;
mod handoff;
mod interchange;
mod log;
pub(crate) mod output;
mod run;
mod serve;
mod setup;
mod skill;
mod store_cmd;
pub(crate) mod thread;
pub(crate) mod workflow;

pub(crate) use output::Format;

use crate::ErrorKind;
use crate::engine::StepError;
use crate::store::{self, Store, StoreError};
use crate::thread::{ThreadError, ThreadId};
use clap::{Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

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
            let _ = writeln!(err, "{}", self.to_json());
        }
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
        output::to_value(&o).to_json()
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

/// A `did you mean …` hint for what `e` did not find: the nearest registered name, or the
/// thread whose id starts with, or nearly with, what was given. Nothing when the store does not
/// exist yet or nothing is near.
fn did_you_mean(env: &Env, e: &CliError) -> Option<String> {
    let missing = e.missing.as_ref()?;
    let path = env.db_path();
    if env.server_url().is_none() && !path.exists() {
        return None;
    }
    let s = env.open_ro().ok()?;
    match missing {
        Missing::Workflow(name) => {
            let best = s
                .registry()
                .ok()?
                .into_iter()
                .map(|(n, _)| (strsim::levenshtein(name, &n), n))
                .filter(|(d, n)| *d <= (n.chars().count() / 3).max(2))
                .min()?;
            Some(format!("did you mean \"{}\"?", best.1))
        }
        Missing::Thread(given) => {
            let given = given.trim().to_ascii_uppercase();
            // Fewer characters than a node id prefix say too little to pick a thread.
            if given.chars().count() < 4 {
                return None;
            }
            let mut ids: Vec<String> = s
                .threads()
                .ok()?
                .into_iter()
                .map(|(t, _)| t.to_string())
                .collect();
            let _ = s.for_each_history::<StoreError>(|h| {
                ids.push(h.thread);
                Ok(())
            });
            let best = ids
                .into_iter()
                .filter(|t| *t != given)
                .map(|t| {
                    // A shorter input is compared with the start of each id.
                    let head: String = t.chars().take(given.chars().count()).collect();
                    (strsim::levenshtein(&given, &head), t)
                })
                .filter(|(d, _)| *d <= 2)
                .min()?;
            Some(format!("did you mean {}?", best.1))
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
pub(crate) type CliResult<T = ()> = Result<T, CliError>;

/// The help heading of the options every command takes, apart from each command's own.
const GLOBAL: &str = "Global options";

#[derive(Parser, Debug)]
#[command(
    name = "uwf",
    version,
    about = "A stateless workflow engine for AI agents"
)]
struct Cli {
    /// Output format (default json). With an explicit `--format json`, an error also prints
    /// a JSON error object on stderr.
    #[arg(long, global = true, value_enum, help_heading = GLOBAL)]
    format: Option<Format>,
    /// Print log events on stderr too: -v info, -vv debug, -vvv trace (`UWF_LOG` takes a
    /// filter such as `debug` or `uwf::engine=trace`).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = GLOBAL)]
    verbose: u8,
    /// The store: a `postgres://` or `postgresql://` URL for a PostgreSQL server, else a redb
    /// file path (default `$UWF_STORE`, then `store:` in config.yaml, then `<root>/uwf.redb`).
    #[arg(long, global = true, value_name = "URL|FILE", help_heading = GLOBAL)]
    store: Option<String>,
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
        #[arg(required_unless_present = "archive", conflicts_with = "archive")]
        dir: Option<PathBuf>,
        /// Also write config.yaml with every secret value (keys named like key, token, secret,
        /// password) replaced by a placeholder, keeping what names a variable (`apiKeyEnv`,
        /// `${VAR}`); .env is never copied.
        #[arg(long, conflicts_with = "archive")]
        with_config: bool,
        /// Write the layout as one tar archive instead (- for stdout); zstd-compressed when the
        /// name ends in .zst.
        #[arg(long, value_name = "FILE")]
        archive: Option<PathBuf>,
        /// With --archive: only what changed after this earlier archive of the store.
        #[arg(long, value_name = "OLD", requires = "archive")]
        since: Option<PathBuf>,
    },
    /// Read a file layout (cas/<ID>.bin or cas/nodes/<ID>.bin, threads, registry, history).
    Import {
        /// Source directory, or an archive of `uwf export --archive` (tar or zstd tar; - for
        /// stdin).
        dir: PathBuf,
        /// Replace thread heads and workflow names that exist with other values.
        #[arg(long)]
        overwrite: bool,
        /// Another CAS directory whose nodes are imported too (e.g. the TypeScript CLI's
        /// ~/.uncaged/json-cas); may repeat.
        #[arg(long, value_name = "DIR")]
        cas: Vec<PathBuf>,
    },
    /// Threads: start, step, run, show, list, steps, read, fork, pause, resume, kill, stop, rm.
    #[command(subcommand)]
    Thread(thread::ThreadCommand),
    /// Steps of a thread (the TypeScript tool's later names).
    #[command(subcommand)]
    Step(thread::StepCommand),
    /// The agent kit (context, submit) and the built-in agents (scripted, llm, command).
    #[command(subcommand)]
    Agent(agent::AgentCmd),
    /// Drive active threads to their end, many at once (Ctrl-C: finish running steps, then
    /// stop; twice: stop at once).
    Run(run::RunArgs),
    /// The steps running now, across every process using the store.
    Ps,
    /// A read-only web view of the store: threads with live states, steps, graphs,
    /// workflows, and a JSON API under /api/ (on 127.0.0.1 unless --bind says otherwise).
    Serve(serve::ServeArgs),
    /// Configure a provider, the default model and the default agent (asks on a terminal
    /// when no flag is given); writes config.yaml with mode 0600.
    Setup(setup::SetupArgs),
    /// Read and change config.yaml: list, get, set, path (secrets shown masked).
    #[command(subcommand)]
    Config(setup::ConfigCmd),
    /// Reference texts (markdown) for users, workflow authors and agent writers.
    Skill {
        /// Which text; without one (or `list`), their names.
        #[arg(value_enum)]
        name: Option<skill::Skill>,
    },
    /// The structured logs of <root>/logs: list, show (--follow), clean.
    #[command(subcommand, visible_alias = "logs")]
    Log(log::LogCmd),
    /// The store itself: where it is and what it holds, and copying it to another backend.
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// Per-workflow limits kept in the store, enforced by every runner that shares it.
    #[command(subcommand)]
    Limits(store_cmd::LimitsCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write manual pages: one per command into DIR, or the main page to stdout.
    Man {
        /// Directory for uwf.1, uwf-thread.1, uwf-thread-start.1, …
        dir: Option<PathBuf>,
    },
}

/// `uwf completions SHELL`.
fn completions(shell: clap_complete::Shell) -> CliResult {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(), "uwf", &mut out);
    output::write_stdout(&out)
}

/// `uwf man [DIR]`: the main page to stdout, or a page per command (`uwf-thread-start.1`)
/// into `dir`.
fn man(dir: Option<&std::path::Path>) -> CliResult {
    let mut cmd = command();
    cmd.build();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        return output::write_stdout(&out);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", dir.display())))?;
    let mut pages = Vec::new();
    collect_pages(&cmd, "uwf", &mut pages);
    let mut written = String::new();
    for (name, page) in pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(page).render(&mut out)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, out)
            .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
        written.push_str(&format!("{}\n", path.display()));
    }
    output::write_stdout(written.as_bytes())
}

/// `cmd` and its subcommands (not `help`), each named by its path (`uwf-thread-start`).
fn collect_pages(cmd: &clap::Command, name: &str, out: &mut Vec<(String, clap::Command)>) {
    out.push((
        name.to_string(),
        cmd.clone()
            .name(name.to_string())
            .bin_name(name.replace('-', " ")),
    ));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        collect_pages(sub, &format!("{name}-{}", sub.get_name()), out);
    }
}

/// What a command needs from its surroundings.
pub(crate) struct Env {
    /// The storage root.
    pub root: PathBuf,
    /// Output format.
    pub format: Format,
    /// Milliseconds since the epoch, read once.
    pub now_ms: u64,
    /// `--format` when given on the command line.
    pub explicit_format: Option<Format>,
    /// Whether stderr is a terminal (progress bars).
    pub stderr_tty: bool,
    /// The working directory.
    pub cwd: PathBuf,
    /// Where the TypeScript tool may have kept the root's nodes besides `<root>/cas`:
    /// `$UNCAGED_CAS_DIR`, and `~/.uncaged/json-cas` when the root was found its way (not
    /// through `UWF_HOME`). Read by the automatic import of a file-layout root.
    pub ts_cas: Vec<PathBuf>,
    /// A fixed clock (`UWF_TEST_NOW_MS`, for tests): every reading of the time gives it.
    fixed_now: Option<u64>,
    /// A fixed random seed (`UWF_TEST_SEED`, for tests) and how many ids it has made.
    seed: Option<(u64, std::cell::Cell<u64>)>,
    /// `<root>/.env`, once read.
    dotenv_file: std::cell::OnceCell<Vec<(String, String)>>,
    /// Where the store is when not `<root>/uwf.redb`: `--store`, `UWF_STORE` or `store:` in
    /// config.yaml; a PostgreSQL URL or a redb file path.
    pub store: Option<String>,
}

/// Milliseconds since the epoch from the system clock.
fn system_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Env {
    /// The time now, ms since the epoch (the fixed clock in tests).
    pub(crate) fn clock(&self) -> u64 {
        self.fixed_now.unwrap_or_else(system_now_ms)
    }

    /// The clock as a value other threads can read: the fixed time in tests, else the
    /// system clock.
    pub(crate) fn shared_clock(&self) -> std::sync::Arc<dyn Fn() -> u64 + Send + Sync> {
        match self.fixed_now {
            Some(t) => std::sync::Arc::new(move || t),
            None => std::sync::Arc::new(system_now_ms),
        }
    }

    /// A new thread id for the time of the command: random bits from the system, or from the
    /// fixed seed in tests (each id of a process from the next number).
    pub(crate) fn new_thread_id(&self) -> ThreadId {
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

    /// The variables of `<root>/.env` that the environment does not set (the environment
    /// wins, as dotenv loads them).
    pub fn dotenv(&self) -> Vec<(String, String)> {
        self.dotenv_file()
            .iter()
            .filter(|(k, _)| std::env::var_os(k).is_none())
            .cloned()
            .collect()
    }

    /// Every variable of `<root>/.env`, read once per process.
    fn dotenv_file(&self) -> &[(String, String)] {
        self.dotenv_file.get_or_init(|| {
            std::fs::read_to_string(self.root.join(".env"))
                .map(|t| crate::thread::config::parse_dotenv(&t))
                .unwrap_or_default()
        })
    }

    /// What agents run with, from one read of `.env`: the models of `config` (keys looked up
    /// in the environment, then in `.env`) and the variables added to an agent's environment
    /// (`.env`, and `UWF_NO_LLM=1` with `no_llm`, which also turns model extraction off).
    pub(crate) fn agent_setup(
        &self,
        config: &crate::thread::Config,
        no_llm: bool,
    ) -> (crate::builtin::Models, Vec<(String, String)>) {
        let mut vars = self.dotenv();
        let models = self.models(config, no_llm, &vars);
        if no_llm {
            vars.push(("UWF_NO_LLM".into(), "1".into()));
        }
        // The store this process was pointed at (`--store`, `UWF_STORE`, `store:`), so that an
        // agent's `uwf agent submit` writes where the step reads, whatever its working
        // directory (a file as an absolute path).
        if self.store.is_some() {
            let s = match self.server_url() {
                Some(url) => url.to_string(),
                None => self.db_path().display().to_string(),
            };
            vars.push(("UWF_STORE".into(), s));
        }
        (models, vars)
    }

    /// The models of `config`, their keys looked up in the environment, then in `dotenv`.
    /// `no_llm` turns model extraction off.
    fn models(
        &self,
        config: &crate::thread::Config,
        no_llm: bool,
        dotenv: &[(String, String)],
    ) -> crate::builtin::Models {
        let dotenv: std::collections::HashMap<String, String> = dotenv.iter().cloned().collect();
        let vars: crate::builtin::Vars = std::sync::Arc::new(move |k: &str| {
            std::env::var(k)
                .ok()
                .or_else(|| dotenv.get(k).cloned())
                .filter(|v| !v.is_empty())
        });
        let mut m = crate::builtin::Models::new(config.clone(), vars);
        if no_llm {
            m.llm_extract = false;
        }
        m
    }

    /// The store file: `<root>/uwf.redb`, or the file `--store` (`UWF_STORE`, `store:`)
    /// names; with a server URL, the path where the file would be (it is never created).
    pub(crate) fn db_path(&self) -> PathBuf {
        match &self.store {
            Some(s) if !Store::is_server_url(s) => self.cwd.join(s),
            _ => self.root.join(store::DB_FILE),
        }
    }

    /// The PostgreSQL URL the store is on, if any.
    pub(crate) fn server_url(&self) -> Option<&str> {
        self.store.as_deref().filter(|s| Store::is_server_url(s))
    }

    /// Opens the store for writing, creating it on first use. A root that has only the
    /// TypeScript tool's file layout is imported first into a new redb file (never into a
    /// server: `uwf import` does that).
    ///
    /// # Errors
    /// A store that cannot be opened.
    pub(crate) fn open_rw(&self) -> CliResult<Store> {
        if let Some(url) = self.server_url() {
            return Ok(Store::open_url(url, &|k| std::env::var(k).ok())?);
        }
        if self.store.is_none()
            && let Some(s) = interchange::auto_import(self)?
        {
            return Ok(s);
        }
        Ok(Store::open(&self.db_path())?)
    }

    /// Opens the store for reading; creates it when it does not exist yet.
    ///
    /// # Errors
    /// A store that cannot be opened.
    pub(crate) fn open_ro(&self) -> CliResult<Store> {
        if self.server_url().is_some() {
            return self.open_rw();
        }
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
    let argv: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Colour only where the stream is a terminal (clap checks that) and never with NO_COLOR.
    let color = if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        clap::ColorChoice::Never
    } else {
        clap::ColorChoice::Auto
    };
    let parsed = command()
        .color(color)
        .try_get_matches_from(args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
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
    // The page cache of the store, in MiB (64 unless set).
    if let Some(mb) = number("UWF_CACHE_MB").filter(|&m| m > 0) {
        store::set_cache_size(usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX));
    }
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let root = store::resolve_root(|k| std::env::var(k).ok());
    let mut ts_cas: Vec<PathBuf> = var("UNCAGED_CAS_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if var("UWF_HOME").is_none()
        && let Some(home) = var("HOME")
    {
        ts_cas.push(Path::new(&home).join(".uncaged").join("json-cas"));
    }
    ts_cas.retain(|c| *c != root.join(crate::interchange::layout::CAS_DIR));
    ts_cas.dedup();
    let root_for_config = root.clone();
    let env = Env {
        root,
        ts_cas,
        format: cli.format.unwrap_or(Format::Json),
        explicit_format: cli.format,
        now_ms: fixed_now.unwrap_or_else(system_now_ms),
        stderr_tty: std::io::stderr().is_terminal(),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        fixed_now,
        seed: number("UWF_TEST_SEED").map(|s| (s, std::cell::Cell::new(0))),
        dotenv_file: std::cell::OnceCell::new(),
        store: cli
            .store
            .clone()
            .filter(|s| !s.is_empty())
            .or_else(|| var("UWF_STORE"))
            .or_else(|| configured_store(&root_for_config)),
    };
    let logged = !matches!(
        cli.command,
        Command::Completions { .. } | Command::Man { .. } | Command::Skill { .. }
    );
    start_logging(&env, cli.verbose, logged, reads_only(&cli.command), &argv);
    // The store catches the database engine's panics in its own operations; this catches
    // those of the few reads that run outside them (a table a command iterates itself).
    let r = store::catching_damage(&env.db_path(), || {
        let r = match cli.command {
            Command::Cas(c) => cas::run(c, &env),
            Command::Workflow(c) => workflow::run(c, &env),
            Command::Export {
                dir,
                with_config,
                archive,
                since,
            } => match (archive, dir) {
                (Some(a), _) => interchange::export_archive(&env, &a, since.as_deref()),
                (None, dir) => interchange::export(
                    &env,
                    &dir.expect("clap requires DIR without --archive"),
                    with_config,
                ),
            },
            Command::Import {
                dir,
                overwrite,
                cas,
            } => interchange::import(&env, &dir, overwrite, &cas),
            Command::Thread(c) => thread::run(c, &env),
            Command::Step(c) => thread::run_step(c, &env),
            Command::Agent(c) => agent::run(c, &env),
            Command::Setup(a) => setup::setup(&env, a),
            Command::Run(a) => run::run(&env, a),
            Command::Ps => run::ps(&env),
            Command::Serve(a) => serve::serve(&env, a),
            Command::Config(c) => setup::config(&env, c),
            Command::Completions { shell } => completions(shell),
            Command::Man { dir } => man(dir.as_deref()),
            Command::Skill { name } => skill::run(name.unwrap_or(skill::Skill::List)),
            Command::Log(c) => log::run(c, &env),
            Command::Store(c) => store_cmd::run(c, &env),
            Command::Limits(c) => store_cmd::limits(c, &env),
        };
        r.map_err(|e| match did_you_mean(&env, &e) {
            Some(h) => e.hint(h),
            None => e,
        })
    });
    let code = match r {
        Ok(()) => 0,
        Err(e) => {
            if !e.quiet {
                tracing::warn!(
                    tag = "K7RW2QX4",
                    code = e.code(),
                    "command failed: {}",
                    e.message
                );
            }
            e.report(cli.format == Some(Format::Json));
            e.code()
        }
    };
    crate::logs::close();
    code
}

/// `store:` in `<root>/config.yaml`, if set (a config that does not parse sets nothing here;
/// the commands that read it report it).
fn configured_store(root: &Path) -> Option<String> {
    let c = crate::thread::Config::load(root).ok()?;
    let s = c.doc.get("store")?.as_str()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Sends this process's events to `<root>/logs/` (with `file`) and, with `-v` or `UWF_LOG`, to
/// stderr; masks the values of `.env` and of variables named like secrets; logs the start.
fn start_logging(env: &Env, verbose: u8, file: bool, reads_only: bool, argv: &[String]) {
    use tracing_subscriber::filter::Targets;
    let stderr = match verbose {
        0 => std::env::var("UWF_LOG")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .and_then(|v| v.parse::<Targets>().ok()),
        1 => Some(Targets::new().with_default(tracing::Level::INFO)),
        2 => Some(Targets::new().with_default(tracing::Level::DEBUG)),
        _ => Some(Targets::new().with_default(tracing::Level::TRACE)),
    };
    let file = file && std::env::var("UWF_LOG_FILE").map_or(true, |v| v != "0" && v != "off");
    if !file && stderr.is_none() {
        return;
    }
    for (_, v) in env.dotenv_file() {
        crate::logs::mask(v);
    }
    for (k, v) in std::env::vars() {
        let k = k.to_ascii_uppercase();
        if ["KEY", "TOKEN", "SECRET", "PASSWORD"]
            .iter()
            .any(|w| k.contains(w))
        {
            crate::logs::mask(&v);
        }
    }
    if let Some(url) = env.server_url()
        && let Some(pw) = store::url_password(url)
    {
        crate::logs::mask(&pw);
    }
    let root = env.root.clone();
    let sink = file.then(|| crate::logs::Sink {
        dir: env.root.join(crate::logs::DIR),
        pid: format!("{}-{}", env.now_ms, std::process::id()).into(),
        clock: env.shared_clock(),
        keep_days: Box::new(move || {
            crate::thread::Config::load(&root)
                .ok()
                .and_then(|c| c.doc.get("logs")?.get("keepDays")?.as_f64())
                .map_or(30, |d| d.clamp(0.0, 1e6) as u32)
        }),
    });
    crate::logs::install(sink, stderr);
    let argv = serde_json::to_string(&crate::logs::masked_argv(argv)).unwrap_or_default();
    let version = env!("CARGO_PKG_VERSION");
    // A command that only reads says nothing worth a line in the file unless it fails.
    if reads_only {
        tracing::debug!(
            tag = crate::logs::START_TAG,
            "process start argv={argv} uwf={version}"
        );
    } else {
        tracing::info!(
            tag = crate::logs::START_TAG,
            "process start argv={argv} uwf={version}"
        );
    }
}

/// Whether `c` only reads the store, the config and the logs (its start is logged at debug).
fn reads_only(c: &Command) -> bool {
    use cas::{CasCommand as C, SchemaCommand as S};
    use thread::{StepCommand as P, ThreadCommand as T};
    use workflow::WorkflowCommand as W;
    matches!(
        c,
        Command::Cas(
            C::Get { .. }
                | C::Hash { .. }
                | C::Has { .. }
                | C::Refs { .. }
                | C::Walk { .. }
                | C::Verify
                | C::Count
                | C::Pins
                | C::Schema(S::List | S::Get { .. })
        ) | Command::Workflow(W::Show { .. } | W::List | W::Validate { .. } | W::History { .. })
            | Command::Thread(
                T::Show { .. }
                    | T::List { .. }
                    | T::Steps { .. }
                    | T::Read { .. }
                    | T::StepDetails { .. }
            )
            | Command::Step(P::List { .. } | P::Show { .. } | P::Read { .. })
            | Command::Agent(agent::AgentCmd::Context { .. })
            | Command::Ps
            | Command::Config(
                setup::ConfigCmd::List | setup::ConfigCmd::Get { .. } | setup::ConfigCmd::Path
            )
            | Command::Log(log::LogCmd::List | log::LogCmd::Show(_))
            | Command::Store(store_cmd::StoreCommand::Info)
            | Command::Limits(store_cmd::LimitsCommand::List)
    )
}
