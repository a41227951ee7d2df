//! `uwf thread …` and `uwf step …`: threads and their steps.

use super::background;
use super::output::{NodeIdStr, print, print_as, write_stdout};
use super::{CliError, CliResult, Env};
use crate::engine::{self, Interrupt, StepOptions};
use crate::query::thread::{State, StepsOut, list_rows, shown};
use crate::thread::{
    self, AgentCommand, AgentProtocol, ListFilter, ReadOptions, Status, ThreadId, time::parse_time,
};
use clap::Subcommand;
use serde::Serialize;
use std::time::Duration;

#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum ThreadCommand {
    /// Start a thread of a workflow (id, file, .workflow/ name or registered name).
    Start(super::start::StartArgs),
    /// Run one or more steps: moderator, agent, head move (stops early at the end).
    #[command(visible_alias = "exec")]
    Step(StepArgs),
    /// Start a thread and step it until the workflow ends; prints each step's state.
    Run {
        /// The workflow.
        workflow: String,
        #[command(flatten)]
        prompt: super::start::PromptArgs,
        /// The thread's working directory (absolute; default: the current directory).
        #[arg(long)]
        cwd: Option<String>,
        /// Agent command, split into words as a shell does (quotes keep spaces); overrides config.yaml.
        #[arg(long)]
        agent: Option<String>,
        /// How --agent is called (default uwf).
        #[arg(long, value_enum, requires = "agent", value_name = "PROTOCOL")]
        agent_protocol: Option<ProtocolArg>,
        /// Most steps to run.
        #[arg(long, default_value = "100")]
        max_steps: String,
        /// Agent time limit in seconds; overrides config.yaml timeoutSeconds (default 600).
        #[arg(long)]
        timeout: Option<String>,
    },
    /// A thread's state.
    Show {
        /// Thread id.
        thread: String,
    },
    /// Threads, newest first (active ones unless --all or --status says otherwise).
    List {
        /// Include finished threads (completed, failed, cancelled, dropped).
        #[arg(long)]
        all: bool,
        /// Comma list of queued, idle, running, paused, completed, failed, cancelled, dropped
        /// and active (the first four).
        #[arg(long)]
        status: Option<String>,
        /// Only threads started after this (7d, 24h, 30m, or a date).
        #[arg(long)]
        after: Option<String>,
        /// Only threads started before this (7d, 24h, 30m, or a date).
        #[arg(long)]
        before: Option<String>,
        /// Rows to skip.
        #[arg(long, default_value_t = 0)]
        skip: usize,
        /// Rows to print at most.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        take: Option<u64>,
    },
    /// A thread's start and steps with expanded outputs.
    Steps {
        /// Thread id.
        thread: String,
    },
    /// A thread as markdown.
    Read {
        /// Thread id.
        thread: String,
        /// Characters of steps to show (default 4000).
        #[arg(long)]
        quota: Option<String>,
        /// Show only the steps before this step.
        #[arg(long)]
        before: Option<String>,
        /// Show the start section even with --before.
        #[arg(long)]
        start: bool,
    },
    /// Start a new thread whose head is a step (or StartNode).
    Fork {
        /// Step id or prefix (a thread id with --from-role).
        step: String,
        /// Fork the thread STEP names at the latest step of this role.
        #[arg(long, value_name = "ROLE")]
        from_role: Option<String>,
        /// Print only the new thread's id.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Remove threads: their records and archive entries (nodes stay); an active one only with
    /// --force, never one with a step running.
    Rm {
        /// Thread ids.
        #[arg(required = true)]
        threads: Vec<String>,
        /// Also remove active threads.
        #[arg(long)]
        force: bool,
    },
    /// Pause a thread: no step starts until it is resumed (a running step finishes).
    Pause {
        /// Thread id.
        thread: String,
    },
    /// Resume a paused thread, or a failed one (it becomes idle, its failures forgotten).
    Resume {
        /// Thread id.
        thread: String,
    },
    /// A step's detail, deep-expanded.
    StepDetails {
        /// Step id or prefix.
        step: String,
    },
    /// Cancel a thread: archive it with reason cancelled.
    #[command(visible_alias = "cancel")]
    Kill {
        /// Thread id.
        thread: String,
    },
    /// End a background run (`thread exec --background`) of a thread.
    Stop {
        /// Thread id.
        thread: String,
    },
}

