//! The store side of the agent kit: what an agent is given (`uwf agent context`), turning raw
//! agent output into a StepNode (`uwf agent submit`), and the scripted agent's replies.

use super::chain::{Chain, Moderated, chain_in, load_history, load_workflow};
use super::ops::active;
use super::{Result, ThreadError};
use crate::agent::{self, Script};
use crate::cas::{NodeId, Value};
use crate::store::{ModelCall, StepUsage, Store};
use crate::workflow::ThreadId;
use crate::workflow::nodes::{STEP_NODE, StepNode, TEXT};
use crate::workflow::{self, History, Jsonata, Role, StoredWorkflow};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// A thread at its head, read for one role: loaded here, or borrowed from the step that runs
/// the agent (which has read it already).
struct Ctx<'a> {
    chain: Cow<'a, Chain>,
    wf: Cow<'a, StoredWorkflow>,
    role: Cow<'a, Role<NodeId>>,
    schema: Arc<Value>,
}

impl Ctx<'_> {
    /// What a submission on this context is built on.
    fn on(&self) -> On<'_> {
        On {
            head: self.chain.head(),
            start: self.chain.start_id,
            workflow: self.chain.workflow_id().ok(),
            workflow_name: Cow::Borrowed(&self.wf.name),
            role: Cow::Borrowed(&self.role),
            schema: self.schema.clone(),
        }
    }
}

/// What a submission is built on and checked against: the thread's head and StartNode, its
/// workflow, the role and the role's output schema.
#[derive(Debug)]
struct On<'a> {
    head: NodeId,
    start: NodeId,
    workflow: Option<NodeId>,
    workflow_name: Cow<'a, str>,
    role: Cow<'a, Role<NodeId>>,
    schema: Arc<Value>,
}

impl On<'_> {
    fn into_owned(self) -> On<'static> {
        On {
            workflow_name: Cow::Owned(self.workflow_name.into_owned()),
            role: Cow::Owned(self.role.into_owned()),
            ..self
        }
    }
}

/// [`On`], kept by a runner for the step whose agent program runs ([`Submissions::expect`]):
/// the submissions of that agent are built on the thread as the step read it, which the
/// step's lease keeps: only the thread record is read again (to check the head), not the
/// chain, the workflow or the schema.
#[derive(Debug)]
pub(crate) struct Expected {
    role_name: String,
    on: On<'static>,
}

impl Expected {
    /// What the step on `m` gives a submission for `role` (`m` may hold its last step only).
    ///
    /// # Errors
    /// An unknown role, store failures.
    pub(crate) fn of(store: &Store, m: &Moderated, role: &str) -> Result<Expected> {
        let c = role_ctx(Cow::Borrowed(&m.chain), Cow::Borrowed(&m.wf), role, |id| {
            known_schema(store, id)
        })?;
        Ok(Expected {
            role_name: role.to_string(),
            on: c.on().into_owned(),
        })
    }
}

fn load_ctx(store: &Store, thread: &ThreadId, role: &str) -> Result<Ctx<'static>> {
    let head = active(store, thread)?.head;
    let snap = store.snapshot()?;
    let chain = chain_in(&snap, head)?;
    let wf = load_workflow(&snap, chain.workflow_id()?)?;
    role_ctx(Cow::Owned(chain), Cow::Owned(wf), role, |id| {
        read_schema(&snap, id)
    })
}

/// The context of `role` on the thread the engine has loaded for its step.
/// The role's schema comes from the store's cache of schemas (compiled once per process), so a
/// step reads nothing here once the schema is known.
fn moderated_ctx<'a>(store: &Store, m: &'a Moderated, role: &str) -> Result<Ctx<'a>> {
    debug_assert!(!m.partial, "an agent's context needs every step");
    role_ctx(Cow::Borrowed(&m.chain), Cow::Borrowed(&m.wf), role, |id| {
        known_schema(store, id)
    })
}

