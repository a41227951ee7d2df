//! `cache/<agent>-sessions.json`: the session a coding-agent CLI used for a role of a thread,
//! so the role's next turn resumes it. Pretty JSON `{"<thread>:<role>": "<session id>"}` and a
//! newline, replaced through a temporary file, as the TypeScript tool writes it.

use crate::cas::Value;
use crate::thread::ThreadId;
use std::path::{Path, PathBuf};

fn path(root: &Path, agent: &str) -> PathBuf {
    root.join("cache").join(format!("{agent}-sessions.json"))
}

fn read(root: &Path, agent: &str) -> crate::cas::value::Map {
    std::fs::read(path(root, agent))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| Value::from_json_str(&t).ok())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
}

/// The session `agent` used for `role` of `thread`, if any.
pub fn get(root: &Path, agent: &str, thread: &ThreadId, role: &str) -> Option<String> {
    read(root, agent)
        .get(&format!("{thread}:{role}"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Records `session` for `role` of `thread`. A failure to write loses only the resume.
pub fn set(root: &Path, agent: &str, thread: &ThreadId, role: &str, session: &str) {
    let mut m = read(root, agent);
    m.insert(format!("{thread}:{role}"), Value::str(session));
    let dir = root.join("cache");
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".{agent}-sessions.{:08x}.tmp",
        std::process::id() ^ (thread.as_str().len() as u32) << 16
    ));
    let text = format!("{}\n", Value::Object(m).to_json_pretty());
    if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, path(root, agent)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
