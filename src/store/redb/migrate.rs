//! The format version record and the migration steps between versions.
//!
//! Each step is documented in `migrations/NNNN-*.md`. A file newer than [`FORMAT_VERSION`] is
//! refused before anything is written to it.

use super::file::Redb;
use super::nodes::{NO_SEQ, encode_link_into, put_in};
use super::tables::{IDS, LINKS, META_TABLE, NODES_V1, PAYLOADS, TYPE_INDEX};
use crate::cas::NodeId;
use crate::store::error::{Result, StoreError};
use crate::store::node::bootstrap_nodes;
use redb::{ReadableTable, WriteTransaction};

/// The format this binary reads and writes.
pub const FORMAT_VERSION: u64 = 2;

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
/// creation was interrupted before its first commit, or an empty redb file; it is brought
/// straight to the current format.
pub static MIGRATIONS: &[Migration] = &[
    Migration {
        from: 0,
        summary: "create the tables and write the bootstrap schemas (0001-initial.md)",
        apply: initial,
    },
    Migration {
        from: 1,
        summary: "split the `nodes` records into `ids` and `links` (0002-links.md)",
        apply: links_from_nodes,
    },
];

fn initial(tx: &WriteTransaction, now_ms: u64) -> Result<()> {
    tx.open_table(IDS)?;
    tx.open_table(LINKS)?;
    tx.open_table(PAYLOADS)?;
    tx.open_table(TYPE_INDEX)?;
    tx.open_table(META_TABLE)?;
    super::records::create_tables(tx)?;
    super::gc::create_tables(tx)?;
    let nodes = bootstrap_nodes();
    put_in(tx, nodes.iter().map(|p| (p, now_ms)))?;
    Ok(())
}

/// Format 1 kept one `nodes` record per id: digest(32) ‖ timestamp ‖ type ‖ seq (u64 LE each) ‖
/// referenced ids (u64 LE each). Format 2 keeps id → seq in `ids` and the rest, each reference
/// with its node's seq, in `links` under the seq.
fn links_from_nodes(tx: &WriteTransaction, _now_ms: u64) -> Result<()> {
    const HEAD: usize = 56;
    {
        let old = tx.open_table(NODES_V1)?;
        let mut ids = tx.open_table(IDS)?;
        let mut links = tx.open_table(LINKS)?;
        let u = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let mut buf = Vec::new();
        for e in old.iter()? {
            let (k, v) = e?;
            let (id, b) = (NodeId(k.value()), v.value());
            if b.len() < HEAD || !(b.len() - HEAD).is_multiple_of(8) {
                return Err(StoreError::Corrupt(id));
            }
            let seq = u(b, 48);
            let mut refs = Vec::new();
            for r in b[HEAD..].chunks_exact(8).map(|c| u(c, 0)) {
                let at = match old.get(r)? {
                    Some(t) if t.value().len() >= HEAD => u(t.value(), 48),
                    _ => NO_SEQ,
                };
                refs.push((NodeId(r), at));
            }
            encode_link_into(id, NodeId(u(b, 40)), u(b, 32), &b[..32], refs, &mut buf);
            ids.insert(id.0, seq)?;
            links.insert(seq, buf.as_slice())?;
        }
    }
    tx.delete_table(NODES_V1)?;
    Ok(())
}

/// The stored format version, or `None` for a file without one.
pub(crate) fn read_version(store: &Redb) -> Result<Option<u64>> {
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
pub(crate) fn check_and_migrate(store: &Redb) -> Result<()> {
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
    if v == 0 {
        initial(&tx, now)?;
        v = FORMAT_VERSION;
    }
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

#[cfg(test)]
#[path = "migrate_tests.rs"]
mod tests;
