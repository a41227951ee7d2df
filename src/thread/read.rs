//! `thread read` and `step read`: a thread or one step as markdown, in the TypeScript tool's
//! format. Lengths and quotas count UTF-16 code units, as JavaScript's `length` does, and
//! payload fields print as a JavaScript template literal would print them.

use super::chain::{StepRecord, chain_in};
use super::ops::head_of;
use super::{Result, ThreadError};
use crate::cas::value::js_number_string;
use crate::cas::{NodeId, Value};
use crate::store::{Snapshot, Store};
use crate::time::{format_duration, format_utc};
use crate::workflow::ThreadId;
use crate::workflow::mustache::js_string;
use crate::workflow::nodes::{STEP_NODE, is_workflow_type};

/// The default `--quota` of `thread read` and `step read`.
pub(crate) const DEFAULT_QUOTA: usize = 4000;

/// Options of `thread read`.
#[derive(Debug, Clone)]
pub(crate) struct ReadOptions {
    /// UTF-16 code units of output to aim for (at least one step is always shown).
    pub quota: usize,
    /// Show only the steps strictly before this one.
    pub before: Option<NodeId>,
    /// Show the start section even with `before`.
    pub start: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            quota: DEFAULT_QUOTA,
            before: None,
            start: false,
        }
    }
}

const SEPARATOR: &str = "\n\n---\n\n";

/// Length in UTF-16 code units (JavaScript's `String.prototype.length`).
pub(crate) fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Whether `s.trim() === ""` in JavaScript (whose white space adds U+FEFF and leaves out U+0085).
fn js_blank(s: &str) -> bool {
    s.chars()
        .all(|c| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}')
}

/// A payload field inside a JavaScript template literal: `undefined` when absent.
fn js_text(v: Option<&Value>) -> String {
    match v {
        None => "undefined".to_string(),
        Some(v) => js_string(v),
    }
}

/// `Number.parseInt(s, 10)` as a quota: leading white space, an optional sign, then digits;
/// `None` unless the result is a positive integer (`invalid --quota: must be a positive
/// integer`). Very large values saturate.
pub(crate) fn parse_quota(s: &str) -> Option<usize> {
    let t = s.trim_start_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}');
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits
        .bytes()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    let digits = &digits[..end];
    if digits.is_empty() || neg {
        return None;
    }
    let n = digits.bytes().fold(0usize, |n, c| {
        n.saturating_mul(10).saturating_add(usize::from(c - b'0'))
    });
    (n >= 1).then_some(n)
}

/// The content of the last assistant turn that is not blank, from a detail node whose `turns`
/// are turn-node ids; `None` for any other detail (a text node, a `{text}` object, …).
fn last_assistant_content(store: &Snapshot, detail: &str) -> Result<Option<String>> {
    let Some(p) = payload_by_ref(store, detail)? else {
        return Ok(None);
    };
    let Some(Value::Array(turns)) = p.get("turns") else {
        return Ok(None);
    };
    for t in turns.iter().rev() {
        let Value::String(r) = t else { continue };
        let Some(turn) = payload_by_ref(store, r)? else {
            continue;
        };
        if turn.get("role").and_then(Value::as_str) == Some("assistant")
            && let Some(c) = turn.get("content").and_then(Value::as_str)
            && !js_blank(c)
        {
            return Ok(Some(c.to_string()));
        }
    }
    Ok(None)
}

/// The payload a string reference names, `None` when it names no stored node.
fn payload_by_ref(store: &Snapshot, r: &str) -> Result<Option<Value>> {
    let Some(id) = NodeId::parse_strict(r) else {
        return Ok(None);
    };
    match store.get(id)? {
        Some(n) => Ok(Some(n.payload()?)),
        None => Ok(None),
    }
}

/// A field of the step's payload as stored (the chains `read` loads keep their payloads).
fn field<'a>(s: &'a StepRecord, key: &str) -> Option<&'a Value> {
    s.payload.as_ref()?.get(key)
}

