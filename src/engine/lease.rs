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
    /// thread's state found in the same transaction.
    ///
    /// # Errors
    /// [`StepError::Busy`] while another live process holds it; [`ThreadError::NotActive`] or
    /// [`ThreadError::NotFound`] for a thread that is not active.
    pub(crate) fn acquire(
        store: &'s Store,
        thread: &ThreadId,
        me: Lease,
    ) -> Result<(LeaseGuard<'s>, NodeId, ThreadState), StepError> {
        let (t, lease) = (thread.clone(), me.clone());
        let found = store
            .write_grouped_for(thread, move |w| {
                let (thread, me) = (&t, &lease);
                let Some(rec) = w.thread(thread)? else {
                    return Ok(Err(Held::Gone));
                };
                if let Some(l) = w.lease(thread)?
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
                match state.phase {
                    Phase::Queued => return Ok(Err(Held::Queued)),
                    Phase::Paused | Phase::PausedForBudget => return Ok(Err(Held::Paused)),
                    Phase::Ready => {}
                }
                w.set_lease(thread, me)?;
                Ok(Ok((rec.head, state)))
            })
            .map_err(ThreadError::from)?;
        match found {
            Ok((head, state)) => Ok((
                LeaseGuard {
                    store,
                    thread: thread.clone(),
                    me,
                    armed: true,
                },
                head,
                state,
            )),
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

impl Drop for LeaseGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // A lease left behind by a failure here is taken over later: its owner is gone.
        let (thread, me) = (self.thread.clone(), self.me.clone());
        let _ = self.store.write_grouped_for(&self.thread, move |w| {
            if let Some(l) = w.lease(&thread)?
                && l.is_mine(&me)
            {
                w.remove_lease(&thread)?;
            }
            Ok(())
        });
    }
}
