//! Step leases: which process is running a step of a thread right now.
//!
//! Table `leases`: thread id → [`Lease`]. A lease is taken in the same write transaction that
//! checks the thread's head, and released in the transaction that moves it (or when the step
//! fails). Whether the owner is still alive is decided by the caller (the thread layer), so this
//! module stays free of process handling.
//!
//! A lease is the MessagePack array `[pid, since_ms, boot_id, start_ticks]` (`records.rs`).

use super::records::{Record, dec, enc};
use super::{Result, Store, Writer};
use crate::workflow::ThreadId;
use redb::{ReadableTable, TableDefinition, WriteTransaction};

pub(crate) const LEASES: TableDefinition<&str, &[u8]> = TableDefinition::new("leases");

/// The owner of a thread's step lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The owning process.
    pub pid: u32,
    /// When it was taken, ms since the epoch.
    pub since_ms: u64,
    /// The boot id of the owner's host (empty when unknown): a lease from another boot is stale.
    pub boot_id: String,
    /// The owner's process start time in clock ticks since boot (0 when unknown): a reused pid
    /// has another start time.
    pub start_ticks: u64,
    /// Whether the lease's expiry, which its holder renews while it runs, is still ahead:
    /// known where the store keeps one (PostgreSQL, by the server's clock), `None` on redb.
    /// A holder on another machine is judged by it.
    pub unexpired: Option<bool>,
}

/// Creates the table of this module (migration and first use).
pub(crate) fn create_tables(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(LEASES)?;
    Ok(())
}

impl Store {
    /// The lease of thread `id`, if any.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn lease(&self, id: &ThreadId) -> Result<Option<Lease>> {
        if let Some(pg) = self.pg() {
            return pg.lease(id);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = match tx.open_table(LEASES) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            t.get(id.as_str())?.map(|v| dec(v.value())).transpose()
        })
    }

    /// Every lease, in thread id order.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn leases(&self) -> Result<Vec<(ThreadId, Lease)>> {
        if let Some(pg) = self.pg() {
            return pg.leases();
        }
        self.thread_records(LEASES)
    }
}

impl Store {
    /// Every record of a table keyed by thread id, in thread id order; none when the table
    /// does not exist yet.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn thread_records<T: Record>(
        &self,
        table: TableDefinition<&str, &[u8]>,
    ) -> Result<Vec<(ThreadId, T)>> {
        self.guard(|| {
            let tx = self.begin_read()?;
            match tx.open_table(table) {
                Ok(t) => all_records(&t),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(Vec::new()),
                Err(e) => Err(e.into()),
            }
        })
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

impl Writer<'_> {
    /// The lease of thread `id`, seeing this transaction's writes.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        if let Some(w) = self.pg() {
            return w.lease(id);
        }
        let t = self.redb()?.open_table(LEASES)?;
        t.get(id.as_str())?.map(|v| dec(v.value())).transpose()
    }

    /// Sets the lease of thread `id`.
    ///
    /// # Errors
    /// A redb failure.
    pub fn set_lease(&mut self, id: &ThreadId, lease: &Lease) -> Result<()> {
        if let Some(pg) = self.pg_server() {
            let w = self.pg().expect("a PostgreSQL writer");
            return w.set_lease(id, lease, pg);
        }
        self.redb()?
            .open_table(LEASES)?
            .insert(id.as_str(), enc(lease).as_slice())?;
        Ok(())
    }

    /// Removes the lease of thread `id`; returns it.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub(crate) fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        if let Some(w) = self.pg() {
            return w.remove_lease(id);
        }
        let mut t = self.redb()?.open_table(LEASES)?;
        let old = t.remove(id.as_str())?.map(|v| dec(v.value())).transpose()?;
        Ok(old)
    }
}
