//! Nodes: prepare (hash, check, find refs), put, get, prefix lookup, refs and walk.

use super::{META_TABLE, NODES, REFS, Result, Store, StoreError, TYPE_INDEX};
use crate::cas::bootstrap::META;
use crate::cas::id::{ID_LEN, digit_value};
use crate::cas::{NodeId, Value, cbor, hash, refs, schema};
use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use std::collections::{HashSet, VecDeque};

pub(crate) const HEADER: usize = 32 + 8 + 8 + 8;

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

impl StoredNode {
    pub(crate) fn decode(id: NodeId, b: &[u8]) -> Result<StoredNode> {
        if b.len() < HEADER {
            return Err(StoreError::Corrupt(id));
        }
        let u = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        Ok(StoredNode {
            id,
            digest: b[..32].try_into().expect("32 bytes"),
            timestamp: u(32),
            type_id: NodeId(u(40)),
            seq: u(48),
            payload_cbor: b[HEADER..].to_vec(),
        })
    }

    /// The decoded payload.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when the stored bytes do not decode.
    pub fn payload(&self) -> Result<Value> {
        cbor::decode(&self.payload_cbor).map_err(|_| StoreError::Corrupt(self.id))
    }

    /// The node file bytes `CBOR({type, payload, timestamp})` of the directory layout.
    pub fn file_bytes(&self) -> Vec<u8> {
        cbor::encode_node(&self.type_id.to_wire(), &self.payload_cbor, self.timestamp)
    }
}

pub(crate) fn encode_record_into(p: &Prepared, timestamp: u64, seq: u64, v: &mut Vec<u8>) {
    v.clear();
    v.reserve(HEADER + p.payload_cbor.len());
    v.extend_from_slice(&p.digest);
    v.extend_from_slice(&timestamp.to_le_bytes());
    v.extend_from_slice(&p.type_id.0.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.extend_from_slice(&p.payload_cbor);
}

pub(crate) fn unpack_refs(b: &[u8]) -> impl Iterator<Item = NodeId> + '_ {
    b.chunks_exact(8)
        .map(|c| NodeId(u64::from_le_bytes(c.try_into().expect("8 bytes"))))
}

