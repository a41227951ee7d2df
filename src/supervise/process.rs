//! Running an agent process under supervision.
//!
//! The agent runs in its own process group with stdin closed. On Linux it is started with a
//! parent-death signal, so it dies with uwf even when uwf is killed with SIGKILL. Its output is
//! read without blocking from both pipes at once and capped (the tail is kept: an agent prints
//! its StepNode id last). The time limit holds even when a descendant that left the process
//! group (`setsid`) keeps the pipes open: at the limit the whole process tree is killed and the
//! pipes are given up. An [`Interrupt`] ends the agent the same way at once.
//!
//! A process with many threads and a large heap (`uwf run`) pays dearly for `fork`: the page
//! tables are copied and every write of the parent faults until the child has exec'd; and a
//! `pre_exec` hook (the parent-death signal) keeps std from using `posix_spawn`. Such a process
//! calls [`guard_agents`] first: its agents are then started by `posix_spawn` without the
//! signal, and a guardian process ([`guard_main`]), told of each agent's process group through
//! a pipe, kills the groups still running when the pipe closes, which happens however the
//! process ends.

#![allow(unsafe_code)] // `pre_exec` and ignoring signals have no safe wrapper; each block says why it is sound.

use super::interrupt::Interrupt;
use crate::thread::AgentCommand;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::Signal;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The most stdout kept from one agent run (its tail).
pub(crate) const STDOUT_CAP: usize = 8 << 20;
/// The most stderr kept from one agent run (its tail).
pub(crate) const STDERR_CAP: usize = 1 << 20;
/// How long the pipes are read after the agent exited, for output still in flight from what
/// it left behind.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How an agent run is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The time limit, from the spawn.
    pub timeout: Duration,
    /// The most stdout kept (the tail).
    pub stdout_cap: usize,
    /// The most stderr kept (the tail).
    pub stderr_cap: usize,
    /// The agent is this process's only child: descendants it orphaned (adopted through
    /// [`adopt_orphans`]) are killed when it ends.
    pub sole_child: bool,
}

impl Limits {
    /// The default caps with `timeout`.
    pub(crate) fn with_timeout(timeout: Duration) -> Limits {
        Limits {
            timeout,
            stdout_cap: STDOUT_CAP,
            stderr_cap: STDERR_CAP,
            sole_child: false,
        }
    }
}

/// How an agent run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// A signal it did not handle ended it.
    Signaled(i32),
    /// The time limit passed; its process tree was killed.
    TimedOut,
    /// An [`Interrupt`] with this signal came; its process tree was killed.
    Interrupted(i32),
}

/// The last bytes of a stream, at most a cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tail {
    buf: Vec<u8>,
    cap: usize,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Tail {
        Tail {
            buf: Vec::new(),
            cap,
        }
    }

    /// Appends `b`, forgetting the oldest bytes past the cap. Memory stays under twice the cap.
    pub(crate) fn push(&mut self, b: &[u8]) {
        if b.len() >= self.cap {
            self.buf.clear();
            self.buf.extend_from_slice(&b[b.len() - self.cap..]);
            return;
        }
        self.buf.extend_from_slice(b);
        if self.buf.len() > 2 * self.cap {
            let cut = self.buf.len() - self.cap;
            self.buf.drain(..cut);
        }
    }

    /// The kept bytes: the last `cap` bytes pushed.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[self.buf.len().saturating_sub(self.cap)..]
    }

    /// The kept bytes as text (invalid UTF-8 replaced).
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(self.bytes()).into_owned()
    }
}

/// What an agent run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentRun {
    /// How it ended.
    pub ending: Ending,
    /// The tail of its stdout.
    pub stdout: Tail,
    /// The tail of its stderr.
    pub stderr: Tail,
    /// From spawn to the end of supervision.
    pub elapsed: Duration,
}

/// Why an agent could not be run at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot start agent command ({command}): {source}")]
pub struct SpawnError {
    /// The command line.
    pub command: String,
    /// The system's error.
    #[source]
    pub source: io::Error,
}

/// Makes this process the reaper of orphaned descendants (Linux), so that what an agent
/// leaves behind, even after `setsid`, can be found and killed when the agent ends. Call it
/// only in a process whose children are all agents run with [`Limits::sole_child`].
pub(crate) fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// Runs `agent` with `extra_args` appended, in `cwd`, with `env` added to the inherited
/// environment, under `limits`, ending it early when `interrupt` fires.
///
/// Call it from a thread that outlives the agent: on Linux the parent-death signal follows
/// the spawning thread.
///
/// # Errors
/// [`SpawnError`] when the program cannot be started.
pub(crate) fn run(
    agent: &AgentCommand,
    extra_args: &[&str],
    cwd: &Path,
    env: &[(String, String)],
    limits: Limits,
    interrupt: Option<&Interrupt>,
) -> Result<AgentRun, SpawnError> {
    run_with_input(agent, extra_args, cwd, env, None, limits, interrupt)
}

