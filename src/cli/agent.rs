//! `uwf agent …`: the agent kit (context, submit) and the built-in agents (scripted, llm,
//! command), each also usable as an `--agent` or an `agents:` entry.

use super::output::{NodeIdStr, print_as, write_stdout};
use super::thread::thread_id;
use super::{CliError, CliResult, Env, handoff};
use crate::builtin::{self, Agent, CommandAgent, CommandArgs, LlmAgent, LlmArgs, ScriptedAgent};
use crate::cas::Value;
use crate::engine::{DEFAULT_TIMEOUT, Interrupt};
use crate::thread::{self, Fallback, SubmitInput, ThreadId};
use clap::Subcommand;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum AgentCmd {
    /// What an agent needs for a step: start, steps, role, output format, edge prompt (JSON).
    Context {
        /// Thread id.
        thread: String,
        /// Role.
        role: String,
    },
    /// Read raw agent output on stdin, extract the role's output (frontmatter, else a model),
    /// write the StepNode (prev = the current head) and print its id.
    Submit {
        /// Thread id.
        thread: String,
        /// Role.
        role: String,
        /// A file whose text is stored as the step's detail (default: the raw output).
        #[arg(long)]
        detail: Option<PathBuf>,
        /// The agent name recorded in the StepNode.
        #[arg(long, default_value = "uwf-agent")]
        name: String,
        /// Never ask a model to extract the output (also `UWF_NO_LLM=1`, or `llmExtract: false`).
        #[arg(long)]
        no_llm: bool,
    },
    /// A built-in agent answering from a YAML script (per role, replies used in turn).
    Scripted {
        /// The script file.
        #[arg(long)]
        script: PathBuf,
        /// Thread id.
        thread: String,
        /// Role.
        role: String,
    },
    /// The built-in agent that asks the configured model (see `uwf setup`).
    Llm {
        #[command(flatten)]
        args: LlmArgs,
        /// Thread id.
        thread: String,
        /// Role.
        role: String,
    },
    /// Any coding-agent CLI as an agent: `uwf agent command [--preset P] -- PROGRAM [ARGS…]`.
    Command {
        #[command(flatten)]
        args: CommandArgs,
    },
}

/// `agent context`: what the agent kit gives an agent, then the thread and its head.
#[derive(Serialize)]
struct Context<'a> {
    #[serde(flatten)]
    context: &'a Value,
    thread: &'a str,
    head: NodeIdStr,
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn no_llm(flag: bool) -> bool {
    flag || var("UWF_NO_LLM").is_some_and(|v| v != "0")
}

pub(crate) fn run(c: AgentCmd, env: &Env) -> CliResult {
    match c {
        AgentCmd::Context { thread, role } => {
            let t = thread_id(env, &thread)?;
            let s = env.open_ro()?;
            let edge = var("UWF_EDGE_PROMPT");
            let c = thread::agent_context(&s, &t, &role, edge.as_deref())?;
            let out = Context {
                context: &c.context,
                thread: t.as_str(),
                head: NodeIdStr(c.head),
            };
            print_as(env.format, &out)
        }
        AgentCmd::Submit {
            thread,
            role,
            detail,
            name,
            no_llm: off,
        } => {
            let t = thread_id(env, &thread)?;
            let mut raw = String::new();
            std::io::stdin()
                .read_to_string(&mut raw)
                .map_err(|e| CliError::new(format!("cannot read agent output on stdin: {e}")))?;
            let detail = detail
                .map(|p| {
                    std::fs::read_to_string(&p).map_err(|e| {
                        CliError::new(format!("cannot read detail file {}: {e}", p.display()))
                    })
                })
                .transpose()?;
            submit(env, &t, &role, &raw, detail.as_deref(), &name, no_llm(off))
        }
        AgentCmd::Scripted {
            script,
            thread,
            role,
        } => run_builtin(env, &ScriptedAgent { script }, &thread, &role),
        AgentCmd::Llm { args, thread, role } => {
            run_builtin(env, &LlmAgent::new(args), &thread, &role)
        }
        AgentCmd::Command { mut args } => {
            let (thread, role) = match (
                args.thread.take().or_else(|| var("UWF_THREAD")),
                args.role.take().or_else(|| var("UWF_ROLE")),
            ) {
                (Some(t), Some(r)) => (t, r),
                _ => {
                    return Err(CliError::of(
                        crate::ErrorKind::Usage,
                        "uwf agent command needs --thread and --role (or UWF_THREAD and UWF_ROLE)",
                    ));
                }
            };
            // Run as an agent of uwf's protocol, the thread and role come last: drop them.
            if args.program.len() >= 2
                && args.program[args.program.len() - 2..] == [thread.clone(), role.clone()]
            {
                args.program.truncate(args.program.len() - 2);
            }
            run_builtin(env, &CommandAgent::new(args), &thread, &role)
        }
    }
}

