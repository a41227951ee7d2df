//! The runner's submit socket: `uwf run` listens on a Unix socket and names it to its agents in
//! `UWF_SUBMIT_SOCKET`; `uwf agent submit` under it hands its submission there instead of
//! opening the store itself. The runner checks and writes it on its own store handle, through
//! its group commit, and answers with the StepNode id or the error the direct path would
//! give (message, kind, hints, the name that matched nothing), which the submitting process
//! prints and exits with as if it had done the work.
//!
//! The submitting process goes the direct way (opens the store and submits itself) when no
//! runner is named, when the runner serves another store, when the runner cannot be reached
//! or ends before it answers, and when the frontmatter fast path fails and a model is
//! configured to extract the output (the model is called by the process whose environment
//! and config name it). A submission is content-addressed: sent again the direct way, it
//! writes the same nodes and gives the same id, so a runner that ended after its commit but
//! before its answer loses nothing and duplicates nothing.
//!
//! One request per connection: the client writes one JSON object and shuts its side down; the
//! runner answers with one JSON object and closes.

use super::{CliError, Missing};
use crate::ErrorKind;
use crate::cas::NodeId;
use crate::store::Store;
use crate::thread::{self, HeldStep, Submissions, SubmitInput, ThreadId};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The variable that names the runner's socket to its agents.
pub(crate) const SOCKET_VAR: &str = "UWF_SUBMIT_SOCKET";

/// What `uwf agent submit` sends.
#[derive(Serialize, Deserialize)]
struct Request {
    /// The store file the submitting process would open, canonical.
    store: PathBuf,
    thread: String,
    role: String,
    raw: String,
    detail: Option<String>,
    agent: String,
    edge_prompt: Option<String>,
    cwd: String,
    started_ms: u64,
    now_ms: u64,
    /// Whether the submitting process has a model to extract the output with.
    has_fallback: bool,
}

/// What the runner answers.
#[derive(Serialize, Deserialize)]
enum Reply {
    /// The StepNode written.
    Id(String),
    /// The error of the direct path.
    Error(WireError),
    /// Not done here: submit the direct way (another store, or the model fallback is needed).
    Direct,
}

/// A [`CliError`] on the wire.
#[derive(Serialize, Deserialize)]
struct WireError {
    message: String,
    kind: String,
    signal: i32,
    hints: Vec<String>,
    retryable: bool,
    missing_thread: Option<String>,
    missing_workflow: Option<String>,
}

impl From<CliError> for WireError {
    fn from(e: CliError) -> Self {
        let (missing_thread, missing_workflow) = match e.missing {
            Some(Missing::Thread(t)) => (Some(t), None),
            Some(Missing::Workflow(w)) => (None, Some(w)),
            None => (None, None),
        };
        WireError {
            signal: match e.kind {
                ErrorKind::Interrupted(s) => s,
                _ => 0,
            },
            kind: e.kind.name().to_string(),
            message: e.message,
            hints: e.hints,
            retryable: e.retryable,
            missing_thread,
            missing_workflow,
        }
    }
}

impl From<WireError> for CliError {
    fn from(w: WireError) -> Self {
        let kind = match w.kind.as_str() {
            "user" => ErrorKind::User,
            "usage" => ErrorKind::Usage,
            "not_found" => ErrorKind::NotFound,
            "damaged" => ErrorKind::Damaged,
            "retry" => ErrorKind::Retry,
            "interrupted" => ErrorKind::Interrupted(w.signal),
            _ => ErrorKind::Internal,
        };
        let mut e = CliError::of(kind, w.message);
        e.hints = w.hints;
        e.retryable = w.retryable;
        e.missing = match (w.missing_thread, w.missing_workflow) {
            (Some(t), _) => Some(Missing::Thread(t)),
            (None, Some(w)) => Some(Missing::Workflow(w)),
            (None, None) => None,
        };
        e
    }
}

/// The runner's side: a listening socket in a directory of its own (mode 0700), served by a
/// pool of threads that each wait in `accept` and answer the connection they take
/// ([`Workers`]). Dropping it stops the service and removes the socket and its directory.
pub(crate) struct Service {
    dir: PathBuf,
    socket: PathBuf,
    workers: Arc<Workers>,
}

impl Service {
    /// Starts serving submissions to `store` (a redb file) on a new socket under `parent`.
    ///
    /// # Errors
    /// The directory or the socket cannot be made, or no thread can be started.
    pub(crate) fn start(
        store: Arc<Store>,
        held: Arc<Submissions>,
        parent: &Path,
    ) -> std::io::Result<Service> {
        let canonical = std::fs::canonicalize(store.path())?;
        let dir = private_dir(parent)?;
        sweep(parent, &dir);
        let socket = dir.join("submit.sock");
        let listener = match UnixListener::bind(&socket) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let service = Service {
            dir,
            socket,
            workers: Arc::new(Workers {
                answerer: Answerer {
                    store,
                    held,
                    canonical,
                },
                listener,
                closing: AtomicBool::new(false),
                idle: AtomicUsize::new(0),
            }),
        };
        // Two from the start: one runner step's submission finds a thread waiting, and the
        // thread that takes it finds another left waiting, with no thread started meanwhile.
        // (Dropped on an error, the service ends those started and removes its socket.)
        for _ in 0..2 {
            Workers::spawn(&service.workers)?;
        }
        Ok(service)
    }

