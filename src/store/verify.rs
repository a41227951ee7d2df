//! Rebuilding derived tables (`reindex`) and checking the whole store (`verify`).

use super::nodes::{
    BuildU64, LINK_HEAD, Link, Lookup, NO_SEQ, encode_link_into, entries as entries_of,
    join_payloads, read_node,
};
use super::{IDS, LINKS, PAYLOADS, Result, Store, StoreError, TYPE_INDEX};
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

/// `links` records per chunk of `reindex`.
const CHUNK: usize = 8192;

/// One type's entries of the type index, read in order beside the nodes of that type.
struct Cursor<'a> {
    it: redb::Range<'a, (u64, u64), u64>,
    /// The current entry: (seq, id).
    cur: Option<(u64, u64)>,
}

impl<'a> Cursor<'a> {
    fn new(index: &'a redb::Table<'_, (u64, u64), u64>, type_id: u64) -> Result<Cursor<'a>> {
        let mut c = Cursor {
            it: index.range((type_id, 0)..=(type_id, u64::MAX))?,
            cur: None,
        };
        c.advance()?;
        Ok(c)
    }

    fn advance(&mut self) -> Result<()> {
        self.cur = match self.it.next() {
            Some(e) => {
                let (k, v) = e?;
                Some((k.value().1, v.value()))
            }
            None => None,
        };
        Ok(())
    }
}