/// The working directory an agent works in: `UWF_CWD` (set by `uwf thread step`), else the
/// current one.
fn agent_cwd() -> PathBuf {
    var("UWF_CWD")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default()
}

/// Runs a built-in agent as a command: writes the StepNode and prints its id.
fn run_builtin(env: &Env, agent: &dyn Agent, thread: &str, role: &str) -> CliResult {
    let t = thread_id(env, thread)?;
    let config = env.config()?;
    let (models, vars) = env.agent_setup(config, no_llm(false));
    let timeout = match var("UWF_TIMEOUT").and_then(|s| s.parse::<f64>().ok()) {
        Some(s) if s > 0.0 && s < 1e9 => Duration::from_secs_f64(s),
        _ => config
            .timeout_seconds()?
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64),
    };
    let store = env.open_rw()?;
    let edge = match var("UWF_EDGE_PROMPT") {
        Some(e) => Some(e),
        None => thread::agent_context(&store, &t, role, None)?
            .context
            .get("edgePrompt")
            .and_then(|v| v.as_str())
            .map(str::to_string),
    };
    let interrupt = Interrupt::new()?;
    interrupt.on_signals(&[libc::SIGINT, libc::SIGTERM])?;
    let cwd = agent_cwd();
    let turn = builtin::Turn {
        store: &store,
        root: &env.root,
        thread: &t,
        role,
        edge_prompt: edge.as_deref(),
        cwd: &cwd,
        now: &|| env.clock(),
        timeout,
        interrupt: Some(&interrupt),
        models: &models,
        env: &vars,
        moderated: None,
        hold: None,
    };
    let id = agent.run(&turn)?;
    write_stdout(format!("{id}\n").as_bytes())
}

fn submit(
    env: &Env,
    thread: &ThreadId,
    role: &str,
    raw: &str,
    detail: Option<&str>,
    name: &str,
    no_llm: bool,
) -> CliResult {
    let cwd = agent_cwd().display().to_string();
    let edge = var("UWF_EDGE_PROMPT");
    let started = var("UWF_STEP_STARTED_MS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(env.now_ms);
    let config = env.config()?;
    let (models, _) = env.agent_setup(config, no_llm);
    let fallback = models.extract();
    // Under `uwf run`, the runner writes the submission through its own store handle.
    if let Some(socket) = var(handoff::SOCKET_VAR)
        && env.server_url().is_none()
        && let Some(r) = handoff::handoff(
            Path::new(&socket),
            &handoff::Submission {
                store: &env.db_path(),
                thread,
                role,
                raw,
                detail,
                agent: name,
                edge_prompt: edge.as_deref(),
                cwd: &cwd,
                started_ms: started,
                now_ms: env.now_ms,
                has_fallback: fallback.is_some(),
            },
        )
    {
        return write_stdout(format!("{}\n", r?).as_bytes());
    }
    let s = env.open_rw()?;
    let id = thread::submit(
        &s,
        &SubmitInput {
            thread,
            role,
            raw,
            detail,
            detail_id: None,
            detail_nodes: &[],
            assembled_prompt: None,
            fallback: fallback.as_ref().map(|f| f as &dyn Fallback),
            agent: name,
            edge_prompt: edge.as_deref(),
            cwd: &cwd,
            started_ms: started,
            now_ms: env.now_ms,
            usage: &[],
            hold: None,
        },
    )?;
    write_stdout(format!("{id}\n").as_bytes())
}
