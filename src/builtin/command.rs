//! `uwf agent command`: any coding-agent CLI as an agent. The assembled prompt goes to the
//! program on stdin, or in place of a `{prompt}` argument; its stdout is the raw output.
//! Presets know the CLIs the TypeScript tool ships adapters for: `hermes` (`hermes chat`),
//! `claude-code` (`claude -p` with JSON output) and `cursor` (`cursor-agent -p` with JSON
//! output); they resume a role's earlier session on its next turn.

use std::time::Duration;

use super::agent::{Agent, Reply, Turn};
use super::details::{DetailKind, store_detail};
use super::sessions;
use crate::agent::prompt;
use crate::cas::value::Map;
use crate::cas::{NodeId, Value};
use crate::store::ModelCall;
use crate::supervise::{self, Ending, Limits, StepError};
use crate::thread::{self, AgentCommand, AgentProtocol};

/// A known coding-agent CLI.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// `hermes chat -Q -q PROMPT`, resuming with `--resume SESSION`.
    Hermes,
    /// `claude -p --output-format json` (prompt on stdin), resuming with `--resume SESSION`;
    /// `CLAUDE_MODEL` picks the model.
    ClaudeCode,
    /// `cursor-agent -p --output-format json` (prompt on stdin), resuming with
    /// `--resume SESSION`.
    Cursor,
}

impl Preset {
    fn name(self) -> &'static str {
        match self {
            Preset::Hermes => "hermes",
            Preset::ClaudeCode => "claude-code",
            Preset::Cursor => "cursor",
        }
    }
}

// The arguments of `uwf agent command`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CommandArgs {
    /// A known CLI: its program, arguments, output and session resume.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// The agent name recorded in the StepNode (default `uwf-<preset>` or `uwf-command`).
    #[arg(long)]
    pub name: Option<String>,
    /// Thread id (default `$UWF_THREAD`).
    #[arg(long)]
    pub thread: Option<String>,
    /// Role (default `$UWF_ROLE`).
    #[arg(long)]
    pub role: Option<String>,
    /// The program and its arguments, after `--`; an argument `{prompt}` is replaced by the
    /// prompt, else the prompt goes to stdin. With a preset: arguments added to its own.
    #[arg(last = true)]
    pub program: Vec<String>,
}

/// The command adapter.
#[derive(Debug, Clone)]
pub struct CommandAgent {
    args: CommandArgs,
}

impl CommandAgent {
    /// The adapter for `args`.
    pub fn new(args: CommandArgs) -> CommandAgent {
        CommandAgent { args }
    }
}

/// What a program's stdout says, once read.
#[derive(Debug)]
struct Reading {
    raw: String,
    session: Option<String>,
    fields: Map,
}

impl Agent for CommandAgent {
    fn name(&self) -> String {
        match (&self.args.name, self.args.preset) {
            (Some(n), _) => n.clone(),
            (None, Some(p)) => format!("uwf-{}", p.name()),
            (None, None) => "uwf-command".into(),
        }
    }

