//! Store behaviour the batch write path and the reindex scanner must keep.

use uwf::cas::bootstrap::ids;
use uwf::cas::{NodeId, Value};
use uwf::store::{PutOutcome, Store, StoreError};

fn id(s: &str) -> NodeId {
    NodeId::parse(s).unwrap()
}

fn text(s: &Store, t: &str) -> uwf::store::Prepared {
    s.prepare(id(ids::TEXT), &Value::str(t), true).unwrap()
}

fn step(s: &Store, start: NodeId, prev: Option<NodeId>, out: NodeId) -> uwf::store::Prepared {
    let prev = prev.map_or("null".to_string(), |p| format!("\"{p}\""));
    let v = Value::from_json_str(&format!(
        r#"{{"start":"{start}","prev":{prev},"role":"r","output":"{out}","detail":"{out}","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/"}}"#
    ))
    .unwrap();
    s.prepare(id(ids::STEP_NODE), &v, true).unwrap()
}

/// A workflow and a thread's StartNode naming it, prepared.
fn workflow_and_start(s: &Store) -> (uwf::store::Prepared, uwf::store::Prepared) {
    let wf = s
        .prepare(
            id(ids::WORKFLOW),
            &Value::from_json_str(r#"{"name":"w","description":"d","roles":{},"graph":{}}"#)
                .unwrap(),
            true,
        )
        .unwrap();
    let start = s
        .prepare(
            id(ids::START_NODE),
            &Value::from_json_str(&format!(
                r#"{{"workflow":"{}","prompt":"p","cwd":"/"}}"#,
                wf.id
            ))
            .unwrap(),
            true,
        )
        .unwrap();
    (wf, start)
}

/// Per type, its ids in write order; per node, its references.
type Derived = (Vec<Vec<NodeId>>, Vec<(NodeId, Option<Vec<NodeId>>)>);

/// Everything derived, as the public API shows it.
fn derived(s: &Store) -> Derived {
    let types = [ids::TEXT, ids::STEP_NODE, ids::START_NODE, "CTS5P6RD8HMCS"];
    let lists = types
        .iter()
        .map(|t| s.list_by_type(id(t)).unwrap())
        .collect();
    let mut all = Vec::new();
    s.for_each_node::<StoreError>(|n| {
        all.push((n.id, s.refs(n.id).unwrap()));
        Ok(())
    })
    .unwrap();
    (lists, all)
}

#[test]
fn batch_put_keeps_write_order_and_reports_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let old = text(&s, "already there");
    assert_eq!(
        s.put(std::slice::from_ref(&old), 5).unwrap(),
        [PutOutcome::Inserted]
    );
    let stored = s.get(old.id).unwrap().unwrap();
    let texts: Vec<_> = (0..50).map(|i| text(&s, &format!("t{i}"))).collect();
    let mut batch = texts.clone();
    batch.insert(10, old.clone());
    batch.push(texts[3].clone());
    let out = s.put(&batch, 7).unwrap();
    assert_eq!(out.iter().filter(|o| **o == PutOutcome::Existed).count(), 2);
    assert_eq!(out[10], PutOutcome::Existed);
    assert_eq!(out[51], PutOutcome::Existed);
    let mut want = vec![old.id];
    want.extend(texts.iter().map(|p| p.id));
    assert_eq!(s.list_by_type(id(ids::TEXT)).unwrap(), want);
    assert_eq!(
        s.get(old.id).unwrap().unwrap(),
        stored,
        "an existing record is left as it was"
    );
    assert_eq!(s.get(texts[0].id).unwrap().unwrap().timestamp, 7);
}

#[test]
fn collision_inside_a_batch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let a = text(&s, "a");
    let mut forged = text(&s, "b");
    forged.id = a.id;
    let before = s.node_count().unwrap();
    let e = s.put(&[text(&s, "c"), a.clone(), forged], 1).unwrap_err();
    assert!(matches!(e, StoreError::HashCollision(i) if i == a.id));
    assert_eq!(s.node_count().unwrap(), before);
}

#[test]
fn reindex_rebuilds_what_puts_maintain() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let (wf, start) = workflow_and_start(&s);
    s.put(&[wf.clone(), start.clone()], 1).unwrap();
    let mut prev = None;
    for b in 0..3 {
        let mut batch = Vec::new();
        for i in 0..20 {
            let out = text(&s, &format!("output {b} {i}"));
            let st = step(&s, start.id, prev, out.id);
            prev = Some(st.id);
            batch.push(out);
            batch.push(st);
        }
        s.put(&batch, 2 + b).unwrap();
    }
    let head = s.refs(prev.unwrap()).unwrap().unwrap();
    assert_eq!(head.len(), 4, "start, prev, output, detail");
    let incremental = derived(&s);
    assert_eq!(s.reindex(&|_, _| {}).unwrap(), s.node_count().unwrap());
    assert_eq!(derived(&s), incremental);
    assert!(s.verify(&|_, _| {}).unwrap().is_clean());
    let mut visited = 0;
    s.walk(prev.unwrap(), |_| visited += 1).unwrap();
    assert_eq!(visited, 3 * 20 * 2 + 2, "steps, outputs, start, workflow");
}

