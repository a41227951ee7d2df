//! `uwf cas count`, `pin`, `unpin`, `pins`, `gc` (with `--dry-run` and `--compact`) and
//! `--since` archives on a PostgreSQL store, through the real binary and the library: the same
//! answers as on redb for the same content, exactly the unreachable nodes collected, roots,
//! pins and young nodes kept, threads going on after a collection, a second collection refused
//! with redb's error, a node put again during a collection kept, many nodes swept in batches,
//! and `cas verify` naming the server when it finds damage.

use crate::common::{FIXED_NOW_MS, TestEnv, example, json, p};
use crate::pg;
use uwf::cas::Value;
use uwf::store::{GcOptions, GcReport, Lease, Store};

const HOUR_MS: u64 = 3_600_000;

/// A root on a fresh database of the test server, with the fixed clock and seeds.
fn on_pg() -> Option<TestEnv> {
    let url = pg::server()?.fresh_database();
    let mut env = TestEnv::fixed();
    env.store_url = Some(url);
    Some(env)
}

/// A root with a redb file, with the fixed clock and seeds.
fn on_redb() -> TestEnv {
    let mut env = TestEnv::fixed();
    env.store_url = None;
    env
}

fn ok_at(env: &TestEnv, now_ms: u64, args: &[&str]) -> Value {
    let r = env.run_at(now_ms, args);
    assert_eq!(r.code, 0, "uwf {args:?}: {}", r.stderr);
    json(&r.stdout)
}

fn num(v: &Value, k: &str) -> u64 {
    match v.get(k) {
        Some(Value::Number(n)) => *n as u64,
        other => panic!("{k} in {v}: {other:?}"),
    }
}

/// `v` without the keys that name the store's size (a file's or a server's tables').
fn sans_size(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with("fileBytes"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        v => v.clone(),
    }
}

fn has(env: &TestEnv, id: &str) -> bool {
    env.run(&["cas", "has", id]).code == 0
}

