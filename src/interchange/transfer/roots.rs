//! The root files imported: `threads.yaml`, `workflows.yaml`/`registry.yaml`, `history.jsonl`
//! and `uwf.jsonl`, each entry checked against the store.

use super::{ImportOptions, ImportReport, TransferError};
use crate::cas::NodeId;
use crate::interchange::extra::{Extra, UWF_FILE};
use crate::interchange::history::{HistoryLine, HistoryReader};
use crate::interchange::layout::{HISTORY_FILE, REGISTRY_FILE, THREADS_FILE, WORKFLOWS_FILE};
use crate::interchange::yaml;
use crate::model::IdText;
use crate::store::{HistoryEntry, Merge, RegistryEntry, Store, StoreError, ThreadRecord};
use crate::thread::workflow_of;
use crate::workflow::nodes::{START_NODE, STEP_NODE, StepNode};
use crate::workflow::{FinishReason, ThreadId, is_workflow_type};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The text of a root file that may be absent (`None`); a symbolic link is refused.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, TransferError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(TransferError::Read {
                path: path.into(),
                message: e.to_string(),
            });
        }
        Ok(m) if m.file_type().is_symlink() => {
            return Err(TransferError::Read {
                path: path.into(),
                message: "refusing to follow a symbolic link".into(),
            });
        }
        Ok(m) if !m.is_file() => {
            return Err(TransferError::Read {
                path: path.into(),
                message: "not a regular file".into(),
            });
        }
        Ok(_) => {}
    }
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|e| TransferError::Read {
            path: path.into(),
            message: e.to_string(),
        })
}

/// Reads a YAML name map, reporting (not failing on) an unreadable or malformed file.
fn read_map(path: &Path, r: &mut ImportReport) -> Option<yaml::StringMap> {
    let text = match read_optional(path) {
        Ok(Some(t)) => t,
        Ok(None) => return None,
        Err(e) => {
            r.problems.push(format!("skipped {e}"));
            return None;
        }
    };
    match yaml::read_string_map(&text, &path.display().to_string()) {
        Ok(m) => {
            for s in &m.skipped {
                r.problems.push(format!("skipped {}: {s}", path.display()));
            }
            Some(m)
        }
        Err(e) => {
            r.problems.push(format!("skipped {}: {e}", path.display()));
            None
        }
    }
}

/// What `uwf.jsonl` of an import holds (see [`super::extra`]).
#[derive(Default)]
pub(super) struct ExtraRead {
    /// Active threads: (thread, head, time of the last head move).
    threads: Vec<(String, String, u64)>,
    /// Registry names.
    names: Vec<(String, String)>,
    /// Registry versions by name, oldest first.
    versions: indexmap::IndexMap<String, Vec<(String, u64)>>,
    /// Finished threads.
    history: Vec<HistoryEntry>,
    /// Threads' states besides their heads.
    pub states: Vec<(String, crate::store::ThreadState)>,
    /// Steps' model calls.
    pub usage: Vec<(String, crate::store::StepCalls)>,
}

