//! Export of a store to the directory layout, and import of that layout into a store.
//!
//! Both stream: export walks the store in write order in one read snapshot and writes file
//! by file; import lists the node files, reads them in runs sorted by id (a few reader
//! threads, a bounded number of files in flight) and commits in batches, so an interrupted run
//! leaves only whole batches and a second run finishes the work.

use super::export_files::{
    AtomicFile, ExportError, ExportSummary, ExportWriter, Written, write_atomic, write_node_file,
};
use super::extra::{Extra, UWF_FILE, VERSION};
use super::history::{HistoryLine, HistoryReader, HistoryRecord};
use super::layout::{
    CAS_DIR, HISTORY_FILE, INDEX_DIR, Layout, Listed, Lister, META_INDEX, REGISTRY_FILE, ScanItem,
    THREADS_FILE, WORKFLOWS_FILE, node_path_in, read_listed_in, read_node_file,
};
use super::yaml;
use crate::cas::bootstrap::META;
use crate::cas::{NodeId, cbor};
use crate::store::{
    HistoryEntry, Merge, Prepared, RegistryEntry, Snapshot, Store, StoreError, ThreadRecord,
};
use crate::thread::workflow_of;
use crate::workflow::nodes::{START_NODE, STEP_NODE, StepNode, WORKFLOW};
use crate::workflow::{FinishReason, ThreadId, is_workflow_type};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Why an export or import stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the export failed.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// A file of the layout could not be read at all.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Threads writing node files during an export.
const EXPORT_WRITERS: usize = 4;
/// Node files handed to an export writer at a time (one wake-up per chunk, not per file).
const EXPORT_CHUNK: usize = 64;
/// Chunks read from the store ahead of the writers.
const EXPORT_CHUNKS_AHEAD: usize = 16;

/// Progress callback: (what, done, total or 0 when unknown).
pub(crate) type Progress<'a> = &'a dyn Fn(&str, u64, u64);

/// Counts of an export.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Node files.
    pub files: ExportSummary,
    /// Nodes in the store.
    pub nodes: u64,
    /// Active threads (in `threads.yaml`, or in `uwf.jsonl` when the TypeScript tool cannot
    /// read their workflow).
    pub threads: u64,
    /// Registry names (in `workflows.yaml` and `registry.yaml`, or in `uwf.jsonl`).
    pub registry: u64,
    /// Finished threads (in `history.jsonl`, or in `uwf.jsonl` when the TypeScript tool cannot
    /// read their workflow).
    pub history: u64,
    /// Lines of `uwf.jsonl` after its header: what the TypeScript tool cannot read, and the
    /// registry history.
    pub uwf_only: u64,
}

/// Writes the whole store to `dir` in the TypeScript tool's layout.
///
/// # Errors
/// A store failure or a file that cannot be written.
pub fn export(
    store: &Store,
    dir: &Path,
    progress: Progress<'_>,
) -> Result<ExportReport, TransferError> {
    let mut w = ExportWriter::new(dir)?;
    let total = store.node_count()?;
    let mut report = ExportReport::default();
    // Node files are written by a few threads: creating files is bound by the file system's
    // per-file work, which overlaps across threads. This one reads the store in write order
    // (the order the payloads lie in the file) and hands the files over in chunks.
    let cas = w.cas_dir().to_path_buf();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(NodeId, Vec<u8>)>>(EXPORT_CHUNKS_AHEAD);
    // The writers own the receiving end together: when the last one stops (on an error), it
    // is dropped and the walk's next send fails instead of waiting forever.
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    // (type, id) of every node in write order: 16 bytes a node.
    let mut index: Vec<(NodeId, NodeId)> = Vec::new();
    let outcome = std::thread::scope(|scope| -> Result<Vec<(Written, bool)>, TransferError> {
        let workers: Vec<_> = (0..EXPORT_WRITERS)
            .map(|_| {
                let rx = std::sync::Arc::clone(&rx);
                let cas = &cas;
                scope.spawn(move || -> Result<Vec<(Written, bool)>, ExportError> {
                    let mut done = Vec::new();
                    let mut buf = Vec::new();
                    loop {
                        let next = rx.lock().expect("export queue lock").recv();
                        let Ok(chunk) = next else {
                            return Ok(done);
                        };
                        for (id, bytes) in chunk {
                            done.push(write_node_file(cas, id, &bytes, &mut buf)?);
                        }
                    }
                })
            })
            .collect();
        drop(rx);
        // The queue closes only when every writer has stopped on an error, which is the one
        // reported below.
        let writers_gone = || TransferError::Read {
            path: cas.clone(),
            message: "the export writers stopped".into(),
        };
        let mut chunk = Vec::with_capacity(EXPORT_CHUNK);
        let fed = store.for_each_node_in_write_order::<TransferError>(|n| {
            index.push((n.type_id, n.id));
            // A damaged node is refused, never exported as if it were the node.
            if !n.is_intact() {
                return Err(StoreError::Corrupt(n.id).located(store.path()).into());
            }
            let bytes = cbor::encode_node(&n.type_id.to_wire(), &n.payload_cbor, n.timestamp);
            chunk.push((n.id, bytes));
            if chunk.len() == EXPORT_CHUNK {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(EXPORT_CHUNK));
                tx.send(full).map_err(|_| writers_gone())?;
            }
            report.nodes += 1;
            if report.nodes.is_multiple_of(4096) {
                progress("export nodes", report.nodes, total);
            }
            Ok(())
        });
        let fed = fed.and_then(|()| {
            if chunk.is_empty() {
                return Ok(());
            }
            tx.send(chunk).map_err(|_| writers_gone())
        });
        drop(tx);
        let mut all = Vec::new();
        for h in workers {
            all.extend(h.join().expect("export writer thread")?);
        }
        fed?;
        Ok(all)
    })?;
    for (written, replaced) in outcome {
        w.record(written, replaced);
    }
    progress("export nodes", report.nodes, total);
    // The index files come from the nodes just written, in write order per type: the order of
    // the type index, which is derived data and may be what a damaged file got wrong.
    index.sort_by_key(|(type_id, _)| type_id.0);
    for (type_id, id) in index {
        w.append_index(type_id, id)?;
        if type_id == id {
            w.append_meta(id)?;
        }
    }
    report.files = w.finish()?;

    write_root_files(store, dir, &mut report)?;
    Ok(report)
}

