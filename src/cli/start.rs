//! `uwf thread start`: one thread, or many from JSON Lines (`--batch`) in one write.

use super::output::{Format, NodeIdStr, json_line, print_as, to_value, write_stdout};
use super::{CliError, CliResult, Env};
use crate::thread::{self, Admission, StartLine, ThreadId};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

// The task of a new thread: `-p TEXT`, `-p -` (standard input) or `--prompt-file FILE`.
#[derive(clap::Args, Debug)]
pub(crate) struct PromptArgs {
    /// The task; - reads it from standard input.
    #[arg(
        short = 'p',
        long,
        required_unless_present = "prompt_file",
        conflicts_with = "prompt_file",
        allow_hyphen_values = true
    )]
    prompt: Option<String>,
    /// Read the task from this file.
    #[arg(long, value_name = "FILE")]
    prompt_file: Option<PathBuf>,
}

impl PromptArgs {
    /// `-p` and `--prompt-file` as given.
    pub(crate) fn new(prompt: Option<String>, prompt_file: Option<PathBuf>) -> Self {
        PromptArgs {
            prompt,
            prompt_file,
        }
    }

    /// The task's text; trailing line ends of stdin or a file are dropped, as the shell's
    /// `$(cat FILE)` drops them.
    pub(crate) fn text(self) -> CliResult<String> {
        let trim = |t: String| t.trim_end_matches(['\n', '\r']).to_string();
        match (self.prompt, self.prompt_file) {
            (Some(p), _) if p == "-" => Ok(trim(stdin_text("the prompt")?)),
            (Some(p), _) => Ok(p),
            (None, Some(f)) => std::fs::read_to_string(&f).map(trim).map_err(|e| {
                CliError::new(format!("cannot read prompt file {}: {e}", f.display()))
            }),
            // clap requires one of them.
            (None, None) => Err(CliError::of(
                crate::ErrorKind::Usage,
                "a prompt is required",
            )),
        }
    }
}

/// All of standard input, `what` naming it in the error.
fn stdin_text(what: &str) -> CliResult<String> {
    let mut t = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut t)
        .map_err(|e| CliError::new(format!("cannot read {what} on stdin: {e}")))?;
    Ok(t)
}

// Arguments of `thread start`.
#[derive(clap::Args, Debug)]
pub(crate) struct StartArgs {
    /// The workflow.
    workflow: String,
    /// The task; - reads it from standard input.
    #[arg(
        short = 'p',
        long,
        required_unless_present_any = ["prompt_file", "batch"],
        conflicts_with_all = ["prompt_file", "batch"],
        allow_hyphen_values = true
    )]
    prompt: Option<String>,
    /// Read the task from this file.
    #[arg(long, value_name = "FILE", conflicts_with = "batch")]
    prompt_file: Option<PathBuf>,
    /// Start one thread a line of this JSON Lines file (- reads standard input):
    /// `{"prompt": …, "cwd"?: …, "maxRounds"?: …}`, in one write; prints one start a line.
    #[arg(long, value_name = "FILE")]
    batch: Option<String>,
    /// The thread's working directory (absolute; default: the current directory).
    #[arg(long)]
    cwd: Option<String>,
    /// Print only the new thread's id.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// The most steps the thread may take; it fails before step N+1.
    #[arg(long, value_name = "N")]
    max_rounds: Option<u32>,
}

/// `thread start` (`status` only for a thread its workflow's limit held back).
#[derive(Serialize)]
struct Started<'a> {
    workflow: NodeIdStr,
    thread: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
}

impl<'a> Started<'a> {
    fn new(wf: crate::cas::NodeId, t: &'a ThreadId, admission: Admission) -> Started<'a> {
        Started {
            workflow: NodeIdStr(wf),
            thread: t.as_str(),
            status: match admission {
                Admission::Started => None,
                Admission::Queued => Some("queued"),
                Admission::Dropped => Some("dropped"),
            },
        }
    }
}

/// `thread start WORKFLOW -p PROMPT`, or `--batch FILE`.
pub(crate) fn cmd_start(env: &Env, a: StartArgs) -> CliResult {
    if let Some(batch) = &a.batch {
        return cmd_start_batch(env, &a, batch);
    }
    let prompt = PromptArgs::new(a.prompt, a.prompt_file).text()?;
    let (wf, t, admission) = start_thread(env, &a.workflow, &prompt, a.cwd, a.max_rounds)?;
    if a.quiet {
        return write_stdout(format!("{}\n", t.as_str()).as_bytes());
    }
    print_as(env.format, &Started::new(wf, &t, admission))
}

/// Starts one thread of `workflow`; returns the workflow, the thread and what admission did.
pub(crate) fn start_thread(
    env: &Env,
    workflow: &str,
    prompt: &str,
    cwd: Option<String>,
    max_rounds: Option<u32>,
) -> CliResult<(crate::cas::NodeId, ThreadId, Admission)> {
    let here = std::env::current_dir()?;
    let cwd = cwd.unwrap_or_else(|| here.display().to_string());
    let config = env.config()?;
    let s = env.open_rw()?;
    let t = env.new_thread_id();
    let (wf, admission) = thread::start_with(
        &s,
        &thread::StartInput {
            workflow,
            prompt,
            cwd: &cwd,
            search_from: &here,
            thread: t.clone(),
            now_ms: env.now_ms,
        },
        config,
        max_rounds,
    )?;
    Ok((wf, t, admission))
}

/// A line of `--batch`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BatchLine {
    prompt: String,
    cwd: Option<String>,
    max_rounds: Option<u32>,
}

