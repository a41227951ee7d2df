//! `uwf.jsonl`: what an export holds that the TypeScript tool cannot read, in a file of the
//! export root that it ignores.
//!
//! The TypeScript tool (7a0c) reads only workflows of its own Workflow schema
//! (`AZF3FA1TN3D4A`); one thread of another workflow in `threads.yaml` makes its `thread list`
//! fail. So an export lists in `workflows.yaml`, `registry.yaml`, `threads.yaml` and
//! `history.jsonl` only what that tool can read, and everything else goes here: registry names
//! of uwf's transition-list workflows, the registry history of every name, and the active and
//! finished threads of those workflows. The node files of all of them are in `cas/` as usual.
//!
//! One JSON object per line, its `kind` first:
//!
//! ```text
//! {"kind":"uwf","version":1}
//! {"kind":"workflow","name":"solve-issue","workflow":"48YZ260G6XFJ6"}
//! {"kind":"registry","name":"solve-issue","workflow":"48YZ260G6XFJ6","time":1767225600000}
//! {"kind":"thread","thread":"06…","workflow":"48YZ260G6XFJ6","head":"…","updatedAt":…,"status":"active"}
//! {"kind":"history","thread":"06…","workflow":"…","head":"…","completedAt":…,"reason":"completed"}
//! {"kind":"state","thread":"06…","phase":"paused","maxRounds":null,"failures":0,"lastError":null}
//! {"kind":"usage","step":"…","thread":"06…","workflow":"…","workflowName":"debate","role":"against","day":"2026-01-01","calls":[{"provider":"openai","model":"default","inputTokens":120,"outputTokens":30,"cachedInputTokens":0,"startedAt":1767225600000,"durationMs":812,"costUsd":0.00048}]}
//! ```
//!
//! - `workflow`: a registry name whose workflow the TypeScript tool cannot read (the others are
//!   in `workflows.yaml`).
//! - `registry`: one version of a registry name, for every name, oldest first per name (the
//!   TypeScript tool keeps no registry history).
//! - `thread`: an active thread whose workflow the TypeScript tool cannot read; `workflow` may be
//!   null when unknown. `status` is `active`; states the TypeScript tool has no word for (such as
//!   paused or queued) are carried here under their own names.
//! - `history`: a finished thread whose workflow the TypeScript tool cannot read; `reason` is
//!   `completed`, `cancelled` or a uwf-only outcome (such as `failed` or `dropped`).
//! - `state`: a thread's state besides its head, for every thread that has one: `phase`
//!   `ready`, `queued`, `paused` or `pausedForBudget`, its round limit, its consecutive failed steps and the last
//!   error `{"time","agent","message"}` (kept for a failed thread).
//! - `usage`: the model calls kept with a StepNode (`uwf usage` adds them up): its thread,
//!   workflow (null when unknown) and its name, role, the UTC day they count on, and each call's provider,
//!   model, tokens, duration and cost in USD (null when unknown).
//! - `outcome` (reserved): the real outcome of a thread that `history.jsonl` lists as
//!   `cancelled` because the TypeScript tool has no word for it:
//!   `{"kind":"outcome","thread","head","completedAt","reason","message"}`.
//!
//! A reader skips and reports a line it does not understand (another `kind`, a newer
//! `version`, a missing field), so nothing is dropped silently.

use crate::cas::value::{js_number_string, write_json_string};
use crate::cas::{NodeId, Value};
use crate::store::{DAY_MS, ModelCall, StepCalls};

/// The file name in the export root.
pub(crate) const UWF_FILE: &str = "uwf.jsonl";

/// The format version written in the first line.
pub(crate) const VERSION: u64 = 1;

/// Longest line read; a longer one is reported and skipped.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// One line of `uwf.jsonl`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Extra {
    /// The first line: the format version.
    Header {
        /// The version.
        version: u64,
    },
    /// A registry name whose workflow the TypeScript tool cannot read.
    Workflow {
        /// The name.
        name: String,
        /// The workflow node id.
        workflow: String,
    },
    /// One version of a registry name.
    Registry {
        /// The name.
        name: String,
        /// The workflow node id.
        workflow: String,
        /// When it was registered, ms since the epoch.
        time: u64,
    },
    /// An active thread.
    Thread {
        /// The thread id.
        thread: String,
        /// The workflow node id, when known.
        workflow: Option<String>,
        /// The head node id.
        head: String,
        /// When the head last moved, ms since the epoch.
        updated_at: u64,
        /// `active`.
        status: String,
    },
    /// A finished thread.
    History {
        /// The thread id.
        thread: String,
        /// The workflow node id.
        workflow: String,
        /// The last node.
        head: String,
        /// When it finished, ms since the epoch.
        completed_at: u64,
        /// How it finished.
        reason: String,
    },
    /// A thread's state besides its head.
    State {
        /// The thread id.
        thread: String,
        /// `ready`, `queued` or `paused`.
        phase: String,
        /// The round limit.
        max_rounds: Option<u64>,
        /// Consecutive failed steps.
        failures: u64,
        /// The last failed step: time, agent, message.
        last_error: Option<(u64, String, String)>,
    },
    /// The model calls kept with a step.
    Usage {
        /// The StepNode id.
        step: String,
        /// Whose calls, the day they count on, the calls.
        calls: StepCalls,
    },
}