impl Store {
    /// Rebuilds the derived data from the nodes and their payloads, in one transaction: the
    /// references in every `links` record (rewriting only records that differ) and the type
    /// index (rewritten only when it is wrong). Returns the number of nodes indexed.
    ///
    /// The `links` records and the payloads are read in sequence order, the order they lie in
    /// the file, one chunk at a time; the type index is read beside them, one cursor per type.
    /// A store whose derived data is right is read and not written.
    ///
    /// # Errors
    /// A redb failure, or a node whose payload is corrupt. A node whose type is not a schema
    /// has no references.
    pub fn reindex(&self, progress: Progress<'_>) -> Result<u64> {
        if let Some(pg) = self.pg() {
            return self.reindex_pg(pg, progress);
        }
        self.guard(|| {
            let tx = self.begin_write()?;
            let mut count = 0u64;
            let mut index_ok = true;
            {
                let ids = tx.open_table(IDS)?;
                let mut links = tx.open_table(LINKS)?;
                let payloads = tx.open_table(PAYLOADS)?;
                let index = tx.open_table(TYPE_INDEX)?;
                let total = links.len()?;
                let mut fixes: Vec<(u64, Vec<NodeId>)> = Vec::new();
                {
                    let lk = Lookup {
                        ids: &ids,
                        links: &links,
                    };
                    let mut types: Types = HashMap::with_hasher(BuildU64);
                    let mut cursors: HashMap<u64, Cursor<'_>, BuildU64> =
                        HashMap::with_hasher(BuildU64);
                    let mut indexed = 0u64;
                    let mut found = Vec::new();
                    let mut chunk: Vec<Entry> = Vec::with_capacity(CHUNK);
                    let mut stored: Vec<u64> = Vec::new();
                    let mut records = links.range(0..)?;
                    loop {
                        chunk.clear();
                        stored.clear();
                        for e in records.by_ref().take(CHUNK) {
                            let (k, v) = e?;
                            let seq = k.value();
                            let l =
                                Link::read(v.value()).ok_or_else(|| StoreError::CorruptRecord {
                                    what: "links",
                                    message: format!("the record at {seq} does not parse"),
                                })?;
                            let refs_at = stored.len();
                            stored.extend(l.ref_ids().map(|r| r.0));
                            chunk.push(Entry {
                                seq,
                                id: l.id.0,
                                type_id: l.type_id.0,
                                refs_at,
                                refs_len: stored.len() - refs_at,
                            });
                        }
                        if chunk.is_empty() {
                            break;
                        }
                        join_payloads(
                            &payloads,
                            &chunk,
                            |e| (e.seq, NodeId(e.id)),
                            |e, payload| {
                                let id = NodeId(e.id);
                                found.clear();
                                let type_id = NodeId(e.type_id);
                                if type_id != META && type_id != id {
                                    let info = match types.get(&type_id.0) {
                                        Some(i) => i,
                                        None => {
                                            // A type that is not a schema (kept from an import)
                                            // gives its nodes no references.
                                            let i = match self.type_info_in(&lk, &payloads, type_id)
                                            {
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
                                    fixes.push((e.seq, found.clone()));
                                }
                                let c = match cursors.entry(e.type_id) {
                                    std::collections::hash_map::Entry::Occupied(c) => c.into_mut(),
                                    std::collections::hash_map::Entry::Vacant(v) => {
                                        v.insert(Cursor::new(&index, e.type_id)?)
                                    }
                                };
                                // Entries before this node's are stale.
                                while c.cur.is_some_and(|(s, _)| s < e.seq) {
                                    index_ok = false;
                                    c.advance()?;
                                }
                                if c.cur == Some((e.seq, e.id)) {
                                    indexed += 1;
                                    c.advance()?;
                                } else {
                                    index_ok = false;
                                }
                                count += 1;
                                if count.is_multiple_of(65536) {
                                    progress(count, total);
                                }
                                Ok::<_, StoreError>(())
                            },
                        )?;
                    }
                    index_ok = index_ok && indexed == index.len()?;
                }
                drop(payloads);
                let mut buf = Vec::new();
                for (seq, refs) in fixes {
                    let head = links.get(seq)?.expect("read above").value()[..LINK_HEAD].to_vec();
                    let l = Link::read(&head).expect("read above");
                    let mut with_seqs = Vec::with_capacity(refs.len());
                    for r in refs {
                        with_seqs.push((r, ids.get(r.0)?.map_or(NO_SEQ, |v| v.value())));
                    }
                    encode_link_into(l.id, l.type_id, l.timestamp, l.digest, with_seqs, &mut buf);
                    links.insert(seq, buf.as_slice())?;
                }
                drop(index);
                if !index_ok {
                    let mut all: Vec<(u64, u64, u64)> = Vec::with_capacity(total as usize);
                    for e in links.iter()? {
                        let (k, v) = e?;
                        let l = Link::read(v.value()).expect("read above");
                        all.push((l.type_id.0, k.value(), l.id.0));
                    }
                    all.sort_unstable();
                    tx.delete_table(TYPE_INDEX)?;
                    let mut ti = tx.open_table(TYPE_INDEX)?;
                    for (t, s, id) in all {
                        ti.insert((t, s), id)?;
                    }
                }
                progress(count, total);
            }
            tx.commit()?;
            Ok(count)
        })
    }

    /// The schema of `type_id`: from the cache, else as stored in the tables given.
    fn type_info_in<I, L, P>(
        &self,
        lk: &Lookup<'_, I, L>,
        payloads: &P,
        type_id: NodeId,
    ) -> Result<Arc<super::TypeInfo>>
    where
        I: ReadableTable<u64, u64>,
        L: ReadableTable<u64, &'static [u8]>,
        P: ReadableTable<u64, &'static [u8]>,
    {
        if let Ok(i) = self.type_info(type_id) {
            return Ok(i);
        }
        match read_node(lk, payloads, type_id)? {
            Some(n) if n.type_id == META => Ok(Arc::new(super::TypeInfo::new(n.payload()?))),
            _ => Err(StoreError::UnknownType(type_id)),
        }
    }

    /// Re-hashes every node, checks its digest, recomputes its references and compares them
    /// with the stored ones, checks its `ids` entry and its presence in the type index, and
    /// checks that no payload, `ids` or index entry names a missing node.
    ///
    /// The payloads and the `links` records are read side by side in sequence order (the order
    /// they lie in the file).
    ///
    /// # Errors
    /// A redb failure (damage is reported in the result, not as an error).
    pub fn verify(&self, progress: Progress<'_>) -> Result<VerifyReport> {
        if let Some(pg) = self.pg() {
            return self.verify_pg(pg, progress);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let ids = tx.open_table(IDS)?;
            let links = tx.open_table(LINKS)?;
            let payloads = tx.open_table(PAYLOADS)?;
            let index = tx.open_table(TYPE_INDEX)?;
            let lk = Lookup {
                ids: &ids,
                links: &links,
            };
            let total = links.len()?;
            let mut report = VerifyReport::default();
            // Per type: whether it is a stored schema, and its schema when that can be read.
            let mut types: HashMap<u64, (bool, Option<Arc<super::TypeInfo>>), BuildU64> =
                HashMap::with_hasher(BuildU64);
            let mut recs = links.iter()?;
            let mut next = || -> Result<Option<(u64, Vec<u8>)>> {
                Ok(match recs.next() {
                    Some(e) => {
                        let (k, v) = e?;
                        Some((k.value(), v.value().to_vec()))
                    }
                    None => None,
                })
            };
            // A `links` record with no payload entry.
            let no_payload = |report: &mut VerifyReport, seq: u64, rec: &[u8]| {
                report.nodes += 1;
                match Link::read(rec) {
                    Some(l) => report.push(Damage::NoPayload(l.id)),
                    None => report.push(Damage::BrokenLinks(seq)),
                }
            };
            let mut cur = next()?;
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
                    while let Some((s, rec)) = cur.as_ref().filter(|(s, _)| *s < seq) {
                        no_payload(&mut report, *s, rec);
                        cur = next()?;
                    }
                    let Some((_, rec)) = cur.take_if(|(s, _)| *s == seq) else {
                        report.push(Damage::StalePayload { id, seq });
                        continue;
                    };
                    cur = next()?;
                    let Some(l) = Link::read(&rec) else {
                        report.nodes += 1;
                        report.push(Damage::BrokenLinks(seq));
                        continue;
                    };
                    if l.id != id {
                        report.push(Damage::StalePayload { id, seq });
                        no_payload(&mut report, seq, &rec);
                        continue;
                    }
                    report.nodes += 1;
                    if report.nodes.is_multiple_of(65536) {
                        progress(report.nodes, total);
                    }
                    if lk.seq(id)? != Some(seq) {
                        report.push(Damage::Unlisted(id));
                    }
                    self.check_node(
                        &mut report,
                        &lk,
                        &payloads,
                        &index,
                        &mut types,
                        seq,
                        &l,
                        payload,
                    )?;
                }
            }
            while let Some((s, rec)) = cur.take() {
                no_payload(&mut report, s, &rec);
                cur = next()?;
            }
            if ids.len()? != total {
                // Some `ids` entries name no record of their node.
                for e in ids.iter()? {
                    let (k, v) = e?;
                    let id = NodeId(k.value());
                    let ok = links
                        .get(v.value())?
                        .is_some_and(|r| Link::read(r.value()).is_some_and(|l| l.id == id));
                    if !ok {
                        report.push(Damage::Unreadable(id));
                    }
                }
            }
            if index.len()? != report.nodes {
                for e in index.iter()? {
                    let (k, v) = e?;
                    let (t, seq) = k.value();
                    let id = NodeId(v.value());
                    let ok = links.get(seq)?.is_some_and(|r| {
                        Link::read(r.value()).is_some_and(|l| l.id == id && l.type_id.0 == t)
                    });
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

    /// The checks of one node whose `links` record `l` and payload were read.
    #[allow(clippy::too_many_arguments)]
    fn check_node<I, L, P, X>(
        &self,
        report: &mut VerifyReport,
        lk: &Lookup<'_, I, L>,
        payloads: &P,
        index: &X,
        types: &mut HashMap<u64, (bool, Option<Arc<super::TypeInfo>>), BuildU64>,
        seq: u64,
        l: &Link<'_>,
        payload: &[u8],
    ) -> Result<()>
    where
        I: ReadableTable<u64, u64>,
        L: ReadableTable<u64, &'static [u8]>,
        P: ReadableTable<u64, &'static [u8]>,
        X: ReadableTable<(u64, u64), u64>,
    {
        let id = l.id;
        let mut found = Vec::new();
        let self_typed = l.type_id == id;
        let actual = hash::id_for(l.type_id, self_typed, payload);
        if actual != id {
            report.push(Damage::WrongId { id, actual });
        }
        if hash::digest(l.type_id, self_typed, payload)[..] != *l.digest {
            report.push(Damage::BadDigest(id));
        }
        if !cbor::decode(payload).is_ok_and(|v| cbor::encode(&v) == payload) {
            report.push(Damage::BadPayload(id));
        }
        let mut info = None;
        if !self_typed {
            let (ok, i) = match types.get(&l.type_id.0) {
                Some(t) => t,
                None => {
                    let mut buf = Vec::new();
                    let ok = l.type_id == META
                        || (lk.read(l.type_id, NO_SEQ, &mut buf)?.is_some()
                            && Link::read(&buf).is_some_and(|t| t.type_id == META));
                    let i = if ok && l.type_id != META {
                        self.type_info_in(lk, payloads, l.type_id).ok()
                    } else {
                        None
                    };
                    if let Some(Err(e)) = i.as_ref().map(|i| i.plan()) {
                        report.push(Damage::BadSchema {
                            type_id: l.type_id,
                            message: e.to_string(),
                        });
                    }
                    types.entry(l.type_id.0).or_insert((ok, i))
                }
            };
            if !ok {
                report.push(Damage::MissingType {
                    id,
                    type_id: l.type_id,
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
            None => self_typed || l.type_id == META,
        };
        if known && !found.iter().copied().eq(l.ref_ids()) {
            report.push(Damage::WrongRefs(id));
        }
        if index.get((l.type_id.0, seq))?.map(|g| g.value()) != Some(id.0) {
            report.push(Damage::NotIndexed(id));
        }
        Ok(())
    }
}