/// The schema `id` from the store's cache of schemas (shared, not copied), else read as `uwf
/// agent context` reads it (not a schema the store knows).
fn known_schema(store: &Store, id: NodeId) -> Result<Arc<Value>> {
    match store.type_info(id) {
        Ok(t) => Ok(t.schema.clone()),
        Err(_) => read_schema(&store.snapshot()?, id),
    }
}

/// The payload of schema node `id`.
fn read_schema(snap: &crate::store::Snapshot, id: NodeId) -> Result<Arc<Value>> {
    Ok(Arc::new(
        snap.get(id)?
            .ok_or_else(|| ThreadError::NodeNotFound(id.to_wire()))?
            .payload()?,
    ))
}

fn role_ctx<'a>(
    chain: Cow<'a, Chain>,
    wf: Cow<'a, StoredWorkflow>,
    role: &str,
    schema_of: impl FnOnce(NodeId) -> Result<Arc<Value>>,
) -> Result<Ctx<'a>> {
    let unknown = |wf: &StoredWorkflow| {
        ThreadError::Invalid(format!(
            "unknown role \"{role}\" in workflow \"{}\"; roles: {}",
            wf.name,
            wf.roles.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    };
    // Borrowed from a workflow the caller has loaded (a step's), not copied.
    let r = match &wf {
        Cow::Borrowed(w) => Cow::Borrowed(w.roles.get(role).ok_or_else(|| unknown(w))?),
        Cow::Owned(w) => Cow::Owned(w.roles.get(role).ok_or_else(|| unknown(w))?.clone()),
    };
    let schema = schema_of(r.schema)?;
    Ok(Ctx {
        chain,
        wf,
        role: r,
        schema,
    })
}

/// What an agent is given for a step of a thread.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentContext {
    /// The start, the steps with expanded outputs, the role, the output-format instruction and
    /// the edge prompt ([`agent::agent_context`]).
    pub context: Value,
    /// The thread's head.
    pub head: NodeId,
}

/// `uwf agent context THREAD ROLE`: the start, the steps with expanded outputs, the role, the
/// output-format instruction and the edge prompt (`edge_prompt` when given, else the
/// moderator's prompt when it picks `role`), and the head.
///
/// # Errors
/// An inactive thread, an unknown role, store failures.
pub(crate) fn agent_context(
    store: &Store,
    thread: &ThreadId,
    role: &str,
    edge_prompt: Option<&str>,
) -> Result<AgentContext> {
    let c = load_ctx(store, thread, role)?;
    let history = load_history(store, &c.chain)?;
    let edge = match edge_prompt.filter(|e| !e.is_empty()) {
        Some(e) => Some(e.to_string()),
        None => workflow::next(&c.wf, &history, &Jsonata::default())
            .ok()
            .filter(|d| d.role == role)
            .and_then(|d| d.prompt),
    };
    Ok(AgentContext {
        context: agent::agent_context(&history, role, &c.role, &c.schema, edge.as_deref()),
        head: c.chain.head(),
    })
}

/// What `uwf agent submit` turns into a StepNode.
#[derive(Clone)]
pub struct SubmitInput<'a> {
    /// The thread.
    pub thread: &'a ThreadId,
    /// The role that ran.
    pub role: &'a str,
    /// The agent's raw output.
    pub raw: &'a str,
    /// The detail text (defaults to the raw output).
    pub detail: Option<&'a str>,
    /// A detail node the agent has stored already, or brings in `detail_nodes` (wins over
    /// `detail`).
    pub detail_id: Option<NodeId>,
    /// Nodes written with the StepNode, in its transaction: the detail `detail_id` names and
    /// what it references, prepared by the agent.
    pub detail_nodes: &'a [crate::store::Prepared],
    /// The prompt the agent was given, kept as a text node (`assembledPrompt`).
    pub assembled_prompt: Option<&'a str>,
    /// The second layer of extraction, tried when the frontmatter fast path fails.
    pub fallback: Option<&'a dyn Fallback>,
    /// The agent's name, recorded in the StepNode.
    pub agent: &'a str,
    /// The edge prompt the agent was given.
    pub edge_prompt: Option<&'a str>,
    /// The agent's working directory.
    pub cwd: &'a str,
    /// When the agent started, ms since the epoch.
    pub started_ms: u64,
    /// Now, ms since the epoch.
    pub now_ms: u64,
    /// The model calls the agent made or reported, kept with the StepNode (the fallback's
    /// own calls are added to them).
    pub usage: &'a [ModelCall],
    /// Where the step's writes wait for the transaction that moves the head to it (an agent
    /// run by the engine in its process); `None` writes them now.
    pub hold: Option<&'a HeldStep>,
}

