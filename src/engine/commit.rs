//! The end of a step: the StepNode an agent returned checked, and the head moved to it by
//! compare-and-swap (the thread archived in the same transaction at `$END`).

use crate::cas::{NodeId, Value};
use crate::store::{Lease, Snapshot, Store};
use crate::supervise::{Result, StepError};
use crate::thread::chain::{Moderated, StepRecord, load_moderated};
use crate::thread::{Status, StepOutput, StepWrite, ThreadError, ThreadId};
use crate::workflow::nodes::{START_NODE, STEP_NODE, StepNode};
use crate::workflow::{self, FinishReason, Jsonata, StepView};
use std::sync::Arc;

/// A snapshot of the store taken when first needed: a step whose nodes are all among its held
/// writes reads nothing.
struct LazySnapshot<'a> {
    store: &'a Store,
    snap: std::cell::OnceCell<Snapshot>,
}

impl LazySnapshot<'_> {
    fn get(&self) -> Result<&Snapshot> {
        if let Some(s) = self.snap.get() {
            return Ok(s);
        }
        let s = self.store.snapshot()?;
        Ok(self.snap.get_or_init(|| s))
    }
}

/// Node `id`'s type, payload and timestamp: among the step's held writes (its payload among
/// `values` when the writer kept it as a value), or stored.
fn node_of(
    snap: &LazySnapshot<'_>,
    held: Option<&StepWrite>,
    values: &mut Vec<(NodeId, Value)>,
    id: NodeId,
) -> Result<Option<(NodeId, Value, u64)>> {
    if let Some((n, now)) = held.and_then(|h| h.node(id)) {
        if let Some(at) = values.iter().position(|(v, _)| *v == id) {
            return Ok(Some((n.type_id, values.swap_remove(at).1, now)));
        }
        let payload = crate::cas::cbor::decode(&n.payload_cbor)
            .map_err(|_| crate::store::StoreError::Corrupt(id))
            .map_err(ThreadError::from)?;
        return Ok(Some((n.type_id, payload, now)));
    }
    Ok(match snap.get()?.get(id)? {
        Some(n) => Some((n.type_id, n.payload()?, n.timestamp)),
        None => None,
    })
}

/// Checks that `id` is a StepNode of this thread continuing `head` as `role`.
fn check_returned(
    snap: &LazySnapshot<'_>,
    held: Option<&StepWrite>,
    values: &mut Vec<(NodeId, Value)>,
    id: NodeId,
    (start, head): (NodeId, NodeId),
    role: &str,
) -> Result<(StepNode, u64)> {
    let (type_id, p, timestamp) =
        node_of(snap, held, values, id)?.ok_or(StepError::Missing { id })?;
    if type_id != STEP_NODE {
        return Err(StepError::NotStep { id, type_id });
    }
    let raw = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let step = match StepNode::from_value(&p) {
        Ok(s) if s.start == start => s,
        _ => {
            return Err(StepError::WrongThread {
                id,
                found: raw("start"),
                expected: start,
            });
        }
    };
    let want_prev = (head != start).then_some(head);
    if step.prev != want_prev {
        let json = |r: Option<NodeId>| r.map_or(Value::Null, |x| Value::str(x.to_wire())).to_json();
        return Err(StepError::WrongPrev {
            id,
            found: json(step.prev),
            expected: json(want_prev),
        });
    }
    if step.role != role {
        return Err(StepError::WrongRole {
            id,
            found: step.role,
            expected: role.to_string(),
        });
    }
    Ok((step, timestamp))
}

/// Checks the StepNode `id` an agent returned and moves the head to it (archiving the thread
/// when the moderator then says `$END`). Gives back the thread as the moderator sees it at the
/// new head, unless it ended. `held`, the step's writes an agent in process left for it, go in
/// the head move's transaction.
#[allow(clippy::too_many_arguments)]
pub(super) fn conclude(
    store: &Store,
    thread: &ThreadId,
    m: Moderated,
    role: &str,
    id: NodeId,
    now_ms: u64,
    me: Option<&Lease>,
    keep_lease: bool,
    held: Option<StepWrite>,
) -> Result<(StepOutput, Option<Moderated>)> {
    let c = concluding(store, thread, m, role, id, now_ms, me, keep_lease, held)?;
    let fresh = commit(store, &c.head_move())?;
    Ok(c.concluded(store, fresh))
}

