//! Node files imported: listed, read in id-sorted runs by reader threads, re-hashed and put in
//! batches by a committer thread sharing one write transaction.

use super::{ImportOptions, ImportReport, Progress, TransferError, UNTYPED_WARNINGS};
use crate::cas::NodeId;
use crate::cas::bootstrap::META;
use crate::interchange::layout::{
    INDEX_DIR, Layout, Listed, Lister, META_INDEX, ScanItem, node_path_in, read_listed_in,
    read_node_file,
};
use crate::store::{Prepared, Store, StoreError};
use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

/// A node waiting for its schema: a file of `cas` read again later, or the node itself.
enum Deferred {
    File(NodeId, Layout),
    Held(Box<crate::interchange::layout::ScannedNode>),
}

/// Where a feed hands the import its items.
type Sink<'a> = &'a mut dyn FnMut(ScanItem) -> Result<(), TransferError>;

/// The node import over the items of `feed`; `cas` is where deferred node files are read
/// again (`None`: deferred nodes are held in memory).
pub(super) fn run_node_import(
    store: &Store,
    cas: Option<&Path>,
    opts: ImportOptions,
    progress: Progress<'_>,
    feed: impl FnOnce(Sink<'_>) -> Result<(), TransferError>,
) -> Result<ImportReport, TransferError> {
    let mut r = ImportReport::default();
    let (deferred, seen, committed) = import_fed(store, cas, opts, progress, feed, &mut r)?;
    r.nodes.imported += committed.nodes.imported;
    r.nodes.present += committed.nodes.present;
    r.nodes.skipped += committed.nodes.skipped;
    r.problems.extend(committed.problems);
    // Schemas are all in now; a deferred node whose type is still unknown is refused.
    let deferred = import_deferred(store, cas, &opts, deferred, &mut r)?;
    // The TypeScript tool keeps nodes of any type: so does the import, with no references,
    // and says so.
    keep_untyped(store, cas, &opts, deferred, &mut r)?;
    progress("import nodes", seen, seen);
    Ok(r)
}

/// Imports the items of `feed`, reporting into `r`; returns the nodes deferred for their
/// schema, the number of items seen, and what the committer thread did.
fn import_fed(
    store: &Store,
    cas: Option<&Path>,
    opts: ImportOptions,
    progress: Progress<'_>,
    feed: impl FnOnce(Sink<'_>) -> Result<(), TransferError>,
    r: &mut ImportReport,
) -> Result<(Vec<Deferred>, u64, ImportReport), TransferError> {
    // Batches are put on a second thread while the next one is read and prepared: at most one
    // batch waits for it and one is being put. They share a write transaction, committed every
    // `BULK_COMMIT` nodes and when the importer asks (a schema it needs).
    let (to_commit, batches) = std::sync::mpsc::sync_channel::<Handed>(1);
    let (ack, acks) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
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
            r,
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
    })
}

/// Imports the `deferred` nodes whose schema is stored now, in rounds while a round stores
/// some; returns those whose type is still unknown.
fn import_deferred(
    store: &Store,
    cas: Option<&Path>,
    opts: &ImportOptions,
    mut deferred: Vec<Deferred>,
    r: &mut ImportReport,
) -> Result<Vec<Deferred>, TransferError> {
    let mut batch = Vec::new();
    let mut rounds = 0;
    while !deferred.is_empty() && rounds < 64 {
        rounds += 1;
        let before = deferred.len();
        let mut still = Vec::new();
        for d in deferred {
            let Some(n) = reread(cas, d, opts, r) else {
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
                flush(store, &mut batch, r)?;
            }
        }
        flush(store, &mut batch, r)?;
        deferred = still;
        if deferred.len() == before {
            break;
        }
    }
    Ok(deferred)
}

/// Stores the `deferred` nodes whose type is not a schema as the TypeScript tool keeps them
/// (no references), with a warning.
fn keep_untyped(
    store: &Store,
    cas: Option<&Path>,
    opts: &ImportOptions,
    deferred: Vec<Deferred>,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let mut batch = Vec::new();
    let mut untyped = 0u64;
    for d in deferred {
        let Some(n) = reread(cas, d, opts, r) else {
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
            flush(store, &mut batch, r)?;
        }
    }
    flush(store, &mut batch, r)?;
    if untyped > UNTYPED_WARNINGS as u64 {
        r.warnings.push(format!(
            "kept {} more node(s) whose type is not a schema",
            untyped - UNTYPED_WARNINGS as u64
        ));
    }
    Ok(())
}

/// Lists the node files under `dir` and hands them, read and checked, to `nodes`: in runs
/// sorted by id (schemas the layout's index names first), so that each batch writes
/// neighbouring keys of the `nodes` tree instead of random ones.
pub(super) fn read_all(
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
pub(super) fn schema_hint(cas: &Path) -> HashSet<NodeId> {
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
) -> Option<crate::interchange::layout::ScannedNode> {
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
) -> Option<crate::interchange::layout::ScannedNode> {
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
