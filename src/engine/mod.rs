//! The supervised step: lease, moderator, agent under supervision, checks, compare-and-swap of
//! the head.
//!
//! A step holds one store handle from start to end (many processes open the file at once,
//! and the agent may use it meanwhile through `uwf agent submit`). It takes the thread's lease
//! in the transaction that reads the head; a `LeaseGuard` gives the lease back however
//! the step ends, and the head move that succeeds releases it in its own transaction. The
//! agent runs under the `supervisor`: its own process group, killed with uwf, output capped, a
//! time limit that holds against descendants that keep the pipes open, and an `Interrupt`
//! (SIGINT/SIGTERM) that ends it at once.
//!
//! An agent speaks one of two protocols (`AgentProtocol`): uwf's (`CMD <thread> <role>`,
//! the agent uses the store) or the TypeScript tool's (`CMD --thread T --role R --prompt P`,
//! the agent uses only the files under the root: `interchange::agent_root` makes
//! them current before it runs, and the node files it wrote are imported after).
//!
//! Every failure is a [`StepError`] that says whether a retry of the same step may succeed
//! ([`StepError::retryable`]); the head is unchanged on every error.

mod interrupt;
mod lease;
pub(crate) mod supervisor;

pub(crate) use interrupt::Interrupt;
pub use lease::{boot_id, start_ticks};
pub(crate) use lease::{lease_is_live, lease_of, pid_alive};
pub(crate) use supervisor::{Ending, Limits, SpawnError, adopt_orphans, guard_agents};
pub use supervisor::{GUARD_ARG, guard_main};