/// A step checked and ready for its head move: what the move writes, and what the step gives
/// back once it has committed ([`Concluding::concluded`]).
pub(super) struct Concluding {
    thread: ThreadId,
    m: Moderated,
    role: String,
    id: NodeId,
    step: StepNode,
    timestamp: u64,
    /// The moderator says `$END` after this step.
    done: bool,
    /// The role the moderator picks next, if any.
    next_role: Option<String>,
    now_ms: u64,
    me: Option<Lease>,
    keep_lease: bool,
    /// Shared with each try of the head move's transaction, which owns what it writes.
    held: Option<Arc<StepWrite>>,
}

/// The first part of [`conclude`]: the StepNode `id` checked, the history with its output, the
/// moderator's next decision; nothing moved yet.
// Long: the check of what the agent returned, kept if refused, then the moderator on it.
#[allow(clippy::too_many_arguments)]
pub(super) fn concluding(
    store: &Store,
    thread: &ThreadId,
    m: Moderated,
    role: &str,
    id: NodeId,
    now_ms: u64,
    me: Option<&Lease>,
    keep_lease: bool,
    mut held: Option<StepWrite>,
) -> Result<Concluding> {
    let mut m = m;
    let head = m.chain.head();
    let snap = LazySnapshot {
        store,
        snap: std::cell::OnceCell::new(),
    };
    let mut values = held
        .as_mut()
        .map(StepWrite::take_values)
        .unwrap_or_default();
    let checked = check_returned(
        &snap,
        held.as_ref(),
        &mut values,
        id,
        (m.chain.start_id, head),
        role,
    );
    let (step, timestamp) = match (checked, &held) {
        (Ok(c), _) => c,
        (Err(e), Some(h)) => {
            // What the agent made is kept, as an agent program's nodes are.
            drop(snap);
            let h = h.clone();
            store.write_grouped(move |w| h.write(w).map(|_| ()))?;
            return Err(e);
        }
        (Err(e), None) => return Err(e),
    };
    let output = match step.output {
        Some(o) => match node_of(&snap, held.as_ref(), &mut values, o)? {
            Some((_, v, _)) => v,
            None => Value::Object(crate::cas::value::Map::default()),
        },
        None => Value::Object(crate::cas::value::Map::default()),
    };
    m.history.steps.push(StepView {
        role: role.to_string(),
        output,
        detail: step.detail.map(NodeId::to_wire).unwrap_or_default(),
        agent: step.agent.clone(),
    });
    drop(snap);
    let next = workflow::next(&m.wf, &m.history, &Jsonata::default());
    let done = matches!(&next, Ok(d) if d.is_end());
    Ok(Concluding {
        thread: thread.clone(),
        m,
        role: role.to_string(),
        id,
        step,
        timestamp,
        done,
        next_role: next.ok().filter(|d| !d.is_end()).map(|d| d.role),
        now_ms,
        me: me.cloned(),
        keep_lease,
        held: held.map(Arc::new),
    })
}

