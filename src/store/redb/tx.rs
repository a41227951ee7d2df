//! A write transaction of the file ([`RedbTx`]). The rows of threads, leases and thread states
//! it reads and writes are kept in memory and written once each before it commits, and the
//! puts of nodes it read ahead wait until then too: a group commit of many steps opens each
//! table once, not once a write (redb finds a table by name in its table tree at every open
//! and writes the table's root back at every close).

use super::records::{self, LEASES, THREAD_STATE, THREADS};
use super::tables::IDS;
use super::{gc, minutes, nodes, usage};
use crate::cas::NodeId;
use crate::model::ThreadId;
use crate::store::backend::WriteTx;
use crate::store::error::{Result, StoreError};
use crate::store::minutes::MinuteRow;
use crate::store::node::{Prepared, PutOutcome};
use crate::store::records::{
    HistoryEntry, Lease, Record, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
    dec, enc,
};
use crate::store::usage::{Budget, StepUsage};
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use std::collections::HashMap;

/// A row of a table keyed by thread id as the transaction knows it: its value (`None`: no row)
/// and whether the transaction changed it.
struct Row<T> {
    value: Option<T>,
    dirty: bool,
}

/// The rows of one table keyed by thread id that the transaction knows.
struct Rows<T> {
    table: TableDefinition<'static, &'static str, &'static [u8]>,
    rows: foldhash::HashMap<ThreadId, Row<T>>,
}

impl<T: Record + Clone> Rows<T> {
    fn new(table: TableDefinition<'static, &'static str, &'static [u8]>) -> Rows<T> {
        Rows {
            table,
            rows: foldhash::HashMap::default(),
        }
    }

    /// Thread `id`'s row: known, else read (and known from now on).
    fn get(&mut self, tx: &WriteTransaction, id: &ThreadId) -> Result<Option<T>> {
        if let Some(r) = self.rows.get(id) {
            return Ok(r.value.clone());
        }
        let value = read(&tx.open_table(self.table)?, id)?;
        self.rows.insert(
            id.clone(),
            Row {
                value: value.clone(),
                dirty: false,
            },
        );
        Ok(value)
    }

    /// Reads the rows of `ids` not known yet, with the table opened once.
    fn read_ahead(&mut self, tx: &WriteTransaction, ids: &[ThreadId]) -> Result<()> {
        let t = tx.open_table(self.table)?;
        for id in ids {
            if !self.rows.contains_key(id) {
                let value = read(&t, id)?;
                self.rows.insert(
                    id.clone(),
                    Row {
                        value,
                        dirty: false,
                    },
                );
            }
        }
        Ok(())
    }

    /// Sets thread `id`'s row (`None`: removes it); returns the row it had.
    fn set(&mut self, tx: &WriteTransaction, id: &ThreadId, value: Option<T>) -> Result<Option<T>> {
        let old = self.get(tx, id)?;
        self.rows.insert(id.clone(), Row { value, dirty: true });
        Ok(old)
    }

    /// Writes the rows changed, in key order, with the table opened once, and forgets them all.
    fn settle(&mut self, tx: &WriteTransaction) -> Result<()> {
        let mut changed: Vec<(ThreadId, Option<T>)> = self
            .rows
            .drain()
            .filter(|(_, r)| r.dirty)
            .map(|(k, r)| (k, r.value))
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        changed.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let mut t = tx.open_table(self.table)?;
        for (id, value) in changed {
            match value {
                Some(v) => t.insert(id.as_str(), enc(&v).as_slice())?,
                None => t.remove(id.as_str())?,
            };
        }
        Ok(())
    }
}

fn read<T: Record>(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &ThreadId,
) -> Result<Option<T>> {
    t.get(id.as_str())?.map(|v| dec(v.value())).transpose()
}