use crate::cas::{NodeId, Value};
use crate::interchange::transfer::{ImportOptions, TransferError};
use crate::interchange::{agent_root, layout::CAS_DIR, transfer};
use crate::store::{HistoryEntry, Lease, Snapshot, Store};
use crate::thread::chain::{Moderated, expand_output, load_moderated};
use crate::thread::{
    AgentCommand, AgentProtocol, Config, Status, StepOutput, ThreadError, ThreadId,
};
use crate::workflow::nodes::{START_NODE, STEP_NODE, StepNode};
use crate::workflow::{self, Decision, FinishReason, Jsonata, StepView};
use lease::{LeaseGuard, is_mine};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The agent time limit when neither `--timeout` nor `timeoutSeconds` is given.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a step failed. The head is unchanged; a StepNode the agent wrote stays stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// The thread, its workflow, the moderator, the config or the store failed.
    #[error(transparent)]
    Thread(#[from] ThreadError),
    /// The agent program could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The agent ran past its time limit.
    #[error("agent timed out after {secs}s ({command}); its process tree was killed")]
    Timeout {
        /// The agent command line.
        command: String,
        /// The limit in seconds.
        secs: f64,
    },
    /// An agent called with uwf's protocol answered with the usage of the TypeScript tool's.
    #[error(
        "agent command failed ({command}): {stderr}; it looks like an agent for the TypeScript tool's protocol; set protocol: 7a0c on its config entry or pass --agent-protocol 7a0c"
    )]
    WrongProtocol {
        /// The agent command line.
        command: String,
        /// The tail of its stderr, on one line.
        stderr: String,
    },
    /// The files a 7a0c agent works on could not be written or read back.
    #[error(transparent)]
    Files(TransferError),
    /// The agent exited unsuccessfully.
    #[error("agent command failed ({command}): {}", if .stderr.is_empty() { .status.as_str() } else { .stderr.as_str() })]
    Failed {
        /// The agent command line.
        command: String,
        /// `exit code N` or `killed by signal N`.
        status: String,
        /// The tail of its stderr, on one line.
        stderr: String,
    },
    /// The agent's stdout does not end with a node id or `{"stepHash": …}`.
    #[error("{message} ({command})")]
    BadOutput {
        /// The agent command line.
        command: String,
        /// What is wrong.
        message: String,
    },
    /// The agent returned an id that is not stored.
    #[error("agent returned {id}, which is not in the store")]
    Missing {
        /// The id it printed.
        id: NodeId,
    },
    /// The agent returned a node that is not a StepNode.
    #[error("agent returned hash that is not a StepNode: {id} (type {type_id})")]
    NotStep {
        /// The node.
        id: NodeId,
        /// Its type.
        type_id: NodeId,
    },
    /// The agent returned a step of another thread.
    #[error(
        "agent returned step {id} of another thread: its start is {found}, expected {expected}"
    )]
    WrongThread {
        /// The step.
        id: NodeId,
        /// Its `start`.
        found: String,
        /// This thread's StartNode.
        expected: NodeId,
    },
    /// The agent returned a step that does not continue the head.
    #[error("agent returned step {id} whose prev is {found}, expected {expected} (the head)")]
    WrongPrev {
        /// The step.
        id: NodeId,
        /// Its `prev`, as JSON.
        found: String,
        /// The head, as JSON.
        expected: String,
    },
    /// The agent returned a step for another role.
    #[error("agent returned step {id} for role \"{found}\", expected role \"{expected}\"")]
    WrongRole {
        /// The step.
        id: NodeId,
        /// Its role.
        found: String,
        /// The role the moderator chose.
        expected: String,
    },
    /// Another live process is running a step of the thread.
    #[error("thread {thread} is busy: step in progress by pid {pid}")]
    Busy {
        /// The thread.
        thread: String,
        /// The lease owner.
        pid: u32,
    },
    /// The head moved between the start and the end of the step.
    #[error(
        "thread advanced concurrently: {thread} head is {found}, expected {expected}; step {kept} is kept in the store"
    )]
    Advanced {
        /// The thread.
        thread: String,
        /// The head the step started from.
        expected: NodeId,
        /// The head found at the end.
        found: NodeId,
        /// The node the step produced.
        kept: NodeId,
    },
    /// A node the step adds was removed by a garbage collection while the step ran.
    #[error(
        "node {missing} that step {kept} reaches was removed by garbage collection while the step ran; run the step again"
    )]
    Collected {
        /// The thread.
        thread: String,
        /// The node that is gone.
        missing: NodeId,
        /// The node the step produced.
        kept: NodeId,
    },
    /// The thread was finished (cancelled, say) while the step ran.
    #[error("thread {thread} was archived while its step ran; step {kept} is kept in the store")]
    Archived {
        /// The thread.
        thread: String,
        /// The node the step produced.
        kept: NodeId,
    },
    /// The thread waits for room under its workflow's concurrency limit.
    #[error(
        "thread {thread} is queued: its workflow is at its concurrency limit; it starts when another thread of it ends (\"uwf run\" starts it then)"
    )]
    Queued {
        /// The thread.
        thread: String,
    },
    /// The thread is paused.
    #[error("thread {thread} is paused; \"uwf thread resume {thread}\" lets it go on")]
    Paused {
        /// The thread.
        thread: String,
    },
    /// The step failed, and with it the thread: its `maxRetries`-th failure in a row.
    #[error(
        "{last}; thread {thread} failed after {attempts} failed steps in a row (\"uwf thread resume {thread}\" retries it)"
    )]
    FailedForGood {
        /// The thread.
        thread: String,
        /// The failures in a row.
        attempts: u32,
        /// The last failure.
        last: Box<StepError>,
    },
    /// The thread took as many steps as its round limit allows; it failed.
    #[error("thread {thread} reached its round limit of {rounds} steps and failed")]
    RoundLimit {
        /// The thread.
        thread: String,
        /// The limit.
        rounds: u32,
    },
    /// A model call of a built-in agent failed.
    #[error("model call failed: {0}")]
    Model(#[from] crate::llm::LlmError),
    /// A signal ended the step; its agent was killed and its lease released.
    #[error("interrupted by signal {signal}; the agent was stopped and the thread is unchanged")]
    Interrupted {
        /// The signal.
        signal: i32,
    },
}

