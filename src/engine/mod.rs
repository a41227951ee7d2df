//! The supervised step: lease, moderator, agent, checks, compare-and-swap of the head.
//!
//! A step holds one store handle from start to end (many processes open the file at once,
//! and the agent may use it meanwhile through `uwf agent submit`). It takes the thread's lease
//! in the transaction that reads the head (`lease`); a `LeaseGuard` gives the lease back however
//! the step ends, and the head move that succeeds releases it in its own transaction (`commit`).
//!
//! The engine runs every agent through one interface (`adapter::Adapter`): a built-in agent in
//! process (`in_process`), or a program under supervision speaking uwf's protocol
//! (`process`: `CMD <thread> <role>`, the agent uses the store) or the TypeScript tool's
//! (`ts7a0c`: `CMD --thread T --role R --prompt P`, the agent uses only the files under the
//! root, made current before it runs; the node files it wrote are imported after).
//!
//! Every failure is a [`StepError`] that says whether a retry of the same step may succeed
//! ([`StepError::retryable`]); the head is unchanged on every error.

mod adapter;
mod commit;
mod in_process;
mod lease;
mod memo;
mod options;
mod process;
mod ts7a0c;

pub use crate::proc::{boot_id, start_ticks};
pub use crate::supervise::{GUARD_ARG, StepError, guard_main};
pub(crate) use crate::supervise::{Interrupt, adopt_orphans, guard_agents};
pub use commit::advance;
pub(crate) use memo::Memo;
pub(crate) use options::{DEFAULT_TIMEOUT, StepOptions, StepResult};

use crate::cas::NodeId;
use crate::supervise::Result;
use crate::thread::chain::{Moderated, load_moderated};
use crate::thread::{AgentCommand, AgentProtocol, Status, StepOutput};
use crate::workflow::{self, Decision, Jsonata};
use adapter::{Adapter, AgentCall, interrupted};
pub(crate) use commit::Moved;
use commit::{Concluding, HeadMove, commit, concluding};
use lease::LeaseGuard;
pub(crate) use lease::release_kept;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs one step of `opts.thread`: the moderator picks the role, the agent runs and returns a
/// StepNode, and the head moves to it by compare-and-swap. At `$END` the thread is archived in
/// the same transaction.
///
/// # Errors
/// A [`StepError`]; the head is unchanged and the lease released.
pub(crate) fn step(opts: &StepOptions<'_>) -> Result<StepResult> {
    let started_ms = (opts.now)();
    let attempt = std::cell::RefCell::new(Attempt::default());
    let result = match step_inner(opts, &attempt) {
        Ok(Ready::Done(r)) => Ok(r),
        Ok(Ready::Moving(mv)) => mv.commit_now(opts),
        Err(e) => Err(e),
    };
    after(opts, started_ms, &attempt.into_inner(), result)
}

/// [`step`] up to its head move, which goes in the store's group commit without this thread
/// waiting for it: `then` gets the move's outcome on the committing thread (it must not wait
/// for the store), and [`Pending::finish`] completes the step with it. A step that ends before
/// its head move (an error, a thread at its end) is [`Detached::Done`].
pub(crate) fn step_detached(
    opts: &StepOptions<'_>,
    then: impl FnOnce(Moved) + Send + 'static,
) -> Detached {
    let started_ms = (opts.now)();
    let attempt = std::cell::RefCell::new(Attempt::default());
    let result = match step_inner(opts, &attempt) {
        Ok(Ready::Moving(mv)) => {
            commit::commit_then(opts.store, &mv.c.head_move(), then);
            return Detached::Pending(Pending {
                c: mv.c,
                lease: mv.guard.into_held(),
                notes: mv.notes,
                attempt: attempt.into_inner(),
                started_ms,
            });
        }
        Ok(Ready::Done(r)) => Ok(r),
        Err(e) => Err(e),
    };
    Detached::Done(after(opts, started_ms, &attempt.into_inner(), result))
}

/// A step run by [`step_detached`].
#[allow(
    clippy::large_enum_variant,
    reason = "made and matched once a step, never stored"
)]
pub(crate) enum Detached {
    /// It ended before its head move.
    Done(Result<StepResult>),
    /// Its head move is in the group commit.
    Pending(Pending),
}