/// A step's nodes and model calls, ready to be written with its head move.
#[derive(Clone)]
pub(crate) struct StepWrite {
    nodes: Vec<crate::store::Prepared>,
    step: NodeId,
    usage: Option<StepCallsOwned>,
    now: u64,
    /// The payloads of the StepNode and its output as values, for the head move's checks
    /// (which would otherwise decode them again).
    values: Vec<(NodeId, Value)>,
}

impl StepWrite {
    /// Writes them in `w`'s transaction; returns whether the StepNode was not stored before.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn write(
        &self,
        w: &mut crate::store::Writer<'_>,
    ) -> Result<bool, crate::store::StoreError> {
        let outcomes = w.put(&self.nodes, self.now)?;
        if let Some(u) = &self.usage {
            w.add_usage(
                &StepUsage {
                    step: self.step,
                    thread: &u.thread,
                    workflow: u.workflow,
                    workflow_name: &u.workflow_name,
                    role: &u.role,
                    calls: &u.calls,
                    day: None,
                },
                self.now,
            )?;
        }
        let at = self.nodes.iter().position(|n| n.id == self.step);
        Ok(at.is_some_and(|i| outcomes.get(i) == Some(&crate::store::PutOutcome::Inserted)))
    }

    /// The payloads kept as values ([`StepWrite::node`]'s, decoded), taken out.
    pub(crate) fn take_values(&mut self) -> Vec<(NodeId, Value)> {
        std::mem::take(&mut self.values)
    }

    /// The StepNode's id.
    pub(crate) fn step(&self) -> NodeId {
        self.step
    }

    /// The nodes.
    pub(crate) fn nodes(&self) -> &[crate::store::Prepared] {
        &self.nodes
    }

    /// The node `id` among them, with the time it is written at.
    pub(crate) fn node(&self, id: NodeId) -> Option<(&crate::store::Prepared, u64)> {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .map(|n| (n, self.now))
    }
}

/// Where a step run in process leaves its writes for the head move ([`SubmitInput::hold`]).
#[derive(Default)]
pub struct HeldStep(std::sync::Mutex<Option<StepWrite>>);

impl HeldStep {
    /// The writes left here, if any.
    pub(crate) fn take(&self) -> Option<StepWrite> {
        self.0.lock().ok()?.take()
    }

    /// Leaves `w` here.
    pub(crate) fn put(&self, w: StepWrite) {
        if let Ok(mut h) = self.0.lock() {
            *h = Some(w);
        }
    }
}

/// The submissions a runner's socket received from the agent programs of its steps, held for
/// their steps' head moves: the step whose agent runs [`Submissions::expect`]s them, and takes
/// them when its agent has ended ([`Submissions::done`]). A submission for a thread no step
/// waits for is not held.
#[derive(Default)]
pub(crate) struct Submissions(std::sync::Mutex<HashMap<ThreadId, Waiting>>);

/// What a step whose agent runs has: the thread as it read it, and the submissions held.
struct Waiting {
    at: Option<Arc<Expected>>,
    held: Vec<StepWrite>,
}

impl std::fmt::Debug for Submissions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Submissions")
    }
}