    /// The socket's path, for [`SOCKET_VAR`].
    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let w = &self.workers;
        w.closing.store(true, Ordering::SeqCst);
        // Shutting the listening socket down wakes every thread waiting in `accept` (which
        // then fails at once, here and after), and each sees the flag and ends. A thread
        // answering meanwhile finishes its answer first (not waited for: a client that never
        // ends its request must not hold up the runner's end).
        let _ = rustix::net::shutdown(&w.listener, rustix::net::Shutdown::Both);
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// What answers a connection: the runner's store, its held steps, its store file's path.
struct Answerer {
    store: Arc<Store>,
    held: Arc<Submissions>,
    canonical: PathBuf,
}

/// The threads that answer connections, each taking its own from `accept` (no hand-off
/// between threads on a submission's way). A thread that takes a connection when no other
/// waits starts one more first, and each stays for the next (a thread and its allocator arena
/// started per submission cost more than the answer). They end when the service does.
struct Workers {
    answerer: Answerer,
    listener: UnixListener,
    closing: AtomicBool,
    /// Threads waiting in `accept`.
    idle: AtomicUsize,
}

impl Workers {
    fn spawn(w: &Arc<Workers>) -> std::io::Result<()> {
        let w = w.clone();
        std::thread::Builder::new()
            .name("uwf-submit".into())
            .spawn(move || w.run())
            .map(drop)
    }

    /// Takes connections and answers them until the service ends.
    fn run(self: Arc<Self>) {
        loop {
            self.idle.fetch_add(1, Ordering::SeqCst);
            let conn = self.listener.accept();
            let left = self.idle.fetch_sub(1, Ordering::SeqCst) - 1;
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            let Ok((conn, _)) = conn else {
                // Out of descriptors, say: the agents submit the direct way meanwhile.
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            };
            // A thread that cannot start leaves the others to take the next connections.
            if left == 0 {
                let _ = Workers::spawn(&self);
            }
            serve(&self.answerer, conn);
        }
    }
}

/// A new directory only this user can enter, under `parent`.
fn private_dir(parent: &Path) -> std::io::Result<PathBuf> {
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for i in 0..16u32 {
        let d = parent.join(format!("uwf-run-{pid}-{:08x}", nanos.wrapping_add(i)));
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no directory for the submit socket")))
}

/// Removes the socket directories under `parent` that runners killed before they could remove
/// them left behind: those of this user (the owner of `mine`) whose process is gone.
fn sweep(parent: &Path, mine: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = std::fs::metadata(mine).map(|m| m.uid()) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("uwf-run-"))
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && path != mine && !crate::proc::pid_alive(pid) {
            let _ = std::fs::remove_file(path.join("submit.sock"));
            let _ = std::fs::remove_dir(&path);
        }
    }
}

/// Answers one connection.
fn serve(a: &Answerer, mut conn: UnixStream) {
    // Room for a usual submission, read in one call.
    let mut buf = Vec::with_capacity(16 << 10);
    if conn.read_to_end(&mut buf).is_err() {
        return;
    }
    let Ok(req) = serde_json::from_slice::<Request>(&buf) else {
        return;
    };
    let reply = answer(&a.store, &a.held, &a.canonical, &req);
    // Answered before the line is logged: the agent waits on the answer, not on the log.
    if let Ok(bytes) = serde_json::to_vec(&reply) {
        let _ = conn.write_all(&bytes);
    }
    drop(conn);
    tracing::info!(
        tag = "SBM7RNQX",
        thread = %req.thread,
        role = %req.role,
        status = match &reply {
            Reply::Id(_) => "ok",
            Reply::Error(_) => "error",
            Reply::Direct => "direct",
        },
        "agent submit handed to the runner"
    );
}