    fn run(&self, turn: &Turn<'_>) -> Result<NodeId, StepError> {
        let started_ms = (turn.now)();
        let preset = self.args.preset;
        let session =
            preset.and_then(|p| sessions::get(turn.root, p.name(), turn.thread, turn.role));
        let brief = turn.brief()?;
        let text = prompt::assemble(
            &brief.history,
            turn.role,
            &brief.role,
            &brief.schema,
            turn.edge_prompt,
            session.is_some(),
        )
        .text();
        let (program, mut args, on_stdin) = self.invocation(session.as_deref(), turn.env)?;
        if preset.is_some() {
            args.extend(self.args.program.iter().cloned());
        }
        let args: Vec<String> = args.iter().map(|a| a.replace("{prompt}", &text)).collect();
        let cmd = AgentCommand {
            command: program,
            args,
            protocol: AgentProtocol::Uwf,
        };
        let display = cmd.command.clone();
        let run = supervise::run_with_input(
            &cmd,
            &[],
            turn.cwd,
            turn.env,
            on_stdin.then(|| text.clone().into_bytes()),
            Limits::with_timeout(turn.timeout),
            turn.interrupt,
        )
        .map_err(|mut e| {
            // The prompt may be an argument: name the program only.
            e.command = display.clone();
            e
        })?;
        let stderr = one_line(&run.stderr.text());
        check_ending(run.ending, &display, stderr, turn.timeout)?;
        let stdout = run.stdout.text();
        let reading = read_output(preset, &stdout, &display)?;
        if let (Some(p), Some(s)) = (preset, &reading.session) {
            sessions::set(turn.root, p.name(), turn.thread, turn.role, s);
        }
        let elapsed_ms = Value::Number(run.elapsed.as_millis() as f64);
        let (kind, fields) = detail_fields(preset, &reading, &display, elapsed_ms);
        let detail = store_detail(
            turn.store,
            kind,
            fields,
            &[("assistant", reading.raw.as_str())],
            (turn.now)(),
        )
        .map_err(thread::ThreadError::from)?;
        let calls: Vec<ModelCall> = preset
            .and_then(|p| reported_call(p, &reading, started_ms, run.elapsed.as_millis() as u64))
            .into_iter()
            .collect();
        let reply = Reply {
            raw: &reading.raw,
            detail: Some(detail),
            prompt: Some(&text),
            usage: &calls,
            ..Reply::default()
        };
        turn.submit(&self.name(), started_ms, &reply)
    }
}

/// The usage a coding-agent CLI reported for its turn, as one call (its own total cost wins
/// over any price; a CLI that reports no usage gives none).
fn reported_call(
    preset: Preset,
    reading: &Reading,
    started_ms: u64,
    duration_ms: u64,
) -> Option<ModelCall> {
    let usage = reading.fields.get("usage")?.as_object()?;
    let n = |k: &str| match usage.get(k) {
        Some(Value::Number(n)) if *n >= 0.0 => *n as u64,
        _ => 0,
    };
    let cached = n("cacheReadInputTokens");
    Some(ModelCall {
        provider: preset.name().to_string(),
        model: reading
            .fields
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(preset.name())
            .to_string(),
        input_tokens: n("inputTokens") + cached + n("cacheCreationInputTokens"),
        output_tokens: n("outputTokens"),
        cached_input_tokens: cached,
        started_ms,
        duration_ms,
        cost_usd: match reading.fields.get("totalCostUsd") {
            Some(Value::Number(c)) => Some(*c),
            _ => None,
        },
    })
}

impl CommandAgent {
    /// The program, its arguments before the user's own (`{prompt}` unreplaced), and whether
    /// the prompt goes to stdin.
    fn invocation(
        &self,
        session: Option<&str>,
        env: &[(String, String)],
    ) -> Result<(String, Vec<String>, bool), thread::ThreadError> {
        Ok(match self.args.preset {
            Some(Preset::Hermes) => {
                let mut a = vec!["chat".to_string()];
                if let Some(s) = session {
                    a.extend(["--resume".to_string(), s.to_string()]);
                }
                a.extend(["-Q".to_string(), "-q".to_string(), "{prompt}".to_string()]);
                ("hermes".to_string(), a, false)
            }
            Some(p @ (Preset::ClaudeCode | Preset::Cursor)) => {
                let mut a: Vec<String> = ["-p", "--output-format", "json"]
                    .map(str::to_string)
                    .to_vec();
                if let Some(s) = session {
                    a.extend(["--resume".to_string(), s.to_string()]);
                }
                if p == Preset::ClaudeCode
                    && let Some((_, m)) = env.iter().find(|(k, _)| k == "CLAUDE_MODEL")
                {
                    a.extend(["--model".to_string(), m.clone()]);
                }
                let program = if p == Preset::ClaudeCode {
                    "claude"
                } else {
                    "cursor-agent"
                };
                (program.to_string(), a, true)
            }
            None => {
                let mut it = self.args.program.iter().cloned();
                let program = it.next().ok_or_else(|| {
                    thread::ThreadError::Invalid(
                        "uwf agent command needs a program after -- (or --preset)".into(),
                    )
                })?;
                let a: Vec<String> = it.collect();
                let on_stdin = !a.iter().any(|x| x.contains("{prompt}"));
                (program, a, on_stdin)
            }
        })
    }
}

