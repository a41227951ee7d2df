//! `uwf cas gc`, `count`, `pin` and `unpin` through the real binary: a collection looping
//! while four processes step twenty threads, the grace period, pins, a dry run, the counts,
//! export and import after a collection, and `--compact`.

use crate::common::{TestEnv, example, fingerprint, json, p};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use uwf::cas::Value;

const HOUR_MS: u64 = 3_600_000;

fn solve_agent(env: &TestEnv) -> String {
    env.scripted(&example("solve-issue.script.yaml"))
}

fn num(v: &Value, k: &str) -> u64 {
    match v.get(k) {
        Some(Value::Number(n)) => *n as u64,
        other => panic!("{k} in {v}: {other:?}"),
    }
}

fn has(env: &TestEnv, id: &str) -> bool {
    env.run(&["cas", "has", id]).code == 0
}

fn gc(env: &TestEnv, extra: &[&str]) -> Value {
    let mut args = vec!["cas", "gc"];
    args.extend(extra);
    json(&env.ok(&args))
}

/// The ids of a thread's start and steps (active or finished).
fn chain(env: &TestEnv, thread: &str) -> Vec<String> {
    json(&env.ok(&["thread", "steps", thread]))
        .get("steps")
        .and_then(Value::as_array)
        .expect("steps")
        .iter()
        .map(|s| s.get("hash").and_then(Value::as_str).unwrap().to_string())
        .collect()
}

/// Steps `thread` to its end, running the step again whenever it reports a retryable failure
/// (busy, moved on, or a node collected under it), as a runner would. Returns the retries.
fn step_to_end(env: &TestEnv, thread: &str, agent: &str) -> u32 {
    step_to_end_in(env.root(), env.store_url.as_deref(), thread, agent)
}

