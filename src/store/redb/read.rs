//! A read transaction of the redb file: what it reads is the file as it was when it began.

use super::nodes::{Link, Lookup, NO_SEQ, entries, find_payload, join_payloads, read_node};
use super::records::{self, HISTORY, LEASES, REGISTRY, THREAD_STATE, THREADS, opt_table, read};
use super::tables::{IDS, LINKS, META_TABLE, PAYLOADS, PINS, TYPE_INDEX};
use crate::cas::NodeId;
use crate::model::ThreadId;
use crate::store::backend::{Each, Order, ReadTx, Visit, WalkReport};
use crate::store::error::{Result, StoreError};
use crate::store::minutes::MinuteRow;
use crate::store::node::{StoredNode, WalkStats};
use crate::store::records::{
    Counts, HistoryEntry, Lease, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use crate::store::usage::{Budget, StepCalls, UsageRow, UsageTotals};
use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};
use std::collections::{HashSet, VecDeque};
use std::sync::OnceLock;

type BytesTable = redb::ReadOnlyTable<u64, &'static [u8]>;
type IdsTable = redb::ReadOnlyTable<u64, u64>;

/// `links` records per chunk of a walk in write order.
pub(crate) const SEQ_WINDOW: usize = 8192;

/// A read transaction, with the node tables opened when first needed.
pub(crate) struct RedbRead {
    tx: ReadTransaction,
    /// `ids`, `links` and `payloads`; `None` before the first node is stored.
    nodes: OnceLock<Option<(IdsTable, BytesTable, BytesTable)>>,
}

impl RedbRead {
    pub(crate) fn new(tx: ReadTransaction) -> RedbRead {
        RedbRead {
            tx,
            nodes: OnceLock::new(),
        }
    }

    /// The transaction.
    pub(crate) fn tx(&self) -> &ReadTransaction {
        &self.tx
    }

    fn nodes(&self) -> Result<Option<&(IdsTable, BytesTable, BytesTable)>> {
        if let Some(t) = self.nodes.get() {
            return Ok(t.as_ref());
        }
        let t = match self.tx.open_table(IDS) {
            Ok(ids) => Some((
                ids,
                self.tx.open_table(LINKS)?,
                self.tx.open_table(PAYLOADS)?,
            )),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(self.nodes.get_or_init(|| t).as_ref())
    }

    /// The `links` record of `id` copied into `buf`, parsed; `None` when not stored.
    fn link<'b>(&self, id: NodeId, buf: &'b mut Vec<u8>) -> Result<Option<Link<'b>>> {
        let Some((ids, links, _)) = self.nodes()? else {
            return Ok(None);
        };
        if (Lookup { ids, links }).read(id, NO_SEQ, buf)?.is_none() {
            return Ok(None);
        }
        Link::read(buf).ok_or(StoreError::Corrupt(id)).map(Some)
    }

    /// Visits the nodes whose sequence number is in `from..until`: the `links` records in
    /// chunks of `chunk`, each joined with the payload records that hold its nodes.
    pub(crate) fn for_each_in_windows(
        &self,
        chunk: usize,
        from: u64,
        until: u64,
        f: Each<'_, StoredNode>,
    ) -> Result<()> {
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
        let Some((_, links, payloads)) = self.nodes()? else {
            return Ok(());
        };
        let mut window: Vec<Slot> = Vec::with_capacity(chunk);
        let mut records = links.range(from..until)?;
        loop {
            window.clear();
            for e in records.by_ref().take(chunk) {
                let (k, v) = e?;
                let seq = k.value();
                let l = Link::at(seq, v.value())?;
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
            let mut stop = false;
            join_payloads::<_, _, StoreError>(
                payloads,
                &window,
                |s| (s.seq, s.id),
                |s, payload| {
                    if !stop {
                        stop = f(StoredNode {
                            id: s.id,
                            type_id: s.type_id,
                            timestamp: s.timestamp,
                            seq: s.seq,
                            digest: s.digest,
                            payload_cbor: payload.to_vec(),
                        })
                        .is_break();
                    }
                    Ok(())
                },
            )?;
            if stop {
                return Ok(());
            }
        }
    }
}