// Arguments of `thread step`.
#[derive(clap::Args, Debug)]
pub(crate) struct StepArgs {
    /// Thread id.
    thread: String,
    /// Agent command, split into words as a shell does (quotes keep spaces); overrides config.yaml.
    #[arg(long)]
    agent: Option<String>,
    /// How --agent is called (default uwf).
    #[arg(long, value_enum, requires = "agent", value_name = "PROTOCOL")]
    agent_protocol: Option<ProtocolArg>,
    /// Steps to run (stops early at $END).
    #[arg(short = 'c', long, default_value = "1", allow_hyphen_values = true)]
    count: String,
    /// Agent time limit in seconds; overrides config.yaml timeoutSeconds (default 600).
    #[arg(long)]
    timeout: Option<String>,
    /// Never ask a model to extract an output without valid frontmatter (the step fails).
    #[arg(long)]
    no_llm: bool,
    /// Run the steps in a detached uwf process and return at once (`thread stop` ends it).
    #[arg(long)]
    background: bool,
    /// This process is the detached worker of a background run.
    #[arg(long = "_background-worker", hide = true)]
    background_worker: bool,
}

/// `--agent-protocol`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum ProtocolArg {
    /// `CMD <thread> <role>`, the agent uses the store.
    Uwf,
    /// The TypeScript tool's `CMD --thread T --role R --prompt P`, on threads.yaml and cas/.
    #[value(name = "7a0c")]
    Ts7a0c,
}

impl ProtocolArg {
    /// The value as written on the command line.
    fn name(self) -> &'static str {
        match self {
            ProtocolArg::Uwf => "uwf",
            ProtocolArg::Ts7a0c => "7a0c",
        }
    }
}

impl From<ProtocolArg> for AgentProtocol {
    fn from(p: ProtocolArg) -> Self {
        match p {
            ProtocolArg::Uwf => AgentProtocol::Uwf,
            ProtocolArg::Ts7a0c => AgentProtocol::Ts7a0c,
        }
    }
}

#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum StepCommand {
    /// A thread's steps (same as `thread steps`).
    List {
        /// Thread id.
        thread: String,
    },
    /// A step's detail, deep-expanded (same as `thread step-details`).
    Show {
        /// Step id or prefix.
        step: String,
    },
    /// Start a new thread at a step (same as `thread fork`).
    Fork {
        /// Step id or prefix.
        step: String,
        /// Print only the new thread's id.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// A step's turns as markdown, newest first within the quota.
    Read {
        /// Step id or prefix.
        step: String,
        /// Characters to show at most (default 4000).
        #[arg(long)]
        quota: Option<String>,
        /// Show the assembled prompt the agent was given instead of the turns.
        #[arg(long)]
        prompt: bool,
    },
}

/// `thread kill`.
#[derive(Serialize)]
struct Cancelled<'a> {
    thread: &'a str,
    cancelled: bool,
}

/// `thread stop`.
#[derive(Serialize)]
struct Stopped<'a> {
    thread: &'a str,
    stopped: bool,
}

/// `thread fork`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Forked<'a> {
    thread: &'a str,
    forked_from: ForkedFrom,
}

/// The step a fork starts at.
#[derive(Serialize)]
struct ForkedFrom {
    step: NodeIdStr,
}

/// `--quota` of the `read` commands.
fn quota_arg(q: Option<&str>) -> CliResult<usize> {
    match q {
        None => Ok(thread::DEFAULT_QUOTA),
        Some(q) => thread::parse_quota(q)
            .ok_or_else(|| CliError::new("invalid --quota: must be a positive integer")),
    }
}

