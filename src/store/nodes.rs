//! Nodes: prepare (hash, check, find refs), put, get, prefix lookup, refs and walk.

use super::{IDS, LINKS, META_TABLE, PAYLOADS, Result, Store, StoreError, TYPE_INDEX};
use crate::cas::bootstrap::META;
use crate::cas::id::{ID_LEN, digit_value};
use crate::cas::{NodeId, Value, cbor, hash, schema};
use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use std::collections::{HashMap, HashSet, VecDeque};

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
/// A node ready to be written: hashed, checked, with its references found.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Its id.
    pub id: NodeId,
    /// Its type (the meta-schema id for schemas; its own id for the meta-schema).
    pub type_id: NodeId,
    /// Canonical CBOR of the payload.
    pub payload_cbor: Vec<u8>,
    /// BLAKE3 of the hashed bytes.
    pub digest: [u8; 32],
    /// Referenced ids, in schema order.
    pub refs: Vec<NodeId>,
}

/// What a put did with one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// Written now.
    Inserted,
    /// Already stored with the same bytes; its first timestamp is kept.
    Existed,
}

/// A consistent view of the nodes at one moment: see [`Store::snapshot`].
pub struct Snapshot {
    /// `ids`, `links` and `payloads`; `None` before the first node is stored.
    tables: Option<(IdsTable, BytesTable, BytesTable)>,
    /// The server, for a store on PostgreSQL (nodes never change there: each lookup is a
    /// query of its own, unless read ahead).
    pg: Option<std::sync::Arc<super::pg::Pg>>,
    /// Nodes read from the server, ahead ([`Snapshot::read_ahead`]) or one by one, by id.
    ahead: std::sync::Mutex<std::collections::HashMap<NodeId, StoredNode>>,
    /// The store's file, named by damage errors.
    path: std::path::PathBuf,
}

type BytesTable = redb::ReadOnlyTable<u64, &'static [u8]>;
type IdsTable = redb::ReadOnlyTable<u64, u64>;

impl Snapshot {
    /// The node `id`, if stored.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        if let Some(pg) = &self.pg {
            if let Some(n) = self.ahead().get(&id) {
                return Ok(Some(n.clone()));
            }
            // Kept for the snapshot's later reads (a step reads its role's schemas more than
            // once).
            let n = pg.get(id)?;
            if let Some(n) = &n {
                self.ahead().insert(id, n.clone());
            }
            return Ok(n);
        }
        super::guard_at(&self.path, || match &self.tables {
            Some((ids, links, payloads)) => read_node(&Lookup { ids, links }, payloads, id),
            None => Ok(None),
        })
    }

    fn ahead(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<NodeId, StoredNode>> {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the nodes of `ids` ahead in one query, for a store on PostgreSQL, so that the
    /// [`Snapshot::get`]s that follow make no round trip; nothing for a redb file, whose reads
    /// are local.
    ///
    /// # Errors
    /// A failure of the server.
    pub(crate) fn read_ahead(&self, ids: impl IntoIterator<Item = NodeId>) -> Result<()> {
        let Some(pg) = &self.pg else { return Ok(()) };
        let want: Vec<NodeId> = {
            let have = self.ahead();
            ids.into_iter()
                .filter(|id| !have.contains_key(id))
                .collect()
        };
        if want.len() > 1 {
            let nodes = pg.get_many(&want)?;
            self.ahead().extend(nodes.into_iter().map(|n| (n.id, n)));
        }
        Ok(())
    }

    /// Reads the chain of a thread ending at `head` ahead, for a store on PostgreSQL (a query a
    /// page of nodes instead of one a node): `head`, then, while the node is of type `step`,
    /// the node its first reference names; it stops at a node read already (a damaged chain may
    /// loop). A reader still checks each link itself.
    ///
    /// # Errors
    /// A failure of the server.
    pub(crate) fn read_chain_ahead(&self, head: NodeId, step: NodeId) -> Result<()> {
        let Some(pg) = &self.pg else { return Ok(()) };
        let mut cur = head;
        loop {
            if self.ahead().contains_key(&cur) {
                // Read already, or a cycle (which the reader reports).
                return Ok(());
            }
            let page = pg.chain(cur, step, super::pg::CHAIN_PAGE)?;
            let full = page.len() == super::pg::CHAIN_PAGE as usize;
            let mut ahead = self.ahead();
            let mut next = None;
            for (n, after) in page {
                if n.type_id != step {
                    next = None;
                } else {
                    next = after;
                }
                if ahead.insert(n.id, n).is_some() {
                    return Ok(());
                }
            }
            match next {
                Some(n) if full => cur = n,
                _ => return Ok(()),
            }
        }
    }

    /// The type of node `id`, if stored (its `links` record only; the payload is not read).
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn type_of(&self, id: NodeId) -> Result<Option<NodeId>> {
        if let Some(pg) = &self.pg {
            return pg.type_of(id);
        }
        super::guard_at(&self.path, || match &self.tables {
            Some((ids, links, _)) => {
                let mut buf = Vec::new();
                if (Lookup { ids, links })
                    .read(id, NO_SEQ, &mut buf)?
                    .is_none()
                {
                    return Ok(None);
                }
                Ok(Some(
                    Link::read(&buf).ok_or(StoreError::Corrupt(id))?.type_id,
                ))
            }
            None => Ok(None),
        })
    }

    /// The digests of `ids` (`None` for one not stored), in their order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>> {
        if let Some(pg) = &self.pg {
            return pg.digests(ids);
        }
        let mut buf = Vec::new();
        super::guard_at(&self.path, || {
            let Some((ids_t, links, _)) = &self.tables else {
                return Ok(vec![None; ids.len()]);
            };
            let lk = Lookup { ids: ids_t, links };
            ids.iter()
                .map(|&id| {
                    if lk.read(id, NO_SEQ, &mut buf)?.is_none() {
                        return Ok(None);
                    }
                    let l = Link::read(&buf).ok_or(StoreError::Corrupt(id))?;
                    Ok(l.digest.try_into().ok())
                })
                .collect()
        })
    }

    /// Whether `id` is stored (its `ids` entry only).
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn has(&self, id: NodeId) -> Result<bool> {
        if let Some(pg) = &self.pg {
            return pg.has(id);
        }
        match &self.tables {
            Some((ids, _, _)) => Ok(ids.get(id.0)?.is_some()),
            None => Ok(false),
        }
    }
}