impl StepError {
    /// Whether this is a failure of the step's agent or its output, which counts towards the
    /// thread's `maxRetries` (not a busy, queued, paused or finished thread, an interrupt, a
    /// config or store failure).
    pub fn counts_as_failure(&self) -> bool {
        matches!(
            self,
            StepError::Spawn(_)
                | StepError::Timeout { .. }
                | StepError::WrongProtocol { .. }
                | StepError::Failed { .. }
                | StepError::BadOutput { .. }
                | StepError::Missing { .. }
                | StepError::NotStep { .. }
                | StepError::WrongThread { .. }
                | StepError::WrongPrev { .. }
                | StepError::WrongRole { .. }
                | StepError::Model(_)
                | StepError::Thread(ThreadError::Extract { .. })
        )
    }

    /// Whether the same step may succeed if run again with nothing changed: the thread was
    /// busy or moved on, or the agent failed in a way that may not repeat (time limit, exit
    /// status, unusable output).
    pub fn retryable(&self) -> bool {
        if let StepError::Model(e) = self {
            return e.retryable();
        }
        // A lost connection to the store's server, or a transaction it aborted: nothing
        // half-written, the step may run again.
        if let StepError::Thread(ThreadError::Store(crate::store::StoreError::Server {
            retry: true,
            ..
        })) = self
        {
            return true;
        }
        matches!(
            self,
            StepError::Busy { .. }
                | StepError::Advanced { .. }
                | StepError::Collected { .. }
                | StepError::Timeout { .. }
                | StepError::Failed { .. }
                | StepError::BadOutput { .. }
        )
    }
}

impl From<crate::store::StoreError> for StepError {
    fn from(e: crate::store::StoreError) -> Self {
        StepError::Thread(e.into())
    }
}

impl From<TransferError> for StepError {
    fn from(e: TransferError) -> Self {
        match e {
            TransferError::Store(s) => s.into(),
            e => StepError::Files(e),
        }
    }
}

impl From<workflow::ModeratorError> for StepError {
    fn from(e: workflow::ModeratorError) -> Self {
        StepError::Thread(e.into())
    }
}

/// Result alias of the engine.
pub(crate) type Result<T, E = StepError> = std::result::Result<T, E>;

/// What one step needs from its caller.
pub(crate) struct StepOptions<'a> {
    /// The open store; held for the whole step.
    pub store: &'a Store,
    /// The storage root (`UWF_HOME` of the agent).
    pub root: &'a Path,
    /// The thread.
    pub thread: &'a ThreadId,
    /// `--agent` (with its protocol): overrides the config.
    pub agent: Option<AgentCommand>,
    /// `config.yaml`.
    pub config: &'a Config,
    /// The models of the config, for built-in agents and model extraction.
    pub models: &'a crate::builtin::Models,
    /// Consecutive failed steps after which the thread fails.
    pub max_retries: u32,
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
    /// Ends the agent and the step when set.
    pub interrupt: Option<&'a Interrupt>,
    /// The agent is this process's only child (see [`Limits::sole_child`]).
    pub sole_child: bool,
}

/// The result of one step, and notes for stderr.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepResult {
    /// The thread's state after the step.
    pub output: StepOutput,
    /// Things the user should know (e.g. a fallback working directory).
    pub notes: Vec<String>,
}

