//! Built-in agents behind one in-process interface ([`Agent`]): the scripted agent, the LLM
//! agent and the command adapter with its presets. `uwf agent …` runs them as commands,
//! `uwf thread step` runs an agent command naming one (`uwf agent llm`, say) inside its own
//! process instead of spawning it, and a runner does the same for many threads.
//!
//! Every built-in agent ends in [`crate::thread::submit`] with the two layers of extraction:
//! the frontmatter fast path, then a model asked to extract the output ([`ModelExtract`]).

mod agent;
mod command;
mod details;
mod llm;
mod sessions;

pub use agent::{Agent, Models, Turn, Vars};
pub use command::{CommandAgent, CommandArgs};
pub use llm::{LlmAgent, LlmArgs};

use crate::agent::Script;
use crate::cas::NodeId;
use crate::supervise::StepError;
use crate::thread::{self, AgentCommand, AgentProtocol};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The scripted agent: its n-th reply for the n-th run of a role in a thread.
#[derive(Debug, Clone)]
pub struct ScriptedAgent {
    /// The script file (relative to the agent's working directory).
    pub script: PathBuf,
}

impl Agent for ScriptedAgent {
    fn name(&self) -> String {
        "uwf-scripted".into()
    }

    // A script read once, replies from it: no program, no network.
    fn computes_only(&self) -> bool {
        true
    }

    fn run(&self, turn: &Turn<'_>) -> Result<NodeId, StepError> {
        let started = (turn.now)();
        let script = load_script(&turn.cwd.join(&self.script))?;
        let raw = match turn.moderated {
            Some(m) => thread::kit::scripted_reply_in(&m.chain, turn.role, &script)?,
            None => thread::scripted_reply(turn.store, turn.thread, turn.role, &script)?,
        };
        // The reply is kept as the conversation's one turn, as the LLM agent keeps its own,
        // so `thread read` shows it.
        let mut fields = crate::cas::value::Map::default();
        fields.insert("turnCount".into(), crate::cas::Value::Number(1.0));
        // Written with the StepNode, in its transaction.
        let (detail, nodes) = details::prepare_detail(
            turn.store,
            details::DetailKind::Scripted,
            fields,
            &[("assistant", raw.as_str())],
            (turn.now)(),
        )
        .map_err(thread::ThreadError::from)?;
        let reply = agent::Reply {
            raw: &raw,
            detail: Some(detail),
            nodes: &nodes,
            ..agent::Reply::default()
        };
        turn.submit(&self.name(), started, &reply)
    }
}

/// A script, parsed once per file version for all the steps of a process.
fn load_script(path: &Path) -> Result<Arc<Script>, thread::ThreadError> {
    type Cache =
        std::sync::Mutex<std::collections::HashMap<PathBuf, (std::time::SystemTime, Arc<Script>)>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let unreadable = |e: std::io::Error| {
        thread::ThreadError::Invalid(format!("cannot read script {}: {e}", path.display()))
    };
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(unreadable)?;
    let cache = CACHE.get_or_init(Default::default);
    if let Some((m, s)) = cache.lock().expect("script cache").get(path)
        && *m == modified
    {
        return Ok(s.clone());
    }
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    let script = Arc::new(
        Script::from_yaml(&text).map_err(|e| thread::ThreadError::Invalid(e.to_string()))?,
    );
    cache
        .lock()
        .expect("script cache")
        .insert(path.to_path_buf(), (modified, script.clone()));
    Ok(script)
}

#[derive(clap::Parser)]
#[command(no_binary_name = true)]
struct Words<T: clap::Args> {
    /// The thread and role a command line may name (the step gives them instead).
    #[arg(num_args = 0..=2)]
    _rest: Vec<String>,
    #[command(flatten)]
    args: T,
}

#[derive(clap::Args)]
struct ScriptedWords {
    #[arg(long)]
    script: PathBuf,
}

fn words<T: clap::Args>(args: &[String]) -> Result<T, String> {
    use clap::Parser;
    Words::<T>::try_parse_from(args)
        .map(|w| w.args)
        .map_err(|e| e.to_string().lines().next().unwrap_or("").to_string())
}