/// A node as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredNode {
    /// Its id.
    pub id: NodeId,
    /// Its type.
    pub type_id: NodeId,
    /// Milliseconds since the epoch of its first write.
    pub timestamp: u64,
    /// Write sequence number (orders the type index).
    pub seq: u64,
    /// BLAKE3 of the hashed bytes.
    pub digest: [u8; 32],
    /// Canonical CBOR of the payload.
    pub payload_cbor: Vec<u8>,
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
    Ok(Some(StoredNode::new(seq, &l, payload)))
}

impl StoredNode {
    /// Whether the stored bytes still hash to the node's id (XXH64); [`is_intact`](Self::is_intact)
    /// checks the digest and timestamp as well.
    pub(crate) fn hashes_to_id(&self) -> bool {
        hash::id_for(self.type_id, self.type_id == self.id, &self.payload_cbor) == self.id
    }

    /// Whether the stored bytes still hash to the node's id and BLAKE3 digest, and the
    /// timestamp is one a JavaScript number holds exactly. The timestamp is not hashed: damage
    /// that reaches it without reaching the digest before it sets its high bytes, which this
    /// catches.
    pub(crate) fn is_intact(&self) -> bool {
        let self_typed = self.type_id == self.id;
        self.timestamp <= MAX_SAFE_MS
            && hash::id_for(self.type_id, self_typed, &self.payload_cbor) == self.id
            && hash::digest(self.type_id, self_typed, &self.payload_cbor) == self.digest
    }

    pub(crate) fn new(seq: u64, l: &Link<'_>, payload_cbor: Vec<u8>) -> StoredNode {
        StoredNode {
            id: l.id,
            digest: l.digest.try_into().expect("32 bytes"),
            timestamp: l.timestamp,
            type_id: l.type_id,
            seq,
            payload_cbor,
        }
    }

    /// The decoded payload.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when the stored bytes do not decode.
    pub fn payload(&self) -> Result<Value> {
        cbor::decode(&self.payload_cbor).map_err(|_| StoreError::Corrupt(self.id))
    }

    /// The node file bytes `CBOR({type, payload, timestamp})` of the directory layout.
    pub(crate) fn file_bytes(&self) -> Vec<u8> {
        cbor::encode_node(&self.type_id.to_wire(), &self.payload_cbor, self.timestamp)
    }
}

/// References of a payload of the type `info` describes, found in its canonical CBOR, so in the
/// order `reindex` and `verify` find them whatever the key order of the `Value` it came from.
///
/// # Errors
/// [`StoreError::Schema`] for a schema whose plan does not compile, [`StoreError::Corrupt`]
/// naming `id` when the bytes are not well-formed.
pub(crate) fn refs_in(info: &super::TypeInfo, id: NodeId, cbor: &[u8]) -> Result<Vec<NodeId>> {
    let mut found = Vec::new();
    info.plan()?
        .ids_in_cbor(cbor, &mut found)
        .map_err(|_| StoreError::Corrupt(id))?;
    Ok(found)
}

