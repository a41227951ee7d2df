//! The files an agent of the TypeScript tool's protocol (7a0c) works on, kept in step with the
//! store: such an agent reads `threads.yaml` and `cas/` under its storage root and writes its
//! nodes to `cas/`, never the store.
//!
//! Before the agent runs, [`export_reachable`] writes the node files it reads (everything
//! reachable from the thread's head and workflow, with the schemas typing them) and
//! [`set_thread_head`] lists the thread in `threads.yaml`; afterwards
//! [`super::transfer::import_new_nodes`] takes back the node files the store does not hold.
//! All of it is incremental: node files already holding the same bytes are skipped, and
//! files the store already holds are not read back.

use super::export_files::{ExportError, ExportSummary, Written, ensure_dir, write_node_file};
use super::layout::{CAS_DIR, INDEX_DIR, META_INDEX, THREADS_FILE};
use super::transfer::{TransferError, read_optional};
use super::yaml;
use crate::cas::NodeId;
use crate::store::{Store, WalkEvent};
use crate::workflow::ThreadId;
use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The lock file that serialises read-modify-writes of `threads.yaml` by uwf processes.
pub(crate) const THREADS_LOCK: &str = ".threads.yaml.lock";

/// Writes `root/cas/<ID>.bin` for every node reachable from `from` through references, and
/// for the schema typing each of them (with what those reach), up to the meta-schema. Files
/// with the same bytes are skipped. When `cas/_index/` exists, a node file written now is
/// appended to its type's index as @ocas/fs does on a put; when it does not, the TypeScript
/// tool rebuilds it from the files.
///
/// # Errors
/// A store failure, or a file that cannot be written (a link or a directory in the way).
pub(crate) fn export_reachable(
    store: &Store,
    root: &Path,
    from: &[NodeId],
) -> Result<ExportSummary, TransferError> {
    let cas = root.join(CAS_DIR);
    ensure_dir(&cas)?;
    let index = cas.join(INDEX_DIR);
    let indexed = fs::symlink_metadata(&index).is_ok_and(|m| m.is_dir());
    let mut summary = ExportSummary::default();
    let mut seen: HashSet<NodeId> = HashSet::new();
    let mut roots: Vec<NodeId> = from.to_vec();
    let mut buf = Vec::new();
    while !roots.is_empty() {
        let mut found = Vec::new();
        for r in roots.drain(..) {
            if seen.contains(&r) {
                continue;
            }
            store.walk(r, |e| {
                if let WalkEvent::Node(id) = e
                    && seen.insert(id)
                {
                    found.push(id);
                }
            })?;
        }
        let snap = store.snapshot()?;
        for id in found {
            let Some(node) = snap.get(id)? else {
                continue;
            };
            let (w, replaced) = write_node_file(&cas, id, &node.file_bytes(), &mut buf)?;
            match (w, replaced) {
                (Written::Skipped, _) => summary.skipped += 1,
                (Written::Written, true) => summary.replaced += 1,
                (Written::Written, false) => {
                    summary.written += 1;
                    if indexed {
                        append_line(&index, &node.type_id.to_wire(), id)?;
                        if node.type_id == id {
                            append_line(&index, META_INDEX, id)?;
                        }
                    }
                }
            }
            if !seen.contains(&node.type_id) {
                roots.push(node.type_id);
            }
        }
    }
    Ok(summary)
}

/// Appends `id` and a newline to the index file `name`; a link in its place is refused.
fn append_line(index: &Path, name: &str, id: NodeId) -> Result<(), ExportError> {
    let path = index.join(name);
    let mut line = id.to_wire();
    line.push('\n');
    OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|source| ExportError::Io {
            action: "append to",
            path,
            source,
        })
}

/// Lists `thread` with `head` in `root/threads.yaml`, keeping the other threads the store
/// still has active (whose agents may be running) and dropping finished ones. The file is
/// read, changed and replaced atomically under an exclusive lock on
/// `root/`[`THREADS_LOCK`], so steps running at once each find their thread in it. An
/// unreadable `threads.yaml` is rewritten from what is known: its entries are derived.
///
/// # Errors
/// A store failure, or a lock or file that cannot be written.
pub(crate) fn set_thread_head(
    store: &Store,
    root: &Path,
    thread: &ThreadId,
    head: NodeId,
) -> Result<(), TransferError> {
    let lock_path = root.join(THREADS_LOCK);
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Io {
            action,
            path,
            source,
        }
    };
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&lock_path)
        .map_err(io("open", &lock_path))?;
    lock.lock().map_err(io("lock", &lock_path))?;
    let active: HashSet<ThreadId> = store.threads()?.into_iter().map(|(t, _)| t).collect();
    let text = read_optional(&root.join(THREADS_FILE))
        .ok()
        .flatten()
        .unwrap_or_default();
    let old = yaml::read_string_map(&text, THREADS_FILE)
        .map(|m| m.entries)
        .unwrap_or_default();
    let head = head.to_wire();
    let mut entries: Vec<(String, String)> = Vec::with_capacity(old.len() + 1);
    let mut listed = false;
    for (t, h) in old {
        let key = ThreadId::parse(&t).ok();
        if key.as_ref() == Some(thread) {
            if !listed {
                entries.push((t, head.clone()));
                listed = true;
            }
        } else if key.is_some_and(|k| active.contains(&k)) {
            entries.push((t, h));
        }
    }
    if !listed {
        entries.push((thread.to_string(), head));
    }
    let text = yaml::write_string_map(entries.iter().map(|(a, b)| (a.as_str(), b.as_str())));
    super::export_files::write_atomic(root, THREADS_FILE, text.as_bytes())?;
    // The lock is released when the file is closed.
    drop(lock);
    Ok(())
}
