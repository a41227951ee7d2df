//! A step's lease: taken in the transaction that reads the head, given back by a guard however
//! the step ends.

use super::StepError;
use crate::cas::NodeId;
use crate::store::{Lease, Phase, Store, ThreadState};
use crate::thread::{ThreadError, ThreadId};

/// Why a lease was not taken.
enum Held {
    /// A live process holds it.
    Busy(u32),
    /// The thread waits under its workflow's limit.
    Queued,
    /// The thread is paused.
    Paused,
    /// The thread is not active.
    Gone,
}

/// A thread's lease, held by this process until the guard is dropped or the head move that
/// releases it commits ([`LeaseGuard::disarm`]).
#[derive(Debug)]
pub(crate) struct LeaseGuard<'s> {
    store: &'s Store,
    thread: ThreadId,
    me: Lease,
    armed: bool,
}

impl<'s> LeaseGuard<'s> {
    /// Takes the lease of the active thread `thread`; returns the guard, and the head and the
    /// thread's state found in the same transaction. With `kept`, a lease this process kept
    /// from its last step of the thread ([`super::StepOptions::keep_lease`]) is taken as it
    /// is, by reads alone (or from `leased`, the rows the caller read), when the thread is
    /// still ready; a kept lease of a thread that is not is given back.
    ///
    /// # Errors
    /// [`StepError::Busy`] while another live process holds it; [`ThreadError::NotActive`] or
    /// [`ThreadError::NotFound`] for a thread that is not active.
    pub(crate) fn acquire(
        store: &'s Store,
        thread: &ThreadId,
        me: Lease,
        kept: bool,
        leased: Option<crate::store::LeasedThread>,
    ) -> Result<(LeaseGuard<'s>, NodeId, ThreadState), StepError> {
        let guard = |me| LeaseGuard {
            store,
            thread: thread.clone(),
            me,
            armed: true,
        };
        if kept && let Some((head, state)) = still_held(store, thread, &me, leased)? {
            return Ok((guard(me), head, state));
        }
        let (t, lease) = (thread.clone(), me.clone());
        let found = store
            .write_grouped_for(thread, move |w| {
                let (thread, me) = (&t, &lease);
                let Some(rec) = w.thread(thread)? else {
                    return Ok(Err(Held::Gone));
                };
                let held = w.lease(thread)?;
                if let Some(l) = &held
                    && !l.is_mine(me)
                {
                    if l.is_live() {
                        return Ok(Err(Held::Busy(l.pid)));
                    }
                    tracing::warn!(
                        tag = "NVEE459T",
                        thread = %thread,
                        owner = l.pid,
                        "took over the step lease of a process that is gone"
                    );
                }
                let state = w.thread_state(thread)?;
                let not = match state.phase {
                    Phase::Queued => Some(Held::Queued),
                    Phase::Paused | Phase::PausedForBudget => Some(Held::Paused),
                    Phase::Ready => None,
                };
                if let Some(not) = not {
                    // A lease kept from this process's last step is given back.
                    if held.is_some_and(|l| l.is_mine(me)) {
                        w.remove_lease(thread)?;
                    }
                    return Ok(Err(not));
                }
                w.set_lease(thread, me)?;
                Ok(Ok((rec.head, state)))
            })
            .map_err(ThreadError::from)?;
        match found {
            Ok((head, state)) => Ok((guard(me), head, state)),
            Err(Held::Busy(pid)) => Err(StepError::Busy {
                thread: thread.to_string(),
                pid,
            }),
            Err(Held::Queued) => Err(StepError::Queued {
                thread: thread.to_string(),
            }),
            Err(Held::Paused) => Err(StepError::Paused {
                thread: thread.to_string(),
            }),
            Err(Held::Gone) => Err(match store.history_of(thread).map_err(ThreadError::from)? {
                Some(h) => ThreadError::NotActive {
                    thread: thread.to_string(),
                    reason: h.reason.to_string(),
                },
                None => ThreadError::NotFound(thread.to_string()),
            }
            .into()),
        }
    }

    /// The lease this guard holds.
    pub(crate) fn lease(&self) -> &Lease {
        &self.me
    }

    /// The lease was released by a committed head move: nothing left to do on drop.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

/// The head and state of `thread` when this process (`me`) holds its lease and it is ready,
/// read without a write.
fn still_held(
    store: &Store,
    thread: &ThreadId,
    me: &Lease,
    leased: Option<crate::store::LeasedThread>,
) -> Result<Option<(NodeId, ThreadState)>, StepError> {
    let (lease, rec, state) = match leased {
        Some(l) => l,
        None => store.leased_thread(thread).map_err(ThreadError::from)?,
    };
    Ok(match (lease, rec) {
        (Some(l), Some(rec)) if l.is_mine(me) && state.phase == Phase::Ready => {
            Some((rec.head, state))
        }
        _ => None,
    })
}

/// Gives back the leases this process (`pid`) kept for the next steps of `threads`
/// ([`super::StepOptions::keep_lease`]) and will not take: a runner that stops.
///
/// # Errors
/// A store failure.
pub(crate) fn release_kept(
    store: &Store,
    threads: &[ThreadId],
    pid: u32,
) -> Result<(), crate::store::StoreError> {
    if threads.is_empty() {
        return Ok(());
    }
    let me = Lease::of(pid, 0);
    let threads = threads.to_vec();
    store.write(move |w| {
        for t in &threads {
            if w.lease(t)?.is_some_and(|l| l.is_mine(&me)) {
                w.remove_lease(t)?;
            }
        }
        Ok(())
    })
}

/// A lease taken by a step that goes on elsewhere ([`LeaseGuard::into_held`]): given back by
/// [`HeldLease::release`] unless the step's head move released or kept it.
pub(crate) struct HeldLease {
    thread: ThreadId,
    me: Lease,
}

impl HeldLease {
    /// Gives the lease back, if this process still holds it.
    pub(crate) fn release(self, store: &Store) {
        // A lease left behind by a failure here is taken over later: its owner is gone.
        let HeldLease { thread, me } = self;
        let _ = store.write_grouped_for(&thread.clone(), move |w| {
            if let Some(l) = w.lease(&thread)?
                && l.is_mine(&me)
            {
                w.remove_lease(&thread)?;
            }
            Ok(())
        });
    }
}

impl LeaseGuard<'_> {
    /// The lease, to be given back by whoever completes the step.
    pub(crate) fn into_held(mut self) -> HeldLease {
        self.armed = false;
        HeldLease {
            thread: self.thread.clone(),
            me: self.me.clone(),
        }
    }
}

impl Drop for LeaseGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            HeldLease {
                thread: self.thread.clone(),
                me: self.me.clone(),
            }
            .release(self.store);
        }
    }
}
