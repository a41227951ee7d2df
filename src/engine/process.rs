//! Agents as programs under supervision, and uwf's own protocol: `CMD <thread> <role>`, the
//! agent using the store; it prints the id of the StepNode it wrote as its last line.

use super::adapter::{Adapter, AgentCall, interrupted};
use crate::cas::{NodeId, Value};
use crate::supervise::{self, Ending, Limits, Result, StepError};
use crate::thread::AgentProtocol;

/// uwf's protocol.
pub(super) struct Uwf;

impl Adapter for Uwf {
    fn run(&self, call: &AgentCall<'_>) -> Result<(NodeId, Vec<String>)> {
        let args = [call.opts.thread.as_str(), call.decision.role.as_str()];
        let Some(subs) = call.opts.submissions else {
            return Ok((run_program(call, &args, &call.env())?, Vec::new()));
        };
        // Under a runner, what the agent submits through its socket waits for this step: the
        // StepNode it returns goes in the head move's transaction, anything else it submitted
        // is written now (kept, as its own writes would be).
        let thread = call.opts.thread;
        let at = crate::thread::Expected::of(call.opts.store, call.moderated, &call.decision.role);
        subs.expect(thread, at.ok());
        let ran = run_program(call, &args, &call.env());
        let mut others = subs.done(thread);
        if let Ok(id) = &ran
            && let Some(at) = others.iter().rposition(|w| w.step() == *id)
        {
            call.hold.put(others.remove(at));
        }
        if !others.is_empty() {
            call.opts
                .store
                .write_grouped(move |w| {
                    for o in &others {
                        o.write(w)?;
                    }
                    Ok(())
                })
                .map_err(crate::thread::ThreadError::from)?;
        }
        Ok((ran?, Vec::new()))
    }
}

/// Runs the agent program with `args` appended and `env` added, under supervision; returns
/// the node id it printed last.
pub(super) fn run_program(
    call: &AgentCall<'_>,
    args: &[&str],
    env: &[(String, String)],
) -> Result<NodeId> {
    let opts = call.opts;
    let role = &call.decision.role;
    let mut agent = call.agent.clone();
    let command = agent.display();
    if agent.command == "uwf"
        && let Some(exe) = &opts.self_exe
    {
        agent.command = exe.display().to_string();
    }
    let limits = Limits {
        sole_child: opts.sole_child,
        ..Limits::with_timeout(call.timeout)
    };
    tracing::info!(
        tag = "8XQQT1SD",
        thread = %opts.thread,
        role = %role,
        agent = %command,
        "agent start"
    );
    let started = std::time::Instant::now();
    let run = supervise::run(&agent, args, call.cwd, env, limits, opts.interrupt)?;
    let stderr = run.stderr.text();
    tracing::info!(
        tag = "VA8HT6J7",
        thread = %opts.thread,
        role = %role,
        agent = %command,
        status = %ending_name(&run.ending),
        duration_ms = started.elapsed().as_millis() as u64,
        stderr_tail = %tail(&stderr, 400),
        "agent exit"
    );
    match run.ending {
        Ending::Interrupted(signal) => return Err(StepError::Interrupted { signal }),
        Ending::TimedOut => {
            return Err(StepError::Timeout {
                command,
                secs: call.timeout.as_secs_f64(),
            });
        }
        Ending::Exited(0) => {}
        Ending::Exited(_)
            if agent.protocol == AgentProtocol::Uwf
                && looks_like_7a0c_usage(&run.stderr.text()) =>
        {
            return Err(StepError::WrongProtocol {
                command,
                stderr: one_line(&run.stderr.text()),
            });
        }
        Ending::Exited(c) => {
            return Err(StepError::Failed {
                command,
                status: format!("exit code {c}"),
                stderr: one_line(&run.stderr.text()),
            });
        }
        Ending::Signaled(s) => {
            return Err(StepError::Failed {
                command,
                status: format!("killed by signal {s}"),
                stderr: one_line(&run.stderr.text()),
            });
        }
    }
    interrupted(opts.interrupt)?;
    returned_id(&run.stdout.text(), &command)
}

