//! A thread's life besides its steps: admission under its workflow's concurrency limit
//! (`workflows: <name>: {concurrency, overflow, max_queue}` in `config.yaml`, as seed 004 has
//! them), promotion of queued threads as others finish, pause and resume, the round limit, and
//! failed steps counted up to `maxRetries`.

use super::chain::{chain_in, load_workflow};
use super::ops::{Found, find};
use super::{Config, Result, ThreadError};
use crate::cas::{NodeId, Value};
use crate::store::{
    HistoryEntry, Phase, StepFailure, Store, StoreError, ThreadRecord, ThreadState, WorkflowLimits,
    Writer,
};
use crate::workflow::{FinishReason, ThreadId};
use std::collections::{HashMap, HashSet};

/// What a workflow's limit does with a thread started beyond it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Wait in a queue (the oldest is dropped when more than `max_queue` wait).
    #[default]
    Queue,
    /// Drop the new thread at once.
    Drop,
}

/// A workflow's concurrency limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Threads in progress at once (not queued: idle, running or paused).
    pub concurrency: u32,
    /// What happens beyond it.
    pub overflow: Overflow,
    /// The most threads waiting; `None` for no bound.
    pub max_queue: Option<u32>,
}

/// The consecutive failed steps after which a thread fails, when the config does not say.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

impl Config {
    /// The limits of workflow `name` (`workflows.<name>`), if it has any.
    ///
    /// # Errors
    /// [`ThreadError::Config`] for a malformed entry.
    pub fn limits(&self, name: &str) -> Result<Option<Limits>> {
        let Some(e) = self.doc.get("workflows").and_then(|w| w.get(name)) else {
            return Ok(None);
        };
        let bad = |k: &str, what: &str| {
            ThreadError::Config(format!("config.workflows.{name}.{k} must be {what}"))
        };
        let count = |k: &str| -> Result<Option<u32>> {
            match e.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) if *n >= 0.0 && n.fract() == 0.0 && *n < 1e9 => {
                    Ok(Some(*n as u32))
                }
                Some(_) => Err(bad(k, "a whole number")),
            }
        };
        let Some(concurrency) = count("concurrency")? else {
            return Ok(None);
        };
        if concurrency == 0 {
            return Err(bad("concurrency", "at least 1"));
        }
        let overflow = match e.get("overflow").and_then(Value::as_str) {
            None => Overflow::Queue,
            Some("queue") => Overflow::Queue,
            Some("drop") => Overflow::Drop,
            Some(_) => return Err(bad("overflow", "\"queue\" or \"drop\"")),
        };
        Ok(Some(Limits {
            concurrency,
            overflow,
            max_queue: count("max_queue")?,
        }))
    }

    /// Whether any workflow has a limit.
    pub fn has_limits(&self) -> bool {
        self.doc
            .get("workflows")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
    }

    /// Consecutive failed steps after which a thread fails (`maxRetries`, default 3).
    ///
    /// # Errors
    /// [`ThreadError::Config`] when it is not a whole number of at least 1.
    pub fn max_retries(&self) -> Result<u32> {
        match self.doc.get("maxRetries") {
            None | Some(Value::Null) => Ok(DEFAULT_MAX_RETRIES),
            Some(Value::Number(n)) if *n >= 1.0 && n.fract() == 0.0 && *n < 1e6 => Ok(*n as u32),
            Some(v) => Err(ThreadError::Config(format!(
                "config.maxRetries must be a whole number of at least 1, got: {}",
                v.to_json()
            ))),
        }
    }
}

/// The limits of workflow `name`: those set in the store with `uwf limits set` (`stored`,
/// shared by every runner of the store), else `workflows.<name>` of config.yaml.
///
/// # Errors
/// A malformed config entry.
fn limits_of(
    stored: &[(String, WorkflowLimits)],
    config: &Config,
    name: &str,
) -> Result<Option<Limits>> {
    if let Some((_, l)) = stored.iter().find(|(n, _)| n == name) {
        return Ok((l.concurrency > 0).then_some(Limits {
            concurrency: l.concurrency,
            overflow: if l.drop {
                Overflow::Drop
            } else {
                Overflow::Queue
            },
            max_queue: l.max_queue,
        }));
    }
    config.limits(name)
}