impl Submissions {
    /// A step of `thread` runs its agent, on the thread as `at` says (when known): its
    /// submissions are held from now on.
    pub(crate) fn expect(&self, thread: &ThreadId, at: Option<Expected>) {
        if let Ok(mut m) = self.0.lock() {
            let at = at.map(Arc::new);
            m.insert(
                thread.clone(),
                Waiting {
                    at,
                    held: Vec::new(),
                },
            );
        }
    }

    /// Holds `w`, a submission for `thread`, when a step of it runs its agent; else gives it
    /// back.
    pub(crate) fn hold(&self, thread: &ThreadId, w: StepWrite) -> Option<StepWrite> {
        match self.0.lock() {
            Ok(mut m) => match m.get_mut(thread) {
                Some(waiting) => {
                    waiting.held.push(w);
                    None
                }
                None => Some(w),
            },
            Err(_) => Some(w),
        }
    }

    /// Whether a step of `thread` runs its agent, and the thread as it read it (when known).
    pub(crate) fn expects(&self, thread: &ThreadId) -> Option<Option<Arc<Expected>>> {
        let m = self.0.lock().ok()?;
        m.get(thread).map(|w| w.at.clone())
    }

    /// The agent of `thread`'s step has ended: what it submitted, in order; nothing more is
    /// held for it.
    pub(crate) fn done(&self, thread: &ThreadId) -> Vec<StepWrite> {
        self.0
            .lock()
            .ok()
            .and_then(|mut m| m.remove(thread))
            .map(|w| w.held)
            .unwrap_or_default()
    }
}

/// The second layer of extraction: the role's output from raw agent output when the
/// frontmatter fast path found none (a model asked to extract it, as `uwf agent submit` does
/// when a model is configured).
pub trait Fallback {
    /// The role's output, which `check` accepts, from `raw`; `schema` is the role's output
    /// schema.
    ///
    /// # Errors
    /// Why no valid output could be had, in one line.
    fn extract(
        &self,
        schema: &Value,
        raw: &str,
        check: &dyn Fn(&Value) -> std::result::Result<(), String>,
    ) -> std::result::Result<Value, String>;

    /// The model calls made so far, for the usage kept with the step.
    fn calls(&self) -> Vec<ModelCall> {
        Vec::new()
    }
}

/// Extracts the role's output from raw agent output (the frontmatter fast path, then
/// `input.fallback`) and writes the output node, the detail node and the StepNode (prev = the
/// current head). Returns the StepNode id; the head is not moved (the step that ran the agent
/// does that).
///
/// # Errors
/// [`ThreadError::Extract`] saying why neither layer gave a valid output, with the id of the
/// text node that keeps the raw output; an inactive thread; an unknown role.
pub fn submit(store: &Store, input: &SubmitInput<'_>) -> Result<NodeId> {
    let c = load_ctx(store, input.thread, input.role)?;
    Ok(submit_with(store, &c.on(), input, false)?.expect("not deferred"))
}

/// [`submit`] for a submission whose second layer of extraction lives elsewhere (in the
/// process that sent it): `None`, with nothing written, when the frontmatter fast path fails
/// and `has_fallback` says that layer is there to try; otherwise as [`submit`] without
/// `input.fallback`.
///
/// # Errors
/// As [`submit`].
pub(crate) fn submit_unless_fallback(
    store: &Store,
    input: &SubmitInput<'_>,
    has_fallback: bool,
    at: Option<&Expected>,
) -> Result<Option<NodeId>> {
    // The thread is read as the direct path reads it (a thread cancelled meanwhile is refused
    // alike); its chain, workflow and schema are the step's when the head is still its.
    let at = at.filter(|e| {
        e.role_name == input.role && active(store, input.thread).is_ok_and(|t| t.head == e.on.head)
    });
    match at {
        Some(e) => submit_with(store, &e.on, input, has_fallback),
        None => submit_with(
            store,
            &load_ctx(store, input.thread, input.role)?.on(),
            input,
            has_fallback,
        ),
    }
}

