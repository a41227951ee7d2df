//! The store in memory: the reference backend of the conformance suite, and a store for
//! programs that embed uwf and keep nothing (`Store::memory`).
//!
//! The whole state is one value. A read transaction holds the state as it was when it began
//! (an `Arc` of it); a write transaction works on a copy of the state under the writers' lock
//! and puts it in place when it commits, so a failed one leaves nothing and readers never see
//! half of one. A write copies the maps it changes: made for tests and small stores, not for
//! millions of nodes.

use crate::cas::NodeId;
use crate::cas::bootstrap::META;
use crate::model::ThreadId;
use crate::store::backend::{
    Backend, BulkLoad, Each, Order, ReadTx, Types, Visit, WalkReport, WriteTx,
};
use crate::store::error::{Result, StoreError};
use crate::store::minutes::MinuteRow;
use crate::store::node::{Prepared, PutOutcome, StoredNode, WalkStats, bootstrap_nodes};
use crate::store::records::{
    Counts, HistoryEntry, Lease, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use crate::store::report::{
    Count, Damage, GcOptions, GcReport, Progress, VerifyReport, check_node,
};
use crate::store::roots::{gc_roots, keep_from};
use crate::store::usage::{Budget, StepCalls, StepUsage, UsageRow, UsageTotals};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

mod usage;

/// A stored node.
#[derive(Clone)]
struct Node {
    seq: u64,
    type_id: NodeId,
    timestamp: u64,
    digest: [u8; 32],
    payload: Arc<[u8]>,
    refs: Arc<[NodeId]>,
}

/// Everything a store holds.
#[derive(Clone, Default)]
struct State {
    nodes: BTreeMap<u64, Node>,
    /// seq → id, in write order.
    by_seq: BTreeMap<u64, u64>,
    /// (type, seq) → id.
    type_index: BTreeMap<(u64, u64), u64>,
    next_seq: u64,
    threads: BTreeMap<String, ThreadRecord>,
    registry: BTreeMap<String, NodeId>,
    registry_history: BTreeMap<(String, u64), RegistryEntry>,
    next_registry_seq: u64,
    history: BTreeMap<u64, HistoryEntry>,
    next_history_seq: u64,
    leases: BTreeMap<String, Lease>,
    states: BTreeMap<String, ThreadState>,
    limits: BTreeMap<String, WorkflowLimits>,
    removals: BTreeMap<u64, Removal>,
    next_removal_seq: u64,
    pins: BTreeMap<u64, u64>,
    usage: usage::Usage,
}

impl State {
    fn stored(&self, id: u64) -> Option<StoredNode> {
        self.nodes.get(&id).map(|n| StoredNode {
            id: NodeId(id),
            type_id: n.type_id,
            timestamp: n.timestamp,
            seq: n.seq,
            digest: n.digest,
            payload_cbor: n.payload.to_vec(),
        })
    }

    /// Puts nodes, checking all of them before it writes any.
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        let mut out = Vec::with_capacity(items.len());
        let mut first: BTreeMap<u64, [u8; 32]> = BTreeMap::new();
        for (p, _) in items {
            let known = self.nodes.get(&p.id.0).map(|n| n.digest);
            match known.or_else(|| first.get(&p.id.0).copied()) {
                Some(d) if d != p.digest => return Err(StoreError::HashCollision(p.id)),
                Some(_) => out.push(PutOutcome::Existed),
                None => {
                    first.insert(p.id.0, p.digest);
                    out.push(PutOutcome::Inserted);
                }
            }
        }
        for ((p, ts), o) in items.iter().zip(&out) {
            match o {
                PutOutcome::Existed => {
                    // The timestamp is the first write's: an import may know an earlier one.
                    if let Some(n) = self.nodes.get_mut(&p.id.0)
                        && *ts < n.timestamp
                    {
                        n.timestamp = *ts;
                    }
                }
                PutOutcome::Inserted => {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    self.nodes.insert(
                        p.id.0,
                        Node {
                            seq,
                            type_id: p.type_id,
                            timestamp: *ts,
                            digest: p.digest,
                            payload: p.payload_cbor.as_slice().into(),
                            refs: p.refs.as_slice().into(),
                        },
                    );
                    self.by_seq.insert(seq, p.id.0);
                    self.type_index.insert((p.type_id.0, seq), p.id.0);
                }
            }
        }
        Ok(out)
    }

    fn remove_node(&mut self, id: u64) -> Option<Node> {
        let n = self.nodes.remove(&id)?;
        self.by_seq.remove(&n.seq);
        self.type_index.remove(&(n.type_id.0, n.seq));
        Some(n)
    }
}

