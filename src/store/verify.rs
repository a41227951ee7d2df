//! Rebuilding derived tables (`reindex`) and checking the whole store (`verify`).

use super::nodes::{
    BuildU64, HEADER, Header, entries as entries_of, find_payload, join_payloads, read_node,
    unpack_refs,
};
use super::{NODES, PAYLOADS, Result, Store, StoreError, TYPE_INDEX};
use crate::cas::bootstrap::META;
use crate::cas::{NodeId, cbor, hash};
use redb::{ReadableTable, ReadableTableMetadata};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One problem `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// The record cannot be read at all.
    Unreadable(NodeId),
    /// The payload bytes are not canonical CBOR.
    BadPayload(NodeId),
    /// The stored bytes hash to another id.
    WrongId {
        /// The key it is stored under.
        id: NodeId,
        /// What its bytes hash to.
        actual: NodeId,
    },
    /// The BLAKE3 digest does not match the bytes.
    BadDigest(NodeId),
    /// The node's type is not a stored schema. A warning, not damage: the TypeScript tool
    /// stores nodes of any type and an import keeps them (with no references).
    MissingType {
        /// The node.
        id: NodeId,
        /// Its type.
        type_id: NodeId,
    },
    /// The type index lacks the node.
    NotIndexed(NodeId),
    /// The type index names a node that is not stored, or under the wrong type.
    StaleIndex {
        /// The indexed type.
        type_id: NodeId,
        /// The id it lists.
        id: NodeId,
    },
    /// The node's stored references differ from those its payload holds.
    WrongRefs(NodeId),
    /// The node's payload record is missing or names another node.
    NoPayload(NodeId),
    /// A `payloads` record whose entries from this sequence number on do not parse.
    BrokenPayloads(u64),
    /// A payload entry whose node is not stored, or is stored with another sequence number.
    StalePayload {
        /// The node the record names.
        id: NodeId,
        /// The record's key.
        seq: u64,
    },
    /// A stored schema whose reference plan does not compile, so the references of its
    /// nodes cannot be checked.
    BadSchema {
        /// The schema node.
        type_id: NodeId,
        /// Why.
        message: String,
    },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Unreadable(id) => write!(f, "{id}: unreadable record"),
            Damage::BadPayload(id) => write!(f, "{id}: payload is not canonical CBOR"),
            Damage::WrongId { id, actual } => write!(f, "{id}: content hashes to {actual}"),
            Damage::BadDigest(id) => write!(f, "{id}: BLAKE3 digest mismatch"),
            Damage::MissingType { id, type_id } => {
                write!(f, "{id}: type {type_id} is not a stored schema")
            }
            Damage::NotIndexed(id) => write!(f, "{id}: missing from the type index"),
            Damage::StaleIndex { type_id, id } => write!(
                f,
                "{id}: listed under type {type_id} but not stored with that type"
            ),
            Damage::WrongRefs(id) => {
                write!(f, "{id}: stored references differ from the payload's")
            }
            Damage::NoPayload(id) => write!(f, "{id}: payload record missing"),
            Damage::BrokenPayloads(seq) => {
                write!(f, "payload entries from seq {seq} on do not parse")
            }
            Damage::StalePayload { id, seq } => {
                write!(
                    f,
                    "{id}: payload record {seq} for a node not stored with it"
                )
            }
            Damage::BadSchema { type_id, message } => write!(f, "{type_id}: {message}"),
        }
    }
}

/// The outcome of `verify`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Nodes checked.
    pub nodes: u64,
    /// Problems found, at most [`VerifyReport::LIMIT`] of them kept.
    pub damage: Vec<Damage>,
    /// Problems found in all.
    pub damage_count: u64,
    /// Findings that are not damage (nodes whose type is not a schema), at most
    /// [`VerifyReport::LIMIT`] of them kept.
    pub warnings: Vec<Damage>,
    /// Warnings found in all.
    pub warning_count: u64,
}

impl VerifyReport {
    /// How many problems are kept in the report.
    pub const LIMIT: usize = 1000;

    /// Whether nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.damage_count == 0
    }

    fn push(&mut self, d: Damage) {
        if matches!(d, Damage::MissingType { .. }) {
            self.warning_count += 1;
            if self.warnings.len() < Self::LIMIT {
                self.warnings.push(d);
            }
            return;
        }
        self.damage_count += 1;
        if self.damage.len() < Self::LIMIT {
            self.damage.push(d);
        }
    }
}

/// Progress callback: (done, total).
pub type Progress<'a> = &'a dyn Fn(u64, u64);

/// A node as `reindex` sees it: where it is, and where its stored references are.
struct Entry {
    seq: u64,
    id: u64,
    type_id: u64,
    refs_at: usize,
    refs_len: usize,
}

/// Schemas by type id, as `reindex` meets them (`None`: the type is not a schema).
type Types = HashMap<u64, Option<Arc<super::TypeInfo>>, BuildU64>;

impl Store {
    /// Rebuilds the derived data from the nodes and their payloads, in one transaction: the
    /// references in every `nodes` record (rewriting only records that differ) and the type
    /// index. Returns the number of nodes indexed.
    ///
    /// The `nodes` records are read first (they are small), then the payloads in sequence
    /// order, which is the order they lie in the file.
    ///
    /// # Errors
    /// A redb failure, or a node whose payload is corrupt. A node whose type is not a schema
    /// has no references.
    pub fn reindex(&self, progress: Progress<'_>) -> Result<u64> {
        self.guard(|| {
            let tx = self.begin_write()?;
            tx.delete_table(TYPE_INDEX)?;
            let mut count = 0u64;
            {
                let mut nodes = tx.open_table(NODES)?;
                let payloads = tx.open_table(PAYLOADS)?;
                let total = nodes.len()?;
                let mut nodes_by_seq: Vec<Entry> = Vec::with_capacity(total as usize);
                let mut stored: Vec<u64> = Vec::new();
                for e in nodes.iter()? {
                    let (k, v) = e?;
                    let id = NodeId(k.value());
                    let h = Header::read(v.value()).ok_or(StoreError::Corrupt(id))?;
                    let refs_at = stored.len();
                    stored.extend(unpack_refs(h.refs).map(|r| r.0));
                    nodes_by_seq.push(Entry {
                        seq: h.seq,
                        id: id.0,
                        type_id: h.type_id.0,
                        refs_at,
                        refs_len: stored.len() - refs_at,
                    });
                }
                nodes_by_seq.sort_unstable_by_key(|e| e.seq);
                let mut types: Types = HashMap::with_hasher(BuildU64);
                let mut fixes: Vec<(u64, Vec<NodeId>)> = Vec::new();
                let mut found = Vec::new();
                // Walk the payload entries in seq order beside the nodes sorted by seq.
                join_payloads(
                    &payloads,
                    &nodes_by_seq,
                    |e| (e.seq, NodeId(e.id)),
                    |e, payload| {
                        let id = NodeId(e.id);
                        found.clear();
                        let type_id = NodeId(e.type_id);
                        if type_id != META && type_id != id {
                            let info = match types.get(&type_id.0) {
                                Some(i) => i,
                                None => {
                                    // A type that is not a schema (kept from an import) gives its
                                    // nodes no references.
                                    let i = match self.type_info_in(&nodes, &payloads, type_id) {
                                        Ok(i) => Some(i),
                                        Err(StoreError::UnknownType(_)) => None,
                                        Err(e) => return Err(e),
                                    };
                                    types.entry(type_id.0).or_insert(i)
                                }
                            };
                            if let Some(info) = info {
                                info.plan()?
                                    .ids_in_cbor(payload, &mut found)
                                    .map_err(|_| StoreError::Corrupt(id))?;
                            }
                        }
                        let old = &stored[e.refs_at..e.refs_at + e.refs_len];
                        if !found.iter().map(|r| r.0).eq(old.iter().copied()) {
                            fixes.push((e.id, found.clone()));
                        }
                        count += 1;
                        if count.is_multiple_of(65536) {
                            progress(count, total);
                        }
                        Ok::<_, StoreError>(())
                    },
                )?;
                drop(payloads);
                for (id, refs) in fixes {
                    let mut rec = nodes.get(id)?.expect("read above").value()[..HEADER].to_vec();
                    rec.extend(refs.iter().flat_map(|r| r.0.to_le_bytes()));
                    nodes.insert(id, rec.as_slice())?;
                }
                let mut index: Vec<(u64, u64, u64)> = nodes_by_seq
                    .iter()
                    .map(|e| (e.type_id, e.seq, e.id))
                    .collect();
                drop(nodes_by_seq);
                index.sort_unstable();
                let mut ti = tx.open_table(TYPE_INDEX)?;
                for (t, s, id) in index {
                    ti.insert((t, s), id)?;
                }
                progress(count, total);
            }
            tx.commit()?;
            Ok(count)
        })
    }

    /// The schema of `type_id`: from the cache, else as stored in the tables given.
    fn type_info_in<N, P>(
        &self,
        nodes: &N,
        payloads: &P,
        type_id: NodeId,
    ) -> Result<Arc<super::TypeInfo>>
    where
        N: ReadableTable<u64, &'static [u8]>,
        P: ReadableTable<u64, &'static [u8]>,
    {
        if let Ok(i) = self.type_info(type_id) {
            return Ok(i);
        }
        match read_node(nodes, payloads, type_id)? {
            Some(n) if n.type_id == META => Ok(Arc::new(super::TypeInfo::new(n.payload()?))),
            _ => Err(StoreError::UnknownType(type_id)),
        }
    }

    /// Re-hashes every node, checks its digest, recomputes its references and compares them
    /// with the stored ones, checks its presence in the type index, and checks that no payload
    /// or index entry names a missing node.
    ///
    /// The payloads are read in sequence order (the order they lie in the file); each one's
    /// `nodes` record is looked up by id.
    ///
    /// # Errors
    /// A redb failure (damage is reported in the result, not as an error).
    pub fn verify(&self, progress: Progress<'_>) -> Result<VerifyReport> {
        self.guard(|| {
            let tx = self.begin_read()?;
            let nodes = tx.open_table(NODES)?;
            let payloads = tx.open_table(PAYLOADS)?;
            let index = tx.open_table(TYPE_INDEX)?;
            let total = nodes.len()?;
            let mut report = VerifyReport::default();
            // Per type: whether it is a stored schema, and its schema when that can be read.
            let mut types: HashMap<u64, (bool, Option<Arc<super::TypeInfo>>), BuildU64> =
                HashMap::with_hasher(BuildU64);
            let mut unreadable: HashSet<u64, BuildU64> = HashSet::with_hasher(BuildU64);
            for r in payloads.iter()? {
                let (k, v) = r?;
                for entry in entries_of(k.value(), v.value()) {
                    let (seq, id, payload) = match entry {
                        Ok(e) => e,
                        Err(seq) => {
                            report.push(Damage::BrokenPayloads(seq));
                            break;
                        }
                    };
                    let Some(rec) = nodes.get(id.0)? else {
                        report.push(Damage::StalePayload { id, seq });
                        continue;
                    };
                    let Some(h) = Header::read(rec.value()) else {
                        if unreadable.insert(id.0) {
                            report.nodes += 1;
                            report.push(Damage::Unreadable(id));
                        }
                        continue;
                    };
                    if h.seq != seq {
                        report.push(Damage::StalePayload { id, seq });
                        continue;
                    }
                    report.nodes += 1;
                    if report.nodes.is_multiple_of(65536) {
                        progress(report.nodes, total);
                    }
                    self.check_node(
                        &mut report,
                        &nodes,
                        &payloads,
                        &index,
                        &mut types,
                        id,
                        &h,
                        payload,
                    )?;
                }
            }
            if report.nodes != total {
                // Some nodes have no payload record of their own.
                for e in nodes.iter()? {
                    let (k, v) = e?;
                    let id = NodeId(k.value());
                    let Some(h) = Header::read(v.value()) else {
                        if unreadable.insert(id.0) {
                            report.nodes += 1;
                            report.push(Damage::Unreadable(id));
                        }
                        continue;
                    };
                    let own = find_payload(&payloads, id, h.seq)?.is_some();
                    if !own {
                        report.nodes += 1;
                        report.push(Damage::NoPayload(id));
                    }
                }
            }
            if index.len()? != report.nodes {
                for e in index.iter()? {
                    let (k, v) = e?;
                    let (t, _) = k.value();
                    let id = NodeId(v.value());
                    let ok = nodes
                        .get(id.0)?
                        .and_then(|g| Header::read(g.value()).map(|h| h.type_id.0 == t))
                        .unwrap_or(false);
                    if !ok {
                        report.push(Damage::StaleIndex {
                            type_id: NodeId(t),
                            id,
                        });
                    }
                }
            }
            progress(report.nodes, total);
            Ok(report)
        })
    }

    /// The checks of one node whose `nodes` record `h` and payload were read.
    #[allow(clippy::too_many_arguments)]
    fn check_node<N, P, I>(
        &self,
        report: &mut VerifyReport,
        nodes: &N,
        payloads: &P,
        index: &I,
        types: &mut HashMap<u64, (bool, Option<Arc<super::TypeInfo>>), BuildU64>,
        id: NodeId,
        h: &Header<'_>,
        payload: &[u8],
    ) -> Result<()>
    where
        N: ReadableTable<u64, &'static [u8]>,
        P: ReadableTable<u64, &'static [u8]>,
        I: ReadableTable<(u64, u64), u64>,
    {
        let seq = h.seq;
        let mut found = Vec::new();
        let self_typed = h.type_id == id;
        let actual = hash::id_for(h.type_id, self_typed, payload);
        if actual != id {
            report.push(Damage::WrongId { id, actual });
        }
        if hash::digest(h.type_id, self_typed, payload)[..] != *h.digest {
            report.push(Damage::BadDigest(id));
        }
        if !cbor::decode(payload).is_ok_and(|v| cbor::encode(&v) == payload) {
            report.push(Damage::BadPayload(id));
        }
        let mut info = None;
        if !self_typed {
            let (ok, i) = match types.get(&h.type_id.0) {
                Some(t) => t,
                None => {
                    let ok = h.type_id == META
                        || nodes
                            .get(h.type_id.0)?
                            .and_then(|t| Header::read(t.value()).map(|t| t.type_id == META))
                            .unwrap_or(false);
                    let i = if ok && h.type_id != META {
                        self.type_info_in(nodes, payloads, h.type_id).ok()
                    } else {
                        None
                    };
                    if let Some(Err(e)) = i.as_ref().map(|i| i.plan()) {
                        report.push(Damage::BadSchema {
                            type_id: h.type_id,
                            message: e.to_string(),
                        });
                    }
                    types.entry(h.type_id.0).or_insert((ok, i))
                }
            };
            if !ok {
                report.push(Damage::MissingType {
                    id,
                    type_id: h.type_id,
                });
            }
            info = i.clone();
        }
        // Schemas and the meta-schema reference nothing; other nodes what their schema says.
        let known = match &info {
            // Bytes the plan cannot read are reported as a bad payload above.
            Some(i) => i
                .plan()
                .is_ok_and(|p| p.ids_in_cbor(payload, &mut found).is_ok()),
            None => self_typed || h.type_id == META,
        };
        if known
            && !found
                .iter()
                .map(|r| r.0)
                .eq(unpack_refs(h.refs).map(|r| r.0))
        {
            report.push(Damage::WrongRefs(id));
        }
        if index.get((h.type_id.0, seq))?.map(|g| g.value()) != Some(id.0) {
            report.push(Damage::NotIndexed(id));
        }
        Ok(())
    }
}