/// [`submit`] for the step the engine runs, on the thread it has loaded.
///
/// # Errors
/// As [`submit`].
pub(crate) fn submit_moderated(
    store: &Store,
    m: &Moderated,
    input: &SubmitInput<'_>,
) -> Result<NodeId> {
    let c = moderated_ctx(store, m, input.role)?;
    Ok(submit_with(store, &c.on(), input, false)?.expect("not deferred"))
}

/// The role's output from the raw output: the frontmatter fast path (checked with the
/// validator `prepare` would use: `true`), else the second layer (`false`); `None` when the
/// fast path fails and `defer` leaves the second layer to the caller. A failure of both keeps
/// the raw output as a text node that the error names.
fn role_output(
    store: &Store,
    c: &On<'_>,
    input: &SubmitInput<'_>,
    defer: bool,
) -> Result<Option<(Value, bool)>> {
    // The store compiles a schema's validator once per process.
    let info = store.type_info(c.role.schema)?;
    let schema_id = c.role.schema.to_wire();
    let fast = match info.validator() {
        Ok(v) => agent::fast_path_with(input.raw, &c.schema, &schema_id, v),
        Err(_) => agent::fast_path(input.raw, &c.schema, &schema_id),
    };
    // The fast path's output is checked already, with the validator `prepare` would use.
    let (out, checked) = match fast {
        Ok(o) => (o.output, true),
        Err(_) if defer => return Ok(None),
        Err(e) => {
            let fast = e.to_string().replace('\n', " ");
            let check = |v: &Value| {
                store
                    .prepare(c.role.schema, v, true)
                    .map(drop)
                    .map_err(|e| e.to_string().replace('\n', " "))
            };
            let second = input
                .fallback
                .map(|f| f.extract(&c.schema, input.raw, &check));
            match second {
                Some(Ok(v)) => (v, false),
                failed => {
                    let raw = store.prepare(TEXT, &Value::str(input.raw), false)?;
                    let id = raw.id;
                    store.put(&[raw], input.now_ms)?;
                    let message = match failed {
                        Some(Err(m)) => format!("{fast}; model extraction: {m}"),
                        _ => fast,
                    };
                    return Err(ThreadError::Extract {
                        role: input.role.to_string(),
                        message,
                        raw: id,
                    });
                }
            }
        }
    };
    Ok(Some((out, checked)))
}