/// Reads `uwf.jsonl` when present, reporting lines it skips.
pub(super) fn read_extra(dir: &Path, r: &mut ImportReport) -> Result<ExtraRead, TransferError> {
    use std::io::BufRead;
    let path = dir.join(UWF_FILE);
    let mut out = ExtraRead::default();
    if read_optional_meta(&path, r)?.is_none() {
        return Ok(out);
    }
    let f = std::fs::File::open(&path).map_err(|e| TransferError::Read {
        path: path.clone(),
        message: e.to_string(),
    })?;
    for (i, line) in std::io::BufReader::new(f).split(b'\n').enumerate() {
        let n = i + 1;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                r.problems
                    .push(format!("stopped reading {}: {e}", path.display()));
                break;
            }
        };
        let skip = |r: &mut ImportReport, why: &str| {
            r.problems
                .push(format!("skipped {}:{n}: {why}", path.display()));
        };
        if line.len() > crate::interchange::extra::MAX_LINE {
            skip(r, "line too long");
            continue;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            skip(r, "not UTF-8");
            continue;
        };
        let text = text.strip_suffix('\r').unwrap_or(text);
        if text.trim().is_empty() {
            continue;
        }
        match Extra::parse_line(text) {
            Err(why) => skip(r, &why),
            Ok(Extra::Header { .. }) => {}
            Ok(Extra::Workflow { name, workflow }) => out.names.push((name, workflow)),
            Ok(Extra::Registry {
                name,
                workflow,
                time,
            }) => out.versions.entry(name).or_default().push((workflow, time)),
            Ok(Extra::Thread {
                thread,
                head,
                updated_at,
                ..
            }) => out.threads.push((thread, head, updated_at)),
            Ok(Extra::History {
                thread,
                workflow,
                head,
                completed_at,
                reason,
            }) => out.history.push(HistoryEntry {
                thread,
                workflow: IdText::parse(workflow),
                head: IdText::parse(head),
                completed_at,
                reason: FinishReason::parse(&reason),
            }),
            Ok(Extra::Usage { step, calls }) => out.usage.push((step, calls)),
            Ok(Extra::State {
                thread,
                phase,
                max_rounds,
                failures,
                last_error,
            }) => out.states.push((
                thread,
                crate::store::ThreadState {
                    phase: match phase.as_str() {
                        "queued" => crate::store::Phase::Queued,
                        "paused" => crate::store::Phase::Paused,
                        "pausedForBudget" => crate::store::Phase::PausedForBudget,
                        _ => crate::store::Phase::Ready,
                    },
                    max_rounds: max_rounds.map(|n| n.min(u64::from(u32::MAX)) as u32),
                    failures: failures.min(u64::from(u32::MAX)) as u32,
                    last_error: last_error.map(|(time_ms, agent, message)| {
                        crate::store::StepFailure {
                            time_ms,
                            agent,
                            message,
                        }
                    }),
                },
            )),
        }
    }
    Ok(out)
}

/// A thread id as stored: upper case (ids are case-insensitive, and the TypeScript tool writes
/// upper case only); `None` unless it is 26 letters and digits.
pub(super) fn thread_key(s: &str) -> Option<ThreadId> {
    ThreadId::parse(s).ok()
}

/// A thread listed by a root file: its id and head as written, when it was last moved, and
/// the file.
type Listed = (String, String, u64, PathBuf);

pub(super) fn import_threads(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    extra: &ExtraRead,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let listed = listed_threads(dir, opts.now_ms, extra, r);
    let good = checked_threads(store, &listed, r)?;
    // Without `overwrite`, an active thread whose incoming head continues its own moves
    // forward, and one whose incoming head is behind its own is left as it is.
    let mut relations = Vec::with_capacity(good.len());
    for (t, rec) in &good {
        relations.push(match store.thread(t)? {
            Some(cur) if !opts.overwrite && cur.head != rec.head => relation(store, &cur, rec)?,
            _ => Relation::Other,
        });
    }
    let merged = merge_threads(store, &good, &relations, opts.overwrite)?;
    report_threads(&good, merged, r);
    Ok(())
}

/// The threads of `threads.yaml` (moved at `now_ms`), then those of `uwf.jsonl`.
fn listed_threads(dir: &Path, now_ms: u64, extra: &ExtraRead, r: &mut ImportReport) -> Vec<Listed> {
    let path = dir.join(THREADS_FILE);
    let mut listed: Vec<Listed> = Vec::new();
    if let Some(map) = read_map(&path, r) {
        r.threads.skipped += map.skipped.len() as u64;
        for (t, h) in map.entries {
            listed.push((t, h, now_ms, path.clone()));
        }
    }
    let extra_path = dir.join(UWF_FILE);
    for (t, h, at) in &extra.threads {
        listed.push((t.clone(), h.clone(), *at, extra_path.clone()));
    }
    listed
}