/// Puts sharing write transactions: see [`Store::bulk`]. Dropped without
/// [`finish`](Bulk::finish), the puts since the last commit are lost.
pub struct Bulk<'a> {
    store: &'a Store,
    tx: Option<WriteTransaction>,
    pending: usize,
    commit_every: usize,
    /// Nodes put through this load (PostgreSQL analyzes its tables after a large one).
    loaded: usize,
}

impl Bulk<'_> {
    /// Puts nodes (as [`Store::put`]); commits when `commit_every` nodes are pending.
    ///
    /// # Errors
    /// As [`Store::put`]; after a hash collision nothing of this call is written and the
    /// load may go on.
    pub fn put(&mut self, nodes: &[Prepared], now_ms: u64) -> Result<Vec<PutOutcome>> {
        if self.store.pg().is_some() {
            self.loaded += nodes.len();
            return self.store.put(nodes, now_ms);
        }
        self.put_with(nodes.len(), |tx| {
            put_in(tx, nodes.iter().map(|p| (p, now_ms)))
        })
    }

    /// Puts nodes that carry their own first-write timestamps (an import).
    ///
    /// # Errors
    /// As [`Bulk::put`].
    pub(crate) fn put_at(&mut self, nodes: &[(Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        if self.store.pg().is_some() {
            self.loaded += nodes.len();
            return self.store.put_at(nodes);
        }
        self.put_with(nodes.len(), |tx| {
            put_in(tx, nodes.iter().map(|(p, t)| (p, *t)))
        })
    }

    fn put_with(
        &mut self,
        n: usize,
        f: impl FnOnce(&WriteTransaction) -> Result<Vec<PutOutcome>>,
    ) -> Result<Vec<PutOutcome>> {
        let store = self.store;
        let out = store.guard(|| {
            if self.tx.is_none() {
                self.tx = Some(store.begin_write()?);
            }
            f(self.tx.as_ref().expect("opened above"))
        })?;
        self.pending += n;
        if self.pending >= self.commit_every {
            self.commit()?;
        }
        Ok(out)
    }

    /// Commits what is pending.
    ///
    /// # Errors
    /// A redb failure.
    pub fn commit(&mut self) -> Result<()> {
        self.pending = 0;
        match self.tx.take() {
            Some(tx) => self.store.guard(|| Ok(tx.commit()?)),
            None => Ok(()),
        }
    }

    /// Commits what is pending and ends the load.
    ///
    /// # Errors
    /// A redb failure.
    pub fn finish(mut self) -> Result<()> {
        // The server's planner needs statistics of what a large load brought, or a walk over
        // it scans whole tables.
        if let Some(pg) = self.store.pg()
            && self.loaded >= ANALYZE_FROM
        {
            pg.analyze()?;
        }
        self.commit()
    }
}

/// One step of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkEvent {
    /// A node reached and present.
    Node(NodeId),
    /// A node referenced but not in the store.
    Missing(NodeId),
}

/// Totals of a walk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Present nodes visited.
    pub visited: u64,
    /// Referenced nodes that are missing.
    pub missing: u64,
}

impl Store {
    /// Hashes and checks a payload of type `type_id`: the type must be a stored schema and, when
    /// `validate` is set, the payload must match it.
    ///
    /// # Errors
    /// [`StoreError::UnknownType`], [`StoreError::Schema`].
    pub fn prepare(&self, type_id: NodeId, payload: &Value, validate: bool) -> Result<Prepared> {
        if type_id == META {
            return self.prepare_schema(payload);
        }
        let info = self.type_info(type_id)?;
        if validate {
            info.validator()?.validate(payload, &type_id.to_wire())?;
        }
        let payload_cbor = cbor::encode(payload);
        let id = hash::node_id(type_id, &payload_cbor);
        let refs = refs_in(&info, id, &payload_cbor)?;
        Ok(Prepared {
            id,
            digest: hash::digest(type_id, false, &payload_cbor),
            type_id,
            payload_cbor,
            refs,
        })
    }

    /// Checks a schema against the ocas whitelist and prepares it as a node of the meta type.
    ///
    /// # Errors
    /// [`StoreError::Schema`] naming the offending keyword.
    pub fn prepare_schema(&self, schema: &Value) -> Result<Prepared> {
        schema::check_schema(schema)?;
        Ok(prepare_unchecked(META, schema))
    }

    /// Writes nodes in one transaction. Existing ids with identical bytes are left alone.
    ///
    /// # Errors
    /// [`StoreError::HashCollision`] when an id exists with different bytes (nothing is
    /// written then).
    pub fn put(&self, nodes: &[Prepared], now_ms: u64) -> Result<Vec<PutOutcome>> {
        if self.pg().is_some() {
            return self.write(|w| w.put(nodes, now_ms));
        }
        self.guard(|| {
            let tx = self.begin_write()?;
            let out = put_in(&tx, nodes.iter().map(|p| (p, now_ms)))?;
            tx.commit()?;
            Ok(out)
        })
    }