/// A thread id argument: a whole id, or a unique prefix of 4+ characters (any case) of a stored
/// thread's id.
pub(crate) fn thread_id(env: &Env, s: &str) -> CliResult<ThreadId> {
    if let Ok(t) = ThreadId::parse(s) {
        return Ok(t);
    }
    // A prefix is looked up in the store, which is not made for it when it does not exist yet.
    let store = if env.server_url().is_some() || env.db_path().exists() {
        Some(env.open_ro()?)
    } else {
        None
    };
    Ok(thread::resolve_thread(store.as_ref(), s)?)
}

pub(crate) fn run(c: ThreadCommand, env: &Env) -> CliResult {
    match c {
        ThreadCommand::Start(a) => super::start::cmd_start(env, a),
        ThreadCommand::Step(a) => step(env, a),
        ThreadCommand::Run {
            workflow,
            prompt,
            cwd,
            agent,
            agent_protocol,
            max_steps,
            timeout,
        } => {
            let (_, t, _) = super::start::start_thread(env, &workflow, &prompt.text()?, cwd, None)?;
            eprintln!("started thread {}", t.as_str());
            let args = StepArgs {
                thread: t.as_str().to_string(),
                agent,
                agent_protocol,
                count: max_steps,
                timeout,
                no_llm: false,
                background: false,
                background_worker: false,
            };
            step(env, args)
        }
        ThreadCommand::Show { thread } => cmd_show(env, &thread),
        ThreadCommand::List {
            all,
            status,
            after,
            before,
            skip,
            take,
        } => {
            let f = ListFilter {
                statuses: status.as_deref().map(Status::parse_list).transpose()?,
                all,
                after: after.map(|a| parse_time(&a, env.now_ms)).transpose()?,
                before: before.map(|b| parse_time(&b, env.now_ms)).transpose()?,
                skip,
                take: take.map(|t| t as usize),
                background: background::running_threads(&env.root),
            };
            cmd_list(env, &f)
        }
        ThreadCommand::Steps { thread } => steps(env, &thread),
        ThreadCommand::Read {
            thread,
            quota,
            before,
            start,
        } => cmd_read(env, &thread, quota.as_deref(), before.as_deref(), start),
        ThreadCommand::Fork {
            step,
            from_role,
            quiet,
        } => fork(env, &step, from_role.as_deref(), quiet),
        ThreadCommand::Rm { threads, force } => cmd_rm(env, &threads, force),
        ThreadCommand::Pause { thread } => {
            let t = thread_id(env, &thread)?;
            let s = env.open_rw()?;
            thread::pause(&s, &t)?;
            tracing::info!(tag = "33T63CJ0", thread = %t, "thread paused");
            print_as(env.format, &State::from(&thread::show(&s, &t)?))
        }
        ThreadCommand::Resume { thread } => {
            let t = thread_id(env, &thread)?;
            let s = env.open_rw()?;
            thread::resume(&s, &t, env.now_ms)?;
            tracing::info!(tag = "MHYYD0CX", thread = %t, "thread resumed");
            print_as(env.format, &State::from(&thread::show(&s, &t)?))
        }
        ThreadCommand::StepDetails { step } => details(env, &step),
        ThreadCommand::Kill { thread } => cmd_kill(env, &thread),
        ThreadCommand::Stop { thread } => stop(env, &thread),
    }
}

/// `thread show THREAD`.
fn cmd_show(env: &Env, thread: &str) -> CliResult {
    let t = thread_id(env, thread)?;
    let s = env.open_ro()?;
    let out = shown(&env.root, &s, &t)?;
    print_as(env.format, &State::from(&out))
}

/// `thread list`.
fn cmd_list(env: &Env, f: &ListFilter) -> CliResult {
    let s = env.open_ro()?;
    let rows = thread::list(&s, f)?;
    print_as(env.format, &list_rows(&rows))
}

