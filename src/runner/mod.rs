//! `uwf run`: one long-running process that drives active threads to their end, up to `jobs`
//! steps at once.
//!
//! Each step goes through [`engine::step`], the same path as `uwf thread step` (lease,
//! moderator, agent, compare-and-swap of the head), on tokio's blocking pool: built-in agents
//! run inside this process, other agents as supervised processes. One store handle serves every
//! step. A thread that finishes a step goes straight back to the queue, at its front for up to
//! [`STREAK`] steps in a row, then at its back; the store is scanned
//! for new threads when the queue runs dry and whenever the store file changes (a file watch,
//! not a busy poll), and queued threads are promoted as others end.
//!
//! Shutdown: the first [`Stop::request`] (Ctrl-C, SIGTERM) starts no new step and waits up to
//! the grace period for the running ones; then, or at a second request, the running agents are
//! killed through the steps' [`Interrupt`], every lease is given back and the summary returned.

mod options;
mod pool;
mod step;

pub use options::{RunOptions, Stop};

use step::StepEnv;

use crate::builtin::Models;
use crate::engine::{self, StepError};
use crate::store::{Phase, Store};
use crate::thread::{self, Config, ThreadId};
use crate::workflow::ThreadStatus;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts of one workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Steps taken.
    pub steps: u64,
    /// Threads that reached `$END`.
    pub completed: u64,
    /// Threads that failed.
    pub failed: u64,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// All workflows together.
    pub total: Counts,
    /// Per workflow name.
    pub workflows: BTreeMap<String, Counts>,
    /// Step errors that did not fail a thread (busy, advanced, a failure below `maxRetries`).
    pub errors: u64,
    /// The signal that stopped the run, if one did.
    pub stopped_by: Option<i32>,
    /// Workflows whose day budget held steps back.
    pub day_budget_reached: BTreeSet<String>,
}

/// What happened, as it happens.
#[derive(Debug, Clone)]
pub enum Event {
    /// A thread ended (completed, failed) or stopped being drivable (its error).
    Finished {
        /// The thread.
        thread: ThreadId,
        /// Its workflow's name.
        workflow: String,
        /// `completed`, `failed`, or `stuck` for an error no retry mends (a config error).
        status: String,
        /// Steps this run took on it.
        steps: u64,
        /// The last error, if any.
        error: Option<String>,
    },
    /// A budget held a step back: the thread's (it is paused) or its workflow's day (its
    /// threads wait; looked at again every 30 seconds).
    Budget {
        /// The workflow.
        workflow: String,
        /// What the budget said.
        message: String,
    },
    /// Counts now.
    Progress {
        /// Steps running.
        running: usize,
        /// Steps done.
        steps: u64,
        /// Threads completed.
        completed: u64,
        /// Threads failed.
        failed: u64,
    },
}

/// The result of one step on the blocking pool.
struct Done {
    thread: ThreadId,
    result: Result<engine::StepResult, StepError>,
}

/// What the runner knows of a thread it drives.
#[derive(Default)]
struct Tracked {
    workflow: String,
    steps: u64,
    /// Not before this instant (after a busy or advanced error).
    not_before: Option<Instant>,
    /// Held back by its workflow's day budget until this instant, when it is looked at again.
    held_until: Option<Instant>,
    /// The steps this run has made of it one after another, at the front of the queue.
    streak: u32,
    /// The role its last step's moderator picked next.
    next_role: Option<String>,
}

/// How many steps of a thread a runner makes one after another (its next step at the front
/// of the queue) before the thread goes to the back: the thread stays with the runner and
/// the chain it keeps of it, and runners sharing a store seldom reach for each other's
/// threads, while every thread moves on when there are more threads than jobs.
const STREAK: u32 = 16;

/// The most blocking threads of a run whose `--agent` only computes.
const COMPUTE_BLOCKING: usize = 32;