/// Writes `threads.yaml`, `workflows.yaml`, `registry.yaml` and `history.jsonl` with what the
/// TypeScript tool can read (workflows of its Workflow schema and their threads), and
/// `uwf.jsonl` with the rest and the registry history (see [`super::extra`]).
pub(crate) fn write_root_files(
    store: &Store,
    dir: &Path,
    report: &mut ExportReport,
) -> Result<(), TransferError> {
    let snap = store.snapshot()?;
    let mut readable = ReadableWorkflows::default();
    let mut extra = AtomicFile::create(dir, UWF_FILE)?;
    let extra_path = dir.join(UWF_FILE);
    let write_err = |path: &Path, e: std::io::Error| TransferError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut put_extra = |e: Extra, n: &mut u64| -> Result<(), TransferError> {
        *n += 1;
        extra
            .write_all(e.to_line().as_bytes())
            .map_err(|e| write_err(&extra_path, e))
    };
    let mut n_extra = 0u64;
    put_extra(Extra::Header { version: VERSION }, &mut 0)?;

    let threads = store.threads()?;
    report.threads = threads.len() as u64;
    let mut heads: Vec<(String, String)> = Vec::with_capacity(threads.len());
    for (t, r) in threads {
        let wf = match r.workflow {
            Some(w) => Some(w),
            None => workflow_of(&snap, r.head)?,
        };
        if readable.check(&snap, wf)? {
            heads.push((t.to_string(), r.head.to_wire()));
        } else {
            put_extra(
                Extra::Thread {
                    thread: t.to_string(),
                    workflow: wf.map(NodeId::to_wire),
                    head: r.head.to_wire(),
                    updated_at: r.updated_ms,
                    status: "active".into(),
                },
                &mut n_extra,
            )?;
        }
    }
    let text = yaml::write_string_map(heads.iter().map(|(a, b)| (a.as_str(), b.as_str())));
    write_atomic(dir, THREADS_FILE, text.as_bytes())?;

    let mut reg: Vec<(String, String)> = Vec::new();
    for (name, id) in store.registry()? {
        report.registry += 1;
        if readable.check(&snap, Some(id))? {
            reg.push((name, id.to_wire()));
        } else {
            put_extra(
                Extra::Workflow {
                    name,
                    workflow: id.to_wire(),
                },
                &mut n_extra,
            )?;
        }
    }
    let text = yaml::write_string_map(reg.iter().map(|(a, b)| (a.as_str(), b.as_str())));
    write_atomic(dir, WORKFLOWS_FILE, text.as_bytes())?;
    write_atomic(dir, REGISTRY_FILE, text.as_bytes())?;
    for (name, v) in store.all_registry_history()? {
        put_extra(
            Extra::Registry {
                name,
                workflow: v.workflow.to_wire(),
                time: v.time_ms,
            },
            &mut n_extra,
        )?;
    }

    let mut hist = AtomicFile::create(dir, HISTORY_FILE)?;
    let hist_path = dir.join(HISTORY_FILE);
    store.for_each_history::<TransferError>(|e| {
        report.history += 1;
        // The TypeScript tool knows `completed` and `cancelled`; uwf's other outcomes go to
        // `uwf.jsonl`.
        let reason = match &e.reason {
            FinishReason::Completed | FinishReason::Cancelled => Some(e.reason.clone()),
            _ => None,
        };
        let wf = NodeId::parse_strict(&e.workflow);
        match reason {
            Some(reason) if wf.is_some() && readable.check(&snap, wf)? => {
                let rec = HistoryRecord {
                    thread: e.thread,
                    workflow: e.workflow,
                    head: e.head,
                    completed_at: e.completed_at,
                    reason,
                };
                hist.write_all(rec.to_line().as_bytes())
                    .map_err(|e| write_err(&hist_path, e))
            }
            _ => put_extra(
                Extra::History {
                    thread: e.thread,
                    workflow: e.workflow,
                    head: e.head,
                    completed_at: e.completed_at,
                    reason: e.reason.to_string(),
                },
                &mut n_extra,
            ),
        }
    })?;
    hist.commit()?;
    for (t, st) in store.thread_states()? {
        put_extra(
            Extra::State {
                thread: t.as_str().to_string(),
                phase: match st.phase {
                    crate::store::Phase::Ready => "ready",
                    crate::store::Phase::Queued => "queued",
                    crate::store::Phase::Paused => "paused",
                }
                .to_string(),
                max_rounds: st.max_rounds.map(u64::from),
                failures: u64::from(st.failures),
                last_error: st.last_error.map(|e| (e.time_ms, e.agent, e.message)),
            },
            &mut n_extra,
        )?;
    }
    report.uwf_only = n_extra;
    extra.commit()?;
    Ok(())
}