impl Concluding {
    /// The head move that ends the step.
    pub(super) fn head_move(&self) -> HeadMove<'_> {
        HeadMove {
            thread: &self.thread,
            expected: self.m.chain.head(),
            new: self.id,
            wf: self.m.wf_id,
            workflow_name: &self.m.wf.name,
            done: self.done,
            now_ms: self.now_ms,
            me: self.me.as_ref(),
            keep_lease: self.keep_lease,
            write: self.held.as_ref(),
            start: self.m.chain.start_id,
        }
    }

    /// The step's output once its head move has committed (`fresh`: its StepNode was new to
    /// the store), and the thread as the moderator sees it at the new head, unless it ended.
    pub(super) fn concluded(self, store: &Store, fresh: bool) -> (StepOutput, Option<Moderated>) {
        let Concluding {
            thread,
            m,
            role,
            id,
            step,
            timestamp,
            done,
            next_role,
            ..
        } = self;
        let Moderated {
            mut chain,
            wf_id,
            wf,
            mut history,
            partial,
        } = m;
        tracing::info!(
            tag = "RBZJDXFA",
            thread = %thread,
            workflow = %wf_id,
            role,
            head = %id,
            done,
            "head moved"
        );
        // A StepNode stored before (threads that start alike and step in the same millisecond
        // make the same nodes, and share them) keeps the time it was first stored: read it, so
        // that the thread at its new head is what the store holds.
        let timestamp = match (done, fresh) {
            (true, _) => None,
            (false, true) => Some(timestamp),
            (false, false) => store.get(id).ok().flatten().map(|n| n.timestamp),
        };
        let at_new_head = timestamp.map(|timestamp| {
            // A partial chain holds the last step only, as `load_moderated` reads one.
            if partial {
                chain.steps.clear();
                history.steps.drain(..history.steps.len() - 1);
            }
            // The chain is for the memo, which keeps no payloads.
            chain.steps.push(StepRecord {
                id,
                node: step,
                payload: None,
                timestamp,
            });
            Moderated {
                chain,
                wf_id,
                wf,
                history,
                partial,
            }
        });
        let output = StepOutput {
            workflow: wf_id.to_wire(),
            thread,
            head: id.to_wire(),
            status: if done {
                Status::Completed
            } else {
                Status::Idle
            },
            current_role: next_role,
            done,
            last_error: None,
            running: None,
            paused_for: None,
        };
        (output, at_new_head)
    }
}

/// Moves the head of an active thread to `step`, a StepNode written for its next role (by
/// [`crate::thread::submit`], say): the in-process form of a step, for agents that run inside
/// the caller. The same checks and the same compare-and-swap as a supervised step; refused while
/// another process holds the thread's lease.
///
/// # Errors
/// As a supervised step, for the checks of the returned node.
pub fn advance(store: &Store, thread: &ThreadId, step: NodeId, now_ms: u64) -> Result<StepOutput> {
    let head = crate::thread::ops::active(store, thread)?.head;
    let m = load_moderated(store, head)?;
    let decision = workflow::next(&m.wf, &m.history, &Jsonata::default())?;
    conclude(
        store,
        thread,
        m,
        &decision.role,
        step,
        now_ms,
        None,
        false,
        None,
    )
    .map(|(o, _)| o)
}

/// What the compare-and-swap found.
enum Cas {
    Done,
    Gone,
    Moved(NodeId),
    Busy(u32),
    Missing(NodeId),
}

/// A head move: the thread's head from `expected` to `new` (a step of workflow `wf`, whose
/// name `workflow_name` its step counts under), the thread archived when `done`, the lease
/// released when it is `me`'s.
#[derive(Clone, Copy)]
pub(super) struct HeadMove<'a> {
    pub thread: &'a ThreadId,
    pub expected: NodeId,
    pub new: NodeId,
    pub wf: NodeId,
    pub workflow_name: &'a str,
    pub done: bool,
    pub now_ms: u64,
    pub me: Option<&'a Lease>,
    /// Keep `me` (renewed from `now_ms`) rather than release it, unless the thread ends.
    pub keep_lease: bool,
    /// The step's nodes and calls, written in the same transaction.
    pub write: Option<&'a Arc<StepWrite>>,
    /// The thread's StartNode.
    pub start: NodeId,
}

/// How often a head move the store's server failed for a passing reason (a lost connection, a
/// deadlock it broke) is tried again before the step fails: the agent's work is stored, and a
/// step run again would run the agent again.
const COMMIT_TRIES: u32 = 6;