/// A store in memory.
pub(crate) struct Memory {
    state: Mutex<Arc<State>>,
    /// Held by the write transaction in progress.
    writer: Mutex<()>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Memory {
    /// A new store holding the bootstrap schemas.
    pub(crate) fn new() -> Memory {
        let mut s = State::default();
        let nodes = bootstrap_nodes();
        let items: Vec<(&Prepared, u64)> = nodes.iter().map(|p| (p, 0)).collect();
        s.put(&items)
            .expect("the bootstrap schemas go into an empty store");
        Memory {
            state: Mutex::new(Arc::new(s)),
            writer: Mutex::new(()),
        }
    }

    fn now(&self) -> Arc<State> {
        locked(&self.state).clone()
    }

    /// Runs `f` on a copy of the state and puts the copy in place when `f` succeeds; `f` also
    /// sees the state it copies, unchanged.
    fn change_from<T>(&self, f: impl FnOnce(&Arc<State>, &mut State) -> Result<T>) -> Result<T> {
        let _w = locked(&self.writer);
        let before = self.now();
        let mut s = State::clone(&before);
        let out = f(&before, &mut s)?;
        *locked(&self.state) = Arc::new(s);
        Ok(out)
    }

    /// Runs `f` on a copy of the state and puts the copy in place when `f` succeeds.
    fn change<T>(&self, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        self.change_from(|_, s| f(s))
    }

    /// What the roots reach and the nodes they do not reach (in write order), over one state.
    fn mark(
        s: &Arc<State>,
        cutoff_ms: Option<u64>,
        live_lease: Option<&dyn Fn(&Lease) -> bool>,
    ) -> Result<(HashSet<u64>, Vec<u64>)> {
        let r = MemRead(s.clone());
        let cutoff = match (cutoff_ms, live_lease) {
            (Some(c), Some(is_live)) => Some(keep_from(&r, c, is_live)?),
            (c, _) => c,
        };
        let mut roots = gc_roots(&r)?;
        if let Some(c) = cutoff {
            roots.extend(
                s.nodes
                    .iter()
                    .filter(|(_, n)| n.timestamp >= c)
                    .map(|(id, _)| *id),
            );
        }
        let mut live = HashSet::new();
        let mut queue: VecDeque<u64> = roots.into();
        while let Some(id) = queue.pop_front() {
            if !live.insert(id) {
                continue;
            }
            if let Some(n) = s.nodes.get(&id) {
                queue.extend(n.refs.iter().map(|r| r.0).filter(|r| !live.contains(r)));
            }
        }
        let garbage = s
            .by_seq
            .values()
            .copied()
            .filter(|id| !live.contains(id))
            .collect();
        Ok((live, garbage))
    }
}

impl Backend for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn format_version(&self) -> Result<u64> {
        Ok(0)
    }

    fn read(&self) -> Result<Box<dyn ReadTx>> {
        Ok(Box::new(MemRead(self.now())))
    }

    fn write(&self, f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>) -> Result<()> {
        self.change(|s| f(&mut MemTx(s)))
    }