/// References of `payload` under `schema`, as ids (strings that are not ids are skipped).
pub(crate) fn refs_of(schema: &Value, payload: &Value) -> Vec<NodeId> {
    let mut strs = Vec::new();
    refs::collect_refs(schema, payload, &mut strs);
    strs.into_iter().filter_map(NodeId::parse_strict).collect()
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
        let refs = if info.has_refs {
            refs_of(&info.schema, payload)
        } else {
            Vec::new()
        };
        Ok(Prepared {
            id: hash::node_id(type_id, &payload_cbor),
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
        let tx = self.begin_write()?;
        let out = put_in(&tx, nodes.iter().map(|p| (p, now_ms)))?;
        tx.commit()?;
        Ok(out)
    }

    /// Writes nodes that carry their own first-write timestamps (import), in one transaction.
    ///
    /// # Errors
    /// As [`Store::put`].
    pub fn put_at(&self, nodes: &[(Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        let tx = self.begin_write()?;
        let out = put_in(&tx, nodes.iter().map(|(p, t)| (p, *t)))?;
        tx.commit()?;
        Ok(out)
    }

    /// The node `id`, if stored.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        let tx = self.begin_read()?;
        let t = match tx.open_table(NODES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match t.get(id.0)? {
            Some(v) => Ok(Some(StoredNode::decode(id, v.value())?)),
            None => Ok(None),
        }
    }

    /// Whether `id` is stored.
    ///
    /// # Errors
    /// A redb failure.
    pub fn has(&self, id: NodeId) -> Result<bool> {
        let tx = self.begin_read()?;
        let t = tx.open_table(NODES)?;
        Ok(t.get(id.0)?.is_some())
    }

    /// Number of stored nodes.
    ///
    /// # Errors
    /// A redb failure.
    pub fn node_count(&self) -> Result<u64> {
        let tx = self.begin_read()?;
        Ok(tx.open_table(NODES)?.len()?)
    }

    /// Resolves a full id or a unique prefix of 4 or more characters (any case).
    ///
    /// # Errors
    /// [`StoreError::BadId`], [`StoreError::NotFound`], [`StoreError::Ambiguous`].
    pub fn resolve(&self, input: &str) -> Result<NodeId> {
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
        let tx = self.begin_read()?;
        let t = tx.open_table(NODES)?;
        let mut found = Vec::new();
        for e in t.range(lo..=hi)?.take(10) {
            found.push(NodeId(e?.0.value()));
        }
        match found.len() {
            0 => Err(StoreError::NoMatch(input.to_string())),
            1 => Ok(found[0]),
            _ => Err(StoreError::Ambiguous {
                prefix: input.to_string(),
                candidates: found,
            }),
        }
    }

    /// The references of node `id`, in schema order, or `None` when `id` is not stored.
    ///
    /// # Errors
    /// A redb failure.
    pub fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        let tx = self.begin_read()?;
        let t = tx.open_table(REFS)?;
        Ok(t.get(id.0)?.map(|v| unpack_refs(v.value()).collect()))
    }

    /// Breadth-first walk from `root`, root first, each node once. Missing nodes are reported
    /// through `visit` as [`WalkEvent::Missing`], never skipped silently.
    ///
    /// # Errors
    /// A redb failure.
    pub fn walk(&self, root: NodeId, mut visit: impl FnMut(WalkEvent)) -> Result<WalkStats> {
        let tx = self.begin_read()?;
        let t = tx.open_table(REFS)?;
        let mut seen: HashSet<u64, BuildU64> = HashSet::with_hasher(BuildU64);
        let mut queue = VecDeque::new();
        let mut stats = WalkStats::default();
        seen.insert(root.0);
        queue.push_back(root);
        while let Some(id) = queue.pop_front() {
            match t.get(id.0)? {
                Some(v) => {
                    stats.visited += 1;
                    visit(WalkEvent::Node(id));
                    for r in unpack_refs(v.value()) {
                        if seen.insert(r.0) {
                            queue.push_back(r);
                        }
                    }
                }
                None => {
                    stats.missing += 1;
                    visit(WalkEvent::Missing(id));
                }
            }
        }
        Ok(stats)
    }

    /// Ids of type `type_id`, in write order.
    ///
    /// # Errors
    /// A redb failure.
    pub fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        let tx = self.begin_read()?;
        let t = tx.open_table(TYPE_INDEX)?;
        let mut out = Vec::new();
        for e in t.range((type_id.0, 0)..=(type_id.0, u64::MAX))? {
            out.push(NodeId(e?.1.value()));
        }
        Ok(out)
    }

    /// Visits every stored node in id order, in one read snapshot, streaming.
    ///
    /// # Errors
    /// A redb failure, or the first error `f` returns.
    pub fn for_each_node<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let tx = self.begin_read()?;
        let t = tx.open_table(NODES).map_err(StoreError::from)?;
        for e in t.iter().map_err(StoreError::from)? {
            let (k, v) = e.map_err(StoreError::from)?;
            f(StoredNode::decode(NodeId(k.value()), v.value())?)?;
        }
        Ok(())
    }
}

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
/// Sequence numbers follow the order of `nodes` (the type index lists a type's nodes in write
/// order), but the trees are written in key order: ids are uniformly random, so inserting them
/// sorted makes consecutive inserts share the B-tree path that is already cached and dirty
/// instead of jumping across the file for every node.
pub(crate) fn put_in<'a>(
    tx: &WriteTransaction,
    nodes: impl ExactSizeIterator<Item = (&'a Prepared, u64)>,
) -> Result<Vec<PutOutcome>> {
    let items: Vec<(&Prepared, u64)> = nodes.collect();
    let mut t = tx.open_table(NODES)?;
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
        match t.get(p.id.0)? {
            Some(old) => {
                let b = old.value();
                if b.len() < HEADER || b[..32] != p.digest {
                    return Err(StoreError::HashCollision(p.id));
                }
                // The timestamp is the first write's: an import may know an earlier one.
                let ts = u64::from_le_bytes(b[32..40].try_into().expect("8 bytes"));
                if items[i].1 < ts {
                    let mut v = b.to_vec();
                    v[32..40].copy_from_slice(&items[i].1.to_le_bytes());
                    earlier.push((p.id.0, v));
                }
            }
            None => out[i] = PutOutcome::Inserted,
        }
    }
    for (id, v) in earlier {
        t.insert(id, v.as_slice())?;
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
    let inserted = || {
        order
            .iter()
            .copied()
            .filter(|&i| out[i] == PutOutcome::Inserted)
    };
    let mut buf = Vec::new();
    for i in inserted() {
        let (p, now_ms) = items[i];
        encode_record_into(p, now_ms, seqs[i], &mut buf);
        t.insert(p.id.0, buf.as_slice())?;
    }
    drop(t);
    let mut rt = tx.open_table(REFS)?;
    let mut packed = Vec::new();
    for i in inserted() {
        let p = items[i].0;
        packed.clear();
        packed.extend(p.refs.iter().flat_map(|r| r.0.to_le_bytes()));
        rt.insert(p.id.0, packed.as_slice())?;
    }
    drop(rt);
    let mut index: Vec<(u64, u64, u64)> = inserted()
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