/// The threads whose leases this runner kept from their last steps for their next ones
/// ([`engine::StepOptions::keep_lease`]); what is still kept when the run ends, however it
/// ends, is given back.
struct Kept {
    store: Arc<Store>,
    threads: HashSet<ThreadId>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        let threads: Vec<ThreadId> = self.threads.drain().collect();
        // A lease left behind by a failure here is taken over later: its owner is gone.
        let _ = engine::release_kept(&self.store, &threads, std::process::id());
    }
}

impl Tracked {
    /// Whether the day budget holds the thread back now.
    fn held(&self) -> bool {
        self.held_until.is_some_and(|t| Instant::now() < t)
    }
}

/// Drives threads until nothing is left (`until_idle`) or a stop request; see the module
/// documentation.
///
/// # Errors
/// Store failures and config errors that concern the whole run.
// Long: the run's one event loop (stop, look, start, wait, record), whose state its parts share.
pub fn run(
    store: Arc<Store>,
    config: Arc<Config>,
    models: Arc<Models>,
    opts: RunOptions,
    now: Arc<dyn Fn() -> u64 + Send + Sync>,
    stop: Arc<Stop>,
    mut events: impl FnMut(Event),
) -> thread::Result<Summary> {
    // A step of an agent that only computes waits on a blocking thread for no more than its
    // lease's commit, which the steps waiting with it share: a few threads serve many.
    let blocking = match &opts.agent {
        Some(a) if engine::computes_only(a) => opts.jobs.clamp(1, COMPUTE_BLOCKING),
        _ => opts.jobs.max(1),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(blocking + 2)
        .build()
        .map_err(|e| thread::ThreadError::Invalid(format!("cannot start the runtime: {e}")))?;
    let max_retries = config.max_retries()?;
    let changed = Arc::new(tokio::sync::Notify::new());
    // A store on a server says when threads start or leases free (LISTEN/NOTIFY); a file is
    // watched. A run that ends once idle looks instead of waiting, so it listens to neither
    // (a watched file would wake a thread at each of its own writes).
    let (_listen, _watch) = if opts.until_idle {
        (None, None)
    } else {
        let listen = store.on_change({
            let changed = changed.clone();
            move || changed.notify_one()
        });
        let watch = listen
            .is_none()
            .then(|| watch(store.path(), changed.clone()));
        (listen, watch.flatten())
    };
    // Given back after the runtime is left: a store on a server is reached through a
    // synchronous client, which must not run on the runtime's thread.
    let mut kept = Kept {
        store: store.clone(),
        threads: HashSet::new(),
    };
    let kept = &mut kept;
    let opts = Arc::new(opts);
    rt.block_on(async move {
        let mut summary = Summary::default();
        let mut tracked: HashMap<ThreadId, Tracked> = HashMap::new();
        let mut queue: VecDeque<ThreadId> = VecDeque::new();
        let mut queued: HashSet<ThreadId> = HashSet::new();
        let mut in_flight: HashSet<ThreadId> = HashSet::new();
        // Threads with an error no retry mends: not driven again by this run.
        let mut stuck: HashSet<ThreadId> = HashSet::new();
        let mut set = tokio::task::JoinSet::new();
        let mut last_scan: Option<Instant> = None;
        let mut stop_at: Option<Instant> = None;
        let memo = Arc::new(engine::Memo::default());
        // Made at the first step whose agent only computes.
        let pools: std::sync::OnceLock<Option<Arc<pool::Pool>>> = std::sync::OnceLock::new();
        let mut looker = Looker {
            store: store.clone(),
            config: config.clone(),
            names: HashMap::new(),
            threads: opts.threads.iter().cloned().collect(),
            workflows: opts.workflows.iter().cloned().collect(),
            retries: Arc::default(),
            budgets: Arc::default(),
        };
        loop {
            // A stop request: no new steps; the grace period, then the kill.
            if let Some(sig) = stop.requested() {
                summary.stopped_by = Some(sig);
                let at = *stop_at.get_or_insert_with(|| Instant::now() + opts.grace);
                if Instant::now() >= at {
                    stop.kill.trigger(sig);
                }
                if set.is_empty() {
                    break;
                }
            }
            // Look for new threads when the queue is empty (at most every 100 ms while steps
            // run: each that ends looks at the queue again), or every second anyway.
            let since = |d: u64| last_scan.is_none_or(|t| t.elapsed() > Duration::from_millis(d));
            let dry = queue.is_empty() && (set.is_empty() || since(100));
            if stop.requested().is_none() && (dry || since(1000)) {
                // An unreachable server: nothing found this time, look again shortly.
                let found = match looker.look().await? {
                    Some((_, found)) => {
                        // Queued threads the look did not find ready are stepped by another
                        // process now (or paused, or ended): left to it until a later look
                        // finds them ready, rather than reached for and found busy.
                        let ready: HashSet<&ThreadId> = found.iter().map(|(t, _)| t).collect();
                        queue.retain(|t| {
                            let keep = ready.contains(t) || kept.threads.contains(t);
                            if !keep {
                                queued.remove(t);
                            }
                            keep
                        });
                        found
                    }
                    None => Vec::new(),
                };
                for (t, wf) in found {
                    if !in_flight.contains(&t)
                        && !stuck.contains(&t)
                        && !tracked.get(&t).is_some_and(Tracked::held)
                        && queued.insert(t.clone())
                    {
                        tracked.entry(t.clone()).or_default().workflow = wf;
                        queue.push_back(t);
                    }
                }
                last_scan = Some(Instant::now());
            }
            // Start what the limit allows.
            let mut deferred = Vec::new();
            while stop.requested().is_none() && in_flight.len() < opts.jobs.max(1) {
                let Some(t) = queue.pop_front() else { break };
                if tracked
                    .get(&t)
                    .and_then(|x| x.not_before)
                    .is_some_and(|nb| Instant::now() < nb)
                {
                    deferred.push(t);
                    continue;
                }
                queued.remove(&t);
                in_flight.insert(t.clone());
                // Whether this runner kept the thread's lease from its last step: the step then
                // takes it by a read, else by a write that waits for a group commit.
                let holds = kept.threads.remove(&t);
                // The lease is kept for the next step when the thread stays at the front.
                let keep_lease = tracked.get(&t).map_or(0, |x| x.streak) + 1 < STREAK;
                let max_retries = tracked
                    .get(&t)
                    .and_then(|x| looker.retries.get(&x.workflow))
                    .copied()
                    .unwrap_or(max_retries);
                let env = Arc::new(StepEnv {
                    store: store.clone(),
                    config: config.clone(),
                    models: models.clone(),
                    opts: opts.clone(),
                    now: now.clone(),
                    stop: stop.clone(),
                    memo: memo.clone(),
                    budgets: looker.budgets.clone(),
                    thread: t,
                    keep_lease,
                    max_retries,
                });
                // A step that holds its lease already and whose agent only computes (the agent
                // of the thread's next step, when the runner knows that role) waits for nothing
                // up to its head move: it goes to the runner's own threads.
                let computes = holds
                    && match &opts.agent {
                        Some(a) => engine::computes_only(a),
                        None => tracked.get(&env.thread).is_some_and(|x| {
                            x.next_role.as_ref().is_some_and(|role| {
                                config
                                    .agent_for(&x.workflow, role)
                                    .is_ok_and(|a| engine::computes_only(&a))
                            })
                        }),
                    };
                let pool = match computes {
                    true => pools
                        .get_or_init(|| pool::Pool::new().ok().map(Arc::new))
                        .clone(),
                    false => None,
                };
                set.spawn(run_step(env, pool));
            }
            for t in deferred {
                queue.push_back(t);
            }
            events(Event::Progress {
                running: in_flight.len(),
                steps: summary.total.steps,
                completed: summary.total.completed,
                failed: summary.total.failed,
            });
            if set.is_empty() {
                // A request that came after the check at the top still names the signal.
                if let Some(sig) = stop.requested() {
                    summary.stopped_by = Some(sig);
                    break;
                }
                if queue.is_empty() {
                    if opts.until_idle {
                        // One more look: a thread promoted or started just now.
                        let Some((promoted, found)) = looker.look().await? else {
                            last_scan = None;
                            continue;
                        };
                        if promoted {
                            last_scan = None;
                            continue;
                        }
                        if found.iter().all(|(t, _)| {
                            in_flight.contains(t)
                                || stuck.contains(t)
                                || tracked.get(t).is_some_and(Tracked::held)
                        }) {
                            break;
                        }
                        last_scan = None;
                        continue;
                    }
                    // Wait for the store to change (or a second, or a stop request).
                    let _ = tokio::time::timeout(Duration::from_secs(1), changed.notified()).await;
                    last_scan = None;
                    continue;
                }
                // Only deferred threads: wait a little.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            // Wait for a step to end (waking up now and then to look at the clock).
            let joined = tokio::time::timeout(Duration::from_millis(250), set.join_next()).await;
            let Ok(Some(joined)) = joined else { continue };
            let done = joined
                .map_err(|e| thread::ThreadError::Invalid(format!("a step panicked: {e}")))?;
            in_flight.remove(&done.thread);
            let thread = done.thread.clone();
            let went_on = matches!(&done.result, Ok(r) if !r.output.done);
            record(
                done,
                &mut tracked,
                &mut summary,
                &mut queue,
                &mut queued,
                &mut stuck,
                &mut events,
            );
            // A step made with `keep_lease` that went on kept the lease, for its next step.
            if went_on && tracked.get(&thread).is_some_and(|x| x.streak != 0) {
                kept.threads.insert(thread);
            }
        }
        Ok(summary)
    })
}

/// One step of the run: its agent and checks on the blocking pool, its head move in the
/// store's group commit without a thread waiting for it, and what completes it where it can
/// run (on this runtime's thread when it touches the store no more, else on the pool).
async fn run_step(env: Arc<StepEnv>, pool: Option<Arc<pool::Pool>>) -> Done {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let then = move |moved| {
        let _ = tx.send(moved);
    };
    let first = match pool {
        // A step whose agent only computes: on the runner's few threads of its own.
        Some(pool) => pool
            .run(env.clone(), then)
            .await
            .unwrap_or_else(|_| {
                Ok(engine::Detached::Done(Err(StepError::Thread(
                    thread::ThreadError::Invalid("a step was dropped".into()),
                ))))
            })
            .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        None => {
            let e = env.clone();
            tokio::task::spawn_blocking(move || engine::step_detached(&e.options(), then))
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
        }
    };
    let result = match first {
        engine::Detached::Done(r) => r,
        engine::Detached::Pending(p) => {
            let moved = rx.await.unwrap_or_else(|_| engine::Moved::lost());
            if p.quick(&moved) {
                p.finish(&env.options(), moved)
            } else {
                let e = env.clone();
                tokio::task::spawn_blocking(move || p.finish(&e.options(), moved))
                    .await
                    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
            }
        }
    };
    Done {
        thread: env.thread.clone(),
        result,
    }
}

/// Counts the step that ended (`done`) and says what becomes of its thread: queued again,
/// finished, retried shortly or set aside for the rest of the run.
#[allow(clippy::too_many_arguments)] // The run's bookkeeping, each part on its own.
fn record(
    done: Done,
    tracked: &mut HashMap<ThreadId, Tracked>,
    summary: &mut Summary,
    queue: &mut VecDeque<ThreadId>,
    queued: &mut HashSet<ThreadId>,
    stuck: &mut HashSet<ThreadId>,
    events: &mut impl FnMut(Event),
) {
    let tr = tracked.entry(done.thread.clone()).or_default();
    let counts = summary.workflows.entry(tr.workflow.clone()).or_default();
    match done.result {
        Ok(r) => {
            tr.next_role = r.output.current_role.clone();
            tr.steps += 1;
            counts.steps += 1;
            summary.total.steps += 1;
            tr.not_before = None;
            if r.output.done {
                counts.completed += 1;
                summary.total.completed += 1;
                events(finished(
                    &done.thread,
                    tr,
                    ThreadStatus::Completed.as_str(),
                    None,
                ));
            } else if queued.insert(done.thread.clone()) {
                tr.streak += 1;
                if tr.streak < STREAK {
                    queue.push_front(done.thread);
                } else {
                    tr.streak = 0;
                    queue.push_back(done.thread);
                }
            }
        }
        Err(e) => {
            tr.streak = 0;
            match e {
                StepError::FailedForGood { .. } | StepError::RoundLimit { .. } => {
                    counts.failed += 1;
                    summary.total.failed += 1;
                    events(finished(
                        &done.thread,
                        tr,
                        ThreadStatus::Failed.as_str(),
                        Some(e.to_string()),
                    ));
                }
                StepError::Interrupted { .. } => {}
                StepError::Queued { .. } | StepError::Paused { .. } => {}
                StepError::Budget(o) => {
                    let day = matches!(o, thread::Overrun::Day { .. });
                    if day {
                        tr.held_until = Some(Instant::now() + Duration::from_secs(30));
                    }
                    // A thread's budget once a thread (it is paused); a day's once a run.
                    if !day || summary.day_budget_reached.insert(tr.workflow.clone()) {
                        events(Event::Budget {
                            workflow: tr.workflow.clone(),
                            message: o.to_string(),
                        });
                    }
                }
                StepError::Thread(thread::ThreadError::NotActive { .. })
                | StepError::Archived { .. } => {}
                e if e.retryable() || e.counts_as_failure() => {
                    summary.errors += 1;
                    // Busy elsewhere, moved on, or failed below `maxRetries`: again shortly. A
                    // thread another runner steps is left to it for a while: it goes on with the
                    // thread while this one goes on with others, rather than both reaching for the
                    // same threads.
                    let wait = match &e {
                        StepError::Busy { .. } => 1000,
                        e if e.counts_as_failure() => 100,
                        _ => 50,
                    };
                    tr.not_before = Some(Instant::now() + Duration::from_millis(wait));
                    if queued.insert(done.thread.clone()) {
                        queue.push_back(done.thread);
                    }
                }
                e => {
                    summary.errors += 1;
                    events(finished(&done.thread, tr, "stuck", Some(e.to_string())));
                    stuck.insert(done.thread);
                }
            }
        }
    }
}

/// The event of thread `t` (tracked as `tr`) ending with `status`.
fn finished(t: &ThreadId, tr: &Tracked, status: &str, error: Option<String>) -> Event {
    Event::Finished {
        thread: t.clone(),
        workflow: tr.workflow.clone(),
        status: status.into(),
        steps: tr.steps,
        error,
    }
}

/// The active, ready threads to drive (with their workflow names), in this process's own
/// order: runners sharing a store go through the same threads in different orders, so they
/// seldom reach for the same thread at once (one of them would wait for the other's
/// transaction, then find the thread busy).
fn scan(
    store: &Store,
    names: &mut HashMap<crate::cas::NodeId, String>,
    threads: &HashSet<ThreadId>,
    workflows: &HashSet<String>,
) -> thread::Result<Vec<(ThreadId, String)>> {
    let phases: HashMap<ThreadId, Phase> = store
        .thread_states()?
        .into_iter()
        .map(|(t, s)| (t, s.phase))
        .collect();
    // Threads another process is stepping; a lease of this process's own holds none back.
    let me = crate::store::Lease::of(crate::proc::pid(), 0);
    let leased: HashSet<ThreadId> = store
        .leases()?
        .into_iter()
        .filter(|(_, l)| l.blocks(&me))
        .map(|(t, _)| t)
        .collect();
    let mut snap = None;
    let mut out = Vec::new();
    for (t, r) in store.threads()? {
        if !threads.is_empty() && !threads.contains(&t) {
            continue;
        }
        if phases.get(&t).is_some_and(|p| *p != Phase::Ready) || leased.contains(&t) {
            continue;
        }
        let name = match r.workflow {
            Some(wf) => match names.get(&wf) {
                Some(n) => n.clone(),
                None => {
                    let s = match &snap {
                        Some(s) => s,
                        None => snap.insert(store.snapshot()?),
                    };
                    let n = thread::load_workflow(s, wf)
                        .map(|w| w.name)
                        .unwrap_or_default();
                    names.insert(wf, n.clone());
                    n
                }
            },
            None => String::new(),
        };
        if !workflows.is_empty() && !workflows.contains(&name) {
            continue;
        }
        out.push((t, name));
    }
    let seed = order_seed();
    out.sort_by_cached_key(|(t, _)| twox_hash::XxHash64::oneshot(seed, t.as_str().as_bytes()));
    Ok(out)
}

/// This process's seed for the order of [`scan`]: its pid and start time.
fn order_seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ u64::from(std::process::id()).rotate_left(32)
    })
}

