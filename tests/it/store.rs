//! The store through the library and through concurrent, killed processes.

use crate::common::{TestEnv, json, on_postgres};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use uwf::cas::bootstrap::{self, META};
use uwf::cas::{NodeId, Value};
use uwf::store::{Store, WalkEvent};

const TEXT: &str = "7VQ43ZSJTEWA7";
const START: &str = "44P8EP6N3NXZ5";
const STEP: &str = "108DB063KRQWW";

pub(crate) fn id(s: &str) -> NodeId {
    NodeId::parse(s).unwrap()
}

fn v(s: &str) -> Value {
    Value::from_json_str(s).unwrap()
}

/// Writes a thread-like chain: a StartNode, then steps whose prev, output and detail are refs.
pub(crate) fn write_chain(s: &Store, steps: usize, tag: &str) -> Vec<NodeId> {
    let wf = s
        .prepare(id(TEXT), &Value::str(format!("workflow {tag}")), true)
        .unwrap();
    s.put(std::slice::from_ref(&wf), 1).unwrap();
    let start = s
        .prepare(
            id(START),
            &v(&format!(
                r#"{{"workflow":"{}","prompt":"p {tag}","cwd":"/"}}"#,
                wf.id
            )),
            true,
        )
        .unwrap();
    s.put(std::slice::from_ref(&start), 2).unwrap();
    let mut ids = vec![start.id];
    let mut prev = "null".to_string();
    for i in 0..steps {
        let out = s
            .prepare(id(TEXT), &Value::str(format!("output {tag} {i}")), true)
            .unwrap();
        let step = s
            .prepare(
                id(STEP),
                &v(&format!(
                    r#"{{"start":"{}","prev":{prev},"role":"r{}","output":"{}","detail":"{}","agent":"a","startedAtMs":{i},"completedAtMs":{},"cwd":"/"}}"#,
                    start.id, i % 3, out.id, out.id, i + 1
                )),
                true,
            )
            .unwrap();
        prev = format!("\"{}\"", step.id);
        ids.push(step.id);
        s.put(&[out, step], 10 + i as u64).unwrap();
    }
    ids
}

/// Every derived table as plain data: each type's ids in order, and each node's refs.
fn derived(s: &Store) -> (BTreeMap<NodeId, Vec<NodeId>>, BTreeMap<NodeId, Vec<NodeId>>) {
    let mut types = BTreeMap::new();
    let mut refs = BTreeMap::new();
    s.for_each_node::<uwf::store::StoreError>(|n| {
        types.entry(n.type_id).or_insert_with(Vec::new);
        refs.insert(n.id, s.refs(n.id)?.expect("every node has a refs entry"));
        Ok(())
    })
    .unwrap();
    for (t, list) in types.iter_mut() {
        *list = s.list_by_type(*t).unwrap();
    }
    (types, refs)
}

#[test]
fn incremental_index_equals_reindex() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let chain = write_chain(&s, 50, "a");
    write_chain(&s, 20, "b");
    let schema = s.prepare_schema(&v(r#"{"type":"object","properties":{"r":{"type":"array","items":{"type":"string","format":"ocas_ref"}}}}"#)).unwrap();
    s.put(std::slice::from_ref(&schema), 3).unwrap();
    let multi = s
        .prepare(
            schema.id,
            &v(&format!(r#"{{"r":["{}","{}"]}}"#, chain[1], chain[2])),
            true,
        )
        .unwrap();
    s.put(std::slice::from_ref(&multi), 4).unwrap();

    let before = derived(&s);
    assert_eq!(before.1[&multi.id], vec![chain[1], chain[2]]);
    assert_eq!(
        before.0[&META][0], META,
        "the meta-schema is the first instance of itself"
    );
    let n = s.reindex(&|_, _| {}).unwrap();
    assert_eq!(n, s.node_count().unwrap());
    let after = derived(&s);
    assert_eq!(before, after);
    assert!(s.verify(&|_, _| {}).unwrap().is_clean());
}

#[test]
fn walk_is_breadth_first_root_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let chain = write_chain(&s, 30, "w");
    let mut seen = Vec::new();
    let stats = s
        .walk(*chain.last().unwrap(), |e| match e {
            WalkEvent::Node(n) => seen.push(n),
            WalkEvent::Missing(n) => panic!("missing {n}"),
        })
        .unwrap();
    assert_eq!(seen[0], *chain.last().unwrap());
    // 30 steps, 30 outputs, the start and the workflow text.
    assert_eq!(stats.visited, 62);
    assert_eq!(
        seen.len(),
        seen.iter().collect::<HashSet<_>>().len(),
        "each node once"
    );
    // Breadth-first: the previous step comes right after the root (prev is the first ref).
    assert_eq!(seen[1], chain[chain.len() - 2]);
}

#[test]
fn hash_collision_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let p = s.prepare(id(TEXT), &Value::str("a"), true).unwrap();
    s.put(std::slice::from_ref(&p), 1).unwrap();
    // The same id with other bytes: what an XXH64 collision would look like.
    let mut forged = s.prepare(id(TEXT), &Value::str("b"), true).unwrap();
    forged.id = p.id;
    let e = s.put(&[forged], 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "hash collision: node {} exists with different content",
            p.id
        )
    );
    // A second put of the real node is a no-op keeping the first timestamp.
    s.put(std::slice::from_ref(&p), 99).unwrap();
    assert_eq!(s.get(p.id).unwrap().unwrap().timestamp, 1);
}