    fn bulk(&self, _commit_every: usize) -> Box<dyn BulkLoad + '_> {
        Box::new(MemBulk(self))
    }

    fn listen(&self, _f: Box<dyn Fn() + Send + 'static>) -> Option<crate::store::pg::Listener> {
        None
    }

    fn gc(&self, _types: &dyn Types, opts: &GcOptions<'_>) -> Result<GcReport> {
        // One write transaction: nothing is written while it marks and sweeps.
        let cutoff = opts.now_ms.saturating_sub(opts.grace_ms);
        // Marks over the state as it was when the writers' lock was taken; a dry run copies
        // nothing.
        let sweep = |before: &Arc<State>, after: Option<&mut State>| {
            let (live, garbage) = Memory::mark(before, Some(cutoff), Some(opts.owner_is_live))?;
            let total = garbage.len() as u64;
            (opts.progress)(0, total);
            let bytes = garbage
                .iter()
                .filter_map(|id| before.nodes.get(id))
                .map(|n| n.payload.len() as u64)
                .sum();
            if let Some(s) = after {
                for id in &garbage {
                    s.remove_node(*id);
                }
            }
            (opts.progress)(total, total);
            Ok(GcReport {
                scanned: before.nodes.len() as u64,
                reachable: live
                    .iter()
                    .filter(|id| before.nodes.contains_key(id))
                    .count() as u64,
                garbage: total,
                collected: total,
                bytes,
            })
        };
        if opts.dry_run {
            sweep(&self.now(), None)
        } else {
            self.change_from(|before, s| sweep(before, Some(s)))
        }
    }

    fn count(&self) -> Result<Count> {
        let s = self.now();
        let (live, garbage) = Memory::mark(&s, None, None)?;
        let size = |id: &u64| s.nodes.get(id).map_or(0, |n| n.payload.len() as u64);
        Ok(Count {
            nodes: s.nodes.len() as u64,
            bytes: s.nodes.keys().map(size).sum(),
            reachable: live.iter().filter(|id| s.nodes.contains_key(id)).count() as u64,
            garbage: garbage.len() as u64,
            garbage_bytes: garbage.iter().map(size).sum(),
        })
    }

    fn compact(&mut self) -> Result<()> {
        Ok(())
    }

    fn size_bytes(&self) -> Result<u64> {
        Ok(self.count()?.bytes)
    }

    fn verify(&self, types: &dyn Types, progress: Progress<'_>) -> Result<VerifyReport> {
        let s = self.now();
        let mut report = VerifyReport::default();
        let total = s.nodes.len() as u64;
        for (i, (seq, id)) in s.by_seq.iter().enumerate() {
            let n = &s.nodes[id];
            let id = NodeId(*id);
            let typing = (n.type_id != id).then(|| {
                let ok = n.type_id == META
                    || s.nodes.get(&n.type_id.0).is_some_and(|t| t.type_id == META);
                let info = (ok && n.type_id != META)
                    .then(|| types.type_info(n.type_id).ok())
                    .flatten();
                if let Some(Err(e)) = info.as_ref().map(|i| i.plan()) {
                    report.push(Damage::BadSchema {
                        type_id: n.type_id,
                        message: e.to_string(),
                    });
                }
                (ok, info)
            });
            check_node(
                &mut report,
                id,
                n.type_id,
                &n.digest,
                &n.payload,
                &n.refs,
                typing,
            );
            if s.type_index.get(&(n.type_id.0, *seq)) != Some(&id.0) {
                report.push(Damage::NotIndexed(id));
            }
            report.nodes += 1;
            progress(i as u64 + 1, total);
        }
        Ok(report)
    }

    fn reindex(&self, types: &dyn Types, progress: Progress<'_>) -> Result<u64> {
        self.change(|s| {
            let total = s.nodes.len() as u64;
            let mut index = BTreeMap::new();
            let ids: Vec<u64> = s.nodes.keys().copied().collect();
            for (i, id) in ids.iter().enumerate() {
                let n = s.nodes.get_mut(id).expect("listed above");
                if n.type_id.0 != *id && n.type_id != META {
                    let mut found = Vec::new();
                    if let Ok(info) = types.type_info(n.type_id) {
                        info.plan()?
                            .ids_in_cbor(&n.payload, &mut found)
                            .map_err(|_| StoreError::Corrupt(NodeId(*id)))?;
                    }
                    if *n.refs != *found {
                        n.refs = found.into();
                    }
                }
                index.insert((n.type_id.0, n.seq), *id);
                progress(i as u64 + 1, total);
            }
            s.type_index = index;
            Ok(total)
        })
    }

    fn force_version(&self, _v: u64) -> Result<()> {
        Err(StoreError::Internal(
            "a store in memory has no format version".into(),
        ))
    }
}

/// Puts of a bulk load, each committed at once.
struct MemBulk<'a>(&'a Memory);

impl BulkLoad for MemBulk<'_> {
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        self.0.change(|s| s.put(items))
    }

    fn commit(&mut self) -> Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A read transaction: the state as it was when it began.
struct MemRead(Arc<State>);

fn visit<T>(items: impl Iterator<Item = T>, f: Each<'_, T>) {
    for t in items {
        if f(t).is_break() {
            break;
        }
    }
}