fn step_header(n: usize, s: &StepRecord) -> String {
    let num = |k: &str| field(s, k).and_then(Value::as_f64).unwrap_or(f64::NAN);
    format!(
        "## Step {n}: {} `{}`\n**Agent:** {} | **Time:** {} | **Duration:** {}",
        js_text(field(s, "role")),
        s.id,
        js_text(field(s, "agent")),
        format_utc(s.timestamp),
        format_duration(num("completedAtMs") - num("startedAtMs"))
    )
}

/// A step's section, its `<prompt>` block included or not.
fn step_block(header: &str, prompt: Option<&str>, output: Option<&str>) -> String {
    let mut b = header.to_string();
    if let Some(p) = prompt {
        b.push_str("\n\n<prompt>\n");
        b.push_str(p);
        b.push_str("\n</prompt>");
    }
    if let Some(o) = output {
        b.push_str("\n\n<output>\n");
        b.push_str(o);
        b.push_str("\n</output>");
    }
    b
}

/// The `*(k earlier steps, …)*` line.
fn earlier_hint(skipped: usize, thread: &ThreadId, first_shown: NodeId) -> String {
    let s = if skipped > 1 { "s" } else { "" };
    format!(
        "*({skipped} earlier step{s}, load with `uwf thread read {thread} --before {first_shown}`)*"
    )
}

/// Renders thread `thread` as markdown (no final newline; see [`with_newline`]).
///
/// The steps shown are chosen newest first: each costs its header, its role's `<prompt>`
/// block (counted for every step, printed only at a role's first shown step), its `<output>`
/// block and a 6-unit separator, on top of the start section; at least one is shown.
///
/// # Errors
/// [`ThreadError::NotFound`], `step H not found in thread T`, a missing workflow, a broken
/// chain, store failures.
pub(crate) fn read(store: &Store, thread: &ThreadId, opts: &ReadOptions) -> Result<String> {
    let head = head_of(store, thread)?;
    // Taken after the head is read, so it holds the head node.
    let snap = store.snapshot()?;
    let chain = chain_in(&snap, head)?;
    let wf_id = chain.workflow_id()?;
    let wf_node = snap
        .get(wf_id)?
        .ok_or_else(|| ThreadError::NodeNotFound(wf_id.to_wire()))?;
    if !is_workflow_type(wf_node.type_id) {
        return Err(ThreadError::NotWorkflow {
            id: wf_id,
            type_id: wf_node.type_id,
        });
    }
    let wf = wf_node.payload()?;
    let goal_of = |role: &str| -> Option<String> {
        let def = wf.get("roles")?.get(role)?;
        // `[…, goal, …].join("\n")` writes an absent goal as "". A role of the older
        // workflow form (which the TypeScript tool's `thread read` refuses) shows its
        // system prompt.
        Some(match def.get("goal").or_else(|| def.get("systemPrompt")) {
            None | Some(Value::Null) => String::new(),
            Some(g) => js_string(g),
        })
    };
    let mut steps: &[StepRecord] = &chain.steps;
    if let Some(b) = opts.before {
        let i = steps.iter().position(|s| s.id == b).ok_or_else(|| {
            ThreadError::Invalid(format!("step {b} not found in thread {thread}"))
        })?;
        steps = &steps[..i];
    }
    let start = (opts.before.is_none() || opts.start).then(|| {
        format!(
            "# Thread `{thread}`\n\n**Workflow:** {} (`{wf_id}`)\n\n## Task\n\n{}",
            js_text(wf.get("name")),
            js_text(chain.start.get("prompt"))
        )
    });
    struct Shown<'a> {
        step: &'a StepRecord,
        header: String,
        output: Option<String>,
    }
    let mut total = start.as_deref().map_or(0, utf16_len);
    let mut shown: Vec<Shown> = Vec::new();
    for (i, s) in steps.iter().enumerate().rev() {
        let header = step_header(i + 1, s);
        let output = match field(s, "detail") {
            Some(Value::String(d)) if !d.is_empty() => last_assistant_content(&snap, d)?,
            _ => None,
        };
        let goal = goal_of(&js_text(field(s, "role")));
        let len = utf16_len(&step_block(&header, goal.as_deref(), output.as_deref()));
        let sep = if total > 0 || !shown.is_empty() { 6 } else { 0 };
        if total + len + sep > opts.quota && !shown.is_empty() {
            break;
        }
        total += len + sep;
        shown.push(Shown {
            step: s,
            header,
            output,
        });
    }
    shown.reverse();
    let skipped = steps.len() - shown.len();
    let mut sections = Vec::new();
    if let Some(s) = start {
        sections.push(s);
    }
    if skipped > 0
        && let Some(first) = shown.first()
    {
        sections.push(earlier_hint(skipped, thread, first.step.id));
    }
    let mut seen_roles: Vec<String> = Vec::new();
    for s in &shown {
        let role = js_text(field(s.step, "role"));
        let goal = match goal_of(&role) {
            Some(g) if !seen_roles.contains(&role) => {
                seen_roles.push(role);
                Some(g)
            }
            _ => None,
        };
        sections.push(step_block(&s.header, goal.as_deref(), s.output.as_deref()));
    }
    Ok(sections.join(SEPARATOR))
}