/// Moves the head from `expected` to `new` by compare-and-swap, releases the lease and, when
/// `done`, archives the thread — all in one transaction, tried again while the store's server
/// fails for a passing reason. Before each new try it checks whether the failed one went
/// through after all (a connection lost after the server committed). Returns whether the
/// StepNode of `m.write` was new to the store (`true` without one).
pub(super) fn commit(store: &Store, m: &HeadMove<'_>) -> Result<bool> {
    commit_after(store, m, commit_once(store, m))
}

/// [`commit`] that does not wait for the move: it goes in the store's group commit and `then`
/// gets its outcome on the committing thread once the group has committed ([`Moved`], which
/// [`commit_after`] completes). `then` must not wait for the store.
pub(super) fn commit_then(
    store: &Store,
    m: &HeadMove<'_>,
    then: impl FnOnce(Moved) + Send + 'static,
) {
    let (thread, nodes, job) = move_job(m);
    store.write_grouped_then(&thread, nodes, job, move |r| then(Moved(r)));
}

/// The outcome of a head move's transaction, as the group commit gave it.
pub(crate) struct Moved(std::result::Result<(Cas, bool), crate::store::StoreError>);

impl Moved {
    /// The move went through with a StepNode new to the store: completing the step reads and
    /// writes nothing more.
    pub(crate) fn went_through_fresh(&self) -> bool {
        matches!(self.0, Ok((Cas::Done, true)))
    }

    /// The move that did not come through: the group's transaction failed.
    pub(crate) fn lost() -> Moved {
        Moved(Err(crate::store::StoreError::Internal(
            "a head move was dropped before its commit".into(),
        )))
    }
}

/// [`commit`] from the outcome of its first try, `first`: tried again while the store's server
/// failed for a passing reason.
pub(super) fn commit_after(store: &Store, m: &HeadMove<'_>, first: Result<bool>) -> Result<bool> {
    let HeadMove {
        thread,
        expected,
        new,
        ..
    } = *m;
    let mut wait = std::time::Duration::from_millis(50);
    let mut tries = 1;
    let mut last = first;
    loop {
        let e = match last {
            Err(StepError::Thread(ThreadError::Store(
                e @ crate::store::StoreError::Server { retry: true, .. },
            ))) if tries < COMMIT_TRIES => e,
            r => return r,
        };
        tracing::warn!(
            tag = "Q3MZ7T2K",
            thread = %thread,
            head = %new,
            tries,
            "moving the head failed, trying again: {e}"
        );
        std::thread::sleep(wait);
        wait *= 2;
        tries += 1;
        let landed = match store.thread(thread) {
            Ok(Some(rec)) => rec.head == new && new != expected,
            Ok(None) => store
                .history_of(thread)
                .is_ok_and(|h| h.is_some_and(|h| h.head.id() == Some(new))),
            Err(_) => false,
        };
        if landed {
            return Ok(false);
        }
        last = commit_once(store, m);
    }
}

/// [`Moved`] as [`commit_once`] gives it.
pub(super) fn moved_result(m: &HeadMove<'_>, moved: Moved) -> Result<bool> {
    let outcome = moved.0.map_err(ThreadError::from)?;
    cas_result(m, outcome)
}

/// One try of [`commit`].
fn commit_once(store: &Store, m: &HeadMove<'_>) -> Result<bool> {
    let (thread, nodes, job) = move_job(m);
    // Grouped: the head moves of a runner's threads share one durable commit, which reads
    // ahead whether the nodes they put are stored.
    let outcome = store
        .write_grouped_putting(&thread, nodes, job)
        .map_err(ThreadError::from)?;
    cas_result(m, outcome)
}

