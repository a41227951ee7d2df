//! Threads, the workflow registry (with history) and the archive of finished threads.
//!
//! Tables:
//! - `threads`: thread id → [`ThreadRecord`] (active threads; the head moves only by
//!   compare-and-swap inside a write transaction)
//! - `registry`: workflow name → workflow node id
//! - `registry_history`: (name, seq) → [`RegistryEntry`], every version with its time
//! - `history`: seq → [`HistoryEntry`], finished threads in the order they finished
//! - `history_by_thread` (derived): thread id → seq of its latest history entry
//!
//! The records are MessagePack arrays with a fixed element order, written by `records.rs`:
//! `ThreadRecord` `[head, workflow | nil, updated_ms]`, `RegistryEntry` `[workflow, time_ms]`,
//! `HistoryEntry` `[thread, workflow, head, completed_at, reason]`.

use super::records::{dec, enc};
use super::{META_TABLE, Result, Store, StoreError};
use crate::cas::NodeId;
use crate::workflow::ThreadId;
use redb::{ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction};

/// The meta key of the next removal's number (`removals`).
pub(crate) const META_KEY_REMOVALS: &str = "next_removal_seq";
pub(crate) const THREADS: TableDefinition<&str, &[u8]> = TableDefinition::new("threads");
pub(crate) const REGISTRY: TableDefinition<&str, u64> = TableDefinition::new("registry");
pub(crate) const REGISTRY_HISTORY: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("registry_history");
pub(crate) const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");
pub(crate) const HISTORY_BY_THREAD: TableDefinition<&str, u64> =
    TableDefinition::new("history_by_thread");

/// An active thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    /// The head: the StartNode, or the latest StepNode.
    pub head: NodeId,
    /// The workflow node, when known.
    pub workflow: Option<NodeId>,
    /// When the head last moved, ms since the epoch.
    pub updated_ms: u64,
}

/// One version of a registry name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// The workflow node id.
    pub workflow: NodeId,
    /// When it was registered, ms since the epoch.
    pub time_ms: u64,
}

/// A finished thread (`history.jsonl` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The thread id.
    pub thread: String,
    /// The workflow node id, as written.
    pub workflow: String,
    /// The last node of the thread, as written.
    pub head: String,
    /// When it finished, ms since the epoch.
    pub completed_at: u64,
    /// How it finished (stored as its string).
    pub reason: crate::workflow::FinishReason,
}

/// What an import of a name did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// The name was new.
    Inserted,
    /// The name had the same value.
    Same,
    /// The name had another value, which was kept.
    Kept,
    /// The name had another value, which was replaced.
    Overwritten,
}

/// Creates the tables of this module in `tx` (migration and first use).
pub(crate) fn create_tables(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(THREADS)?;
    tx.open_table(REGISTRY)?;
    tx.open_table(REGISTRY_HISTORY)?;
    tx.open_table(HISTORY)?;
    tx.open_table(HISTORY_BY_THREAD)?;
    Ok(())
}

/// How much a store holds (`uwf store info`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes.
    pub nodes: u64,
    /// Active threads.
    pub threads: u64,
    /// History entries (finished threads).
    pub history: u64,
    /// Registered workflow names.
    pub workflows: u64,
    /// Step leases held.
    pub leases: u64,
}