impl ReadTx for RedbRead {
    fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        match self.nodes()? {
            Some((ids, links, payloads)) => read_node(&Lookup { ids, links }, payloads, id),
            None => Ok(None),
        }
    }

    fn type_of(&self, id: NodeId) -> Result<Option<NodeId>> {
        let mut buf = Vec::new();
        Ok(self.link(id, &mut buf)?.map(|l| l.type_id))
    }

    fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>> {
        let mut buf = Vec::new();
        ids.iter()
            .map(|&id| {
                Ok(self
                    .link(id, &mut buf)?
                    .and_then(|l| l.digest.try_into().ok()))
            })
            .collect()
    }

    fn has(&self, id: NodeId) -> Result<bool> {
        match self.nodes()? {
            Some((ids, _, _)) => Ok(ids.get(id.0)?.is_some()),
            None => Ok(false),
        }
    }

    fn node_count(&self) -> Result<u64> {
        match self.nodes()? {
            Some((ids, _, _)) => Ok(ids.len()?),
            None => Ok(0),
        }
    }

    fn ids_in(&self, lo: u64, hi: u64) -> Result<Vec<NodeId>> {
        let Some((ids, _, _)) = self.nodes()? else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        for e in ids.range(lo..=hi)?.take(10) {
            found.push(NodeId(e?.0.value()));
        }
        Ok(found)
    }

    fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        let mut buf = Vec::new();
        Ok(self.link(id, &mut buf)?.map(|l| l.ref_ids().collect()))
    }

    fn walk(&self, root: NodeId, visit: Visit<'_>) -> Result<WalkStats> {
        let mut report = WalkReport::new(visit);
        let Some((ids, links, _)) = self.nodes()? else {
            report.missing(root, None)?;
            return report.finish();
        };
        let lk = Lookup { ids, links };
        let mut seen: HashSet<u64, super::nodes::BuildU64> =
            HashSet::with_hasher(super::nodes::BuildU64);
        let mut queue = VecDeque::new();
        let mut buf = Vec::new();
        seen.insert(root.0);
        queue.push_back((root, NO_SEQ, None));
        while let Some((id, hint, parent)) = queue.pop_front() {
            match lk.read(id, hint, &mut buf)? {
                Some(_) => {
                    let l = Link::read(&buf).ok_or(StoreError::Corrupt(id))?;
                    report.found(id)?;
                    for (r, seq) in l.refs() {
                        if seen.insert(r.0) {
                            queue.push_back((r, seq, Some(id)));
                        }
                    }
                }
                None => report.missing(id, parent)?,
            }
        }
        report.finish()
    }

    fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        let Some(t) = opt_table(&self.tx, TYPE_INDEX)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for e in t.range((type_id.0, 0)..=(type_id.0, u64::MAX))? {
            out.push(NodeId(e?.1.value()));
        }
        Ok(out)
    }

    fn for_each_node(&self, order: Order, f: Each<'_, StoredNode>) -> Result<()> {
        match order {
            Order::Written { from, until } => self.for_each_in_windows(SEQ_WINDOW, from, until, f),
            Order::Id => {
                let Some((ids, links, payloads)) = self.nodes()? else {
                    return Ok(());
                };
                for e in ids.iter()? {
                    let (k, v) = e?;
                    let (id, seq) = (NodeId(k.value()), v.value());
                    let rec = links.get(seq)?.ok_or(StoreError::Corrupt(id))?;
                    let l = Link::read(rec.value())
                        .filter(|l| l.id == id)
                        .ok_or(StoreError::Corrupt(id))?;
                    let payload =
                        find_payload(payloads, id, seq)?.ok_or(StoreError::Corrupt(id))?;
                    if f(super::nodes::stored_node(seq, &l, payload)).is_break() {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    fn for_each_indexed(&self, f: Each<'_, (NodeId, NodeId)>) -> Result<()> {
        let t = self.tx.open_table(TYPE_INDEX)?;
        for e in t.iter()? {
            let (k, v) = e?;
            if f((NodeId(k.value().0), NodeId(v.value()))).is_break() {
                break;
            }
        }
        Ok(())
    }

    fn write_mark(&self) -> Result<u64> {
        Ok(match opt_table(&self.tx, META_TABLE)? {
            Some(t) => t.get("next_seq")?.map_or(0, |v| v.value()),
            None => 0,
        })
    }

    fn last_written_before(&self, mark: u64) -> Result<Option<(u64, NodeId)>> {
        let Some(payloads) = opt_table(&self.tx, PAYLOADS)? else {
            return Ok(None);
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
    }

    fn counts(&self) -> Result<Counts> {
        Ok(Counts {
            nodes: self.node_count()?,
            threads: self.tx.open_table(THREADS)?.len()?,
            history: self.tx.open_table(HISTORY)?.len()?,
            workflows: self.tx.open_table(REGISTRY)?.len()?,
            leases: self.leases()?.len() as u64,
        })
    }

    fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        read::threads(&self.tx)
    }

    fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        records::thread_record(&self.tx, THREADS, id)
    }

    fn registry(&self) -> Result<Vec<(String, NodeId)>> {
        read::registry(&self.tx)
    }

    fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        read::registry_history(&self.tx, name)
    }

    fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>> {
        read::all_registry_history(&self.tx)
    }

    fn registry_places(&self) -> Result<Vec<(String, u64)>> {
        read::registry_places(&self.tx)
    }

    fn for_each_history(&self, f: Each<'_, HistoryEntry>) -> Result<()> {
        read::for_each_history(&self.tx, f)
    }

    fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        read::history_of(&self.tx, id)
    }

    fn leases(&self) -> Result<Vec<(ThreadId, Lease)>> {
        records::thread_records(&self.tx, LEASES)
    }

    fn lease(&self, id: &ThreadId) -> Result<Option<Lease>> {
        records::thread_record(&self.tx, LEASES, id)
    }

    fn thread_state(&self, id: &ThreadId) -> Result<ThreadState> {
        read::thread_state(&self.tx, id)
    }

    fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        records::thread_records(&self.tx, THREAD_STATE)
    }

    fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>> {
        read::workflow_limits(&self.tx)
    }

    fn removal_mark(&self) -> Result<u64> {
        read::removal_mark(&self.tx)
    }

    fn removals_since(&self, from: u64) -> Result<Vec<Removal>> {
        read::removals_since(&self.tx, from)
    }

    fn pins(&self) -> Result<Vec<(NodeId, u64)>> {
        let Some(t) = opt_table(&self.tx, PINS)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(t.len()? as usize);
        for e in t.iter()? {
            let (k, v) = e?;
            out.push((NodeId(k.value()), v.value()));
        }
        Ok(out)
    }
    fn step_minutes(&self, from: u32) -> Result<Vec<MinuteRow>> {
        super::minutes::rows(&self.tx, from)
    }

    fn usage_rows(&self, thread: Option<&str>) -> Result<Vec<UsageRow>> {
        super::usage::rows(&self.tx, thread)
    }

    fn step_usage(&self, step: NodeId) -> Result<Option<StepCalls>> {
        super::usage::step_calls(&self.tx, step)
    }

    fn for_each_step_usage(&self, f: Each<'_, (NodeId, StepCalls)>) -> Result<()> {
        super::usage::each_step(&self.tx, f)
    }

    fn day_usage(&self, name: &str, day: u32) -> Result<UsageTotals> {
        super::usage::day(&self.tx, name, day)
    }

    fn usage_days(&self, name: &str) -> Result<Vec<(u32, UsageTotals)>> {
        super::usage::days(&self.tx, name)
    }

    fn budgets(&self) -> Result<Vec<(String, Budget)>> {
        super::usage::budgets(&self.tx)
    }
}