/// What admission did with a new thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It may run.
    Started,
    /// It waits for room.
    Queued,
    /// It was dropped (archived with reason `dropped`).
    Dropped,
}

/// The workflow ids registered under `name`, with `wf` itself.
fn versions(store: &Store, name: &str, wf: NodeId) -> Result<HashSet<NodeId>> {
    let mut ids: HashSet<NodeId> = store
        .registry_history(name)?
        .into_iter()
        .map(|e| e.workflow)
        .collect();
    ids.insert(wf);
    Ok(ids)
}

/// Archives `thread` (in `w`) with `reason`, keeping its state row only for a failure.
fn archive(
    w: &mut Writer<'_>,
    thread: &ThreadId,
    rec: &ThreadRecord,
    wf: NodeId,
    reason: FinishReason,
    now_ms: u64,
) -> std::result::Result<(), StoreError> {
    w.remove_thread(thread)?;
    w.remove_lease(thread)?;
    if reason != FinishReason::Failed {
        w.remove_thread_state(thread)?;
    }
    w.append_history(&HistoryEntry {
        thread: thread.to_string(),
        workflow: rec.workflow.unwrap_or(wf).to_wire(),
        head: rec.head.to_wire(),
        completed_at: now_ms,
        reason,
    })
}

/// Admits the new thread `thread` (with `rec`, not yet stored) under `limits`: stores it as
/// ready or queued, or archives it as dropped; a queue over `max_queue` drops its oldest.
/// Written in `w`, so the count and the insert are one transaction.
///
/// # Errors
/// Store failures.
pub(crate) fn admit(
    w: &mut Writer<'_>,
    thread: &ThreadId,
    rec: &ThreadRecord,
    state: ThreadState,
    limits: Option<(Limits, &HashSet<NodeId>)>,
    now_ms: u64,
) -> std::result::Result<Admission, StoreError> {
    let wf = rec.workflow.unwrap_or(rec.head);
    let Some((limits, ids)) = limits else {
        w.set_thread(thread, rec)?;
        w.set_thread_state(thread, &state)?;
        return Ok(Admission::Started);
    };
    // Admissions of one workflow count and start one at a time, whichever process or machine
    // makes them.
    if let Some(first) = ids.iter().min() {
        w.lock_workflow(&first.to_string())?;
    }
    let states: HashMap<ThreadId, ThreadState> = w.thread_states()?.into_iter().collect();
    let mut in_progress = 0u32;
    let mut queued: Vec<ThreadId> = Vec::new();
    for (t, r) in w.threads()? {
        if !r.workflow.is_some_and(|x| ids.contains(&x)) {
            continue;
        }
        match states.get(&t).map(|s| s.phase) {
            Some(Phase::Queued) => queued.push(t),
            _ => in_progress += 1,
        }
    }
    if in_progress < limits.concurrency && queued.is_empty() {
        w.set_thread(thread, rec)?;
        w.set_thread_state(thread, &state)?;
        return Ok(Admission::Started);
    }
    if limits.overflow == Overflow::Drop {
        w.set_thread(thread, rec)?;
        archive(w, thread, rec, wf, FinishReason::Dropped, now_ms)?;
        return Ok(Admission::Dropped);
    }
    w.set_thread(thread, rec)?;
    w.set_thread_state(
        thread,
        &ThreadState {
            phase: Phase::Queued,
            ..state
        },
    )?;
    queued.push(thread.clone());
    // Thread ids grow with time: the smallest waited longest.
    queued.sort();
    let mut admission = Admission::Queued;
    if let Some(max) = limits.max_queue {
        let over = queued.len().saturating_sub(max as usize);
        for t in queued.iter().take(over) {
            if let Some(r) = w.thread(t)? {
                archive(w, t, &r, wf, FinishReason::Dropped, now_ms)?;
            }
            if t == thread {
                admission = Admission::Dropped;
            }
        }
    }
    Ok(admission)
}