/// The threads of `listed` whose id is one and whose head is a stored StartNode or StepNode,
/// as records; the others reported as skipped.
fn checked_threads(
    store: &Store,
    listed: &[Listed],
    r: &mut ImportReport,
) -> Result<Vec<(ThreadId, ThreadRecord)>, StoreError> {
    let mut good = Vec::new();
    let snap = store.snapshot()?;
    for (thread, head, updated_ms, path) in listed {
        let skip = |r: &mut ImportReport, why: String| {
            r.threads.skipped += 1;
            r.problems.push(format!(
                "skipped thread {thread} in {}: {why}",
                path.display()
            ));
        };
        let Some(key) = thread_key(thread) else {
            skip(r, "not a thread id (26 letters and digits)".into());
            continue;
        };
        let Some(head_id) = NodeId::parse_strict(head) else {
            skip(r, format!("head \"{head}\" is not a node id"));
            continue;
        };
        match store.get(head_id)? {
            Some(n) if n.type_id == START_NODE || n.type_id == STEP_NODE => {}
            Some(n) => {
                skip(
                    r,
                    format!(
                        "head {head_id} is a node of type {}, not a StartNode or StepNode",
                        n.type_id
                    ),
                );
                continue;
            }
            None => {
                skip(r, format!("head {head_id} is not in the store"));
                continue;
            }
        }
        let rec = ThreadRecord {
            head: head_id,
            workflow: workflow_of(&snap, head_id)?,
            updated_ms: *updated_ms,
        };
        good.push((key, rec));
    }
    Ok(good)
}

/// Writes the threads `good`, each as its relation to the stored thread says, in one write.
fn merge_threads(
    store: &Store,
    good: &[(ThreadId, ThreadRecord)],
    relations: &[Relation],
    overwrite: bool,
) -> Result<Vec<Merged>, StoreError> {
    store.write(|w| {
        // A garbage collection may have removed a head since the snapshot: refused, so that
        // no thread is set to a missing node (an import run again stores it again).
        for (_, rec) in good {
            if !w.has(rec.head)? {
                return Err(StoreError::NotFound(rec.head));
            }
        }
        good.iter()
            .zip(relations)
            .map(|((t, rec), rel)| match rel {
                Relation::Ahead {
                    from,
                    workflow,
                    done,
                } => {
                    match w.thread(t)? {
                        Some(now) if now.head == *from => {}
                        _ => return Ok(Merged::Moved),
                    }
                    if let Some(l) = w.lease(t)?
                        && l.is_live()
                    {
                        return Ok(Merged::Busy(l.pid));
                    }
                    let now = w.thread(t)?.expect("checked above");
                    w.fast_forward_thread(t, &now, rec.head, *workflow, *done, rec.updated_ms)?;
                    Ok(Merged::FastForwarded)
                }
                Relation::Behind => Ok(Merged::Merge(Merge::Same)),
                Relation::Other => Ok(Merged::Merge(w.merge_thread(t, rec, overwrite)?)),
            })
            .collect::<Result<Vec<_>, _>>()
    })
}

/// Counts and reports what the import did with each thread of `good`.
fn report_threads(good: &[(ThreadId, ThreadRecord)], merged: Vec<Merged>, r: &mut ImportReport) {
    for ((thread, rec), m) in good.iter().zip(merged) {
        let m = match m {
            Merged::Merge(m) => m,
            Merged::FastForwarded => {
                r.threads.fast_forwarded += 1;
                continue;
            }
            Merged::Busy(pid) => {
                r.threads.skipped += 1;
                r.conflicts.push(format!(
                    "thread {thread} has a step running (pid {pid}); its head {} was not taken (import again when the step has ended)",
                    rec.head
                ));
                continue;
            }
            Merged::Moved => {
                r.threads.skipped += 1;
                r.conflicts.push(format!(
                    "thread {thread} moved while it was imported; left as it is"
                ));
                continue;
            }
        };
        match m {
            Merge::Inserted => r.threads.imported += 1,
            Merge::Same => r.threads.present += 1,
            Merge::Kept => {
                r.threads.skipped += 1;
                r.conflicts.push(format!(
                    "thread {thread} exists with another head; kept (use --overwrite to replace it)"
                ));
            }
            Merge::Overwritten => {
                r.threads.imported += 1;
                r.conflicts.push(format!(
                    "thread {thread} exists with another head; replaced"
                ));
            }
        }
    }
}

