//! What `thread rm` and `workflow remove` took away, in order, so that a `--since` archive
//! carries the removals made after the archive before it.
//!
//! Table `removals`: seq (from meta `next_removal_seq`) → [`Removal`], the MessagePack array
//! `[kind, name]` (`records.rs`): kind 0 a thread, 1 a registry name, 2 a registry name with its
//! versions (`--purge`). Nothing reads the table but an archive export; a removal applied by an
//! import is recorded again, so the importing store's own archives carry it too.

use super::records::{dec, enc};
use super::threads::META_KEY_REMOVALS;
use super::{META_TABLE, Result, Store, Writer};
use redb::{TableDefinition, WriteTransaction};

pub(crate) const REMOVALS: TableDefinition<u64, &[u8]> = TableDefinition::new("removals");

/// One removal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "camelCase")]
pub enum Removal {
    /// A thread: its record, state and archive entries.
    Thread(String),
    /// A registry name (its versions stay).
    Workflow(String),
    /// A registry name and its versions.
    WorkflowPurged(String),
}

/// Creates the table of this module (migration and first use).
pub(crate) fn create_tables(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(REMOVALS)?;
    Ok(())
}

impl Store {
    /// The next removal's number: an archive records it, and a later `--since` archive takes
    /// the removals from there on.
    ///
    /// # Errors
    /// A redb failure.
    pub fn removal_mark(&self) -> Result<u64> {
        if let Some(pg) = self.pg() {
            return pg.removal_mark();
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            match tx.open_table(META_TABLE) {
                Ok(t) => Ok(t.get(META_KEY_REMOVALS)?.map_or(0, |v| v.value())),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
                Err(e) => Err(e.into()),
            }
        })
    }

    /// The removals numbered `from` and later, oldest first.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn removals_since(&self, from: u64) -> Result<Vec<Removal>> {
        if let Some(pg) = self.pg() {
            return pg.removals_since(from);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = match tx.open_table(REMOVALS) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut out = Vec::new();
            for e in t.range(from..)? {
                out.push(dec(e?.1.value())?);
            }
            Ok(out)
        })
    }
}

impl Writer<'_> {
    /// Records a removal.
    ///
    /// # Errors
    /// A redb failure.
    pub fn record_removal(&mut self, r: &Removal) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.record_removal(r);
        }
        let seq = self.next(META_KEY_REMOVALS)?;
        self.redb()?
            .open_table(REMOVALS)?
            .insert(seq, enc(r).as_slice())?;
        Ok(())
    }
}