/// Runs one step of `opts.thread`: the moderator picks the role, the agent runs and returns a
/// StepNode, and the head moves to it by compare-and-swap. At `$END` the thread is archived in
/// the same transaction.
///
/// # Errors
/// A [`StepError`]; the head is unchanged and the lease released.
pub(crate) fn step(opts: &StepOptions<'_>) -> Result<StepResult> {
    let agent = std::cell::RefCell::new(String::new());
    let e = match step_inner(opts, &agent) {
        Ok(r) => return Ok(r),
        Err(e) => e,
    };
    if e.counts_as_failure() {
        let failure = crate::store::StepFailure {
            time_ms: (opts.now)(),
            agent: agent.borrow().clone(),
            message: e.to_string(),
        };
        tracing::warn!(
            tag = "FR23R1AV",
            thread = %opts.thread,
            agent = %failure.agent,
            error = %failure.message,
            "step failed"
        );
        if crate::thread::record_failure(opts.store, opts.thread, failure, opts.max_retries)? {
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

fn step_inner(
    opts: &StepOptions<'_>,
    agent_name: &std::cell::RefCell<String>,
) -> Result<StepResult> {
    interrupted(opts.interrupt)?;
    let store = opts.store;
    let (mut guard, head) =
        LeaseGuard::acquire(store, opts.thread, lease_of(opts.pid, (opts.now)()))?;
    let mut m = load_moderated(store, head)?;
    let decision = workflow::next(&m.wf, &m.history, &Jsonata::default())?;
    tracing::info!(
        tag = "JN8SQVEH",
        thread = %opts.thread,
        workflow = %m.wf_id,
        role = %decision.role,
        "moderator chose {}",
        decision.role
    );
    if !decision.is_end()
        && let Some(rounds) = store.thread_state(opts.thread)?.max_rounds
        && {
            m.complete(store)?;
            m.history.steps.len() >= rounds as usize
        }
    {
        let message = format!("reached its round limit of {rounds} steps");
        crate::thread::lifecycle::fail(
            store,
            opts.thread,
            crate::store::StepFailure {
                time_ms: (opts.now)(),
                agent: String::new(),
                message,
            },
        )?;
        guard.disarm();
        tracing::error!(
            tag = "EZDSG36W",
            thread = %opts.thread,
            rounds,
            "thread failed: reached its round limit"
        );
        return Err(StepError::RoundLimit {
            thread: opts.thread.to_string(),
            rounds,
        });
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
                done: true,
                now_ms: (opts.now)(),
                me: Some(&me),
            },
        )?;
        guard.disarm();
        return Ok(StepResult {
            output: StepOutput {
                workflow: wf_id.to_wire(),
                thread: opts.thread.clone(),
                head: head.to_wire(),
                status: Status::Completed,
                current_role: None,
                done: true,
                last_error: None,
                running: None,
            },
            notes: Vec::new(),
        });
    }
    let (id, notes) = run_agent(opts, &mut m, &decision, agent_name)?;
    let me = guard.lease().clone();
    let output = conclude(
        store,
        opts.thread,
        m,
        &decision.role,
        id,
        (opts.now)(),
        Some(&me),
    )?;
    guard.disarm();
    Ok(StepResult { output, notes })
}

fn interrupted(i: Option<&Interrupt>) -> Result<()> {
    match i.and_then(Interrupt::signal) {
        Some(signal) => Err(StepError::Interrupted { signal }),
        None => Ok(()),
    }
}

/// Runs the agent the config or `--agent` names for `decision`; returns the id it printed.
///
/// An agent of the TypeScript tool's protocol gets `--thread T --role R --prompt P` and works
/// on the files under the root: before it runs, the nodes it reads are exported to `cas/` and
/// the thread's head to `threads.yaml`; after it ends, the node files it wrote are imported
/// (re-hashed and checked as any import) so the returned StepNode is checked like any other.
fn run_agent(
    opts: &StepOptions<'_>,
    m: &mut Moderated,
    decision: &Decision,
    agent_name: &std::cell::RefCell<String>,
) -> Result<(NodeId, Vec<String>)> {
    let mut agent = match &opts.agent {
        Some(a) => a.clone(),
        None => opts.config.agent_for(&m.wf.name, &decision.role)?,
    };
    *agent_name.borrow_mut() = agent.display();
    let timeout = match opts.timeout {
        Some(t) => t,
        None => opts
            .config
            .timeout_seconds()?
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64),
    };
    let (cwd, notes) = effective_cwd(decision, m.chain.cwd(), &opts.fallback_cwd);
    let mut env = opts.env.clone();
    env.extend([
        ("UWF_HOME".to_string(), opts.root.display().to_string()),
        ("UWF_THREAD".to_string(), opts.thread.to_string()),
        ("UWF_ROLE".to_string(), decision.role.clone()),
        (
            "UWF_EDGE_PROMPT".to_string(),
            decision.prompt.clone().unwrap_or_default(),
        ),
        ("UWF_CWD".to_string(), cwd.display().to_string()),
        ("UWF_STEP_STARTED_MS".to_string(), (opts.now)().to_string()),
    ]);
    if let Some(builtin) = crate::builtin::from_command(&agent) {
        let builtin = builtin
            .map_err(|e| ThreadError::Config(format!("agent \"{}\": {e}", agent.display())))?;
        // A built-in agent reads the thread's earlier steps (its prompt, its script).
        m.complete(opts.store)?;
        let m = &*m;
        let turn = crate::builtin::Turn {
            store: opts.store,
            root: opts.root,
            thread: opts.thread,
            role: &decision.role,
            edge_prompt: decision.prompt.as_deref(),
            cwd: &cwd,
            now: opts.now,
            timeout,
            interrupt: opts.interrupt,
            models: opts.models,
            env: &opts.env,
            moderated: Some(m),
        };
        let started = std::time::Instant::now();
        let id = builtin.run(&turn);
        tracing::info!(
            tag = "8VDW5NMT",
            thread = %opts.thread,
            role = %decision.role,
            agent = %agent.display(),
            status = if id.is_ok() { "ok" } else { "error" },
            duration_ms = started.elapsed().as_millis() as u64,
            "agent exit (in process)"
        );
        let id = id?;
        interrupted(opts.interrupt)?;
        return Ok((id, notes));
    }
    let prompt = decision.prompt.clone().unwrap_or_default();
    let args: Vec<&str> = match agent.protocol {
        AgentProtocol::Uwf => vec![opts.thread.as_str(), &decision.role],
        AgentProtocol::Ts7a0c => {
            let head = m.chain.head();
            agent_root::export_reachable(
                opts.store,
                opts.root,
                &[head, m.chain.start_id, m.wf_id],
            )?;
            agent_root::set_thread_head(opts.store, opts.root, opts.thread, head)?;
            env.extend([
                (
                    "UNCAGED_WORKFLOW_STORAGE_ROOT".to_string(),
                    opts.root.display().to_string(),
                ),
                (
                    "UNCAGED_CAS_DIR".to_string(),
                    opts.root.join(CAS_DIR).display().to_string(),
                ),
            ]);
            vec![
                "--thread",
                opts.thread.as_str(),
                "--role",
                &decision.role,
                "--prompt",
                &prompt,
            ]
        }
    };
    let command = agent.display();
    if agent.command == "uwf"
        && let Some(exe) = &opts.self_exe
    {
        agent.command = exe.display().to_string();
    }
    let limits = Limits {
        sole_child: opts.sole_child,
        ..Limits::with_timeout(timeout)
    };
    tracing::info!(
        tag = "8XQQT1SD",
        thread = %opts.thread,
        role = %decision.role,
        agent = %command,
        "agent start"
    );
    let started = std::time::Instant::now();
    let run = supervisor::run(&agent, &args, &cwd, &env, limits, opts.interrupt)?;
    let stderr = run.stderr.text();
    tracing::info!(
        tag = "VA8HT6J7",
        thread = %opts.thread,
        role = %decision.role,
        agent = %command,
        status = %ending_name(&run.ending),
        duration_ms = started.elapsed().as_millis() as u64,
        stderr_tail = %tail(&stderr, 400),
        "agent exit"
    );
    match run.ending {
        Ending::Interrupted(signal) => return Err(StepError::Interrupted { signal }),
        Ending::TimedOut => {
            return Err(StepError::Timeout {
                command,
                secs: timeout.as_secs_f64(),
            });
        }
        Ending::Exited(0) => {}
        Ending::Exited(_)
            if agent.protocol == AgentProtocol::Uwf
                && looks_like_7a0c_usage(&run.stderr.text()) =>
        {
            return Err(StepError::WrongProtocol {
                command,
                stderr: one_line(&run.stderr.text()),
            });
        }
        Ending::Exited(c) => {
            return Err(StepError::Failed {
                command,
                status: format!("exit code {c}"),
                stderr: one_line(&run.stderr.text()),
            });
        }
        Ending::Signaled(s) => {
            return Err(StepError::Failed {
                command,
                status: format!("killed by signal {s}"),
                stderr: one_line(&run.stderr.text()),
            });
        }
    }
    interrupted(opts.interrupt)?;
    let id = returned_id(&run.stdout.text(), &command)?;
    let mut notes = notes;
    if agent.protocol == AgentProtocol::Ts7a0c {
        let r = transfer::import_new_nodes(
            opts.store,
            opts.root,
            ImportOptions {
                now_ms: (opts.now)(),
                ..ImportOptions::default()
            },
        )?;
        if !opts.store.has(id)? {
            let wire = id.to_wire();
            let message = match r.problems.iter().find(|p| p.contains(&wire)) {
                Some(p) => format!("agent returned {wire}, whose node file was refused: {p}"),
                None => format!(
                    "agent returned {wire}, which is neither in the store nor in {}",
                    opts.root.join(CAS_DIR).display()
                ),
            };
            return Err(StepError::BadOutput { command, message });
        }
        notes.extend(r.problems.iter().map(|p| format!("note: {p}")));
        notes.extend(r.warnings.iter().map(|w| format!("note: {w}")));
    }
    Ok((id, notes))
}