/// How an incoming head of an active thread stands to the thread's head.
enum Relation {
    /// It continues the head `from`: the thread moves forward to it; `done` when its workflow
    /// ends there.
    Ahead {
        from: NodeId,
        workflow: NodeId,
        done: bool,
    },
    /// The thread's head continues it: the other side is behind.
    Behind,
    /// Neither (or the same head): merged by [`crate::store::Writer::merge_thread`].
    Other,
}

/// What an import did with one thread of `threads.yaml`.
enum Merged {
    Merge(Merge),
    FastForwarded,
    /// A live step lease held by that pid: the thread is not moved.
    Busy(u32),
    /// The thread's head moved since it was read.
    Moved,
}

fn relation(store: &Store, cur: &ThreadRecord, rec: &ThreadRecord) -> Result<Relation, StoreError> {
    if continues(store, rec.head, cur.head)? {
        let moderated = crate::thread::chain::load_moderated(store, rec.head).ok();
        let Some(workflow) = moderated
            .as_ref()
            .map(|m| m.wf_id)
            .or(rec.workflow)
            .or(cur.workflow)
        else {
            return Ok(Relation::Other);
        };
        let done = moderated.is_some_and(|m| {
            crate::workflow::next(&m.wf, &m.history, &crate::workflow::Jsonata::default())
                .is_ok_and(|d| d.is_end())
        });
        return Ok(Relation::Ahead {
            from: cur.head,
            workflow,
            done,
        });
    }
    if continues(store, cur.head, rec.head)? {
        return Ok(Relation::Behind);
    }
    Ok(Relation::Other)
}

/// Whether `id` is stored as a Workflow node (the rule `thread start` applies too).
fn is_workflow_node(store: &Store, id: NodeId) -> Result<Result<(), String>, StoreError> {
    Ok(match store.get(id)? {
        None => Err(format!("{id} is not in the store")),
        Some(n) if !is_workflow_type(n.type_id) => Err(format!(
            "{id} is a node of type {}, not a Workflow",
            n.type_id
        )),
        Some(_) => Ok(()),
    })
}

/// Registry names with the workflow ids the root files give them, as written.
type Names = indexmap::IndexMap<String, String>;

pub(super) fn import_registry(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    extra: &ExtraRead,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let (mut merged, in_ts_files) = listed_names(dir, extra, r);
    let order = registration_order(&in_ts_files, extra);
    merged.sort_by_cached_key(|name, _| order.get(name).copied());
    let good = checked_names(store, merged, r)?;
    // Registry versions: a name's versions are taken whole, and only when the store has none
    // of its own (two histories of one name do not merge into one order).
    let mut versions = stored_versions(store, &dir.join(UWF_FILE), extra, r)?;
    // Names are recorded in registration order, so that each new one takes its place.
    versions.sort_by_cached_key(|(name, _)| order.get(name).copied());
    let results = store.write(|w| write_registry(w, &good, &versions, &order, opts))?;
    for ((name, _), m) in good.iter().zip(results) {
        match m {
            Merge::Inserted => r.registry.imported += 1,
            Merge::Same => r.registry.present += 1,
            Merge::Kept => {
                r.registry.skipped += 1;
                r.conflicts.push(format!("workflow \"{name}\" exists with another id; kept (use --overwrite to replace it)"));
            }
            Merge::Overwritten => {
                r.registry.imported += 1;
                r.conflicts.push(format!(
                    "workflow \"{name}\" exists with another id; replaced"
                ));
            }
        }
    }
    Ok(())
}

