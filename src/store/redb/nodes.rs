//! The nodes of the redb file: the `ids`, `links`, `payloads` and `type_index` records, read
//! and written.
//!
//! - `ids`: id → seq
//! - `links`: seq → id ‖ type ‖ first-write timestamp ‖ BLAKE3 digest ‖ per reference, in
//!   schema order, the referenced id and the seq it had when this node was written
//! - `payloads`: seq of its first entry → `n (u32 LE) ‖ end offsets (u32 LE × n) ‖ entries`,
//!   an entry being `id (u64 LE) ‖ payload CBOR` for seq, seq+1, …; append-only
//! - `type_index` (derived): (type, seq) → id, in write order
//!
//! Node ids are uniformly random, so each put dirties a random `ids` leaf: that table is kept to
//! 16 bytes an entry and everything else is appended under ascending sequence numbers.

use super::tables::{IDS, LINKS, META_TABLE, PAYLOADS, TYPE_INDEX};
use crate::cas::NodeId;
use crate::store::damage::{join_helper, spawn_helper};
use crate::store::error::{Result, StoreError};
use crate::store::node::{Prepared, PutOutcome, StoredNode};
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use std::collections::HashMap;

/// Length of the fixed part of a `links` record: id, type, timestamp, digest. The references
/// follow it, 16 bytes each: the referenced id and the sequence number it was stored under
/// when this node was written ([`NO_SEQ`] when it was not stored then).
pub(crate) const LINK_HEAD: usize = 8 + 8 + 8 + 32;
/// The sequence number of a reference whose node was not stored when the referrer was written.
pub(crate) const NO_SEQ: u64 = u64::MAX;
/// Bytes a payload adds to a `payloads` record: its end offset (u32 LE), the node id (u64 LE).
const ENTRY_HEAD: usize = 4 + 8;
/// Most bytes a `payloads` record collects from several payloads: one 16 KiB page minus room
/// for redb's leaf header. A larger payload gets a record of its own.
const RECORD_BYTES: usize = 16 * 1024 - 64;
pub(crate) const GC_TOUCHED: TableDefinition<u64, ()> = TableDefinition::new("gc_touched");
/// The `meta` key set while a collection runs (its owner's pid).
pub(crate) const GC_RUNNING: &str = "gc_running";

/// Records, inside a put's transaction, the existing nodes it put again, when a collection is
/// running.
pub(crate) fn touch(tx: &WriteTransaction, ids: impl Iterator<Item = u64>) -> Result<()> {
    let running = tx.open_table(META_TABLE)?.get(GC_RUNNING)?.is_some();
    if running {
        let mut t = tx.open_table(GC_TOUCHED)?;
        for id in ids {
            t.insert(id, ())?;
        }
    }
    Ok(())
}

/// A `links` record, read in place: `id ‖ type ‖ timestamp (u64 LE each) ‖ BLAKE3 digest (32)
/// ‖ (referenced id ‖ its seq or NO_SEQ) (u64 LE each) per reference, in schema order`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link<'a> {
    pub(crate) id: NodeId,
    pub(crate) type_id: NodeId,
    pub(crate) timestamp: u64,
    pub(crate) digest: &'a [u8],
    /// The references (derived).
    refs: &'a [u8],
}

impl Link<'_> {
    /// Reads a `links` record; `None` when it is too short or its references are not whole.
    pub(crate) fn read(b: &[u8]) -> Option<Link<'_>> {
        if b.len() < LINK_HEAD || !(b.len() - LINK_HEAD).is_multiple_of(16) {
            return None;
        }
        let u = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        Some(Link {
            id: NodeId(u(0)),
            type_id: NodeId(u(8)),
            timestamp: u(16),
            digest: &b[24..56],
            refs: &b[LINK_HEAD..],
        })
    }

    /// Reads the `links` record stored under `seq`.
    ///
    /// # Errors
    /// [`StoreError::CorruptRecord`] naming `seq` when it does not parse.
    pub(crate) fn at(seq: u64, b: &[u8]) -> Result<Link<'_>> {
        Link::read(b).ok_or_else(|| StoreError::CorruptRecord {
            what: "links",
            message: format!("the record at {seq} does not parse"),
        })
    }

    /// The references: each id with the sequence number its node had when this one was
    /// written ([`NO_SEQ`] when it was not stored then). The number is a hint: a node removed by
    /// a collection and put again has another.
    pub(crate) fn refs(&self) -> impl Iterator<Item = (NodeId, u64)> + '_ {
        self.refs.chunks_exact(16).map(|c| {
            let u = |o: usize| u64::from_le_bytes(c[o..o + 8].try_into().expect("8 bytes"));
            (NodeId(u(0)), u(8))
        })
    }

    /// The referenced ids, in schema order.
    pub(crate) fn ref_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.refs().map(|(id, _)| id)
    }
}

