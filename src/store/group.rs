//! Group commit: write transactions of many threads of one process, run one after another in a
//! single transaction of the backend and made durable by one commit.
//!
//! A caller queues its closure; if no other thread is committing, it becomes the leader and
//! runs every queued closure in one transaction, commits, hands each caller its result, and
//! goes on while closures keep arriving. Each closure sees the writes of those before it, as
//! separate transactions would, so a compare-and-swap stays one. A closure must fail only for
//! a store error, before it writes: any error aborts the whole group, and every caller of it
//! gets an error (its own, or one naming the failure).

use super::error::{Result, StoreError};
use super::handle::Store;
use super::queue::{Job, Output, Queued, Reply, Resign};
use super::writer::Writer;
use crate::cas::NodeId;
use crate::model::ThreadId;
use std::any::Any;
use std::sync::mpsc::sync_channel;

thread_local! {
    /// Whether this thread is inside [`Store::deferring`].
    static DEFERRING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Store {
    /// Runs `f` in a write transaction that may be shared with other threads' grouped writes
    /// and commits it; returns what `f` returned.
    ///
    /// # Errors
    /// The error of `f`, or of another closure of the same group (nothing of the group is
    /// committed then), or a redb failure.
    pub fn write_grouped<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.queue_write(None, Vec::new(), f)
    }

    /// [`Store::write_grouped`] for a write about thread `thread`: a group takes the locks and
    /// reads the rows of all its threads at once, in one order (on a server, one round trip,
    /// and no deadlock between groups).
    ///
    /// # Errors
    /// As [`Store::write_grouped`].
    pub fn write_grouped_for<T: Send + 'static>(
        &self,
        thread: &ThreadId,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.queue_write(Some(thread.clone()), Vec::new(), f)
    }

    /// [`Store::write_grouped_for`] for a write that can run again (`f` is cloned): where
    /// write transactions run one at a time (a file) it joins the group commit, and since a
    /// failed group commits nothing of it, it runs again in a transaction of its own when the
    /// group fails; where they run side by side (a server) it runs in its own transaction,
    /// beside the group, which there is faster.
    ///
    /// # Errors
    /// The error of `f`, or a store failure, of its own transaction.
    pub(crate) fn write_grouped_or_alone<T: Send + 'static>(
        &self,
        thread: &ThreadId,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T> + Clone + Send + 'static,
    ) -> Result<T> {
        if self.backend.one_writer()
            && let Ok(t) = self.write_grouped_for(thread, f.clone())
        {
            return Ok(t);
        }
        self.write(f)
    }

    /// [`Store::write_grouped_for`] for a write that puts nodes `nodes`: a group reads ahead
    /// whether all its writes' nodes are stored, at once (on a server, in the round trip of its
    /// threads' locks, and the inserts go with the commit).
    ///
    /// # Errors
    /// As [`Store::write_grouped`].
    pub fn write_grouped_putting<T: Send + 'static>(
        &self,
        thread: &ThreadId,
        nodes: Vec<NodeId>,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.queue_write(Some(thread.clone()), nodes, f)
    }

    /// [`Store::write_grouped_putting`] that does not wait for the commit: `then` gets what
    /// `f` returned (or the group's error) once the group has committed, on the thread that
    /// committed it, which may be this one. `then` must not wait for the store: it runs where
    /// the group's next commit waits for it.
    pub(crate) fn write_grouped_then<T: Send + 'static>(
        &self,
        thread: &ThreadId,
        nodes: Vec<NodeId>,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T> + Send + 'static,
        then: impl FnOnce(Result<T>) + Send + 'static,
    ) {
        let job: Job = Box::new(move |w| f(w).map(|t| Box::new(t) as Box<dyn Any + Send>));
        let reply = Reply::Then(Box::new(move |out: Output| {
            then(out.map(|b| *b.downcast::<T>().expect("the closure's own type")));
        }));
        self.queue(Some(thread.clone()), nodes, job, reply);
    }

    fn queue_write<T: Send + 'static>(
        &self,
        thread: Option<ThreadId>,
        nodes: Vec<NodeId>,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = sync_channel(1);
        let job: Job = Box::new(move |w| f(w).map(|t| Box::new(t) as Box<dyn Any + Send>));
        self.queue(thread, nodes, job, Reply::Wait(tx));
        let out = rx
            .recv()
            .map_err(|_| StoreError::Internal("a grouped write was dropped".into()))?;
        out.map(|b| *b.downcast::<T>().expect("the closure's own type"))
    }

    /// Queues a write; with no group running, this thread runs groups until none is queued.
    fn queue(&self, thread: Option<ThreadId>, nodes: Vec<NodeId>, job: Job, to: Reply) {
        // A write whose caller does not wait for it, queued inside `deferring`: left for the
        // group that the end of `deferring` (or another writer) runs.
        let defer = matches!(to, Reply::Then(_)) && DEFERRING.get();
        let lead = {
            let mut s = self.group.state.lock().expect("group lock");
            s.queue.push(Queued {
                job,
                thread,
                nodes,
                to,
            });
            !defer && !std::mem::replace(&mut s.leading, true)
        };
        if lead {
            self.lead();
        }
    }

    /// Runs `f`, in which this thread's writes that do not wait for their commit
    /// ([`Store::write_grouped_then`]) start no group of their own; then runs a group of what
    /// is queued unless one runs already. A caller that queues many such writes one after
    /// another (a runner's batch of steps) so commits them together.
    pub(crate) fn deferring<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Reset(bool);
        impl Drop for Reset {
            fn drop(&mut self) {
                DEFERRING.set(self.0);
            }
        }
        let reset = Reset(DEFERRING.replace(true));
        let r = f();
        drop(reset);
        let lead = {
            let mut s = self.group.state.lock().expect("group lock");
            !s.queue.is_empty() && !std::mem::replace(&mut s.leading, true)
        };
        if lead {
            self.lead();
        }
        r
    }

    /// Runs groups of the queued writes until none is queued (this thread leads).
    fn lead(&self) {
        // Should a closure panic, the next caller leads: the flag does not stay set.
        let resign = Resign(&self.group);
        loop {
            let batch = {
                let mut s = self.group.state.lock().expect("group lock");
                if s.queue.is_empty() {
                    s.leading = false;
                    break;
                }
                std::mem::take(&mut s.queue)
            };
            self.run_group(batch);
        }
        #[allow(clippy::mem_forget)]
        // The guard resigns only on a panic; here the leader left in order.
        std::mem::forget(resign);
    }

    fn run_group(&self, batch: Vec<Queued>) {
        let n = batch.len();
        let (mut jobs, mut threads, mut nodes, mut senders) = (
            Vec::with_capacity(n),
            Vec::new(),
            Vec::new(),
            Vec::with_capacity(n),
        );
        for q in batch {
            jobs.push(q.job);
            threads.extend(q.thread);
            nodes.extend(q.nodes);
            senders.push(q.to);
        }
        let mut failed: Option<(usize, StoreError)> = None;
        let r = self.guard(|| {
            self.transact(|w| {
                if !threads.is_empty() || !nodes.is_empty() {
                    w.prefetch(&threads, &nodes)?;
                }
                let mut outs = Vec::with_capacity(n);
                for (i, job) in jobs.into_iter().enumerate() {
                    match job(w) {
                        Ok(v) => outs.push(v),
                        Err(e) => {
                            failed = Some((i, e));
                            return Err(StoreError::Internal("a grouped write failed".into()));
                        }
                    }
                }
                Ok(outs)
            })
        });
        let r = match (r, failed.is_some()) {
            (Ok(outs), _) => Ok(Some(outs)),
            (Err(_), true) => Ok(None),
            (Err(e), false) => Err(e),
        };
        let (culprit, error) = match r {
            Ok(Some(outs)) => {
                for (s, v) in senders.into_iter().zip(outs) {
                    s.send(Ok(v));
                }
                return;
            }
            Ok(None) => match failed {
                Some((i, e)) => (Some(i), e),
                None => (None, StoreError::Internal("a grouped write failed".into())),
            },
            Err(e) => (None, e),
        };
        let msg = error.to_string();
        // A lost connection or a transaction the server aborted fails every write of the
        // group alike: each may be tried again.
        let server = match &error {
            StoreError::Server {
                server,
                message,
                retry,
            } => Some((server.clone(), message.clone(), *retry)),
            _ => None,
        };
        let mut error = Some(error);
        for (j, s) in senders.into_iter().enumerate() {
            let own = culprit == Some(j) || (culprit.is_none() && j == 0);
            let e = match (own, error.take()) {
                (true, Some(e)) => e,
                (_, e) => {
                    error = e;
                    match &server {
                        Some((server, message, retry)) => StoreError::Server {
                            server: server.clone(),
                            message: message.clone(),
                            retry: *retry,
                        },
                        None => StoreError::Internal(format!(
                            "a write grouped with this one failed: {msg}"
                        )),
                    }
                }
            };
            s.send(Err(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ThreadId;
    use crate::store::ThreadState;
    use std::sync::Arc;

    fn id(i: usize) -> ThreadId {
        ThreadId::parse(&format!("06H0AAKR0Y77DFRXGJMVWR{i:04}")).unwrap()
    }

    #[test]
    fn writes_of_many_threads_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("uwf.redb")).unwrap());
        let handles: Vec<_> = (0..32)
            .map(|i| {
                let store = store.clone();
                std::thread::spawn(move || {
                    store
                        .write_grouped(move |w| {
                            let s = ThreadState {
                                failures: i as u32 + 1,
                                ..ThreadState::default()
                            };
                            w.set_thread_state(&id(i), &s)?;
                            Ok(i)
                        })
                        .unwrap()
                })
            })
            .collect();
        let mut got: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        got.sort();
        assert_eq!(got, (0..32).collect::<Vec<_>>());
        let states = store.thread_states().unwrap();
        assert_eq!(states.len(), 32);
        for (t, s) in states {
            let i: usize = t.as_str()[22..].parse().unwrap();
            assert_eq!(s.failures, i as u32 + 1);
        }
    }

    #[test]
    fn a_panicking_write_does_not_stop_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("uwf.redb")).unwrap());
        let s2 = store.clone();
        let r = std::thread::spawn(move || {
            s2.write_grouped(|_| -> Result<()> { panic!("a bug in a closure") })
        })
        .join();
        // The store turns the panic into an error (or the thread unwinds): either way it fails.
        assert!(!matches!(r, Ok(Ok(()))));
        store
            .write_grouped(|w| {
                w.set_thread_state(
                    &id(3),
                    &ThreadState {
                        failures: 3,
                        ..ThreadState::default()
                    },
                )
            })
            .unwrap();
        assert_eq!(store.thread_states().unwrap().len(), 1);
    }

    #[test]
    fn a_failing_write_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("uwf.redb")).unwrap();
        let r = store.write_grouped(|w| {
            w.set_thread_state(
                &id(1),
                &ThreadState {
                    failures: 1,
                    ..ThreadState::default()
                },
            )?;
            Err::<(), _>(StoreError::Internal("no".into()))
        });
        assert!(r.unwrap_err().to_string().contains("no"));
        assert!(store.thread_states().unwrap().is_empty());
        // The store goes on working.
        store
            .write_grouped(|w| {
                w.set_thread_state(
                    &id(2),
                    &ThreadState {
                        failures: 2,
                        ..ThreadState::default()
                    },
                )
            })
            .unwrap();
        assert_eq!(store.thread_states().unwrap().len(), 1);
    }
}