/// [`run`], with `input` written to the agent's stdin (then closed) by a thread of its own.
///
/// # Errors
/// [`SpawnError`] when the program cannot be started.
pub(crate) fn run_with_input(
    agent: &AgentCommand,
    extra_args: &[&str],
    cwd: &Path,
    env: &[(String, String)],
    input: Option<Vec<u8>>,
    limits: Limits,
    interrupt: Option<&Interrupt>,
) -> Result<AgentRun, SpawnError> {
    let spawn_err = |source| SpawnError {
        command: agent.display(),
        source,
    };
    let mut cmd = Command::new(&agent.command);
    if GUARD.get().is_none() {
        die_with_parent(&mut cmd);
    }
    cmd.args(&agent.args)
        .args(extra_args)
        .current_dir(cwd)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(spawn_err)?;
    tell_guard('+', child.id());
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        // An agent that exits without reading ends the write with EPIPE, which is ignored.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    let mut s = Supervision {
        pid: child.id(),
        pidfd: pidfd_open(child.id()),
        out: Some(Pipe::new(out)),
        err: Some(Pipe::new(err)),
        stdout: Tail::new(limits.stdout_cap),
        stderr: Tail::new(limits.stderr_cap),
    };
    // A limit past what the clock can hold is no limit: a century.
    let deadline = started
        .checked_add(limits.timeout)
        .unwrap_or_else(|| started + Duration::from_secs(100 * 365 * 86_400));
    let ending = s.supervise(&mut child, deadline, limits, interrupt);
    tell_guard('-', child.id());
    Ok(AgentRun {
        ending,
        stdout: s.stdout,
        stderr: s.stderr,
        elapsed: started.elapsed(),
    })
}

/// The first argument that makes `uwf` the guardian of a process's agents ([`guard_main`]).
pub const GUARD_ARG: &str = "__guard-agents";

/// The pipe to the guardian of this process's agents.
static GUARD: OnceLock<std::sync::Mutex<std::process::ChildStdin>> = OnceLock::new();

/// Starts the guardian of this process's agents: `exe` (this program) in its [`guard_main`]
/// mode. From then on agents are started without the parent-death signal, by `posix_spawn`,
/// and the guardian kills those still running when this process ends.
///
/// # Errors
/// The guardian cannot be started.
pub(crate) fn guard_agents(exe: &Path) -> io::Result<()> {
    let mut child = Command::new(exe)
        .arg(GUARD_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pipe = child.stdin.take().expect("stdin is piped");
    let _ = GUARD.set(std::sync::Mutex::new(pipe));
    Ok(())
}

/// Tells the guardian that the agent `pid` (its process group) started (`+`) or ended (`-`).
fn tell_guard(sign: char, pid: u32) {
    if let Some(g) = GUARD.get() {
        let mut pipe = g.lock().unwrap_or_else(|e| e.into_inner());
        // One short write: a pipe never splits it. A guardian that is gone changes nothing.
        let _ = pipe.write_all(format!("{sign}{pid}\n").as_bytes());
    }
}

/// `uwf __guard-agents`: reads `+PGID` and `-PGID` lines on stdin, the process groups of the
/// agents its parent runs; when stdin closes (the parent ended, however it ended) it kills the
/// groups still listed, then exits. It ignores the terminal's and a group's SIGINT, SIGTERM
/// and SIGHUP: its parent's end is what it waits for.
pub fn guard_main() -> ! {
    use std::io::BufRead;
    // SAFETY: setting a signal's disposition to ignore touches only this process.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let mut live = std::collections::HashSet::new();
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (sign, pid) = line.split_at(line.len().min(1));
        let Ok(pid) = pid.parse::<i32>() else {
            continue;
        };
        match sign {
            "+" => {
                live.insert(pid);
            }
            "-" => {
                live.remove(&pid);
            }
            _ => {}
        }
    }
    for pgid in live {
        if let Some(pgid) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
    }
    #[allow(clippy::exit)] // `uwf __guard-agents` is a process of its own: its work ends here.
    std::process::exit(0);
}