/// A write transaction of the file: see the module documentation.
pub(super) struct RedbTx<'a> {
    tx: &'a WriteTransaction,
    threads: Rows<ThreadRecord>,
    leases: Rows<Lease>,
    /// A default state is kept as no row.
    states: Rows<ThreadState>,
    /// Whether each node read ahead is stored, this transaction's puts included.
    ahead: HashMap<u64, bool, nodes::BuildU64>,
    /// Puts of nodes read ahead, in their order, written when the transaction settles, with
    /// the outcome each was given.
    deferred: Vec<(Prepared, u64, PutOutcome)>,
    /// Where each node a deferred put inserts is in `deferred`.
    inserted_at: HashMap<u64, usize, nodes::BuildU64>,
}

impl<'a> RedbTx<'a> {
    pub(super) fn new(tx: &'a WriteTransaction) -> RedbTx<'a> {
        RedbTx {
            tx,
            threads: Rows::new(THREADS),
            leases: Rows::new(LEASES),
            states: Rows::new(THREAD_STATE),
            ahead: HashMap::with_hasher(nodes::BuildU64),
            deferred: Vec::new(),
            inserted_at: HashMap::with_hasher(nodes::BuildU64),
        }
    }

    fn records(&self) -> records::Tx<'_> {
        records::Tx(self.tx)
    }

    /// Writes everything kept in memory: before the commit, and before a statement that reads
    /// the tables another way.
    pub(super) fn settle(&mut self) -> Result<()> {
        self.settle_nodes()?;
        self.threads.settle(self.tx)?;
        self.leases.settle(self.tx)?;
        self.states.settle(self.tx)
    }

    /// Writes the deferred puts of nodes, checking that each had the outcome it was given.
    fn settle_nodes(&mut self) -> Result<()> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let deferred = std::mem::take(&mut self.deferred);
        self.inserted_at.clear();
        let out = nodes::put_in(self.tx, deferred.iter().map(|(p, t, _)| (p, *t)))?;
        if deferred.iter().zip(&out).any(|((_, _, o), got)| o != got) {
            return Err(StoreError::Internal(
                "a put read ahead found the store changed".into(),
            ));
        }
        Ok(())
    }

    /// The put of `items` when every one was read ahead: the outcomes now, the writes when the
    /// transaction settles. `None` otherwise.
    fn put_ahead(&mut self, items: &[(&Prepared, u64)]) -> Option<Vec<PutOutcome>> {
        if !items.iter().all(|(p, _)| self.ahead.contains_key(&p.id.0)) {
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        for (p, ts) in items {
            let stored = self.ahead.insert(p.id.0, true).unwrap_or(true);
            if !stored {
                self.inserted_at.insert(p.id.0, self.deferred.len());
                self.deferred
                    .push(((*p).clone(), *ts, PutOutcome::Inserted));
                out.push(PutOutcome::Inserted);
                continue;
            }
            // Put again: a node this transaction inserts keeps the earliest time it was put
            // with (the write of a repeat in one put is the first's).
            match self.inserted_at.get(&p.id.0) {
                Some(&at) => {
                    let first = &mut self.deferred[at];
                    if first.0.digest != p.digest {
                        self.ahead.remove(&p.id.0);
                        return None;
                    }
                    first.1 = first.1.min(*ts);
                }
                None => self.deferred.push(((*p).clone(), *ts, PutOutcome::Existed)),
            }
            out.push(PutOutcome::Existed);
        }
        Some(out)
    }
}

