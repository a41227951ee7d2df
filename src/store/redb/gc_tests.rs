//! Tests of garbage collection on the file: its tables, its takeover of a dead collection, the
//! sweep's payload records.

use super::*;
use crate::cas::Value;
use crate::model::ThreadId;
use crate::store::Store;
use crate::store::redb::tests::of;
use crate::store::{Prepared, ThreadRecord};
use redb::ReadableTableMetadata;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("dir");
    let s = Store::open(&dir.path().join("uwf.redb")).expect("store");
    (dir, s)
}

fn texts(s: &Store, tag: &str, n: usize) -> Vec<Prepared> {
    (0..n)
        .map(|i| {
            s.prepare(
                crate::model::types::TEXT,
                &Value::str(format!("{tag} {i}")),
                true,
            )
            .expect("prepare")
        })
        .collect()
}

fn owner() -> Lease {
    Lease {
        pid: std::process::id(),
        since_ms: 0,
        boot_id: String::new(),
        start_ticks: 0,
        expires_ms: None,
    }
}

fn gc(s: &Store, now_ms: u64, grace_ms: u64, dry_run: bool) -> GcReport {
    s.gc(&GcOptions {
        now_ms,
        grace_ms,
        dry_run,
        owner: owner(),
        owner_is_live: &|_| false,
        progress: &|_, _| {},
    })
    .expect("gc")
}

fn clean(s: &Store) {
    let r = s.verify(&|_, _| {}).expect("verify");
    assert!(r.is_clean(), "{:?}", r.damage);
}