/// The `links` record of a node: see [`Link`].
pub(crate) fn encode_link_into(
    id: NodeId,
    type_id: NodeId,
    timestamp: u64,
    digest: &[u8],
    refs: impl IntoIterator<Item = (NodeId, u64)>,
    v: &mut Vec<u8>,
) {
    v.clear();
    v.extend_from_slice(&id.0.to_le_bytes());
    v.extend_from_slice(&type_id.0.to_le_bytes());
    v.extend_from_slice(&timestamp.to_le_bytes());
    v.extend_from_slice(digest);
    for (r, seq) in refs {
        v.extend_from_slice(&r.0.to_le_bytes());
        v.extend_from_slice(&seq.to_le_bytes());
    }
}

/// The `ids` and `links` tables of one transaction, for reading nodes by id.
pub(crate) struct Lookup<'a, I, L> {
    pub(crate) ids: &'a I,
    pub(crate) links: &'a L,
}

impl<I, L> Lookup<'_, I, L>
where
    I: ReadableTable<u64, u64>,
    L: ReadableTable<u64, &'static [u8]>,
{
    /// The sequence number of node `id`, if stored.
    pub(crate) fn seq(&self, id: NodeId) -> Result<Option<u64>> {
        Ok(self.ids.get(id.0)?.map(|v| v.value()))
    }

    /// Copies the `links` record of node `id` into `buf` and returns its sequence number, or
    /// `None` when the node is not stored. `hint`, a sequence number a reference remembers
    /// ([`NO_SEQ`] for none), is tried first: a walk then reads records in write order instead
    /// of looking each id up.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when `ids` names a record that is missing or another node's.
    pub(crate) fn read(&self, id: NodeId, hint: u64, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        let own = id.0.to_le_bytes();
        if hint != NO_SEQ
            && let Some(v) = self.links.get(hint)?
            && v.value().get(..8) == Some(&own[..])
        {
            buf.clear();
            buf.extend_from_slice(v.value());
            return Ok(Some(hint));
        }
        let Some(seq) = self.seq(id)? else {
            return Ok(None);
        };
        let v = self.links.get(seq)?.ok_or(StoreError::Corrupt(id))?;
        if v.value().get(..8) != Some(&own[..]) {
            return Err(StoreError::Corrupt(id));
        }
        buf.clear();
        buf.extend_from_slice(v.value());
        Ok(Some(seq))
    }
}

/// The entries of a `payloads` record whose key is `first`: `(seq, id, payload CBOR)` each,
/// seq counting up from `first`; an `Err(first)` when the record does not parse.
///
/// A record is `n (u32 LE) ‖ end offset (u32 LE) × n ‖ entry × n`, an entry being
/// `id (u64 LE) ‖ payload CBOR` and ending at its offset (counted from the first entry), so one
/// entry is found without reading the others.
pub(crate) fn entries(first: u64, b: &[u8]) -> Entries<'_> {
    Entries {
        first,
        rec: Record::read(b),
        i: 0,
    }
}

/// A parsed `payloads` record.
#[derive(Clone, Copy)]
struct Record<'a> {
    ends: &'a [u8],
    body: &'a [u8],
}

