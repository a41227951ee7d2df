//! Admission under a workflow's concurrency limit (`workflows: <name>: {concurrency, overflow,
//! max_queue}` in `config.yaml`, as seed 004 has them), and the limits and `maxRetries` the
//! config gives.

use super::chain::load_workflow;
use super::{Config, Result, ThreadError};
use crate::cas::{NodeId, Value};
use crate::store::{Phase, Store, StoreError, ThreadRecord, ThreadState, WorkflowLimits, Writer};
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
pub(super) fn limits_of(
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
pub(super) fn versions(store: &Store, name: &str, wf: NodeId) -> Result<HashSet<NodeId>> {
    let mut ids: HashSet<NodeId> = store
        .registry_history(name)?
        .into_iter()
        .map(|e| e.workflow)
        .collect();
    ids.insert(wf);
    Ok(ids)
}

/// Archives `thread` (in `w`) with `reason` (see [`Writer::archive_thread`]).
pub(super) fn archive(
    w: &mut Writer<'_>,
    thread: &ThreadId,
    rec: &ThreadRecord,
    wf: NodeId,
    reason: FinishReason,
    now_ms: u64,
) -> std::result::Result<(), StoreError> {
    w.archive_thread(thread, rec, wf, reason, now_ms)
}

/// Admits new threads under a workflow's limits, in one write: counts the threads in progress
/// and queued once, at the first admission, then keeps the count as it admits; the threads it
/// admits are stored together ([`Admitter::finish`]).
pub(crate) struct Admitter<'l> {
    limits: Option<(Limits, &'l HashSet<NodeId>)>,
    /// Threads in progress, and the queued ones oldest first; read at the first admission.
    seen: Option<(u32, Vec<ThreadId>)>,
    /// Admitted threads not stored yet.
    pending: Vec<(ThreadId, ThreadRecord, ThreadState)>,
}

impl<'l> Admitter<'l> {
    /// An admitter under `limits` (`None`: every thread starts).
    pub(crate) fn new(limits: Option<(Limits, &'l HashSet<NodeId>)>) -> Admitter<'l> {
        Admitter {
            limits,
            seen: None,
            pending: Vec::new(),
        }
    }

    /// Stores the threads admitted so far.
    ///
    /// # Errors
    /// [`StoreError::ThreadExists`] if one of their ids is taken; store failures.
    pub(crate) fn finish(&mut self, w: &mut Writer<'_>) -> std::result::Result<(), StoreError> {
        store(w, &mut self.pending)
    }

    /// Admits the new thread `thread` (with `rec`, not yet stored): stores it (by
    /// [`Admitter::finish`], at the latest) as ready or queued, or archives it as dropped; a queue
    /// over `max_queue` drops its oldest. Written in `w`, so the count and the insert are one
    /// transaction.
    ///
    /// # Errors
    /// Store failures.
    pub(crate) fn admit(
        &mut self,
        w: &mut Writer<'_>,
        thread: &ThreadId,
        rec: &ThreadRecord,
        state: ThreadState,
        now_ms: u64,
    ) -> std::result::Result<Admission, StoreError> {
        let wf = rec.workflow.unwrap_or(rec.head);
        let Some((limits, ids)) = self.limits else {
            self.pending.push((thread.clone(), rec.clone(), state));
            return Ok(Admission::Started);
        };
        let (in_progress, queued) = match &mut self.seen {
            Some((n, q)) => (n, q),
            None => {
                let (n, q) = count(w, ids)?;
                let (n, q) = self.seen.insert((n, q));
                (n, q)
            }
        };
        if *in_progress < limits.concurrency && queued.is_empty() {
            *in_progress += 1;
            self.pending.push((thread.clone(), rec.clone(), state));
            return Ok(Admission::Started);
        }
        if limits.overflow == Overflow::Drop {
            self.pending.push((thread.clone(), rec.clone(), state));
            self.finish(w)?;
            archive(w, thread, rec, wf, FinishReason::Dropped, now_ms)?;
            return Ok(Admission::Dropped);
        }
        let state = ThreadState {
            phase: Phase::Queued,
            ..state
        };
        self.pending.push((thread.clone(), rec.clone(), state));
        // Thread ids grow with time: the smallest waited longest.
        let at = queued.partition_point(|t| t < thread);
        queued.insert(at, thread.clone());
        let mut admission = Admission::Queued;
        if let Some(max) = limits.max_queue {
            let over = queued.len().saturating_sub(max as usize);
            if over > 0 {
                store(w, &mut self.pending)?;
            }
            for t in queued.drain(..over) {
                if let Some(r) = w.thread(&t)? {
                    archive(w, &t, &r, wf, FinishReason::Dropped, now_ms)?;
                }
                if t == *thread {
                    admission = Admission::Dropped;
                }
            }
        }
        Ok(admission)
    }
}

/// Stores the threads `pending` holds, and forgets them.
fn store(
    w: &mut Writer<'_>,
    pending: &mut Vec<(ThreadId, ThreadRecord, ThreadState)>,
) -> std::result::Result<(), StoreError> {
    if !pending.is_empty() {
        w.insert_threads(pending)?;
        pending.clear();
    }
    Ok(())
}

/// The threads of workflow versions `ids` in progress, and the queued ones oldest first, as `w`
/// has them; the workflow's admissions are locked first, so they count one at a time whichever
/// process or machine makes them.
fn count(
    w: &mut Writer<'_>,
    ids: &HashSet<NodeId>,
) -> std::result::Result<(u32, Vec<ThreadId>), StoreError> {
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
    queued.sort();
    Ok((in_progress, queued))
}

/// The limits and the versions of the workflow of a new thread, for an [`Admitter`].
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