fn field(s: &mut String, key: &str, value: &str) {
    s.push_str(",\"");
    s.push_str(key);
    s.push_str("\":");
    write_json_string(value, s);
}

fn number(s: &mut String, key: &str, value: u64) {
    s.push_str(",\"");
    s.push_str(key);
    s.push_str("\":");
    s.push_str(&js_number_string(value as f64));
}

impl Extra {
    /// The line, with its `\n`.
    pub(crate) fn to_line(&self) -> String {
        let mut s = String::with_capacity(160);
        match self {
            Extra::Header { version } => {
                s.push_str("{\"kind\":\"uwf\"");
                number(&mut s, "version", *version);
            }
            Extra::Workflow { name, workflow } => {
                s.push_str("{\"kind\":\"workflow\"");
                field(&mut s, "name", name);
                field(&mut s, "workflow", workflow);
            }
            Extra::Registry {
                name,
                workflow,
                time,
            } => {
                s.push_str("{\"kind\":\"registry\"");
                field(&mut s, "name", name);
                field(&mut s, "workflow", workflow);
                number(&mut s, "time", *time);
            }
            Extra::Thread {
                thread,
                workflow,
                head,
                updated_at,
                status,
            } => {
                s.push_str("{\"kind\":\"thread\"");
                field(&mut s, "thread", thread);
                match workflow {
                    Some(w) => field(&mut s, "workflow", w),
                    None => s.push_str(",\"workflow\":null"),
                }
                field(&mut s, "head", head);
                number(&mut s, "updatedAt", *updated_at);
                field(&mut s, "status", status);
            }
            Extra::History {
                thread,
                workflow,
                head,
                completed_at,
                reason,
            } => {
                s.push_str("{\"kind\":\"history\"");
                field(&mut s, "thread", thread);
                field(&mut s, "workflow", workflow);
                field(&mut s, "head", head);
                number(&mut s, "completedAt", *completed_at);
                field(&mut s, "reason", reason);
            }
            Extra::State {
                thread,
                phase,
                max_rounds,
                failures,
                last_error,
            } => {
                s.push_str("{\"kind\":\"state\"");
                field(&mut s, "thread", thread);
                field(&mut s, "phase", phase);
                match max_rounds {
                    Some(n) => number(&mut s, "maxRounds", *n),
                    None => s.push_str(",\"maxRounds\":null"),
                }
                number(&mut s, "failures", *failures);
                match last_error {
                    Some((time, agent, message)) => {
                        s.push_str(",\"lastError\":{\"time\":");
                        s.push_str(&js_number_string(*time as f64));
                        field(&mut s, "agent", agent);
                        field(&mut s, "message", message);
                        s.push('}');
                    }
                    None => s.push_str(",\"lastError\":null"),
                }
            }
            Extra::Usage { step, calls } => usage_line(&mut s, step, calls),
        }
        s.push_str("}\n");
        s
    }

