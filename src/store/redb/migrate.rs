//! The format version record and the migration steps between versions.
//!
//! Each step is documented in `migrations/NNNN-*.md`. A file newer than [`FORMAT_VERSION`] is
//! refused before anything is written to it.

use super::Redb;
use super::nodes::{NO_SEQ, encode_link_into, put_in};
use super::{IDS, LINKS, META_TABLE, NODES_V1, PAYLOADS, TYPE_INDEX};
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
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::redb::of;
    use crate::store::{PutOutcome, ThreadRecord};
    use crate::workflow::ThreadId;
    use crate::workflow::nodes::{START_NODE, STEP_NODE, TEXT};
    use redb::ReadableTableMetadata;

    /// Rewrites a current store as format 1 wrote it: one `nodes` record per id.
    fn downgrade(s: &Store) {
        let tx = of(s).begin_write().expect("tx");
        {
            let ids = tx.open_table(IDS).expect("ids");
            let links = tx.open_table(LINKS).expect("links");
            let mut old = tx.open_table(NODES_V1).expect("nodes");
            for e in ids.iter().expect("iter") {
                let (k, v) = e.expect("entry");
                let rec = links.get(v.value()).expect("get").expect("record");
                let l = super::super::nodes::Link::read(rec.value()).expect("link");
                let mut b = l.digest.to_vec();
                b.extend_from_slice(&l.timestamp.to_le_bytes());
                b.extend_from_slice(&l.type_id.0.to_le_bytes());
                b.extend_from_slice(&v.value().to_le_bytes());
                b.extend(l.ref_ids().flat_map(|r| r.0.to_le_bytes()));
                old.insert(k.value(), b.as_slice()).expect("insert");
            }
            tx.open_table(META_TABLE)
                .expect("meta")
                .insert("format_version", 1)
                .expect("version");
        }
        tx.delete_table(IDS).expect("delete");
        tx.delete_table(LINKS).expect("delete");
        tx.commit().expect("commit");
    }

    #[test]
    fn a_format_1_store_is_migrated_with_every_node_reference_and_walk_intact() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("uwf.redb");
        let s = Store::open(&path).expect("open");
        let text = |s: &Store, t: &str| {
            s.prepare(TEXT, &crate::cas::Value::str(t), true)
                .expect("text")
        };
        let out = text(&s, "an output");
        let det = text(&s, "a detail");
        let v = |j: &str| crate::cas::Value::from_json_str(j).expect("json");
        let start = s
            .prepare(
                START_NODE,
                &v(r#"{"workflow":"95ST8MZ0QTKP9","prompt":"p","cwd":"/"}"#),
                true,
            )
            .expect("start");
        let step = s
            .prepare(
                STEP_NODE,
                &v(&format!(
                    r#"{{"start":"{}","prev":null,"role":"r","output":"{}","detail":"{}","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/","assembledPrompt":null}}"#,
                    start.id, out.id, det.id
                )),
                true,
            )
            .expect("step");
        s.put(&[out.clone(), det.clone(), start.clone()], 5)
            .expect("put");
        s.put(std::slice::from_ref(&step), 6).expect("put");
        let tid = ThreadId::new(6, [7; 10]);
        s.write(|w| {
            w.set_thread(
                &tid,
                &ThreadRecord {
                    head: step.id,
                    workflow: None,
                    updated_ms: 6,
                },
            )
        })
        .expect("thread");
        let mut before = Vec::new();
        s.for_each_node::<StoreError>(|n| {
            before.push(n);
            Ok(())
        })
        .expect("nodes");
        let walked = |s: &Store| {
            let mut seen = Vec::new();
            s.walk(step.id, |e| seen.push(e)).expect("walk");
            seen
        };
        let walk_before = walked(&s);
        assert_eq!(
            walk_before.len(),
            5,
            "step, start, output, detail, and the workflow (missing)"
        );
        downgrade(&s);
        drop(s);

        let s = Store::open(&path).expect("migrated");
        assert_eq!(read_version(of(&s)).expect("version"), Some(FORMAT_VERSION));
        let tx = of(&s).begin_read().expect("tx");
        assert!(matches!(
            tx.open_table(NODES_V1),
            Err(redb::TableError::TableDoesNotExist(_))
        ));
        assert_eq!(
            tx.open_table(IDS).expect("ids").len().expect("len"),
            before.len() as u64
        );
        drop(tx);
        let mut after = Vec::new();
        s.for_each_node::<StoreError>(|n| {
            after.push(n);
            Ok(())
        })
        .expect("nodes");
        assert_eq!(after, before);
        assert_eq!(walked(&s), walk_before);
        assert_eq!(
            s.refs(step.id).expect("refs"),
            Some(vec![start.id, det.id, out.id]),
            "the references, in canonical order"
        );
        assert!(s.verify(&|_, _| {}).expect("verify").is_clean());
        assert_eq!(s.thread(&tid).expect("thread").expect("kept").head, step.id);
        // Put again: the same nodes exist, a new one is written after them.
        assert_eq!(
            s.put(&[out.clone(), text(&s, "new")], 9).expect("put"),
            [PutOutcome::Existed, PutOutcome::Inserted]
        );
    }
}