impl ReadTx for MemRead {
    fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        Ok(self.0.stored(id.0))
    }

    fn type_of(&self, id: NodeId) -> Result<Option<NodeId>> {
        Ok(self.0.nodes.get(&id.0).map(|n| n.type_id))
    }

    fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>> {
        Ok(ids
            .iter()
            .map(|id| self.0.nodes.get(&id.0).map(|n| n.digest))
            .collect())
    }

    fn has(&self, id: NodeId) -> Result<bool> {
        Ok(self.0.nodes.contains_key(&id.0))
    }

    fn node_count(&self) -> Result<u64> {
        Ok(self.0.nodes.len() as u64)
    }

    fn ids_in(&self, lo: u64, hi: u64) -> Result<Vec<NodeId>> {
        Ok(self
            .0
            .nodes
            .range(lo..=hi)
            .take(10)
            .map(|(id, _)| NodeId(*id))
            .collect())
    }

    fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        Ok(self.0.nodes.get(&id.0).map(|n| n.refs.to_vec()))
    }

    fn walk(&self, root: NodeId, visit: Visit<'_>) -> Result<WalkStats> {
        let mut report = WalkReport::new(visit);
        let mut seen = HashSet::from([root.0]);
        let mut queue = VecDeque::from([(root, None)]);
        while let Some((id, parent)) = queue.pop_front() {
            match self.0.nodes.get(&id.0) {
                Some(n) => {
                    report.found(id)?;
                    for r in n.refs.iter() {
                        if seen.insert(r.0) {
                            queue.push_back((*r, Some(id)));
                        }
                    }
                }
                None => report.missing(id, parent)?,
            }
        }
        report.finish()
    }

    fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        Ok(self
            .0
            .type_index
            .range((type_id.0, 0)..=(type_id.0, u64::MAX))
            .map(|(_, id)| NodeId(*id))
            .collect())
    }

    fn for_each_node(&self, order: Order, f: Each<'_, StoredNode>) -> Result<()> {
        let s = &self.0;
        match order {
            Order::Id => visit(s.nodes.keys().filter_map(|id| s.stored(*id)), f),
            Order::Written { from, until } => {
                if from < until {
                    visit(
                        s.by_seq
                            .range(from..until)
                            .filter_map(|(_, id)| s.stored(*id)),
                        f,
                    );
                }
            }
        }
        Ok(())
    }

    fn for_each_indexed(&self, f: Each<'_, (NodeId, NodeId)>) -> Result<()> {
        visit(
            self.0
                .type_index
                .iter()
                .map(|((t, _), id)| (NodeId(*t), NodeId(*id))),
            f,
        );
        Ok(())
    }

    fn write_mark(&self) -> Result<u64> {
        Ok(self.0.next_seq)
    }

    fn last_written_before(&self, mark: u64) -> Result<Option<(u64, NodeId)>> {
        Ok(self
            .0
            .by_seq
            .range(..mark)
            .next_back()
            .map(|(seq, id)| (*seq, NodeId(*id))))
    }

    fn counts(&self) -> Result<Counts> {
        let s = &self.0;
        Ok(Counts {
            nodes: s.nodes.len() as u64,
            threads: s.threads.len() as u64,
            history: s.history.len() as u64,
            workflows: s.registry.len() as u64,
            leases: s.leases.len() as u64,
        })
    }

    fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        Ok(by_thread(&self.0.threads))
    }

    fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        Ok(self.0.threads.get(id.as_str()).cloned())
    }

    fn registry(&self) -> Result<Vec<(String, NodeId)>> {
        Ok(self
            .0
            .registry
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect())
    }

    fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        Ok(versions(&self.0, name).map(|(_, e)| e.clone()).collect())
    }

    fn registry_places(&self) -> Result<Vec<(String, u64)>> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for (name, seq) in self.0.registry_history.keys() {
            match out.last_mut() {
                Some((n, first)) if n == name => *first = (*first).min(*seq),
                _ => out.push((name.clone(), *seq)),
            }
        }
        Ok(out)
    }

    fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>> {
        Ok(self
            .0
            .registry_history
            .iter()
            .map(|((n, _), e)| (n.clone(), e.clone()))
            .collect())
    }

    fn for_each_history(&self, f: Each<'_, HistoryEntry>) -> Result<()> {
        visit(self.0.history.values().cloned(), f);
        Ok(())
    }

    fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        Ok(self
            .0
            .history
            .values()
            .rev()
            .find(|h| h.thread == id.as_str())
            .cloned())
    }

    fn leases(&self) -> Result<Vec<(ThreadId, Lease)>> {
        Ok(by_thread(&self.0.leases))
    }

    fn lease(&self, id: &ThreadId) -> Result<Option<Lease>> {
        Ok(self.0.leases.get(id.as_str()).cloned())
    }

    fn thread_state(&self, id: &ThreadId) -> Result<ThreadState> {
        Ok(self.0.states.get(id.as_str()).cloned().unwrap_or_default())
    }

    fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        Ok(by_thread(&self.0.states))
    }

    fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>> {
        Ok(self.0.limits.iter().map(|(k, v)| (k.clone(), *v)).collect())
    }

    fn removal_mark(&self) -> Result<u64> {
        Ok(self.0.next_removal_seq)
    }

    fn removals_since(&self, from: u64) -> Result<Vec<Removal>> {
        Ok(self
            .0
            .removals
            .range(from..)
            .map(|(_, r)| r.clone())
            .collect())
    }

    fn pins(&self) -> Result<Vec<(NodeId, u64)>> {
        Ok(self.0.pins.iter().map(|(k, v)| (NodeId(*k), *v)).collect())
    }

    fn usage_rows(&self, thread: Option<&str>) -> Result<Vec<UsageRow>> {
        Ok(self.0.usage.rows(thread))
    }

    fn step_usage(&self, step: NodeId) -> Result<Option<StepCalls>> {
        Ok(self.0.usage.step(step))
    }

    fn day_usage(&self, name: &str, day: u32) -> Result<UsageTotals> {
        Ok(self.0.usage.day(name, day))
    }

    fn usage_days(&self, name: &str) -> Result<Vec<(u32, UsageTotals)>> {
        Ok(self.0.usage.days(name))
    }

    fn budgets(&self) -> Result<Vec<(String, Budget)>> {
        Ok(self.0.usage.budgets())
    }

    fn step_minutes(&self, from: u32) -> Result<Vec<MinuteRow>> {
        Ok(self.0.usage.minutes(from))
    }

    fn for_each_step_usage(&self, f: Each<'_, (NodeId, StepCalls)>) -> Result<()> {
        self.0.usage.each_step(f);
        Ok(())
    }
}