/// Writes the nodes of a submission; `None`, with nothing written, when the fast path fails
/// and `defer` asks to leave the second layer to the caller.
fn submit_with(
    store: &Store,
    c: &On<'_>,
    input: &SubmitInput<'_>,
    defer: bool,
) -> Result<Option<NodeId>> {
    let text = TEXT;
    let Some((out, checked)) = role_output(store, c, input, defer)? else {
        return Ok(None);
    };
    let output = store.prepare(c.role.schema, &out, !checked)?;
    let mut nodes = vec![output];
    let detail_id = match input.detail_id {
        Some(id) => id,
        None => {
            let d = store.prepare(text, &Value::str(input.detail.unwrap_or(input.raw)), false)?;
            let id = d.id;
            nodes.push(d);
            id
        }
    };
    let assembled = match input.assembled_prompt.filter(|p| !p.is_empty()) {
        Some(p) => {
            let n = store.prepare(text, &Value::str(p), false)?;
            let id = n.id;
            nodes.push(n);
            Some(id)
        }
        None => None,
    };
    let head = c.head;
    let node = StepNode {
        start: c.start,
        prev: (head != c.start).then_some(head),
        role: input.role.to_string(),
        output: Some(nodes[0].id),
        detail: Some(detail_id),
        agent: input.agent.to_string(),
        edge_prompt: input
            .edge_prompt
            .filter(|e| !e.is_empty())
            .map(str::to_string),
        started_at_ms: Some(input.started_ms.min(input.now_ms)),
        completed_at_ms: Some(input.now_ms),
        cwd: input.cwd.to_string(),
        assembled_prompt: assembled,
    };
    // Made by `StepNode::to_value` from checked parts: valid by construction.
    let step_value = node.to_value();
    let step = store.prepare(STEP_NODE, &step_value, false)?;
    let id = step.id;
    let values = vec![(nodes[0].id, out), (id, step_value)];
    nodes.extend(input.detail_nodes.iter().cloned());
    nodes.push(step);
    let mut calls = input.usage.to_vec();
    if !checked && let Some(f) = input.fallback {
        calls.extend(f.calls());
    }
    crate::traces::wrote(id, &calls);
    // Most steps call no model: nothing to carry into the write for them.
    let usage = (!calls.is_empty()).then(|| StepCallsOwned {
        thread: input.thread.as_str().to_string(),
        workflow: c.workflow,
        workflow_name: c.workflow_name.to_string(),
        role: input.role.to_string(),
        calls,
    });
    let write = StepWrite {
        nodes,
        step: id,
        usage,
        now: input.now_ms,
        values,
    };
    match input.hold {
        Some(h) => {
            *h.0.lock()
                .map_err(|_| ThreadError::Invalid("a step's writes".into()))? = Some(write)
        }
        None => {
            store.write_grouped(move |w| write.write(w).map(|_| ()))?;
        }
    }
    Ok(Some(id))
}

/// A step's calls carried into its write.
#[derive(Clone)]
struct StepCallsOwned {
    thread: String,
    workflow: Option<NodeId>,
    workflow_name: String,
    role: String,
    calls: Vec<ModelCall>,
}

/// What a built-in agent needs to brief a role for the next step of a thread.
#[derive(Debug, Clone)]
pub struct RoleBrief {
    /// The role, as the workflow defines it.
    pub role: Role<NodeId>,
    /// The role's output schema (the payload of its schema node), shared with the store's
    /// cache of schemas.
    pub schema: Arc<Value>,
    /// The thread's history, with outputs expanded.
    pub history: History,
}

/// The brief of `role` for the next step of `thread`.
///
/// # Errors
/// An inactive thread, an unknown role, store failures.
pub fn role_brief(store: &Store, thread: &ThreadId, role: &str) -> Result<RoleBrief> {
    let c = load_ctx(store, thread, role)?;
    let history = load_history(store, &c.chain)?;
    Ok(RoleBrief {
        role: c.role.into_owned(),
        schema: c.schema,
        history,
    })
}

/// [`role_brief`] on the thread the engine has loaded for its step.
///
/// # Errors
/// An unknown role, store failures.
pub(crate) fn role_brief_moderated(store: &Store, m: &Moderated, role: &str) -> Result<RoleBrief> {
    let c = moderated_ctx(store, m, role)?;
    Ok(RoleBrief {
        role: c.role.into_owned(),
        schema: c.schema,
        history: m.history.clone(),
    })
}

/// The scripted agent's raw output for `role` in `thread`: its n-th reply for the n-th run of
/// the role in the thread.
///
/// # Errors
/// A script without a reply for this run, an inactive thread, store failures.
pub fn scripted_reply(
    store: &Store,
    thread: &ThreadId,
    role: &str,
    script: &Script,
) -> Result<String> {
    let c = load_ctx(store, thread, role)?;
    scripted_reply_in(&c.chain, role, script)
}

/// The scripted agent's reply for `role` on `chain`.
///
/// # Errors
/// A script without a reply for this run.
pub(crate) fn scripted_reply_in(chain: &Chain, role: &str, script: &Script) -> Result<String> {
    let visit = chain.steps.iter().filter(|s| s.node.role == role).count();
    script
        .raw(role, visit)
        .map(str::to_string)
        .map_err(|e| ThreadError::Invalid(e.to_string()))
}