impl<'a> Record<'a> {
    fn read(b: &'a [u8]) -> Option<Record<'a>> {
        let n = u32::from_le_bytes(b.get(..4)?.try_into().expect("4 bytes")) as usize;
        let ends = b.get(4..4 + 4 * n)?;
        Some(Record {
            ends,
            body: &b[4 + 4 * n..],
        })
    }

    fn len(&self) -> usize {
        self.ends.len() / 4
    }

    fn end(&self, i: usize) -> usize {
        u32::from_le_bytes(self.ends[4 * i..4 * i + 4].try_into().expect("4 bytes")) as usize
    }

    /// Entry `i`: the node id and its payload.
    fn get(&self, i: usize) -> Option<(NodeId, &'a [u8])> {
        let start = if i == 0 { 0 } else { self.end(i - 1) };
        let e = self.body.get(start..self.end(i))?;
        let id = e.get(..8)?;
        Some((
            NodeId(u64::from_le_bytes(id.try_into().expect("8 bytes"))),
            &e[8..],
        ))
    }
}

/// See [`entries`].
pub(crate) struct Entries<'a> {
    first: u64,
    rec: Option<Record<'a>>,
    i: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = std::result::Result<(u64, NodeId, &'a [u8]), u64>;

    fn next(&mut self) -> Option<Self::Item> {
        let seq = self.first + self.i as u64;
        let Some(rec) = self.rec else {
            if self.i > 0 {
                return None;
            }
            self.i = 1;
            return Some(Err(seq));
        };
        if self.i >= rec.len() {
            return None;
        }
        match rec.get(self.i) {
            Some((id, p)) => {
                self.i += 1;
                Some(Ok((seq, id, p)))
            }
            None => {
                self.rec = None;
                self.i = 1;
                Some(Err(seq))
            }
        }
    }
}

/// The payload of node `id`, stored under `seq`, or `None` when no record holds it.
pub(crate) fn find_payload<P>(payloads: &P, id: NodeId, seq: u64) -> Result<Option<Vec<u8>>>
where
    P: ReadableTable<u64, &'static [u8]>,
{
    let Some(e) = payloads.range(..=seq)?.next_back() else {
        return Ok(None);
    };
    let (k, v) = e?;
    let (Some(i), Some(rec)) = (seq.checked_sub(k.value()), Record::read(v.value())) else {
        return Ok(None);
    };
    Ok(usize::try_from(i)
        .ok()
        .filter(|&i| i < rec.len())
        .and_then(|i| rec.get(i))
        .filter(|&(owner, _)| owner == id)
        .map(|(_, p)| p.to_vec()))
}

/// Walks the payload entries beside `items` (sorted by sequence number, `key` giving each one's
/// sequence number and node id), reading only the records that hold them, in file order, and
/// calls `f` with each item and its payload. Entries of no item are skipped (`verify` reports
/// them).
///
/// # Errors
/// [`StoreError::Corrupt`] for the first item whose entry is missing or names another node, a
/// redb failure, or the first error `f` returns.
pub(crate) fn join_payloads<P, T, E: From<StoreError>>(
    payloads: &P,
    items: &[T],
    key: impl Fn(&T) -> (u64, NodeId),
    mut f: impl FnMut(&T, &[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E>
where
    P: ReadableTable<u64, &'static [u8]>,
{
    let (Some(first), Some(last)) = (items.first(), items.last()) else {
        return Ok(());
    };
    let (lo, hi) = (key(first).0, key(last).0);
    // The record holding `lo` may start before it.
    let start = match payloads.range(..=lo).map_err(StoreError::from)?.next_back() {
        Some(e) => e.map_err(StoreError::from)?.0.value(),
        None => 0,
    };
    let mut items = items.iter().peekable();
    'records: for r in payloads.range(start..=hi).map_err(StoreError::from)? {
        let (k, v) = r.map_err(StoreError::from)?;
        for entry in entries(k.value(), v.value()) {
            let Some(&item) = items.peek() else {
                break 'records;
            };
            // A broken record: the item it should hold is reported below.
            let Ok((seq, owner, payload)) = entry else {
                break;
            };
            let (want, id) = key(item);
            if seq < want {
                continue;
            }
            if seq > want || owner != id {
                return Err(StoreError::Corrupt(id).into());
            }
            f(item, payload)?;
            items.next();
        }
    }
    match items.next() {
        Some(item) => Err(StoreError::Corrupt(key(item).1).into()),
        None => Ok(()),
    }
}

/// Reads node `id`: its sequence number, its `links` record, then its payload.
pub(crate) fn read_node<I, L, P>(
    lk: &Lookup<'_, I, L>,
    payloads: &P,
    id: NodeId,
) -> Result<Option<StoredNode>>
where
    I: ReadableTable<u64, u64>,
    L: ReadableTable<u64, &'static [u8]>,
    P: ReadableTable<u64, &'static [u8]>,
{
    let mut buf = Vec::new();
    let Some(seq) = lk.read(id, NO_SEQ, &mut buf)? else {
        return Ok(None);
    };
    let l = Link::read(&buf).ok_or(StoreError::Corrupt(id))?;
    let payload = find_payload(payloads, id, seq)?.ok_or(StoreError::Corrupt(id))?;
    Ok(Some(stored_node(seq, &l, payload)))
}

/// The node a `links` record and a payload make.
pub(crate) fn stored_node(seq: u64, l: &Link<'_>, payload_cbor: Vec<u8>) -> StoredNode {
    StoredNode {
        id: l.id,
        digest: l.digest.try_into().expect("32 bytes"),
        timestamp: l.timestamp,
        type_id: l.type_id,
        seq,
        payload_cbor,
    }
}

/// Writes `nodes` inside `tx`; see [`Store::put`].
///
/// Nothing is written until every node has been checked, so a collision leaves `tx` as it was.
/// Sequence numbers follow the order of `nodes`: payloads and `links` records are appended
/// under them (ascending keys, so each leaf is written once, full) and the type index lists a
/// type's nodes in write order. The `ids` entries (16 bytes) are written in id order:
/// ids are uniformly random, so sorted inserts make consecutive ones share the B-tree path that
/// is already cached and dirty. The payload records are a table of their own: a put of at
/// least [`PARALLEL_PUT`] new nodes writes them on a second thread while this one writes the
/// `ids`, `links` and type index entries.
// Long: every table of a put in the one order that keeps each leaf written once (checks, then
// ids, links and index beside the payloads).
pub(crate) fn put_in<'a>(
    tx: &WriteTransaction,
    nodes: impl ExactSizeIterator<Item = (&'a Prepared, u64)>,
) -> Result<Vec<PutOutcome>> {
    let items: Vec<(&Prepared, u64)> = nodes.collect();
    let mut ids = tx.open_table(IDS)?;
    let mut links = tx.open_table(LINKS)?;
    let mut order: Vec<usize> = (0..items.len()).collect();
    // Stable: of two equal ids in one batch, the earlier one is written.
    order.sort_by_key(|&i| items[i].0.id.0);
    let mut out = vec![PutOutcome::Existed; items.len()];
    let mut earlier: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut prev: Option<u64> = None;
    for &i in &order {
        let p = items[i].0;
        if prev == Some(p.id.0) {
            // A repeat inside the batch: same id, so its bytes must match the first.
            let first = items[order[order.partition_point(|&j| items[j].0.id.0 < p.id.0)]].0;
            if first.digest != p.digest {
                return Err(StoreError::HashCollision(p.id));
            }
            continue;
        }
        prev = Some(p.id.0);
        match ids.get(p.id.0)?.map(|v| v.value()) {
            Some(seq) => {
                let old = links.get(seq)?.ok_or(StoreError::Corrupt(p.id))?;
                let b = old.value();
                let l = Link::read(b)
                    .filter(|l| l.id == p.id)
                    .ok_or(StoreError::Corrupt(p.id))?;
                if l.digest != p.digest {
                    return Err(StoreError::HashCollision(p.id));
                }
                // The timestamp is the first write's: an import may know an earlier one.
                if items[i].1 < l.timestamp {
                    let mut v = b.to_vec();
                    v[16..24].copy_from_slice(&items[i].1.to_le_bytes());
                    earlier.push((seq, v));
                }
            }
            None => out[i] = PutOutcome::Inserted,
        }
    }
    for (seq, v) in earlier {
        links.insert(seq, v.as_slice())?;
    }
    // A collection in progress keeps what is put again while it runs.
    if out.contains(&PutOutcome::Existed) {
        touch(
            tx,
            (0..items.len())
                .filter(|&i| out[i] == PutOutcome::Existed)
                .map(|i| items[i].0.id.0),
        )?;
    }
    let mut mt = tx.open_table(META_TABLE)?;
    let first_seq = mt.get("next_seq")?.map_or(0, |v| v.value());
    let mut seqs = vec![0u64; items.len()];
    let mut seq = first_seq;
    for (i, o) in out.iter().enumerate() {
        if *o == PutOutcome::Inserted {
            seqs[i] = seq;
            seq += 1;
        }
    }
    if seq == first_seq {
        return Ok(out);
    }
    let fresh: Vec<usize> = (0..items.len())
        .filter(|&i| out[i] == PutOutcome::Inserted)
        .collect();
    let keys = || -> Result<()> {
        let mut batch: HashMap<u64, u64, BuildU64> =
            HashMap::with_capacity_and_hasher(fresh.len(), BuildU64);
        for &i in order.iter().filter(|&&i| out[i] == PutOutcome::Inserted) {
            ids.insert(items[i].0.id.0, seqs[i])?;
            batch.insert(items[i].0.id.0, seqs[i]);
        }
        // The `links` records in seq order (appended), each reference with the sequence number
        // of its node: from the batch, else from `ids`.
        let mut buf = Vec::new();
        let mut refs = Vec::new();
        for &i in &fresh {
            let (p, now_ms) = items[i];
            refs.clear();
            for r in &p.refs {
                let seq = match batch.get(&r.0) {
                    Some(&s) => s,
                    None => ids.get(r.0)?.map_or(NO_SEQ, |v| v.value()),
                };
                refs.push((*r, seq));
            }
            encode_link_into(
                p.id,
                p.type_id,
                now_ms,
                &p.digest,
                refs.iter().copied(),
                &mut buf,
            );
            links.insert(seqs[i], buf.as_slice())?;
        }
        drop((ids, links));
        let mut index: Vec<(u64, u64, u64)> = fresh
            .iter()
            .map(|&i| (items[i].0.type_id.0, seqs[i], items[i].0.id.0))
            .collect();
        index.sort_unstable();
        let mut ti = tx.open_table(TYPE_INDEX)?;
        for (ty, s, id) in index {
            ti.insert((ty, s), id)?;
        }
        Ok(())
    };
    let records = || write_payloads(tx, &items, &fresh, &seqs);
    if fresh.len() >= PARALLEL_PUT {
        // The keys and the payload records are separate tables of one transaction: a large
        // put writes them on two threads.
        std::thread::scope(|s| {
            let r = spawn_helper(s, records);
            let k = keys();
            k.and(join_helper(r))
        })?;
    } else {
        keys()?;
        records()?;
    }
    mt.insert("next_seq", seq)?;
    Ok(out)
}

/// New nodes at least this many in one put write their payload records on a second thread
/// (a thread's start costs what a few dozen payloads do).
const PARALLEL_PUT: usize = 4096;

/// Writes the payloads of `items[fresh]` in seq order, packed several to a record (one insert
/// and one page write for many payloads instead of one each).
fn write_payloads(
    tx: &WriteTransaction,
    items: &[(&Prepared, u64)],
    fresh: &[usize],
    seqs: &[u64],
) -> Result<()> {
    let mut pt = tx.open_table(PAYLOADS)?;
    let mut start = 0;
    while start < fresh.len() {
        let mut end = start;
        let mut len = 0;
        while end < fresh.len() {
            let l = ENTRY_HEAD + items[fresh[end]].0.payload_cbor.len();
            if end > start && len + l > RECORD_BYTES {
                break;
            }
            len += l;
            end += 1;
        }
        let n = end - start;
        let mut g = pt.insert_reserve(seqs[fresh[start]], 4 + len)?;
        let m = g.as_mut();
        let (ends, mut body) = m.split_at_mut(4 + 4 * n);
        ends[..4].copy_from_slice(&(n as u32).to_le_bytes());
        let mut off = 0usize;
        for (k, &i) in fresh[start..end].iter().enumerate() {
            let p = items[i].0;
            let l = 8 + p.payload_cbor.len();
            let (e, rest) = body.split_at_mut(l);
            e[..8].copy_from_slice(&p.id.0.to_le_bytes());
            e[8..].copy_from_slice(&p.payload_cbor);
            body = rest;
            off += l;
            let end =
                u32::try_from(off).map_err(|_| StoreError::Internal("payload too large".into()))?;
            ends[4 + 4 * k..8 + 4 * k].copy_from_slice(&end.to_le_bytes());
        }
        start = end;
    }
    Ok(())
}

/// A hasher for u64 keys that are already uniformly distributed (XXH64 outputs).
#[derive(Clone, Copy, Default)]
pub(crate) struct BuildU64;

impl std::hash::BuildHasher for BuildU64 {
    type Hasher = U64Hasher;
    fn build_hasher(&self) -> U64Hasher {
        U64Hasher(0)
    }
}

/// See [`BuildU64`].
#[derive(Default)]
pub(crate) struct U64Hasher(u64);

impl std::hash::Hasher for U64Hasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