/// The limits and the versions of the workflow of a new thread, for [`admit`].
///
/// # Errors
/// A malformed limit, store failures.
pub(crate) fn limits_for(
    store: &Store,
    config: &Config,
    wf: NodeId,
) -> Result<Option<(Limits, HashSet<NodeId>)>> {
    let stored = store.workflow_limits()?;
    if !config.has_limits() && !stored.iter().any(|(_, l)| l.concurrency > 0) {
        return Ok(None);
    }
    let name = load_workflow(&store.snapshot()?, wf)?.name;
    match limits_of(&stored, config, &name)? {
        Some(l) => Ok(Some((l, versions(store, &name, wf)?))),
        None => Ok(None),
    }
}

/// Promotes queued threads, oldest first, while their workflow has room. Returns the
/// promoted threads.
///
/// # Errors
/// A malformed limit, store failures.
pub fn promote(store: &Store, config: &Config) -> Result<Vec<ThreadId>> {
    let states = store.thread_states()?;
    if !states.iter().any(|(_, s)| s.phase == Phase::Queued) {
        return Ok(Vec::new());
    }
    let threads = store.threads()?;
    let snap = store.snapshot()?;
    let mut names: HashMap<NodeId, String> = HashMap::new();
    let mut by_name: HashMap<String, Vec<(ThreadId, bool)>> = HashMap::new();
    let phase: HashMap<&ThreadId, Phase> = states.iter().map(|(t, s)| (t, s.phase)).collect();
    for (t, r) in &threads {
        let Some(wf) = r
            .workflow
            .or_else(|| chain_in(&snap, r.head).ok()?.workflow_id().ok())
        else {
            continue;
        };
        let name = match names.get(&wf) {
            Some(n) => n.clone(),
            None => {
                let n = load_workflow(&snap, wf).map(|w| w.name).unwrap_or_default();
                names.insert(wf, n.clone());
                n
            }
        };
        let queued = phase.get(t) == Some(&Phase::Queued);
        by_name.entry(name).or_default().push((t.clone(), queued));
    }
    drop(snap);
    let stored = store.workflow_limits()?;
    let mut promoted = Vec::new();
    for (name, mut ts) in by_name {
        let Some(limits) = limits_of(&stored, config, &name)? else {
            // No limit (any more): nothing holds them back.
            for (t, q) in &ts {
                if *q {
                    promoted.extend(set_ready(store, t)?);
                }
            }
            continue;
        };
        ts.sort();
        let mut running = ts.iter().filter(|(_, q)| !q).count() as u32;
        for (t, q) in &ts {
            if running >= limits.concurrency {
                break;
            }
            if *q {
                promoted.extend(set_ready(store, t)?);
                running += 1;
            }
        }
    }
    for t in &promoted {
        tracing::info!(tag = "EYM4VVH1", thread = %t, "queued thread promoted");
    }
    Ok(promoted)
}

/// Makes a queued thread ready (in its own transaction, checking it is still queued).
fn set_ready(store: &Store, thread: &ThreadId) -> Result<Option<ThreadId>> {
    Ok(store.write(|w| {
        let mut s = w.thread_state(thread)?;
        if s.phase != Phase::Queued || w.thread(thread)?.is_none() {
            return Ok(None);
        }
        s.phase = Phase::Ready;
        w.set_thread_state(thread, &s)?;
        Ok(Some(thread.clone()))
    })?)
}

/// `thread pause`: the thread takes no step until resumed (a running step finishes first).
///
/// # Errors
/// A thread that is not active.
pub fn pause(store: &Store, thread: &ThreadId) -> Result<()> {
    let done = store.write(|w| {
        if w.thread(thread)?.is_none() {
            return Ok(false);
        }
        let mut s = w.thread_state(thread)?;
        s.phase = Phase::Paused;
        w.set_thread_state(thread, &s)?;
        Ok(true)
    })?;
    if !done {
        return Err(not_active(store, thread)?);
    }
    Ok(())
}

fn not_active(store: &Store, thread: &ThreadId) -> Result<ThreadError> {
    Ok(match find(store, thread)? {
        Found::Finished(h) => ThreadError::NotActive {
            thread: thread.to_string(),
            reason: h.reason.to_string(),
        },
        Found::Active(_) => ThreadError::Invalid(format!("thread {thread} changed meanwhile")),
    })
}

