//! Tests of the format migrations: a file of format 1 migrated to 2 keeps every node.
use super::*;
use crate::model::ThreadId;
use crate::model::types::{START_NODE, STEP_NODE, TEXT};
use crate::store::Store;
use crate::store::redb::tests::of;
use crate::store::{PutOutcome, ThreadRecord};
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
            let l = crate::store::redb::nodes::Link::read(rec.value()).expect("link");
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