/// A step whose head move is in the store's group commit: what completes it.
pub(crate) struct Pending {
    c: Concluding,
    lease: lease::HeldLease,
    notes: Vec<String>,
    attempt: Attempt,
    started_ms: u64,
}

impl Pending {
    /// Whether completing the step with `moved` reads and writes nothing of the store, so that
    /// any thread may do it (an async runtime's own included).
    pub(crate) fn quick(&self, moved: &Moved) -> bool {
        moved.went_through_fresh() && !crate::traces::enabled()
    }

    /// Completes the step with the outcome of its head move, as [`step`] does after its commit
    /// (tried again while the store's server failed for a passing reason).
    ///
    /// # Errors
    /// As [`step`].
    pub(crate) fn finish(self, opts: &StepOptions<'_>, moved: Moved) -> Result<StepResult> {
        let Pending {
            c,
            lease,
            notes,
            attempt,
            started_ms,
        } = self;
        let first = commit::moved_result(&c.head_move(), moved);
        let result = match commit::commit_after(opts.store, &c.head_move(), first) {
            Ok(fresh) => {
                let (output, at_new_head) = c.concluded(opts.store, fresh);
                if let (Some(memo), Some(m)) = (opts.memo, at_new_head) {
                    memo.keep(opts.thread.clone(), m);
                }
                Ok(StepResult { output, notes })
            }
            Err(e) => {
                lease.release(opts.store);
                Err(e)
            }
        };
        after(opts, started_ms, &attempt, result)
    }
}

/// A step up to its head move.
#[allow(
    clippy::large_enum_variant,
    reason = "made and matched once a step, never stored"
)]
enum Ready<'s> {
    /// Ended without one.
    Done(StepResult),
    /// Checked and ready to move the head.
    Moving(Moving<'s>),
}

/// A step checked and ready for its head move, with the lease it holds.
struct Moving<'s> {
    c: Concluding,
    guard: LeaseGuard<'s>,
    notes: Vec<String>,
}

impl Moving<'_> {
    /// Moves the head now (the lease given back on an error) and completes the step.
    fn commit_now(self, opts: &StepOptions<'_>) -> Result<StepResult> {
        let Moving {
            c,
            mut guard,
            notes,
        } = self;
        let fresh = commit(opts.store, &c.head_move())?;
        let (output, at_new_head) = c.concluded(opts.store, fresh);
        guard.disarm();
        if let (Some(memo), Some(m)) = (opts.memo, at_new_head) {
            memo.keep(opts.thread.clone(), m);
        }
        Ok(StepResult { output, notes })
    }
}

/// What a step does once it has ended with `result`: its spans exported (traces on), and a
/// failure that counts recorded against the thread, which fails for good after `maxRetries`
/// of them in a row.
fn after(
    opts: &StepOptions<'_>,
    started_ms: u64,
    attempt: &Attempt,
    result: Result<StepResult>,
) -> Result<StepResult> {
    if crate::traces::enabled() {
        trace_step(opts, started_ms, attempt, &result);
    }
    let e = match result {
        Ok(r) => return Ok(r),
        Err(e) => e,
    };
    if e.counts_as_failure() || attempt.agent_failed {
        let failure = crate::store::StepFailure {
            time_ms: (opts.now)(),
            agent: attempt.agent.clone(),
            message: e.to_string(),
        };
        tracing::warn!(
            tag = "FR23R1AV",
            thread = %opts.thread,
            agent = %failure.agent,
            error = %failure.message,
            "step failed"
        );
        if crate::thread::record_failure(
            opts.store,
            opts.thread,
            Some(attempt.workflow.as_str()).filter(|w| !w.is_empty()),
            failure,
            opts.max_retries,
        )? {
            tracing::error!(
                tag = "ZZEQKSGY",
                thread = %opts.thread,
                attempts = opts.max_retries,
                "thread failed: {} failed steps in a row",
                opts.max_retries
            );
            return Err(StepError::FailedForGood {
                thread: opts.thread.to_string(),
                attempts: opts.max_retries,
                last: Box::new(e),
            });
        }
    }
    Err(e)
}

