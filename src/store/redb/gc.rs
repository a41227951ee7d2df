//! Garbage collection, pins and counts.
//!
//! A collection marks over one read snapshot: everything reachable from the roots (thread
//! heads, archived heads, registry names and their history, every schema and the bootstrap
//! nodes, pins, nodes named by thread states, nodes younger than the grace period). The nodes
//! it leaves are swept in short write transactions, so steps go on meanwhile; each one first
//! marks what changed since the snapshot (heads that moved, new history, nodes written since,
//! whose references count) and re-checks every candidate (still stored under the same sequence
//! number, not pinned, not put again since the collection began). A node written after the
//! snapshot has a sequence number at or past the collection's write mark and is never a
//! candidate.
//!
//! Tables:
//! - `pins`: id → the time it was pinned (ms)
//! - `gc_owner`: `"owner"` → the [`Lease`] of the running collection
//! - `gc_touched`: ids put again while a collection runs (it clears them when it ends)
//!
//! and `meta`'s `gc_running` (the owner's pid) while a collection runs, which a put of an
//! existing node reads to record it in `gc_touched`. A collection whose process died leaves
//! both behind: puts then go on recording ids, and the next collection takes over (its owner
//! is not alive) and clears them.
//!
//! Removing a node removes its `ids` entry, its `links` record, its `type_index` entry and its
//! payload entry:
//! the payload record holding it is rewritten as one record per run of consecutive entries
//! that remain, each keyed by its first sequence number, so that the record with the greatest
//! key at or below a sequence number still holds that number's entry.
//!
//! On a PostgreSQL server the same operations run through `pg_gc`, with the same roots and
//! reports.

use super::file::{Db, Redb};
use super::nodes::{
    BuildU64, GC_RUNNING, GC_TOUCHED, Link, Lookup, NO_SEQ, entries, join_payloads,
};
use super::read::RedbRead;
use super::records::{HISTORY, REGISTRY, REGISTRY_HISTORY, THREADS};
use super::tables::{GC_OWNER, IDS, LINKS, META_TABLE, PAYLOADS, PINS, TYPE_INDEX};
use crate::cas::NodeId;
use crate::store::backend::ReadTx;
use crate::store::roots::{gc_roots, keep_from};

use crate::store::error::{Result, StoreError};
use crate::store::records::{HistoryEntry, Lease, RegistryEntry, ThreadRecord, dec, enc};
use crate::store::report::{Count, GcOptions, GcReport};
use redb::{ReadableTable, WriteTransaction};
use std::collections::{HashSet, VecDeque};

/// Candidates per sweep transaction.
const BATCH: usize = 4096;

type Ids = HashSet<u64, BuildU64>;

/// The outcome of marking over one snapshot.
struct Marked {
    /// Every id marked (present or not).
    live: Ids,
    /// Unmarked nodes as (seq, id), in seq order.
    candidates: Vec<(u64, u64)>,
    scanned: u64,
    reachable: u64,
    /// The write mark of the snapshot.
    mark: u64,
    /// The next history key to look at.
    history_next: u64,
}

/// Marks `roots` and everything they reach in `live`; returns how many present nodes it added.
fn mark_from<I, L>(
    lk: &Lookup<'_, I, L>,
    live: &mut Ids,
    roots: impl IntoIterator<Item = u64>,
) -> Result<u64>
where
    I: ReadableTable<u64, u64>,
    L: ReadableTable<u64, &'static [u8]>,
{
    let mut queue: VecDeque<(u64, u64)> = roots
        .into_iter()
        .filter(|r| !live.contains(r))
        .map(|r| (r, NO_SEQ))
        .collect();
    let mut added = 0;
    let mut buf = Vec::new();
    while let Some((id, hint)) = queue.pop_front() {
        if !live.insert(id) {
            continue;
        }
        if lk.read(NodeId(id), hint, &mut buf)?.is_some() {
            let l = Link::read(&buf).ok_or(StoreError::Corrupt(NodeId(id)))?;
            added += 1;
            for (r, seq) in l.refs() {
                if !live.contains(&r.0) {
                    queue.push_back((r.0, seq));
                }
            }
        }
    }
    Ok(added)
}

