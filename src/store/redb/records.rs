//! The thread-layer tables of the redb file, read and written.
//!
//! Tables (the records are the MessagePack arrays of `records.rs`):
//! - `threads`: thread id → [`ThreadRecord`] (active threads)
//! - `registry`: workflow name → workflow node id
//! - `registry_history`: (name, seq) → [`RegistryEntry`], every version with its time
//! - `history`: seq → [`HistoryEntry`], finished threads in the order they finished
//! - `history_by_thread` (derived): thread id → seq of its latest history entry
//! - `leases`: thread id → [`Lease`], the process running a step of the thread
//! - `thread_state`: thread id → [`ThreadState`] (a thread without a row is ready, unlimited
//!   and without failures)
//! - `limits` (created when first written): workflow name → [`WorkflowLimits`]
//! - `removals`: seq (meta `next_removal_seq`) → [`Removal`]

use super::tables::META_TABLE;
use crate::model::ThreadId;
use crate::store::error::Result;
use crate::store::records::{
    HistoryEntry, Record, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits, dec,
    enc,
};
use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};

/// The meta key of the next removal's number (`removals`).
pub(crate) const META_KEY_REMOVALS: &str = "next_removal_seq";
pub(crate) const THREADS: TableDefinition<&str, &[u8]> = TableDefinition::new("threads");
pub(crate) const REGISTRY: TableDefinition<&str, u64> = TableDefinition::new("registry");
pub(crate) const REGISTRY_HISTORY: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("registry_history");
pub(crate) const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");
pub(crate) const HISTORY_BY_THREAD: TableDefinition<&str, u64> =
    TableDefinition::new("history_by_thread");
pub(crate) const LEASES: TableDefinition<&str, &[u8]> = TableDefinition::new("leases");
pub(crate) const THREAD_STATE: TableDefinition<&str, &[u8]> = TableDefinition::new("thread_state");
pub(crate) const LIMITS: TableDefinition<&str, &[u8]> = TableDefinition::new("limits");
pub(crate) const REMOVALS: TableDefinition<u64, &[u8]> = TableDefinition::new("removals");

/// Creates the tables of this module in `tx` (migration and first use).
pub(crate) fn create_tables(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(THREADS)?;
    tx.open_table(REGISTRY)?;
    tx.open_table(REGISTRY_HISTORY)?;
    tx.open_table(HISTORY)?;
    tx.open_table(HISTORY_BY_THREAD)?;
    tx.open_table(LEASES)?;
    tx.open_table(THREAD_STATE)?;
    tx.open_table(REMOVALS)?;
    Ok(())
}

/// Every record of a table keyed by name (created when first written), in name order.
pub(crate) fn by_name<T: Record>(
    tx: &ReadTransaction,
    table: TableDefinition<&str, &[u8]>,
) -> Result<Vec<(String, T)>> {
    let Some(t) = opt_table(tx, table)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in t.iter()? {
        let (k, v) = e?;
        out.push((k.value().to_string(), dec(v.value())?));
    }
    Ok(out)
}

/// Sets (`Some`) or removes (`None`) the record `name` of a table keyed by name; returns the
/// old one.
pub(crate) fn set_by_name<T: Record>(
    tx: &WriteTransaction,
    table: TableDefinition<&str, &[u8]>,
    name: &str,
    rec: Option<&T>,
) -> Result<Option<T>> {
    let mut t = tx.open_table(table)?;
    let old = match rec {
        Some(r) => t.insert(name, enc(r).as_slice())?,
        None => t.remove(name)?,
    };
    old.map(|v| dec(v.value())).transpose()
}