/// Which workflow nodes the TypeScript tool can read: those of its Workflow schema.
#[derive(Default)]
struct ReadableWorkflows(std::collections::HashMap<NodeId, bool>);

impl ReadableWorkflows {
    fn check(&mut self, snap: &Snapshot, wf: Option<NodeId>) -> Result<bool, StoreError> {
        let Some(wf) = wf else {
            return Ok(false);
        };
        if let Some(&b) = self.0.get(&wf) {
            return Ok(b);
        }
        let b = snap.get(wf)?.is_some_and(|n| n.type_id == WORKFLOW);
        self.0.insert(wf, b);
        Ok(b)
    }
}

/// Options of an import.
#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    /// Replace thread heads and registry names that exist with other values.
    pub overwrite: bool,
    /// Nodes per transaction.
    pub batch: usize,
    /// Largest node file read.
    pub max_file_size: u64,
    /// Time recorded for imported registry names, ms since the epoch.
    pub now_ms: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            overwrite: false,
            batch: 8192,
            max_file_size: super::layout::DEFAULT_MAX_FILE_SIZE,
            now_ms: 0,
        }
    }
}

/// Counts of one kind of imported item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// New in the store.
    pub imported: u64,
    /// Already there with the same value.
    pub present: u64,
    /// Left out (see the problems).
    pub skipped: u64,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Node files.
    pub nodes: Counts,
    /// `threads.yaml` entries.
    pub threads: Counts,
    /// `workflows.yaml` / `registry.yaml` entries.
    pub registry: Counts,
    /// `history.jsonl` lines.
    pub history: Counts,
    /// Names that exist with another value (kept, or replaced with `overwrite`).
    pub conflicts: Vec<String>,
    /// Everything skipped, one line each.
    pub problems: Vec<String>,
    /// What was kept but is worth knowing (nodes whose type is not a schema), one line each.
    pub warnings: Vec<String>,
}

/// Nodes whose type is not a schema named one by one in an import's warnings.
const UNTYPED_WARNINGS: usize = 100;

/// Imports the layout under `dir` into `store`. Every node file is re-hashed; nothing is
/// trusted from file names. Files are only read.
///
/// # Errors
/// A store failure (bad files are reported in the result, not as errors).
pub fn import(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    progress: Progress<'_>,
) -> Result<ImportReport, TransferError> {
    import_with_cas(store, dir, &[], opts, progress)
}

/// [`import`], with the nodes of more CAS directories than `<dir>/cas`: the CAS is their
/// union. The TypeScript CLI keeps its own nodes in `$UNCAGED_CAS_DIR` or
/// `~/.uncaged/json-cas` while its agents write to `<root>/cas`. `more_cas` is read first (the
/// schemas a workflow was added with live there), then `<dir>/cas`; an absent directory adds
/// nothing.
///
/// # Errors
/// As [`import`].
pub(crate) fn import_with_cas(
    store: &Store,
    dir: &Path,
    more_cas: &[std::path::PathBuf],
    opts: ImportOptions,
    progress: Progress<'_>,
) -> Result<ImportReport, TransferError> {
    let mut r = ImportReport::default();
    for cas in more_cas
        .iter()
        .map(|p| p.as_path())
        .chain([dir.join(CAS_DIR).as_path()])
    {
        let n = import_nodes(store, cas, opts, progress, false)?;
        r.nodes.imported += n.nodes.imported;
        r.nodes.present += n.nodes.present;
        r.nodes.skipped += n.nodes.skipped;
        r.problems.extend(n.problems);
        r.warnings.extend(n.warnings);
    }
    import_root_files(store, dir, opts, &mut r)?;
    Ok(r)
}