/// `thread resume`: a paused thread is ready again; a failed one is active again, ready, its
/// failures forgotten.
///
/// # Errors
/// A thread that is neither paused nor failed.
pub fn resume(store: &Store, thread: &ThreadId, now_ms: u64) -> Result<()> {
    match find(store, thread)? {
        Found::Active(_) => {
            store.write(|w| {
                let mut s = w.thread_state(thread)?;
                if s.phase == Phase::Paused {
                    s.phase = Phase::Ready;
                }
                s.failures = 0;
                w.set_thread_state(thread, &s)
            })?;
            Ok(())
        }
        Found::Finished(h) if h.reason == FinishReason::Failed => {
            let head = NodeId::parse_strict(&h.head)
                .ok_or_else(|| ThreadError::NodeNotFound(h.head.clone()))?;
            let wf = NodeId::parse_strict(&h.workflow);
            store.write(|w| {
                w.set_thread(
                    thread,
                    &ThreadRecord {
                        head,
                        workflow: wf,
                        updated_ms: now_ms,
                    },
                )?;
                let mut s = w.thread_state(thread)?;
                s.phase = Phase::Ready;
                s.failures = 0;
                s.max_rounds = None;
                w.set_thread_state(thread, &s)
            })?;
            Ok(())
        }
        Found::Finished(h) => Err(ThreadError::NotActive {
            thread: thread.to_string(),
            reason: format!("{}; only a paused or failed thread resumes", h.reason),
        }),
    }
}

/// `thread rm`: removes a thread's record, state and archive entries. Its nodes stay (garbage
/// collection is another matter). An active thread goes only with `force`, and never while a
/// live process runs a step of it.
///
/// # Errors
/// [`ThreadError::NotFound`], an active thread without `force`, a running step.
pub fn remove(store: &Store, thread: &ThreadId, force: bool) -> Result<()> {
    enum Refused {
        Running(u32),
        Active,
        Missing,
    }
    let refused = store.write(|w| {
        if let Some(l) = w.lease(thread)?
            && crate::engine::lease_is_live(&l)
        {
            return Ok(Some(Refused::Running(l.pid)));
        }
        let active = w.thread(thread)?.is_some();
        if active && !force {
            return Ok(Some(Refused::Active));
        }
        w.remove_thread(thread)?;
        w.remove_lease(thread)?;
        w.remove_thread_state(thread)?;
        let archived = w.remove_history_of(thread)?;
        if !active && archived == 0 {
            return Ok(Some(Refused::Missing));
        }
        w.record_removal(&crate::store::Removal::Thread(thread.to_string()))?;
        Ok(None)
    })?;
    match refused {
        None => Ok(()),
        Some(Refused::Running(pid)) => Err(ThreadError::Invalid(format!(
            "thread {thread} has a step running (pid {pid}); stop it first"
        ))),
        Some(Refused::Active) => Err(ThreadError::Invalid(format!(
            "thread {thread} is active; pass --force to remove it anyway"
        ))),
        Some(Refused::Missing) => Err(ThreadError::NotFound(thread.to_string())),
    }
}

/// Records a failed step of `thread`: one more consecutive failure and the error; at
/// `max_retries` the thread is archived as failed. Returns whether it failed for good.
///
/// # Errors
/// Store failures.
pub fn record_failure(
    store: &Store,
    thread: &ThreadId,
    failure: StepFailure,
    max_retries: u32,
) -> Result<bool> {
    Ok(store.write(|w| {
        let Some(rec) = w.thread(thread)? else {
            return Ok(false);
        };
        let mut s = w.thread_state(thread)?;
        s.failures += 1;
        let now = failure.time_ms;
        s.last_error = Some(failure);
        let failed = s.failures >= max_retries;
        w.set_thread_state(thread, &s)?;
        if failed {
            let wf = rec.workflow.unwrap_or(rec.head);
            archive(w, thread, &rec, wf, FinishReason::Failed, now)?;
        }
        Ok(failed)
    })?)
}

/// Archives `thread` as failed with `failure` (its round limit, say): a failure that fails it
/// whatever its count.
///
/// # Errors
/// Store failures.
pub fn fail(store: &Store, thread: &ThreadId, failure: StepFailure) -> Result<()> {
    record_failure(store, thread, failure, 1).map(drop)
}