    /// Writes nodes that carry their own first-write timestamps (import), in one transaction.
    ///
    /// # Errors
    /// As [`Store::put`].
    pub(crate) fn put_at(&self, nodes: &[(Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        if let Some(pg) = self.pg() {
            let items: Vec<(&Prepared, u64)> = nodes.iter().map(|(p, t)| (p, *t)).collect();
            return self.guard(|| {
                let mut c = pg.conn()?;
                let mut w = super::pg::PgWriter::begin(pg, &mut c)?;
                let out = w.put(&items)?;
                w.commit()?;
                Ok(out)
            });
        }
        self.guard(|| {
            let tx = self.begin_write()?;
            let out = put_in(&tx, nodes.iter().map(|(p, t)| (p, *t)))?;
            tx.commit()?;
            Ok(out)
        })
    }

    /// A bulk load: puts that share one write transaction, committed every `commit_every`
    /// nodes and at [`Bulk::finish`]. Each random `ids` leaf is then written once per commit
    /// instead of once per batch; other writers wait while a commit is pending.
    pub fn bulk(&self, commit_every: usize) -> Bulk<'_> {
        Bulk {
            store: self,
            tx: None,
            pending: 0,
            commit_every,
            loaded: 0,
        }
    }

    /// The node `id`, if stored.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        if let Some(pg) = self.pg() {
            return pg.get(id);
        }
        self.snapshot()?.get(id)
    }

    /// A read snapshot for many lookups: one read transaction instead of one per
    /// [`Store::get`] (each costs file locks and a header read when several processes share
    /// the file). It sees the store as it was when taken.
    ///
    /// # Errors
    /// A redb failure.
    pub fn snapshot(&self) -> Result<Snapshot> {
        if let Some(pg) = self.pg() {
            return Ok(Snapshot {
                tables: None,
                pg: Some(pg.clone()),
                ahead: Default::default(),
                path: self.path.clone(),
            });
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let tables = match tx.open_table(IDS) {
                Ok(t) => Some((t, tx.open_table(LINKS)?, tx.open_table(PAYLOADS)?)),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(e.into()),
            };
            Ok(Snapshot {
                tables,
                pg: None,
                ahead: Default::default(),
                path: self.path.clone(),
            })
        })
    }

    /// Whether `id` is stored.
    ///
    /// # Errors
    /// A redb failure.
    pub fn has(&self, id: NodeId) -> Result<bool> {
        if let Some(pg) = self.pg() {
            return pg.has(id);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = tx.open_table(IDS)?;
            Ok(t.get(id.0)?.is_some())
        })
    }

    /// Number of stored nodes.
    ///
    /// # Errors
    /// A redb failure.
    pub fn node_count(&self) -> Result<u64> {
        if let Some(pg) = self.pg() {
            return pg.node_count();
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            Ok(tx.open_table(IDS)?.len()?)
        })
    }

    /// Resolves a full id or a unique prefix of 4 or more characters (any case).
    ///
    /// # Errors
    /// [`StoreError::BadId`], [`StoreError::NotFound`], [`StoreError::Ambiguous`].
    pub(crate) fn resolve(&self, input: &str) -> Result<NodeId> {
        self.guard(|| {
            let s = input.trim();
            let bad = || StoreError::BadId(input.to_string());
            if s.len() == ID_LEN {
                return NodeId::parse(s).map_err(|_| bad());
            }
            if s.len() < 4 || s.len() > ID_LEN {
                return Err(bad());
            }
            let mut p: u128 = 0;
            for (i, c) in s.bytes().enumerate() {
                let d = digit_value(c).ok_or_else(bad)?;
                if i == 0 && d >= 16 {
                    return Err(bad());
                }
                p = (p << 5) | u128::from(d);
            }
            let shift = 5 * (ID_LEN - s.len()) as u32;
            let lo = (p << shift) as u64;
            let hi = (((p + 1) << shift) - 1) as u64;
            let found = match self.pg() {
                Some(pg) => pg.ids_in(lo, hi)?,
                None => {
                    let tx = self.begin_read()?;
                    let t = tx.open_table(IDS)?;
                    let mut found = Vec::new();
                    for e in t.range(lo..=hi)?.take(10) {
                        found.push(NodeId(e?.0.value()));
                    }
                    found
                }
            };
            match found.len() {
                0 => Err(StoreError::NoMatch(input.to_string())),
                1 => Ok(found[0]),
                _ => Err(StoreError::Ambiguous {
                    prefix: input.to_string(),
                    candidates: found,
                }),
            }
        })
    }

    /// The references of node `id`, in schema order, or `None` when `id` is not stored.
    ///
    /// # Errors
    /// A redb failure.
    pub fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        if let Some(pg) = self.pg() {
            return pg.refs(id);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let (ids, links) = (tx.open_table(IDS)?, tx.open_table(LINKS)?);
            let mut buf = Vec::new();
            if (Lookup {
                ids: &ids,
                links: &links,
            })
            .read(id, NO_SEQ, &mut buf)?
            .is_none()
            {
                return Ok(None);
            }
            let l = Link::read(&buf).ok_or(StoreError::Corrupt(id))?;
            Ok(Some(l.ref_ids().collect()))
        })
    }

    /// Breadth-first walk from `root`, root first, each node once. Missing nodes are reported
    /// through `visit` as [`WalkEvent::Missing`], never skipped silently.
    ///
    /// Each reference carries the sequence number its node was stored under, so the walk reads
    /// `links` records by write order (the nodes of a thread lie close together) and looks an
    /// id up only when that number is stale.
    ///
    /// # Errors
    /// A redb failure.
    pub fn walk(&self, root: NodeId, mut visit: impl FnMut(WalkEvent)) -> Result<WalkStats> {
        if let Some(pg) = self.pg() {
            return pg.walk(root, visit);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let (ids, links) = (tx.open_table(IDS)?, tx.open_table(LINKS)?);
            let lk = Lookup {
                ids: &ids,
                links: &links,
            };
            let mut seen: HashSet<u64, BuildU64> = HashSet::with_hasher(BuildU64);
            let mut queue = VecDeque::new();
            let mut stats = WalkStats::default();
            let mut buf = Vec::new();
            seen.insert(root.0);
            queue.push_back((root, NO_SEQ, None));
            while let Some((id, hint, parent)) = queue.pop_front() {
                match lk.read(id, hint, &mut buf)? {
                    Some(_) => {
                        let l = Link::read(&buf).ok_or(StoreError::Corrupt(id))?;
                        stats.visited += 1;
                        visit(WalkEvent::Node(id));
                        for (r, seq) in l.refs() {
                            if seen.insert(r.0) {
                                queue.push_back((r, seq, Some(id)));
                            }
                        }
                    }
                    None => {
                        // A missing node is reported only when its referrer's payload really
                        // names it: stored references that do not match the payload are damage.
                        if let Some(p) = parent {
                            self.check_refs(p)?;
                        }
                        stats.missing += 1;
                        visit(WalkEvent::Missing(id));
                    }
                }
            }
            Ok(stats)
        })
    }

    /// Checks that the stored references of node `id` are the ones its payload holds.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when they differ or the payload cannot be read.
    fn check_refs(&self, id: NodeId) -> Result<()> {
        let n = self.get(id)?.ok_or(StoreError::Corrupt(id))?;
        if !n.hashes_to_id() {
            return Err(StoreError::Corrupt(id));
        }
        let stored = self.refs(id)?.ok_or(StoreError::Corrupt(id))?;
        let found = if n.type_id == id || n.type_id == META {
            Vec::new()
        } else {
            match self.type_info(n.type_id) {
                Ok(info) => refs_in(&info, id, &n.payload_cbor)?,
                // A node whose type is not a schema has no references.
                Err(StoreError::UnknownType(_)) => Vec::new(),
                Err(e) => return Err(e),
            }
        };
        if found == stored {
            Ok(())
        } else {
            Err(StoreError::Corrupt(id))
        }
    }

    /// Ids of type `type_id`, in write order.
    ///
    /// # Errors
    /// A redb failure.
    pub fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        if let Some(pg) = self.pg() {
            return pg.list_by_type(type_id);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = tx.open_table(TYPE_INDEX)?;
            let mut out = Vec::new();
            for e in t.range((type_id.0, 0)..=(type_id.0, u64::MAX))? {
                out.push(NodeId(e?.1.value()));
            }
            Ok(out)
        })
    }

    /// Visits every stored node in id order, in one read snapshot, streaming.
    ///
    /// # Errors
    /// A redb failure, or the first error `f` returns.
    pub fn for_each_node<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if let Some(pg) = self.pg() {
            return pg.for_each_node(false, f);
        }
        super::catching_damage(&self.path, || {
            let tx = self.begin_read()?;
            let t = tx.open_table(IDS).map_err(self.located())?;
            let links = tx.open_table(LINKS).map_err(self.located())?;
            let payloads = tx.open_table(PAYLOADS).map_err(self.located())?;
            for e in t.iter().map_err(self.located())? {
                let (k, v) = e.map_err(self.located())?;
                let (id, seq) = (NodeId(k.value()), v.value());
                let corrupt = || StoreError::Corrupt(id).located(&self.path);
                let rec = links
                    .get(seq)
                    .map_err(self.located())?
                    .ok_or_else(corrupt)?;
                let l = Link::read(rec.value())
                    .filter(|l| l.id == id)
                    .ok_or_else(corrupt)?;
                let payload = find_payload(&payloads, id, seq)?.ok_or_else(corrupt)?;
                f(StoredNode::new(seq, &l, payload))?;
            }
            Ok(())
        })
    }

    /// Visits every stored node in write (sequence) order, in one read snapshot, streaming.
    ///
    /// The `links` and payload records are read in the order they lie in the file, each once,
    /// where [`for_each_node`](Self::for_each_node) looks each node up by its id; memory holds
    /// one chunk of 8,192 nodes' records whatever the store's size.
    ///
    /// # Errors
    /// A redb failure, [`StoreError::Corrupt`] for a node whose payload entry is missing, or
    /// the first error `f` returns.
    pub(crate) fn for_each_node_in_write_order<E: From<StoreError>>(
        &self,
        f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if let Some(pg) = self.pg() {
            return pg.for_each_node(true, f);
        }
        super::catching_damage(&self.path, || {
            self.for_each_in_windows(SEQ_WINDOW, 0, u64::MAX, f)
        })
    }

    /// The write sequence's high-water mark: every node stored so far has a smaller sequence
    /// number, every node stored later one at least as large. Sequence numbers only grow, so
    /// the nodes written between two marks are those of
    /// [`for_each_node_written_between`](Self::for_each_node_written_between).
    ///
    /// # Errors
    /// A redb failure.
    pub fn write_mark(&self) -> Result<u64> {
        if let Some(pg) = self.pg() {
            return super::pg_gc::write_mark(pg);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let mt = match tx.open_table(META_TABLE) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
                Err(e) => return Err(e.into()),
            };
            Ok(mt.get("next_seq")?.map_or(0, |v| v.value()))
        })
    }

    /// The last node written before the write mark `mark`: its sequence number and id (`None`
    /// when there is none). Read from the payload record holding it, in one lookup: a cheap
    /// fingerprint of the store's write history up to `mark`.
    ///
    /// # Errors
    /// A redb failure, or a payload record that does not parse.
    pub fn last_written_before(&self, mark: u64) -> Result<Option<(u64, NodeId)>> {
        if let Some(pg) = self.pg() {
            return super::pg_gc::last_written_before(pg, mark);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let payloads = match tx.open_table(PAYLOADS) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let Some(r) = payloads.range(..mark)?.next_back() else {
                return Ok(None);
            };
            let (k, v) = r?;
            let mut last = None;
            for e in entries(k.value(), v.value()) {
                let (seq, id, _) = e.map_err(|first| StoreError::CorruptRecord {
                    what: "payloads",
                    message: format!("the record at {first} does not parse"),
                })?;
                if seq < mark {
                    last = Some((seq, id));
                }
            }
            Ok(last)
        })
    }

    /// `for_each_node_in_write_order`, restricted to the
    /// nodes whose sequence number is in `from..until` (two [`write_mark`](Self::write_mark)s).
    /// The payload records before `from` are not read.
    ///
    /// # Errors
    /// As `for_each_node_in_write_order`.
    pub fn for_each_node_written_between<E: From<StoreError>>(
        &self,
        from: u64,
        until: u64,
        f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if let Some(pg) = self.pg() {
            return super::pg_gc::for_each_node_written_between(pg, from, until, f);
        }
        super::catching_damage(&self.path, || {
            self.for_each_in_windows(SEQ_WINDOW, from, until, f)
        })
    }

    /// `for_each_node_in_write_order` from `from` up to (not including) `until`: the `links`
    /// records in chunks of `chunk`, each joined with the payload records that hold its nodes.
    fn for_each_in_windows<E: From<StoreError>>(
        &self,
        chunk: usize,
        from: u64,
        until: u64,
        mut f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        /// A node of the current chunk.
        struct Slot {
            seq: u64,
            id: NodeId,
            type_id: NodeId,
            timestamp: u64,
            digest: [u8; 32],
        }
        if from >= until {
            return Ok(());
        }
        let tx = self.begin_read()?;
        let links = match tx.open_table(LINKS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(StoreError::from(e).located(&self.path).into()),
        };
        let payloads = tx.open_table(PAYLOADS).map_err(self.located())?;
        let mut window: Vec<Slot> = Vec::with_capacity(chunk);
        let mut records = links.range(from..until).map_err(self.located())?;
        loop {
            window.clear();
            for e in records.by_ref().take(chunk) {
                let (k, v) = e.map_err(self.located())?;
                let seq = k.value();
                let l = Link::read(v.value()).ok_or_else(|| {
                    StoreError::CorruptRecord {
                        what: "links",
                        message: format!("the record at {seq} does not parse"),
                    }
                    .located(&self.path)
                })?;
                window.push(Slot {
                    seq,
                    id: l.id,
                    type_id: l.type_id,
                    timestamp: l.timestamp,
                    digest: l.digest.try_into().expect("32 bytes"),
                });
            }
            if window.is_empty() {
                return Ok(());
            }
            join_payloads(
                &payloads,
                &window,
                |s| (s.seq, s.id),
                |s, payload| {
                    f(StoredNode {
                        id: s.id,
                        type_id: s.type_id,
                        timestamp: s.timestamp,
                        seq: s.seq,
                        digest: s.digest,
                        payload_cbor: payload.to_vec(),
                    })
                    .map_err(Walked::Caller)
                },
            )
            .map_err(|e| match e {
                Walked::Store(e) => E::from(e.located(&self.path)),
                Walked::Caller(e) => e,
            })?;
        }
    }
}