/// `thread read THREAD`.
fn cmd_read(
    env: &Env,
    thread: &str,
    quota: Option<&str>,
    before: Option<&str>,
    start: bool,
) -> CliResult {
    let t = thread_id(env, thread)?;
    let quota = quota_arg(quota)?;
    let s = env.open_ro()?;
    let before = before.map(|b| thread::resolve_step(&s, b)).transpose()?;
    let md = thread::read(
        &s,
        &t,
        &ReadOptions {
            quota,
            before,
            start,
        },
    )?;
    write_stdout(thread::with_newline(md).as_bytes())
}

/// `thread kill THREAD`.
fn cmd_kill(env: &Env, thread: &str) -> CliResult {
    let t = thread_id(env, thread)?;
    // A background run of the thread ends first, so no step of it lands afterwards.
    if let Some(pid) = background::live_marker(&env.root, &t) {
        background::terminate(pid, &t, Duration::from_secs(30));
        background::remove_marker_of(&env.root, &t, pid);
    }
    let config = env.config()?;
    let s = env.open_rw()?;
    thread::kill(&s, &t, env.now_ms)?;
    // Room for a queued thread of its workflow.
    thread::promote(&s, config)?;
    let out = Cancelled {
        thread: t.as_str(),
        cancelled: true,
    };
    print_as(env.format, &out)
}

/// One thread of `thread rm`.
#[derive(Serialize)]
struct RemovedThread<'a> {
    thread: &'a str,
    removed: bool,
}