/// On Linux, the child gets SIGKILL when the thread that spawned it ends.
fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = rustix::process::getpid();
        // SAFETY: prctl and getppid in the child are async-signal-safe system calls that
        // allocate nothing.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                // The parent may have died before the prctl took effect.
                if rustix::process::getppid() != Some(parent) {
                    return Err(rustix::io::Errno::SRCH.into());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// A pidfd of `pid` (Linux 5.3+): readable once the process exits. `None` elsewhere.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        let pid = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)?;
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// A non-blocking pipe from the agent.
struct Pipe(std::fs::File);

impl Pipe {
    fn new(fd: impl Into<OwnedFd>) -> Pipe {
        let p = Pipe(std::fs::File::from(fd.into()));
        set_nonblocking(p.fd());
        p
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Reads what is available into `tail`; false at end of file or on an error.
    fn drain(&mut self, tail: &mut Tail) -> bool {
        #[allow(clippy::large_stack_arrays)] // 64 KiB a read of an agent's pipe; stacks are 2 MiB.
        let mut buf = [0u8; 64 << 10];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => tail.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
}

fn set_nonblocking(fd: BorrowedFd<'_>) {
    let _ = rustix::io::ioctl_fionbio(fd, true);
}

struct Supervision {
    pid: u32,
    pidfd: Option<OwnedFd>,
    out: Option<Pipe>,
    err: Option<Pipe>,
    stdout: Tail,
    stderr: Tail,
}

/// Without a pidfd, how often the child is checked for exit.
const EXIT_POLL: Duration = Duration::from_millis(5);

impl Supervision {
    fn supervise(
        &mut self,
        child: &mut Child,
        deadline: Instant,
        limits: Limits,
        interrupt: Option<&Interrupt>,
    ) -> Ending {
        let mut forced: Option<Ending> = None;
        let mut status: Option<ExitStatus> = None;
        // After the agent ended: how long the pipes are still read.
        let mut pipes_until: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if status.is_none() {
                let fired = interrupt.and_then(Interrupt::signal);
                if fired.is_some() || now >= deadline {
                    forced = Some(fired.map_or(Ending::TimedOut, Ending::Interrupted));
                    kill_tree(self.pid);
                    status = child.wait().ok();
                    pipes_until = Some(Instant::now() + Duration::from_millis(50));
                    continue;
                }
            }
            if self.out.is_none() && self.err.is_none() && status.is_some() {
                break;
            }
            if let Some(until) = pipes_until
                && now >= until
            {
                // Something outside the process group holds the pipes.
                if limits.sole_child {
                    kill_orphans();
                }
                break;
            }
            let mut wait = pipes_until
                .unwrap_or(deadline)
                .saturating_duration_since(now);
            if status.is_none() && self.pidfd.is_none() {
                wait = wait.min(EXIT_POLL);
            }
            let (out_ready, err_ready, exit_ready) = self.poll(wait, status.is_none(), interrupt);
            if out_ready
                && let Some(p) = &mut self.out
                && !p.drain(&mut self.stdout)
            {
                self.out = None;
            }
            if err_ready
                && let Some(p) = &mut self.err
                && !p.drain(&mut self.stderr)
            {
                self.err = None;
            }
            if status.is_none()
                && (exit_ready || self.pidfd.is_none())
                && let Ok(Some(s)) = child.try_wait()
            {
                status = Some(s);
                // What it left in its group would hold the pipes open.
                kill_group(self.pid);
                pipes_until = Some(Instant::now() + EXIT_GRACE);
            }
        }
        if status.is_none() {
            kill_tree(self.pid);
            status = child.wait().ok();
        }
        forced.unwrap_or_else(|| ending(status))
    }

    /// Waits up to `wait` for output on the pipes, the child's exit (while `running`) or an
    /// `interrupt`; returns whether stdout, stderr and the exit are ready.
    fn poll(
        &self,
        wait: Duration,
        running: bool,
        interrupt: Option<&Interrupt>,
    ) -> (bool, bool, bool) {
        let running = running.then_some(());
        let wanted = [
            self.out.as_ref().map(Pipe::fd),
            self.err.as_ref().map(Pipe::fd),
            running.and(self.pidfd.as_ref().map(|f| f.as_fd())),
            // Only wakes the poll: the signal itself is read at the top of the caller's loop.
            running.and(interrupt.map(Interrupt::fd)),
        ];
        let mut fds = Vec::with_capacity(wanted.len());
        let mut at = [None; 4];
        for (k, fd) in wanted.into_iter().enumerate() {
            if let Some(fd) = fd {
                at[k] = Some(fds.len());
                fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
            }
        }
        let [i_out, i_err, i_exit, _] = at;
        let ms = wait.as_millis().min(i32::MAX as u128) as i64;
        // Round up, so a wait of less than a millisecond does not spin.
        let ms = if wait > Duration::ZERO && ms == 0 {
            1
        } else {
            ms
        };
        let timeout = Timespec {
            tv_sec: ms / 1000,
            tv_nsec: ms % 1000 * 1_000_000,
        };
        if let Err(e) = rustix::event::poll(&mut fds, Some(&timeout))
            && e != rustix::io::Errno::INTR
        {
            // Cannot wait on the descriptors: the caller falls back to its exit check.
            std::thread::sleep(EXIT_POLL);
        }
        let revents: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        let ready = |i: Option<usize>| i.is_some_and(|i| revents[i]);
        (ready(i_out), ready(i_err), ready(i_exit))
    }
}

/// The ending of a child that exited with `status` (`None`: it could not be waited for).
fn ending(status: Option<ExitStatus>) -> Ending {
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => Ending::Exited(c),
            (None, Some(sig)) => Ending::Signaled(sig),
            (None, None) => Ending::Exited(-1),
        },
        None => Ending::Exited(-1),
    }
}

