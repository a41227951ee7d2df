//! One step: lease, moderator, agent, checks, compare-and-swap of the head.
//!
//! The store is opened for three short transactions (take the lease; read the thread; move the
//! head) and is closed while the agent runs, so the agent can use the store itself (`uwf agent
//! submit`) and other commands are never blocked by a slow agent.

use super::chain::{Moderated, expand_output, load_moderated, step_type};
use super::config::{AgentCommand, Config};
use super::ops::{Status, StepOutput};
use super::process::{self, AgentRun};
use super::{Result, ThreadError};
use crate::cas::{NodeId, Value};
use crate::store::{HistoryEntry, Lease, Snapshot, Store};
use crate::workflow::{self, Decision, Jsonata, StepView};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The agent time limit when neither `--timeout` nor `timeoutSeconds` is given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// What one step needs from its caller.
pub struct StepOptions<'a> {
    /// The store file.
    pub db_path: &'a Path,
    /// The storage root (`UWF_HOME` of the agent).
    pub root: &'a Path,
    /// The thread.
    pub thread: &'a str,
    /// `--agent`: overrides the config.
    pub agent: Option<AgentCommand>,
    /// `config.yaml`.
    pub config: &'a Config,
    /// `--timeout`: overrides the config.
    pub timeout: Option<Duration>,
    /// Variables added to the agent's environment (e.g. from `.env`).
    pub env: Vec<(String, String)>,
    /// Where the agent runs when the thread's directory does not exist on this machine.
    pub fallback_cwd: PathBuf,
    /// This process.
    pub pid: u32,
    /// The clock, ms since the epoch.
    pub now: &'a dyn Fn() -> u64,
    /// This program: an agent command named `uwf` runs it, so the built-in agents work
    /// without `uwf` on `PATH`.
    pub self_exe: Option<PathBuf>,
}

/// The result of one step, and notes for stderr.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// The thread's state after the step.
    pub output: StepOutput,
    /// Things the user should know (e.g. a fallback working directory).
    pub notes: Vec<String>,
}

/// Whether a lease's owner is still running: same boot, pid alive, same start time.
pub fn lease_is_live(l: &Lease) -> bool {
    let boot = process::boot_id();
    if !l.boot_id.is_empty() && !boot.is_empty() && l.boot_id != boot {
        return false;
    }
    if !process::pid_alive(l.pid) {
        return false;
    }
    let ticks = process::start_ticks(l.pid);
    !(l.start_ticks != 0 && ticks != 0 && ticks != l.start_ticks)
}

fn my_lease(pid: u32, now_ms: u64) -> Lease {
    Lease {
        pid,
        since_ms: now_ms,
        boot_id: process::boot_id(),
        start_ticks: process::start_ticks(pid),
    }
}

fn is_mine(l: &Lease, me: &Lease) -> bool {
    l.pid == me.pid && l.start_ticks == me.start_ticks && l.boot_id == me.boot_id
}

/// Takes the lease of an active thread; returns the head it found.
fn acquire(store: &Store, thread: &str, me: &Lease) -> Result<NodeId> {
    let found = store.write(|w| {
        let Some(rec) = w.thread(thread)? else {
            return Ok(Err(None));
        };
        if let Some(l) = w.lease(thread)?
            && !is_mine(&l, me)
            && lease_is_live(&l)
        {
            return Ok(Err(Some(l.pid)));
        }
        w.set_lease(thread, me)?;
        Ok(Ok(rec.head))
    })?;
    match found {
        Ok(head) => Ok(head),
        Err(Some(pid)) => Err(ThreadError::Busy {
            thread: thread.to_string(),
            pid,
        }),
        Err(None) => Err(match store.history_of(thread)? {
            Some(h) => ThreadError::NotActive {
                thread: thread.to_string(),
                reason: h.reason,
            },
            None => ThreadError::NotFound(thread.to_string()),
        }),
    }
}

fn release(db_path: &Path, thread: &str, me: &Lease) {
    if let Ok(store) = Store::open(db_path) {
        let _ = store.write(|w| {
            if let Some(l) = w.lease(thread)?
                && is_mine(&l, me)
            {
                w.remove_lease(thread)?;
            }
            Ok(())
        });
    }
}

