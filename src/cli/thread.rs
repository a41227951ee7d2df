//! `uwf thread …` and `uwf step …`: threads and their steps.

use super::output::{obj, print, write_stdout};
use super::{CliError, CliResult, Env};
use crate::cas::Value;
use crate::thread::{
    self, AgentCommand, Config, ListFilter, ReadOptions, Status, StepOptions, ThreadError,
    ThreadId, config::parse_dotenv, time::parse_time,
};
use clap::Subcommand;
use std::time::Duration;

impl From<ThreadError> for CliError {
    fn from(e: ThreadError) -> Self {
        CliError::new(e.to_string())
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum ThreadCommand {
    /// Start a thread of a workflow (id, file, .workflow/ name or registered name).
    Start {
        /// The workflow.
        workflow: String,
        /// The task.
        #[arg(short = 'p', long)]
        prompt: String,
        /// The thread's working directory (absolute; default: the current directory).
        #[arg(long)]
        cwd: Option<String>,
    },
    /// Run the next step(s): moderator, agent, head move.
    #[command(visible_alias = "exec")]
    Step(StepArgs),
    /// Start a thread and step it until the workflow ends; prints each step's state.
    Run {
        /// The workflow.
        workflow: String,
        /// The task.
        #[arg(short = 'p', long)]
        prompt: String,
        /// The thread's working directory (absolute; default: the current directory).
        #[arg(long)]
        cwd: Option<String>,
        /// Agent command (split on whitespace); overrides config.yaml.
        #[arg(long)]
        agent: Option<String>,
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
        /// Include completed and cancelled threads.
        #[arg(long)]
        all: bool,
        /// Comma list of idle, running, completed, cancelled, active.
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
        /// Step id or prefix.
        step: String,
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
}

/// Arguments of `thread step`.
#[derive(clap::Args, Debug)]
pub(crate) struct StepArgs {
    /// Thread id.
    thread: String,
    /// Agent command (split on whitespace); overrides config.yaml.
    #[arg(long)]
    agent: Option<String>,
    /// Steps to run (stops early at $END).
    #[arg(short = 'c', long, default_value = "1", allow_hyphen_values = true)]
    count: String,
    /// Agent time limit in seconds; overrides config.yaml timeoutSeconds (default 600).
    #[arg(long)]
    timeout: Option<String>,
}

#[derive(Subcommand, Debug)]
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

/// `--quota` of the `read` commands.
fn quota_arg(q: Option<&str>) -> CliResult<usize> {
    match q {
        None => Ok(thread::DEFAULT_QUOTA),
        Some(q) => thread::parse_quota(q)
            .ok_or_else(|| CliError::new("invalid --quota: must be a positive integer")),
    }
}

fn thread_id(s: &str) -> CliResult<String> {
    Ok(ThreadId::parse(s)
        .map_err(CliError::new)?
        .as_str()
        .to_string())
}

pub(crate) fn run(c: ThreadCommand, env: &Env) -> CliResult {
    match c {
        ThreadCommand::Start {
            workflow,
            prompt,
            cwd,
        } => {
            let (wf, t) = start_thread(env, &workflow, &prompt, cwd)?;
            print(
                env.format,
                &obj([
                    ("workflow", Value::str(wf.to_wire())),
                    ("thread", Value::str(t.as_str())),
                ]),
            )
        }
        ThreadCommand::Step(a) => step(env, a),
        ThreadCommand::Run {
            workflow,
            prompt,
            cwd,
            agent,
            max_steps,
            timeout,
        } => {
            let (_, t) = start_thread(env, &workflow, &prompt, cwd)?;
            eprintln!("started thread {}", t.as_str());
            step(
                env,
                StepArgs {
                    thread: t.as_str().to_string(),
                    agent,
                    count: max_steps,
                    timeout,
                },
            )
        }
        ThreadCommand::Show { thread } => {
            let t = thread_id(&thread)?;
            let s = env.open_ro()?;
            print(env.format, &thread::show(&s, &t)?.to_value())
        }
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
            };
            let s = env.open_ro()?;
            print(env.format, &Value::Array(thread::list(&s, &f)?))
        }
        ThreadCommand::Steps { thread } => steps(env, &thread),
        ThreadCommand::Read {
            thread,
            quota,
            before,
            start,
        } => {
            let t = thread_id(&thread)?;
            let quota = quota_arg(quota.as_deref())?;
            let s = env.open_ro()?;
            let before = before.map(|b| thread::resolve_step(&s, &b)).transpose()?;
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
        ThreadCommand::Fork { step } => fork(env, &step),
        ThreadCommand::StepDetails { step } => details(env, &step),
        ThreadCommand::Kill { thread } => {
            let t = thread_id(&thread)?;
            let s = env.open_rw()?;
            thread::kill(&s, &t, env.now_ms)?;
            print(
                env.format,
                &obj([("thread", Value::str(t)), ("cancelled", Value::Bool(true))]),
            )
        }
    }
}

pub(crate) fn run_step(c: StepCommand, env: &Env) -> CliResult {
    match c {
        StepCommand::List { thread } => steps(env, &thread),
        StepCommand::Show { step } => details(env, &step),
        StepCommand::Fork { step } => fork(env, &step),
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
    let t = thread_id(thread)?;
    let s = env.open_ro()?;
    print(env.format, &thread::steps(&s, &t)?)
}

fn details(env: &Env, step: &str) -> CliResult {
    let s = env.open_ro()?;
    let id = thread::resolve_step(&s, step)?;
    print(env.format, &thread::step_details(&s, id)?)
}

fn fork(env: &Env, step: &str) -> CliResult {
    let s = env.open_rw()?;
    let id = thread::resolve_step(&s, step)?;
    let t = ThreadId::generate(env.now_ms);
    thread::fork(&s, id, &t, env.now_ms)?;
    print(
        env.format,
        &obj([
            ("thread", Value::str(t.as_str())),
            ("forkedFrom", obj([("step", Value::str(id.to_wire()))])),
        ]),
    )
}

fn start_thread(
    env: &Env,
    workflow: &str,
    prompt: &str,
    cwd: Option<String>,
) -> CliResult<(crate::cas::NodeId, ThreadId)> {
    let here = std::env::current_dir()?;
    let cwd = cwd.unwrap_or_else(|| here.display().to_string());
    let s = env.open_rw()?;
    let t = ThreadId::generate(env.now_ms);
    let wf = thread::start(
        &s,
        &thread::StartInput {
            workflow,
            prompt,
            cwd: &cwd,
            search_from: &here,
            thread: t.clone(),
            now_ms: env.now_ms,
        },
    )?;
    Ok((wf, t))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `.env` of the root: the variables not already set in this process.
fn dotenv(env: &Env) -> Vec<(String, String)> {
    std::fs::read_to_string(env.root.join(".env"))
        .map(|t| parse_dotenv(&t))
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| std::env::var_os(k).is_none())
        .collect()
}

fn step(env: &Env, a: StepArgs) -> CliResult {
    let t = thread_id(&a.thread)?;
    let count = a
        .count
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            CliError::new(format!(
                "--count must be a positive integer, got: {}",
                a.count
            ))
        })?;
    let timeout = a
        .timeout
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
    let agent = a.agent.as_deref().map(AgentCommand::parse).transpose()?;
    let config = Config::load(&env.root)?;
    // Create (or import) the store before the step opens it by path.
    if !env.db_path().exists() {
        drop(env.open_rw()?);
    }
    let opts = StepOptions {
        db_path: &env.db_path(),
        root: &env.root,
        thread: &t,
        agent,
        config: &config,
        timeout,
        env: dotenv(env),
        fallback_cwd: std::env::current_dir()?,
        pid: std::process::id(),
        now: &now_ms,
        self_exe: std::env::current_exe().ok(),
    };
    let mut outs = Vec::new();
    let mut failure = None;
    for _ in 0..count {
        match thread::step(&opts) {
            Ok(r) => {
                for n in &r.notes {
                    eprintln!("{n}");
                }
                let done = r.output.done;
                outs.push(r.output.to_value());
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
    if count == 1 {
        if let Some(v) = outs.pop() {
            print(env.format, &v)?;
        }
    } else if !outs.is_empty() {
        print(env.format, &Value::Array(outs))?;
    }
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
