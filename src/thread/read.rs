//! `thread read`: a thread as markdown (the TypeScript tool's format).

use super::chain::{StepRecord, chain_in, load_workflow, payload_of};
use super::ops::head_of;
use super::time::{format_duration, format_utc};
use super::{Result, ThreadError};
use crate::cas::{NodeId, Value};
use crate::store::{Snapshot, Store};
use crate::workflow::Brief;

/// Options of `thread read`.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Characters of step sections to show at most (at least one step is always shown).
    pub quota: usize,
    /// Show only the steps strictly before this one.
    pub before: Option<NodeId>,
    /// Show the start section even with `before`.
    pub start: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            quota: 4000,
            before: None,
            start: false,
        }
    }
}

const SEPARATOR: &str = "\n\n---\n\n";

/// The content an agent produced, from a step's detail node: a text node's text, the last
/// non-empty assistant turn of a turn list, or a `{text}` object's text.
fn detail_content(store: &Snapshot, detail: &str) -> Result<Option<String>> {
    let Some(id) = NodeId::parse_strict(detail) else {
        return Ok(None);
    };
    let Some(p) = payload_of(store, id)? else {
        return Ok(None);
    };
    Ok(match &p {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => {
            if let Some(Value::Array(turns)) = m.get("turns") {
                let mut last = None;
                for t in turns {
                    let turn = match t {
                        Value::String(h) => match NodeId::parse_strict(h) {
                            Some(h) => payload_of(store, h)?,
                            None => None,
                        },
                        Value::Object(_) => Some(t.clone()),
                        _ => None,
                    };
                    if let Some(turn) = turn
                        && turn.get("role").and_then(Value::as_str) == Some("assistant")
                        && let Some(c) = turn.get("content").and_then(Value::as_str)
                        && !c.trim().is_empty()
                    {
                        last = Some(c.to_string());
                    }
                }
                last
            } else {
                m.get("text").and_then(Value::as_str).map(str::to_string)
            }
        }
        _ => None,
    }
    .filter(|s| !s.trim().is_empty()))
}

fn header(n: usize, s: &StepRecord) -> String {
    let time = s
        .number("startedAtMs")
        .map_or_else(|| format_utc(s.timestamp), format_utc);
    let dur = match (s.number("startedAtMs"), s.number("completedAtMs")) {
        (Some(a), Some(b)) => format_duration(b.saturating_sub(a)),
        _ => "?".to_string(),
    };
    format!(
        "## Step {n}: {} `{}`\n**Agent:** {} | **Time:** {time} | **Duration:** {dur}",
        s.field("role"),
        s.id,
        s.field("agent")
    )
}

/// Renders thread `thread` as markdown.
///
/// # Errors
/// [`ThreadError::NotFound`], `step H not found in thread T`, a broken chain, store failures.
pub fn read(store: &Store, thread: &str, opts: &ReadOptions) -> Result<String> {
    let head = head_of(store, thread)?;
    // Taken after the head is read, so it holds the head node.
    let snap = store.snapshot()?;
    let chain = chain_in(&snap, head)?;
    let wf_id = chain.workflow_id()?;
    let wf = load_workflow(&snap, wf_id).ok();
    let mut steps: &[StepRecord] = &chain.steps;
    let mut offset = 0;
    if let Some(b) = opts.before {
        if b == chain.start_id {
            steps = &[];
        } else {
            let i = steps.iter().position(|s| s.id == b).ok_or_else(|| {
                ThreadError::Invalid(format!("step {b} not found in thread {thread}"))
            })?;
            steps = &steps[..i];
        }
    }
    let show_start = opts.before.is_none() || opts.start;
    let start = show_start.then(|| {
        format!(
            "# Thread `{thread}`\n\n**Workflow:** {} (`{wf_id}`)\n\n## Task\n\n{}",
            wf.as_ref().map_or("?", |w| w.name.as_str()),
            chain.prompt()
        )
    });
    // Choose steps newest first within the quota; at least one.
    let budget = opts
        .quota
        .saturating_sub(start.as_ref().map_or(0, |s| s.len()));
    let mut bodies: Vec<(usize, String)> = Vec::new();
    let mut used = 0;
    for (i, s) in steps.iter().enumerate().rev() {
        let mut text = header(i + 1, s);
        if let Some(c) = detail_content(&snap, s.field("detail"))? {
            text.push_str(&format!("\n\n<output>\n{c}\n</output>"));
        }
        let cost = text.len() + SEPARATOR.len();
        if !bodies.is_empty() && used + cost > budget {
            break;
        }
        used += cost;
        bodies.push((i, text));
    }
    bodies.reverse();
    if let Some(&(first, _)) = bodies.first() {
        offset = first;
    }
    let mut sections = Vec::new();
    if let Some(s) = start {
        sections.push(s);
    }
    if offset > 0 {
        let first = &steps[offset];
        sections.push(format!(
            "*({offset} earlier step(s), load with `uwf thread read {thread} --before {}`)*",
            first.id
        ));
    }
    let mut seen_roles: Vec<String> = Vec::new();
    for (i, mut text) in bodies {
        let role = steps[i].field("role").to_string();
        if !seen_roles.contains(&role) {
            let goal = wf
                .as_ref()
                .and_then(|w| w.roles.get(&role))
                .map(|r| match &r.brief {
                    Brief::Charter { goal, .. } => goal.clone(),
                    Brief::SystemPrompt(p) => p.clone(),
                });
            if let Some(goal) = goal {
                let h_end = text.find('\n').map_or(text.len(), |n| {
                    text[n + 1..].find('\n').map_or(text.len(), |m| n + 1 + m)
                });
                text.insert_str(
                    h_end,
                    &format!("\n\n<prompt>\n{}\n</prompt>", goal.trim_end()),
                );
            }
            seen_roles.push(role);
        }
        sections.push(text);
    }
    let mut out = sections.join(SEPARATOR);
    out.push('\n');
    Ok(out)
}