/// The names `workflows.yaml`, `registry.yaml` and `uwf.jsonl` give, merged, and those the
/// first two give; a name another file gives another id is reported as skipped.
fn listed_names(dir: &Path, extra: &ExtraRead, r: &mut ImportReport) -> (Names, Vec<String>) {
    let mut merged: Names = indexmap::IndexMap::new();
    let add = |merged: &mut Names, r: &mut ImportReport, path: &Path, name: String, id: String| {
        match merged.get(&name) {
            Some(other) if *other != id => {
                r.registry.skipped += 1;
                r.problems.push(format!(
                    "skipped workflow \"{name}\" in {}: another file of the root names {other}",
                    path.display()
                ));
            }
            Some(_) => {}
            None => {
                merged.insert(name, id);
            }
        }
    };
    for file in [WORKFLOWS_FILE, REGISTRY_FILE] {
        let path = dir.join(file);
        let Some(map) = read_map(&path, r) else {
            continue;
        };
        r.registry.skipped += map.skipped.len() as u64;
        for (name, id) in map.entries {
            add(&mut merged, r, &path, name, id);
        }
    }
    let in_ts_files: Vec<String> = merged.keys().cloned().collect();
    let extra_path = dir.join(UWF_FILE);
    for (name, id) in &extra.names {
        add(&mut merged, r, &extra_path, name.clone(), id.clone());
    }
    (merged, in_ts_files)
}

/// The names of `merged` whose id is a stored Workflow node; the others reported as skipped.
fn checked_names(
    store: &Store,
    merged: Names,
    r: &mut ImportReport,
) -> Result<Vec<(String, NodeId)>, StoreError> {
    let mut good = Vec::new();
    for (name, id) in merged {
        let skip = |r: &mut ImportReport, why: String| {
            r.registry.skipped += 1;
            r.problems
                .push(format!("skipped workflow \"{name}\": {why}"));
        };
        let Some(wid) = NodeId::parse_strict(&id) else {
            skip(r, format!("\"{id}\" is not a node id"));
            continue;
        };
        if let Err(why) = is_workflow_node(store, wid)? {
            skip(r, why);
            continue;
        }
        good.push((name, wid));
    }
    Ok(good)
}

/// The registry versions of `uwf.jsonl` (at `extra_path`) whose workflow is stored; the others
/// reported as skipped.
fn stored_versions(
    store: &Store,
    extra_path: &Path,
    extra: &ExtraRead,
    r: &mut ImportReport,
) -> Result<Vec<(String, Vec<RegistryEntry>)>, StoreError> {
    let mut versions: Vec<(String, Vec<RegistryEntry>)> = Vec::new();
    for (name, list) in &extra.versions {
        let mut ok = Vec::with_capacity(list.len());
        for (id, time) in list {
            match NodeId::parse_strict(id) {
                Some(wid) if store.has(wid)? => ok.push(RegistryEntry {
                    workflow: wid,
                    time_ms: *time,
                }),
                _ => r.problems.push(format!(
                    "skipped a version of workflow \"{name}\" in {}: {id} is not a stored node",
                    extra_path.display()
                )),
            }
        }
        versions.push((name.clone(), ok));
    }
    Ok(versions)
}

