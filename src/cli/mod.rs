//! The command line: argument parsing, output formats, errors and exit codes. Only this module
//! reads argv, the environment and the clock; it passes them to the library as values.

mod agent;
pub(crate) mod background;
mod cas;
mod env;
mod handoff;
mod interchange;
mod limits;
mod log;
pub(crate) mod output;
mod run;
mod serve;
mod setup;
mod skill;
mod start;
mod store_cmd;
pub(crate) mod thread;
mod tree;
mod usage;
pub(crate) mod workflow;

pub(crate) use crate::query::error::{CliError, CliResult, Missing};
pub(crate) use env::Env;
pub(crate) use output::Format;

use env::system_now_ms;

use crate::ErrorKind;
use crate::store::{self, StoreError};
use clap::{Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use tree::Group;

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

// Every command builds its arguments only when it is parsed or shown (`defer` here and on each
// group's enum; a group's commands are made only with it, see [`Group`]), so a process builds
// the arguments of the command it runs, not the whole tree's. The argument structs of deferred
// commands carry plain comments, not doc comments: clap takes a struct's doc comment for the
// command's about, and a deferred command gets its arguments after its variant's doc comment
// has set the about.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
enum Command {
    /// The content-addressed store.
    Cas(Group<cas::CasCommand>),
    /// Workflows: register, show, list, validate, history, rollback.
    Workflow(Group<workflow::WorkflowCommand>),
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
    Thread(Group<thread::ThreadCommand>),
    /// Steps of a thread (the TypeScript tool's later names).
    Step(Group<thread::StepCommand>),
    /// The agent kit (context, submit) and the built-in agents (scripted, llm, command).
    Agent(Group<agent::AgentCmd>),
    /// Drive active threads to their end, many at once (Ctrl-C: finish running steps, then
    /// stop; twice: stop at once).
    Run(run::RunArgs),
    /// The steps running now, across every process using the store.
    Ps(run::PsArgs),
    /// A web view of the store: threads with live states, steps, graphs, workflows and usage,
    /// the runners' dashboard (/runs: running steps, steps per minute, queues and limits),
    /// with actions (pause, resume, cancel, step, start) behind the token it prints, and a JSON
    /// API under /api/ (on 127.0.0.1 unless --bind says otherwise).
    Serve(serve::ServeArgs),
    /// Configure a provider, the default model and the default agent (asks on a terminal
    /// when no flag is given); writes config.yaml with mode 0600.
    Setup(setup::SetupArgs),
    /// Read and change config.yaml: list, get, set, path (secrets shown masked).
    Config(Group<setup::ConfigCmd>),
    /// Reference texts (markdown) for users, workflow authors and agent writers.
    Skill {
        /// Which text; without one (or `list`), their names.
        #[arg(value_enum)]
        name: Option<skill::Skill>,
    },
    /// The structured logs of <root>/logs: list, show (--follow), clean.
    #[command(visible_alias = "logs")]
    Log(Group<log::LogCmd>),
    /// The store itself: where it is and what it holds, and copying it to another backend.
    Store(Group<store_cmd::StoreCommand>),
    /// Per-workflow limits and budgets kept in the store, enforced by every runner that shares
    /// it.
    Limits(Group<limits::LimitsCommand>),
    /// Model calls, tokens and cost added up: the store's, a thread's or a workflow's.
    Usage(usage::UsageArgs),
    /// A Model Context Protocol server over stdio: the workflows and threads as tools; `uwf
    /// mcp config` prints a client's configuration for it.
    Mcp(crate::mcp::McpArgs),
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
    clap_complete::generate(shell, &mut tree::built(command()), "uwf", &mut out);
    output::write_stdout(&out)
}

/// `uwf man [DIR]`: the main page to stdout, or a page per command (`uwf-thread-start.1`)
/// into `dir`.
fn man(dir: Option<&Path>) -> CliResult {
    let cmd = tree::built(command());
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

/// Prints the message and hints to stderr, and with `json` a JSON error object after them.
fn report(e: &CliError, json: bool) {
    if e.quiet {
        return;
    }
    let mut err = std::io::stderr().lock();
    if !e.message.is_empty() {
        let _ = writeln!(err, "{}", e.message);
    }
    for h in &e.hints {
        let _ = writeln!(err, "hint: {h}");
    }
    if json {
        let _ = writeln!(err, "{}", e.to_json());
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
    let cli = match parse(args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let env = env_for(&cli);
    let logged = !matches!(
        cli.command,
        Command::Completions { .. } | Command::Man { .. } | Command::Skill { .. }
    );
    start_logging(&env, cli.verbose, logged, reads_only(&cli.command), &argv);
    // Traces of the steps this command runs, flushed when it ends (`OTEL_*`; off unset).
    let _traces = (logged && !reads_only(&cli.command))
        .then(|| crate::traces::start(&|k| std::env::var(k).ok()))
        .flatten();
    // The store catches the database engine's panics in its own operations; this catches
    // those of the few reads that run outside them (a table a command iterates itself).
    let r = store::catching_damage(&env.db_path(), || {
        dispatch(cli.command, &env).map_err(|e| match did_you_mean(&env, &e) {
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
            report(&e, cli.format == Some(Format::Json));
            e.code()
        }
    };
    crate::logs::close();
    code
}

/// The command line `args` parsed; else clap's message printed and the exit code.
fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, i32> {
    // Colour only where the stream is a terminal (clap checks that) and never with NO_COLOR.
    let color = if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        clap::ColorChoice::Never
    } else {
        clap::ColorChoice::Auto
    };
    // The tree of every subcommand and the matches are left to the process's exit rather than
    // dropped: freeing them took close to a tenth of a short command's instructions.
    let mut cmd = std::mem::ManuallyDrop::new(command().color(color));
    let parsed = cmd.try_get_matches_from_mut(args).and_then(|m| {
        <Cli as clap::FromArgMatches>::from_arg_matches(&std::mem::ManuallyDrop::new(m))
    });
    parsed.map_err(|e| {
        // clap's whole message: usage errors name what is wrong and how to get help.
        let _ = e.print();
        if e.use_stderr() {
            ErrorKind::Usage.exit_code()
        } else {
            0
        }
    })
}

/// The environment of the command `cli`, from its options and the process's variables; sets
/// the store's page cache size.
fn env_for(cli: &Cli) -> Env {
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
    let mut env = Env {
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
        config: std::cell::OnceCell::new(),
        auto_import: interchange::auto_import,
        store: None,
    };
    env.store = cli
        .store
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| var("UWF_STORE"))
        .or_else(|| configured_store(&env));
    env
}

/// Runs `command` in `env`.
fn dispatch(command: Command, env: &Env) -> CliResult {
    match command {
        Command::Cas(Group(c)) => cas::run(c, env),
        Command::Workflow(Group(c)) => workflow::run(c, env),
        Command::Export {
            dir,
            with_config,
            archive,
            since,
        } => match (archive, dir) {
            (Some(a), _) => interchange::export_archive(env, &a, since.as_deref()),
            (None, dir) => interchange::export(
                env,
                &dir.expect("clap requires DIR without --archive"),
                with_config,
            ),
        },
        Command::Import {
            dir,
            overwrite,
            cas,
        } => interchange::import(env, &dir, overwrite, &cas),
        Command::Thread(Group(c)) => thread::run(c, env),
        Command::Step(Group(c)) => thread::run_step(c, env),
        Command::Agent(Group(c)) => agent::run(c, env),
        Command::Setup(a) => setup::setup(env, a),
        Command::Run(a) => run::run(env, a),
        Command::Ps(a) => run::ps(env, &a),
        Command::Serve(a) => serve::serve(env, a),
        Command::Config(Group(c)) => setup::config(env, c),
        Command::Skill { name } => skill::run(name.unwrap_or(skill::Skill::List)),
        Command::Log(Group(c)) => log::run(c, env),
        Command::Store(Group(c)) => store_cmd::run(c, env),
        Command::Limits(Group(c)) => limits::limits(c, env),
        Command::Usage(a) => usage::run(a, env),
        Command::Mcp(a) => crate::mcp::run(a, env.root.clone()).map_err(CliError::new),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir.as_deref()),
    }
}

/// `store:` in `<root>/config.yaml`, if set (a config that does not parse sets nothing here;
/// the commands that read it report it).
fn configured_store(env: &Env) -> Option<String> {
    let c = env.config().ok()?;
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
    for (k, v) in std::env::vars_os() {
        if crate::logs::secret_name(k.as_encoded_bytes())
            && let Some(v) = v.to_str()
        {
            crate::logs::mask(v);
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
        Command::Cas(Group(
            C::Get { .. }
                | C::Hash { .. }
                | C::Has { .. }
                | C::Refs { .. }
                | C::Walk { .. }
                | C::Verify
                | C::Count
                | C::Pins
                | C::Schema(S::List | S::Get { .. })
        )) | Command::Workflow(Group(
            W::Show { .. } | W::List | W::Validate { .. } | W::History { .. }
        )) | Command::Thread(Group(
            T::Show { .. }
                | T::List { .. }
                | T::Steps { .. }
                | T::Read { .. }
                | T::StepDetails { .. }
        )) | Command::Step(Group(P::List { .. } | P::Show { .. } | P::Read { .. }))
            | Command::Agent(Group(agent::AgentCmd::Context { .. }))
            | Command::Ps(_)
            | Command::Config(Group(
                setup::ConfigCmd::List | setup::ConfigCmd::Get { .. } | setup::ConfigCmd::Path
            ))
            | Command::Log(Group(log::LogCmd::List | log::LogCmd::Show(_)))
            | Command::Store(Group(store_cmd::StoreCommand::Info))
            | Command::Limits(Group(limits::LimitsCommand::List))
            | Command::Usage(_)
    )
}
