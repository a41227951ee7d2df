//! Rebuilding derived tables (`reindex`) and checking the whole store (`verify`).

use super::nodes::{BuildU64, HEADER, StoredNode, refs_of, unpack_refs};
use super::{NODES, REFS, Result, Store, StoreError, TYPE_INDEX};
use crate::cas::bootstrap::META;
use crate::cas::{NodeId, cbor, hash};
use redb::{ReadableTable, ReadableTableMetadata};
use std::collections::HashMap;
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
    /// The node's type is not a stored schema.
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
    /// The node has no entry in the reference table.
    NoRefs(NodeId),
    /// The reference table has an entry for a node that is not stored.
    StaleRefs(NodeId),
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
            Damage::NoRefs(id) => write!(f, "{id}: missing from the reference table"),
            Damage::StaleRefs(id) => {
                write!(f, "{id}: reference entry for a node that is not stored")
            }
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
}

impl VerifyReport {
    /// How many problems are kept in the report.
    pub const LIMIT: usize = 1000;

    /// Whether nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.damage_count == 0
    }

    fn push(&mut self, d: Damage) {
        self.damage_count += 1;
        if self.damage.len() < Self::LIMIT {
            self.damage.push(d);
        }
    }
}

/// Progress callback: (done, total).
pub type Progress<'a> = &'a dyn Fn(u64, u64);

impl Store {
    /// Rebuilds the type index and the reference table from the nodes, in one transaction.
    /// Returns the number of nodes indexed.
    ///
    /// # Errors
    /// A redb failure, or a node whose type schema is missing or whose payload is corrupt.
    pub fn reindex(&self, progress: Progress<'_>) -> Result<u64> {
        let tx = self.begin_write()?;
        tx.delete_table(TYPE_INDEX)?;
        tx.delete_table(REFS)?;
        let mut count = 0u64;
        {
            let nodes = tx.open_table(NODES)?;
            let total = nodes.len()?;
            let mut refs = tx.open_table(REFS)?;
            let mut index: Vec<(u64, u64, u64)> = Vec::with_capacity(total as usize);
            let mut types: HashMap<u64, Arc<super::TypeInfo>, BuildU64> =
                HashMap::with_hasher(BuildU64);
            let mut packed = Vec::new();
            let mut found = Vec::new();
            for e in nodes.iter()? {
                let (k, v) = e?;
                let id = NodeId(k.value());
                let b = v.value();
                if b.len() < HEADER {
                    return Err(StoreError::Corrupt(id));
                }
                let u = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
                let (type_id, seq) = (NodeId(u(40)), u(48));
                index.push((type_id.0, seq, id.0));
                packed.clear();
                if type_id != META && type_id != id {
                    let info = match types.get(&type_id.0) {
                        Some(i) => i,
                        None => {
                            let i = self.type_info_in(&nodes, type_id)?;
                            types.entry(type_id.0).or_insert(i)
                        }
                    };
                    if info.has_refs {
                        let payload = &b[HEADER..];
                        found.clear();
                        let fast = info
                            .plan()
                            .is_some_and(|p| p.scan(payload, &mut found).is_some());
                        if !fast {
                            let v = cbor::decode(payload).map_err(|_| StoreError::Corrupt(id))?;
                            found = refs_of(&info.schema, &v);
                        }
                        packed.extend(found.iter().flat_map(|r| r.0.to_le_bytes()));
                    }
                }
                refs.insert(id.0, packed.as_slice())?;
                count += 1;
                if count.is_multiple_of(65536) {
                    progress(count, total);
                }
            }
            index.sort_unstable();
            let mut ti = tx.open_table(TYPE_INDEX)?;
            for (t, s, id) in index {
                ti.insert((t, s), id)?;
            }
            progress(count, total);
        }
        tx.commit()?;
        Ok(count)
    }

    fn type_info_in(
        &self,
        nodes: &redb::Table<'_, u64, &[u8]>,
        type_id: NodeId,
    ) -> Result<Arc<super::TypeInfo>> {
        if let Ok(i) = self.type_info(type_id) {
            return Ok(i);
        }
        match nodes.get(type_id.0)? {
            Some(v) => {
                let n = StoredNode::decode(type_id, v.value())?;
                Ok(Arc::new(super::TypeInfo::new(n.payload()?)))
            }
            None => Err(StoreError::UnknownType(type_id)),
        }
    }

    /// Re-hashes every node, checks its digest and its presence in the derived tables, and
    /// checks that the derived tables name no missing node.
    ///
    /// # Errors
    /// A redb failure (damage is reported in the result, not as an error).
    pub fn verify(&self, progress: Progress<'_>) -> Result<VerifyReport> {
        let tx = self.begin_read()?;
        let nodes = tx.open_table(NODES)?;
        let index = tx.open_table(TYPE_INDEX)?;
        let refs = tx.open_table(REFS)?;
        let total = nodes.len()?;
        let mut report = VerifyReport::default();
        let mut types_ok: HashMap<u64, bool> = HashMap::new();
        for e in nodes.iter()? {
            let (k, v) = e?;
            let id = NodeId(k.value());
            report.nodes += 1;
            if report.nodes.is_multiple_of(65536) {
                progress(report.nodes, total);
            }
            let Ok(n) = StoredNode::decode(id, v.value()) else {
                report.push(Damage::Unreadable(id));
                continue;
            };
            let self_typed = n.type_id == id;
            let actual = if self_typed {
                hash::self_id(&n.payload_cbor)
            } else {
                hash::node_id(n.type_id, &n.payload_cbor)
            };
            if actual != id {
                report.push(Damage::WrongId { id, actual });
            }
            if hash::digest(n.type_id, self_typed, &n.payload_cbor) != n.digest {
                report.push(Damage::BadDigest(id));
            }
            match cbor::decode(&n.payload_cbor) {
                Ok(v) if cbor::encode(&v) == n.payload_cbor => {}
                _ => report.push(Damage::BadPayload(id)),
            }
            if !self_typed {
                let ok = *types_ok.entry(n.type_id.0).or_insert_with(|| {
                    n.type_id == META
                        || nodes
                            .get(n.type_id.0)
                            .ok()
                            .flatten()
                            .and_then(|t| StoredNode::decode(n.type_id, t.value()).ok())
                            .is_some_and(|t| t.type_id == META)
                });
                if !ok {
                    report.push(Damage::MissingType {
                        id,
                        type_id: n.type_id,
                    });
                }
            }
            if index.get((n.type_id.0, n.seq))?.map(|g| g.value()) != Some(id.0) {
                report.push(Damage::NotIndexed(id));
            }
            if refs.get(id.0)?.is_none() {
                report.push(Damage::NoRefs(id));
            }
        }
        if index.len()? != report.nodes {
            for e in index.iter()? {
                let (k, v) = e?;
                let (t, _) = k.value();
                let id = NodeId(v.value());
                let ok = nodes
                    .get(id.0)?
                    .and_then(|g| StoredNode::decode(id, g.value()).ok())
                    .is_some_and(|n| n.type_id.0 == t);
                if !ok {
                    report.push(Damage::StaleIndex {
                        type_id: NodeId(t),
                        id,
                    });
                }
            }
        }
        if refs.len()? != report.nodes {
            for e in refs.iter()? {
                let (k, v) = e?;
                let _ = unpack_refs(v.value()).count();
                if nodes.get(k.value())?.is_none() {
                    report.push(Damage::StaleRefs(NodeId(k.value())));
                }
            }
        }
        progress(report.nodes, total);
        Ok(report)
    }
}
