//! The detail nodes built-in agents write: the turns of a model conversation, and what a
//! coding-agent CLI reported (session, usage, cost), under schemas of their own.

use crate::cas::{NodeId, Value};
use crate::store::{Store, StoreError};

/// A turn: `{index, role, content}`.
const TURN_SCHEMA: &str = r#"{"title":"AgentTurn","type":"object","properties":{"index":{"type":"integer"},"role":{"type":"string"},"content":{"type":"string"}},"required":["index","role","content"]}"#;

/// The built-in LLM agent's detail (the TypeScript tool's builtin detail, plus `usage`).
const LLM_DETAIL_SCHEMA: &str = r#"{"title":"LlmAgentDetail","type":"object","properties":{"sessionId":{"type":"string"},"model":{"type":"string"},"duration":{"type":"number"},"turnCount":{"type":"integer"},"turns":{"type":"array","items":{"type":"string","format":"ocas_ref"}},"usage":{"type":"object"}},"required":["sessionId","model","duration","turnCount","turns"]}"#;

/// A coding-agent CLI's detail (the TypeScript tool's claude-code detail; other programs
/// fill what they report).
const COMMAND_DETAIL_SCHEMA: &str = r#"{"title":"CommandAgentDetail","type":"object","properties":{"program":{"type":"string"},"sessionId":{"type":["string","null"]},"model":{"type":["string","null"]},"subtype":{"type":["string","null"]},"durationMs":{"type":"number"},"numTurns":{"type":["integer","null"]},"totalCostUsd":{"type":["number","null"]},"stopReason":{"type":["string","null"]},"usage":{"type":["object","null"]},"turns":{"type":"array","items":{"type":"string","format":"ocas_ref"}}},"required":["program","durationMs","turns"]}"#;

/// The scripted agent's detail: the reply it gave, as one assistant turn.
const SCRIPTED_DETAIL_SCHEMA: &str = r#"{"title":"ScriptedAgentDetail","type":"object","properties":{"turnCount":{"type":"integer"},"turns":{"type":"array","items":{"type":"string","format":"ocas_ref"}}},"required":["turnCount","turns"]}"#;

/// The TypeScript tool's hermes detail and turn schemas (well-known schemas a store gets on
/// first use).
const HERMES_DETAIL: &str = "uwf/hermes-detail";
const HERMES_TURN: &str = "uwf/hermes-turn";
/// The TypeScript tool's claude-code detail and turn schemas.
const CLAUDE_DETAIL: &str = "uwf/claude-code-detail";
const CLAUDE_TURN: &str = "uwf/claude-code-turn";

/// Which detail schema.
#[derive(Debug, Clone, Copy)]
pub enum DetailKind {
    /// [`LLM_DETAIL_SCHEMA`] (the TypeScript tool's builtin detail has no room for usage).
    Llm,
    /// [`COMMAND_DETAIL_SCHEMA`], for programs without a detail of the TypeScript tool.
    Command,
    /// [`SCRIPTED_DETAIL_SCHEMA`], the scripted agent's.
    Scripted,
    /// The TypeScript tool's `hermes-detail`: `{sessionId, model, duration, turnCount, turns}`.
    Hermes,
    /// The TypeScript tool's `claude-code-detail`: `{sessionId, model, subtype, durationMs,
    /// numTurns, totalCostUsd, stopReason, usage, turns}`.
    ClaudeCode,
}

/// The id of the schema whose JSON text is `text`, stored if it is not yet.
fn schema_id(store: &Store, text: &'static str, now_ms: u64) -> Result<NodeId, StoreError> {
    cached_schema(store, text, now_ms, || {
        Value::from_json_str(text).map_err(|e| StoreError::Internal(e.to_string()))
    })
}

/// The well-known schema called `name`, stored if it is not yet.
fn well_known(store: &Store, name: &'static str, now_ms: u64) -> Result<NodeId, StoreError> {
    cached_schema(store, name, now_ms, || {
        Ok(crate::cas::bootstrap::by_name(name)
            .expect("a well-known schema")
            .payload
            .clone())
    })
}

