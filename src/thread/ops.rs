//! Thread commands other than the step itself: start, fork, kill, show, list, steps and step
//! details, and storing workflows.

use super::admission::Admission;
use super::chain::{Chain, chain_in, expand_output, history_in, load_chain, load_workflow};
use super::id::ThreadId;
use super::{Config, Result, ThreadError};
use crate::cas::bootstrap::META;
use crate::cas::{NodeId, Value};
use crate::store::{HistoryEntry, Snapshot, Store, ThreadRecord, ThreadState};
use crate::workflow::nodes::{START_NODE, STEP_NODE, StartNode, StepNode};
use crate::workflow::{self, FinishReason, Jsonata};
use std::collections::HashMap;
use std::path::Path;

/// A thread's lifecycle state (the one enum of [`crate::workflow::nodes`]).
pub use crate::workflow::ThreadStatus as Status;

impl Status {
    /// Parses a comma list of statuses; `active` means idle and running.
    ///
    /// # Errors
    /// [`ThreadError::Invalid`] naming an unknown status.
    pub(crate) fn parse_list(s: &str) -> Result<Vec<Status>> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "queued" => out.push(Status::Queued),
                "idle" => out.push(Status::Idle),
                "running" => out.push(Status::Running),
                "paused" => out.push(Status::Paused),
                "completed" => out.push(Status::Completed),
                "failed" => out.push(Status::Failed),
                "cancelled" => out.push(Status::Cancelled),
                "dropped" => out.push(Status::Dropped),
                "active" => out.extend([
                    Status::Queued,
                    Status::Idle,
                    Status::Running,
                    Status::Paused,
                ]),
                other => {
                    return Err(ThreadError::Invalid(format!(
                        "invalid status \"{other}\": expected queued, idle, running, paused, completed, failed, cancelled, dropped or active"
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// What `thread show` and `thread step` print for one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    /// The workflow id.
    pub workflow: String,
    /// The thread id.
    pub thread: ThreadId,
    /// The head node id.
    pub head: String,
    /// The lifecycle state.
    pub status: Status,
    /// The role that runs next (`None` when finished or undecidable).
    pub current_role: Option<String>,
    /// True when the thread is finished.
    pub done: bool,
    /// The last failed step, if any (`lastError`, printed only when there is one).
    pub last_error: Option<crate::store::StepFailure>,
    /// The process running a step of the thread, and since when (`running`, printed only
    /// then).
    pub running: Option<(u32, u64)>,
    /// Why a paused thread was paused when not by hand (`pausedFor`: `budget`).
    pub paused_for: Option<&'static str>,
}

/// What `thread start` needs.
#[derive(Debug, Clone)]
pub struct StartInput<'a> {
    /// A workflow id, file path, local workflow name or registered name.
    pub workflow: &'a str,
    /// The task.
    pub prompt: &'a str,
    /// The thread's working directory (absolute).
    pub cwd: &'a str,
    /// Where relative paths and `.workflow/` directories are looked up from.
    pub search_from: &'a Path,
    /// The new thread's id.
    pub thread: ThreadId,
    /// The time, ms since the epoch.
    pub now_ms: u64,
}

/// Starts a thread: resolves the workflow, writes the StartNode and makes it the head.
/// Returns the workflow id.
///
/// # Errors
/// `cwd must be an absolute path`, workflow resolution errors, store failures.
pub fn start(store: &Store, input: &StartInput<'_>) -> Result<NodeId> {
    start_with(store, input, &Config::default(), None).map(|(wf, _)| wf)
}

/// [`start`] under the limits of `config` (the thread may be queued or dropped) and with a
/// round limit; returns the workflow id and what admission did.
///
/// # Errors
/// As [`start`], and a malformed limit.
pub fn start_with(
    store: &Store,
    input: &StartInput<'_>,
    config: &Config,
    max_rounds: Option<u32>,
) -> Result<(NodeId, Admission)> {
    let line = StartLine {
        thread: input.thread.clone(),
        prompt: input.prompt.to_string(),
        cwd: input.cwd.to_string(),
        max_rounds,
    };
    let (wf, admitted) = start_many(
        store,
        input.workflow,
        input.search_from,
        input.now_ms,
        config,
        std::slice::from_ref(&line),
    )?;
    Ok((wf, admitted[0]))
}

/// One thread of [`start_many`].
#[derive(Debug, Clone)]
pub(crate) struct StartLine {
    /// The new thread's id.
    pub(crate) thread: ThreadId,
    /// The task.
    pub(crate) prompt: String,
    /// The thread's working directory (absolute).
    pub(crate) cwd: String,
    /// The most steps the thread may take.
    pub(crate) max_rounds: Option<u32>,
}

/// Starts the threads `lines` of one workflow (resolved once from `search_from` at `now_ms`)
/// in one write, each admitted under the limits of `config` as [`start_with`] admits one, in
/// their order; returns the workflow id and what admission did with each. Nothing is written
/// if one fails.
///
/// # Errors
/// As [`start_with`], for the first line that fails.
pub(crate) fn start_many(
    store: &Store,
    workflow: &str,
    search_from: &Path,
    now_ms: u64,
    config: &Config,
    lines: &[StartLine],
) -> Result<(NodeId, Vec<Admission>)> {
    if let Some(l) = lines.iter().find(|l| !Path::new(&l.cwd).is_absolute()) {
        return Err(ThreadError::Invalid(format!(
            "cwd must be an absolute path, got: {}",
            l.cwd
        )));
    }
    let wf = super::registry::resolve_workflow(store, workflow, search_from, now_ms)?;
    let limits = super::admission::limits_for(store, config, wf)?;
    let nodes = lines
        .iter()
        .map(|l| {
            let start = StartNode {
                workflow: Some(wf),
                prompt: l.prompt.clone(),
                cwd: l.cwd.clone(),
            };
            store.prepare(START_NODE, &start.to_value(), true)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let heads: Vec<NodeId> = nodes.iter().map(|n| n.id).collect();
    let admitted = store.write(|w| {
        w.put(&nodes, now_ms)?;
        // A garbage collection may have removed the workflow since it was resolved.
        if !w.has(wf)? {
            return Err(crate::store::StoreError::NotFound(wf));
        }
        let mut admitter =
            super::admission::Admitter::new(limits.as_ref().map(|(l, ids)| (*l, ids)));
        let admitted = lines
            .iter()
            .zip(&heads)
            .map(|(l, &head)| {
                admitter.admit(
                    w,
                    &l.thread,
                    &ThreadRecord {
                        head,
                        workflow: Some(wf),
                        updated_ms: now_ms,
                    },
                    ThreadState {
                        max_rounds: l.max_rounds,
                        ..ThreadState::default()
                    },
                    now_ms,
                )
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        admitter.finish(w)?;
        Ok(admitted)
    })?;
    for (l, admission) in lines.iter().zip(&admitted) {
        tracing::info!(
            tag = "S9B8YM57",
            thread = %l.thread,
            workflow = %wf,
            admission = ?admission,
            "thread started"
        );
    }
    Ok((wf, admitted))
}

/// Resolves a node id or unique prefix given on the command line.
///
/// # Errors
/// [`ThreadError::NodeNotFound`] or an ambiguous/invalid prefix.
pub(crate) fn resolve_step(store: &Store, s: &str) -> Result<NodeId> {
    let id = store.resolve(s).map_err(|e| match e {
        crate::store::StoreError::NoMatch(_) => ThreadError::NodeNotFound(s.to_string()),
        e => e.into(),
    })?;
    if !store.has(id)? {
        return Err(ThreadError::NodeNotFound(id.to_wire()));
    }
    Ok(id)
}

/// Resolves a thread id given on the command line: a whole id (26 letters and digits), or a
/// unique prefix of at least 4 characters, in any case, of an active or finished thread's id in
/// `store` (`None`: there is no store yet, so no thread to match).
///
/// # Errors
/// [`ThreadError::NotFound`] when no thread matches a prefix, [`ThreadError::Invalid`] for an
/// ambiguous prefix (naming the candidates) or for something that is neither.
pub(crate) fn resolve_thread(store: Option<&Store>, s: &str) -> Result<ThreadId> {
    if let Ok(t) = ThreadId::parse(s) {
        return Ok(t);
    }
    let prefix = s.to_ascii_uppercase();
    if prefix.len() < 4 || !prefix.bytes().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ThreadError::Invalid(format!(
            "invalid thread id \"{s}\": expected 26 letters and digits, or a unique prefix of 4 or more"
        )));
    }
    let Some(store) = store else {
        return Err(ThreadError::NotFound(s.to_string()));
    };
    let mut found = std::collections::BTreeSet::new();
    for (t, _) in store.threads()? {
        if t.as_str().starts_with(&prefix) {
            found.insert(t);
        }
    }
    store.for_each_history::<ThreadError>(|h| {
        if h.thread.starts_with(&prefix) {
            found.insert(ThreadId::from_stored(&h.thread));
        }
        Ok(())
    })?;
    let mut found = found.into_iter();
    match (found.next(), found.len()) {
        (None, _) => Err(ThreadError::NotFound(s.to_string())),
        (Some(t), 0) => Ok(t),
        (Some(first), more) => {
            const SHOWN: usize = 10;
            let mut names: Vec<String> = std::iter::once(first)
                .chain(found.by_ref().take(SHOWN - 1))
                .map(|t| t.to_string())
                .collect();
            if more >= SHOWN {
                names.push(format!("and {} more", more + 1 - SHOWN));
            }
            Err(ThreadError::Invalid(format!(
                "ambiguous thread id prefix \"{s}\": matches {}",
                names.join(", ")
            )))
        }
    }
}

/// Forks a new thread whose head is `node` (a StartNode or StepNode).
///
/// # Errors
/// [`ThreadError::WrongType`] for other nodes, a broken chain, store failures.
pub(crate) fn fork(store: &Store, node: NodeId, thread: &ThreadId, now_ms: u64) -> Result<()> {
    let n = store
        .get(node)?
        .ok_or_else(|| ThreadError::NodeNotFound(node.to_wire()))?;
    if n.type_id != START_NODE && n.type_id != STEP_NODE {
        return Err(ThreadError::WrongType {
            id: node,
            expected: "StartNode or StepNode",
        });
    }
    let chain = load_chain(store, node)?;
    let wf = chain.workflow_id()?;
    store.write(|w| {
        // A garbage collection may have removed the node (of a removed thread) since it was
        // read.
        if !w.has(node)? {
            return Err(crate::store::StoreError::NotFound(node));
        }
        w.set_thread(
            thread,
            &ThreadRecord {
                head: node,
                workflow: Some(wf),
                updated_ms: now_ms,
            },
        )
    })?;
    tracing::info!(tag = "VH4EJ57R", thread = %thread, workflow = %wf, from = %node, "thread forked");
    Ok(())
}

/// The latest step of `role` in `thread` (active or finished), for `thread fork --from-role`.
///
/// # Errors
/// [`ThreadError::Invalid`] when the thread has no step of that role.
pub fn latest_step_of_role(store: &Store, thread: &ThreadId, role: &str) -> Result<NodeId> {
    let chain = load_chain(store, head_of(store, thread)?)?;
    chain
        .steps
        .iter()
        .rev()
        .find(|s| s.node.role == role)
        .map(|s| s.id)
        .ok_or_else(|| {
            ThreadError::Invalid(format!("thread {thread} has no step of role \"{role}\""))
        })
}

/// Where a thread is: active, or finished.
pub(crate) enum Found {
    Active(ThreadRecord),
    Finished(HistoryEntry),
}

pub(crate) fn find(store: &Store, thread: &ThreadId) -> Result<Found> {
    if let Some(r) = store.thread(thread)? {
        return Ok(Found::Active(r));
    }
    match store.history_of(thread)? {
        Some(h) => Ok(Found::Finished(h)),
        None => Err(ThreadError::NotFound(thread.to_string())),
    }
}

/// The head of a thread, active or finished.
/// The record of an active thread; [`ThreadError::NotActive`] for a finished one.
pub(crate) fn active(store: &Store, thread: &ThreadId) -> Result<ThreadRecord> {
    match find(store, thread)? {
        Found::Active(r) => Ok(r),
        Found::Finished(h) => Err(ThreadError::NotActive {
            thread: thread.to_string(),
            reason: h.reason.to_string(),
        }),
    }
}

pub(crate) fn head_of(store: &Store, thread: &ThreadId) -> Result<NodeId> {
    match find(store, thread)? {
        Found::Active(r) => Ok(r.head),
        Found::Finished(h) => h
            .head
            .id()
            .ok_or_else(|| ThreadError::NodeNotFound(h.head.to_text())),
    }
}

/// Cancels an active thread: removes it and its lease and records it in the history with
/// reason `cancelled`, in one transaction.
///
/// # Errors
/// [`ThreadError::NotActive`], [`ThreadError::NotFound`], store failures.
pub(crate) fn kill(store: &Store, thread: &ThreadId, now_ms: u64) -> Result<()> {
    let rec = active(store, thread)?;
    let wf = match rec.workflow {
        Some(w) => w,
        None => super::chain::workflow_of(&store.snapshot()?, rec.head)?.ok_or_else(|| {
            ThreadError::Chain {
                node: rec.head.to_wire(),
                problem: "the thread names no workflow".into(),
            }
        })?,
    };
    let archived = store.write(|w| {
        let Some(cur) = w.thread(thread)? else {
            return Ok(false);
        };
        w.archive_thread(thread, &cur, wf, FinishReason::Cancelled, now_ms)?;
        Ok(true)
    })?;
    if !archived {
        return Err(ThreadError::NotActive {
            thread: thread.to_string(),
            reason: "finished meanwhile".into(),
        });
    }
    tracing::info!(tag = "FDXDPAT3", thread = %thread, workflow = %wf, "thread cancelled");
    Ok(())
}

/// The next role of the thread at `chain`, or `None` at `$END` or when undecidable.
pub(crate) fn current_role(snap: &Snapshot, chain: &Chain) -> Option<String> {
    current_role_cached(snap, chain, &mut HashMap::new(), &Jsonata::default())
}

/// [`current_role`] with workflows parsed once per listing.
pub(super) fn current_role_cached(
    snap: &Snapshot,
    chain: &Chain,
    workflows: &mut HashMap<NodeId, Option<std::rc::Rc<workflow::StoredWorkflow>>>,
    evaluator: &Jsonata,
) -> Option<String> {
    let id = chain.workflow_id().ok()?;
    let wf = workflows
        .entry(id)
        .or_insert_with(|| load_workflow(snap, id).ok().map(std::rc::Rc::new))
        .clone()?;
    let history = history_in(snap, chain).ok()?;
    let d = workflow::next(&wf, &history, evaluator).ok()?;
    (!d.is_end()).then_some(d.role)
}

/// The status of an active thread, and the lease of the process running its step if one is.
fn active_status(
    store: &Store,
    thread: &ThreadId,
) -> Result<(Status, Option<crate::store::Lease>)> {
    Ok(match store.lease(thread)? {
        Some(l) if l.is_live() => (Status::Running, Some(l)),
        _ => (phase_status(store.thread_state(thread)?.phase), None),
    })
}

/// The status of an active thread that no live process is stepping.
pub(super) fn phase_status(p: crate::store::Phase) -> Status {
    match p {
        crate::store::Phase::Ready => Status::Idle,
        crate::store::Phase::Queued => Status::Queued,
        crate::store::Phase::Paused | crate::store::Phase::PausedForBudget => Status::Paused,
    }
}

/// The workflow name of an active thread and the role its next (or running) step is for.
///
/// # Errors
/// A thread that is not active, a broken chain, store failures.
pub fn running_role(store: &Store, thread: &ThreadId) -> Result<(String, Option<String>)> {
    let r = active(store, thread)?;
    let snap = store.snapshot()?;
    let chain = chain_in(&snap, r.head)?;
    let wf = load_workflow(&snap, chain.workflow_id()?)?;
    Ok((wf.name, current_role(&snap, &chain)))
}

/// `thread show`: the state of a thread.
///
/// # Errors
/// [`ThreadError::NotFound`], a broken chain, store failures.
pub fn show(store: &Store, thread: &ThreadId) -> Result<StepOutput> {
    match find(store, thread)? {
        Found::Active(r) => {
            let snap = store.snapshot()?;
            let chain = chain_in(&snap, r.head)?;
            let (status, lease) = active_status(store, thread)?;
            let state = store.thread_state(thread)?;
            Ok(StepOutput {
                workflow: chain.workflow_id()?.to_wire(),
                thread: thread.clone(),
                head: r.head.to_wire(),
                status,
                running: lease.map(|l| (l.pid, l.since_ms)),
                current_role: current_role(&snap, &chain),
                done: false,
                paused_for: (state.phase == crate::store::Phase::PausedForBudget)
                    .then_some("budget"),
                last_error: state.last_error,
            })
        }
        Found::Finished(h) => Ok(StepOutput {
            workflow: h.workflow.into_text(),
            thread: thread.clone(),
            head: h.head.into_text(),
            status: h.reason.status(),
            current_role: None,
            done: true,
            running: None,
            paused_for: None,
            last_error: if h.reason == FinishReason::Failed {
                store.thread_state(thread)?.last_error
            } else {
                None
            },
        }),
    }
}

/// A thread's start and steps, as `thread steps` shows them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Steps {
    /// The workflow id.
    pub workflow: NodeId,
    /// The StartNode's id.
    pub start: NodeId,
    /// The task.
    pub prompt: String,
    /// The StartNode's first-write time.
    pub start_timestamp: u64,
    /// The steps, oldest first.
    pub steps: Vec<StepRow>,
}

/// One step of [`Steps`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepRow {
    /// The StepNode's id.
    pub id: NodeId,
    /// The role that ran.
    pub role: String,
    /// The output's payload (an empty object when there is none).
    pub output: Value,
    /// The detail node.
    pub detail: Option<NodeId>,
    /// The agent's name.
    pub agent: String,
    /// The StepNode's first-write time.
    pub timestamp: u64,
    /// How long the agent ran, when the node says.
    pub duration_ms: Option<f64>,
}

/// `thread steps`: the start and every step, each output expanded.
///
/// # Errors
/// [`ThreadError::NotFound`], a broken chain, store failures.
pub(crate) fn steps(store: &Store, thread: &ThreadId) -> Result<Steps> {
    let head = head_of(store, thread)?;
    // Taken after the head is read, so it holds the head node.
    let snap = store.snapshot()?;
    let chain = chain_in(&snap, head)?;
    let mut steps = Vec::with_capacity(chain.steps.len());
    for st in &chain.steps {
        let n = &st.node;
        steps.push(StepRow {
            id: st.id,
            role: n.role.clone(),
            output: expand_output(&snap, n.output)?,
            detail: n.detail,
            agent: n.agent.clone(),
            timestamp: st.timestamp,
            duration_ms: match (n.started_at_ms, n.completed_at_ms) {
                (Some(a), Some(b)) => Some(b as f64 - a as f64),
                _ => None,
            },
        });
    }
    Ok(Steps {
        workflow: chain.workflow_id()?,
        start: chain.start_id,
        prompt: chain.prompt().to_string(),
        start_timestamp: chain.start_timestamp,
        steps,
    })
}

/// `thread step-details`: the step's detail node, deep-expanded: every `ocas_ref` string is
/// replaced by the payload it names, recursively; cycles and missing nodes keep the id.
///
/// # Errors
/// [`ThreadError::WrongType`] for a node that is not a StepNode, `step H has no detail`.
pub(crate) fn step_details(store: &Store, step: NodeId) -> Result<Value> {
    // One read transaction for the whole expansion.
    let snap = store.snapshot()?;
    let n = snap
        .get(step)?
        .ok_or_else(|| ThreadError::NodeNotFound(step.to_wire()))?;
    if n.type_id != STEP_NODE {
        return Err(ThreadError::WrongType {
            id: step,
            expected: "StepNode",
        });
    }
    let detail = StepNode::from_value(&n.payload()?)
        .ok()
        .and_then(|s| s.detail)
        .ok_or_else(|| ThreadError::Invalid(format!("step {step} has no detail")))?;
    let mut seen = Expansion::default();
    let expanded = expand_node(store, &snap, detail, &mut seen)?;
    Ok(expanded.unwrap_or_else(|| Value::str(detail.to_wire())))
}

/// The state of one deep expansion: every node it has met (a node is expanded the first time
/// only; later references to it, cycles included, stay ids) and the current depth.
#[derive(Default)]
struct Expansion {
    seen: std::collections::HashSet<NodeId>,
    depth: usize,
}

/// Deeper than this, references stay ids (a bound on the call stack).
const MAX_EXPANSION_DEPTH: usize = 256;

/// Node `id` read through `snap`, its references expanded; the store gives each type's plan
/// (cached per store handle).
fn expand_node(
    store: &Store,
    snap: &Snapshot,
    id: NodeId,
    st: &mut Expansion,
) -> Result<Option<Value>> {
    if !st.seen.insert(id) || st.depth >= MAX_EXPANSION_DEPTH {
        return Ok(None);
    }
    let Some(n) = snap.get(id)? else {
        return Ok(None);
    };
    let payload = n.payload()?;
    if n.type_id == META || n.type_id == id {
        return Ok(Some(payload));
    }
    let info = store.type_info(n.type_id)?;
    let plan = info.plan()?;
    // The reference positions of the store's one plan, expanded once each (a position the
    // plan reaches twice, through `allOf` say, is the same value).
    let mut subs: Vec<(&Value, Value)> = Vec::new();
    st.depth += 1;
    for at in plan.positions(&payload) {
        if subs.iter().any(|(p, _)| std::ptr::eq(*p, at)) {
            continue;
        }
        if let Some(r) = at.as_str().and_then(NodeId::parse_strict)
            && let Some(x) = expand_node(store, snap, r, st)?
        {
            subs.push((at, x));
        }
    }
    st.depth -= 1;
    let out = (!subs.is_empty()).then(|| substitute(&payload, &subs));
    Ok(Some(out.unwrap_or(payload)))
}

/// `v` with each value in `subs` (identified by address) replaced by its expansion.
fn substitute(v: &Value, subs: &[(&Value, Value)]) -> Value {
    if let Some((_, x)) = subs.iter().find(|(p, _)| std::ptr::eq(*p, v)) {
        return x.clone();
    }
    match v {
        Value::Array(a) => Value::Array(a.iter().map(|i| substitute(i, subs)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), substitute(x, subs)))
                .collect(),
        ),
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::nodes::TEXT;

    fn put(store: &Store, type_id: NodeId, payload: &str) -> NodeId {
        let v = Value::from_json_str(payload).unwrap();
        let p = if type_id == META {
            store.prepare_schema(&v).unwrap()
        } else {
            store.prepare(type_id, &v, true).unwrap()
        };
        let id = p.id;
        store.put(&[p], 1).unwrap();
        id
    }

    /// Refs under `oneOf`, `allOf`, `prefixItems` and `patternProperties` are expanded, as
    /// refs and walks find them, each node once (later references keep its id, as the
    /// TypeScript tool prints them); a reference to a missing node keeps its id.
    #[test]
    fn step_details_expand_every_kind_of_ref_position() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("uwf.redb")).unwrap();
        let text = TEXT;
        let x = put(&store, text, r#""x""#);
        let y = put(&store, text, r#""y""#);
        let r = r#"{"type":"string","format":"ocas_ref"}"#;
        let schema = put(
            &store,
            META,
            &format!(
                r#"{{"type":"object","properties":{{"a":{{"oneOf":[{r},{{"type":"null"}}]}},"b":{{"allOf":[{r},{{"minLength":13}}]}},"c":{{"type":"array","prefixItems":[{r}]}},"d":{{"type":"object","patternProperties":{{"^(?=k)":{r}}}}}}}}}"#
            ),
        );
        let detail = put(
            &store,
            schema,
            &format!(
                r#"{{"a":"{x}","b":"{y}","c":["{x}","{y}"],"d":{{"k1":"{y}","z":"{x}","k2":"AAAAAAAAAAAAA"}}}}"#
            ),
        );
        let step = put(
            &store,
            STEP_NODE,
            &format!(
                r#"{{"start":"{x}","prev":null,"role":"r","output":"{x}","detail":"{detail}","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/"}}"#
            ),
        );
        assert_eq!(
            step_details(&store, step).unwrap().to_json(),
            format!(
                r#"{{"a":"x","b":"y","c":["{x}","{y}"],"d":{{"z":"{x}","k1":"{y}","k2":"AAAAAAAAAAAAA"}}}}"#
            )
        );
    }
}
