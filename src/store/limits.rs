//! Per-workflow limits kept in the store (`uwf limits set`), so that every runner sharing the
//! store, on any machine, enforces the same ones.
//!
//! Table `limits` (created when first written): workflow name → [`WorkflowLimits`], the
//! MessagePack array `[concurrency, overflow, max_queue | nil, max_retries | nil]`
//! (`records.rs`), `overflow` 0 to queue, 1 to drop.

use super::records::{dec, enc};
use super::{Result, Store, Writer};
use redb::{ReadableTable, TableDefinition};

pub(crate) const LIMITS: TableDefinition<&str, &[u8]> = TableDefinition::new("limits");

/// A workflow's limits as the store keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkflowLimits {
    /// Threads in progress at once (0: no concurrency limit, only `max_retries`).
    pub concurrency: u32,
    /// Whether a thread started beyond the limit is dropped (else it waits in a queue).
    pub drop: bool,
    /// The most threads waiting; `None` for no bound.
    pub max_queue: Option<u32>,
    /// Consecutive failed steps after which a thread fails; `None` for the config's.
    pub max_retries: Option<u32>,
}

impl Store {
    /// Every workflow's limits, in name order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>> {
        if let Some(pg) = self.pg() {
            return pg.workflow_limits();
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = match tx.open_table(LIMITS) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut out = Vec::new();
            for e in t.iter()? {
                let (k, v) = e?;
                out.push((k.value().to_string(), dec(v.value())?));
            }
            Ok(out)
        })
    }
}

impl Writer<'_> {
    /// Sets (`Some`) or removes (`None`) the limits of workflow `name`; returns the old ones.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        if let Some(w) = self.pg() {
            return w.set_workflow_limits(name, limits);
        }
        let mut t = self.redb()?.open_table(LIMITS)?;
        let old = match limits {
            Some(l) => t.insert(name, enc(l).as_slice())?,
            None => t.remove(name)?,
        };
        old.map(|v| dec(v.value())).transpose()
    }

    /// Makes the transactions that admit threads of one workflow wait for each other, across
    /// processes and machines (a transaction-scoped lock on a server; redb's write
    /// transactions are one at a time already).
    ///
    /// # Errors
    /// A store failure.
    pub fn lock_workflow(&mut self, key: &str) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.lock_workflow(key);
        }
        Ok(())
    }
}