    /// Parses one line (without its newline).
    ///
    /// # Errors
    /// A one-line reason: not a JSON object, an unknown kind or version, a missing field.
    pub(crate) fn parse_line(line: &str) -> Result<Extra, String> {
        let v = Value::from_json_str(line).map_err(|e| format!("broken JSON ({e})"))?;
        if v.as_object().is_none() {
            return Err("not a JSON object".into());
        }
        let text = |k: &str| -> Result<String, String> {
            match v.get(k) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("\"{k}\" is not a string")),
                None => Err(format!("missing \"{k}\"")),
            }
        };
        let time = |k: &str| -> Result<u64, String> {
            match v.get(k).and_then(Value::as_f64) {
                Some(n) if n.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&n) => {
                    Ok(n as u64)
                }
                Some(_) => Err(format!("\"{k}\" is not a time in ms")),
                None => Err(format!("missing \"{k}\"")),
            }
        };
        let kind = text("kind")?;
        Ok(match kind.as_str() {
            "uwf" => {
                let version = time("version")?;
                if version != VERSION {
                    return Err(format!(
                        "format version {version} is not known to this uwf (it reads {VERSION})"
                    ));
                }
                Extra::Header { version }
            }
            "workflow" => Extra::Workflow {
                name: text("name")?,
                workflow: text("workflow")?,
            },
            "registry" => Extra::Registry {
                name: text("name")?,
                workflow: text("workflow")?,
                time: time("time")?,
            },
            "thread" => {
                let status = text("status")?;
                if status != "active" {
                    return Err(format!(
                        "thread status \"{status}\" is not known to this uwf"
                    ));
                }
                Extra::Thread {
                    thread: text("thread")?,
                    workflow: match v.get("workflow") {
                        Some(Value::Null) | None => None,
                        Some(Value::String(s)) => Some(s.clone()),
                        Some(_) => return Err("\"workflow\" is not a string or null".into()),
                    },
                    head: text("head")?,
                    updated_at: time("updatedAt")?,
                    status,
                }
            }
            "history" => Extra::History {
                thread: text("thread")?,
                workflow: text("workflow")?,
                head: text("head")?,
                completed_at: time("completedAt")?,
                reason: text("reason")?,
            },
            "state" => {
                let phase = text("phase")?;
                if !matches!(
                    phase.as_str(),
                    "ready" | "queued" | "paused" | "pausedForBudget"
                ) {
                    return Err(format!("thread phase \"{phase}\" is not known to this uwf"));
                }
                let last_error = last_error(v.get("lastError"))?;
                Extra::State {
                    thread: text("thread")?,
                    phase,
                    max_rounds: match v.get("maxRounds") {
                        None | Some(Value::Null) => None,
                        Some(_) => Some(time("maxRounds")?),
                    },
                    failures: time("failures")?,
                    last_error,
                }
            }
            "usage" => Extra::Usage {
                step: text("step")?,
                calls: step_calls(&v, &text)?,
            },
            other => return Err(format!("kind \"{other}\" is not known to this uwf")),
        })
    }
}

/// The `lastError` of a `state` line (`None` when absent or null): time, agent and message.
/// A `usage` line's fields after its kind.
fn usage_line(s: &mut String, step: &str, c: &StepCalls) {
    s.push_str("{\"kind\":\"usage\"");
    field(s, "step", step);
    field(s, "thread", &c.thread);
    match c.workflow {
        Some(w) => field(s, "workflow", &w.to_string()),
        None => s.push_str(",\"workflow\":null"),
    }
    field(s, "workflowName", &c.workflow_name);
    field(s, "role", &c.role);
    let day = crate::time::format_iso(u64::from(c.day) * DAY_MS);
    field(s, "day", &day[..10]);
    s.push_str(",\"calls\":[");
    for (i, m) in c.calls.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"provider\":");
        write_json_string(&m.provider, s);
        field(s, "model", &m.model);
        number(s, "inputTokens", m.input_tokens);
        number(s, "outputTokens", m.output_tokens);
        number(s, "cachedInputTokens", m.cached_input_tokens);
        number(s, "startedAt", m.started_ms);
        number(s, "durationMs", m.duration_ms);
        match m.cost_usd {
            Some(c) => {
                s.push_str(",\"costUsd\":");
                s.push_str(&js_number_string(c));
            }
            None => s.push_str(",\"costUsd\":null"),
        }
        s.push('}');
    }
    s.push(']');
}

/// The calls of a `usage` line, with whose they are and their day.
fn step_calls(
    v: &Value,
    text: &dyn Fn(&str) -> Result<String, String>,
) -> Result<StepCalls, String> {
    Ok(StepCalls {
        thread: text("thread")?,
        workflow: match v.get("workflow") {
            None | Some(Value::Null) => None,
            Some(_) => Some(
                NodeId::parse(&text("workflow")?)
                    .map_err(|_| "\"workflow\" is not a node id".to_string())?,
            ),
        },
        workflow_name: text("workflowName")?,
        role: text("role")?,
        day: crate::time::parse_time(&text("day")?, 0)
            .and_then(|ms| u32::try_from(ms / DAY_MS).ok())
            .ok_or("\"day\" is not a date")?,
        calls: match v.get("calls") {
            Some(Value::Array(a)) => a.iter().map(model_call).collect::<Result<_, _>>()?,
            _ => return Err("\"calls\" is not an array".into()),
        },
    })
}