/// Records the names `good` and the `versions` of each name (of the names no longer
/// registered too) in registration `order`; returns what each name's merge did.
fn write_registry(
    w: &mut crate::store::Writer<'_>,
    good: &[(String, NodeId)],
    versions: &[(String, Vec<RegistryEntry>)],
    order: &std::collections::HashMap<String, usize>,
    opts: ImportOptions,
) -> Result<Vec<Merge>, StoreError> {
    let restore = |w: &mut crate::store::Writer<'_>, name: &str, list: &[RegistryEntry]| {
        if list.is_empty() || w.has_registry_history(name)? {
            return Ok(false);
        }
        for v in list {
            w.append_registry_version(name, v)?;
        }
        Ok::<_, StoreError>(true)
    };
    let mut results = Vec::with_capacity(good.len());
    let mut kept = versions.iter().peekable();
    for (name, wid) in good {
        // Versions of names no longer registered, recorded before this one.
        while let Some((n, list)) = kept.next_if(|(n, _)| order.get(n) < order.get(name)) {
            restore(w, n, list)?;
        }
        let restored = match kept.next_if(|(n, _)| n == name) {
            Some((_, list)) => restore(w, name, list)?,
            None => false,
        };
        results.push(if restored && w.registry_get(name)?.is_none() {
            w.set_registry_name(name, *wid)?;
            Merge::Inserted
        } else {
            w.merge_registry(name, *wid, opts.now_ms, opts.overwrite)?
        });
    }
    for (n, list) in kept {
        restore(w, n, list)?;
    }
    Ok(results)
}

/// The place of each name of an import in registration order: the order of `workflows.yaml`
/// and `registry.yaml` (`in_ts_files`), with the names only `uwf.jsonl` has (its registry
/// versions, written in registration order, then its names) each put before the first name of
/// both that follows it there. Where the files disagree, `workflows.yaml` wins.
fn registration_order(
    in_ts_files: &[String],
    extra: &ExtraRead,
) -> std::collections::HashMap<String, usize> {
    let mut in_extra: indexmap::IndexSet<&str> =
        extra.versions.keys().map(String::as_str).collect();
    in_extra.extend(extra.names.iter().map(|(n, _)| n.as_str()));
    let ts: HashSet<&str> = in_ts_files.iter().map(String::as_str).collect();
    // Each name only `uwf.jsonl` has, by the first name of both after it (none: at the end).
    let mut before: std::collections::HashMap<Option<&str>, Vec<&str>> = Default::default();
    let mut anchor = None;
    for n in in_extra.iter().rev() {
        if ts.contains(n) {
            anchor = Some(*n);
        } else {
            before.entry(anchor).or_default().push(n);
        }
    }
    let mut order = std::collections::HashMap::new();
    let mut place = |n: &str| {
        let at = order.len();
        order.entry(n.to_string()).or_insert(at);
    };
    for name in in_ts_files {
        for n in before
            .remove(&Some(name.as_str()))
            .unwrap_or_default()
            .iter()
            .rev()
        {
            place(n);
        }
        place(name);
    }
    for n in before.remove(&None).unwrap_or_default().iter().rev() {
        place(n);
    }
    order
}

pub(super) fn import_history(
    store: &Store,
    dir: &Path,
    extra: ExtraRead,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let mut h = HistoryImport {
        store,
        active: store.threads()?.into_iter().collect(),
        pending: Vec::new(),
    };
    let path = dir.join(HISTORY_FILE);
    if read_optional_meta(&path, r)?.is_some() {
        let f = std::fs::File::open(&path).map_err(|e| TransferError::Read {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let reader = HistoryReader::new(std::io::BufReader::new(f), path.display().to_string());
        for line in reader {
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    r.problems
                        .push(format!("stopped reading {}: {e}", path.display()));
                    break;
                }
            };
            match line {
                HistoryLine::Skipped { line, reason } => {
                    r.history.skipped += 1;
                    r.problems
                        .push(format!("skipped {}:{line}: {reason}", path.display()));
                }
                HistoryLine::Record { record, .. } => h.take(
                    HistoryEntry {
                        thread: record.thread,
                        workflow: IdText::parse(record.workflow),
                        head: IdText::parse(record.head),
                        completed_at: record.completed_at,
                        reason: record.reason,
                    },
                    r,
                )?,
            }
        }
    }
    for e in extra.history {
        h.take(e, r)?;
    }
    h.append(r)
}

