//! `uwf run` (drive threads to their end, many at once) and `uwf ps` (the steps running now,
//! across every process using the store).

use super::output::{print, print_as, to_value, write_stdout};
use super::{CliError, CliResult, Env, Format, handoff};
use crate::query::runs;
use crate::runner::{self, Event, RunOptions, Stop};
use crate::thread::{self, AgentCommand, Submissions};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

// `uwf run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// Steps running at once.
    #[arg(short = 'j', long, default_value_t = 4)]
    jobs: usize,
    /// Only threads of these workflows (names; may repeat).
    #[arg(long = "workflow", value_name = "NAME")]
    workflows: Vec<String>,
    /// Only these threads (may repeat).
    #[arg(long = "thread", value_name = "ID")]
    threads: Vec<String>,
    /// Exit when nothing is left to do, instead of waiting for new threads.
    #[arg(long)]
    until_idle: bool,
    /// Seconds running steps may go on after Ctrl-C or SIGTERM before their agents are killed.
    #[arg(long, default_value = "10", value_name = "SECONDS")]
    grace: f64,
    /// Agent command for every step; overrides config.yaml.
    #[arg(long)]
    agent: Option<String>,
    /// Agent time limit in seconds; overrides config.yaml timeoutSeconds (default 600).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Never ask a model to extract an output without valid frontmatter.
    #[arg(long)]
    no_llm: bool,
}

fn seconds(what: &str, s: f64) -> CliResult<Duration> {
    if (0.0..1e9).contains(&s) {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(CliError::new(format!(
            "{what} must be a non-negative number of seconds, got: {s}"
        )))
    }
}

/// Steps taken, threads completed and failed: overall and per workflow in `uwf run`'s summary.
#[derive(Serialize)]
struct Counts {
    steps: u64,
    completed: u64,
    failed: u64,
}

impl From<&runner::Counts> for Counts {
    fn from(c: &runner::Counts) -> Self {
        Counts {
            steps: c.steps,
            completed: c.completed,
            failed: c.failed,
        }
    }
}

/// `uwf run`'s summary.
#[derive(Serialize)]
struct Summary<'a> {
    steps: u64,
    completed: u64,
    failed: u64,
    errors: u64,
    workflows: BTreeMap<&'a str, Counts>,
}

/// The last line of `uwf run --format json`.
#[derive(Serialize)]
struct SummaryLine<'a> {
    summary: &'a Summary<'a>,
}

/// A line of `uwf run --format json`: a thread that ended.
#[derive(Serialize)]
struct Finished<'a> {
    thread: &'a str,
    workflow: &'a str,
    status: &'a str,
    steps: u64,
    error: Option<&'a str>,
}

/// Where the submit socket's directory goes: `$XDG_RUNTIME_DIR`, else the system's temporary
/// directory.
fn socket_parent() -> std::path::PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty() && std::path::Path::new(d).is_dir())
        .map_or_else(std::env::temp_dir, std::path::PathBuf::from)
}