/// A node of a type with references: a schema whose `items` are text references.
fn linker(s: &Store) -> NodeId {
    let schema =
        Value::from_json_str(r#"{"type":"array","items":{"type":"string","format":"ocas_ref"}}"#)
            .expect("json");
    let p = s.prepare_schema(&schema).expect("schema");
    s.put(std::slice::from_ref(&p), 1).expect("put");
    p.id
}

#[test]
fn collects_unreached_nodes_and_keeps_the_store_consistent() {
    let (_d, s) = store();
    let keep = texts(&s, "keep", 50);
    let drop = texts(&s, "drop", 300);
    // Interleaved, so payload records hold both.
    let mut all = Vec::new();
    for (i, d) in drop.iter().enumerate() {
        all.push(d.clone());
        if let Some(k) = keep.get(i) {
            all.push(k.clone());
        }
    }
    s.put(&all, 10).expect("put");
    let kept_ids: Vec<NodeId> = keep.iter().map(|p| p.id).collect();
    s.pin(&kept_ids, 10).expect("pin");
    let before = s.node_count().expect("count");
    let dry = gc(&s, 1000, 0, true);
    assert_eq!(dry.collected, 300);
    assert_eq!(s.node_count().expect("count"), before);
    let r = gc(&s, 1000, 0, false);
    assert_eq!(r.collected, 300, "{r:?}");
    assert_eq!(r.scanned, before);
    assert!(r.bytes > 0);
    assert_eq!(s.node_count().expect("count"), before - 300);
    for k in &keep {
        let n = s.get(k.id).expect("get").expect("kept");
        assert_eq!(n.payload_cbor, k.payload_cbor);
    }
    for d in &drop {
        assert!(s.get(d.id).expect("get").is_none());
    }
    clean(&s);
    assert_eq!(s.reindex(&|_, _| {}).expect("reindex"), before - 300);
    clean(&s);
    // A dropped node put again is a new node.
    s.put(&drop[..3], 2000).expect("put");
    assert!(s.get(drop[0].id).expect("get").is_some());
    clean(&s);
    let c = s.count().expect("count");
    assert_eq!(c.nodes, c.reachable + c.garbage);
    assert_eq!(c.garbage, 3);
}

#[test]
fn records_of_one_large_payload_and_whole_records_go() {
    let (_d, s) = store();
    let big: Vec<Prepared> = (0..3)
        .map(|i| {
            let v = Value::str(format!("{i}{}", "x".repeat(40_000)));
            s.prepare(crate::model::types::TEXT, &v, true)
                .expect("prepare")
        })
        .collect();
    let small = texts(&s, "s", 10);
    let keep = texts(&s, "k", 1);
    s.put(&big, 10).expect("put");
    s.put(&small, 10).expect("put");
    s.put(&keep, 10).expect("put");
    s.pin(&[big[1].id, keep[0].id], 10).expect("pin");
    let r = gc(&s, 1000, 0, false);
    assert_eq!(r.collected, 12);
    assert!(r.bytes > 80_000);
    assert!(s.get(big[1].id).expect("get").is_some());
    assert!(s.get(keep[0].id).expect("get").is_some());
    clean(&s);
    let tx = of(&s).begin_read().expect("tx");
    // The bootstrap record, the kept large payload's and the kept text's.
    assert_eq!(tx.open_table(PAYLOADS).expect("t").len().expect("len"), 3);
}

#[test]
fn grace_heads_history_registry_and_references() {
    let (_d, s) = store();
    let link = linker(&s);
    let t = texts(&s, "t", 4);
    s.put(&t, 10).expect("put");
    let list = |ids: &[NodeId]| Value::Array(ids.iter().map(|i| Value::str(i.to_wire())).collect());
    let head = s.prepare(link, &list(&[t[0].id]), true).expect("prepare");
    let young = s.prepare(link, &list(&[t[1].id]), true).expect("prepare");
    s.put(std::slice::from_ref(&head), 10).expect("put");
    s.put(std::slice::from_ref(&young), 900).expect("put");
    let th = ThreadId::parse("06H0AAKR0Y77DFRXGJMVWR0001").expect("id");
    s.write(|w| {
        w.set_thread(
            &th,
            &ThreadRecord {
                head: head.id,
                workflow: None,
                updated_ms: 10,
            },
        )?;
        w.registry_set("wf", t[2].id, 10)
    })
    .expect("write");
    // Grace 200 at 1000: `young` (900) is kept with what it references.
    let r = gc(&s, 1000, 200, false);
    assert_eq!(r.collected, 1, "{r:?}");
    assert!(s.get(t[3].id).expect("get").is_none());
    for id in [head.id, young.id, t[0].id, t[1].id, t[2].id] {
        assert!(s.has(id).expect("has"), "{id}");
    }
    clean(&s);
}

#[test]
fn a_node_put_again_while_gc_runs_is_kept() {
    let (_d, s) = store();
    let t = texts(&s, "x", 3);
    s.put(&t, 10).expect("put");
    of(&s).gc_begin(&owner(), &|_| false).expect("begin");
    s.put(&t[..1], 20).expect("put again");
    let r = of(&s)
        .gc_run(&GcOptions {
            now_ms: 1000,
            grace_ms: 0,
            dry_run: false,
            owner: owner(),
            owner_is_live: &|_| false,
            progress: &|_, _| {},
        })
        .expect("run");
    of(&s).gc_end(&owner()).expect("end");
    assert_eq!(r.collected, 2);
    assert!(s.has(t[0].id).expect("has"));
    // The marks are gone: a put again no longer records anything.
    s.put(&t[..1], 30).expect("put");
    let tx = of(&s).begin_read().expect("tx");
    assert_eq!(
        tx.open_table(GC_TOUCHED)
            .expect("table")
            .len()
            .expect("len"),
        0
    );
    assert!(
        tx.open_table(META_TABLE)
            .expect("meta")
            .get(GC_RUNNING)
            .expect("get")
            .is_none()
    );
}

#[test]
fn a_live_collection_refuses_another_and_a_dead_one_is_taken_over() {
    let (_d, s) = store();
    let other = Lease {
        pid: 1,
        since_ms: 0,
        boot_id: String::new(),
        start_ticks: 0,
        expires_ms: None,
    };
    of(&s).gc_begin(&other, &|_| false).expect("begin");
    let e = s
        .gc(&GcOptions {
            now_ms: 1000,
            grace_ms: 0,
            dry_run: false,
            owner: owner(),
            owner_is_live: &|_| true,
            progress: &|_, _| {},
        })
        .expect_err("refused");
    assert!(matches!(e, StoreError::GcRunning { pid: 1 }), "{e:?}");
    gc(&s, 1000, 0, false);
    let tx = of(&s).begin_read().expect("tx");
    assert!(
        tx.open_table(GC_OWNER)
            .expect("t")
            .get("owner")
            .expect("g")
            .is_none()
    );
}

#[test]
fn head_move_check_finds_what_is_missing() {
    let (_d, s) = store();
    let link = linker(&s);
    let t = texts(&s, "m", 2);
    s.put(&t[..1], 10).expect("put");
    let v = Value::Array(t.iter().map(|p| Value::str(p.id.to_wire())).collect());
    let n = s.prepare(link, &v, true).expect("prepare");
    s.put(std::slice::from_ref(&n), 10).expect("put");
    let missing = s.write(|w| w.first_missing(n.id, &[], &[])).expect("check");
    assert_eq!(missing, Some(t[1].id));
    let missing = s
        .write(|w| w.first_missing(n.id, &[t[1].id], &[]))
        .expect("check");
    assert_eq!(missing, Some(t[1].id), "a stop node is checked");
    s.put(&t[1..], 10).expect("put");
    assert_eq!(
        s.write(|w| w.first_missing(n.id, &[], &[])).expect("check"),
        None
    );
}