/// Whether a failure of the whole run's look at the store is one to wait out: the store's
/// server out of reach, or a transaction it aborted.
fn retry_later(e: &thread::ThreadError) -> bool {
    matches!(
        e,
        thread::ThreadError::Store(crate::store::StoreError::Server { retry: true, .. })
    )
}

/// What the runner's looks at the store need and keep between them.
struct Looker {
    store: Arc<Store>,
    config: Arc<Config>,
    /// Workflow names by node id.
    names: HashMap<crate::cas::NodeId, String>,
    /// `--thread` and `--workflow`.
    threads: HashSet<ThreadId>,
    workflows: HashSet<String>,
    /// `maxRetries` of the workflows whose limits in the store set one.
    retries: Arc<HashMap<String, u32>>,
    /// The store's budgets, read at each look: a step checks them without reading them.
    budgets: Arc<Vec<(String, crate::store::Budget)>>,
}

impl Looker {
    /// Promotes queued threads where limits are set (whether any was), then [`scan`]s, on
    /// the blocking pool: the runtime's own thread never waits for the store (a store on a
    /// server is reached through a synchronous client). `None`, after a short wait, when the
    /// store's server is out of reach for now.
    async fn look(&mut self) -> thread::Result<Option<(bool, Vec<(ThreadId, String)>)>> {
        let (store, config, threads, workflows) = (
            self.store.clone(),
            self.config.clone(),
            self.threads.clone(),
            self.workflows.clone(),
        );
        let mut known = std::mem::take(&mut self.names);
        let (r, known) = tokio::task::spawn_blocking(move || {
            let r = (|| -> thread::Result<_> {
                let promoted = !thread::promote(&store, &config)?.is_empty();
                let found = scan(&store, &mut known, &threads, &workflows)?;
                let retries: HashMap<String, u32> = store
                    .workflow_limits()?
                    .into_iter()
                    .filter_map(|(n, l)| Some((n, l.max_retries?)))
                    .collect();
                Ok((promoted, found, retries, store.budgets()?))
            })();
            (r, known)
        })
        .await
        .map_err(|e| thread::ThreadError::Invalid(format!("a store scan panicked: {e}")))?;
        self.names = known;
        match r {
            Ok((promoted, found, retries, budgets)) => {
                self.retries = Arc::new(retries);
                self.budgets = Arc::new(budgets);
                Ok(Some((promoted, found)))
            }
            Err(e) if retry_later(&e) => {
                tokio::time::sleep(Duration::from_millis(250)).await;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// Wakes `changed` whenever the store file (or its directory) changes; `None` where the
/// system offers no file watch (the runner then looks every second).
fn watch(
    path: &std::path::Path,
    changed: Arc<tokio::sync::Notify>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut w = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if e.is_ok() {
            changed.notify_one();
        }
    })
    .ok()?;
    w.watch(path, notify::RecursiveMode::NonRecursive).ok()?;
    Some(w)
}
