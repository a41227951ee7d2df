//! Nodes as the store takes and gives them, on every backend.

use super::error::{Result, StoreError};
use super::types::TypeInfo;
use crate::cas::bootstrap::{self, META};
use crate::cas::{NodeId, Value, cbor, hash};

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
pub(crate) fn refs_in(info: &TypeInfo, id: NodeId, cbor: &[u8]) -> Result<Vec<NodeId>> {
    let mut found = Vec::new();
    info.plan()?
        .ids_in_cbor(cbor, &mut found)
        .map_err(|_| StoreError::Corrupt(id))?;
    Ok(found)
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

/// The greatest timestamp a node can have: JavaScript's `Number.MAX_SAFE_INTEGER`.
pub(crate) const MAX_SAFE_MS: u64 = (1 << 53) - 1;

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

/// The bootstrap schemas as nodes, those a new store starts with: the meta-schema typed by
/// itself, the others by it (the adapters' schemas, written on first use, aside).
pub(crate) fn bootstrap_nodes() -> Vec<Prepared> {
    bootstrap::builtins()
        .iter()
        .enumerate()
        .filter(|(_, b)| !b.on_first_use)
        .map(|(i, b)| {
            let self_typed = i == 0;
            Prepared {
                id: b.id,
                type_id: if self_typed { b.id } else { META },
                digest: hash::digest(META, self_typed, &b.cbor),
                payload_cbor: b.cbor.clone(),
                refs: Vec::new(),
            }
        })
        .collect()
}
