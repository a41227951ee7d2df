//! Running an agent process, and telling whether a lease owner is still alive.

use super::config::AgentCommand;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// What an agent process did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRun {
    /// Exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
    /// True when the time limit ended it.
    pub timed_out: bool,
}

/// Why an agent could not be run at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot start agent command ({command}): {source}")]
pub struct SpawnError {
    /// The command line.
    pub command: String,
    /// The system's error.
    pub source: std::io::Error,
}

/// Runs `agent` with `extra_args` appended, in `cwd`, with `env` added to the inherited
/// environment, stdin closed. The agent runs in its own process group; when `timeout` passes,
/// the whole group is killed.
///
/// # Errors
/// [`SpawnError`] when the program cannot be started.
pub fn run_agent(
    agent: &AgentCommand,
    extra_args: &[&str],
    cwd: &Path,
    env: &[(String, String)],
    timeout: Duration,
) -> Result<AgentRun, SpawnError> {
    let mut cmd = Command::new(&agent.command);
    cmd.args(&agent.args)
        .args(extra_args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|source| SpawnError {
        command: agent.display(),
        source,
    })?;
    let pid = child.id();
    let mut out = child.stdout.take().expect("stdout is piped");
    let mut err = child.stderr.take().expect("stderr is piped");
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    let timed_out = match rx.recv_timeout(timeout) {
        Ok(()) => false,
        Err(_) => {
            kill_group(pid);
            true
        }
    };
    let status = waiter.join().expect("waiter thread does not panic");
    if !timed_out {
        // Children the agent left behind in its group would hold the pipes open.
        kill_group(pid);
    }
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    let code = status.ok().and_then(|s| s.code());
    Ok(AgentRun {
        code: if timed_out { None } else { code },
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        timed_out,
    })
}

fn kill_group(pid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pid) {
        // SAFETY: killpg only sends a signal; the group is the one the agent was started in.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// Whether process `pid` exists (`kill(pid, 0)` succeeds or fails only for permission).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: signal 0 checks for existence and sends nothing.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// This host's boot id (Linux), or "" when unknown.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The start time of process `pid` in clock ticks since boot (Linux), or 0 when unknown.
pub fn start_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Field 22, counted after the ")" that ends the command name.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_has_a_start_time() {
        assert!(pid_alive(std::process::id()));
        if Path::new("/proc/self/stat").exists() {
            assert!(start_ticks(std::process::id()) > 0);
        }
    }

    #[test]
    fn timeout_kills_the_group() {
        let a = AgentCommand::parse("sh -c").unwrap();
        let r = run_agent(
            &a,
            &["sleep 30 & sleep 30; echo never"],
            Path::new("/"),
            &[],
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(r.timed_out);
        assert!(r.stdout.is_empty());
    }
}