impl Store {
    /// How much the store holds.
    ///
    /// # Errors
    /// A store failure.
    pub fn counts(&self) -> Result<Counts> {
        if let Some(pg) = self.pg() {
            let [nodes, threads, history, workflows, leases] = pg.counts()?;
            return Ok(Counts {
                nodes,
                threads,
                history,
                workflows,
                leases,
            });
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let len = |t: std::result::Result<u64, redb::StorageError>| t.map_err(StoreError::from);
            Ok(Counts {
                nodes: self.node_count()?,
                threads: len(tx.open_table(THREADS)?.len())?,
                history: len(tx.open_table(HISTORY)?.len())?,
                workflows: len(tx.open_table(REGISTRY)?.len())?,
                leases: self.leases()?.len() as u64,
            })
        })
    }

    /// Every active thread, in id order.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        if let Some(pg) = self.pg() {
            return pg.threads();
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = tx.open_table(THREADS)?;
            let mut out = Vec::with_capacity(t.len()? as usize);
            for e in t.iter()? {
                let (k, v) = e?;
                out.push((ThreadId::from_stored(k.value()), dec(v.value())?));
            }
            Ok(out)
        })
    }

    /// The active thread `id`.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        if let Some(pg) = self.pg() {
            return pg.thread(id);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = tx.open_table(THREADS)?;
            t.get(id.as_str())?.map(|v| dec(v.value())).transpose()
        })
    }

    /// The registry: name → workflow id, in name order.
    ///
    /// # Errors
    /// A redb failure.
    pub fn registry(&self) -> Result<Vec<(String, NodeId)>> {
        if let Some(pg) = self.pg() {
            return pg.registry();
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = tx.open_table(REGISTRY)?;
            let mut out = Vec::new();
            for e in t.iter()? {
                let (k, v) = e?;
                out.push((k.value().to_string(), NodeId(v.value())));
            }
            Ok(out)
        })
    }

    /// Every version of registry name `name`, oldest first.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        if let Some(pg) = self.pg() {
            return pg.registry_history(name);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = tx.open_table(REGISTRY_HISTORY)?;
            let mut out = Vec::new();
            for e in t.range((name, 0)..=(name, u64::MAX))? {
                out.push(dec(e?.1.value())?);
            }
            Ok(out)
        })
    }

    /// Every version of every registry name: (name, version), in name order, oldest first.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>> {
        if let Some(pg) = self.pg() {
            return pg.all_registry_history();
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = tx.open_table(REGISTRY_HISTORY)?;
            let mut out = Vec::new();
            for e in t.iter()? {
                let (k, v) = e?;
                out.push((k.value().0.to_string(), dec(v.value())?));
            }
            Ok(out)
        })
    }

    /// Visits finished threads in the order they finished.
    ///
    /// # Errors
    /// A redb failure, a corrupt record, or the first error of `f`.
    pub fn for_each_history<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(HistoryEntry) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if let Some(pg) = self.pg() {
            return pg.for_each_history(f);
        }
        super::catching_damage(&self.path, || {
            let tx = self.begin_read()?;
            let t = tx.open_table(HISTORY).map_err(self.located())?;
            for e in t.iter().map_err(self.located())? {
                let (_, v) = e.map_err(self.located())?;
                f(dec(v.value()).map_err(|e| e.located(&self.path))?)?;
            }
            Ok(())
        })
    }

    /// The latest history entry of thread `id`.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        if let Some(pg) = self.pg() {
            return pg.history_of(id);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let by = tx.open_table(HISTORY_BY_THREAD)?;
            let Some(seq) = by.get(id.as_str())?.map(|v| v.value()) else {
                return Ok(None);
            };
            let h = tx.open_table(HISTORY)?;
            h.get(seq)?.map(|v| dec(v.value())).transpose()
        })
    }

    /// Runs `f` in one write transaction and commits it when `f` succeeds.
    ///
    /// # Errors
    /// The error of `f` (nothing is committed then) or a redb failure.
    pub fn write<T>(&self, f: impl FnOnce(&mut Writer<'_>) -> Result<T>) -> Result<T> {
        self.guard(|| self.transact(f))
    }

    /// Runs `f` in one write transaction of the backend and commits it when `f` succeeds;
    /// nothing of it is kept when `f` fails.
    pub(crate) fn transact<T>(&self, f: impl FnOnce(&mut Writer<'_>) -> Result<T>) -> Result<T> {
        if let Some(pg) = self.pg() {
            let mut c = pg.conn()?;
            let mut w = Writer {
                inner: Inner::Pg {
                    w: super::pg::PgWriter::begin(pg, &mut c)?,
                    pg,
                },
            };
            let out = f(&mut w)?;
            let Inner::Pg { w, .. } = w.inner else {
                unreachable!("a PostgreSQL writer")
            };
            w.commit()?;
            return Ok(out);
        }
        let tx = self.begin_write()?;
        let out = f(&mut Writer {
            inner: Inner::Redb(&tx),
        })?;
        tx.commit()?;
        Ok(out)
    }
}

/// Writes inside one transaction; see [`Store::write`].
pub struct Writer<'a> {
    inner: Inner<'a>,
}

/// The transaction of a [`Writer`], on one backend or the other.
enum Inner<'a> {
    Redb(&'a WriteTransaction),
    Pg {
        w: super::pg::PgWriter<'a>,
        pg: &'a std::sync::Arc<super::pg::Pg>,
    },
}