/// A stored schema whose pattern the ref plan cannot compile (registration refuses it; an
/// older store could hold one): its nodes' references are never silently taken as none.
#[test]
fn unusable_pattern_is_reported_never_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let schema = v(r#"{"patternProperties":{"(":{"type":"string","format":"ocas_ref"}}}"#);
    let sp = uwf::store::prepare_unchecked(META, &schema);
    let t = sp.id;
    let node = uwf::store::prepare_unchecked(t, &v(r#"{"(":"95ST8MZ0QTKP9"}"#));
    s.put(&[sp, node], 1).unwrap();
    let e = s
        .prepare(t, &v(r#"{"x":"95ST8MZ0QTKP9"}"#), false)
        .unwrap_err();
    assert!(
        e.to_string().contains(r#"patternProperties pattern "(""#),
        "{e}"
    );
    let report = s.verify(&|_, _| {}).unwrap();
    assert!(
        report
            .damage
            .iter()
            .any(|d| matches!(d, uwf::store::Damage::BadSchema { type_id, .. } if *type_id == t)),
        "{:?}",
        report.damage
    );
    let e = s.reindex(&|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("patternProperties"), "{e}");
}

#[test]
fn bootstrap_writes_the_reference_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let metas = s.list_by_type(META).unwrap();
    for b in bootstrap::builtins() {
        // The adapters' schemas come when first needed.
        if b.on_first_use {
            assert!(!metas.contains(&b.id), "{} {}", b.name, b.id);
            assert!(s.get(b.id).unwrap().is_none(), "{} {}", b.name, b.id);
            continue;
        }
        assert!(metas.contains(&b.id), "{} {}", b.name, b.id);
        let n = s.get(b.id).unwrap().unwrap();
        assert_eq!(
            n.payload().unwrap().to_json().len(),
            b.payload.to_json().len()
        );
    }
    assert_eq!(s.get(META).unwrap().unwrap().type_id, META);
    // Opening again does not write the bootstrap twice.
    let count = s.node_count().unwrap();
    drop(s);
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    assert_eq!(s.node_count().unwrap(), count);
}

/// 8 processes at once, each committing one node per transaction, 1,040 nodes in all.
#[test]
fn concurrent_processes_lose_nothing() {
    let env = TestEnv::new();
    let lanes = 8;
    let per_lane = 130;
    let children: Vec<_> = (0..lanes)
        .map(|lane| {
            let lines: String = (0..per_lane)
                .map(|i| format!("\"lane {lane} node {i}\"\n"))
                .collect();
            let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("uwf"));
            c.env("UWF_HOME", env.root())
                .envs(env.store_url.iter().map(|u| ("UWF_STORE", u)))
                .args(["cas", "put", TEXT, "-", "--jsonl", "--commit-every", "1"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = c.spawn().unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(lines.as_bytes())
                .unwrap();
            child
        })
        .collect();
    // And single-node processes racing them.
    let singles: Vec<_> = (0..8)
        .map(|i| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("uwf"))
                .env("UWF_HOME", env.root())
                .envs(env.store_url.iter().map(|u| ("UWF_STORE", u)))
                .args(["cas", "put-text", &format!("single {i}")])
                .output()
        })
        .collect();
    let mut ids = HashSet::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for l in String::from_utf8(out.stdout).unwrap().lines() {
            ids.insert(json(l).get("hash").unwrap().as_str().unwrap().to_string());
        }
    }
    for s in singles {
        let out = s.unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ids.insert(
            json(&String::from_utf8(out.stdout).unwrap())
                .get("hash")
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(ids.len(), lanes * per_lane + 8);
    let s = env.store();
    for i in &ids {
        assert!(s.has(id(i)).unwrap(), "{i} lost");
    }
    let texts = s.list_by_type(id(TEXT)).unwrap();
    assert_eq!(texts.len(), ids.len());
    assert!(s.verify(&|_, _| {}).unwrap().is_clean());
}

/// `uwf cas put` of text nodes committing every `commit_every` lines, fed `lines` lines from
/// a thread, or fewer if it stops reading.
fn fed_writer(
    env: &TestEnv,
    commit_every: u64,
    lines: u64,
    stdout: Stdio,
    line: impl Fn(u64) -> String + Send + 'static,
) -> (std::process::Child, std::thread::JoinHandle<()>) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("uwf"))
        .env("UWF_HOME", env.root())
        .envs(env.store_url.iter().map(|u| ("UWF_STORE", u)))
        .args(["cas", "put", TEXT, "-", "--jsonl", "--commit-every"])
        .arg(commit_every.to_string())
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for i in 0..lines {
            if writeln!(stdin, "{}", line(i)).is_err() {
                return; // the writer is gone
            }
        }
    });
    (child, feeder)
}

