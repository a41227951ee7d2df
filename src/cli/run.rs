//! `uwf run` (drive threads to their end, many at once) and `uwf ps` (the steps running now,
//! across every process using the store).

use super::output::{print, write_stdout};
use super::{CliError, CliResult, Env, Format, handoff};
use crate::cas::Value;
use crate::cas::value::Map;
use crate::engine::lease_is_live;
use crate::runner::{self, Event, RunOptions, Stop};
use crate::thread::{self, AgentCommand, Config};
use clap::Args;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// `uwf run`.
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

fn counts(c: &runner::Counts) -> Value {
    let mut m = Map::new();
    m.insert("steps".into(), Value::Number(c.steps as f64));
    m.insert("completed".into(), Value::Number(c.completed as f64));
    m.insert("failed".into(), Value::Number(c.failed as f64));
    Value::Object(m)
}

/// Where the submit socket's directory goes: `$XDG_RUNTIME_DIR`, else the system's temporary
/// directory.
fn socket_parent() -> std::path::PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty() && std::path::Path::new(d).is_dir())
        .map_or_else(std::env::temp_dir, std::path::PathBuf::from)
}

/// `uwf run`.
pub(crate) fn run(env: &Env, a: RunArgs) -> CliResult {
    let config = Config::load(&env.root)?;
    let store = Arc::new(env.open_rw()?);
    let mut threads = Vec::new();
    for t in &a.threads {
        threads.push(super::thread::thread_id(env, t)?);
    }
    let (models, mut agent_env) = env.agent_setup(&config, a.no_llm);
    // Agents' `uwf agent submit` hands its submission to this process, which writes it through
    // its group commit; without the socket they open the store themselves.
    let _submit = match env.server_url() {
        Some(_) => None,
        None => match handoff::Service::start(store.clone(), &socket_parent()) {
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
        Arc::new(config),
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
                    let mut m = Map::new();
                    m.insert("thread".into(), Value::str(thread.as_str()));
                    m.insert("workflow".into(), Value::str(workflow));
                    m.insert("status".into(), Value::str(status));
                    m.insert("steps".into(), Value::Number(steps as f64));
                    m.insert("error".into(), error.map_or(Value::Null, Value::str));
                    let _ = write_stdout(format!("{}\n", Value::Object(m).to_json()).as_bytes());
                } else if let Some(e) = error {
                    eprintln!("{thread} ({workflow}): {status}: {e}");
                }
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
    let mut per = Map::new();
    for (name, c) in &summary.workflows {
        per.insert(name.clone(), counts(c));
    }
    let mut out = Map::new();
    out.insert("steps".into(), Value::Number(summary.total.steps as f64));
    out.insert(
        "completed".into(),
        Value::Number(summary.total.completed as f64),
    );
    out.insert("failed".into(), Value::Number(summary.total.failed as f64));
    out.insert("errors".into(), Value::Number(summary.errors as f64));
    out.insert("workflows".into(), Value::Object(per));
    let out = Value::Object(out);
    if lines {
        let mut m = Map::new();
        m.insert("summary".into(), out);
        write_stdout(format!("{}\n", Value::Object(m).to_json()).as_bytes())?;
    } else {
        print(env.format, &out)?;
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

/// `uwf ps`: `[{"thread","workflow","role","agent","pid","since","elapsedMs"}]`, from the
/// leases of live processes.
pub(crate) fn ps(env: &Env) -> CliResult {
    let config = Config::load(&env.root)?;
    let store = env.open_ro()?;
    let now = env.clock();
    let mut rows = Vec::new();
    for (t, l) in store.leases()? {
        if !lease_is_live(&l) {
            continue;
        }
        let (workflow, role) = thread::running_role(&store, &t).unwrap_or_default();
        let agent = role
            .as_deref()
            .and_then(|r| config.agent_for(&workflow, r).ok())
            .map(|a| a.display());
        let mut m = Map::new();
        m.insert("thread".into(), Value::str(t.as_str()));
        m.insert("workflow".into(), Value::str(&workflow));
        m.insert("role".into(), role.map_or(Value::Null, Value::str));
        m.insert("agent".into(), agent.map_or(Value::Null, Value::str));
        m.insert("pid".into(), Value::Number(f64::from(l.pid)));
        m.insert("since".into(), Value::Number(l.since_ms as f64));
        m.insert(
            "elapsedMs".into(),
            Value::Number(now.saturating_sub(l.since_ms) as f64),
        );
        rows.push(Value::Object(m));
    }
    print(env.format, &Value::Array(rows))
}