/// What the direct path would give for `req`, from the runner's store: its writes held for
/// the head move of the thread's step when one waits for its agent (`held`), else written.
fn answer(store: &Store, held: &Submissions, canonical: &Path, req: &Request) -> Reply {
    if req.store != canonical {
        return Reply::Direct;
    }
    let thread = match ThreadId::parse(&req.thread) {
        Ok(t) => t,
        Err(e) => return Reply::Error(CliError::new(e).into()),
    };
    let input = SubmitInput {
        thread: &thread,
        role: &req.role,
        raw: &req.raw,
        detail: req.detail.as_deref(),
        detail_id: None,
        detail_nodes: &[],
        assembled_prompt: None,
        fallback: None,
        agent: &req.agent,
        edge_prompt: req.edge_prompt.as_deref(),
        cwd: &req.cwd,
        started_ms: req.started_ms,
        now_ms: req.now_ms,
        usage: &[],
        hold: None,
    };
    let hold = HeldStep::default();
    let waiting = held.expects(&thread);
    let input = SubmitInput {
        hold: waiting.is_some().then_some(&hold),
        ..input
    };
    let at = waiting.flatten();
    match thread::submit_unless_fallback(store, &input, req.has_fallback, at.as_deref()) {
        Ok(Some(id)) => {
            // The step stopped waiting meanwhile: written now, as without a step.
            if let Some(w) = hold.take().and_then(|w| held.hold(&thread, w))
                && let Err(e) = store.write_grouped(move |tx| w.write(tx).map(drop))
            {
                return Reply::Error(CliError::from(thread::ThreadError::from(e)).into());
            }
            Reply::Id(id.to_string())
        }
        Ok(None) => Reply::Direct,
        Err(e) => Reply::Error(CliError::from(e).into()),
    }
}

/// What `uwf agent submit` gives to [`handoff`].
pub(crate) struct Submission<'a> {
    /// The store file the direct path would open.
    pub store: &'a Path,
    pub thread: &'a ThreadId,
    pub role: &'a str,
    pub raw: &'a str,
    pub detail: Option<&'a str>,
    pub agent: &'a str,
    pub edge_prompt: Option<&'a str>,
    pub cwd: &'a str,
    pub started_ms: u64,
    pub now_ms: u64,
    pub has_fallback: bool,
}

/// Hands a submission to the runner named by `socket`: the StepNode id or the direct path's
/// error, or `None` when it must be submitted the direct way (see the module documentation).
pub(crate) fn handoff(socket: &Path, s: &Submission<'_>) -> Option<Result<NodeId, CliError>> {
    let store = std::fs::canonicalize(s.store).ok()?;
    let req = Request {
        store,
        thread: s.thread.to_string(),
        role: s.role.to_string(),
        raw: s.raw.to_string(),
        detail: s.detail.map(str::to_string),
        agent: s.agent.to_string(),
        edge_prompt: s.edge_prompt.map(str::to_string),
        cwd: s.cwd.to_string(),
        started_ms: s.started_ms,
        now_ms: s.now_ms,
        has_fallback: s.has_fallback,
    };
    let bytes = serde_json::to_vec(&req).ok()?;
    let mut conn = UnixStream::connect(socket).ok()?;
    conn.write_all(&bytes).ok()?;
    conn.shutdown(std::net::Shutdown::Write).ok()?;
    let mut buf = Vec::new();
    conn.read_to_end(&mut buf).ok()?;
    match serde_json::from_slice::<Reply>(&buf).ok()? {
        Reply::Id(id) => NodeId::parse(&id).ok().map(Ok),
        Reply::Error(e) => Some(Err(e.into())),
        Reply::Direct => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A request for another store than the service's, answered `Direct` without reading it.
    fn elsewhere(socket: &Path) -> Reply {
        let req = Request {
            store: PathBuf::from("/nonexistent/uwf.redb"),
            thread: "06H13HTJ7DG752A6X69CV6HJP4".into(),
            role: "worker".into(),
            raw: String::new(),
            detail: None,
            agent: "test".into(),
            edge_prompt: None,
            cwd: "/".into(),
            started_ms: 0,
            now_ms: 0,
            has_fallback: false,
        };
        let mut conn = UnixStream::connect(socket).unwrap();
        conn.write_all(&serde_json::to_vec(&req).unwrap()).unwrap();
        conn.shutdown(std::net::Shutdown::Write).unwrap();
        let mut buf = Vec::new();
        conn.read_to_end(&mut buf).unwrap();
        serde_json::from_slice(&buf).unwrap()
    }

    /// Connections that arrive together, more than the threads the service starts with, are
    /// each answered; once the service is dropped its socket is gone and every thread has
    /// ended, releasing the store.
    #[test]
    fn every_connection_is_answered_and_the_threads_end_with_the_service() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("uwf.redb")).unwrap());
        let service =
            Service::start(store.clone(), Arc::default(), dir.path()).expect("the service");
        let socket = service.socket().to_path_buf();
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            let clients: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        (0..5).map(|_| elsewhere(&socket)).collect::<Vec<_>>()
                    })
                })
                .collect();
            for c in clients {
                let replies = c.join().unwrap();
                assert_eq!(replies.len(), 5);
                assert!(replies.iter().all(|r| matches!(r, Reply::Direct)));
            }
        });
        assert!(Arc::strong_count(&store) > 1, "the threads hold the store");
        drop(service);
        assert!(!socket.exists(), "the socket is removed");
        assert!(UnixStream::connect(&socket).is_err());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&store) > 1 {
            assert!(Instant::now() < deadline, "a thread outlived its service");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