/// `text` with a final newline added unless it has one (how both `read` commands print).
pub(crate) fn with_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// One turn of a step's detail, as `step read` shows it.
struct Turn {
    index: f64,
    role: String,
    content: String,
    tool_calls: Vec<(String, String)>,
}

impl Turn {
    fn body(&self) -> String {
        let mut parts = vec![format!("**Turn role:** {}", self.role)];
        for (name, args) in &self.tool_calls {
            if args.is_empty() {
                parts.push(format!("- **{name}**"));
            } else {
                parts.push(format!("- **{name}** — `{args}`"));
            }
        }
        if !self.content.is_empty() {
            parts.push(String::new());
            parts.push(self.content.clone());
        }
        parts.join("\n")
    }

    fn title(&self) -> String {
        format!("## Turn {}", js_number_string(self.index + 1.0))
    }
}

/// A turn node's display fields; `None` for a turn with neither content nor tool calls.
fn parse_turn(p: &Value, fallback_index: usize) -> Option<Turn> {
    let content = p
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let tool_calls: Vec<(String, String)> = match p.get("toolCalls") {
        Some(Value::Array(calls)) => calls
            .iter()
            .filter_map(|c| {
                let Value::Object(m) = c else { return None };
                let name = m.get("name")?.as_str()?.to_string();
                let args = m.get("args").and_then(Value::as_str).unwrap_or("");
                Some((name, args.to_string()))
            })
            .collect(),
        _ => Vec::new(),
    };
    if content.is_empty() && tool_calls.is_empty() {
        return None;
    }
    Some(Turn {
        index: p
            .get("index")
            .and_then(Value::as_f64)
            .unwrap_or(fallback_index as f64),
        role: p
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("assistant")
            .to_string(),
        content,
        tool_calls,
    })
}

/// The header of `step read`, and of its `--prompt` form.
fn step_read_header(step: NodeId, p: &Value) -> String {
    format!(
        "# Step {step}\n\n**Role:** {}\n**Agent:** {}",
        js_text(p.get("role")),
        js_text(p.get("agent"))
    )
}

/// Turns chosen newest first within `available` UTF-16 units (a 2-unit gap between turns),
/// at least one.
fn select_turns(turns: &[Turn], available: i64) -> usize {
    let mut total: i64 = 0;
    let mut n = 0;
    for t in turns.iter().rev() {
        let block = format!("{}\n\n{}", t.title(), t.body());
        let cost = utf16_len(&block) as i64 + if n > 0 { 2 } else { 0 };
        if total + cost > available && n > 0 {
            break;
        }
        total += cost;
        n += 1;
    }
    n
}