fn by_thread<T: Clone>(m: &BTreeMap<String, T>) -> Vec<(ThreadId, T)> {
    m.iter()
        .map(|(k, v)| (ThreadId::from_stored(k), v.clone()))
        .collect()
}

fn versions<'s>(
    s: &'s State,
    name: &str,
) -> impl Iterator<Item = (&'s (String, u64), &'s RegistryEntry)> {
    s.registry_history
        .range((name.to_string(), 0)..=(name.to_string(), u64::MAX))
}

/// A write transaction: the copy of the state it changes.
struct MemTx<'a>(&'a mut State);

impl MemTx<'_> {
    fn history_of(&self, thread: &str) -> impl Iterator<Item = (&u64, &HistoryEntry)> {
        self.0
            .history
            .iter()
            .filter(move |(_, h)| h.thread == thread)
    }
}

impl WriteTx for MemTx<'_> {
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        self.0.put(items)
    }

    fn has(&mut self, id: NodeId) -> Result<bool> {
        Ok(self.0.nodes.contains_key(&id.0))
    }

    fn first_missing(
        &mut self,
        from: NodeId,
        stop: &[NodeId],
        stop_types: &[NodeId],
    ) -> Result<Option<NodeId>> {
        let mut seen = HashSet::from([from.0]);
        let mut queue = VecDeque::from([from]);
        while let Some(id) = queue.pop_front() {
            let Some(n) = self.0.nodes.get(&id.0) else {
                return Ok(Some(id));
            };
            if id != from && (stop.contains(&id) || stop_types.contains(&n.type_id)) {
                continue;
            }
            for r in n.refs.iter() {
                if seen.insert(r.0) {
                    queue.push_back(*r);
                }
            }
        }
        Ok(None)
    }

    fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        Ok(self.0.threads.get(id.as_str()).cloned())
    }

    fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        Ok(by_thread(&self.0.threads))
    }

    fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()> {
        self.0.threads.insert(id.as_str().to_string(), rec.clone());
        Ok(())
    }

    fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        Ok(self.0.threads.remove(id.as_str()))
    }

    fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>> {
        Ok(self.0.registry.get(name).copied())
    }

    fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()> {
        self.0.registry.insert(name.to_string(), workflow);
        Ok(())
    }

    fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()> {
        let seq = self.0.next_registry_seq;
        self.0.next_registry_seq += 1;
        self.0
            .registry_history
            .insert((name.to_string(), seq), e.clone());
        Ok(())
    }

    fn has_registry_history(&mut self, name: &str) -> Result<bool> {
        Ok(versions(self.0, name).next().is_some())
    }

    fn registry_versions(&mut self, name: &str) -> Result<Vec<RegistryEntry>> {
        Ok(versions(self.0, name).map(|(_, e)| e.clone()).collect())
    }

    fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool> {
        let had = self.0.registry.remove(name).is_some();
        if purge {
            let keys: Vec<(String, u64)> = versions(self.0, name).map(|(k, _)| k.clone()).collect();
            for k in keys {
                self.0.registry_history.remove(&k);
            }
        }
        Ok(had)
    }

    fn append_history(&mut self, e: &HistoryEntry) -> Result<()> {
        let seq = self.0.next_history_seq;
        self.0.next_history_seq += 1;
        self.0.history.insert(seq, e.clone());
        Ok(())
    }

    fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize> {
        let keys: Vec<u64> = self.history_of(id.as_str()).map(|(k, _)| *k).collect();
        for k in &keys {
            self.0.history.remove(k);
        }
        Ok(keys.len())
    }

    fn history_latest(&mut self, thread: &str) -> Result<Option<HistoryEntry>> {
        Ok(self.history_of(thread).last().map(|(_, h)| h.clone()))
    }

    fn history_entries_of(&mut self, thread: &str) -> Result<Vec<HistoryEntry>> {
        Ok(self.history_of(thread).map(|(_, h)| h.clone()).collect())
    }

    fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        Ok(self.0.leases.get(id.as_str()).cloned())
    }

    fn set_lease(&mut self, id: &ThreadId, lease: &Lease) -> Result<()> {
        self.0.leases.insert(id.as_str().to_string(), lease.clone());
        Ok(())
    }

    fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        Ok(self.0.leases.remove(id.as_str()))
    }

    fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState> {
        Ok(self.0.states.get(id.as_str()).cloned().unwrap_or_default())
    }

    fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>> {
        Ok(by_thread(&self.0.states))
    }

    fn set_thread_state(&mut self, id: &ThreadId, s: &ThreadState) -> Result<()> {
        if s.is_default() {
            self.0.states.remove(id.as_str());
        } else {
            self.0.states.insert(id.as_str().to_string(), s.clone());
        }
        Ok(())
    }

    fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()> {
        self.0.states.remove(id.as_str());
        Ok(())
    }

    fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        Ok(match limits {
            Some(l) => self.0.limits.insert(name.to_string(), *l),
            None => self.0.limits.remove(name),
        })
    }

    fn lock_workflow(&mut self, _key: &str) -> Result<()> {
        // Write transactions are one at a time already.
        Ok(())
    }

    fn record_removal(&mut self, r: &Removal) -> Result<()> {
        let seq = self.0.next_removal_seq;
        self.0.next_removal_seq += 1;
        self.0.removals.insert(seq, r.clone());
        Ok(())
    }

    fn pin(&mut self, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>> {
        if let Some(id) = ids.iter().find(|id| !self.0.nodes.contains_key(&id.0)) {
            return Err(StoreError::NotFound(*id));
        }
        Ok(ids
            .iter()
            .map(|id| {
                let new = !self.0.pins.contains_key(&id.0);
                if new {
                    self.0.pins.insert(id.0, now_ms);
                }
                new
            })
            .collect())
    }

    fn unpin(&mut self, ids: &[NodeId]) -> Result<Vec<bool>> {
        Ok(ids
            .iter()
            .map(|id| self.0.pins.remove(&id.0).is_some())
            .collect())
    }

    fn add_usage(&mut self, u: &StepUsage<'_>, now_ms: u64) -> Result<()> {
        self.0.usage.add(u, now_ms);
        Ok(())
    }

    fn set_budget(&mut self, name: &str, budget: Option<&Budget>) -> Result<Option<Budget>> {
        Ok(self.0.usage.set_budget(name, budget))
    }

    fn add_step_counts(&mut self, rows: &[MinuteRow], prune_before: Option<u32>) -> Result<()> {
        self.0.usage.add_minutes(rows, prune_before);
        Ok(())
    }
}
