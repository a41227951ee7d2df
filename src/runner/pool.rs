//! The runner's threads for steps whose agents only compute (the scripted agent): such a step
//! is tens of microseconds of work up to its head move, so a thread of its own, woken for it
//! and put to sleep after it, would cost as much as the step. A few threads (one more than
//! the cores) take the queued steps in batches, read the kept leases of a batch in one read
//! transaction, and run its steps one after another, each up to its head move
//! ([`engine::step_detached`]); the moves are committed by the store's group commit.

use super::step::StepEnv;
use crate::engine::{self, Detached, Moved};
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

/// Runs a batch: the kept leases of its threads read in one read transaction, then each step
/// up to its head move.
fn run_batch(batch: Vec<Job>) {
    let Some(store) = batch.first().map(|j| j.env.store.clone()) else {
        return;
    };
    // Every step here holds its thread's lease from its last one. A failed read leaves each
    // step to read its own rows.
    let threads: Vec<ThreadId> = batch.iter().map(|j| j.env.thread.clone()).collect();
    let mut leased = store
        .leased_threads(&threads)
        .ok()
        .filter(|r| r.len() == threads.len())
        .map(Vec::into_iter);
    // The batch's head moves go in one group commit, started once all are queued.
    store.deferring(|| {
        for j in batch {
            run_one(j, leased.as_mut().and_then(Iterator::next));
        }
    });
}

/// Runs one step of a batch up to its head move, with the rows read for it (`pre`).
fn run_one(j: Job, pre: Option<crate::store::LeasedThread>) {
    let Job { env, then, reply } = j;
    // A panic ends the step, not the worker: the runner gets it as it gets a panic of a step
    // on the blocking pool.
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        engine::step_detached(&env.options_with(pre), then)
    }));
    let _ = reply.send(first);
}