/// Renders step `step` as markdown: its role and agent, then its detail's turns newest first
/// within `quota` (less the header and 200), at least one, with a note when earlier turns were
/// left out; with `prompt`, the assembled prompt the agent was given instead.
///
/// # Errors
/// [`ThreadError::NodeNotFound`], [`ThreadError::WrongType`] for a node that is not a
/// StepNode, `detail node not found: H`, store failures.
pub(crate) fn read_step(store: &Store, step: NodeId, quota: usize, prompt: bool) -> Result<String> {
    let snap = store.snapshot()?;
    let node = snap
        .get(step)?
        .ok_or_else(|| ThreadError::NodeNotFound(step.to_wire()))?;
    if node.type_id != STEP_NODE {
        return Err(ThreadError::WrongType {
            id: step,
            expected: "StepNode",
        });
    }
    let p = node.payload()?;
    let header = step_read_header(step, &p);
    if prompt {
        let Some(Value::String(r)) = p.get("assembledPrompt") else {
            return Ok(format!(
                "# Step {step}\n\n_Prompt not recorded (legacy step)._"
            ));
        };
        let Some(text) = payload_by_ref(&snap, r)? else {
            return Ok(format!("# Step {step}\n\n_Prompt CAS node not found: {r}_"));
        };
        let text = match text {
            Value::String(s) => s,
            v => v.to_json(),
        };
        return Ok(format!("{header}\n\n## Prompt\n\n{text}"));
    }
    let detail = match p.get("detail") {
        Some(Value::Null) => return Ok(header),
        d => d,
    };
    let detail_ref = js_text(detail);
    let detail = payload_by_ref(&snap, &detail_ref)?
        .ok_or_else(|| ThreadError::Invalid(format!("detail node not found: {detail_ref}")))?;
    let mut turns: Vec<Turn> = Vec::new();
    if let Some(Value::Array(refs)) = detail.get("turns") {
        for r in refs {
            let Value::String(r) = r else { continue };
            if let Some(t) = payload_by_ref(&snap, r)?
                && let Some(t) = parse_turn(&t, turns.len())
            {
                turns.push(t);
            }
        }
    }
    if turns.is_empty() {
        return Ok(header);
    }
    let available = quota as i64 - utf16_len(&header) as i64 - 200;
    let n = select_turns(&turns, available);
    let mut out = header;
    if n < turns.len() {
        out.push_str("\n\n_[Earlier turns omitted due to quota. Use --quota to increase.]_");
    }
    for t in &turns[turns.len() - n..] {
        out.push_str("\n\n");
        out.push_str(&t.title());
        out.push_str("\n\n");
        out.push_str(&t.body());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_lengths() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("😀"), 2);
    }

    #[test]
    fn earlier_hint_is_singular_for_one() {
        let id = NodeId::parse("6HQ6ERC0SV7QT").unwrap();
        let t = ThreadId::parse("06DQDQD8R3SYN75HX43EQ49CJR").unwrap();
        assert!(earlier_hint(1, &t, id).starts_with("*(1 earlier step, load"));
        assert!(earlier_hint(2, &t, id).starts_with("*(2 earlier steps, load"));
    }

    #[test]
    fn quota_parses_like_parse_int() {
        assert_eq!(parse_quota("4000"), Some(4000));
        assert_eq!(parse_quota(" 12abc"), Some(12));
        assert_eq!(parse_quota("+5"), Some(5));
        assert_eq!(parse_quota("1.9"), Some(1));
        assert_eq!(parse_quota("0"), None);
        assert_eq!(parse_quota("-1"), None);
        assert_eq!(parse_quota("abc"), None);
        assert_eq!(parse_quota("99999999999999999999999"), Some(usize::MAX));
    }

    #[test]
    fn template_text_of_fields() {
        assert_eq!(js_text(None), "undefined");
        assert_eq!(js_text(Some(&Value::Null)), "null");
        assert_eq!(js_text(Some(&Value::Number(1.5))), "1.5");
        assert!(js_blank(" \u{feff}\n"));
        assert!(!js_blank("\u{85}"));
    }

    #[test]
    fn turn_bodies() {
        let t = |v: &str| parse_turn(&Value::from_json_str(v).unwrap(), 7);
        assert!(t(r#"{"role":"assistant","content":""}"#).is_none());
        let call = t(r#"{"toolCalls":[{"name":"ls","args":"{\"a\":1}"},{"name":"pwd"},{"x":1}]}"#)
            .unwrap();
        assert_eq!(call.title(), "## Turn 8");
        assert_eq!(
            call.body(),
            "**Turn role:** assistant\n- **ls** — `{\"a\":1}`\n- **pwd**"
        );
        let tool = t(r#"{"index":2,"role":"tool","content":"ok"}"#).unwrap();
        assert_eq!(tool.title(), "## Turn 3");
        assert_eq!(tool.body(), "**Turn role:** tool\n\nok");
    }
}