/// How an agent's process ended, for the log.
fn ending_name(e: &Ending) -> String {
    match e {
        Ending::Exited(c) => format!("exit {c}"),
        Ending::Signaled(s) => format!("signal {s}"),
        Ending::TimedOut => "timed out".into(),
        Ending::Interrupted(s) => format!("interrupted by signal {s}"),
    }
}

/// The last `n` characters of `s` at most.
fn tail(s: &str, n: usize) -> &str {
    let skip = s.chars().count().saturating_sub(n);
    s.char_indices().nth(skip).map_or("", |(i, _)| &s[i..])
}

/// Whether an agent's stderr is the usage message of an agent of the TypeScript tool's
/// protocol (`usage: <agent> --thread <id> --role <role> --prompt <text>`, or commander's
/// complaint about those options), which it prints when called as `<agent> <thread> <role>`.
fn looks_like_7a0c_usage(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    (s.contains("--thread") || s.contains("--role"))
        && (s.contains("usage") || s.contains("option"))
}

/// `s` on one line: trimmed non-empty lines joined by " | ", the last 2000 characters.
fn one_line(s: &str) -> String {
    let lines: Vec<&str> = s
        .trim()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let joined = lines.join(" | ");
    let n = joined.chars().count();
    if n > 2000 {
        let cut: String = joined.chars().skip(n - 2000).collect();
        format!("…{cut}")
    } else {
        joined
    }
}

/// The node id an agent printed: the last non-empty stdout line, an id or JSON with `stepHash`.
fn returned_id(stdout: &str, command: &str) -> Result<NodeId> {
    let bad = |message: String| StepError::BadOutput {
        command: command.to_string(),
        message,
    };
    let Some(last) = stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        return Err(bad(
            "agent printed nothing on stdout; expected a StepNode id as its last line".into(),
        ));
    };
    let text = if last.starts_with('{') {
        let v = Value::from_json_str(last).map_err(|e| {
            bad(format!(
                "agent stdout last line is not valid JSON: {e}: {last}"
            ))
        })?;
        match v.get("stepHash").and_then(Value::as_str) {
            Some(h) => h.to_string(),
            None => {
                return Err(bad(format!(
                    "agent stdout JSON missing valid stepHash: {last}"
                )));
            }
        }
    } else {
        last.to_string()
    };
    NodeId::parse(&text).map_err(|_| {
        bad(format!(
            "agent stdout last line is not a node id: \"{}\"",
            one_line(&text)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returned_ids_and_bad_output() {
        let id = "2B77HPWKR4V3V";
        assert_eq!(
            returned_id(&format!("log\n{id}\n\n"), "a")
                .unwrap()
                .to_wire(),
            id
        );
        let json = format!("{{\"stepHash\":\"{id}\"}}");
        assert_eq!(returned_id(&json, "a").unwrap().to_wire(), id);
        for (out, says) in [
            ("", "printed nothing"),
            ("hello", "not a node id"),
            ("{\"x\":1}", "missing valid stepHash"),
            ("{nope", "not valid JSON"),
        ] {
            let e = returned_id(out, "a").unwrap_err();
            assert!(e.to_string().contains(says), "{out:?}: {e}");
            assert!(e.retryable());
        }
    }

    #[test]
    fn usage_of_7a0c_agents() {
        for yes in [
            "usage: uwf-hermes --thread <id> --role <role> --prompt <text>",
            "Usage: agent [options]\n  --thread <id>  thread\n  --role <role>",
            "error: required option '--thread <id>' not specified",
        ] {
            assert!(looks_like_7a0c_usage(yes), "{yes}");
        }
        for no in ["usage: agent <thread-id> <role>", "thread not found", ""] {
            assert!(!looks_like_7a0c_usage(no), "{no}");
        }
    }

    #[test]
    fn one_line_keeps_the_end() {
        assert_eq!(one_line("  a\n\n b \n"), "a | b");
        let long = "x".repeat(3000) + "END";
        let l = one_line(&long);
        assert!(l.ends_with("END"));
        assert_eq!(l.chars().count(), 2001);
    }
}