/// A writer killed with SIGKILL in the middle of a batch: the file opens again, verify is
/// clean, and every node whose commit was reported is there.
#[test]
fn killed_writer_loses_no_committed_node() {
    let env = TestEnv::new();
    let pad = "x".repeat(400);
    let (mut child, feeder) = fed_writer(&env, 200, 1_000_000, Stdio::piped(), move |i| {
        format!("\"node {i} {pad}\"")
    });
    let mut committed = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while committed.len() < 3_000 {
        let l = lines.next().expect("writer still running").unwrap();
        committed.push(json(&l).get("hash").unwrap().as_str().unwrap().to_string());
    }
    // Child::kill sends SIGKILL on Unix.
    child.kill().unwrap();
    child.wait().unwrap();
    // Anything printed before the kill was committed.
    for l in lines.map_while(Result::ok) {
        committed.push(json(&l).get("hash").unwrap().as_str().unwrap().to_string());
    }
    feeder.join().unwrap();

    let t = std::time::Instant::now();
    let s = env.store();
    eprintln!("reopen after kill took {:?}", t.elapsed());
    let report = s.verify(&|_, _| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.damage);
    for c in &committed {
        assert!(s.has(id(c)).unwrap(), "committed node {c} lost");
    }
    // The store takes writes again.
    let p = s
        .prepare(id(TEXT), &Value::str("after the crash"), true)
        .unwrap();
    s.put(&[p], 5).unwrap();
}

/// Writers killed in the middle of a transaction that grew the file, beside a handle that
/// stays open (as a runner's does): after each, the handle's next put, large enough to grow the
/// file and to write its payload records on a second thread, commits; the file is never cut
/// shorter, verifies clean and reopens with every committed node and none of the killed ones.
#[test]
fn a_handle_writes_on_after_a_killed_writer_grew_the_file() {
    if on_postgres() {
        return; // a file's length; a server has none
    }
    let env = TestEnv::new();
    let s = env.store();
    let first = s.prepare(id(TEXT), &Value::str("before"), true).unwrap();
    s.put(&[first], 1).unwrap();
    let file = env.root().join("uwf.redb");
    let len = || std::fs::metadata(&file).unwrap().len();
    let mut ids: Vec<NodeId> = Vec::new();
    for round in 0..3 {
        let before = len();
        // One transaction that never commits: the writer is killed once it has grown the file.
        let pad = "y".repeat(1000);
        let (mut child, feeder) = fed_writer(&env, 10_000_000, 100_000, Stdio::null(), move |i| {
            format!("\"killed {round} {i} {pad}\"")
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while len() < before + (16 << 20) {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never grew the file"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "the writer ended early"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        feeder.join().unwrap();
        let grown = len();

        let pad = "z".repeat(1000);
        let nodes: Vec<_> = (0..12_000)
            .map(|i| {
                let text = format!("after {round} {i} {pad}");
                s.prepare(id(TEXT), &Value::str(&text), true).unwrap()
            })
            .collect();
        ids.extend(nodes.iter().map(|p| p.id));
        s.put(&nodes, 2 + round).unwrap();
        assert!(
            len() >= grown,
            "round {round}: the file was cut to {} of {grown}",
            len()
        );
    }
    drop(s);

    let s = env.store();
    let report = s.verify(&|_, _| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.damage);
    let texts = s.list_by_type(id(TEXT)).unwrap();
    assert_eq!(
        texts.len(),
        1 + ids.len(),
        "the killed writers' nodes are not stored"
    );
    for i in ids.iter().step_by(397) {
        assert!(s.has(*i).unwrap(), "{i} lost");
    }
}

/// Version 0 (a redb file without a format record, e.g. a first open cut short) migrates to
/// the current version with the bootstrap schemas; every migration step is listed.
#[test]
fn version_zero_file_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("uwf.redb");
    {
        let mut b = redb::Database::builder();
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        let db = b.create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.commit().unwrap();
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(
        s.list_by_type(META).unwrap().len(),
        s.node_count().unwrap() as usize
    );
    assert!(s.has(META).unwrap());
    assert!(s.verify(&|_, _| {}).unwrap().is_clean());
    // One step per version, numbered from 0.
    for (i, m) in uwf::store::MIGRATIONS.iter().enumerate() {
        assert_eq!(m.from, i as u64, "{}", m.summary);
    }
    assert_eq!(
        uwf::store::MIGRATIONS.len() as u64,
        uwf::store::FORMAT_VERSION
    );
}