/// `uwf run`.
// Long: set-up in the order its parts need each other (store, socket, guardian, signals), then the
// run and its summary.
pub(crate) fn run(env: &Env, a: RunArgs) -> CliResult {
    let config = env.config()?;
    let store = Arc::new(env.open_rw()?);
    let mut threads = Vec::new();
    for t in &a.threads {
        threads.push(super::thread::thread_id(env, t)?);
    }
    let (models, mut agent_env) = env.agent_setup(config, a.no_llm);
    // Agents' `uwf agent submit` hands its submission to this process, which holds it for its
    // step's head move (or writes it through its group commit when no step of the thread waits
    // for it); without the socket they open the store themselves.
    let submissions = Arc::new(Submissions::default());
    let _submit = match env.server_url() {
        Some(_) => None,
        None => match handoff::Service::start(store.clone(), submissions.clone(), &socket_parent())
        {
            Ok(s) => {
                agent_env.push((
                    handoff::SOCKET_VAR.to_string(),
                    s.socket().display().to_string(),
                ));
                Some(s)
            }
            Err(e) => {
                tracing::warn!(
                    tag = "Q3SKT9WN",
                    error = %e,
                    "no submit socket: agents open the store themselves"
                );
                None
            }
        },
    };
    let opts = RunOptions {
        root: env.root.clone(),
        jobs: a.jobs.max(1),
        workflows: a.workflows,
        threads,
        until_idle: a.until_idle,
        grace: seconds("--grace", a.grace)?,
        agent: a.agent.as_deref().map(AgentCommand::parse).transpose()?,
        timeout: a
            .timeout
            .map(|t| seconds("--timeout", t))
            .transpose()?
            .filter(|d| !d.is_zero()),
        env: agent_env,
        fallback_cwd: std::env::current_dir()?,
        self_exe: std::env::current_exe().ok(),
        submissions: _submit.is_some().then_some(submissions),
    };
    let models = Arc::new(models);
    // Many agents at once from a large process: start them without forking it, under a
    // guardian that ends them with this process.
    if let Some(exe) = &opts.self_exe {
        crate::engine::guard_agents(exe)
            .map_err(|e| CliError::new(format!("cannot start the agents' guardian: {e}")))?;
    }
    let stop = Arc::new(Stop::new()?);
    // Ctrl-C or SIGTERM: the first stops new steps, the second kills the running ones.
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])?;
    let handle = signals.handle();
    let s2 = stop.clone();
    let listener = std::thread::spawn(move || {
        for sig in signals.forever() {
            s2.request(sig);
        }
    });
    let now = env.shared_clock();
    let lines = env.explicit_format == Some(Format::Json);
    let tty = env.stderr_tty;
    let mut last_progress = std::time::Instant::now();
    let result = runner::run(
        store,
        Arc::new(config.clone()),
        models,
        opts,
        now,
        stop,
        |ev| match ev {
            Event::Finished {
                thread,
                workflow,
                status,
                steps,
                error,
            } => {
                tracing::info!(
                    tag = "EQ4DHV0S",
                    thread = %thread,
                    workflow = %workflow,
                    status = %status,
                    steps,
                    "run: thread finished"
                );
                if tty {
                    eprint!("\r\x1b[K");
                }
                if lines {
                    let line = Finished {
                        thread: thread.as_str(),
                        workflow: &workflow,
                        status: &status,
                        steps,
                        error: error.as_deref(),
                    };
                    let _ = write_stdout(format!("{}\n", to_value(&line).to_json()).as_bytes());
                } else if let Some(e) = error {
                    eprintln!("{thread} ({workflow}): {status}: {e}");
                }
            }
            Event::Budget { workflow, message } => {
                tracing::warn!(tag = "J3RX8EQM", workflow = %workflow, "run: {message}");
                if tty {
                    eprint!("\r\x1b[K");
                }
                eprintln!("uwf run: {message}");
            }
            Event::Progress {
                running,
                steps,
                completed,
                failed,
            } => {
                if tty && last_progress.elapsed() > Duration::from_millis(100) {
                    last_progress = std::time::Instant::now();
                    eprint!(
                        "\r\x1b[Kuwf run: {running} running, {steps} steps, {completed} completed, {failed} failed"
                    );
                    let _ = std::io::stderr().flush();
                }
            }
        },
    );
    handle.close();
    let _ = listener.join();
    if tty {
        eprint!("\r\x1b[K");
    }
    let summary = result?;
    tracing::info!(
        tag = "7CH0KJ3B",
        steps = summary.total.steps,
        completed = summary.total.completed,
        failed = summary.total.failed,
        errors = summary.errors,
        stopped_by = summary.stopped_by.unwrap_or(0),
        "run ended"
    );
    let out = Summary {
        steps: summary.total.steps,
        completed: summary.total.completed,
        failed: summary.total.failed,
        errors: summary.errors,
        workflows: summary
            .workflows
            .iter()
            .map(|(name, c)| (name.as_str(), Counts::from(c)))
            .collect(),
    };
    // Through `Value`, as every output: JavaScript's key order and number spelling.
    if lines {
        let line = to_value(&SummaryLine { summary: &out });
        write_stdout(format!("{}\n", line.to_json()).as_bytes())?;
    } else {
        print(env.format, &to_value(&out))?;
    }
    match summary.stopped_by {
        Some(sig) => Err(CliError::of(
            crate::ErrorKind::Interrupted(sig),
            format!(
                "uwf run: stopped by signal {sig}; running steps were ended and their threads left as they were"
            ),
        )),
        None => Ok(()),
    }
}

// `uwf ps`.
#[derive(Args, Debug)]
pub(crate) struct PsArgs {
    /// Print one object instead: the running steps, the steps and failed steps per minute over
    /// the last hour, and each workflow's threads by state with its limits and budgets (what
    /// uwf serve's /runs page shows).
    #[arg(long)]
    stats: bool,
}

/// `uwf ps`: `[{"thread","workflow","role","agent","pid","since","elapsedMs","holder",
/// "thisMachine"}]`, from the leases of live processes; with `--stats`, the dashboard
/// (`query::runs`).
pub(crate) fn ps(env: &Env, a: &PsArgs) -> CliResult {
    let config = env.config()?;
    let store = env.open_ro()?;
    let now = env.clock();
    for over in thread::budget::spent_days(&store, &|| active_workflows(&store), now)? {
        eprintln!("uwf ps: {over}");
    }
    if a.stats {
        print_as(env.format, &runs::runs(&store, config, now)?)
    } else {
        print_as(env.format, &runs::running(&store, config, now)?)
    }
}

/// The workflow names of the active threads (for the store-wide day budget).
fn active_workflows(store: &crate::store::Store) -> Vec<String> {
    let Ok(threads) = store.threads() else {
        return Vec::new();
    };
    let mut names: Vec<String> = threads
        .iter()
        .filter_map(|(t, _)| thread::running_role(store, t).ok().map(|r| r.0))
        .collect();
    names.sort();
    names.dedup();
    names
}
