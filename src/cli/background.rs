//! `thread exec --background` and `thread stop`: the step loop in a detached uwf process, and
//! the TypeScript tool's running marker `<root>/running/<THREAD>.json` that says which process
//! runs it.
//!
//! The marker is pretty JSON (two spaces, no trailing newline)
//! `{"thread","workflow","pid","startedAt"}`, written to `running/.<thread>-<pid>.tmp` and
//! renamed, as that tool writes it, so either tool sees the other's background runs. A marker
//! whose process is gone (or is another program now) is stale and is deleted when read.

#![allow(unsafe_code)] // `pre_exec` (setsid in the child) has no safe wrapper; the block says why it is sound.

pub(crate) use crate::query::running::{live_marker, marker_path, running_threads};

use crate::query::running::{RUNNING, marker_pid, not_ended};
use crate::thread::ThreadId;
use crate::time::format_utc;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// uwf's own directory for the stderr of background workers (the TypeScript tool ignores it).
const LOGS: &str = "background";

/// The log of `thread`'s background runs (appended to).
pub(crate) fn log_path(root: &Path, thread: &ThreadId) -> PathBuf {
    root.join(LOGS).join(format!("{thread}.log"))
}

/// `new Date(ms).toISOString()`.
fn iso(ms: u64) -> String {
    format!("{}.{:03}Z", format_utc(ms).replacen(' ', "T", 1), ms % 1000)
}

/// `running/<thread>.json`, as the TypeScript tool writes it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Marker<'a> {
    thread: &'a str,
    workflow: &'a str,
    pid: u32,
    started_at: String,
}

/// Writes `thread`'s marker for process `pid` (temporary file, then rename).
///
/// # Errors
/// The directory or the file cannot be written.
pub(crate) fn write_marker(
    root: &Path,
    thread: &ThreadId,
    workflow: &str,
    pid: u32,
    now_ms: u64,
) -> io::Result<()> {
    let dir = root.join(RUNNING);
    std::fs::create_dir_all(&dir)?;
    let body = Marker {
        thread: thread.as_str(),
        workflow,
        pid,
        started_at: iso(now_ms),
    };
    let text = serde_json::to_string_pretty(&body).map_err(io::Error::other)?;
    let tmp = dir.join(format!(".{thread}-{pid}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, marker_path(root, thread))
}

/// Removes `thread`'s marker if it names `pid` (a newer run's marker is left alone).
pub(crate) fn remove_marker_of(root: &Path, thread: &ThreadId, pid: u32) {
    if marker_pid(root, thread) == Some(pid) {
        let _ = std::fs::remove_file(marker_path(root, thread));
    }
}

/// Starts `uwf <args>` detached: its own session, stdin and stdout on `/dev/null`, stderr
/// appended to `log`. Returns its pid; the process is not waited for.
///
/// # Errors
/// The log cannot be opened or the process cannot be started.
pub(crate) fn spawn_detached(args: &[String], log: &Path) -> io::Result<u32> {
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d)?;
    }
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let exe = std::env::current_exe()?;
    let mut c = Command::new(exe);
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(err));
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent; it fails only
    // for a process group leader, which a freshly forked child is not.
    unsafe {
        c.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
    let child = c.spawn()?;
    Ok(child.id())
}

/// Sends SIGTERM to `pid` and waits up to `within` for it to end; true when it has.
pub(crate) fn terminate(pid: u32, thread: &ThreadId, within: Duration) -> bool {
    let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    // A process checked just before to be a uwf worker of this thread.
    let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
    let until = Instant::now() + within;
    while not_ended(pid, thread) {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_written_as_the_typescript_tool_writes_them() {
        let d = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let t = ThreadId::parse("06DQDQD8R3SYN75HX43EQ49CJR").unwrap();
        write_marker(d.path(), &t, "W", me, 1_767_225_600_123).unwrap();
        let text = std::fs::read_to_string(marker_path(d.path(), &t)).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\n  \"thread\": \"06DQDQD8R3SYN75HX43EQ49CJR\",\n  \"workflow\": \"W\",\n  \"pid\": {me},\n  \"startedAt\": \"2026-01-01T00:00:00.123Z\"\n}}"
            )
        );
        // This test process's command line does not name the thread: the marker is stale.
        assert_eq!(live_marker(d.path(), &t), None);
        assert!(!marker_path(d.path(), &t).exists());
    }
}
