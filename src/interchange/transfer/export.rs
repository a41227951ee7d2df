//! Export: the store walked in write order, node files handed to writer threads in chunks,
//! then the root files.

use super::{Progress, TransferError};
use crate::cas::{NodeId, cbor};
use crate::interchange::export_files::{
    AtomicFile, ExportError, ExportSummary, ExportWriter, Written, write_atomic, write_node_file,
};
use crate::interchange::extra::{Extra, UWF_FILE, VERSION};
use crate::interchange::history::HistoryRecord;
use crate::interchange::layout::{HISTORY_FILE, REGISTRY_FILE, THREADS_FILE, WORKFLOWS_FILE};
use crate::interchange::yaml;
use crate::store::{Snapshot, Store, StoreError};
use crate::thread::workflow_of;
use crate::workflow::FinishReason;
use crate::workflow::nodes::WORKFLOW;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Threads writing node files during an export.
const EXPORT_WRITERS: usize = 4;
/// Node files handed to an export writer at a time (one wake-up per chunk, not per file).
const EXPORT_CHUNK: usize = 64;
/// Chunks read from the store ahead of the writers.
const EXPORT_CHUNKS_AHEAD: usize = 16;

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
    let mut files = RootFiles {
        store,
        snap: store.snapshot()?,
        dir,
        readable: ReadableWorkflows::default(),
        extra: ExtraOut::create(dir)?,
        report,
    };
    files.threads()?;
    files.registry()?;
    files.history()?;
    let RootFiles {
        mut extra, report, ..
    } = files;
    for (t, st) in store.thread_states()? {
        extra.put(Extra::State {
            thread: t.as_str().to_string(),
            phase: match st.phase {
                crate::store::Phase::Ready => "ready",
                crate::store::Phase::Queued => "queued",
                crate::store::Phase::Paused => "paused",
                crate::store::Phase::PausedForBudget => "pausedForBudget",
            }
            .to_string(),
            max_rounds: st.max_rounds.map(u64::from),
            failures: u64::from(st.failures),
            last_error: st.last_error.map(|e| (e.time_ms, e.agent, e.message)),
        })?;
    }
    store.for_each_step_usage::<TransferError>(|(step, calls)| {
        extra.put(Extra::Usage {
            step: step.to_string(),
            calls,
        })
    })?;
    report.uwf_only = extra.count;
    extra.file.commit()?;
    Ok(())
}

/// The error of a failed write to `path`.
fn write_error(path: &Path, e: std::io::Error) -> TransferError {
    TransferError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// `uwf.jsonl` being written, with the number of entries after its header.
struct ExtraOut {
    /// The file.
    file: AtomicFile,
    /// Where it goes, for errors.
    path: PathBuf,
    /// Entries written after the header.
    count: u64,
}

impl ExtraOut {
    /// Starts `uwf.jsonl` in `dir` with its header.
    fn create(dir: &Path) -> Result<ExtraOut, TransferError> {
        let mut file = AtomicFile::create(dir, UWF_FILE)?;
        let path = dir.join(UWF_FILE);
        file.write_all(Extra::Header { version: VERSION }.to_line().as_bytes())
            .map_err(|e| write_error(&path, e))?;
        Ok(ExtraOut {
            file,
            path,
            count: 0,
        })
    }

    /// Appends the entry `e`.
    fn put(&mut self, e: Extra) -> Result<(), TransferError> {
        self.count += 1;
        self.file
            .write_all(e.to_line().as_bytes())
            .map_err(|e| write_error(&self.path, e))
    }
}

/// What the root files are written from, and the report they add to.
struct RootFiles<'a> {
    store: &'a Store,
    snap: Snapshot,
    dir: &'a Path,
    readable: ReadableWorkflows,
    extra: ExtraOut,
    report: &'a mut ExportReport,
}

impl RootFiles<'_> {
    /// Writes `threads.yaml` with the active threads of readable workflows; the others go to
    /// `extra`.
    fn threads(&mut self) -> Result<(), TransferError> {
        let (store, snap, dir) = (self.store, &self.snap, self.dir);
        let (readable, extra, report) = (&mut self.readable, &mut self.extra, &mut *self.report);
        let threads = store.threads()?;
        report.threads = threads.len() as u64;
        let mut heads: Vec<(String, String)> = Vec::with_capacity(threads.len());
        for (t, r) in threads {
            let wf = match r.workflow {
                Some(w) => Some(w),
                None => workflow_of(snap, r.head)?,
            };
            if readable.check(snap, wf)? {
                heads.push((t.to_string(), r.head.to_wire()));
            } else {
                extra.put(Extra::Thread {
                    thread: t.to_string(),
                    workflow: wf.map(NodeId::to_wire),
                    head: r.head.to_wire(),
                    updated_at: r.updated_ms,
                    status: "active".into(),
                })?;
            }
        }
        let text = yaml::write_string_map(heads.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        write_atomic(dir, THREADS_FILE, text.as_bytes())?;
        Ok(())
    }

    /// Writes `workflows.yaml` and `registry.yaml` with the names of readable workflows; the
    /// other names and every registry version go to `extra`.
    fn registry(&mut self) -> Result<(), TransferError> {
        let (store, snap, dir) = (self.store, &self.snap, self.dir);
        let (readable, extra, report) = (&mut self.readable, &mut self.extra, &mut *self.report);
        let mut reg: Vec<(String, String)> = Vec::new();
        for (name, id) in store.registry_in_order()? {
            report.registry += 1;
            if readable.check(snap, Some(id))? {
                reg.push((name, id.to_wire()));
            } else {
                extra.put(Extra::Workflow {
                    name,
                    workflow: id.to_wire(),
                })?;
            }
        }
        let text = yaml::write_string_map(reg.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        write_atomic(dir, WORKFLOWS_FILE, text.as_bytes())?;
        write_atomic(dir, REGISTRY_FILE, text.as_bytes())?;
        for (name, v) in store.all_registry_history_in_order()? {
            extra.put(Extra::Registry {
                name,
                workflow: v.workflow.to_wire(),
                time: v.time_ms,
            })?;
        }
        Ok(())
    }

    /// Writes `history.jsonl` with the finished threads the TypeScript tool can read; the others
    /// go to `extra`.
    fn history(&mut self) -> Result<(), TransferError> {
        let (store, snap, dir) = (self.store, &self.snap, self.dir);
        let (readable, extra, report) = (&mut self.readable, &mut self.extra, &mut *self.report);
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
            let wf = e.workflow.id();
            match reason {
                Some(reason) if wf.is_some() && readable.check(snap, wf)? => {
                    let rec = HistoryRecord {
                        thread: e.thread,
                        workflow: e.workflow.into_text(),
                        head: e.head.into_text(),
                        completed_at: e.completed_at,
                        reason,
                    };
                    hist.write_all(rec.to_line().as_bytes())
                        .map_err(|e| write_error(&hist_path, e))
                }
                _ => extra.put(Extra::History {
                    thread: e.thread,
                    workflow: e.workflow.into_text(),
                    head: e.head.into_text(),
                    completed_at: e.completed_at,
                    reason: e.reason.to_string(),
                }),
            }
        })?;
        hist.commit()?;
        Ok(())
    }
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