/// A put of thousands of new nodes writes its payload records beside its other records: every
/// node reads back whole, with its references and its place in the type index, and a
/// collision anywhere in it still writes nothing.
#[test]
fn a_large_put_writes_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let (wf, start) = workflow_and_start(&s);
    let old = text(&s, "already there");
    s.put(&[wf.clone(), start.clone(), old.clone()], 1).unwrap();
    let mut batch = Vec::new();
    let mut prev = None;
    for i in 0..3_000 {
        // Payloads of different lengths, some longer than a shared record holds.
        let body =
            format!("output {i} ").repeat(1 + (i * 37) % 400 + 1_700 * usize::from(i % 500 == 0));
        let out = text(&s, &body);
        let st = step(&s, start.id, prev, out.id);
        prev = Some(st.id);
        batch.push(out);
        batch.push(st);
    }
    batch.insert(1_000, old.clone());
    let out = s.put(&batch, 2).unwrap();
    assert_eq!(out[1_000], PutOutcome::Existed);
    assert_eq!(
        out.iter().filter(|o| **o == PutOutcome::Inserted).count(),
        6_000
    );
    for p in &batch {
        let n = s.get(p.id).unwrap().unwrap();
        assert_eq!(n.payload_cbor, p.payload_cbor, "{}", p.id);
        assert_eq!(n.type_id, p.type_id);
    }
    let mut texts = vec![old.id];
    texts.extend(
        batch
            .iter()
            .filter(|p| p.type_id == id(ids::TEXT) && p.id != old.id)
            .map(|p| p.id),
    );
    assert_eq!(s.list_by_type(id(ids::TEXT)).unwrap(), texts);
    let head = prev.unwrap();
    assert_eq!(
        s.refs(head).unwrap().unwrap().len(),
        4,
        "start, prev, output, detail"
    );
    let mut visited = 0;
    s.walk(head, |_| visited += 1).unwrap();
    assert_eq!(visited, 6_000 + 2, "steps, outputs, start, workflow");
    assert!(s.verify(&|_, _| {}).unwrap().is_clean());
    let incremental = derived(&s);
    assert_eq!(s.reindex(&|_, _| {}).unwrap(), s.node_count().unwrap());
    assert_eq!(derived(&s), incremental);

    let before = s.node_count().unwrap();
    let mut more: Vec<_> = (0..5_000).map(|i| text(&s, &format!("more {i}"))).collect();
    let mut forged = text(&s, "forged");
    forged.id = batch[0].id;
    more.push(forged);
    let e = s.put(&more, 3).unwrap_err();
    assert!(matches!(e, StoreError::HashCollision(i) if i == batch[0].id));
    assert_eq!(s.node_count().unwrap(), before);
    assert!(s.get(more[0].id).unwrap().is_none());
}

/// The references kept in a `nodes` record are derived: `verify` recomputes them from the
/// payload and reports a difference, and `reindex` rewrites them.
#[test]
fn verify_reports_and_reindex_repairs_stored_references() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("uwf.redb");
    let s = Store::open(&path).unwrap();
    let start = s
        .prepare(
            id(ids::START_NODE),
            &Value::from_json_str(r#"{"workflow":"95ST8MZ0QTKP9","prompt":"p","cwd":"/"}"#)
                .unwrap(),
            true,
        )
        .unwrap();
    let out = text(&s, "out");
    let st = step(&s, start.id, None, out.id);
    s.put(&[start.clone(), out.clone(), st.clone()], 1).unwrap();
    let want = s.refs(st.id).unwrap().unwrap();
    drop(s);
    {
        // Drop the step's stored references, as a damaged derived part would.
        let mut b = redb::Database::builder();
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        let db = b.create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        {
            use redb::ReadableTable;
            let ids: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("ids");
            let seq = tx
                .open_table(ids)
                .unwrap()
                .get(st.id.0)
                .unwrap()
                .unwrap()
                .value();
            let def: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("links");
            let mut t = tx.open_table(def).unwrap();
            let rec = t.get(seq).unwrap().unwrap().value().to_vec();
            assert_eq!(rec.len(), 56 + 16 * want.len());
            t.insert(seq, &rec[..56]).unwrap();
        }
        tx.commit().unwrap();
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(s.refs(st.id).unwrap().unwrap(), []);
    let r = s.verify(&|_, _| {}).unwrap();
    assert_eq!(r.damage, [uwf::store::Damage::WrongRefs(st.id)]);
    s.reindex(&|_, _| {}).unwrap();
    assert_eq!(s.refs(st.id).unwrap().unwrap(), want);
    assert!(s.verify(&|_, _| {}).unwrap().is_clean());
    assert_eq!(s.get(st.id).unwrap().unwrap().payload_cbor, st.payload_cbor);
}