/// The built-in agent an agent command names, if it names one: `uwf agent scripted …`,
/// `uwf agent llm …`, `uwf agent command …` (`uwf` by that name or by an absolute path to the
/// program running, whatever its file is called), and the TypeScript tool's agent packages
/// named bare (`uwf-llm` or `uwf-builtin`, `uwf-hermes`, `uwf-claude-code`, `uwf-cursor`), which uwf carries
/// built in; a path to such a program runs that program.
/// A command of the `7a0c` protocol is always run as a program.
///
/// # Errors
/// The command names a built-in agent with arguments it does not take.
pub fn from_command(cmd: &AgentCommand) -> Option<Result<Box<dyn Agent>, String>> {
    if cmd.protocol != AgentProtocol::Uwf {
        return None;
    }
    let program = Path::new(&cmd.command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let is_path = cmd.command.contains('/');
    let (kind, rest): (&str, &[String]) = if program == "uwf" || is_this_program(&cmd.command) {
        match cmd.args.as_slice() {
            [a, k, rest @ ..] if a == "agent" => (k.as_str(), rest),
            _ => return None,
        }
    } else {
        match program {
            // A path names that very program; the bare names are the packages uwf carries.
            _ if is_path => return None,
            // The TypeScript tool names its model agent `builtin`.
            "uwf-llm" | "uwf-builtin" => ("llm", &cmd.args),
            "uwf-hermes" | "uwf-claude-code" | "uwf-cursor" => {
                let preset = program.trim_start_matches("uwf-");
                let mut args = vec!["--preset".to_string(), preset.to_string()];
                args.extend(cmd.args.iter().cloned());
                return Some(
                    words::<CommandArgs>(&args).map(|a| Box::new(CommandAgent::new(a)) as _),
                );
            }
            _ => return None,
        }
    };
    Some(match kind {
        "scripted" => words::<ScriptedWords>(rest)
            .map(|w| Box::new(ScriptedAgent { script: w.script }) as Box<dyn Agent>),
        "llm" => words::<LlmArgs>(rest).map(|a| Box::new(LlmAgent::new(a)) as _),
        "command" => words::<CommandArgs>(rest).map(|a| Box::new(CommandAgent::new(a)) as _),
        _ => return None,
    })
}

/// Whether `command` is an absolute path to the file of the program running (its device and
/// inode), by whatever name or link. A relative path is not: run as a program, it would be
/// found from each thread's working directory.
fn is_this_program(command: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    static ME: std::sync::OnceLock<Option<(u64, u64)>> = std::sync::OnceLock::new();
    let path = Path::new(command);
    if !path.is_absolute() {
        return false;
    }
    let file = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    // Linux's link to the running file holds even once the file was replaced or removed.
    let me = ME.get_or_init(|| {
        file(Path::new("/proc/self/exe"))
            .or_else(|| std::env::current_exe().ok().and_then(|p| file(&p)))
    });
    me.is_some() && file(path) == *me
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::Config;

    fn cmd(s: &str) -> AgentCommand {
        AgentCommand::parse(s).unwrap()
    }

    #[test]
    fn a_typescript_config_runs_unchanged() {
        let c = Config::parse(
            include_str!("../../tests/fixtures/ts-root-small/config.yaml"),
            "config.yaml",
        )
        .unwrap();
        let agent = |wf: &str, role: &str| {
            from_command(&c.agent_for(wf, role).unwrap())
                .unwrap()
                .unwrap()
                .name()
        };
        assert_eq!(agent("debate", "for"), "uwf-hermes");
        assert_eq!(agent("review-loop", "reviewer"), "uwf-llm");
        assert_eq!(agent("debate", "against"), "uwf-claude-code");
        let models = Models::new(c, Arc::new(|_| None), Arc::new(|| 0));
        let m = models
            .model(&models.config.extract_model_alias().unwrap())
            .unwrap();
        assert_eq!(
            (m.provider.name.as_str(), m.model.as_str()),
            ("openrouter", "openai/gpt-4o-mini")
        );
        assert_eq!(
            models.agent_model(None).unwrap().model,
            "anthropic/claude-sonnet-4"
        );
        assert!(models.extract().is_some());
    }

    #[test]
    fn recognises_built_in_agents() {
        let name = |s: &str| from_command(&cmd(s)).map(|r| r.map(|a| a.name()));
        assert_eq!(
            name("uwf agent scripted --script s.yaml"),
            Some(Ok("uwf-scripted".into()))
        );
        assert_eq!(
            name("/usr/bin/uwf agent llm --model fast"),
            Some(Ok("uwf-llm".into()))
        );
        assert_eq!(name("uwf-llm"), Some(Ok("uwf-llm".into())));
        assert_eq!(name("uwf-hermes"), Some(Ok("uwf-hermes".into())));
        assert_eq!(name("uwf-claude-code"), Some(Ok("uwf-claude-code".into())));
        assert_eq!(
            name("uwf agent command -- my-cli --flag"),
            Some(Ok("uwf-command".into()))
        );
        // The program running, by its path under another name (here the test binary).
        let me = std::env::current_exe().unwrap();
        assert_eq!(
            name(&format!("{} agent scripted --script s.yaml", me.display())),
            Some(Ok("uwf-scripted".into()))
        );
        assert_eq!(name(&format!("{} thread list", me.display())), None);
        // Another program that exists is not built in, nor is this one by a relative path.
        assert_eq!(name("/bin/sh agent scripted --script s.yaml"), None);
        // (when the tests' binaries are under the package, as cargo puts them by default)
        if let Ok(relative) = me.strip_prefix(std::env::current_dir().unwrap()) {
            let command = format!("{} agent scripted --script s.yaml", relative.display());
            assert_eq!(name(&command), None);
        }
        assert_eq!(name("uwf thread list"), None);
        assert_eq!(name("./agent.sh"), None);
        assert_eq!(name("/opt/bin/uwf-hermes"), None);
        assert!(matches!(name("uwf agent llm --bogus"), Some(Err(_))));
        let mut c = cmd("uwf-hermes");
        c.protocol = AgentProtocol::Ts7a0c;
        assert!(from_command(&c).is_none());
    }
}