fn kill_group(pid: u32) {
    if let Some(pgid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    }
}

fn kill_pid(pid: u32) {
    if let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(p, Signal::KILL);
    }
}

/// Kills `root`, every process descended from it (also those that left its group) and its
/// process group.
fn kill_tree(root: u32) {
    let tree = descendants(&[root]);
    kill_group(root);
    for p in tree {
        kill_pid(p);
    }
}

/// Kills the children this process adopted (see [`adopt_orphans`]) and their descendants.
fn kill_orphans() {
    for p in descendants(&[std::process::id()]) {
        kill_pid(p);
    }
}

/// Every process descended from `roots` (not the roots), from `/proc`; empty elsewhere.
fn descendants(roots: &[u32]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parent_of = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent is field 4, the second after the ")" that ends the command name.
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok())
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found: Vec<u32> = Vec::new();
    let mut frontier: Vec<u32> = roots.to_vec();
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parent_of {
            if pp == p && !found.contains(&c) && !roots.contains(&c) {
                found.push(c);
                frontier.push(c);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limits: Limits) -> AgentRun {
        let a = AgentCommand::parse("sh -c").expect("command");
        run(&a, &[script], Path::new("/"), &[], limits, None).expect("spawns")
    }

    #[test]
    fn tail_keeps_the_last_bytes_within_twice_the_cap() {
        let mut t = Tail::new(4);
        t.push(b"ab");
        t.push(b"cdef");
        assert_eq!(t.bytes(), b"cdef");
        t.push(b"0123456789");
        assert_eq!(t.bytes(), b"6789");
        for _ in 0..100 {
            t.push(b"xyz");
            assert!(t.buf.len() <= 8);
        }
        assert_eq!(t.bytes(), b"zxyz");
    }

    #[test]
    fn exit_code_and_both_streams() {
        let r = sh(
            "echo out; echo err >&2; exit 3",
            Limits::with_timeout(Duration::from_secs(20)),
        );
        assert_eq!(r.ending, Ending::Exited(3));
        assert_eq!(r.stdout.text(), "out\n");
        assert_eq!(r.stderr.text(), "err\n");
    }

    #[test]
    fn timeout_kills_the_group() {
        let r = sh(
            "sleep 30 & sleep 30; echo never",
            Limits::with_timeout(Duration::from_millis(200)),
        );
        assert_eq!(r.ending, Ending::TimedOut);
        assert!(r.stdout.bytes().is_empty());
        assert!(r.elapsed < Duration::from_secs(10));
    }

    #[test]
    fn output_past_the_cap_keeps_its_tail() {
        let mut l = Limits::with_timeout(Duration::from_secs(20));
        l.stdout_cap = 1000;
        let r = sh("head -c 100000 /dev/zero; echo; echo last", l);
        assert_eq!(r.ending, Ending::Exited(0));
        assert!(r.stdout.text().ends_with("\nlast\n"));
        assert_eq!(r.stdout.bytes().len(), 1000);
    }

    #[test]
    fn an_interrupt_ends_the_agent_at_once() {
        let i = Interrupt::new().expect("interrupt");
        i.trigger(libc::SIGTERM);
        let a = AgentCommand::parse("sleep 30").expect("command");
        let r = run(
            &a,
            &[],
            Path::new("/"),
            &[],
            Limits::with_timeout(Duration::from_secs(30)),
            Some(&i),
        )
        .expect("spawns");
        assert_eq!(r.ending, Ending::Interrupted(libc::SIGTERM));
        assert!(r.elapsed < Duration::from_secs(10));
    }
}
