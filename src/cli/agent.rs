//! `uwf agent …`: the agent kit (context, submit) and the built-in scripted agent.

use super::output::{NodeIdStr, print_as, write_stdout};
use super::{CliError, CliResult, Env};
use crate::agent::Script;
use crate::cas::Value;
use crate::thread::{self, SubmitInput, ThreadId};
use clap::Subcommand;
use serde::Serialize;
use std::io::Read;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub(crate) enum AgentCmd {
    /// What an agent needs for a step: start, steps, role, output format, edge prompt (JSON).
    Context {
        /// Thread id.
        thread: String,
        /// Role.
        role: String,
    },
    /// Read raw agent output on stdin, extract the role's output, write the StepNode (prev =
    /// the current head) and print its id.
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
}

/// `agent context`: what the agent kit gives an agent, then the thread and its head.
#[derive(Serialize)]
struct Context<'a> {
    #[serde(flatten)]
    context: &'a Value,
    thread: &'a str,
    head: NodeIdStr,
}

fn thread_id(s: &str) -> CliResult<ThreadId> {
    ThreadId::parse(s).map_err(CliError::new)
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

pub(crate) fn run(c: AgentCmd, env: &Env) -> CliResult {
    match c {
        AgentCmd::Context { thread, role } => {
            let t = thread_id(&thread)?;
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
        } => {
            let t = thread_id(&thread)?;
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
            submit(env, &t, &role, &raw, detail.as_deref(), &name)
        }
        AgentCmd::Scripted {
            script,
            thread,
            role,
        } => {
            let t = thread_id(&thread)?;
            let text = std::fs::read_to_string(&script).map_err(|e| {
                CliError::new(format!("cannot read script {}: {e}", script.display()))
            })?;
            let script = Script::from_yaml(&text).map_err(|e| CliError::new(e.to_string()))?;
            let raw = {
                let s = env.open_ro()?;
                thread::scripted_reply(&s, &t, &role, &script)?
            };
            submit(env, &t, &role, &raw, None, "uwf-scripted")
        }
    }
}

fn submit(
    env: &Env,
    thread: &ThreadId,
    role: &str,
    raw: &str,
    detail: Option<&str>,
    name: &str,
) -> CliResult {
    let cwd = var("UWF_CWD").unwrap_or_else(|| {
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    });
    let edge = var("UWF_EDGE_PROMPT");
    let started = var("UWF_STEP_STARTED_MS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(env.now_ms);
    let s = env.open_rw()?;
    let id = thread::submit(
        &s,
        &SubmitInput {
            thread,
            role,
            raw,
            detail,
            agent: name,
            edge_prompt: edge.as_deref(),
            cwd: &cwd,
            started_ms: started,
            now_ms: env.now_ms,
        },
    )?;
    write_stdout(format!("{id}\n").as_bytes())
}