/// `thread rm ID…`: removes each, prints those removed, then fails with the first refusal.
fn cmd_rm(env: &Env, threads: &[String], force: bool) -> CliResult {
    let ids = threads
        .iter()
        .map(|t| thread_id(env, t))
        .collect::<CliResult<Vec<_>>>()?;
    let s = env.open_rw()?;
    let mut done = Vec::new();
    let mut first_error = None;
    for t in &ids {
        match thread::remove(&s, t, force) {
            Ok(()) => {
                tracing::info!(tag = "P0XRR3QX", thread = %t, forced = force, "thread removed");
                done.push(t)
            }
            Err(e) if first_error.is_none() => first_error = Some(e),
            Err(_) => {}
        }
    }
    let out: Vec<RemovedThread> = done
        .iter()
        .map(|t| RemovedThread {
            thread: t.as_str(),
            removed: true,
        })
        .collect();
    print_as(env.format, &out)?;
    match first_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// `thread stop`: SIGTERM to the background run's process, which ends its agent, gives the
/// lease back and exits 143; waits for it to end, then removes the marker.
fn stop(env: &Env, thread: &str) -> CliResult {
    let t = thread_id(env, thread)?;
    let stopped = match background::live_marker(&env.root, &t) {
        Some(pid) => {
            if !background::terminate(pid, &t, Duration::from_secs(30)) {
                eprintln!("warning: process {pid} of thread {t} has not ended yet");
            }
            background::remove_marker_of(&env.root, &t, pid);
            true
        }
        None => {
            eprintln!("Warning: thread {t} is not currently running");
            false
        }
    };
    print_as(
        env.format,
        &Stopped {
            thread: t.as_str(),
            stopped,
        },
    )
}

/// `thread exec --background`: checks what the worker would check first, starts it detached,
/// writes the running marker and prints the thread's state as running.
fn start_background(env: &Env, a: &StepArgs, t: &ThreadId, count: u64) -> CliResult {
    if let Some(pid) = background::live_marker(&env.root, t) {
        return Err(CliError::of(
            crate::ErrorKind::Retry,
            format!("thread already executing in background (PID: {pid})"),
        ));
    }
    let mut out = {
        let s = env.open_ro()?;
        thread::show(&s, t)?
    };
    if out.done {
        return Err(CliError::new(format!("thread not active: {t}")));
    }
    // A step in progress in the foreground would make the worker fail at once.
    if out.status == Status::Running {
        return Err(CliError::of(
            crate::ErrorKind::Retry,
            format!("thread {t} is busy: a step is in progress"),
        )
        .hint(format!(
            "wait for that step to end; \"uwf thread show {t}\" shows when it has"
        )));
    }
    let mut args = vec![
        "thread".to_string(),
        "exec".to_string(),
        t.to_string(),
        "--count".to_string(),
        count.to_string(),
    ];
    for (flag, v) in [("--agent", &a.agent), ("--timeout", &a.timeout)] {
        if let Some(v) = v {
            args.push(flag.to_string());
            args.push(v.clone());
        }
    }
    if let Some(p) = a.agent_protocol {
        args.push("--agent-protocol".to_string());
        args.push(p.name().to_string());
    }
    if a.no_llm {
        args.push("--no-llm".to_string());
    }
    args.push("--_background-worker".to_string());
    let pid = background::spawn_detached(&args, &background::log_path(&env.root, t))?;
    background::write_marker(&env.root, t, &out.workflow, pid, env.clock())?;
    out.status = Status::Running;
    let v = State {
        background: Some(true),
        ..State::from(&out)
    };
    print_as(env.format, &v)
}

pub(crate) fn run_step(c: StepCommand, env: &Env) -> CliResult {
    match c {
        StepCommand::List { thread } => steps(env, &thread),
        StepCommand::Show { step } => details(env, &step),
        StepCommand::Fork { step, quiet } => fork(env, &step, None, quiet),
        StepCommand::Read {
            step,
            quota,
            prompt,
        } => {
            let quota = quota_arg(quota.as_deref())?;
            let s = env.open_ro()?;
            let id = thread::resolve_step(&s, &step)?;
            let md = thread::read_step(&s, id, quota, prompt)?;
            write_stdout(thread::with_newline(md).as_bytes())
        }
    }
}

fn steps(env: &Env, thread: &str) -> CliResult {
    let t = thread_id(env, thread)?;
    let s = env.open_ro()?;
    let steps = thread::steps(&s, &t)?;
    print_as(env.format, &StepsOut::new(t.as_str(), &steps))
}

fn details(env: &Env, step: &str) -> CliResult {
    let s = env.open_ro()?;
    let id = thread::resolve_step(&s, step)?;
    print(env.format, &thread::step_details(&s, id)?)
}

fn fork(env: &Env, step: &str, from_role: Option<&str>, quiet: bool) -> CliResult {
    let s = env.open_rw()?;
    let id = match from_role {
        Some(role) => thread::latest_step_of_role(&s, &thread_id(env, step)?, role)?,
        None => thread::resolve_step(&s, step)?,
    };
    let t = env.new_thread_id();
    thread::fork(&s, id, &t, env.now_ms)?;
    if quiet {
        return write_stdout(format!("{}\n", t.as_str()).as_bytes());
    }
    let out = Forked {
        thread: t.as_str(),
        forked_from: ForkedFrom {
            step: NodeIdStr(id),
        },
    };
    print_as(env.format, &out)
}

/// `Number(s)` in JavaScript: white space around, `""` is 0, `0x`/`0o`/`0b` integers,
/// `Infinity`, decimal literals; NaN for anything else.
fn js_number(s: &str) -> f64 {
    let t = s.trim_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}');
    if t.is_empty() {
        return 0.0;
    }
    let radix = match t.get(..2) {
        Some("0x" | "0X") => 16,
        Some("0o" | "0O") => 8,
        Some("0b" | "0B") => 2,
        _ => 10,
    };
    if radix != 10 {
        let digits = &t[2..];
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return f64::NAN;
        }
        return digits.chars().fold(0.0, |n, c| {
            n * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
        });
    }
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    if unsigned == "Infinity" {
        return if t.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    // Rust also reads `inf`, `nan` and `infinity`; JavaScript reads only digits, `.` and an
    // exponent here.
    let mantissa = unsigned.split(['e', 'E']).next().unwrap_or("");
    if !unsigned
        .bytes()
        .all(|c| c.is_ascii_digit() || b".eE+-".contains(&c))
        || !mantissa.bytes().any(|c| c.is_ascii_digit())
    {
        return f64::NAN;
    }
    t.parse().unwrap_or(f64::NAN)
}