impl<'a> Writer<'a> {
    /// The redb transaction; an error on PostgreSQL, for the operations it does not offer.
    pub(crate) fn redb(&self) -> Result<&'a WriteTransaction> {
        match &self.inner {
            Inner::Redb(tx) => Ok(tx),
            Inner::Pg { pg, .. } => Err(StoreError::Unsupported {
                server: pg.server().to_string(),
            }),
        }
    }

    /// The PostgreSQL transaction, when the store is on a server.
    pub(crate) fn pg(&mut self) -> Option<&mut super::pg::PgWriter<'a>> {
        match &mut self.inner {
            Inner::Pg { w, .. } => Some(w),
            Inner::Redb(_) => None,
        }
    }

    /// The server of a PostgreSQL transaction.
    pub(crate) fn pg_server(&self) -> Option<&'a std::sync::Arc<super::pg::Pg>> {
        match &self.inner {
            Inner::Pg { pg, .. } => Some(pg),
            Inner::Redb(_) => None,
        }
    }
}

impl Writer<'_> {
    /// Puts nodes (see [`Store::put`]).
    ///
    /// # Errors
    /// As [`Store::put`].
    pub fn put(
        &mut self,
        nodes: &[super::Prepared],
        now_ms: u64,
    ) -> Result<Vec<super::PutOutcome>> {
        if let Some(w) = self.pg() {
            return w.put(&nodes.iter().map(|p| (p, now_ms)).collect::<Vec<_>>());
        }
        super::nodes::put_in(self.redb()?, nodes.iter().map(|p| (p, now_ms)))
    }

    /// The active thread `id`.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        if let Some(w) = self.pg() {
            return w.thread(id);
        }
        let t = self.redb()?.open_table(THREADS)?;
        t.get(id.as_str())?.map(|v| dec(v.value())).transpose()
    }

    /// Every active thread, seeing this transaction's writes.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        if let Some(w) = self.pg() {
            return w.threads();
        }
        let t = self.redb()?.open_table(THREADS)?;
        let mut out = Vec::new();
        for e in t.iter()? {
            let (k, v) = e?;
            out.push((ThreadId::from_stored(k.value()), dec(v.value())?));
        }
        Ok(out)
    }

    /// Sets thread `id` to `rec` unconditionally.
    ///
    /// # Errors
    /// A redb failure.
    pub fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.set_thread(id, rec);
        }
        self.redb()?
            .open_table(THREADS)?
            .insert(id.as_str(), enc(rec).as_slice())?;
        Ok(())
    }

    /// Removes thread `id` from the active threads; returns its record.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        if let Some(w) = self.pg() {
            return w.remove_thread(id);
        }
        let mut t = self.redb()?.open_table(THREADS)?;
        let old = t.remove(id.as_str())?.map(|v| dec(v.value())).transpose()?;
        Ok(old)
    }

    /// Merges an imported thread head: new names are inserted; a different existing head is
    /// kept unless `overwrite`.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn merge_thread(
        &mut self,
        id: &ThreadId,
        rec: &ThreadRecord,
        overwrite: bool,
    ) -> Result<Merge> {
        match self.thread(id)? {
            None => {
                self.set_thread(id, rec)?;
                Ok(Merge::Inserted)
            }
            Some(old) if old.head == rec.head => Ok(Merge::Same),
            Some(_) if overwrite => {
                self.set_thread(id, rec)?;
                Ok(Merge::Overwritten)
            }
            Some(_) => Ok(Merge::Kept),
        }
    }

    /// The registered workflow of `name`.
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>> {
        if let Some(w) = self.pg() {
            return w.registry_get(name);
        }
        Ok(self
            .redb()?
            .open_table(REGISTRY)?
            .get(name)?
            .map(|v| NodeId(v.value())))
    }

    /// Registers `workflow` under `name` and records the version with its time.
    ///
    /// # Errors
    /// A redb failure.
    pub fn registry_set(&mut self, name: &str, workflow: NodeId, time_ms: u64) -> Result<()> {
        if let Some(w) = self.pg() {
            w.set_registry_name(name, workflow)?;
            return w.append_registry_version(name, &RegistryEntry { workflow, time_ms });
        }
        self.redb()?
            .open_table(REGISTRY)?
            .insert(name, workflow.0)?;
        let seq = self.next("next_registry_seq")?;
        let e = RegistryEntry { workflow, time_ms };
        self.redb()?
            .open_table(REGISTRY_HISTORY)?
            .insert((name, seq), enc(&e).as_slice())?;
        Ok(())
    }

    /// Whether `name` has any recorded version.
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn has_registry_history(&mut self, name: &str) -> Result<bool> {
        if let Some(w) = self.pg() {
            return w.has_registry_history(name);
        }
        let t = self.redb()?.open_table(REGISTRY_HISTORY)?;
        Ok(t.range((name, 0)..=(name, u64::MAX))?.next().is_some())
    }

    /// Records a version of `name` (an imported registry history) without changing the name.
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.append_registry_version(name, e);
        }
        let seq = self.next("next_registry_seq")?;
        self.redb()?
            .open_table(REGISTRY_HISTORY)?
            .insert((name, seq), enc(e).as_slice())?;
        Ok(())
    }

    /// Points `name` at `workflow` without recording a version (its history was imported).
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.set_registry_name(name, workflow);
        }
        self.redb()?
            .open_table(REGISTRY)?
            .insert(name, workflow.0)?;
        Ok(())
    }

    /// Merges an imported registry name, like [`Writer::merge_thread`].
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn merge_registry(
        &mut self,
        name: &str,
        workflow: NodeId,
        time_ms: u64,
        overwrite: bool,
    ) -> Result<Merge> {
        match self.registry_get(name)? {
            None => {
                self.registry_set(name, workflow, time_ms)?;
                Ok(Merge::Inserted)
            }
            Some(old) if old == workflow => Ok(Merge::Same),
            Some(_) if overwrite => {
                self.registry_set(name, workflow, time_ms)?;
                Ok(Merge::Overwritten)
            }
            Some(_) => Ok(Merge::Kept),
        }
    }

    /// Appends a finished thread to the history.
    ///
    /// # Errors
    /// A redb failure.
    pub fn append_history(&mut self, e: &HistoryEntry) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.append_history(e);
        }
        let seq = self.next("next_history_seq")?;
        self.redb()?
            .open_table(HISTORY)?
            .insert(seq, enc(e).as_slice())?;
        self.redb()?
            .open_table(HISTORY_BY_THREAD)?
            .insert(e.thread.as_str(), seq)?;
        Ok(())
    }

    /// Removes every history entry of thread `id`; returns how many there were.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize> {
        if let Some(w) = self.pg() {
            return w.remove_history_of(id);
        }
        let mut h = self.redb()?.open_table(HISTORY)?;
        let mut seqs = Vec::new();
        for x in h.iter()? {
            let (k, v) = x?;
            if dec::<HistoryEntry>(v.value())?.thread == id.as_str() {
                seqs.push(k.value());
            }
        }
        for s in &seqs {
            h.remove(s)?;
        }
        self.redb()?
            .open_table(HISTORY_BY_THREAD)?
            .remove(id.as_str())?;
        Ok(seqs.len())
    }

    /// Removes registry name `name`; with `purge` its versions too. Returns whether the name
    /// was registered.
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool> {
        if let Some(w) = self.pg() {
            return w.remove_registry_name(name, purge);
        }
        let had = self.redb()?.open_table(REGISTRY)?.remove(name)?.is_some();
        if purge {
            let mut t = self.redb()?.open_table(REGISTRY_HISTORY)?;
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

    /// Whether an identical history entry is already recorded for its thread.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn has_history(&mut self, e: &HistoryEntry) -> Result<bool> {
        if let Some(w) = self.pg() {
            return w.has_history(e);
        }
        let h = self.redb()?.open_table(HISTORY)?;
        // Entries of one thread are few; scan from its latest backwards is not possible without
        // an index of all of them, so compare with the latest and fall back to a scan.
        if let Some(seq) = self
            .redb()?
            .open_table(HISTORY_BY_THREAD)?
            .get(e.thread.as_str())?
        {
            if let Some(v) = h.get(seq.value())?
                && dec::<HistoryEntry>(v.value())? == *e
            {
                return Ok(true);
            }
        } else {
            return Ok(false);
        }
        for x in h.iter()? {
            if dec::<HistoryEntry>(x?.1.value())? == *e {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(super) fn next(&mut self, key: &str) -> Result<u64> {
        let mut m = self.redb()?.open_table(META_TABLE)?;
        let n = m.get(key)?.map_or(0, |v| v.value());
        m.insert(key, n + 1)?;
        Ok(n)
    }
}