/// Exports the spans of a step that ended with `result` (traces are on).
fn trace_step(
    opts: &StepOptions<'_>,
    started_ms: u64,
    attempt: &Attempt,
    result: &Result<StepResult>,
) {
    let (head, outcome, error) = match result {
        Ok(r) if r.output.done => (Some(r.output.head.clone()), "completed".to_string(), None),
        Ok(r) => (Some(r.output.head.clone()), "ok".to_string(), None),
        Err(e) => (None, e.kind().name().to_string(), Some(e.to_string())),
    };
    // The calls kept with the StepNode the step made: noted when this thread wrote it (an
    // agent in this process), else read back (one in another process).
    let calls = head
        .as_deref()
        .and_then(|h| NodeId::parse(h).ok())
        .and_then(|id| {
            crate::traces::written(id)
                .or_else(|| opts.store.step_usage(id).ok().flatten().map(|c| c.calls))
        })
        .unwrap_or_default();
    let span = crate::traces::StepSpan {
        thread: opts.thread.to_string(),
        workflow: attempt.workflow.clone(),
        role: attempt.role.clone(),
        started_ms,
        ended_ms: (opts.now)(),
        head,
        outcome,
        error,
        agent: attempt
            .agent_ran
            .map(|(from, to)| (attempt.agent.clone(), from, to)),
    };
    crate::traces::step(&span, &calls);
}

/// What a step's agent did, for the failure record: the agent's command line, and whether its
/// run failed in a way that counts as a failed step ([`Adapter::counts_as_failure`]); and, for
/// its trace, the workflow, the role and when the agent ran.
#[derive(Default)]
struct Attempt {
    agent: String,
    agent_failed: bool,
    workflow: String,
    role: String,
    agent_ran: Option<(u64, u64)>,
}

impl Attempt {
    /// The moderator chose `role` of workflow `workflow`.
    fn chose(&mut self, workflow: &str, role: &str) {
        self.workflow = workflow.to_string();
        self.role = role.to_string();
    }
}

// Long: a step in its order (lease, moderator, round limit, end, budget, agent, head move), each
// part a call; what they share is the lease and the thread as read.
fn step_inner<'s>(
    opts: &StepOptions<'s>,
    attempt: &std::cell::RefCell<Attempt>,
) -> Result<Ready<'s>> {
    interrupted(opts.interrupt)?;
    let store = opts.store;
    let (mut guard, head, state) = LeaseGuard::acquire(
        store,
        opts.thread,
        crate::store::Lease::of(opts.pid, (opts.now)()),
        // Rows read by the caller are of a lease it holds from its last step.
        opts.keep_lease || opts.leased.is_some(),
        opts.leased.clone(),
    )?;
    let mut m = match opts.memo.and_then(|memo| memo.take(opts.thread, head)) {
        Some(m) => m,
        None => load_moderated(store, head)?,
    };
    let decision = workflow::next(&m.wf, &m.history, &Jsonata::default())?;
    attempt.borrow_mut().chose(&m.wf.name, &decision.role);
    tracing::info!(
        tag = "JN8SQVEH",
        thread = %opts.thread,
        workflow = %m.wf_id,
        role = %decision.role,
        "moderator chose {}",
        decision.role
    );
    if !decision.is_end()
        && let Some(rounds) = state.max_rounds
        && {
            m.complete(store)?;
            m.history.steps.len() >= rounds as usize
        }
    {
        let e = fail_at_round_limit(opts, &m.wf.name, rounds)?;
        guard.disarm();
        return Err(e);
    }
    if decision.is_end() {
        // Nothing to run: the thread is finished (e.g. imported at its last step).
        let wf_id = m.wf_id;
        let me = guard.lease().clone();
        commit(
            store,
            &HeadMove {
                thread: opts.thread,
                expected: head,
                new: head,
                wf: wf_id,
                workflow_name: &m.wf.name,
                done: true,
                now_ms: (opts.now)(),
                me: Some(&me),
                keep_lease: false,
                write: None,
                start: m.chain.start_id,
            },
        )?;
        guard.disarm();
        return Ok(Ready::Done(StepResult {
            output: StepOutput {
                workflow: wf_id.to_wire(),
                thread: opts.thread.clone(),
                head: head.to_wire(),
                status: Status::Completed,
                current_role: None,
                done: true,
                last_error: None,
                running: None,
                paused_for: None,
            },
            notes: Vec::new(),
        }));
    }
    if let Some(over) =
        crate::thread::budget::check(store, opts.thread, &m.wf.name, (opts.now)(), opts.budgets)?
    {
        tracing::warn!(tag = "9VXK2RBN", thread = %opts.thread, "{over}");
        return Err(over.into());
    }
    let held = crate::thread::HeldStep::default();
    let (id, notes) = run_agent(opts, &mut m, &decision, attempt, &held)?;
    let me = guard.lease().clone();
    let c = concluding(
        store,
        opts.thread,
        m,
        &decision.role,
        id,
        (opts.now)(),
        Some(&me),
        opts.keep_lease,
        held.take(),
    )?;
    Ok(Ready::Moving(Moving { c, guard, notes }))
}