/// An error of a walk over the store: the store's own, named with the file when it means
/// damage, or the caller's, passed on as it is.
enum Walked<E> {
    Store(StoreError),
    Caller(E),
}

impl<E> From<StoreError> for Walked<E> {
    fn from(e: StoreError) -> Self {
        Walked::Store(e)
    }
}

/// The greatest timestamp a node can have: JavaScript's `Number.MAX_SAFE_INTEGER`.
const MAX_SAFE_MS: u64 = (1 << 53) - 1;

/// Nodes a bulk load on PostgreSQL brings before its tables are analyzed at its end.
const ANALYZE_FROM: usize = 10_000;

/// `links` records per chunk of [`Store::for_each_node_in_write_order`].
const SEQ_WINDOW: usize = 8192;

/// Hashes a payload of `type_id` without any check (`type_id == META` makes a schema node;
/// a self-typed node is not made here).
pub fn prepare_unchecked(type_id: NodeId, payload: &Value) -> Prepared {
    let payload_cbor = cbor::encode(payload);
    Prepared {
        id: hash::node_id(type_id, &payload_cbor),
        digest: hash::digest(type_id, false, &payload_cbor),
        type_id,
        payload_cbor,
        refs: Vec::new(),
    }
}

/// Writes `nodes` inside `tx`; see [`Store::put`].
///
/// Nothing is written until every node has been checked, so a collision leaves `tx` as it was.
/// Sequence numbers follow the order of `nodes`: payloads and `links` records are appended
/// under them (ascending keys, so each leaf is written once, full) and the type index lists a
/// type's nodes in write order. The `ids` entries (16 bytes) are written in id order:
/// ids are uniformly random, so sorted inserts make consecutive ones share the B-tree path that
/// is already cached and dirty.
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
        super::gc::touch(
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
    let mut batch: HashMap<u64, u64, BuildU64> =
        HashMap::with_capacity_and_hasher(items.len(), BuildU64);
    for &i in order.iter().filter(|&&i| out[i] == PutOutcome::Inserted) {
        ids.insert(items[i].0.id.0, seqs[i])?;
        batch.insert(items[i].0.id.0, seqs[i]);
    }
    // The `links` records in seq order (appended), each reference with the sequence number of
    // its node: from the batch, else from `ids`.
    let mut buf = Vec::new();
    let mut refs = Vec::new();
    for i in (0..items.len()).filter(|&i| out[i] == PutOutcome::Inserted) {
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
    // Payloads in seq order, packed several to a record (one insert and one page write for
    // many payloads instead of one each).
    let mut pt = tx.open_table(PAYLOADS)?;
    let fresh: Vec<usize> = (0..items.len())
        .filter(|&i| out[i] == PutOutcome::Inserted)
        .collect();
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
    drop(pt);
    let mut index: Vec<(u64, u64, u64)> = (0..items.len())
        .filter(|&i| out[i] == PutOutcome::Inserted)
        .map(|i| (items[i].0.type_id.0, seqs[i], items[i].0.id.0))
        .collect();
    index.sort_unstable();
    let mut ti = tx.open_table(TYPE_INDEX)?;
    for (ty, s, id) in index {
        ti.insert((ty, s), id)?;
    }
    mt.insert("next_seq", seq)?;
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &Store, from: usize, n: usize) -> Vec<Prepared> {
        let text = crate::workflow::nodes::TEXT;
        (from..from + n)
            .map(|i| {
                s.prepare(text, &Value::str(format!("text {i}")), true)
                    .expect("prepare")
            })
            .collect()
    }

    fn in_windows(s: &Store, window: usize) -> Result<Vec<StoredNode>> {
        let mut seen = Vec::new();
        s.for_each_in_windows::<StoreError>(window, 0, u64::MAX, |n| {
            seen.push(n);
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn write_order_walk_gives_every_node_once_in_seq_order_whatever_the_window() {
        let dir = tempfile::tempdir().expect("dir");
        let s = Store::open(&dir.path().join("uwf.redb")).expect("store");
        // Batches of several sizes, so payload records straddle the windows.
        for (i, n) in [(0, 5), (5, 40), (45, 1), (46, 300)] {
            s.put(&texts(&s, i, n), 7).expect("put");
        }
        let mut by_id = Vec::new();
        s.for_each_node::<StoreError>(|n| {
            by_id.push(n);
            Ok(())
        })
        .expect("walk");
        by_id.sort_by_key(|n| n.seq);
        assert!(by_id.len() > 346, "the bootstrap schemas and the texts");
        for window in [1, 3, 64, 1 << 19] {
            assert_eq!(
                in_windows(&s, window).expect("walk"),
                by_id,
                "window {window}"
            );
        }
    }

    #[test]
    fn write_order_walk_reports_a_node_whose_payload_is_gone() {
        let dir = tempfile::tempdir().expect("dir");
        let s = Store::open(&dir.path().join("uwf.redb")).expect("store");
        let batch = texts(&s, 0, 20);
        s.put(&batch, 7).expect("put");
        let victim = s.get(batch[10].id).expect("get").expect("stored");
        // Remove the payload record holding the victim (and its neighbours).
        let tx = s.begin_write().expect("tx");
        {
            let mut p = tx.open_table(PAYLOADS).expect("payloads");
            let key = p
                .range(..=victim.seq)
                .expect("range")
                .next_back()
                .expect("a record")
                .expect("read")
                .0
                .value();
            p.remove(key).expect("remove");
        }
        tx.commit().expect("commit");
        for window in [3, 8192] {
            match in_windows(&s, window) {
                Err(StoreError::Damaged { what, .. }) if what.starts_with("corrupt record") => {}
                other => panic!("window {window}: {:?}", other.map(|v| v.len())),
            }
        }
    }

    /// The sequence number a reference keeps is a hint: a wrong one (a node collected and put
    /// again has another) costs a lookup by id, and the walk, the references and verify are
    /// as they were.
    #[test]
    fn a_stale_reference_seq_is_only_a_hint() {
        let dir = tempfile::tempdir().expect("dir");
        let s = Store::open(&dir.path().join("uwf.redb")).expect("store");
        let v = |j: &str| Value::from_json_str(j).expect("json");
        let out = texts(&s, 0, 3);
        s.put(&out, 7).expect("put");
        let start = s
            .prepare(
                crate::workflow::nodes::START_NODE,
                &v(r#"{"workflow":"95ST8MZ0QTKP9","prompt":"p","cwd":"/"}"#),
                true,
            )
            .expect("start");
        let step = s
            .prepare(
                crate::workflow::nodes::STEP_NODE,
                &v(&format!(
                    r#"{{"start":"{}","prev":null,"role":"r","output":"{}","detail":"{}","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/","assembledPrompt":null}}"#,
                    start.id, out[1].id, out[0].id
                )),
                true,
            )
            .expect("step");
        s.put(&[start.clone(), step.clone()], 8).expect("put");
        let walk = |s: &Store| {
            let mut seen = Vec::new();
            let st = s.walk(step.id, |e| seen.push(e)).expect("walk");
            (seen, st)
        };
        let before = walk(&s);
        assert_eq!(before.1.visited, 4);
        let seq_of = |id: NodeId| s.get(id).expect("get").expect("stored").seq;
        let step_seq = seq_of(step.id);
        // Point the step's references at other records (another node's, and none at all).
        for hints in [
            [seq_of(out[0].id), seq_of(out[2].id)],
            [1 << 40, NO_SEQ - 1],
        ] {
            let tx = s.begin_write().expect("tx");
            {
                let mut links = tx.open_table(LINKS).expect("links");
                let mut rec = links
                    .get(step_seq)
                    .expect("get")
                    .expect("rec")
                    .value()
                    .to_vec();
                for (i, h) in hints.iter().enumerate() {
                    let at = LINK_HEAD + 16 * i + 8;
                    rec[at..at + 8].copy_from_slice(&h.to_le_bytes());
                }
                links.insert(step_seq, rec.as_slice()).expect("insert");
            }
            tx.commit().expect("commit");
            assert_eq!(walk(&s), before, "hints {hints:?}");
            assert_eq!(
                s.refs(step.id).expect("refs"),
                Some(vec![start.id, out[0].id, out[1].id])
            );
            assert!(s.verify(&|_, _| {}).expect("verify").is_clean());
        }
    }
}
