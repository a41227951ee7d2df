//! The end of a step: the StepNode an agent returned checked, and the head moved to it by
//! compare-and-swap (the thread archived in the same transaction at `$END`).

use crate::cas::{NodeId, Value};
use crate::store::{Lease, Snapshot, Store};
use crate::supervise::{Result, StepError};
use crate::thread::chain::{Moderated, expand_output, load_moderated};
use crate::thread::{Status, StepOutput, ThreadError, ThreadId};
use crate::workflow::nodes::{START_NODE, STEP_NODE, StepNode};
use crate::workflow::{self, FinishReason, Jsonata, StepView};

/// Checks that `id` is a StepNode of this thread continuing `head` as `role`.
fn check_returned(
    snap: &Snapshot,
    id: NodeId,
    start: NodeId,
    head: NodeId,
    role: &str,
) -> Result<StepNode> {
    let node = snap.get(id)?.ok_or(StepError::Missing { id })?;
    if node.type_id != STEP_NODE {
        return Err(StepError::NotStep {
            id,
            type_id: node.type_id,
        });
    }
    let p = node.payload()?;
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
    Ok(step)
}

/// Checks the StepNode `id` an agent returned and moves the head to it (archiving the thread
/// when the moderator then says `$END`).
pub(super) fn conclude(
    store: &Store,
    thread: &ThreadId,
    m: Moderated,
    role: &str,
    id: NodeId,
    now_ms: u64,
    me: Option<&Lease>,
) -> Result<StepOutput> {
    let Moderated {
        chain,
        wf_id,
        wf,
        mut history,
        ..
    } = m;
    let head = chain.head();
    let snap = store.snapshot()?;
    let step = check_returned(&snap, id, chain.start_id, head, role)?;
    history.steps.push(StepView {
        role: role.to_string(),
        output: expand_output(&snap, step.output)?,
        detail: step.detail.map(NodeId::to_wire).unwrap_or_default(),
        agent: step.agent,
    });
    drop(snap);
    let next = workflow::next(&wf, &history, &Jsonata::default());
    let done = matches!(&next, Ok(d) if d.is_end());
    commit(
        store,
        &HeadMove {
            thread,
            expected: head,
            new: id,
            wf: wf_id,
            workflow_name: &wf.name,
            done,
            now_ms,
            me,
        },
    )?;
    tracing::info!(
        tag = "RBZJDXFA",
        thread = %thread,
        workflow = %wf_id,
        role,
        head = %id,
        done,
        "head moved"
    );
    Ok(StepOutput {
        workflow: wf_id.to_wire(),
        thread: thread.clone(),
        head: id.to_wire(),
        status: if done {
            Status::Completed
        } else {
            Status::Idle
        },
        current_role: next.ok().filter(|d| !d.is_end()).map(|d| d.role),
        done,
        last_error: None,
        running: None,
        paused_for: None,
    })
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
    conclude(store, thread, m, &decision.role, step, now_ms, None)
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
}

/// How often a head move the store's server failed for a passing reason (a lost connection, a
/// deadlock it broke) is tried again before the step fails: the agent's work is stored, and a
/// step run again would run the agent again.
const COMMIT_TRIES: u32 = 6;

/// Moves the head from `expected` to `new` by compare-and-swap, releases the lease and, when
/// `done`, archives the thread — all in one transaction, tried again while the store's server
/// fails for a passing reason. Before each new try it checks whether the failed one went
/// through after all (a connection lost after the server committed).
pub(super) fn commit(store: &Store, m: &HeadMove<'_>) -> Result<()> {
    let HeadMove {
        thread,
        expected,
        new,
        ..
    } = *m;
    let mut wait = std::time::Duration::from_millis(50);
    let mut tries = 1;
    loop {
        let e = match commit_once(store, m) {
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
            return Ok(());
        }
    }
}

/// One try of [`commit`].
fn commit_once(store: &Store, m: &HeadMove<'_>) -> Result<()> {
    let HeadMove {
        thread,
        expected,
        new,
        wf,
        workflow_name,
        done,
        now_ms,
        me,
    } = *m;
    let me = me.cloned();
    let t = thread.clone();
    let name = workflow_name.to_string();
    // Grouped: the head moves of a runner's threads share one durable commit.
    let outcome = store.write_grouped(move |w| {
        let thread = &t;
        let Some(mut rec) = w.thread(thread)? else {
            return Ok(Cas::Gone);
        };
        if rec.head != expected {
            return Ok(Cas::Moved(rec.head));
        }
        // A collection may have removed what the step adds (a node put before it began and
        // reached by no root then): the head never moves onto a missing node. What the old
        // head reaches is kept by every collection, so the walk stops at it and at the steps
        // and the start before it; so are schemas (every collection keeps them) and the
        // thread's workflow (its StartNode names it).
        if new != expected
            && let Some(missing) = w.first_missing(
                new,
                &[expected],
                &[
                    STEP_NODE,
                    START_NODE,
                    crate::cas::bootstrap::META,
                    workflow::nodes::WORKFLOW,
                    workflow::nodes::WORKFLOW_EXT,
                ],
            )?
        {
            return Ok(Cas::Missing(missing));
        }
        if let Some(l) = w.lease(thread)? {
            match &me {
                Some(me) if l.is_mine(me) => {
                    w.remove_lease(thread)?;
                }
                None if l.is_live() => return Ok(Cas::Busy(l.pid)),
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
        Ok(Cas::Done)
    })?;
    match outcome {
        Cas::Done => Ok(()),
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
