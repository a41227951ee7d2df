//! A thread's life besides its steps: promotion of queued threads as others finish, pause and
//! resume, removal, the round limit, and failed steps counted up to `maxRetries`.

use super::admission::{archive, limits_of};
use super::chain::WorkflowNames;
use super::ops::{Found, find};
use super::{Config, Result, ThreadError};
use crate::store::{Phase, StepFailure, Store, StoreError, ThreadRecord, Writer};
use crate::workflow::{FinishReason, ThreadId};
use std::collections::HashMap;

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
    let mut names = WorkflowNames::default();
    let mut by_name: HashMap<String, Vec<(ThreadId, bool)>> = HashMap::new();
    let phase: HashMap<&ThreadId, Phase> = states.iter().map(|(t, s)| (t, s.phase)).collect();
    for (t, r) in &threads {
        let Some(name) = names.of(&snap, r) else {
            continue;
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
            if store.thread_state(thread)?.phase == Phase::PausedForBudget {
                let name = super::ops::running_role(store, thread)?.0;
                if let Some(over) = super::budget::still_over(store, thread, &name)? {
                    return Err(over.into());
                }
            }
            store.write(|w| {
                let mut s = w.thread_state(thread)?;
                if s.phase.is_paused() {
                    s.phase = Phase::Ready;
                }
                s.failures = 0;
                w.set_thread_state(thread, &s)
            })?;
            Ok(())
        }
        Found::Finished(h) if h.reason == FinishReason::Failed => {
            let head = h
                .head
                .id()
                .ok_or_else(|| ThreadError::NodeNotFound(h.head.to_text()))?;
            let wf = h.workflow.id();
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
            && l.is_live()
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

/// Records a failed step of `thread`, a step of workflow `workflow` (its name; looked up when
/// `None`): one more consecutive failure and the error, and one more failed step in the
/// workflow's minute; at `max_retries` the thread is archived as failed. Returns whether it
/// failed for good.
///
/// In a file it goes in the store's group commit, so that in a runner it shares a commit with
/// the other threads' steps ([`Store::write_grouped_or_alone`]).
///
/// # Errors
/// Store failures of the failure's own transaction.
pub fn record_failure(
    store: &Store,
    thread: &ThreadId,
    workflow: Option<&str>,
    failure: StepFailure,
    max_retries: u32,
) -> Result<bool> {
    let name = match workflow {
        Some(n) => n.to_string(),
        // A step that failed before its moderator chose: its thread's workflow, if it reads.
        None => super::ops::running_role(store, thread)
            .map(|r| r.0)
            .unwrap_or_default(),
    };
    let t = thread.clone();
    Ok(store.write_grouped_or_alone(thread, move |w| {
        write_failure(w, &t, &name, failure, max_retries)
    })?)
}

/// [`record_failure`]'s writes, in `w`.
fn write_failure(
    w: &mut Writer<'_>,
    thread: &ThreadId,
    name: &str,
    failure: StepFailure,
    max_retries: u32,
) -> std::result::Result<bool, StoreError> {
    let Some(rec) = w.thread(thread)? else {
        return Ok(false);
    };
    let mut s = w.thread_state(thread)?;
    s.failures += 1;
    let now = failure.time_ms;
    w.count_failure(name, now);
    s.last_error = Some(failure);
    let failed = s.failures >= max_retries;
    w.set_thread_state(thread, &s)?;
    if failed {
        let wf = rec.workflow.unwrap_or(rec.head);
        archive(w, thread, &rec, wf, FinishReason::Failed, now)?;
    }
    Ok(failed)
}

/// Archives `thread`, of workflow `workflow` (its name), as failed with `failure` (its round
/// limit, say): a failure that fails it whatever its count.
///
/// # Errors
/// Store failures.
pub fn fail(store: &Store, thread: &ThreadId, workflow: &str, failure: StepFailure) -> Result<()> {
    record_failure(store, thread, Some(workflow), failure, 1).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::NodeId;
    use crate::store::ThreadState;

    /// A failure queued behind another thread's write that fails the group: nothing of the
    /// group is committed, and the failure is written again in a transaction of its own.
    #[test]
    fn a_failure_is_recorded_when_another_write_fails_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("uwf.redb")).unwrap();
        let t = ThreadId::parse("06H0AAKR0Y77DFRXGJMVWR0001").unwrap();
        let other = ThreadId::parse("06H0AAKR0Y77DFRXGJMVWR0002").unwrap();
        store
            .write(|w| {
                w.set_thread(
                    &t,
                    &ThreadRecord {
                        head: NodeId::parse("AAAAAAAAAAAAA").unwrap(),
                        workflow: None,
                        updated_ms: 1,
                    },
                )?;
                w.set_thread_state(&t, &ThreadState::default())
            })
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let failed = store.deferring(|| {
            // Queued and left for the next group: the failure's write leads it, behind this.
            store.write_grouped_then(
                &other,
                Vec::new(),
                |_| Err::<(), _>(StoreError::Internal("another write's error".into())),
                move |r| {
                    let _ = tx.send(r.is_err());
                },
            );
            record_failure(
                &store,
                &t,
                Some("wf"),
                StepFailure {
                    time_ms: 5,
                    agent: "a".into(),
                    message: "the agent's error".into(),
                },
                3,
            )
        });
        assert!(
            !failed.unwrap(),
            "the thread failed for good at its first failure"
        );
        assert!(rx.recv().unwrap(), "the other write's group did not fail");
        let s = store.thread_state(&t).unwrap();
        assert_eq!(s.failures, 1);
        assert_eq!(s.last_error.unwrap().message, "the agent's error");
    }
}