/// The history part of [`import`]: lines are appended in batches, except that a line finishing
/// a thread that is active in the store is applied on its own.
struct HistoryImport<'a> {
    store: &'a Store,
    /// The store's active threads.
    active: std::collections::HashMap<ThreadId, ThreadRecord>,
    pending: Vec<HistoryEntry>,
}

impl HistoryImport<'_> {
    fn take(&mut self, mut e: HistoryEntry, r: &mut ImportReport) -> Result<(), TransferError> {
        let key = thread_key(&e.thread);
        if let Some(k) = &key {
            e.thread = k.as_str().to_string();
        }
        let Some((key, rec)) = key.and_then(|k| self.active.get(&k).cloned().map(|r| (k, r)))
        else {
            self.pending.push(e);
            if self.pending.len() >= 4096 {
                self.append(r)?;
            }
            return Ok(());
        };
        self.append(r)?;
        // The thread was finished elsewhere (the TypeScript tool, after an export): the line
        // finishes it here too when its head is the thread's head or continues it.
        let head = e.head.id();
        if !head.is_some_and(|h| continues(self.store, h, rec.head).unwrap_or(false)) {
            r.history.skipped += 1;
            r.conflicts.push(format!(
                "thread {} is active here at {}; its history line (\"{}\" at {}) does not continue it; the thread is left as it is",
                e.thread, rec.head, e.reason, e.head
            ));
            return Ok(());
        }
        let done = self.store.write(|w| {
            // Another process may have moved or finished the thread since it was read.
            match w.thread(&key)? {
                Some(now) if now.head == rec.head => {
                    w.remove_thread(&key)?;
                    if !w.has_history(&e)? {
                        w.append_history(&e)?;
                    }
                    Ok(true)
                }
                _ => Ok(false),
            }
        })?;
        self.active.remove(&key);
        if done {
            r.history.imported += 1;
        } else {
            r.history.skipped += 1;
            r.conflicts.push(format!(
                "thread {} moved while its history line was imported; left as it is",
                e.thread
            ));
        }
        Ok(())
    }

    fn append(&mut self, r: &mut ImportReport) -> Result<(), TransferError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = &self.pending;
        let added = self.store.write(|w| {
            let mut added = 0u64;
            for e in pending.iter() {
                if !w.has_history(e)? {
                    w.append_history(e)?;
                    added += 1;
                }
            }
            Ok(added)
        })?;
        r.history.imported += added;
        r.history.present += pending.len() as u64 - added;
        self.pending.clear();
        Ok(())
    }
}

/// Whether the chain ending at `head` passes through `ancestor`: `head` itself, or a step whose
/// `prev` links (and the first step's `start`) lead back to it.
fn continues(store: &Store, head: NodeId, ancestor: NodeId) -> Result<bool, StoreError> {
    let snap = store.snapshot()?;
    let mut at = head;
    loop {
        if at == ancestor {
            return Ok(true);
        }
        let Some(n) = snap.get(at)? else {
            return Ok(false);
        };
        if n.type_id != STEP_NODE {
            return Ok(false);
        }
        match StepNode::from_value(&n.payload()?) {
            Ok(StepNode {
                prev: Some(prev), ..
            }) => at = prev,
            // The first step follows the StartNode.
            Ok(StepNode {
                prev: None, start, ..
            }) => at = start,
            _ => return Ok(false),
        }
    }
}

/// Checks that `path` is a regular file (not a link); `None` when absent or refused.
fn read_optional_meta(path: &Path, r: &mut ImportReport) -> Result<Option<()>, TransferError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Ok(m) if m.is_file() => Ok(Some(())),
        Ok(_) => {
            r.problems
                .push(format!("skipped {}: not a regular file", path.display()));
            Ok(None)
        }
        Err(e) => {
            r.problems.push(format!("skipped {}: {e}", path.display()));
            Ok(None)
        }
    }
}
