//! The format version record and the migration steps between versions.
//!
//! Each step is documented in `migrations/NNNN-*.md`. A file newer than [`FORMAT_VERSION`] is
//! refused before anything is written to it.

use super::nodes::{Prepared, put_in};
use super::{META_TABLE, NODES, PAYLOADS, Result, Store, StoreError, TYPE_INDEX};
use crate::cas::bootstrap::{self, META};
use crate::cas::hash;
use redb::{ReadableTable, WriteTransaction};

/// The format this binary reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// One migration: from `from` to `from + 1`.
pub struct Migration {
    /// The version it upgrades.
    pub from: u64,
    /// What it does (mirrors its document in `migrations/`).
    pub summary: &'static str,
    /// The step, inside the upgrade's write transaction.
    pub apply: fn(&WriteTransaction, u64) -> Result<()>,
}

/// Every migration, in order. Version 0 is a file with no format record: a store whose
/// creation was interrupted before its first commit, or an empty redb file.
pub static MIGRATIONS: &[Migration] = &[Migration {
    from: 0,
    summary: "create the tables and write the bootstrap schemas (0001-initial.md)",
    apply: initial,
}];

fn initial(tx: &WriteTransaction, now_ms: u64) -> Result<()> {
    tx.open_table(NODES)?;
    tx.open_table(PAYLOADS)?;
    tx.open_table(TYPE_INDEX)?;
    tx.open_table(META_TABLE)?;
    super::threads::create_tables(tx)?;
    super::leases::create_tables(tx)?;
    super::lifecycle::create_tables(tx)?;
    super::removals::create_tables(tx)?;
    super::gc::create_tables(tx)?;
    let nodes: Vec<Prepared> = bootstrap::builtins()
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let self_typed = i == 0;
            Prepared {
                id: b.id,
                type_id: if self_typed { b.id } else { META },
                digest: hash::digest(META, self_typed, &b.cbor),
                payload_cbor: b.cbor.clone(),
                refs: Vec::new(),
            }
        })
        .collect();
    put_in(tx, nodes.iter().map(|p| (p, now_ms)))?;
    Ok(())
}

/// The stored format version, or `None` for a file without one.
pub(crate) fn read_version(store: &Store) -> Result<Option<u64>> {
    let tx = store.begin_read()?;
    let t = match tx.open_table(META_TABLE) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let v = t.get("format_version")?.map(|v| v.value());
    // Builds before the first release wrote version 1 with payloads inside `nodes`.
    if v == Some(1)
        && let Err(redb::TableError::TableDoesNotExist(_)) = tx.open_table(PAYLOADS)
    {
        return Err(StoreError::PreRelease);
    }
    Ok(v)
}

fn version_in(tx: &WriteTransaction) -> Result<u64> {
    let t = tx.open_table(META_TABLE)?;
    Ok(t.get("format_version")?.map_or(0, |v| v.value()))
}

/// Brings the file to [`FORMAT_VERSION`], refusing newer files untouched.
pub(crate) fn check_and_migrate(store: &Store) -> Result<()> {
    let too_new = |v| StoreError::TooNew {
        path: store.path().to_path_buf(),
        found: v,
        supported: FORMAT_VERSION,
    };
    match read_version(store)? {
        Some(v) if v == FORMAT_VERSION => return Ok(()),
        Some(v) if v > FORMAT_VERSION => return Err(too_new(v)),
        _ => {}
    }
    let tx = store.begin_write()?;
    // Another process may have migrated meanwhile: decide again inside the transaction.
    let mut v = version_in(&tx)?;
    if v > FORMAT_VERSION {
        tx.abort()?;
        return Err(too_new(v));
    }
    if v == FORMAT_VERSION {
        tx.abort()?;
        return Ok(());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    while v < FORMAT_VERSION {
        let m = MIGRATIONS
            .iter()
            .find(|m| m.from == v)
            .expect("a migration for every version");
        (m.apply)(&tx, now)?;
        v += 1;
    }
    tx.open_table(META_TABLE)?
        .insert("format_version", FORMAT_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// Sets the format version (tests use it to make a file from the future).
#[doc(hidden)]
pub fn force_version(store: &Store, v: u64) -> Result<()> {
    let tx = store.begin_write()?;
    tx.open_table(META_TABLE)?.insert("format_version", v)?;
    tx.commit()?;
    Ok(())
}