/// The root-file part of [`import`]: `threads.yaml`, `workflows.yaml`, `registry.yaml`,
/// `history.jsonl` and `uwf.jsonl` under `dir`, read after the nodes they name.
pub(crate) fn import_root_files(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let mut extra = read_extra(dir, r)?;
    let states = std::mem::take(&mut extra.states);
    import_threads(store, dir, opts, &extra, r)?;
    import_registry(store, dir, opts, &extra, r)?;
    import_history(store, dir, extra, r)?;
    import_states(store, states, r)
}

/// Sets the imported threads' states (queued, paused, round limit, failures) on the threads
/// the store now holds; a state of an unknown thread is reported and skipped.
fn import_states(
    store: &Store,
    states: Vec<(String, crate::store::ThreadState)>,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    if states.is_empty() {
        return Ok(());
    }
    let mut known = Vec::new();
    for (t, st) in states {
        let Some(key) = thread_key(&t) else {
            r.problems.push(format!(
                "skipped the state of {t} in {UWF_FILE}: not a thread id"
            ));
            continue;
        };
        if store.thread(&key)?.is_none() && store.history_of(&key)?.is_none() {
            r.problems.push(format!(
                "skipped the state of {t} in {UWF_FILE}: no such thread"
            ));
            continue;
        }
        known.push((key, st));
    }
    store.write(|w| {
        for (t, st) in &known {
            w.set_thread_state(t, st)?;
        }
        Ok(())
    })?;
    Ok(())
}

/// Imports the node files under `dir` that are not in the store (checked as [`import`]
/// checks every file); the root files are not read. Files whose ids the store holds are
/// not opened.
///
/// # Errors
/// A store failure (bad files are reported in the result, not as errors).
pub(crate) fn import_new_nodes(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
) -> Result<ImportReport, TransferError> {
    import_nodes(store, &dir.join(CAS_DIR), opts, &|_, _, _| {}, true)
}

/// The node part of [`import`]; with `only_new`, listed files whose ids are stored are
/// dropped before they are read.
fn import_nodes(
    store: &Store,
    cas: &Path,
    opts: ImportOptions,
    progress: Progress<'_>,
    only_new: bool,
) -> Result<ImportReport, TransferError> {
    let schemas = schema_hint(cas);
    run_node_import(store, Some(cas), opts, progress, |take| {
        read_all(store, cas, &schemas, opts, only_new, take)
    })
}

/// Imports the nodes `feed` hands over (read and checked, as [`import`] reads node files),
/// with the checks and batching of a directory import. Nodes that must wait for their schema
/// are kept in memory, to be put once every node has been handed over.
///
/// # Errors
/// A store failure, or the first error of `feed` (bad nodes are reported in the result).
pub(crate) fn import_node_items(
    store: &Store,
    opts: ImportOptions,
    progress: Progress<'_>,
    feed: impl FnOnce(
        &mut dyn FnMut(ScanItem) -> Result<(), TransferError>,
    ) -> Result<(), TransferError>,
) -> Result<ImportReport, TransferError> {
    run_node_import(store, None, opts, progress, feed)
}

/// A node waiting for its schema: a file of `cas` read again later, or the node itself.
enum Deferred {
    File(NodeId, Layout),
    Held(Box<super::layout::ScannedNode>),
}