/// The transaction of a head move: its thread, the nodes it puts, and the compare-and-swap.
// Long: the compare-and-swap in one transaction, each outcome a branch of the one closure.
#[allow(clippy::type_complexity)] // The group commit's closure, as it takes it.
fn move_job(
    m: &HeadMove<'_>,
) -> (
    ThreadId,
    Vec<NodeId>,
    impl FnOnce(
        &mut crate::store::Writer<'_>,
    ) -> std::result::Result<(Cas, bool), crate::store::StoreError>
    + Send
    + 'static,
) {
    let HeadMove {
        thread,
        expected,
        new,
        wf,
        workflow_name,
        done,
        now_ms,
        me,
        keep_lease,
        write,
        start,
    } = *m;
    let me = me.cloned();
    let t = thread.clone();
    let write = write.cloned();
    let name = workflow_name.to_string();
    let putting = write
        .as_ref()
        .map_or_else(Vec::new, |sw| sw.nodes().iter().map(|n| n.id).collect());
    let job = move |w: &mut crate::store::Writer<'_>| {
        let thread = &t;
        // What is stored stays so until the commit; then the thread (its lock and rows, with
        // that hold, in one round trip on a server), then the step's nodes, stored whatever
        // the compare-and-swap finds.
        w.hold_nodes()?;
        let rec = w.thread(thread)?;
        let fresh = match &write {
            Some(sw) => sw.write(w)?,
            None => true,
        };
        let Some(mut rec) = rec else {
            return Ok((Cas::Gone, fresh));
        };
        if rec.head != expected {
            return Ok((Cas::Moved(rec.head), fresh));
        }
        // A collection may have removed what the step adds (a node put before it began and
        // reached by no root then): the head never moves onto a missing node. What the old
        // head reaches is kept by every collection, so the walk stops at it and at the steps
        // and the start before it; so are schemas (every collection keeps them) and the
        // thread's workflow (its StartNode names it).
        let put = write.as_deref().map_or(&[][..], StepWrite::nodes);
        if new != expected
            && let Some(missing) = w.first_missing_beyond(
                new,
                put,
                &[expected, start],
                &[
                    STEP_NODE,
                    START_NODE,
                    crate::cas::bootstrap::META,
                    workflow::nodes::WORKFLOW,
                    workflow::nodes::WORKFLOW_EXT,
                ],
            )?
        {
            return Ok((Cas::Missing(missing), fresh));
        }
        if let Some(l) = w.lease(thread)? {
            match &me {
                Some(me) if l.is_mine(me) => {
                    if keep_lease && !done {
                        w.set_lease(
                            thread,
                            &Lease {
                                since_ms: now_ms,
                                ..me.clone()
                            },
                        )?;
                    } else {
                        w.remove_lease(thread)?;
                    }
                }
                None if l.is_live() => return Ok((Cas::Busy(l.pid), fresh)),
                _ => {}
            }
        }
        if done {
            rec.head = new;
            w.archive_thread(thread, &rec, wf, FinishReason::Completed, now_ms)?;
        } else {
            // A step that went through ends the run of failures.
            let mut state = w.thread_state(thread)?;
            if state.failures > 0 {
                state.failures = 0;
                w.set_thread_state(thread, &state)?;
            }
            rec.head = new;
            rec.workflow = Some(rec.workflow.unwrap_or(wf));
            rec.updated_ms = now_ms;
            w.set_thread(thread, &rec)?;
        }
        // A step, for the runner's dashboard (not the archiving of a thread already at its end).
        if new != expected {
            w.count_step(&name, now_ms);
        }
        Ok((Cas::Done, fresh))
    };
    (thread.clone(), putting, job)
}

/// What the compare-and-swap of `m` found, as the step's result: whether the StepNode was new.
fn cas_result(m: &HeadMove<'_>, (outcome, fresh): (Cas, bool)) -> Result<bool> {
    let HeadMove {
        thread,
        expected,
        new,
        ..
    } = *m;
    match outcome {
        Cas::Done => Ok(fresh),
        Cas::Busy(pid) => Err(StepError::Busy {
            thread: thread.to_string(),
            pid,
        }),
        Cas::Moved(found) => Err(StepError::Advanced {
            thread: thread.to_string(),
            expected,
            found,
            kept: new,
        }),
        Cas::Missing(missing) => Err(StepError::Collected {
            thread: thread.to_string(),
            missing,
            kept: new,
        }),
        Cas::Gone => Err(StepError::Archived {
            thread: thread.to_string(),
            kept: new,
        }),
    }
}