/// Runs one step of `opts.thread`: the moderator picks the role, the agent runs and returns a
/// StepNode, and the head moves to it by compare-and-swap. At `$END` the thread is archived in
/// the same transaction.
///
/// # Errors
/// [`ThreadError::Busy`], [`ThreadError::Advanced`], [`ThreadError::NotActive`],
/// [`ThreadError::Agent`] for every agent failure (the head is unchanged then), moderator and
/// store failures.
pub fn step(opts: &StepOptions<'_>) -> Result<StepResult> {
    let me = my_lease(opts.pid, (opts.now)());
    let store = Store::open(opts.db_path)?;
    let head = acquire(&store, opts.thread, &me)?;
    let r = locked_step(opts, store, head, &me);
    if r.is_err() {
        release(opts.db_path, opts.thread, &me);
    }
    r
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

fn one_line(s: &str) -> String {
    let t = s.trim();
    let lines: Vec<&str> = t.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let joined = lines.join(" | ");
    if joined.chars().count() > 2000 {
        let cut: String = joined.chars().take(2000).collect();
        format!("{cut}…")
    } else {
        joined
    }
}

/// The node id an agent printed: the last non-empty stdout line, an id or JSON with `stepHash`.
fn returned_id(run: &AgentRun, cmd: &str) -> Result<NodeId> {
    let Some(last) = run.stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        return Err(ThreadError::Agent(format!(
            "agent printed nothing on stdout ({cmd}); expected a StepNode id as its last line"
        )));
    };
    let text = if last.starts_with('{') {
        let v = Value::from_json_str(last).map_err(|e| {
            ThreadError::Agent(format!(
                "agent stdout last line is not valid JSON: {e}: {last}"
            ))
        })?;
        match v.get("stepHash").and_then(Value::as_str) {
            Some(h) => h.to_string(),
            None => {
                return Err(ThreadError::Agent(format!(
                    "agent stdout JSON missing valid stepHash: {last}"
                )));
            }
        }
    } else {
        last.to_string()
    };
    NodeId::parse(&text).map_err(|_| {
        ThreadError::Agent(format!(
            "agent stdout last line is not a node id: \"{}\" ({cmd})",
            one_line(&text)
        ))
    })
}

/// Checks that `id` is a StepNode of this thread continuing `head` as `role`.
fn check_returned(
    snap: &Snapshot,
    id: NodeId,
    start: NodeId,
    head: NodeId,
    role: &str,
) -> Result<Value> {
    let node = snap.get(id)?.ok_or_else(|| {
        ThreadError::Agent(format!("agent returned {id}, which is not in the store"))
    })?;
    if node.type_id != step_type() {
        return Err(ThreadError::Agent(format!(
            "agent returned hash that is not a StepNode: {id} (type {})",
            node.type_id
        )));
    }
    let p = node.payload()?;
    let field = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if field("start") != start.to_wire() {
        return Err(ThreadError::Agent(format!(
            "agent returned step {id} of another thread: its start is {}, expected {start}",
            field("start")
        )));
    }
    let want_prev = if head == start {
        Value::Null
    } else {
        Value::str(head.to_wire())
    };
    let prev = p.get("prev").cloned().unwrap_or(Value::Null);
    if prev != want_prev {
        return Err(ThreadError::Agent(format!(
            "agent returned step {id} whose prev is {}, expected {} (the head)",
            prev.to_json(),
            want_prev.to_json()
        )));
    }
    if field("role") != role {
        return Err(ThreadError::Agent(format!(
            "agent returned step {id} for role \"{}\", expected role \"{role}\"",
            field("role")
        )));
    }
    Ok(p)
}

fn locked_step(
    opts: &StepOptions<'_>,
    store: Store,
    head: NodeId,
    me: &Lease,
) -> Result<StepResult> {
    let thread = opts.thread;
    let m = load_moderated(&store, head)?;
    let wf_id = m.wf_id;
    let decision = workflow::next(&m.wf, &m.history, &Jsonata::default())?;
    if decision.is_end() {
        // Nothing to run: the thread is finished (e.g. imported at its last step).
        commit(
            &store,
            thread,
            head,
            head,
            wf_id,
            true,
            (opts.now)(),
            Some(me),
        )?;
        return Ok(StepResult {
            output: StepOutput {
                workflow: wf_id.to_wire(),
                thread: thread.to_string(),
                head: head.to_wire(),
                status: Status::Completed,
                current_role: None,
                done: true,
            },
            notes: Vec::new(),
        });
    }
    let agent = match &opts.agent {
        Some(a) => a.clone(),
        None => opts.config.agent_for(&m.wf.name, &decision.role)?,
    };
    let timeout = match opts.timeout {
        Some(t) => t,
        None => opts
            .config
            .timeout_seconds()?
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64),
    };
    let (cwd, notes) = effective_cwd(&decision, m.chain.cwd(), &opts.fallback_cwd);
    let edge = decision.prompt.clone().unwrap_or_default();
    let mut env = opts.env.clone();
    env.extend([
        ("UWF_HOME".to_string(), opts.root.display().to_string()),
        ("UWF_THREAD".to_string(), thread.to_string()),
        ("UWF_ROLE".to_string(), decision.role.clone()),
        ("UWF_EDGE_PROMPT".to_string(), edge),
        ("UWF_CWD".to_string(), cwd.display().to_string()),
        ("UWF_STEP_STARTED_MS".to_string(), (opts.now)().to_string()),
    ]);
    let cmd = agent.display();
    drop(store);
    let mut agent = agent;
    if agent.command == "uwf"
        && let Some(exe) = &opts.self_exe
    {
        agent.command = exe.display().to_string();
    }
    let run = process::run_agent(&agent, &[thread, &decision.role], &cwd, &env, timeout)
        .map_err(|e| ThreadError::Agent(e.to_string()))?;
    if run.timed_out {
        return Err(ThreadError::Agent(format!(
            "agent timed out after {}s ({cmd}); its process group was killed",
            timeout.as_secs_f64()
        )));
    }
    if run.code != Some(0) {
        let err = one_line(&run.stderr);
        let err = if err.is_empty() {
            format!(
                "exit code {}",
                run.code.map_or("none".into(), |c| c.to_string())
            )
        } else {
            err
        };
        return Err(ThreadError::Agent(format!(
            "agent command failed ({cmd}): {err}"
        )));
    }
    let id = returned_id(&run, &cmd)?;
    let store = Store::open(opts.db_path)?;
    let output = conclude(
        &store,
        thread,
        m,
        &decision.role,
        id,
        (opts.now)(),
        Some(me),
    )?;
    Ok(StepResult { output, notes })
}