/// The node import over the items of `feed`; `cas` is where deferred node files are read
/// again (`None`: deferred nodes are held in memory).
fn run_node_import(
    store: &Store,
    cas: Option<&Path>,
    opts: ImportOptions,
    progress: Progress<'_>,
    feed: impl FnOnce(
        &mut dyn FnMut(ScanItem) -> Result<(), TransferError>,
    ) -> Result<(), TransferError>,
) -> Result<ImportReport, TransferError> {
    let mut r = ImportReport::default();
    // Batches are put on a second thread while the next one is read and prepared: at most one
    // batch waits for it and one is being put. They share a write transaction, committed every
    // `BULK_COMMIT` nodes and when the importer asks (a schema it needs).
    let (to_commit, batches) = std::sync::mpsc::sync_channel::<Handed>(1);
    let (ack, acks) = std::sync::mpsc::channel::<()>();
    let (deferred, seen, committed) = std::thread::scope(|scope| {
        let committer = scope.spawn(move || -> Result<ImportReport, TransferError> {
            let mut done = ImportReport::default();
            let mut bulk = store.bulk(BULK_COMMIT);
            for (mut batch, commit) in batches {
                flush_with(&mut |b| bulk.put_at(b), &mut batch, &mut done)?;
                if commit {
                    bulk.commit()?;
                }
                // The importer may have stopped waiting.
                let _ = ack.send(());
            }
            bulk.finish()?;
            Ok(done)
        });
        let mut nodes = NodeImport {
            store,
            opts,
            progress,
            r: &mut r,
            batch: Vec::with_capacity(opts.batch),
            to_commit: Some(to_commit),
            acks,
            in_flight: 0,
            deferred: Vec::new(),
            hold: cas.is_none(),
            seen: 0,
            pending_schemas: HashSet::new(),
        };
        let read = feed(&mut |item| nodes.take(item)).and_then(|()| nodes.flush());
        // Closing the queue lets the committer finish what it was given and return.
        nodes.to_commit = None;
        let committed = committer.join().expect("the committer does not panic");
        let (deferred, seen) = (nodes.deferred, nodes.seen);
        // The committer's error explains a failed hand-over, so it comes first.
        let committed = committed?;
        read?;
        Ok::<_, TransferError>((deferred, seen, committed))
    })?;
    r.nodes.imported += committed.nodes.imported;
    r.nodes.present += committed.nodes.present;
    r.nodes.skipped += committed.nodes.skipped;
    r.problems.extend(committed.problems);
    let mut batch = Vec::new();
    // Schemas are all in now; a deferred node whose type is still unknown is refused.
    let mut deferred = deferred;
    let mut rounds = 0;
    while !deferred.is_empty() && rounds < 64 {
        rounds += 1;
        let before = deferred.len();
        let mut still = Vec::new();
        for d in deferred {
            let Some(n) = reread(cas, d, &opts, &mut r) else {
                continue;
            };
            if !store.is_schema(n.type_id)? {
                still.push(match cas {
                    Some(_) => Deferred::File(n.id, n.layout),
                    None => Deferred::Held(Box::new(n)),
                });
                continue;
            }
            let p = store.prepare_imported(n.id, n.type_id, n.payload_cbor, n.digest)?;
            batch.push((p, n.timestamp));
            if batch.len() >= opts.batch {
                flush(store, &mut batch, &mut r)?;
            }
        }
        flush(store, &mut batch, &mut r)?;
        deferred = still;
        if deferred.len() == before {
            break;
        }
    }
    // The TypeScript tool keeps nodes of any type: so does the import, with no references,
    // and says so.
    let mut untyped = 0u64;
    for d in deferred {
        let Some(n) = reread(cas, d, &opts, &mut r) else {
            continue;
        };
        untyped += 1;
        if r.warnings.len() < UNTYPED_WARNINGS {
            r.warnings.push(format!(
                "kept {}: its type {} is not a schema in the store or the import (stored unvalidated, no references)",
                n.path.display(),
                n.type_id
            ));
        }
        let p = store.prepare_untyped(n.id, n.type_id, n.payload_cbor, n.digest);
        batch.push((p, n.timestamp));
        if batch.len() >= opts.batch {
            flush(store, &mut batch, &mut r)?;
        }
    }
    flush(store, &mut batch, &mut r)?;
    if untyped > UNTYPED_WARNINGS as u64 {
        r.warnings.push(format!(
            "kept {} more node(s) whose type is not a schema",
            untyped - UNTYPED_WARNINGS as u64
        ));
    }
    progress("import nodes", seen, seen);
    Ok(r)
}

/// Lists the node files under `dir` and hands them, read and checked, to `nodes`: in runs
/// sorted by id (schemas the layout's index names first), so that each batch writes
/// neighbouring keys of the `nodes` tree instead of random ones.
fn read_all(
    store: &Store,
    cas: &Path,
    schemas: &HashSet<NodeId>,
    opts: ImportOptions,
    only_new: bool,
    take: &mut dyn FnMut(ScanItem) -> Result<(), TransferError>,
) -> Result<(), TransferError> {
    let mut lister = Lister::of_cas(cas);
    loop {
        let mut run = Vec::new();
        for listed in lister.by_ref() {
            match listed {
                Listed::File(id, layout) => {
                    run.push((id, layout));
                    if run.len() == SORT_RUN {
                        break;
                    }
                }
                Listed::Item(item) => take(item)?,
            }
        }
        if run.is_empty() {
            return Ok(());
        }
        if only_new {
            // A snapshot per run, dropped before the run's commits.
            let snap = store.snapshot()?;
            let mut kept = Vec::with_capacity(run.len());
            for (id, layout) in run {
                if !snap.has(id)? {
                    kept.push((id, layout));
                }
            }
            run = kept;
        }
        run.sort_unstable_by_key(|&(id, _)| (!schemas.contains(&id), id.0));
        read_in_order(cas, &run, opts.max_file_size, &mut *take)?;
    }
}