/// Opens `t` in a read transaction: `None` when it was never created.
pub(crate) fn opt_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    tx: &ReadTransaction,
    t: TableDefinition<K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>> {
    match tx.open_table(t) {
        Ok(t) => Ok(Some(t)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Every record of `t`, a table keyed by thread id, in thread id order.
///
/// # Errors
/// A redb failure or a corrupt record.
pub(crate) fn all_records<T: Record>(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<Vec<(ThreadId, T)>> {
    let mut out = Vec::new();
    for e in t.iter()? {
        let (k, v) = e?;
        out.push((ThreadId::from_stored(k.value()), dec(v.value())?));
    }
    Ok(out)
}

/// The records of a table keyed by thread id in a read transaction (none if never created).
pub(crate) fn thread_records<T: Record>(
    tx: &ReadTransaction,
    table: TableDefinition<&str, &[u8]>,
) -> Result<Vec<(ThreadId, T)>> {
    match opt_table(tx, table)? {
        Some(t) => all_records(&t),
        None => Ok(Vec::new()),
    }
}

/// The record of thread `id` in a table keyed by thread id (none if never created).
pub(crate) fn thread_record<T: Record>(
    tx: &ReadTransaction,
    table: TableDefinition<&str, &[u8]>,
    id: &ThreadId,
) -> Result<Option<T>> {
    match opt_table(tx, table)? {
        Some(t) => t.get(id.as_str())?.map(|v| dec(v.value())).transpose(),
        None => Ok(None),
    }
}

/// Reads of the thread-layer tables in a read transaction.
pub(crate) mod read {
    use super::*;
    use crate::cas::NodeId;
    use crate::store::backend::Each;

    pub(crate) fn threads(tx: &ReadTransaction) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        thread_records(tx, THREADS)
    }

    pub(crate) fn registry(tx: &ReadTransaction) -> Result<Vec<(String, NodeId)>> {
        let t = tx.open_table(REGISTRY)?;
        let mut out = Vec::new();
        for e in t.iter()? {
            let (k, v) = e?;
            out.push((k.value().to_string(), NodeId(v.value())));
        }
        Ok(out)
    }

    pub(crate) fn registry_history(tx: &ReadTransaction, name: &str) -> Result<Vec<RegistryEntry>> {
        let t = tx.open_table(REGISTRY_HISTORY)?;
        let mut out = Vec::new();
        for e in t.range((name, 0)..=(name, u64::MAX))? {
            out.push(dec(e?.1.value())?);
        }
        Ok(out)
    }

    pub(crate) fn registry_places(tx: &ReadTransaction) -> Result<Vec<(String, u64)>> {
        let t = tx.open_table(REGISTRY_HISTORY)?;
        let mut out: Vec<(String, u64)> = Vec::new();
        for e in t.iter()? {
            let (k, _) = e?;
            let (name, seq) = k.value();
            match out.last_mut() {
                Some((n, first)) if n == name => *first = (*first).min(seq),
                _ => out.push((name.to_string(), seq)),
            }
        }
        Ok(out)
    }

    pub(crate) fn all_registry_history(
        tx: &ReadTransaction,
    ) -> Result<Vec<(String, RegistryEntry)>> {
        let t = tx.open_table(REGISTRY_HISTORY)?;
        let mut out = Vec::new();
        for e in t.iter()? {
            let (k, v) = e?;
            out.push((k.value().0.to_string(), dec(v.value())?));
        }
        Ok(out)
    }

    pub(crate) fn for_each_history(tx: &ReadTransaction, f: Each<'_, HistoryEntry>) -> Result<()> {
        let t = tx.open_table(HISTORY)?;
        for e in t.iter()? {
            let (_, v) = e?;
            if f(dec(v.value())?).is_break() {
                break;
            }
        }
        Ok(())
    }

    pub(crate) fn history_of(tx: &ReadTransaction, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        let by = tx.open_table(HISTORY_BY_THREAD)?;
        let Some(seq) = by.get(id.as_str())?.map(|v| v.value()) else {
            return Ok(None);
        };
        let h = tx.open_table(HISTORY)?;
        h.get(seq)?.map(|v| dec(v.value())).transpose()
    }

    pub(crate) fn thread_state(tx: &ReadTransaction, id: &ThreadId) -> Result<ThreadState> {
        Ok(thread_record(tx, THREAD_STATE, id)?.unwrap_or_default())
    }

    pub(crate) fn workflow_limits(tx: &ReadTransaction) -> Result<Vec<(String, WorkflowLimits)>> {
        by_name(tx, LIMITS)
    }

    pub(crate) fn removal_mark(tx: &ReadTransaction) -> Result<u64> {
        Ok(match opt_table(tx, META_TABLE)? {
            Some(t) => t.get(META_KEY_REMOVALS)?.map_or(0, |v| v.value()),
            None => 0,
        })
    }

    pub(crate) fn removals_since(tx: &ReadTransaction, from: u64) -> Result<Vec<Removal>> {
        let Some(t) = opt_table(tx, REMOVALS)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for e in t.range(from..)? {
            out.push(dec(e?.1.value())?);
        }
        Ok(out)
    }
}

/// Writes of the thread-layer tables in a write transaction.
pub(crate) struct Tx<'a>(pub(crate) &'a WriteTransaction);

impl Tx<'_> {
    /// The next number of counter `key` in `meta`.
    pub(crate) fn next(&self, key: &str) -> Result<u64> {
        let mut m = self.0.open_table(META_TABLE)?;
        let n = m.get(key)?.map_or(0, |v| v.value());
        m.insert(key, n + 1)?;
        Ok(n)
    }

    pub(crate) fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        all_records(&self.0.open_table(THREADS)?)
    }

    pub(crate) fn registry_get(&self, name: &str) -> Result<Option<crate::cas::NodeId>> {
        Ok(self
            .0
            .open_table(REGISTRY)?
            .get(name)?
            .map(|v| crate::cas::NodeId(v.value())))
    }

    pub(crate) fn set_registry_name(&self, name: &str, workflow: crate::cas::NodeId) -> Result<()> {
        self.0.open_table(REGISTRY)?.insert(name, workflow.0)?;
        Ok(())
    }

    pub(crate) fn append_registry_version(&self, name: &str, e: &RegistryEntry) -> Result<()> {
        let seq = self.next("next_registry_seq")?;
        self.0
            .open_table(REGISTRY_HISTORY)?
            .insert((name, seq), enc(e).as_slice())?;
        Ok(())
    }

    pub(crate) fn registry_versions(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        let t = self.0.open_table(REGISTRY_HISTORY)?;
        let mut out = Vec::new();
        for e in t.range((name, 0)..=(name, u64::MAX))? {
            out.push(dec(e?.1.value())?);
        }
        Ok(out)
    }

    pub(crate) fn has_registry_history(&self, name: &str) -> Result<bool> {
        let t = self.0.open_table(REGISTRY_HISTORY)?;
        Ok(t.range((name, 0)..=(name, u64::MAX))?.next().is_some())
    }

    pub(crate) fn remove_registry_name(&self, name: &str, purge: bool) -> Result<bool> {
        let had = self.0.open_table(REGISTRY)?.remove(name)?.is_some();
        if purge {
            let mut t = self.0.open_table(REGISTRY_HISTORY)?;
            let keys: Vec<u64> = t
                .range((name, 0)..=(name, u64::MAX))?
                .map(|e| e.map(|(k, _)| k.value().1))
                .collect::<std::result::Result<_, _>>()?;
            for k in keys {
                t.remove((name, k))?;
            }
        }
        Ok(had)
    }

    pub(crate) fn append_history(&self, e: &HistoryEntry) -> Result<()> {
        let seq = self.next("next_history_seq")?;
        self.0.open_table(HISTORY)?.insert(seq, enc(e).as_slice())?;
        self.0
            .open_table(HISTORY_BY_THREAD)?
            .insert(e.thread.as_str(), seq)?;
        Ok(())
    }

    /// The latest history entry of thread `thread`.
    pub(crate) fn history_latest(&self, thread: &str) -> Result<Option<HistoryEntry>> {
        let Some(seq) = self
            .0
            .open_table(HISTORY_BY_THREAD)?
            .get(thread)?
            .map(|v| v.value())
        else {
            return Ok(None);
        };
        let h = self.0.open_table(HISTORY)?;
        h.get(seq)?.map(|v| dec(v.value())).transpose()
    }

    /// The history entries of thread `id` with their keys, oldest first.
    fn history_of(&self, id: &str) -> Result<Vec<(u64, HistoryEntry)>> {
        let h = self.0.open_table(HISTORY)?;
        // No index names every entry of a thread, only its latest: a thread without one has
        // none, and one with a single entry needs no scan.
        let Some(latest) = self
            .0
            .open_table(HISTORY_BY_THREAD)?
            .get(id)?
            .map(|v| v.value())
        else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for x in h.range(..=latest)? {
            let (k, v) = x?;
            let e: HistoryEntry = dec(v.value())?;
            if e.thread == id {
                out.push((k.value(), e));
            }
        }
        Ok(out)
    }

    pub(crate) fn history_entries_of(&self, id: &str) -> Result<Vec<HistoryEntry>> {
        Ok(self.history_of(id)?.into_iter().map(|(_, e)| e).collect())
    }

    pub(crate) fn remove_history_of(&self, id: &ThreadId) -> Result<usize> {
        let seqs: Vec<u64> = self
            .history_of(id.as_str())?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let mut h = self.0.open_table(HISTORY)?;
        for s in &seqs {
            h.remove(s)?;
        }
        self.0.open_table(HISTORY_BY_THREAD)?.remove(id.as_str())?;
        Ok(seqs.len())
    }

    pub(crate) fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        all_records(&self.0.open_table(THREAD_STATE)?)
    }

    pub(crate) fn set_workflow_limits(
        &self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        set_by_name(self.0, LIMITS, name, limits)
    }

    pub(crate) fn record_removal(&self, r: &Removal) -> Result<()> {
        let seq = self.next(META_KEY_REMOVALS)?;
        self.0
            .open_table(REMOVALS)?
            .insert(seq, enc(r).as_slice())?;
        Ok(())
    }
}