/// Checks the StepNode `id` an agent returned and moves the head to it (archiving the thread
/// when the moderator then says `$END`).
fn conclude(
    store: &Store,
    thread: &str,
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
    } = m;
    let head = chain.head();
    let snap = store.snapshot()?;
    let p = check_returned(&snap, id, chain.start_id, head, role)?;
    let field = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    history.steps.push(StepView {
        role: role.to_string(),
        output: expand_output(&snap, &field("output"))?,
        detail: field("detail"),
        agent: field("agent"),
    });
    drop(snap);
    let next = workflow::next(&wf, &history, &Jsonata::default());
    let done = matches!(&next, Ok(d) if d.is_end());
    commit(store, thread, head, id, wf_id, done, now_ms, me)?;
    Ok(StepOutput {
        workflow: wf_id.to_wire(),
        thread: thread.to_string(),
        head: id.to_wire(),
        status: if done {
            Status::Completed
        } else {
            Status::Idle
        },
        current_role: next.ok().filter(|d| !d.is_end()).map(|d| d.role),
        done,
    })
}

/// Moves the head of an active thread to `step`, a StepNode written for its next role (by
/// [`super::submit`], say): the in-process form of a step, for agents that run inside the
/// caller. The same checks and the same compare-and-swap as [`step`]; refused while another
/// process holds the thread's lease.
///
/// # Errors
/// As [`step`], for the checks of the returned node.
pub fn advance(store: &Store, thread: &str, step: NodeId, now_ms: u64) -> Result<StepOutput> {
    let head = super::ops::active(store, thread)?.head;
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
}

/// Moves the head from `expected` to `new` by compare-and-swap, releases the lease and, when
/// `done`, archives the thread — all in one transaction.
#[allow(clippy::too_many_arguments)]
fn commit(
    store: &Store,
    thread: &str,
    expected: NodeId,
    new: NodeId,
    wf: NodeId,
    done: bool,
    now_ms: u64,
    me: Option<&Lease>,
) -> Result<()> {
    let outcome = store.write(|w| {
        let Some(mut rec) = w.thread(thread)? else {
            return Ok(Cas::Gone);
        };
        if rec.head != expected {
            return Ok(Cas::Moved(rec.head));
        }
        if let Some(l) = w.lease(thread)? {
            match me {
                Some(me) if is_mine(&l, me) => {
                    w.remove_lease(thread)?;
                }
                None if lease_is_live(&l) => return Ok(Cas::Busy(l.pid)),
                _ => {}
            }
        }
        if done {
            w.remove_thread(thread)?;
            w.append_history(&HistoryEntry {
                thread: thread.to_string(),
                workflow: rec.workflow.unwrap_or(wf).to_wire(),
                head: new.to_wire(),
                completed_at: now_ms,
                reason: "completed".into(),
            })?;
        } else {
            rec.head = new;
            rec.workflow = Some(rec.workflow.unwrap_or(wf));
            rec.updated_ms = now_ms;
            w.set_thread(thread, &rec)?;
        }
        Ok(Cas::Done)
    })?;
    match outcome {
        Cas::Done => Ok(()),
        Cas::Busy(pid) => Err(ThreadError::Busy {
            thread: thread.to_string(),
            pid,
        }),
        Cas::Moved(found) => Err(ThreadError::Advanced {
            thread: thread.to_string(),
            expected: expected.to_wire(),
            found: found.to_wire(),
            kept: new.to_wire(),
        }),
        Cas::Gone => Err(ThreadError::Agent(format!(
            "thread {thread} was archived while its step ran; step {new} is kept in the store"
        ))),
    }
}