/// Listed node files sorted and read together, at most: 16 bytes each, so memory stays
/// bounded (32 MiB) however many files the layout holds; a layout of up to this many files is
/// written in one id order.
const SORT_RUN: usize = 1 << 21;
/// Node files a reader thread reads, decodes and re-hashes at a time.
const READ_CHUNK: usize = 64;
/// Chunks each reader thread may have ready ahead of the writer.
const READ_AHEAD: usize = 2;
/// Reader threads: mostly waiting for the disk when the files are not cached, so many of them
/// keep many reads outstanding (100k files not in the page cache: 4 threads 3.3 s, 8 threads
/// 2.6 s, 16 threads 2.1 s); they decode and hash on the cores the writer leaves.
const READERS: usize = 16;

/// Reads the node files `run` (in `READERS` threads, each taking every `READERS`-th chunk)
/// and hands them to `take` in the order of `run`. Memory: at most
/// `READERS × READ_AHEAD × READ_CHUNK` files in flight.
fn read_in_order(
    cas: &Path,
    run: &[(NodeId, Layout)],
    max_size: u64,
    mut take: impl FnMut(ScanItem) -> Result<(), TransferError>,
) -> Result<(), TransferError> {
    let chunks: Vec<&[(NodeId, Layout)]> = run.chunks(READ_CHUNK).collect();
    let readers = READERS.min(chunks.len()).max(1);
    std::thread::scope(|scope| {
        let mut queues = Vec::with_capacity(readers);
        for first in 0..readers {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<ScanItem>>(READ_AHEAD);
            queues.push(rx);
            let chunks = &chunks;
            scope.spawn(move || {
                for chunk in chunks.iter().skip(first).step_by(readers) {
                    let items = chunk
                        .iter()
                        .map(|&(id, layout)| read_listed_in(cas, layout, id, max_size))
                        .collect();
                    // The receiver is gone when the import stopped on an error.
                    if tx.send(items).is_err() {
                        return;
                    }
                }
            });
        }
        for k in 0..chunks.len() {
            // A reader that panicked closes its queue; the scope re-raises its panic.
            let Ok(items) = queues[k % readers].recv() else {
                break;
            };
            for item in items {
                take(item)?;
            }
        }
        Ok(())
    })
}

/// Ids the layout's own index lists as schemas (`cas/_index/<meta-schema id>` and
/// `cas/_index/_meta`): read first, so nodes typed by them need not wait. Only a hint: every
/// file is still read and checked, and a missing, odd or oversized index gives no hint.
fn schema_hint(cas: &Path) -> HashSet<NodeId> {
    const LIMIT: u64 = 16 << 20;
    let index = cas.join(INDEX_DIR);
    let mut ids = HashSet::new();
    for name in [META.to_wire(), META_INDEX.to_string()] {
        let path = index.join(name);
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !m.is_file() || m.len() > LIMIT {
            continue;
        }
        let mut text = String::new();
        if std::fs::File::open(&path)
            .and_then(|f| f.take(LIMIT).read_to_string(&mut text))
            .is_err()
        {
            continue;
        }
        ids.extend(text.lines().filter_map(|l| NodeId::parse_strict(l.trim())));
    }
    ids
}

/// The node part of [`import`]: puts the read nodes in batches, deferring those whose type is
/// not a schema yet.
struct NodeImport<'a, 'p> {
    store: &'a Store,
    opts: ImportOptions,
    progress: Progress<'p>,
    r: &'a mut ImportReport,
    batch: Vec<(Prepared, u64)>,
    /// Full batches go to the committer thread, with whether to commit after them.
    to_commit: Option<std::sync::mpsc::SyncSender<Handed>>,
    /// One message per batch committed.
    acks: std::sync::mpsc::Receiver<()>,
    /// Batches handed over and not yet committed.
    in_flight: usize,
    /// Nodes whose type is not (yet) a stored schema: their schema may come later.
    deferred: Vec<Deferred>,
    /// Whether deferred nodes are held in memory (they have no file to be read again from).
    hold: bool,
    seen: u64,
    /// Schema nodes not yet committed (a node typed by one waits for their commit).
    pending_schemas: HashSet<NodeId>,
}

/// The committer thread stopped; its own error says why.
fn committer_gone() -> TransferError {
    TransferError::Store(StoreError::Internal("the import's commits stopped".into()))
}

impl NodeImport<'_, '_> {
    /// Hands the current batch to the committer.
    fn flush(&mut self) -> Result<(), TransferError> {
        self.hand_over(false)
    }