/// The step's error when the program `display` did not exit with 0.
fn check_ending(
    ending: Ending,
    display: &str,
    stderr: String,
    timeout: Duration,
) -> Result<(), StepError> {
    match ending {
        Ending::Exited(0) => Ok(()),
        Ending::Interrupted(signal) => Err(StepError::Interrupted { signal }),
        Ending::TimedOut => Err(StepError::Timeout {
            command: display.to_string(),
            secs: timeout.as_secs_f64(),
        }),
        Ending::Exited(c) => Err(StepError::Failed {
            command: display.to_string(),
            status: format!("exit code {c}"),
            stderr,
        }),
        Ending::Signaled(s) => Err(StepError::Failed {
            command: display.to_string(),
            status: format!("killed by signal {s}"),
            stderr,
        }),
    }
}

/// The program's stdout read as the preset's CLI writes it (the whole of it without one).
fn read_output(preset: Option<Preset>, stdout: &str, display: &str) -> Result<Reading, StepError> {
    Ok(match preset {
        Some(Preset::ClaudeCode | Preset::Cursor) => {
            read_json_result(stdout).map_err(|message| StepError::BadOutput {
                command: display.to_string(),
                message,
            })?
        }
        Some(Preset::Hermes) => read_hermes(stdout),
        None => Reading {
            raw: stdout.to_string(),
            session: None,
            fields: Map::default(),
        },
    })
}

/// The kind and fields of the step's detail node.
fn detail_fields(
    preset: Option<Preset>,
    reading: &Reading,
    display: &str,
    elapsed_ms: Value,
) -> (DetailKind, Map) {
    match preset {
        // The TypeScript tool's detail of each CLI, so its `step read` shows them too.
        Some(Preset::Hermes) => {
            let mut f = Map::default();
            f.insert(
                "sessionId".into(),
                Value::str(reading.session.clone().unwrap_or_default()),
            );
            f.insert("model".into(), Value::str("hermes"));
            f.insert("duration".into(), elapsed_ms);
            f.insert("turnCount".into(), Value::Number(1.0));
            (DetailKind::Hermes, f)
        }
        Some(Preset::ClaudeCode) => (DetailKind::ClaudeCode, claude_fields(reading, elapsed_ms)),
        _ => {
            let mut f = reading.fields.clone();
            f.insert("program".into(), Value::str(display));
            f.insert(
                "sessionId".into(),
                reading.session.as_deref().map_or(Value::Null, Value::str),
            );
            f.insert("durationMs".into(), elapsed_ms);
            (DetailKind::Command, f)
        }
    }
}