/// `thread start WORKFLOW --batch FILE`: every line read and checked first (a bad one rejects
/// the batch, naming its line), then one write.
fn cmd_start_batch(env: &Env, a: &StartArgs, batch: &str) -> CliResult {
    let text = if batch == "-" {
        stdin_text("the batch")?
    } else {
        std::fs::read_to_string(batch)
            .map_err(|e| CliError::new(format!("cannot read batch file {batch}: {e}")))?
    };
    let here = std::env::current_dir()?;
    let default_cwd = a.cwd.clone().unwrap_or_else(|| here.display().to_string());
    let lines = parse_batch(&text, &default_cwd, a.max_rounds)?;
    let ids = env.new_thread_ids(lines.len());
    let lines: Vec<StartLine> = lines
        .into_iter()
        .zip(ids)
        .map(|((prompt, cwd, max_rounds), thread)| StartLine {
            thread,
            prompt,
            cwd,
            max_rounds,
        })
        .collect();
    let config = env.config()?;
    let s = env.open_rw()?;
    let (wf, admitted) = thread::start_many(&s, &a.workflow, &here, env.now_ms, config, &lines)?;
    let mut out = Vec::new();
    for (l, admission) in lines.iter().zip(admitted) {
        if a.quiet {
            out.extend_from_slice(l.thread.as_str().as_bytes());
            out.push(b'\n');
            continue;
        }
        let started = Started::new(wf, &l.thread, admission);
        match env.format {
            Format::Json => out.extend(json_line(&started)?),
            Format::Yaml => {
                let y = crate::interchange::yaml::stringify_value(&to_value(&started));
                out.extend_from_slice(format!("---\n{}\n", y.trim_end()).as_bytes());
            }
        }
    }
    write_stdout(&out)
}

/// The threads of a batch: prompt, cwd and round limit of each line (blank lines skipped),
/// with `cwd` and `max_rounds` where a line gives none.
fn parse_batch(
    text: &str,
    cwd: &str,
    max_rounds: Option<u32>,
) -> CliResult<Vec<(String, String, Option<u32>)>> {
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: String| CliError::new(format!("batch line {}: {why}", i + 1));
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| bad(json_reason(&e)))?;
        if !v.is_object() {
            return Err(bad(format!("not a JSON object: {line}")));
        }
        let l: BatchLine = serde_json::from_value(v).map_err(|e| bad(json_reason(&e)))?;
        let cwd = l.cwd.unwrap_or_else(|| cwd.to_string());
        if !std::path::Path::new(&cwd).is_absolute() {
            return Err(bad(format!("cwd must be an absolute path, got: {cwd}")));
        }
        lines.push((l.prompt, cwd, l.max_rounds.or(max_rounds)));
    }
    if lines.is_empty() {
        return Err(CliError::new(
            "the batch has no thread: one JSON object a line",
        ));
    }
    Ok(lines)
}

/// A JSON error without serde_json's position (a line is one line).
fn json_reason(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let s = match s.rfind(" at line ") {
        Some(at) => s[..at].to_string(),
        None => s,
    };
    if e.is_data() {
        s
    } else {
        format!("not a JSON object ({s})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_lines_take_defaults_and_name_the_bad_line() {
        let text = "{\"prompt\":\"a\"}\n\n{\"prompt\":\"b\",\"cwd\":\"/x\",\"maxRounds\":3}\n";
        let l = parse_batch(text, "/here", Some(9)).expect("valid");
        assert_eq!(
            l,
            vec![
                ("a".to_string(), "/here".to_string(), Some(9)),
                ("b".to_string(), "/x".to_string(), Some(3)),
            ]
        );
        for (text, want) in [
            (
                "{\"prompt\":\"a\"}\n{\"prompt\":1}",
                "batch line 2: invalid type",
            ),
            (
                "{\"prompt\":\"a\"}\nnot json",
                "batch line 2: not a JSON object",
            ),
            ("{\"prompt\":\"a\"", "batch line 1: not a JSON object (EOF"),
            ("[\"a\"]", "batch line 1: not a JSON object: [\"a\"]"),
            (
                "{\"prompt\":\"a\",\"extra\":1}",
                "batch line 1: unknown field `extra`",
            ),
            ("{}", "batch line 1: missing field `prompt`"),
            (
                "{\"prompt\":\"a\",\"cwd\":\"rel\"}",
                "batch line 1: cwd must be an absolute",
            ),
            ("\n\n", "the batch has no thread"),
        ] {
            let e = parse_batch(text, "/here", None).expect_err(text).message;
            assert!(e.starts_with(want), "{text:?}: {e}");
            assert!(!e.contains('\n') && !e.contains("column"), "one line: {e}");
        }
    }
}