/// The roots of the thread-layer tables of a transaction: active heads and workflows, archived
/// heads and workflows from history key `history_from` on, registry names and versions.
/// Returns the roots and the next history key.
fn table_roots<T, H, R, RH>(
    threads: &T,
    history: &H,
    history_from: u64,
    registry: &R,
    registry_history: &RH,
) -> Result<(Vec<u64>, u64)>
where
    T: ReadableTable<&'static str, &'static [u8]>,
    H: ReadableTable<u64, &'static [u8]>,
    R: ReadableTable<&'static str, u64>,
    RH: ReadableTable<(&'static str, u64), &'static [u8]>,
{
    let mut roots = Vec::new();
    for e in threads.iter()? {
        let rec: ThreadRecord = dec(e?.1.value())?;
        roots.push(rec.head.0);
        roots.extend(rec.workflow.map(|w| w.0));
    }
    let mut next = history_from;
    for e in history.range(history_from..)? {
        let (k, v) = e?;
        let h: HistoryEntry = dec(v.value())?;
        roots.extend(h.names().map(|id| id.0));
        next = k.value() + 1;
    }
    for e in registry.iter()? {
        roots.push(e?.1.value());
    }
    for e in registry_history.iter()? {
        let r: RegistryEntry = dec(e?.1.value())?;
        roots.push(r.workflow.0);
    }
    Ok((roots, next))
}

/// A `payloads` record of `items` (id, payload), in order.
fn encode_payload_record(items: &[(u64, &[u8])]) -> Result<Vec<u8>> {
    let n = items.len();
    let len: usize = items.iter().map(|(_, p)| 8 + p.len()).sum();
    let mut out = Vec::with_capacity(4 + 4 * n + len);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    let mut end = 0usize;
    for (_, p) in items {
        end += 8 + p.len();
        let e = u32::try_from(end).map_err(|_| StoreError::Internal("payload too large".into()))?;
        out.extend_from_slice(&e.to_le_bytes());
    }
    for (id, p) in items {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// Removes the payload entries of `removed` ((seq, id), in seq order) from their records;
/// returns their payload bytes. Each record holding one is rewritten as one record per run of
/// consecutive entries that remain (none when all go).
fn remove_payloads(
    payloads: &mut redb::Table<u64, &'static [u8]>,
    removed: &[(u64, u64)],
) -> Result<u64> {
    let mut bytes = 0;
    let mut i = 0;
    while i < removed.len() {
        let (seq, id) = removed[i];
        let (key, rec) = match payloads.range(..=seq)?.next_back() {
            Some(e) => {
                let (k, v) = e?;
                (k.value(), v.value().to_vec())
            }
            None => return Err(StoreError::Corrupt(NodeId(id))),
        };
        let mut all = Vec::new();
        for e in entries(key, &rec) {
            all.push(e.map_err(|_| StoreError::Corrupt(NodeId(id)))?);
        }
        let end = key + all.len() as u64;
        let mut gone: Ids = HashSet::with_hasher(BuildU64);
        while i < removed.len() && removed[i].0 < end {
            let (s, id) = removed[i];
            let (_, owner, p) = all[(s - key) as usize];
            if owner.0 != id {
                return Err(StoreError::Corrupt(NodeId(id)));
            }
            bytes += p.len() as u64;
            gone.insert(s);
            i += 1;
        }
        if gone.is_empty() {
            // The entry lies past the record that should hold it.
            return Err(StoreError::Corrupt(NodeId(id)));
        }
        payloads.remove(key)?;
        for run in all
            .split(|(s, _, _)| gone.contains(s))
            .filter(|r| !r.is_empty())
        {
            let items: Vec<(u64, &[u8])> = run.iter().map(|(_, id, p)| (id.0, *p)).collect();
            payloads.insert(run[0].0, encode_payload_record(&items)?.as_slice())?;
        }
    }
    Ok(bytes)
}

/// Creates the tables of this module (migration; older files get them when first needed).
pub(crate) fn create_tables(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(PINS)?;
    tx.open_table(GC_OWNER)?;
    tx.open_table(GC_TOUCHED)?;
    Ok(())
}

impl Redb {
    /// Collects the nodes no root reaches; see the module documentation.
    ///
    /// # Errors
    /// [`StoreError::GcRunning`] when another live process is collecting, a redb failure, or
    /// damage found on the way.
    pub fn gc(&self, opts: &GcOptions<'_>) -> Result<GcReport> {
        self.guard(|| {
            if opts.dry_run {
                let m = self.mark(
                    Some(opts.now_ms.saturating_sub(opts.grace_ms)),
                    Some(opts.owner_is_live),
                )?;
                let bytes = self.payload_bytes_of(&m.candidates)?;
                return Ok(GcReport {
                    scanned: m.scanned,
                    reachable: m.reachable,
                    garbage: m.candidates.len() as u64,
                    collected: m.candidates.len() as u64,
                    bytes,
                });
            }
            self.gc_begin(&opts.owner, opts.owner_is_live)?;
            let r = self.gc_run(opts);
            let end = self.gc_end(&opts.owner);
            let r = r?;
            end?;
            Ok(r)
        })
    }

    fn gc_run(&self, opts: &GcOptions<'_>) -> Result<GcReport> {
        let mut m = self.mark(
            Some(opts.now_ms.saturating_sub(opts.grace_ms)),
            Some(opts.owner_is_live),
        )?;
        let mut report = GcReport {
            scanned: m.scanned,
            reachable: m.reachable,
            garbage: m.candidates.len() as u64,
            ..GcReport::default()
        };
        let candidates = std::mem::take(&mut m.candidates);
        let total = candidates.len() as u64;
        let mut seen_seq = m.mark;
        (opts.progress)(0, total);
        for (i, batch) in candidates.chunks(BATCH).enumerate() {
            let tx = self.begin_write()?;
            let (n, bytes) = self.sweep_batch(&tx, &mut m, &mut seen_seq, batch)?;
            tx.commit()?;
            report.collected += n;
            report.bytes += bytes;
            (opts.progress)(((i * BATCH + batch.len()) as u64).min(total), total);
        }
        Ok(report)
    }

    /// One sweep transaction: marks what changed since the snapshot, then removes the
    /// candidates of `batch` that are still garbage. Returns (nodes removed, payload bytes).
    fn sweep_batch(
        &self,
        tx: &WriteTransaction,
        m: &mut Marked,
        seen_seq: &mut u64,
        batch: &[(u64, u64)],
    ) -> Result<(u64, u64)> {
        let mut ids = tx.open_table(IDS)?;
        let mut links = tx.open_table(LINKS)?;
        // Heads moved, threads finished and names registered since the snapshot.
        let (roots, next) = table_roots(
            &tx.open_table(THREADS)?,
            &tx.open_table(HISTORY)?,
            m.history_next,
            &tx.open_table(REGISTRY)?,
            &tx.open_table(REGISTRY_HISTORY)?,
        )?;
        m.history_next = next;
        let lk = Lookup {
            ids: &ids,
            links: &links,
        };
        mark_from(&lk, &mut m.live, roots)?;
        // Nodes written since: they are kept, and so is what they reference.
        let now_seq = tx
            .open_table(META_TABLE)?
            .get("next_seq")?
            .map_or(0, |v| v.value());
        if now_seq > *seen_seq {
            let mut fresh = Vec::new();
            for e in links.range(*seen_seq..)? {
                let (k, v) = e?;
                let l = Link::at(k.value(), v.value())?;
                fresh.push(l.id.0);
            }
            mark_from(&lk, &mut m.live, fresh)?;
            *seen_seq = now_seq;
        }
        let pins = tx.open_table(PINS)?;
        let touched = tx.open_table(GC_TOUCHED)?;
        let mut index = tx.open_table(TYPE_INDEX)?;
        let mut removed = Vec::new();
        for &(seq, id) in batch {
            if m.live.contains(&id) || pins.get(id)?.is_some() || touched.get(id)?.is_some() {
                continue;
            }
            // Put again after the snapshot (under another number) or removed since: kept.
            if ids.get(id)?.map(|v| v.value()) != Some(seq) {
                continue;
            }
            let type_id = match links.get(seq)? {
                Some(v) => {
                    let l = Link::read(v.value())
                        .filter(|l| l.id.0 == id)
                        .ok_or(StoreError::Corrupt(NodeId(id)))?;
                    l.type_id.0
                }
                None => return Err(StoreError::Corrupt(NodeId(id))),
            };
            ids.remove(id)?;
            links.remove(seq)?;
            index.remove((type_id, seq))?;
            removed.push((seq, id));
        }
        let bytes = remove_payloads(&mut tx.open_table(PAYLOADS)?, &removed)?;
        Ok((removed.len() as u64, bytes))
    }

    /// Marks over one snapshot. `cutoff_ms`: nodes first written at or after it are roots; with
    /// `live_lease`, it goes back to the start of the oldest step in progress (a step's lease
    /// whose owner is alive), so that what a running step has written is kept whatever the
    /// grace.
    fn mark(
        &self,
        cutoff_ms: Option<u64>,
        live_lease: Option<&dyn Fn(&Lease) -> bool>,
    ) -> Result<Marked> {
        let r = RedbRead::new(self.begin_read()?);
        let cutoff_ms = match (cutoff_ms, live_lease) {
            (Some(c), Some(is_live)) => Some(keep_from(&r, c, is_live)?),
            (c, _) => c,
        };
        let mark = r.write_mark()?;
        let mut roots = gc_roots(&r)?;
        let tx = r.tx();
        let history_next = tx
            .open_table(HISTORY)?
            .last()?
            .map_or(0, |(k, _)| k.value() + 1);
        let (ids, links) = (tx.open_table(IDS)?, tx.open_table(LINKS)?);
        let mut old = Vec::new();
        let mut scanned = 0;
        for e in links.iter()? {
            let (k, v) = e?;
            let seq = k.value();
            let l = Link::at(seq, v.value())?;
            scanned += 1;
            if cutoff_ms.is_some_and(|c| l.timestamp >= c) {
                roots.push(l.id.0);
            } else {
                old.push((seq, l.id.0));
            }
        }
        let mut live: Ids = HashSet::with_capacity_and_hasher(1024, BuildU64);
        let lk = Lookup {
            ids: &ids,
            links: &links,
        };
        let reachable = mark_from(&lk, &mut live, roots)?;
        // In seq order already.
        old.retain(|(_, id)| !live.contains(id));
        Ok(Marked {
            live,
            candidates: old,
            scanned,
            reachable,
            mark,
            history_next,
        })
    }

    /// Payload bytes of `items` ((seq, id), in seq order).
    fn payload_bytes_of(&self, items: &[(u64, u64)]) -> Result<u64> {
        let tx = self.begin_read()?;
        let payloads = tx.open_table(PAYLOADS)?;
        let mut bytes = 0;
        join_payloads::<_, _, StoreError>(
            &payloads,
            items,
            |&(s, id)| (s, NodeId(id)),
            |_, p| {
                bytes += p.len() as u64;
                Ok(())
            },
        )?;
        Ok(bytes)
    }

    /// Records `owner` as the running collection: refused while another live one runs.
    fn gc_begin(&self, owner: &Lease, is_live: &dyn Fn(&Lease) -> bool) -> Result<()> {
        let tx = self.begin_write()?;
        {
            let mut t = tx.open_table(GC_OWNER)?;
            if let Some(v) = t.get("owner")? {
                let other: Lease = dec(v.value())?;
                let mine = other.pid == owner.pid
                    && other.start_ticks == owner.start_ticks
                    && other.boot_id == owner.boot_id;
                if !mine && is_live(&other) {
                    return Err(StoreError::GcRunning { pid: other.pid });
                }
            }
            t.insert("owner", enc(owner).as_slice())?;
            tx.open_table(META_TABLE)?
                .insert(GC_RUNNING, u64::from(owner.pid))?;
            tx.open_table(GC_TOUCHED)?;
            tx.open_table(PINS)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Clears the running collection's marks, when they are still `owner`'s.
    fn gc_end(&self, owner: &Lease) -> Result<()> {
        let tx = self.begin_write()?;
        {
            let mut t = tx.open_table(GC_OWNER)?;
            let mine = match t.get("owner")? {
                Some(v) => dec::<Lease>(v.value())? == *owner,
                None => false,
            };
            if mine {
                t.remove("owner")?;
                tx.open_table(META_TABLE)?.remove(GC_RUNNING)?;
                let mut touched = tx.open_table(GC_TOUCHED)?;
                touched.retain(|_, _| false)?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The store's size and what no root reaches (young nodes included).
    ///
    /// # Errors
    /// A redb failure or damage.
    pub(crate) fn count(&self) -> Result<Count> {
        self.guard(|| {
            let m = self.mark(None, None)?;
            let garbage_bytes = self.payload_bytes_of(&m.candidates)?;
            let tx = self.begin_read()?;
            let payloads = tx.open_table(PAYLOADS)?;
            let mut bytes = 0;
            for e in payloads.iter()? {
                let (k, v) = e?;
                for x in entries(k.value(), v.value()) {
                    let (_, _, p) = x.map_err(|first| StoreError::CorruptRecord {
                        what: "payloads",
                        message: format!("the record at {first} does not parse"),
                    })?;
                    bytes += p.len() as u64;
                }
            }
            Ok(Count {
                nodes: m.scanned,
                bytes,
                reachable: m.reachable,
                garbage: m.candidates.len() as u64,
                garbage_bytes,
            })
        })
    }

    /// Shrinks the file to the pages in use (after a collection, say). Other processes'
    /// transactions wait meanwhile.
    ///
    /// # Errors
    /// [`StoreError::InUse`] while another process has a transaction open, [`StoreError::ReadOnly`],
    /// a redb failure.
    pub(crate) fn compact(&mut self) -> Result<()> {
        let path = self.path.clone();
        crate::store::damage::guard_at(&path, || match &mut self.db {
            Db::Rw(d) => match d.compact() {
                Ok(_) => Ok(()),
                Err(redb::CompactionError::TransactionInProgress) => Err(StoreError::InUse),
                Err(e) => Err(StoreError::Db(e.into())),
            },
            Db::Ro(_) => Err(StoreError::ReadOnly),
        })
    }

    /// The bytes the store takes: the file's length.
    pub(crate) fn size_bytes(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }
}

/// Pins stored nodes in `tx`: a collection keeps them and what they reach. Returns, for each,
/// whether it was not pinned before.
///
/// # Errors
/// [`StoreError::NotFound`] for an id that is not stored (nothing is pinned then).
pub(crate) fn pin(tx: &WriteTransaction, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>> {
    let nodes = tx.open_table(IDS)?;
    let mut pins = tx.open_table(PINS)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if nodes.get(id.0)?.is_none() {
            return Err(StoreError::NotFound(*id));
        }
        out.push(pins.get(id.0)?.is_none());
        if out[out.len() - 1] {
            pins.insert(id.0, now_ms)?;
        }
    }
    Ok(out)
}

/// Releases pins in `tx`; returns, for each id, whether it was pinned.
///
/// # Errors
/// A redb failure.
pub(crate) fn unpin(tx: &WriteTransaction, ids: &[NodeId]) -> Result<Vec<bool>> {
    let mut pins = tx.open_table(PINS)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(pins.remove(id.0)?.is_some());
    }
    Ok(out)
}

/// The first node missing from what `from` reaches, seeing `tx`'s writes: the walk does not go
/// past the nodes of `stop` (present ones: checked, not walked) nor past present nodes other
/// than `from` whose type is in `stop_types`. `None` when all are stored.
///
/// # Errors
/// A redb failure or a corrupt record.
pub(crate) fn first_missing(
    tx: &WriteTransaction,
    from: NodeId,
    stop: &[NodeId],
    stop_types: &[NodeId],
) -> Result<Option<NodeId>> {
    let (ids, links) = (tx.open_table(IDS)?, tx.open_table(LINKS)?);
    let lk = Lookup {
        ids: &ids,
        links: &links,
    };
    let mut seen: Ids = HashSet::with_hasher(BuildU64);
    let mut queue = VecDeque::from([(from.0, NO_SEQ)]);
    let mut buf = Vec::new();
    seen.insert(from.0);
    while let Some((id, hint)) = queue.pop_front() {
        if lk.read(NodeId(id), hint, &mut buf)?.is_none() {
            return Ok(Some(NodeId(id)));
        }
        let l = Link::read(&buf).ok_or(StoreError::Corrupt(NodeId(id)))?;
        if id != from.0 && (stop.contains(&NodeId(id)) || stop_types.contains(&l.type_id)) {
            continue;
        }
        for (r, seq) in l.refs() {
            if seen.insert(r.0) {
                queue.push_back((r.0, seq));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