fn step_to_end_in(root: &Path, store: Option<&str>, thread: &str, agent: &str) -> u32 {
    let mut retries = 0;
    loop {
        let out = uwf_in(root, store)
            .args(["thread", "step", thread, "-c", "20", "--agent", agent])
            .output()
            .expect("run uwf");
        match out.status.code() {
            Some(0) => return retries,
            Some(75) => retries += 1,
            _ => panic!(
                "step of {thread} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
        assert!(retries < 200, "{thread}: too many retries");
    }
}

/// The binary with the root `root`, the store `store` (a server's URL) and an otherwise
/// cleared environment.
fn uwf_in(root: &Path, store: Option<&str>) -> std::process::Command {
    let mut c = std::process::Command::new(crate::common::uwf_bin());
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("UWF_HOME", root)
        .env("HOME", root)
        .envs(store.map(|u| ("UWF_STORE", u)))
        .stdin(Stdio::null());
    c
}

fn walks_whole(env: &TestEnv, id: &str) {
    let r = env.run(&["cas", "walk", id]);
    assert_eq!(r.code, 0, "walk from {id}: {}{}", r.stdout, r.stderr);
    assert!(json(&r.stdout).get("missing").is_none());
}

#[test]
fn gc_in_a_loop_while_four_processes_step_twenty_threads() {
    let env = TestEnv::new();
    let wf = p(&example("solve-issue.yaml"));
    let agent = solve_agent(&env);
    // Threads that are removed: one finished, one half way, one never stepped.
    let doomed: Vec<String> = (0..3)
        .map(|i| env.start(&wf, &format!("gone {i}")))
        .collect();
    step_to_end(&env, &doomed[0], &agent);
    env.ok(&["thread", "step", &doomed[1], "--agent", &agent]);
    let doomed_nodes: Vec<String> = doomed.iter().flat_map(|t| chain(&env, t)).collect();
    assert_eq!(doomed_nodes.len(), 6 + 2 + 1);
    let threads: Vec<String> = (0..20)
        .map(|i| env.start(&wf, &format!("issue {i}")))
        .collect();
    env.ok(&[
        "thread", "rm", "--force", &doomed[0], &doomed[1], &doomed[2],
    ]);

    let stop = Arc::new(AtomicBool::new(false));
    let runs = Arc::new(AtomicU64::new(0));
    let collected = Arc::new(AtomicU64::new(0));
    let looper = {
        let (stop, runs, collected) = (stop.clone(), runs.clone(), collected.clone());
        let root = env.root().to_path_buf();
        let store = env.store_url.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) || runs.load(Ordering::SeqCst) == 0 {
                let out = uwf_in(&root, store.as_deref())
                    .args(["cas", "gc", "--grace", "0s"])
                    .output()
                    .expect("gc");
                assert!(
                    out.status.success(),
                    "gc failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let v = json(&String::from_utf8_lossy(&out.stdout));
                collected.fetch_add(num(&v, "collected"), Ordering::SeqCst);
                runs.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let started = Instant::now();
    let workers: Vec<_> = threads
        .chunks(5)
        .map(|ts| {
            let ts = ts.to_vec();
            let agent = agent.clone();
            let root = env.root().to_path_buf();
            let store = env.store_url.clone();
            std::thread::spawn(move || {
                ts.iter()
                    .map(|t| step_to_end_in(&root, store.as_deref(), t, &agent))
                    .sum::<u32>()
            })
        })
        .collect();
    let retries: u32 = workers.into_iter().map(|w| w.join().expect("worker")).sum();
    stop.store(true, Ordering::SeqCst);
    looper.join().expect("gc loop");
    let elapsed = started.elapsed();
    assert!(
        runs.load(Ordering::SeqCst) >= 2,
        "gc ran {} times",
        runs.load(Ordering::SeqCst)
    );
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
    eprintln!(
        "{} collections removed {} nodes while 100 steps ran ({retries} retried) in {elapsed:?}",
        runs.load(Ordering::SeqCst),
        collected.load(Ordering::SeqCst)
    );
    gc(&env, &["--grace", "0s"]);
    for t in &threads {
        let show = env.show(t);
        assert_eq!(show.get("status"), Some(&Value::str("completed")), "{t}");
        assert_eq!(
            env.roles(t),
            ["planner", "developer", "reviewer", "developer", "reviewer"]
        );
        walks_whole(&env, show.get("head").and_then(Value::as_str).unwrap());
    }
    let v = json(&env.ok(&["cas", "verify"]));
    assert_eq!(v.get("status"), Some(&Value::str("ok")), "{v}");
    for id in &doomed_nodes {
        assert!(
            !has(&env, id),
            "node {id} of a removed thread is still stored"
        );
    }
    let c = json(&env.ok(&["cas", "count"]));
    assert_eq!(num(&c, "garbage"), 0, "{c}");
}

#[test]
fn a_loose_node_is_collected_once_its_grace_has_passed() {
    let env = TestEnv::new();
    // The runs log under the test clock and the checks under today's: keep every day's file.
    std::fs::write(env.root().join("config.yaml"), "logs: {keepDays: 0}\n").unwrap();
    let t0 = crate::common::FIXED_NOW_MS;
    let r = env.run_at(t0, &["cas", "put-text", "loose", "-q"]);
    let id = r.stdout.trim().to_string();
    let run = |now, grace| {
        let r = env.run_at(now, &["cas", "gc", "--grace", grace]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        json(&r.stdout)
    };
    assert_eq!(num(&run(t0 + HOUR_MS, "2h"), "collected"), 0);
    assert!(has(&env, &id));
    assert_eq!(num(&run(t0 + 3 * HOUR_MS, "7d"), "collected"), 0);
    assert!(has(&env, &id));
    let v = run(t0 + 3 * HOUR_MS, "2h");
    assert_eq!(num(&v, "collected"), 1, "{v}");
    assert!(num(&v, "bytes") > 0);
    assert!(!has(&env, &id));
    // Each run is in the log, with what it collected.
    let runs: Vec<u64> = json(&env.ok(&["log", "show"]))
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("msg").and_then(|m| m.as_str()) == Some("gc"))
        .map(|e| num(e, "collected"))
        .collect();
    assert_eq!(runs, [0, 0, 1]);
    let r = env.run(&["cas", "gc", "--grace", "2 hours"]);
    assert!(
        r.code != 0 && r.stderr.contains("invalid duration"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_pin_keeps_a_node_and_unpin_lets_it_go() {
    let env = TestEnv::new();
    let id = env
        .ok(&["cas", "put-text", "pinned", "-q"])
        .trim()
        .to_string();
    let other = env
        .ok(&["cas", "put-text", "other", "-q"])
        .trim()
        .to_string();
    let pinned = json(&env.ok(&["cas", "pin", &id[..8]]));
    assert_eq!(
        pinned.get("pinned"),
        Some(&Value::Array(vec![Value::str(&id)]))
    );
    let list = json(&env.ok(&["cas", "pins"]));
    let rows = list.as_array().expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get("hash"), Some(&Value::str(&id)));
    assert_eq!(num(&gc(&env, &["--grace", "0s"]), "collected"), 1);
    assert!(has(&env, &id));
    assert!(!has(&env, &other));
    let un = json(&env.ok(&["cas", "unpin", &id]));
    assert_eq!(
        un.get("unpinned"),
        Some(&Value::Array(vec![Value::str(&id)]))
    );
    assert_eq!(num(&gc(&env, &["--grace", "0s"]), "collected"), 1);
    assert!(!has(&env, &id));
    env.fails(&["cas", "pin", &id], "Node not found");
}

#[test]
fn a_dry_run_changes_nothing_and_the_counts_add_up() {
    let env = TestEnv::new();
    let wf = p(&example("solve-issue.yaml"));
    let agent = solve_agent(&env);
    let kept = env.start(&wf, "kept");
    step_to_end(&env, &kept, &agent);
    let gone = env.start(&wf, "gone");
    env.ok(&["thread", "step", &gone, "--agent", &agent]);
    env.ok(&["thread", "rm", "--force", &gone]);
    for i in 0..5 {
        env.ok(&["cas", "put-text", &format!("loose {i}")]);
    }
    let before = json(&env.ok(&["cas", "count"]));
    assert_eq!(
        num(&before, "nodes"),
        num(&before, "reachable") + num(&before, "garbage")
    );
    // The removed thread's start and step, and the loose texts.
    assert!(num(&before, "garbage") >= 7, "{before}");
    assert!(num(&before, "bytes") > num(&before, "garbageBytes"));
    // The file's bytes; on a server, the counts.
    let print = || match env.store_url {
        None => fingerprint(&env.db()),
        Some(_) => env.ok(&["cas", "count"]),
    };
    let print_before = print();
    let dry = gc(&env, &["--grace", "0s", "--dry-run"]);
    assert_eq!(dry.get("dryRun"), Some(&Value::Bool(true)));
    assert_eq!(num(&dry, "collected"), num(&before, "garbage"));
    assert_eq!(num(&dry, "bytes"), num(&before, "garbageBytes"));
    assert_eq!(print(), print_before, "a dry run wrote to the store");
    // Young nodes are kept: the default grace collects nothing here.
    assert_eq!(num(&gc(&env, &[]), "collected"), 0);
    let r = gc(&env, &["--grace", "0s"]);
    assert_eq!(num(&r, "collected"), num(&before, "garbage"));
    assert_eq!(num(&r, "scanned"), num(&before, "nodes"));
    let after = json(&env.ok(&["cas", "count"]));
    assert_eq!(num(&after, "garbage"), 0);
    assert_eq!(
        num(&after, "nodes"),
        num(&before, "nodes") - num(&before, "garbage")
    );
    assert_eq!(
        num(&after, "bytes"),
        num(&before, "bytes") - num(&before, "garbageBytes")
    );
    // The finished thread's chain survives.
    let head = env.head(&kept);
    walks_whole(&env, &head);
    assert_eq!(chain(&env, &kept).len(), 6);
    let v = json(&env.ok(&["cas", "verify"]));
    assert_eq!(v.get("status"), Some(&Value::str("ok")), "{v}");
    env.ok(&["cas", "reindex"]);
}

#[test]
fn export_and_import_after_gc_give_back_the_threads() {
    let env = TestEnv::new();
    let wf = p(&example("solve-issue.yaml"));
    let agent = solve_agent(&env);
    let done = env.start(&wf, "done");
    step_to_end(&env, &done, &agent);
    let active = env.start(&wf, "active");
    env.ok(&["thread", "step", &active, "--agent", &agent]);
    let gone = env.start(&wf, "gone");
    env.ok(&["thread", "rm", "--force", &gone]);
    assert!(num(&gc(&env, &["--grace", "0s"]), "collected") > 0);
    let out = tempfile::tempdir().expect("dir");
    let dir = out.path().join("export");
    env.ok(&["export", &p(&dir)]);
    let other = TestEnv::new();
    other.ok(&["import", &p(&dir)]);
    for t in [&done, &active] {
        assert_eq!(other.head(t), env.head(t));
        assert_eq!(chain(&other, t), chain(&env, t));
    }
    other.fails(&["thread", "show", &gone], "not found");
    let v = json(&other.ok(&["cas", "verify"]));
    assert_eq!(v.get("status"), Some(&Value::str("ok")), "{v}");
    // The imported store holds what the collected one held.
    let a = json(&env.ok(&["cas", "count"]));
    let b = json(&other.ok(&["cas", "count"]));
    assert_eq!(num(&a, "nodes"), num(&b, "nodes"));
    // And the active thread goes on there.
    step_to_end(&other, &active, &agent);
}

#[test]
fn compact_shrinks_the_file_after_a_collection() {
    let env = TestEnv::new();
    let lines: String = (0..20_000)
        .map(|i| format!("\"a loose text of some length, number {i:06}\"\n"))
        .collect();
    let text = uwf::workflow::nodes::TEXT.to_wire();
    let r = env.run_stdin(&["cas", "put", &text, "-", "--jsonl", "-q"], &lines);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = gc(&env, &["--grace", "0s", "--compact"]);
    assert_eq!(num(&v, "collected"), 20_000);
    let (before, after) = (num(&v, "fileBytesBefore"), num(&v, "fileBytesAfter"));
    assert!(after < before, "{v}");
    assert_eq!(std::fs::metadata(env.db()).expect("file").len(), after);
    let v = json(&env.ok(&["cas", "verify"]));
    assert_eq!(v.get("status"), Some(&Value::str("ok")), "{v}");
    let r = env.run(&["cas", "gc", "--dry-run", "--compact"]);
    assert!(
        r.code != 0 && r.stderr.contains("cannot be used with"),
        "{}",
        r.stderr
    );
}

/// One role, then the end.
const ONE: &str = "name: one\ndescription: one role\nroles:\n  a: {description: first, goal: go, capabilities: [], procedure: do it, output: a note, frontmatter: {type: object, properties: {note: {type: string}}, required: [note]}}\ngraph:\n  $START: {_: {role: a, prompt: start}}\n  a: {_: {role: $END, prompt: done}}\n";

#[test]
fn what_a_running_step_wrote_is_kept_whatever_the_grace() {
    let env = TestEnv::new();
    let wf = env.root().join("one.yaml");
    std::fs::write(&wf, ONE).unwrap();
    // The agent collects with no grace between writing its step and returning it.
    let agent = env.agent(
        "agent.sh",
        "S=$(printf -- '---\\nnote: hi\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\")\n@UWF@ cas gc --grace 0s > /dev/null || exit 9\necho \"$S\"",
    );
    let t = env.start(&p(&wf), "go");
    env.ok(&["thread", "step", &t, "--agent", &p(&agent)]);
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("completed")));
    walks_whole(&env, &env.head(&t));
}

#[test]
fn a_head_never_moves_onto_a_collected_node() {
    let env = TestEnv::new();
    let wf = env.root().join("one.yaml");
    std::fs::write(&wf, ONE).unwrap();
    let t = env.start(&p(&wf), "go");
    let start = env.head(&t);
    // A first attempt writes its step, then fails: the step is garbage.
    let first = env.agent(
        "first.sh",
        "printf -- '---\\nnote: hi\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\" > \"$UWF_HOME/s.txt\"\nexit 1",
    );
    assert_ne!(
        env.run(&["thread", "step", &t, "--agent", &p(&first)]).code,
        0
    );
    // Hours later, an agent returns that step after a collection removed it and what it
    // references, and put the step node alone back.
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 3 * HOUR_MS;
    let step_type = uwf::workflow::nodes::STEP_NODE.to_wire();
    let second = env.agent(
        "second.sh",
        &format!(
            "S=$(cat \"$UWF_HOME/s.txt\")\n\
             @UWF@ cas get \"$S\" | sed 's/^{{\"type\":\"[0-9A-Z]*\",\"payload\":\\(.*\\)}}$/\\1/' > \"$UWF_HOME/s.json\"\n\
             UWF_TEST_NOW_MS={later} @UWF@ cas gc --grace 1h > /dev/null || exit 9\n\
             @UWF@ cas put {step_type} \"$UWF_HOME/s.json\" -q > /dev/null || exit 8\n\
             echo \"$S\""
        ),
    );
    let r = env.run_at(later, &["thread", "step", &t, "--agent", &p(&second)]);
    assert_eq!(r.code, 75, "{}", r.stderr);
    assert!(
        r.stderr.contains("removed by garbage collection"),
        "{}",
        r.stderr
    );
    assert_eq!(env.head(&t), start);
    // Run again, the step goes through.
    let agent = env.agent(
        "agent.sh",
        "printf -- '---\\nnote: hi\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\"",
    );
    let r = env.run_at(later, &["thread", "step", &t, "--agent", &p(&agent)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    walks_whole(&env, &env.head(&t));
    let v = json(&env.ok(&["cas", "verify"]));
    assert_eq!(v.get("status"), Some(&Value::str("ok")), "{v}");
}
