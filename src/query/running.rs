//! The running markers of background runs (`<root>/running/<THREAD>.json`, the TypeScript
//! tool's): which live process runs a thread. A marker whose process is gone (or is another
//! program now) is stale and is deleted when read.

use crate::thread::ThreadId;
use std::path::{Path, PathBuf};

/// The directory of running markers under the root.
pub(crate) const RUNNING: &str = "running";

/// The marker file of `thread`.
pub(crate) fn marker_path(root: &Path, thread: &ThreadId) -> PathBuf {
    root.join(RUNNING).join(format!("{thread}.json"))
}

/// The pid a marker names, if the file exists and holds one.
pub(crate) fn marker_pid(root: &Path, thread: &ThreadId) -> Option<u32> {
    let text = std::fs::read_to_string(marker_path(root, thread)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("pid")?.as_u64().and_then(|p| u32::try_from(p).ok())
}

/// Whether `pid` is a live process running `thread` (its command line names the thread; a
/// zombie has ended). Without `/proc`, whether the pid exists at all.
pub(crate) fn runs_thread(pid: u32, thread: &ThreadId) -> bool {
    worker(pid, thread) == Worker::Runs
}

/// Whether `pid`, found before to run `thread`, has not ended yet: it runs it still, or it is on
/// its way out (once an ending process has let go of its memory, its command line reads empty,
/// though it is not yet a zombie).
pub(crate) fn not_ended(pid: u32, thread: &ThreadId) -> bool {
    worker(pid, thread) != Worker::Other
}

/// What process `pid` is to `thread`'s background run.
#[derive(Debug, PartialEq)]
enum Worker {
    Runs,
    Exiting,
    Other,
}

fn worker(pid: u32, thread: &ThreadId) -> Worker {
    if !crate::proc::pid_alive(pid) {
        return Worker::Other;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return if Path::new("/proc/self").exists() {
            Worker::Other
        } else {
            Worker::Runs
        };
    };
    if ended(&stat) {
        return Worker::Other;
    }
    // A reused pid runs some other command line; the TypeScript tool's worker names the
    // thread as it was given, in any case.
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(c) if c.is_empty() => Worker::Exiting,
        Ok(c)
            if String::from_utf8_lossy(&c)
                .to_ascii_uppercase()
                .contains(thread.as_str()) =>
        {
            Worker::Runs
        }
        _ => Worker::Other,
    }
}

/// Whether a `/proc/<pid>/stat` line is a zombie's or a dead process's.
fn ended(stat: &str) -> bool {
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().next());
    matches!(state, Some("Z" | "X"))
}

/// The pid of `thread`'s live background run; a stale marker is deleted.
pub(crate) fn live_marker(root: &Path, thread: &ThreadId) -> Option<u32> {
    let path = marker_path(root, thread);
    if !path.exists() {
        return None;
    }
    match marker_pid(root, thread) {
        Some(pid) if runs_thread(pid, thread) => Some(pid),
        _ => {
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

/// The threads with a live background run (stale markers are deleted).
pub(crate) fn running_threads(root: &Path) -> std::collections::HashSet<ThreadId> {
    let Ok(dir) = std::fs::read_dir(root.join(RUNNING)) else {
        return Default::default();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            // Temporary files (`.<thread>-<pid>.tmp`) are no thread ids.
            let thread = ThreadId::parse(name.strip_suffix(".json")?).ok()?;
            live_marker(root, &thread).map(|_| thread)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_or_reaped_process_is_not_exiting() {
        let t = ThreadId::parse("06DQDQD8R3SYN75HX43EQ49CJR").unwrap();
        assert_ne!(
            worker(std::process::id(), &t),
            Worker::Exiting,
            "this process runs"
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_ne!(worker(pid, &t), Worker::Exiting, "a reaped child is gone");
        assert!(ended("12 (a b) Z 1 12"));
        assert!(!ended("12 (a) b) S 1 12"));
    }
}