/// Archives `opts.thread`, a thread of workflow `workflow`, as failed at its round limit of
/// `rounds` steps; returns the step's error.
fn fail_at_round_limit(opts: &StepOptions<'_>, workflow: &str, rounds: u32) -> Result<StepError> {
    let message = format!("reached its round limit of {rounds} steps");
    crate::thread::lifecycle::fail(
        opts.store,
        opts.thread,
        workflow,
        crate::store::StepFailure {
            time_ms: (opts.now)(),
            agent: String::new(),
            message,
        },
    )?;
    tracing::error!(
        tag = "EZDSG36W",
        thread = %opts.thread,
        rounds,
        "thread failed: reached its round limit"
    );
    Ok(StepError::RoundLimit {
        thread: opts.thread.to_string(),
        rounds,
    })
}

/// Runs the agent the config or `--agent` names for `decision` through its adapter; returns the
/// id it printed and notes for stderr.
fn run_agent(
    opts: &StepOptions<'_>,
    m: &mut Moderated,
    decision: &Decision,
    attempt: &std::cell::RefCell<Attempt>,
    hold: &crate::thread::HeldStep,
) -> Result<(NodeId, Vec<String>)> {
    let agent = match opts.agent {
        Some(a) => std::borrow::Cow::Borrowed(a),
        None => std::borrow::Cow::Owned(opts.config.agent_for(&m.wf.name, &decision.role)?),
    };
    attempt.borrow_mut().agent = agent.display();
    let timeout = match opts.timeout {
        Some(t) => t,
        None => opts
            .config
            .timeout_seconds()?
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64),
    };
    let (cwd, mut notes) = effective_cwd(decision, m.chain.cwd(), opts.fallback_cwd);
    let started_ms = (opts.now)();
    let adapter = adapter_for(&agent)?;
    if adapter.reads_history() {
        m.complete(opts.store)?;
    }
    let call = AgentCall {
        opts,
        moderated: m,
        decision,
        agent: &agent,
        cwd: &cwd,
        started_ms,
        timeout,
        hold,
    };
    let from = (opts.now)();
    let ran = adapter.run(&call);
    attempt.borrow_mut().agent_ran = Some((from, (opts.now)()));
    let (id, more) = ran.inspect_err(|e| {
        attempt.borrow_mut().agent_failed = adapter.counts_as_failure(e);
    })?;
    notes.extend(more);
    Ok((id, notes))
}

/// The adapter that runs `agent`: built in, or a program speaking its protocol.
fn adapter_for(agent: &AgentCommand) -> Result<Box<dyn Adapter>> {
    if let Some(builtin) = builtin_for(agent) {
        let builtin = builtin.map_err(|e| {
            crate::thread::ThreadError::Config(format!("agent \"{}\": {e}", agent.display()))
        })?;
        return Ok(Box::new(in_process::InProcess(builtin)));
    }
    Ok(match agent.protocol {
        AgentProtocol::Uwf => Box::new(process::Uwf),
        AgentProtocol::Ts7a0c => Box::new(ts7a0c::Ts7a0c),
    })
}

/// Whether `agent` is a built-in agent whose runs only compute ([`crate::builtin::Agent::computes_only`]).
pub(crate) fn computes_only(agent: &AgentCommand) -> bool {
    matches!(builtin_for(agent), Some(Ok(a)) if a.computes_only())
}

