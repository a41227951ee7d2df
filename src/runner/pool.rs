//! The runner's threads for steps whose agents only compute (the scripted agent): such a step
//! is tens of microseconds of work up to its head move, so a thread of its own, woken for it
//! and put to sleep after it, would cost as much as the step. A few threads (one more than
//! the cores) take the queued steps in batches, read the leases a batch's threads kept from
//! their last steps in one read transaction and take the others' in one write, and run its
//! steps one after another, each up to its head move ([`engine::step_detached`]); the moves are
//! committed by the store's group commit.

use super::step::StepEnv;
use crate::engine::{self, Detached, Moved};
use crate::store::LeasedThread;
use crate::thread::ThreadId;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use tokio::sync::oneshot;

/// Steps a worker takes from the queue at once.
const BATCH: usize = 32;

/// A step for the pool: what it needs, where its head move's outcome goes, and where the
/// step's first part goes.
struct Job {
    env: Arc<StepEnv>,
    then: Box<dyn FnOnce(Moved) + Send>,
    reply: oneshot::Sender<std::thread::Result<Detached>>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Workers waiting for a job.
    idle: usize,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

/// The pool; dropping it lets its workers finish the queued steps and end.
pub(super) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    /// A pool of one thread more than the machine has cores.
    pub(super) fn new() -> std::io::Result<Pool> {
        let n = std::thread::available_parallelism().map_or(2, usize::from) + 1;
        let shared = Arc::new(Shared::default());
        let mut workers = Vec::with_capacity(n);
        for i in 0..n {
            let s = shared.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("uwf-step-{i}"))
                    .spawn(move || work(&s))?,
            );
        }
        Ok(Pool { shared, workers })
    }

    /// Queues a step: the returned channel gets its first part ([`engine::step_detached`]),
    /// or the panic it ended with, and `then` its head move's outcome.
    pub(super) fn run(
        &self,
        env: Arc<StepEnv>,
        then: impl FnOnce(Moved) + Send + 'static,
    ) -> oneshot::Receiver<std::thread::Result<Detached>> {
        let (reply, rx) = oneshot::channel();
        let mut q = self.shared.queue.lock().expect("step pool lock");
        q.jobs.push_back(Job {
            env,
            then: Box::new(then),
            reply,
        });
        // A worker that is busy takes the next job when it is done: only an idle one is woken.
        if q.idle > 0 {
            self.shared.ready.notify_one();
        }
        rx
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Ok(mut q) = self.shared.queue.lock() {
            q.closed = true;
        }
        self.shared.ready.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// A worker: batches of queued steps until the pool closes and its queue is empty.
fn work(shared: &Shared) {
    loop {
        let batch: Vec<Job> = {
            let Ok(mut q) = shared.queue.lock() else {
                return;
            };
            while q.jobs.is_empty() {
                if q.closed {
                    return;
                }
                q.idle += 1;
                q = match shared.ready.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
                q.idle -= 1;
            }
            let n = q.jobs.len().min(BATCH);
            q.jobs.drain(..n).collect()
        };
        run_batch(batch);
    }
}

/// Runs a batch: the leases its threads kept from their last steps read in one read
/// transaction, the others taken in one write, then each step up to its head move.
fn run_batch(batch: Vec<Job>) {
    let Some(env) = batch.first().map(|j| j.env.clone()) else {
        return;
    };
    let store = &env.store;
    let threads = |holds: bool| -> Vec<ThreadId> {
        batch
            .iter()
            .filter(|j| j.env.holds == holds)
            .map(|j| j.env.thread.clone())
            .collect()
    };
    // A failed read or write leaves each of its steps to read or take its own.
    let mut kept = rows(&threads(true), |t| {
        store
            .leased_threads(t)
            .map(|r| r.into_iter().map(Some).collect())
    });
    let me = crate::store::Lease::of(crate::proc::pid(), (env.now)());
    let mut taken = rows(&threads(false), |t| engine::take_leases(store, t, &me));
    // The batch's head moves go in one group commit, started once all are queued.
    store.deferring(|| {
        for j in batch {
            let rows = if j.env.holds { &mut kept } else { &mut taken };
            let pre = rows.as_mut().and_then(Iterator::next).flatten();
            run_one(j, pre);
        }
    });
}

/// The rows `read` gives for `threads`, one a thread, in their order; `None` when there are
/// none to read or the read failed.
fn rows(
    threads: &[ThreadId],
    read: impl FnOnce(&[ThreadId]) -> Result<Vec<Option<LeasedThread>>, crate::store::StoreError>,
) -> Option<std::vec::IntoIter<Option<LeasedThread>>> {
    if threads.is_empty() {
        return None;
    }
    read(threads)
        .ok()
        .filter(|r| r.len() == threads.len())
        .map(Vec::into_iter)
}

/// Runs one step of a batch up to its head move, with the rows read for it (`pre`).
fn run_one(j: Job, pre: Option<LeasedThread>) {
    let Job { env, then, reply } = j;
    // A panic ends the step, not the worker: the runner gets it as it gets a panic of a step
    // on the blocking pool.
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        engine::step_detached(&env.options_with(pre), then)
    }));
    let _ = reply.send(first);
}