impl WriteTx for RedbTx<'_> {
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        if let Some(out) = self.put_ahead(items) {
            return Ok(out);
        }
        // After the deferred ones: sequence numbers follow the order of the puts.
        self.settle_nodes()?;
        let out = nodes::put_in(self.tx, items.iter().copied())?;
        for (p, _) in items {
            if let Some(known) = self.ahead.get_mut(&p.id.0) {
                *known = true;
            }
        }
        Ok(out)
    }

    fn has(&mut self, id: NodeId) -> Result<bool> {
        if let Some(&known) = self.ahead.get(&id.0) {
            return Ok(known);
        }
        self.settle_nodes()?;
        Ok(self.tx.open_table(IDS)?.get(id.0)?.is_some())
    }

    fn prefetch(&mut self, ids: &[ThreadId], nodes: &[NodeId]) -> Result<()> {
        if !ids.is_empty() {
            self.threads.read_ahead(self.tx, ids)?;
            self.leases.read_ahead(self.tx, ids)?;
            self.states.read_ahead(self.tx, ids)?;
        }
        if !nodes.is_empty() {
            self.settle_nodes()?;
            let t = self.tx.open_table(IDS)?;
            for n in nodes {
                if let std::collections::hash_map::Entry::Vacant(e) = self.ahead.entry(n.0) {
                    e.insert(t.get(n.0)?.is_some());
                }
            }
        }
        Ok(())
    }

    fn first_missing(
        &mut self,
        from: NodeId,
        stop: &[NodeId],
        stop_types: &[NodeId],
    ) -> Result<Option<NodeId>> {
        self.settle_nodes()?;
        gc::first_missing(self.tx, from, stop, stop_types)
    }

    fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.threads.get(self.tx, id)
    }

    fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        self.settle()?;
        self.records().threads()
    }

    fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()> {
        self.threads.set(self.tx, id, Some(rec.clone())).map(drop)
    }

    fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.threads.set(self.tx, id, None)
    }

    fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>> {
        self.records().registry_get(name)
    }

    fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()> {
        self.records().set_registry_name(name, workflow)
    }

    fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()> {
        self.records().append_registry_version(name, e)
    }

    fn has_registry_history(&mut self, name: &str) -> Result<bool> {
        self.records().has_registry_history(name)
    }

    fn registry_versions(&mut self, name: &str) -> Result<Vec<RegistryEntry>> {
        self.records().registry_versions(name)
    }

    fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool> {
        self.records().remove_registry_name(name, purge)
    }

    fn append_history(&mut self, e: &HistoryEntry) -> Result<()> {
        self.records().append_history(e)
    }

    fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize> {
        self.records().remove_history_of(id)
    }

    fn history_latest(&mut self, thread: &str) -> Result<Option<HistoryEntry>> {
        self.records().history_latest(thread)
    }

    fn history_entries_of(&mut self, thread: &str) -> Result<Vec<HistoryEntry>> {
        self.records().history_entries_of(thread)
    }

    fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.leases.get(self.tx, id)
    }

    fn set_lease(&mut self, id: &ThreadId, lease: &Lease) -> Result<()> {
        self.leases.set(self.tx, id, Some(lease.clone())).map(drop)
    }

    fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.leases.set(self.tx, id, None)
    }

    fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState> {
        Ok(self.states.get(self.tx, id)?.unwrap_or_default())
    }

    fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>> {
        self.settle()?;
        self.records().thread_states()
    }

    fn set_thread_state(&mut self, id: &ThreadId, s: &ThreadState) -> Result<()> {
        let row = (!s.is_default()).then(|| s.clone());
        self.states.set(self.tx, id, row).map(drop)
    }

    fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()> {
        self.states.set(self.tx, id, None).map(drop)
    }

    fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        self.records().set_workflow_limits(name, limits)
    }

    fn lock_workflow(&mut self, _key: &str) -> Result<()> {
        // redb's write transactions are one at a time already.
        Ok(())
    }

    fn record_removal(&mut self, r: &Removal) -> Result<()> {
        self.records().record_removal(r)
    }

    fn pin(&mut self, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>> {
        self.settle_nodes()?;
        gc::pin(self.tx, ids, now_ms)
    }

    fn unpin(&mut self, ids: &[NodeId]) -> Result<Vec<bool>> {
        self.settle_nodes()?;
        gc::unpin(self.tx, ids)
    }

    fn add_usage(&mut self, u: &StepUsage<'_>, now_ms: u64) -> Result<()> {
        usage::add(self.tx, u, now_ms)
    }

    fn set_budget(&mut self, name: &str, budget: Option<&Budget>) -> Result<Option<Budget>> {
        usage::set_budget(self.tx, name, budget)
    }

    fn add_step_counts(&mut self, rows: &[MinuteRow], prune_before: Option<u32>) -> Result<()> {
        minutes::add(self.tx, rows, prune_before)
    }
}