/// The detail fields of a `claude` turn, with defaults for those its output lacks.
fn claude_fields(reading: &Reading, elapsed_ms: Value) -> Map {
    let text = |k: &str, d: &str| {
        Value::str(
            reading
                .fields
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or(d)
                .to_string(),
        )
    };
    let num = |k: &str| match reading.fields.get(k) {
        Some(Value::Number(n)) => Value::Number(*n),
        _ => Value::Number(0.0),
    };
    let mut f = Map::default();
    f.insert(
        "sessionId".into(),
        Value::str(reading.session.clone().unwrap_or_default()),
    );
    f.insert("model".into(), text("model", "claude"));
    f.insert("subtype".into(), text("subtype", ""));
    f.insert("durationMs".into(), elapsed_ms);
    f.insert("numTurns".into(), num("numTurns"));
    f.insert("totalCostUsd".into(), num("totalCostUsd"));
    f.insert("stopReason".into(), text("stopReason", ""));
    let usage = reading
        .fields
        .get("usage")
        .cloned()
        .filter(|u| u.as_object().is_some());
    f.insert(
        "usage".into(),
        usage.unwrap_or_else(|| {
            Value::from_json_str(r#"{"inputTokens":0,"outputTokens":0,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}"#)
                .unwrap_or_default()
        }),
    );
    f
}

/// `claude -p --output-format json` (and `cursor-agent`): one JSON object with `result`,
/// `session_id`, `usage`, `total_cost_usd`, `num_turns`, `subtype`, `stop_reason`.
fn read_json_result(stdout: &str) -> Result<Reading, String> {
    let v = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .and_then(|l| Value::from_json_str(l.trim()).ok())
        .or_else(|| Value::from_json_str(stdout.trim()).ok())
        .ok_or_else(|| {
            format!(
                "stdout is not the JSON result it should print: {}",
                one_line(stdout)
            )
        })?;
    if v.get("is_error") == Some(&Value::Bool(true)) {
        return Err(format!(
            "the program reported an error: {}",
            v.get("result").and_then(Value::as_str).unwrap_or("")
        ));
    }
    let raw = v
        .get("result")
        .and_then(Value::as_str)
        .ok_or("the JSON result has no \"result\" text")?
        .to_string();
    let s = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let mut fields = Map::default();
    fields.insert("model".into(), s("model"));
    fields.insert("subtype".into(), s("subtype"));
    fields.insert("numTurns".into(), s("num_turns"));
    fields.insert("totalCostUsd".into(), s("total_cost_usd"));
    fields.insert("stopReason".into(), s("stop_reason"));
    let usage = v.get("usage").map(|u| {
        let mut m = Map::default();
        for (from, to) in [
            ("input_tokens", "inputTokens"),
            ("output_tokens", "outputTokens"),
            ("cache_read_input_tokens", "cacheReadInputTokens"),
            ("cache_creation_input_tokens", "cacheCreationInputTokens"),
        ] {
            m.insert(
                to.into(),
                u.get(from).cloned().unwrap_or(Value::Number(0.0)),
            );
        }
        Value::Object(m)
    });
    fields.insert("usage".into(), usage.unwrap_or(Value::Null));
    Ok(Reading {
        raw,
        session: v
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        fields,
    })
}

/// `hermes chat -Q`: the answer, then a line `session_id: ID`.
fn read_hermes(stdout: &str) -> Reading {
    let mut session = None;
    let mut kept: Vec<&str> = Vec::new();
    for line in stdout.lines() {
        match line.trim().strip_prefix("session_id:") {
            Some(id) if !id.trim().is_empty() => session = Some(id.trim().to_string()),
            _ => kept.push(line),
        }
    }
    let mut fields = Map::default();
    fields.insert("model".into(), Value::Null);
    Reading {
        raw: kept.join("\n"),
        session,
        fields,
    }
}

/// The last 400 characters of `s` on one line.
fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let n = flat.chars().count();
    if n <= 400 {
        flat
    } else {
        format!("…{}", flat.chars().skip(n - 400).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_json_result() {
        let r = read_json_result(r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":5,"num_turns":2,"result":"---\nstatus: done\n---\nok","session_id":"s-1","total_cost_usd":0.01,"usage":{"input_tokens":3,"output_tokens":4}}"#).unwrap();
        assert_eq!(r.raw, "---\nstatus: done\n---\nok");
        assert_eq!(r.session.as_deref(), Some("s-1"));
        assert_eq!(
            r.fields.get("usage").unwrap().to_json(),
            r#"{"inputTokens":3,"outputTokens":4,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}"#
        );
        assert!(read_json_result("plain text").is_err());
        assert!(
            read_json_result(r#"{"is_error":true,"result":"quota"}"#)
                .unwrap_err()
                .contains("quota")
        );
    }

    #[test]
    fn hermes_session_line() {
        let r = read_hermes("---\nstatus: done\n---\nbody\n\nsession_id: 20260101_abc\n");
        assert_eq!(r.raw, "---\nstatus: done\n---\nbody\n");
        assert_eq!(r.session.as_deref(), Some("20260101_abc"));
    }
}