/// `-c/--count`: a positive integer as JavaScript's `Number` reads it.
fn parse_count(s: &str) -> CliResult<u64> {
    let n = js_number(s);
    if n >= 1.0 && n.fract() == 0.0 {
        // Saturates for counts no run reaches.
        Ok(n as u64)
    } else {
        Err(CliError::new(format!(
            "--count must be a positive integer, got: {}",
            crate::cas::value::js_number_string(n)
        )))
    }
}

// Long: the checks `thread step` makes in the TypeScript tool's order, then each step printed.
fn step(env: &Env, a: StepArgs) -> CliResult {
    // The count is checked before the thread is looked at.
    let count = parse_count(&a.count)?;
    let t = thread_id(env, &a.thread)?;
    let timeout = a
        .timeout
        .as_deref()
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|n| *n > 0.0 && *n < 1e9)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    CliError::new(format!(
                        "--timeout must be a positive number of seconds, got: {s}"
                    ))
                })
        })
        .transpose()?;
    let mut agent = a.agent.as_deref().map(AgentCommand::parse).transpose()?;
    if let (Some(agent), Some(p)) = (&mut agent, a.agent_protocol) {
        agent.protocol = p.into();
    }
    if a.background && !a.background_worker {
        return start_background(env, &a, &t, count);
    }
    let me = std::process::id();
    if let Some(pid) = background::live_marker(&env.root, &t).filter(|p| *p != me) {
        return Err(CliError::of(
            crate::ErrorKind::Retry,
            format!("thread already executing in background (PID: {pid})"),
        ));
    }
    // The worker's marker goes when it ends, whatever the outcome.
    let _marker = a.background_worker.then(|| MarkerGuard {
        root: &env.root,
        thread: &t,
        pid: me,
    });
    let config = env.config()?;
    let store = env.open_rw()?;
    // Ctrl-C or SIGTERM ends the running agent, gives the lease back and exits 130/143.
    let interrupt = Interrupt::new()?;
    interrupt.on_signals(&[libc::SIGINT, libc::SIGTERM])?;
    // Agents run one at a time here: what one leaves behind can be found and killed.
    engine::adopt_orphans();
    let (models, agent_env) = env.agent_setup(config, a.no_llm);
    let fallback_cwd = std::env::current_dir()?;
    let self_exe = std::env::current_exe().ok();
    let opts = StepOptions {
        store: &store,
        root: &env.root,
        thread: &t,
        agent: agent.as_ref(),
        config,
        models: &models,
        max_retries: config.max_retries()?,
        timeout,
        env: &agent_env,
        fallback_cwd: &fallback_cwd,
        pid: std::process::id(),
        now: &|| env.clock(),
        self_exe: self_exe.as_deref(),
        interrupt: Some(&interrupt),
        sole_child: true,
        memo: None,
        keep_lease: false,
        budgets: None,
        submissions: None,
        leased: None,
    };
    let mut outs = Vec::new();
    let mut failure = None;
    for _ in 0..count {
        match engine::step(&opts) {
            Ok(r) => {
                for n in &r.notes {
                    eprintln!("{n}");
                }
                let done = r.output.done;
                outs.push(r.output);
                if done {
                    break;
                }
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    // A thread that ended makes room for a queued one of its workflow.
    thread::promote(&store, config)?;
    if count == 1 {
        if let Some(o) = outs.first() {
            print_as(env.format, &State::from(o))?;
        }
    } else if !outs.is_empty() {
        print_as(
            env.format,
            &outs.iter().map(State::from).collect::<Vec<_>>(),
        )?;
    }
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Removes a background worker's running marker when dropped.
struct MarkerGuard<'a> {
    root: &'a std::path::Path,
    thread: &'a ThreadId,
    pid: u32,
}

impl Drop for MarkerGuard<'_> {
    fn drop(&mut self) {
        background::remove_marker_of(self.root, self.thread, self.pid);
    }
}

#[cfg(test)]
#[path = "thread_tests.rs"]
mod tests;
