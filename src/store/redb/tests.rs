//! Tests of the file's own node records: walks in write order, a payload record gone, stale
//! reference hints.

use super::Redb;
use super::nodes::{LINK_HEAD, NO_SEQ};
use super::read::RedbRead;
use super::tables::{LINKS, PAYLOADS};
use crate::cas::{NodeId, Value};
use crate::store::Store;
use crate::store::error::{Result, StoreError};
use crate::store::node::{Prepared, StoredNode};
use redb::ReadableTable;
use std::ops::ControlFlow;

fn texts(s: &Store, from: usize, n: usize) -> Vec<Prepared> {
    let text = crate::model::types::TEXT;
    (from..from + n)
        .map(|i| {
            s.prepare(text, &Value::str(format!("text {i}")), true)
                .expect("prepare")
        })
        .collect()
}

fn in_windows(s: &Store, window: usize) -> Result<Vec<StoredNode>> {
    let r = of(s);
    let mut seen = Vec::new();
    r.guard(|| {
        RedbRead::new(r.begin_read()?).for_each_in_windows(window, 0, u64::MAX, &mut |n| {
            seen.push(n);
            ControlFlow::Continue(())
        })
    })?;
    Ok(seen)
}

#[test]
fn write_order_walk_gives_every_node_once_in_seq_order_whatever_the_window() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Store::open(&dir.path().join("uwf.redb")).expect("store");
    // Batches of several sizes, so payload records straddle the windows.
    for (i, n) in [(0, 5), (5, 40), (45, 1), (46, 300)] {
        s.put(&texts(&s, i, n), 7).expect("put");
    }
    let mut by_id = Vec::new();
    s.for_each_node::<StoreError>(|n| {
        by_id.push(n);
        Ok(())
    })
    .expect("walk");
    by_id.sort_by_key(|n| n.seq);
    assert!(by_id.len() > 346, "the bootstrap schemas and the texts");
    for window in [1, 3, 64, 1 << 19] {
        assert_eq!(
            in_windows(&s, window).expect("walk"),
            by_id,
            "window {window}"
        );
    }
}

#[test]
fn write_order_walk_reports_a_node_whose_payload_is_gone() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Store::open(&dir.path().join("uwf.redb")).expect("store");
    let batch = texts(&s, 0, 20);
    s.put(&batch, 7).expect("put");
    let victim = s.get(batch[10].id).expect("get").expect("stored");
    // Remove the payload record holding the victim (and its neighbours).
    let tx = of(&s).begin_write().expect("tx");
    {
        let mut p = tx.open_table(PAYLOADS).expect("payloads");
        let key = p
            .range(..=victim.seq)
            .expect("range")
            .next_back()
            .expect("a record")
            .expect("read")
            .0
            .value();
        p.remove(key).expect("remove");
    }
    tx.commit().expect("commit");
    for window in [3, 8192] {
        match in_windows(&s, window) {
            Err(StoreError::Damaged { what, .. }) if what.starts_with("corrupt record") => {}
            other => panic!("window {window}: {:?}", other.map(|v| v.len())),
        }
    }
}

/// The sequence number a reference keeps is a hint: a wrong one (a node collected and put
/// again has another) costs a lookup by id, and the walk, the references and verify are
/// as they were.
#[test]
fn a_stale_reference_seq_is_only_a_hint() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Store::open(&dir.path().join("uwf.redb")).expect("store");
    let v = |j: &str| Value::from_json_str(j).expect("json");
    let out = texts(&s, 0, 3);
    s.put(&out, 7).expect("put");
    let start = s
        .prepare(
            crate::model::types::START_NODE,
            &v(r#"{"workflow":"95ST8MZ0QTKP9","prompt":"p","cwd":"/"}"#),
            true,
        )
        .expect("start");
    let step = s
        .prepare(
            crate::model::types::STEP_NODE,
            &v(&format!(
                r#"{{"start":"{}","prev":null,"role":"r","output":"{}","detail":"{}","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/","assembledPrompt":null}}"#,
                start.id, out[1].id, out[0].id
            )),
            true,
        )
        .expect("step");
    s.put(&[start.clone(), step.clone()], 8).expect("put");
    let walk = |s: &Store| {
        let mut seen = Vec::new();
        let st = s.walk(step.id, |e| seen.push(e)).expect("walk");
        (seen, st)
    };
    let before = walk(&s);
    assert_eq!(before.1.visited, 4);
    let seq_of = |id: NodeId| s.get(id).expect("get").expect("stored").seq;
    let step_seq = seq_of(step.id);
    // Point the step's references at other records (another node's, and none at all).
    for hints in [
        [seq_of(out[0].id), seq_of(out[2].id)],
        [1 << 40, NO_SEQ - 1],
    ] {
        let tx = of(&s).begin_write().expect("tx");
        {
            let mut links = tx.open_table(LINKS).expect("links");
            let mut rec = links
                .get(step_seq)
                .expect("get")
                .expect("rec")
                .value()
                .to_vec();
            for (i, h) in hints.iter().enumerate() {
                let at = LINK_HEAD + 16 * i + 8;
                rec[at..at + 8].copy_from_slice(&h.to_le_bytes());
            }
            links.insert(step_seq, rec.as_slice()).expect("insert");
        }
        tx.commit().expect("commit");
        assert_eq!(walk(&s), before, "hints {hints:?}");
        assert_eq!(
            s.refs(step.id).expect("refs"),
            Some(vec![start.id, out[0].id, out[1].id])
        );
        assert!(s.verify(&|_, _| {}).expect("verify").is_clean());
    }
}

/// The redb file of a store opened on one (tests of the file's own records).
pub(crate) fn of(s: &Store) -> &Redb {
    s.backend_any()
        .downcast_ref()
        .expect("a store on a redb file")
}