/// How an agent's process ended, for the log.
fn ending_name(e: &Ending) -> String {
    match e {
        Ending::Exited(c) => format!("exit {c}"),
        Ending::Signaled(s) => format!("signal {s}"),
        Ending::TimedOut => "timed out".into(),
        Ending::Interrupted(s) => format!("interrupted by signal {s}"),
    }
}

/// The last `n` characters of `s` at most.
fn tail(s: &str, n: usize) -> &str {
    let skip = s.chars().count().saturating_sub(n);
    s.char_indices().nth(skip).map_or("", |(i, _)| &s[i..])
}

/// Whether an agent's stderr is the usage message of an agent of the TypeScript tool's
/// protocol (`usage: <agent> --thread <id> --role <role> --prompt <text>`, or commander's
/// complaint about those options), which it prints when called as `<agent> <thread> <role>`.
fn looks_like_7a0c_usage(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    (s.contains("--thread") || s.contains("--role"))
        && (s.contains("usage") || s.contains("option"))
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

/// `s` on one line: trimmed non-empty lines joined by " | ", the last 2000 characters.
fn one_line(s: &str) -> String {
    let lines: Vec<&str> = s
        .trim()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let joined = lines.join(" | ");
    let n = joined.chars().count();
    if n > 2000 {
        let cut: String = joined.chars().skip(n - 2000).collect();
        format!("…{cut}")
    } else {
        joined
    }
}

/// The node id an agent printed: the last non-empty stdout line, an id or JSON with `stepHash`.
fn returned_id(stdout: &str, command: &str) -> Result<NodeId> {
    let bad = |message: String| StepError::BadOutput {
        command: command.to_string(),
        message,
    };
    let Some(last) = stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        return Err(bad(
            "agent printed nothing on stdout; expected a StepNode id as its last line".into(),
        ));
    };
    let text = if last.starts_with('{') {
        let v = Value::from_json_str(last).map_err(|e| {
            bad(format!(
                "agent stdout last line is not valid JSON: {e}: {last}"
            ))
        })?;
        match v.get("stepHash").and_then(Value::as_str) {
            Some(h) => h.to_string(),
            None => {
                return Err(bad(format!(
                    "agent stdout JSON missing valid stepHash: {last}"
                )));
            }
        }
    } else {
        last.to_string()
    };
    NodeId::parse(&text).map_err(|_| {
        bad(format!(
            "agent stdout last line is not a node id: \"{}\"",
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
fn conclude(
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

/// A head move: the thread's head from `expected` to `new` (a step of workflow `wf`), the
/// thread archived when `done`, the lease released when it is `me`'s.
#[derive(Clone, Copy)]
struct HeadMove<'a> {
    thread: &'a ThreadId,
    expected: NodeId,
    new: NodeId,
    wf: NodeId,
    done: bool,
    now_ms: u64,
    me: Option<&'a Lease>,
}

/// How often a head move the store's server failed for a passing reason (a lost connection, a
/// deadlock it broke) is tried again before the step fails: the agent's work is stored, and a
/// step run again would run the agent again.
const COMMIT_TRIES: u32 = 6;

/// Moves the head from `expected` to `new` by compare-and-swap, releases the lease and, when
/// `done`, archives the thread — all in one transaction, tried again while the store's server
/// fails for a passing reason. Before each new try it checks whether the failed one went
/// through after all (a connection lost after the server committed).
fn commit(store: &Store, m: &HeadMove<'_>) -> Result<()> {
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
                .is_ok_and(|h| h.is_some_and(|h| h.head == new.to_wire())),
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
        done,
        now_ms,
        me,
    } = *m;
    let me = me.cloned();
    let t = thread.clone();
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
                    crate::workflow::nodes::WORKFLOW,
                    crate::workflow::nodes::WORKFLOW_EXT,
                ],
            )?
        {
            return Ok(Cas::Missing(missing));
        }
        if let Some(l) = w.lease(thread)? {
            match &me {
                Some(me) if is_mine(&l, me) => {
                    w.remove_lease(thread)?;
                }
                None if lease_is_live(&l) => return Ok(Cas::Busy(l.pid)),
                _ => {}
            }
        }
        if done {
            w.remove_thread_state(thread)?;
            w.remove_thread(thread)?;
            w.append_history(&HistoryEntry {
                thread: thread.to_string(),
                workflow: rec.workflow.unwrap_or(wf).to_wire(),
                head: new.to_wire(),
                completed_at: now_ms,
                reason: FinishReason::Completed,
            })?;
        } else {
            // A step that went through ends the run of failures.
            let state = w.thread_state(thread)?;
            if state.failures > 0 {
                w.set_thread_state(
                    thread,
                    &crate::store::ThreadState {
                        failures: 0,
                        ..state
                    },
                )?;
            }
            rec.head = new;
            rec.workflow = Some(rec.workflow.unwrap_or(wf));
            rec.updated_ms = now_ms;
            w.set_thread(thread, &rec)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returned_ids_and_bad_output() {
        let id = "2B77HPWKR4V3V";
        assert_eq!(
            returned_id(&format!("log\n{id}\n\n"), "a")
                .unwrap()
                .to_wire(),
            id
        );
        let json = format!("{{\"stepHash\":\"{id}\"}}");
        assert_eq!(returned_id(&json, "a").unwrap().to_wire(), id);
        for (out, says) in [
            ("", "printed nothing"),
            ("hello", "not a node id"),
            ("{\"x\":1}", "missing valid stepHash"),
            ("{nope", "not valid JSON"),
        ] {
            let e = returned_id(out, "a").unwrap_err();
            assert!(e.to_string().contains(says), "{out:?}: {e}");
            assert!(e.retryable());
        }
    }

    #[test]
    fn usage_of_7a0c_agents() {
        for yes in [
            "usage: uwf-hermes --thread <id> --role <role> --prompt <text>",
            "Usage: agent [options]\n  --thread <id>  thread\n  --role <role>",
            "error: required option '--thread <id>' not specified",
        ] {
            assert!(looks_like_7a0c_usage(yes), "{yes}");
        }
        for no in ["usage: agent <thread-id> <role>", "thread not found", ""] {
            assert!(!looks_like_7a0c_usage(no), "{no}");
        }
    }

    #[test]
    fn one_line_keeps_the_end() {
        assert_eq!(one_line("  a\n\n b \n"), "a | b");
        let long = "x".repeat(3000) + "END";
        let l = one_line(&long);
        assert!(l.ends_with("END"));
        assert_eq!(l.chars().count(), 2001);
    }
}
