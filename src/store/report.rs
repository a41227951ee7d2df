//! What the maintenance operations report: garbage collection, counts, verify.

use super::records::Lease;
use crate::cas::NodeId;

/// What a collection is asked to do.
pub struct GcOptions<'a> {
    /// The clock, ms since the epoch.
    pub now_ms: u64,
    /// Nodes first written less than this long ago (ms) are kept.
    pub grace_ms: u64,
    /// Count what would be collected; write nothing.
    pub dry_run: bool,
    /// This process, recorded as the collection's owner.
    pub owner: Lease,
    /// Whether the owner of a collection found running, or of a step's lease, is still alive.
    pub owner_is_live: &'a dyn Fn(&Lease) -> bool,
    /// (candidates swept, candidates).
    pub progress: Progress<'a>,
}

/// What a collection did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Nodes in the snapshot it marked.
    pub scanned: u64,
    /// Of those, the ones it kept: reachable from a root, young or pinned.
    pub reachable: u64,
    /// The others: candidates for collection.
    pub garbage: u64,
    /// Nodes removed (with `dry_run`, the candidates).
    pub collected: u64,
    /// Payload bytes of the nodes removed (with `dry_run`, of the candidates).
    pub bytes: u64,
}

/// The store's size and what no root reaches (`cas count`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Count {
    /// Stored nodes.
    pub(crate) nodes: u64,
    /// Their payload bytes (canonical CBOR).
    pub(crate) bytes: u64,
    /// Nodes reachable from a root (pins, schemas and the bootstrap nodes included).
    pub(crate) reachable: u64,
    /// Nodes no root reaches.
    pub(crate) garbage: u64,
    /// Their payload bytes.
    pub(crate) garbage_bytes: u64,
}

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
    /// The node's `ids` entry is missing or names another sequence number than its record's.
    Unlisted(NodeId),
    /// A `payloads` record whose entries from this sequence number on do not parse.
    BrokenPayloads(u64),
    /// The `links` record of this sequence number does not parse.
    BrokenLinks(u64),
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
            Damage::Unlisted(id) => write!(f, "{id}: id table entry missing or wrong"),
            Damage::BrokenPayloads(seq) => {
                write!(f, "payload entries from seq {seq} on do not parse")
            }
            Damage::BrokenLinks(seq) => write!(f, "the links record of seq {seq} does not parse"),
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

    pub(crate) fn push(&mut self, d: Damage) {
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

/// The node ids a thread-state message names (a failed step's raw output, say): its words of
/// 13 Crockford characters.
pub(crate) fn ids_in_text(s: &str) -> impl Iterator<Item = u64> + '_ {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() == crate::cas::id::ID_LEN)
        .filter_map(|w| NodeId::parse(w).ok())
        .map(|id| id.0)
}

/// The checks of one node that hold on every backend, adding what it finds to `report`: its
/// bytes hash to its id and digest, its payload is canonical CBOR, its type is a stored schema
/// (`typing`: whether it is, and its checks when known; `None` for a self-typed node) and its
/// stored references are those the schema finds in the payload.
pub(crate) fn check_node(
    report: &mut VerifyReport,
    id: NodeId,
    type_id: NodeId,
    digest: &[u8],
    payload: &[u8],
    stored_refs: &[NodeId],
    typing: Option<(bool, Option<std::sync::Arc<super::types::TypeInfo>>)>,
) {
    use crate::cas::bootstrap::META;
    use crate::cas::{cbor, hash};
    let self_typed = typing.is_none();
    let actual = hash::id_for(type_id, self_typed, payload);
    if actual != id {
        report.push(Damage::WrongId { id, actual });
    }
    if hash::digest(type_id, self_typed, payload)[..] != *digest {
        report.push(Damage::BadDigest(id));
    }
    if !cbor::decode(payload).is_ok_and(|v| cbor::encode(&v) == payload) {
        report.push(Damage::BadPayload(id));
    }
    let mut info = None;
    if let Some((ok, i)) = typing {
        if !ok {
            report.push(Damage::MissingType { id, type_id });
        }
        info = i;
    }
    // Schemas and the meta-schema reference nothing; other nodes what their schema says.
    let mut found = Vec::new();
    let known = match &info {
        // Bytes the plan cannot read are reported as a bad payload above.
        Some(i) => i
            .plan()
            .is_ok_and(|p| p.ids_in_cbor(payload, &mut found).is_ok()),
        None => self_typed || type_id == META,
    };
    if known && found != stored_refs {
        report.push(Damage::WrongRefs(id));
    }
}