/// One call of a `usage` line.
fn model_call(v: &Value) -> Result<ModelCall, String> {
    let text = |k: &str| match v.get(k) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(format!("a call's \"{k}\" is not a string")),
    };
    let count = |k: &str| match v.get(k).and_then(Value::as_f64) {
        Some(n) if n.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&n) => Ok(n as u64),
        _ => Err(format!("a call's \"{k}\" is not a count")),
    };
    Ok(ModelCall {
        provider: text("provider")?,
        model: text("model")?,
        input_tokens: count("inputTokens")?,
        output_tokens: count("outputTokens")?,
        cached_input_tokens: count("cachedInputTokens")?,
        started_ms: count("startedAt")?,
        duration_ms: count("durationMs")?,
        cost_usd: match v.get("costUsd") {
            None | Some(Value::Null) => None,
            Some(Value::Number(c)) if c.is_finite() && *c >= 0.0 => Some(*c),
            Some(_) => return Err("a call's \"costUsd\" is not a cost".into()),
        },
    })
}

fn last_error(v: Option<&Value>) -> Result<Option<(u64, String, String)>, String> {
    Ok(match v {
        None | Some(Value::Null) => None,
        Some(e @ Value::Object(_)) => {
            let t = e
                .get("time")
                .and_then(Value::as_f64)
                .filter(|n| n.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(n));
            match (t, e.get("agent"), e.get("message")) {
                (Some(t), Some(Value::String(a)), Some(Value::String(m))) => {
                    Some((t as u64, a.clone(), m.clone()))
                }
                _ => return Err("\"lastError\" needs time, agent and message".into()),
            }
        }
        Some(_) => return Err("\"lastError\" is not an object or null".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        let all = [
            Extra::Header { version: VERSION },
            Extra::Workflow {
                name: "solve-issue".into(),
                workflow: "48YZ260G6XFJ6".into(),
            },
            Extra::Registry {
                name: "a \"b\"\n".into(),
                workflow: "48YZ260G6XFJ6".into(),
                time: 1_767_225_600_000,
            },
            Extra::Thread {
                thread: "06DQDQD8R3SYN75HX43EQ49CJR".into(),
                workflow: None,
                head: "77PZAJHZM536J".into(),
                updated_at: 5,
                status: "active".into(),
            },
            Extra::History {
                thread: "01JTEST000000000000CANCEL4".into(),
                workflow: "48YZ260G6XFJ6".into(),
                head: "77PZAJHZM536J".into(),
                completed_at: 9_007_199_254_740_991,
                reason: "cancelled".into(),
            },
            Extra::State {
                thread: "06H0AAKR0Y77DFRXGJMVWRNVA8".into(),
                phase: "paused".into(),
                max_rounds: Some(10),
                failures: 2,
                last_error: Some((7, "./agent.sh".into(), "agent \"x\" failed".into())),
            },
            Extra::State {
                thread: "06H0AAKR0Y77DFRXGJMVWRNVA9".into(),
                phase: "queued".into(),
                max_rounds: None,
                failures: 0,
                last_error: None,
            },
            Extra::Usage {
                step: "77PZAJHZM536J".into(),
                calls: StepCalls {
                    thread: "06H0AAKR0Y77DFRXGJMVWRNVA9".into(),
                    workflow: Some(NodeId::parse("48YZ260G6XFJ6").unwrap()),
                    workflow_name: "debate".into(),
                    role: "a \"role\"".into(),
                    day: 20_454,
                    calls: vec![
                        ModelCall {
                            provider: "fake".into(),
                            model: "default".into(),
                            input_tokens: 120,
                            output_tokens: 30,
                            cached_input_tokens: 4,
                            started_ms: 1_767_225_600_000,
                            duration_ms: 812,
                            cost_usd: Some(0.00048),
                        },
                        ModelCall {
                            provider: "claude-code".into(),
                            model: "claude".into(),
                            input_tokens: 1,
                            output_tokens: 2,
                            cached_input_tokens: 0,
                            started_ms: 0,
                            duration_ms: 3,
                            cost_usd: None,
                        },
                    ],
                },
            },
        ];
        for e in all {
            let line = e.to_line();
            assert!(
                line.ends_with("}\n") && line.matches('\n').count() == 1,
                "{line}"
            );
            assert_eq!(Extra::parse_line(line.trim_end()), Ok(e));
        }
    }

    #[test]
    fn unknown_lines_are_refused_with_a_reason() {
        for (line, why) in [
            ("[1]", "not a JSON object"),
            ("{\"kind\":\"later\"}", "kind \"later\""),
            ("{\"kind\":\"uwf\",\"version\":2}", "format version 2"),
            (
                "{\"kind\":\"thread\",\"thread\":\"T\",\"head\":\"H\",\"updatedAt\":1,\"status\":\"paused\"}",
                "\"paused\"",
            ),
            (
                "{\"kind\":\"registry\",\"name\":\"n\",\"workflow\":\"W\",\"time\":-1}",
                "time",
            ),
            ("{\"kind\":\"history\",\"thread\":\"T\"}", "missing"),
        ] {
            let e = Extra::parse_line(line).unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
        }
    }
}