/// The built-in agent `agent` names ([`crate::builtin::from_command`]), its words parsed once
/// per process, as is a command that names none: a runner's steps run the same few agent
/// commands again and again, and a built-in agent keeps nothing between its runs.
fn builtin_for(
    agent: &AgentCommand,
) -> Option<std::result::Result<std::sync::Arc<dyn crate::builtin::Agent>, String>> {
    type Cache = std::sync::Mutex<
        foldhash::HashMap<AgentCommand, Option<std::sync::Arc<dyn crate::builtin::Agent>>>,
    >;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(a) = cache.lock().ok()?.get(agent) {
        return a.clone().map(Ok);
    }
    let made = crate::builtin::from_command(agent)
        .map(|r| r.map(std::sync::Arc::<dyn crate::builtin::Agent>::from));
    let kept = match &made {
        Some(Err(_)) => None,
        Some(Ok(a)) => Some(Some(a.clone())),
        None => Some(None),
    };
    if let (Some(kept), Ok(mut c)) = (kept, cache.lock()) {
        // A few commands a process: bounded anyway.
        if c.len() >= 64 {
            c.clear();
        }
        c.insert(agent.clone(), kept);
    }
    made
}

fn effective_cwd(decision: &Decision, thread_cwd: &str, fallback: &Path) -> (PathBuf, Vec<String>) {
    let base = PathBuf::from(thread_cwd);
    let wanted = match decision
        .location
        .as_deref()
        .filter(|l| !l.trim().is_empty())
    {
        Some(l) => base.join(l),
        None => base,
    };
    if wanted.as_os_str().is_empty() || !wanted.is_dir() {
        let note = format!(
            "note: working directory {} does not exist here; the agent runs in {}",
            wanted.display(),
            fallback.display()
        );
        return (fallback.to_path_buf(), vec![note]);
    }
    (wanted, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::thread::{AgentCommand, Config, StartInput, ThreadId};
    use std::sync::Arc;

    /// Two threads started alike and stepped in the same millisecond make the same nodes and
    /// share them: the second step's StepNode is stored already, and the memo still keeps
    /// that thread at its new head, with the time the store holds for the node.
    #[test]
    fn a_step_whose_nodes_were_stored_by_another_thread_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("script.yaml"),
            "worker:\n  - {$status: continue, note: one}\n  - {$status: done, note: two}\n",
        )
        .unwrap();
        let store = Store::open(&root.join("uwf.redb")).unwrap();
        let cwd = root.display().to_string();
        let threads: Vec<ThreadId> = ["06H1RA3GFM2595PTJ2VGAGMHT0", "06H1RA3GFM2595PTJ2VGAGMHT1"]
            .iter()
            .map(|t| ThreadId::parse(t).unwrap())
            .collect();
        for t in &threads {
            crate::thread::start(
                &store,
                &StartInput {
                    // One role that continues until its script says done.
                    workflow: concat!(env!("CARGO_MANIFEST_DIR"), "/benches/count.yaml"),
                    prompt: "go",
                    cwd: &cwd,
                    search_from: root,
                    thread: t.clone(),
                    now_ms: 1_700_000_000_000,
                },
            )
            .unwrap();
        }
        let config = Config::default();
        let models = crate::builtin::Models::new(
            config.clone(),
            Arc::new(|_| None),
            Arc::new(|| 1_700_000_000_500),
        );
        let memo = Memo::default();
        let clock = || 1_700_000_000_500;
        let mut heads = Vec::new();
        let agent = AgentCommand::parse(&format!(
            "uwf agent scripted --script {}",
            root.join("script.yaml").display()
        ))
        .unwrap();
        for t in &threads {
            let opts = StepOptions {
                store: &store,
                root,
                thread: t,
                agent: Some(&agent),
                config: &config,
                models: &models,
                max_retries: 0,
                timeout: None,
                env: &[],
                fallback_cwd: root,
                pid: std::process::id(),
                now: &clock,
                self_exe: None,
                interrupt: None,
                sole_child: false,
                memo: Some(&memo),
                keep_lease: false,
                budgets: None,
                submissions: None,
                leased: None,
            };
            let r = step(&opts).unwrap();
            assert!(!r.output.done);
            heads.push(NodeId::parse(&r.output.head).unwrap());
        }
        assert_eq!(heads[0], heads[1], "the two threads share their first step");
        let stored = store.get(heads[1]).unwrap().unwrap().timestamp;
        for (t, head) in threads.iter().zip(&heads) {
            let m = memo
                .take(t, *head)
                .expect("the thread is kept at its new head");
            assert_eq!(m.chain.steps.len(), 1);
            assert_eq!(m.chain.steps[0].timestamp, stored);
        }
    }
}