/// The id of the schema `key` names (made by `schema`), stored in `store` if it is not yet. An
/// id depends on the schema alone, so a process makes each once; whether the store holds it
/// is the store's schema cache's answer.
fn cached_schema(
    store: &Store,
    key: &'static str,
    now_ms: u64,
    schema: impl FnOnce() -> Result<Value, StoreError>,
) -> Result<NodeId, StoreError> {
    type Ids = std::sync::Mutex<foldhash::HashMap<&'static str, NodeId>>;
    static IDS: std::sync::OnceLock<Ids> = std::sync::OnceLock::new();
    let ids = IDS.get_or_init(Ids::default);
    let known = ids.lock().ok().and_then(|m| m.get(key).copied());
    if let Some(id) = known
        && store.is_schema(id)?
    {
        return Ok(id);
    }
    let id = schema_of(store, &schema()?, now_ms)?;
    if let Ok(mut m) = ids.lock() {
        m.insert(key, id);
    }
    Ok(id)
}

/// Stores the schema `v` unless it is stored; returns its id. The store's schema cache answers
/// after the first look (a schema once stored stays), so a runner's steps ask it no query.
fn schema_of(store: &Store, v: &Value, now_ms: u64) -> Result<NodeId, StoreError> {
    let p = store.prepare_schema(v)?;
    let id = p.id;
    if !store.is_schema(id)? {
        store.put(&[p], now_ms)?;
    }
    Ok(id)
}

/// Stores the turns (`(role, content)`, in order) and the detail `fields` with `turns` set to
/// their ids; returns the detail node's id.
///
/// # Errors
/// Store failures.
pub fn store_detail(
    store: &Store,
    kind: DetailKind,
    fields: crate::cas::value::Map,
    turns: &[(&str, &str)],
    now_ms: u64,
) -> Result<NodeId, StoreError> {
    let (id, nodes) = prepare_detail(store, kind, fields, turns, now_ms)?;
    // Through the store's group commit: under a runner, the details of many steps share
    // commits.
    store.write_grouped(move |w| w.put(&nodes, now_ms).map(drop))?;
    Ok(id)
}

/// The turn nodes and the detail node of [`store_detail`], prepared and not written (the
/// StepNode's transaction writes them); returns the detail's id and the nodes. The schemas they
/// need are stored first, once a process.
///
/// # Errors
/// Store failures.
pub fn prepare_detail(
    store: &Store,
    kind: DetailKind,
    mut fields: crate::cas::value::Map,
    turns: &[(&str, &str)],
    now_ms: u64,
) -> Result<(NodeId, Vec<crate::store::Prepared>), StoreError> {
    let (turn_type, detail_type) = match kind {
        DetailKind::Llm => (
            schema_id(store, TURN_SCHEMA, now_ms)?,
            schema_id(store, LLM_DETAIL_SCHEMA, now_ms)?,
        ),
        DetailKind::Command => (
            schema_id(store, TURN_SCHEMA, now_ms)?,
            schema_id(store, COMMAND_DETAIL_SCHEMA, now_ms)?,
        ),
        DetailKind::Scripted => (
            schema_id(store, TURN_SCHEMA, now_ms)?,
            schema_id(store, SCRIPTED_DETAIL_SCHEMA, now_ms)?,
        ),
        DetailKind::Hermes => (
            well_known(store, HERMES_TURN, now_ms)?,
            well_known(store, HERMES_DETAIL, now_ms)?,
        ),
        DetailKind::ClaudeCode => (
            well_known(store, CLAUDE_TURN, now_ms)?,
            well_known(store, CLAUDE_DETAIL, now_ms)?,
        ),
    };
    let mut nodes = Vec::with_capacity(turns.len() + 1);
    for (i, (role, content)) in turns.iter().enumerate() {
        let mut m = crate::cas::value::Map::default();
        m.insert("index".into(), Value::Number(i as f64));
        m.insert("role".into(), Value::str(*role));
        m.insert("content".into(), Value::str(*content));
        if matches!(kind, DetailKind::ClaudeCode) {
            m.insert("toolCalls".into(), Value::Null);
        }
        // A turn's fields are made here, as its schema has them.
        nodes.push(store.prepare(turn_type, &Value::Object(m), false)?);
    }
    fields.insert(
        "turns".into(),
        Value::Array(nodes.iter().map(|n| Value::str(n.id.to_wire())).collect()),
    );
    let detail = store.prepare(detail_type, &Value::Object(fields), true)?;
    let id = detail.id;
    nodes.push(detail);
    Ok((id, nodes))
}