    /// Hands the current batch (with `commit`, even an empty one) to the committer.
    fn hand_over(&mut self, commit: bool) -> Result<(), TransferError> {
        while self.acks.try_recv().is_ok() {
            self.in_flight -= 1;
        }
        if self.batch.is_empty() && !commit {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(self.opts.batch));
        self.to_commit
            .as_ref()
            .ok_or_else(committer_gone)?
            .send((batch, commit))
            .map_err(|_| committer_gone())?;
        self.in_flight += 1;
        Ok(())
    }

    /// Hands the current batch over and waits until everything handed over is committed.
    fn commit_all(&mut self) -> Result<(), TransferError> {
        self.hand_over(true)?;
        while self.in_flight > 0 {
            self.acks.recv().map_err(|_| committer_gone())?;
            self.in_flight -= 1;
        }
        self.pending_schemas.clear();
        Ok(())
    }

    fn take(&mut self, item: ScanItem) -> Result<(), TransferError> {
        let n = match item {
            ScanItem::Ignored(_) => return Ok(()),
            ScanItem::Problem(p) => {
                self.r.nodes.skipped += 1;
                self.r.problems.push(format!("skipped {p}"));
                return Ok(());
            }
            ScanItem::Node(n) => n,
        };
        self.seen += 1;
        if self.seen.is_multiple_of(4096) {
            (self.progress)("import nodes", self.seen, 0);
        }
        if self.pending_schemas.contains(&n.type_id) {
            self.commit_all()?;
        }
        let store = self.store;
        let type_known = n.self_typed || n.type_id == META || store.is_schema(n.type_id)?;
        if !type_known {
            self.deferred.push(if self.hold {
                Deferred::Held(n)
            } else {
                Deferred::File(n.id, n.layout)
            });
            return Ok(());
        }
        if n.type_id == META {
            self.pending_schemas.insert(n.id);
        }
        let n = *n;
        let p = store.prepare_imported(n.id, n.type_id, n.payload_cbor, n.digest)?;
        self.batch.push((p, n.timestamp));
        if self.batch.len() >= self.opts.batch {
            self.flush()?;
        }
        Ok(())
    }
}

/// Nodes an import puts between commits: each random `ids` leaf is written once per commit.
const BULK_COMMIT: usize = 1 << 18;

/// A batch handed to the committer thread, and whether to commit after it.
type Handed = (Vec<(Prepared, u64)>, bool);

/// A put of nodes with their timestamps: [`Store::put_at`] or a bulk load's.
type PutAt<'a> =
    dyn FnMut(&[(Prepared, u64)]) -> Result<Vec<crate::store::PutOutcome>, StoreError> + 'a;

fn flush(
    store: &Store,
    batch: &mut Vec<(Prepared, u64)>,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    flush_with(&mut |b| store.put_at(b), batch, r)
}