fn text(env: &TestEnv, now_ms: u64, s: &str) -> String {
    let r = env.run_at(now_ms, &["cas", "put-text", s, "-q"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout.trim().to_string()
}

/// The same content in a store: a finished thread, an active thread one step in, a removed
/// thread, a registered workflow, loose texts (one pinned, one young). Returns (finished,
/// active, loose texts, pinned text, young text).
fn build(env: &TestEnv) -> (String, String, Vec<String>, String, String) {
    let wf = p(&example("solve-issue.yaml"));
    let agent = env.scripted(&example("solve-issue.script.yaml"));
    let done = env.start(&wf, "done");
    loop {
        let r = env.run(&["thread", "step", &done, "-c", "20", "--agent", &agent]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        if env.show(&done).get("status") == Some(&Value::str("completed")) {
            break;
        }
    }
    let active = env.start(&wf, "active");
    env.ok(&["thread", "step", &active, "--agent", &agent]);
    let gone = env.start(&wf, "gone");
    env.ok(&["thread", "step", &gone, "--agent", &agent]);
    env.ok(&["thread", "rm", "--force", &gone]);
    env.ok(&["workflow", "put", &wf]);
    let loose: Vec<String> = (0..5)
        .map(|i| text(env, FIXED_NOW_MS, &format!("loose {i}")))
        .collect();
    let pinned = text(env, FIXED_NOW_MS, "pinned");
    env.ok(&["cas", "pin", &pinned]);
    let young = text(env, FIXED_NOW_MS + 2 * HOUR_MS, "young");
    (done, active, loose, pinned, young)
}

#[test]
fn count_pins_and_gc_give_what_redb_gives_and_threads_go_on() {
    let Some(pge) = on_pg() else { return };
    let rde = on_redb();
    let (done, active, loose, pinned, young) = build(&pge);
    assert_eq!(
        build(&rde),
        (
            done.clone(),
            active.clone(),
            loose.clone(),
            pinned.clone(),
            young.clone()
        )
    );
    let later = FIXED_NOW_MS + 3 * HOUR_MS;
    for args in [
        &["cas", "count"][..],
        &["cas", "pins"],
        &["cas", "gc", "--grace", "2h", "--dry-run"],
        &["cas", "gc", "--grace", "0s", "--dry-run"],
    ] {
        let (a, b) = (ok_at(&pge, later, args), ok_at(&rde, later, args));
        assert_eq!(sans_size(&a), sans_size(&b), "uwf {args:?}");
    }
    let c = ok_at(&pge, later, &["cas", "count"]);
    assert_eq!(num(&c, "nodes"), num(&c, "reachable") + num(&c, "garbage"));
    // The removed thread's start and step, and the loose texts (the young one too: a count
    // has no grace).
    let garbage = num(&c, "garbage");
    assert!(garbage >= 8, "{c}");
    assert!(num(&c, "fileBytes") > 0, "{c}");
    let dry = ok_at(&pge, later, &["cas", "gc", "--grace", "2h", "--dry-run"]);
    assert_eq!(num(&dry, "collected"), garbage - 1, "{dry}");
    assert_eq!(
        ok_at(&pge, later, &["cas", "count"]),
        c,
        "a dry run changed the store"
    );

    let (a, b) = (
        ok_at(&pge, later, &["cas", "gc", "--grace", "2h"]),
        ok_at(&rde, later, &["cas", "gc", "--grace", "2h"]),
    );
    assert_eq!(sans_size(&a), sans_size(&b));
    assert_eq!(num(&a, "collected"), garbage - 1, "{a}");
    assert_eq!(num(&a, "bytes"), num(&dry, "bytes"));
    for id in &loose {
        assert!(!has(&pge, id), "{id} is garbage");
    }
    assert!(has(&pge, &pinned) && has(&pge, &young));
    let after = ok_at(&pge, later, &["cas", "count"]);
    assert_eq!(
        sans_size(&after),
        sans_size(&ok_at(&rde, later, &["cas", "count"]))
    );
    assert_eq!(num(&after, "nodes"), num(&c, "nodes") - (garbage - 1));
    assert_eq!(num(&after, "garbage"), 1, "the young text: {after}");
    // Everything a thread or the registry reaches is there: the walks are whole, the store
    // verifies, and the threads read and step on.
    for t in [&done, &active] {
        let head = pge.head(t);
        let w = json(&pge.ok(&["cas", "walk", &head]));
        assert!(w.get("missing").is_none(), "{w}");
        pge.ok(&["thread", "read", t]);
    }
    let v = json(&pge.ok(&["cas", "verify"]));
    assert_eq!(v.get("status"), Some(&Value::str("ok")), "{v}");
    let agent = pge.scripted(&example("solve-issue.script.yaml"));
    pge.ok(&["thread", "step", &active, "--agent", &agent]);
    pge.ok(&["workflow", "show", "solve-issue"]);
    let t = pge.start("solve-issue", "after gc");
    pge.ok(&["thread", "step", &t, "--agent", &agent]);
    // Unpinned, the text goes with the next collection.
    let un = json(&pge.ok(&["cas", "unpin", &pinned]));
    assert_eq!(
        un.get("unpinned"),
        Some(&Value::Array(vec![Value::str(&pinned)]))
    );
    assert_eq!(json(&pge.ok(&["cas", "pins"])), Value::Array(vec![]));
    let r = ok_at(&pge, later + HOUR_MS, &["cas", "gc", "--grace", "2h"]);
    assert_eq!(num(&r, "collected"), 1, "{r}");
    assert!(!has(&pge, &pinned) && has(&pge, &young));
    pge.fails(&["cas", "pin", &pinned], "Node not found");
    // Compaction on a server vacuums uwf's tables and says so.
    let r = pge.run_at(later, &["cas", "gc", "--grace", "0s", "--compact"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json(&r.stdout);
    assert!(
        num(&v, "fileBytesBefore") > 0 && num(&v, "fileBytesAfter") > 0,
        "{v}"
    );
    assert!(r.stderr.contains("VACUUM"), "{}", r.stderr);
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

/// A collection by the library at `now_ms` with no grace, running `during` once it has marked
/// (at its first progress report, before it sweeps).
fn gc_with(store: &Store, now_ms: u64, during: &dyn Fn()) -> GcReport {
    let called = std::cell::Cell::new(false);
    let progress = |_: u64, _: u64| {
        if !called.replace(true) {
            during();
        }
    };
    let r = store
        .gc(&GcOptions {
            now_ms,
            grace_ms: 0,
            dry_run: false,
            owner: owner(),
            owner_is_live: &|_| false,
            progress: &progress,
        })
        .expect("gc");
    assert!(called.get());
    r
}

/// What a second collection says while one runs, and what a node put again during a
/// collection becomes, on `env`'s store.
fn during_a_collection(env: &TestEnv) -> (String, GcReport, bool, bool) {
    let a = text(env, FIXED_NOW_MS, "put again");
    let b = text(env, FIXED_NOW_MS, "left alone");
    let store = env.store();
    let refused = std::cell::RefCell::new(String::new());
    let r = gc_with(&store, FIXED_NOW_MS + HOUR_MS, &|| {
        let r = env.run(&["cas", "gc", "--grace", "0s"]);
        assert_ne!(r.code, 0, "a second collection ran: {}", r.stdout);
        *refused.borrow_mut() = r.stderr.clone();
        // Put again while the collection runs: kept, whatever the grace.
        assert_eq!(text(env, FIXED_NOW_MS + HOUR_MS, "put again"), a);
    });
    let refused = refused
        .into_inner()
        .replace(&std::process::id().to_string(), "PID");
    (refused, r, has(env, &a), has(env, &b))
}

#[test]
fn a_second_collection_is_refused_and_a_node_put_again_meanwhile_survives_as_on_redb() {
    let Some(pge) = on_pg() else { return };
    let rde = on_redb();
    let (refused, r, kept, other) = during_a_collection(&pge);
    assert!(
        refused.contains("garbage collection is already running (pid PID)"),
        "{refused}"
    );
    assert!(kept, "the node put again was collected");
    assert!(!other, "the other loose text was kept");
    assert_eq!(r.collected, 1, "{r:?}");
    assert_eq!(during_a_collection(&rde), (refused, r, kept, other));
    // The marks are gone: the next collection takes the node.
    let r = ok_at(
        &pge,
        FIXED_NOW_MS + 2 * HOUR_MS,
        &["cas", "gc", "--grace", "0s"],
    );
    assert_eq!(num(&r, "collected"), 1, "{r}");
}

#[test]
fn a_collection_whose_process_died_is_taken_over() {
    let Some(env) = on_pg() else { return };
    let url = env.store_url.clone().unwrap();
    let loose = text(&env, FIXED_NOW_MS, "loose");
    // A collection's marks, left by a process that died (its session and its lock are gone).
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        "INSERT INTO uwf_gc_owner (key, rec) VALUES ('owner', '\\x94cd045700a000'::bytea)",
    )
    .unwrap();
    // Puts record what they put again meanwhile.
    text(&env, FIXED_NOW_MS, "loose");
    let touched: i64 = c
        .query_one("SELECT count(*) FROM uwf_gc_touched", &[])
        .unwrap()
        .get(0);
    assert_eq!(touched, 1);
    let r = ok_at(
        &env,
        FIXED_NOW_MS + HOUR_MS,
        &["cas", "gc", "--grace", "0s"],
    );
    assert_eq!(num(&r, "collected"), 0, "kept as touched: {r}");
    let left: i64 = c
        .query_one(
            "SELECT (SELECT count(*) FROM uwf_gc_owner) + (SELECT count(*) FROM uwf_gc_touched)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the marks are cleared");
    let r = ok_at(
        &env,
        FIXED_NOW_MS + HOUR_MS,
        &["cas", "gc", "--grace", "0s"],
    );
    assert_eq!(num(&r, "collected"), 1, "{r}");
    assert!(!has(&env, &loose));
}

#[test]
fn a_running_step_keeps_what_it_wrote_and_a_head_never_moves_onto_a_collected_node() {
    let Some(env) = on_pg() else { return };
    let wf = env.root().join("one.yaml");
    std::fs::write(
        &wf,
        "name: one\ndescription: one role\nroles:\n  a: {description: first, goal: go, capabilities: [], procedure: do it, output: a note, frontmatter: {type: object, properties: {note: {type: string}}, required: [note]}}\ngraph:\n  $START: {_: {role: a, prompt: start}}\n  a: {_: {role: $END, prompt: done}}\n",
    )
    .unwrap();
    // The agent collects with no grace between writing its step and returning it.
    let agent = env.agent(
        "agent.sh",
        "S=$(printf -- '---\\nnote: hi\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\")\n@UWF@ cas gc --grace 0s > /dev/null || exit 9\necho \"$S\"",
    );
    let t = env.start(&p(&wf), "go");
    let r = env.run(&["thread", "step", &t, "--agent", &p(&agent)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("completed")));
    let w = json(&env.ok(&["cas", "walk", &env.head(&t)]));
    assert!(w.get("missing").is_none(), "{w}");
}

#[test]
fn since_archives_on_a_server() {
    let Some(env) = on_pg() else { return };
    let wf = p(&example("solve-issue.yaml"));
    let agent = env.scripted(&example("solve-issue.script.yaml"));
    let t = env.start(&wf, "first");
    env.ok(&["thread", "step", &t, "--agent", &agent]);
    let w = tempfile::tempdir().unwrap();
    let full = w.path().join("full.tar");
    env.ok(&["export", "--archive", &p(&full)]);
    env.ok(&["thread", "step", &t, "--agent", &agent]);
    let since = w.path().join("since.tar");
    env.ok(&["export", "--archive", &p(&since), "--since", &p(&full)]);
    assert!(std::fs::metadata(&since).unwrap().len() < std::fs::metadata(&full).unwrap().len());
    // Both into an empty redb store give the thread back.
    let other = on_redb();
    other.ok(&["import", &p(&full)]);
    other.ok(&["import", &p(&since)]);
    assert_eq!(other.head(&t), env.head(&t));
}

#[test]
fn many_nodes_are_swept_in_batches_while_a_chain_of_them_is_kept() {
    let Some(env) = on_pg() else { return };
    // 20,000 loose texts, and a list node referencing 3,000 of them, pinned.
    let lines: String = (0..20_000)
        .map(|i| format!("\"a loose text of some length, number {i:06}\"\n"))
        .collect();
    let text_type = uwf::workflow::nodes::TEXT.to_wire();
    let r = env.run_stdin(&["cas", "put", &text_type, "-", "--jsonl", "-q"], &lines);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ids: Vec<String> = r.stdout.lines().map(str::to_string).collect();
    assert_eq!(ids.len(), 20_000);
    let schema = env.root().join("list.json");
    std::fs::write(
        &schema,
        r#"{"type":"array","items":{"type":"string","format":"ocas_ref"}}"#,
    )
    .unwrap();
    let list_type = json(&env.ok(&["cas", "schema", "put", &p(&schema)]))
        .get("hash")
        .and_then(Value::as_str)
        .expect("hash")
        .to_string();
    let kept = &ids[..3_000];
    let list = env.root().join("list.payload.json");
    std::fs::write(&list, format!("[\"{}\"]", kept.join("\",\""))).unwrap();
    let head = env
        .ok(&["cas", "put", &list_type, &p(&list), "-q"])
        .trim()
        .to_string();
    env.ok(&["cas", "pin", &head]);
    let started = std::time::Instant::now();
    let v = ok_at(
        &env,
        FIXED_NOW_MS + HOUR_MS,
        &["cas", "gc", "--grace", "0s"],
    );
    let took = started.elapsed();
    assert_eq!(num(&v, "collected"), 17_000, "{v}");
    assert!(took < std::time::Duration::from_secs(60), "took {took:?}");
    let w = json(&env.ok(&["cas", "walk", &head]));
    assert_eq!(
        w.get("hashes").and_then(Value::as_array).map(Vec::len),
        Some(3_001)
    );
    assert!(w.get("missing").is_none());
    let c = ok_at(&env, FIXED_NOW_MS + HOUR_MS, &["cas", "count"]);
    assert_eq!(num(&c, "garbage"), 0, "{c}");
    eprintln!("collected 17,000 of 20,000 loose nodes in {took:?}");
}

#[test]
fn verify_on_a_server_names_the_server_when_it_finds_damage() {
    let Some(env) = on_pg() else { return };
    let url = env.store_url.clone().unwrap();
    let id = text(&env, FIXED_NOW_MS, "to be damaged");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let k = (uwf::cas::NodeId::parse(&id).unwrap().0 ^ (1 << 63)) as i64;
    c.execute("UPDATE uwf_nodes SET digest = '\\x00' WHERE id = $1", &[&k])
        .unwrap();
    let r = env.run(&["cas", "verify"]);
    assert_eq!(r.code, 65, "{}{}", r.stdout, r.stderr);
    let db = url.rsplit('/').next().unwrap();
    assert!(
        r.stderr.contains(db) && !r.stderr.contains("uwf.redb"),
        "{}",
        r.stderr
    );
}
