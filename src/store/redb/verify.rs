//! Rebuilding derived tables (`reindex`) and checking the whole store (`verify`).

use super::file::Redb;
use super::nodes::{
    BuildU64, LINK_HEAD, Link, Lookup, NO_SEQ, encode_link_into, entries as entries_of,
    join_payloads, read_node,
};
use super::tables::{IDS, LINKS, PAYLOADS, TYPE_INDEX};
use crate::cas::NodeId;
use crate::cas::bootstrap::META;
use crate::store::backend::Types;
use crate::store::error::{Result, StoreError};
use crate::store::report::{Damage, Progress, VerifyReport, check_node};
use crate::store::types::TypeInfo;
use redb::{ReadableTable, ReadableTableMetadata};
use std::collections::HashMap;
use std::sync::Arc;

/// A node as `reindex` sees it: where it is, and where its stored references are.
struct Entry {
    seq: u64,
    id: u64,
    type_id: u64,
    refs_at: usize,
    refs_len: usize,
}

/// Schemas by type id, as `reindex` meets them (`None`: the type is not a schema).
type TypeCache = HashMap<u64, Option<Arc<TypeInfo>>, BuildU64>;

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

impl Redb {
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
    // Long: one pass over links, payloads and the type index side by side, whose cursors share the
    // loop.
    pub(crate) fn reindex(&self, schemas: &dyn Types, progress: Progress<'_>) -> Result<u64> {
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
                    let mut types: TypeCache = HashMap::with_hasher(BuildU64);
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
                            let l = Link::at(seq, v.value())?;
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
                                            let i = match self
                                                .type_info_in(schemas, &lk, &payloads, type_id)
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
        schemas: &dyn Types,
        lk: &Lookup<'_, I, L>,
        payloads: &P,
        type_id: NodeId,
    ) -> Result<Arc<TypeInfo>>
    where
        I: ReadableTable<u64, u64>,
        L: ReadableTable<u64, &'static [u8]>,
        P: ReadableTable<u64, &'static [u8]>,
    {
        if let Ok(i) = schemas.type_info(type_id) {
            return Ok(i);
        }
        match read_node(lk, payloads, type_id)? {
            Some(n) if n.type_id == META => Ok(Arc::new(TypeInfo::new(n.payload()?))),
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
    // Long: one pass over links, payloads, ids and the index side by side, whose cursors share the
    // loop.
    pub(crate) fn verify(
        &self,
        schemas: &dyn Types,
        progress: Progress<'_>,
    ) -> Result<VerifyReport> {
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
            let mut types: HashMap<u64, (bool, Option<Arc<TypeInfo>>), BuildU64> =
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
                        schemas,
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
        schemas: &dyn Types,
        report: &mut VerifyReport,
        lk: &Lookup<'_, I, L>,
        payloads: &P,
        index: &X,
        types: &mut HashMap<u64, (bool, Option<Arc<TypeInfo>>), BuildU64>,
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
        let self_typed = l.type_id == id;
        let typing = if self_typed {
            None
        } else {
            Some(match types.get(&l.type_id.0) {
                Some(t) => t.clone(),
                None => {
                    let mut buf = Vec::new();
                    let ok = l.type_id == META
                        || (lk.read(l.type_id, NO_SEQ, &mut buf)?.is_some()
                            && Link::read(&buf).is_some_and(|t| t.type_id == META));
                    let i = if ok && l.type_id != META {
                        self.type_info_in(schemas, lk, payloads, l.type_id).ok()
                    } else {
                        None
                    };
                    if let Some(Err(e)) = i.as_ref().map(|i| i.plan()) {
                        report.push(Damage::BadSchema {
                            type_id: l.type_id,
                            message: e.to_string(),
                        });
                    }
                    types.entry(l.type_id.0).or_insert((ok, i)).clone()
                }
            })
        };
        let refs: Vec<NodeId> = l.ref_ids().collect();
        check_node(report, id, l.type_id, l.digest, payload, &refs, typing);
        if index.get((l.type_id.0, seq))?.map(|g| g.value()) != Some(id.0) {
            report.push(Damage::NotIndexed(id));
        }
        Ok(())
    }
}