/// Puts `batch` through `put_at`; after a hash collision, node by node, to keep the good nodes
/// and name the bad one.
fn flush_with(
    put_at: &mut PutAt<'_>,
    batch: &mut Vec<(Prepared, u64)>,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    if batch.is_empty() {
        return Ok(());
    }
    match put_at(batch) {
        Ok(outcomes) => {
            for o in outcomes {
                match o {
                    crate::store::PutOutcome::Inserted => r.nodes.imported += 1,
                    crate::store::PutOutcome::Existed => r.nodes.present += 1,
                }
            }
        }
        Err(StoreError::HashCollision(_)) => {
            // Put one by one to keep the good nodes and name the bad one.
            for (p, ts) in batch.iter() {
                match put_at(std::slice::from_ref(&(p.clone(), *ts))) {
                    Ok(o) if o[0] == crate::store::PutOutcome::Inserted => r.nodes.imported += 1,
                    Ok(_) => r.nodes.present += 1,
                    Err(e @ StoreError::HashCollision(_)) => {
                        r.nodes.skipped += 1;
                        r.problems.push(format!("skipped node {}: {e}", p.id));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Err(e) => return Err(e.into()),
    }
    batch.clear();
    Ok(())
}

/// A deferred node: held, or read again from its file under `cas`.
fn reread(
    cas: Option<&Path>,
    d: Deferred,
    opts: &ImportOptions,
    r: &mut ImportReport,
) -> Option<super::layout::ScannedNode> {
    match (d, cas) {
        (Deferred::Held(n), _) => Some(*n),
        (Deferred::File(id, layout), Some(cas)) => read_or_skip(cas, layout, id, opts, r),
        (Deferred::File(id, _), None) => {
            r.nodes.skipped += 1;
            r.problems
                .push(format!("skipped node {id}: no file to read it from"));
            None
        }
    }
}

/// Reads a listed node file; a file that cannot be used is counted as skipped and reported.
fn read_or_skip(
    cas: &Path,
    layout: Layout,
    id: NodeId,
    opts: &ImportOptions,
    r: &mut ImportReport,
) -> Option<super::layout::ScannedNode> {
    match read_node_file(
        &node_path_in(cas, layout, id),
        id,
        layout,
        opts.max_file_size,
    ) {
        Ok(n) => Some(n),
        Err(p) => {
            r.nodes.skipped += 1;
            r.problems.push(format!("skipped {p}"));
            None
        }
    }
}

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
struct ExtraRead {
    /// Active threads: (thread, head, time of the last head move).
    threads: Vec<(String, String, u64)>,
    /// Registry names.
    names: Vec<(String, String)>,
    /// Registry versions by name, oldest first.
    versions: indexmap::IndexMap<String, Vec<(String, u64)>>,
    /// Finished threads.
    history: Vec<HistoryEntry>,
    /// Threads' states besides their heads.
    states: Vec<(String, crate::store::ThreadState)>,
}

/// Reads `uwf.jsonl` when present, reporting lines it skips.
fn read_extra(dir: &Path, r: &mut ImportReport) -> Result<ExtraRead, TransferError> {
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
        if line.len() > super::extra::MAX_LINE {
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
                workflow,
                head,
                completed_at,
                reason: FinishReason::parse(&reason),
            }),
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
fn thread_key(s: &str) -> Option<ThreadId> {
    ThreadId::parse(s).ok()
}

fn import_threads(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    extra: &ExtraRead,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let path = dir.join(THREADS_FILE);
    let mut listed: Vec<(String, String, u64, PathBuf)> = Vec::new();
    if let Some(map) = read_map(&path, r) {
        r.threads.skipped += map.skipped.len() as u64;
        for (t, h) in map.entries {
            listed.push((t, h, opts.now_ms, path.clone()));
        }
    }
    let extra_path = dir.join(UWF_FILE);
    for (t, h, at) in &extra.threads {
        listed.push((t.clone(), h.clone(), *at, extra_path.clone()));
    }
    let mut good = Vec::new();
    let snap = store.snapshot()?;
    for (thread, head, updated_ms, path) in &listed {
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
    let merged = store.write(|w| {
        // A garbage collection may have removed a head since the snapshot: refused, so that
        // no thread is set to a missing node (an import run again stores it again).
        for (_, rec) in &good {
            if !w.has(rec.head)? {
                return Err(crate::store::StoreError::NotFound(rec.head));
            }
        }
        good.iter()
            .map(|(t, rec)| w.merge_thread(t, rec, opts.overwrite))
            .collect::<Result<Vec<_>, _>>()
    })?;
    for ((thread, _), m) in good.iter().zip(merged) {
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
    Ok(())
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

fn import_registry(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    extra: &ExtraRead,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let mut merged: indexmap::IndexMap<String, String> = indexmap::IndexMap::new();
    let mut add =
        |r: &mut ImportReport, path: &Path, name: String, id: String| match merged.get(&name) {
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
        };
    for file in [WORKFLOWS_FILE, REGISTRY_FILE] {
        let path = dir.join(file);
        let Some(map) = read_map(&path, r) else {
            continue;
        };
        r.registry.skipped += map.skipped.len() as u64;
        for (name, id) in map.entries {
            add(r, &path, name, id);
        }
    }
    let extra_path = dir.join(UWF_FILE);
    for (name, id) in &extra.names {
        add(r, &extra_path, name.clone(), id.clone());
    }
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
    // Registry versions: a name's versions are taken whole, and only when the store has none
    // of its own (two histories of one name do not merge into one order).
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
    let results = store.write(|w| {
        let mut restored = HashSet::new();
        for (name, list) in &versions {
            if !list.is_empty() && !w.has_registry_history(name)? {
                for v in list {
                    w.append_registry_version(name, v)?;
                }
                restored.insert(name.as_str());
            }
        }
        good.iter()
            .map(|(name, wid)| {
                if restored.contains(name.as_str()) && w.registry_get(name)?.is_none() {
                    w.set_registry_name(name, *wid)?;
                    return Ok(Merge::Inserted);
                }
                w.merge_registry(name, *wid, opts.now_ms, opts.overwrite)
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
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

fn import_history(
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
                        workflow: record.workflow,
                        head: record.head,
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
        let head = NodeId::parse_strict(&e.head);
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

/// Whether `root` holds the file layout (a `cas/` directory or the root files).
pub(crate) fn has_layout(root: &Path) -> bool {
    root.join(CAS_DIR).is_dir()
        || root.join(THREADS_FILE).is_file()
        || root.join(WORKFLOWS_FILE).is_file()
        || root.join(REGISTRY_FILE).is_file()
}
