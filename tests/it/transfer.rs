//! `uwf export` and `uwf import` end to end: the TypeScript fixture root, idempotence,
//! conflicts, the automatic first-use import, bad input, and a round trip of many nodes.

use crate::common::{TestEnv, json};
use crate::interchange::{copy_tree, from_ciborium, ts_root};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use uwf::cas::{NodeId, Value, cbor};
use uwf::interchange::transfer::{self, ImportOptions};
use uwf::store::{HistoryEntry, Store, ThreadRecord};
use uwf::thread::ThreadId;

/// Every file under `dir` with its BLAKE3, by relative path.
pub(crate) fn tree(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_symlink() {
                out.insert(
                    rel,
                    format!("-> {}", fs::read_link(e.path()).unwrap().display()),
                );
            } else {
                let h = fs::read(e.path()).map(|b| blake3::hash(&b).to_hex().to_string());
                out.insert(rel, h.unwrap_or_else(|e| format!("unreadable: {e}")));
            }
        }
    }
    out
}

fn sorted_lines(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn ts_root_small_imports_and_exports_byte_identical() {
    let env = TestEnv::new();
    let src = ts_root();
    let before = tree(&src);
    let r = env.run(&["import", src.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rep = json(&r.stdout);
    let nodes = rep.get("nodes").unwrap();
    let n = |k: &str| nodes.get(k).unwrap().as_f64().unwrap();
    assert_eq!(n("imported") + n("present"), 199.0);
    assert_eq!(n("skipped"), 0.0);
    assert_eq!(
        rep.get("threads")
            .unwrap()
            .get("imported")
            .unwrap()
            .as_f64(),
        Some(3.0)
    );
    assert_eq!(
        rep.get("registry")
            .unwrap()
            .get("imported")
            .unwrap()
            .as_f64(),
        Some(2.0)
    );
    assert_eq!(
        rep.get("history")
            .unwrap()
            .get("imported")
            .unwrap()
            .as_f64(),
        Some(2.0)
    );
    assert_eq!(tree(&src), before, "import only reads");
    assert_eq!(
        json(&env.ok(&["cas", "verify"]))
            .get("status")
            .unwrap()
            .as_str(),
        Some("ok")
    );

    let out = env.root().join("export");
    env.ok(&["export", out.to_str().unwrap()]);
    let mut bins = 0;
    for e in fs::read_dir(src.join("cas")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "bin") {
            let name = p.file_name().unwrap();
            let ours = fs::read(out.join("cas").join(name)).unwrap();
            assert_eq!(ours, fs::read(&p).unwrap(), "{}", p.display());
            // An independent decoder sees exactly {type, payload, timestamp}.
            let v: ciborium::Value = ciborium::from_reader(ours.as_slice()).unwrap();
            let m = v.as_map().unwrap();
            let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_text().unwrap()).collect();
            assert_eq!(keys, ["type", "payload", "timestamp"]);
            let ts = u64::try_from(m[2].1.as_integer().unwrap()).unwrap();
            let payload = from_ciborium(&m[1].1);
            assert_eq!(
                cbor::encode_node(m[0].1.as_text().unwrap(), &cbor::encode(&payload), ts),
                ours
            );
            bins += 1;
        }
    }
    assert_eq!(bins, 199);
    for f in ["threads.yaml", "workflows.yaml", "history.jsonl"] {
        assert_eq!(
            fs::read(out.join(f)).unwrap(),
            fs::read(src.join(f)).unwrap(),
            "{f}"
        );
    }
    assert_eq!(
        fs::read(out.join("registry.yaml")).unwrap(),
        fs::read(src.join("workflows.yaml")).unwrap()
    );
    for e in fs::read_dir(src.join("cas/_index")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap();
        assert_eq!(
            sorted_lines(&out.join("cas/_index").join(name)),
            sorted_lines(&p),
            "{}",
            p.display()
        );
    }
    assert_eq!(
        fs::read_dir(src.join("cas/_index")).unwrap().count(),
        fs::read_dir(out.join("cas/_index")).unwrap().count()
    );

    // Incremental: a second export rewrites no node file.
    let again = json(&env.ok(&["export", out.to_str().unwrap()]));
    assert_eq!(again.get("written").unwrap().as_f64(), Some(0.0));
    assert_eq!(again.get("unchanged").unwrap().as_f64(), Some(199.0));

    // Idempotent: a second import changes nothing.
    let db_nodes = json(&env.ok(&["cas", "verify"]))
        .get("nodes")
        .unwrap()
        .as_f64();
    let rep = json(&env.ok(&["import", src.to_str().unwrap()]));
    for k in ["nodes", "threads", "registry", "history"] {
        assert_eq!(
            rep.get(k).unwrap().get("imported").unwrap().as_f64(),
            Some(0.0),
            "{k}"
        );
    }
    assert_eq!(
        json(&env.ok(&["cas", "verify"]))
            .get("nodes")
            .unwrap()
            .as_f64(),
        db_nodes
    );
}

/// The names of the node files under `root/cas`.
fn node_files(root: &Path) -> std::collections::BTreeSet<String> {
    fs::read_dir(root.join("cas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".bin"))
        .collect()
}

/// The schemas of the claude-code and hermes adapters (detail, turn, raw output).
const ADAPTER_SCHEMAS: [&str; 6] = [
    "AEBZKYF1831T8",
    "CVBRDZTWJ0BGN",
    "80B2AT85TMF1A",
    "9RWNKFTYS4W55",
    "6AT9BBJ2Y42ZV",
    "DXN3VVEXFVX51",
];

#[test]
fn a_root_imported_and_exported_again_holds_exactly_its_nodes() {
    // The TypeScript tool's roots: one whose agents wrote the adapters' schemas, one without.
    for fixture in ["ts-root-small", "ts-golden/root"] {
        let src = crate::interchange::fixture(fixture);
        let env = TestEnv::new();
        env.ok(&["import", src.to_str().unwrap()]);
        let out = env.root().join("export");
        env.ok(&["export", out.to_str().unwrap()]);
        assert_eq!(node_files(&out), node_files(&src), "{fixture}");
    }
    let golden = node_files(&crate::interchange::fixture("ts-golden/root"));
    assert!(
        ADAPTER_SCHEMAS
            .iter()
            .all(|id| !golden.contains(&format!("{id}.bin")))
    );
}

#[test]
fn the_adapters_schemas_are_written_on_first_use_and_kept() {
    let env = TestEnv::new();
    for id in ADAPTER_SCHEMAS {
        let r = env.run(&["cas", "has", id]);
        assert_eq!(
            (r.code, r.stdout.as_str()),
            (1, "{\"exists\":false}\n"),
            "{id}"
        );
    }
    // A store that has them (imported here, as from a store of an earlier uwf) keeps them.
    env.ok(&["import", ts_root().to_str().unwrap()]);
    env.ok(&["cas", "gc"]);
    for id in ADAPTER_SCHEMAS {
        assert_eq!(env.ok(&["cas", "has", id]), "{\"exists\":true}\n", "{id}");
    }
}

/// The registered names `workflow list` prints, in its order.
fn listed(env: &TestEnv) -> Vec<String> {
    let out = json(&env.ok(&["workflow", "list"]));
    out.as_array()
        .unwrap()
        .iter()
        .map(|r| r.get("name").unwrap().as_str().unwrap().to_string())
        .collect()
}

/// The keys of a YAML name map, in file order.
fn yaml_keys(path: &Path) -> Vec<String> {
    uwf::interchange::yaml::read_string_map(&fs::read_to_string(path).unwrap(), "map")
        .unwrap()
        .entries
        .into_keys()
        .collect()
}

#[test]
fn registration_order_is_listed_and_survives_export_and_import() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let put = |env: &TestEnv, file: &str, name: &str| {
        let text = fs::read_to_string(crate::common::workflow_fixture(file)).unwrap();
        let stem = file.trim_end_matches(".yaml");
        let text = text.replacen(&format!("name: {stem}"), &format!("name: \"{name}\""), 1);
        let path = dir.path().join(format!("{name}.yaml"));
        fs::write(&path, text).unwrap();
        env.ok(&["workflow", "put", path.to_str().unwrap()]);
    };
    put(&env, "review-loop.yaml", "review-loop");
    put(&env, "debate.yaml", "debate");
    // A transition-list workflow, which only `uwf.jsonl` names.
    put(&env, "solve-issue.yaml", "solve-issue");
    put(&env, "debate.yaml", "10");
    put(&env, "debate.yaml", "zeta");
    put(&env, "debate.yaml", "7");
    assert_eq!(
        listed(&env),
        ["7", "10", "review-loop", "debate", "solve-issue", "zeta"]
    );
    // A new version and a rollback keep a name's place; removed and put again, it goes last.
    let text = fs::read_to_string(crate::common::workflow_fixture("debate.yaml")).unwrap();
    let changed = dir.path().join("debate.yaml");
    fs::write(
        &changed,
        text.replace("description:", "description: changed"),
    )
    .unwrap();
    env.ok(&["workflow", "put", changed.to_str().unwrap()]);
    env.ok(&["workflow", "rollback", "debate"]);
    env.ok(&["workflow", "remove", "review-loop"]);
    put(&env, "review-loop.yaml", "review-loop");
    let order = ["7", "10", "debate", "solve-issue", "zeta", "review-loop"];
    assert_eq!(listed(&env), order);

    let out = env.root().join("export");
    env.ok(&["export", out.to_str().unwrap()]);
    let ts_order = ["7", "10", "debate", "zeta", "review-loop"];
    assert_eq!(yaml_keys(&out.join("workflows.yaml")), ts_order);
    assert_eq!(yaml_keys(&out.join("registry.yaml")), ts_order);
    let mut in_extra: Vec<String> = Vec::new();
    for l in fs::read_to_string(out.join("uwf.jsonl")).unwrap().lines() {
        let v = json(l);
        if v.get("kind").and_then(Value::as_str) == Some("registry") {
            let name = v.get("name").unwrap().as_str().unwrap().to_string();
            if in_extra.last() != Some(&name) {
                in_extra.push(name);
            }
        }
    }
    assert_eq!(in_extra, order);
    let back = TestEnv::new();
    back.ok(&["import", out.to_str().unwrap()]);
    assert_eq!(listed(&back), order);

    // Where the files disagree, `workflows.yaml` wins; a name only `uwf.jsonl` has keeps its
    // place before the next name both have.
    let text = fs::read_to_string(out.join("workflows.yaml")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.swap(2, 4);
    fs::write(out.join("workflows.yaml"), lines.join("\n") + "\n").unwrap();
    fs::remove_file(out.join("registry.yaml")).unwrap();
    let again = TestEnv::new();
    again.ok(&["import", out.to_str().unwrap()]);
    assert_eq!(
        listed(&again),
        ["7", "10", "review-loop", "solve-issue", "zeta", "debate"]
    );
}

/// Writes a node into a root as the TypeScript tool writes one: `cas/<ID>.bin`, the CBOR of
/// `{type, payload, timestamp}`, and a line in its type's index; returns its id.
fn ts_node(root: &Path, type_id: &str, payload: &str) -> String {
    let bytes = cbor::encode(&Value::from_json_str(payload).unwrap());
    let id = uwf::cas::hash::node_id(NodeId::parse(type_id).unwrap(), &bytes).to_wire();
    fs::write(
        root.join("cas").join(format!("{id}.bin")),
        cbor::encode_node(type_id, &bytes, 1_767_300_000_000),
    )
    .unwrap();
    let index = root.join("cas/_index").join(type_id);
    let mut text = fs::read_to_string(&index).unwrap_or_default();
    text.push_str(&format!("{id}\n"));
    fs::write(index, text).unwrap();
    id
}

/// A step of the thread of `start` after `prev` for `role`, with its output (of the role's
/// schema `output.0`, payload `output.1`), written into a root as the TypeScript tool writes
/// it; returns the StepNode's id.
fn ts_step(root: &Path, start: &str, prev: &str, role: &str, output: (&str, &str)) -> String {
    let out = ts_node(root, output.0, output.1);
    ts_node(
        root,
        "108DB063KRQWW",
        &format!(
            r#"{{"start":"{start}","prev":"{prev}","role":"{role}","output":"{out}","detail":"{out}","agent":"uwf-hermes","startedAtMs":1767300000000,"completedAtMs":1767300001000,"cwd":"/tmp"}}"#
        ),
    )
}

/// Points `thread` at `head` in a root's `threads.yaml`.
fn set_ts_head(root: &Path, thread: &str, head: &str) {
    let path = root.join("threads.yaml");
    let text: String = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| match l.split_once(": ") {
            Some((t, _)) if t == thread => format!("{t}: {head}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    fs::write(path, text).unwrap();
}

/// An import's report with its exit code checked.
fn import(env: &TestEnv, root: &Path) -> Value {
    let r = env.run(&["import", root.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json(&r.stdout)
}

/// `(imported, present, skipped, fastForwarded)` of an import's threads, and its conflicts.
fn thread_counts(rep: &Value) -> ((f64, f64, f64, f64), Vec<String>) {
    let t = rep.get("threads").unwrap();
    let n = |k: &str| t.get(k).unwrap().as_f64().unwrap();
    let conflicts = rep.get("conflicts").unwrap().as_array().unwrap();
    (
        (
            n("imported"),
            n("present"),
            n("skipped"),
            n("fastForwarded"),
        ),
        conflicts
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect(),
    )
}

#[test]
fn a_thread_continued_elsewhere_moves_forward_on_import() {
    let env = TestEnv::new();
    import(&env, &ts_root());
    let (t, head) = fs::read_to_string(ts_root().join("threads.yaml"))
        .unwrap()
        .lines()
        .next()
        .and_then(|l| l.split_once(": "))
        .map(|(t, h)| (t.to_string(), h.to_string()))
        .unwrap();
    let field = |id: &str, k: &str| -> String {
        let node = json(&env.ok(&["cas", "get", id]));
        let v = node.get("payload").unwrap().get(k).unwrap();
        v.as_str().unwrap().to_string()
    };
    let type_of = |id: &str| -> String {
        let node = json(&env.ok(&["cas", "get", id]));
        node.get("type").unwrap().as_str().unwrap().to_string()
    };
    let start = field(&head, "start");
    // The debate's two roles take turns; each step's output is of its role's schema.
    let role = env
        .show(&t)
        .get("currentRole")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let (this, that) = (
        type_of(&field(&field(&head, "prev"), "output")),
        type_of(&field(&head, "output")),
    );
    let go_on = r#"{"$status":"continue","argument":"One more turn."}"#;
    // Exported, then stepped once by the TypeScript tool there, while paused here.
    let out = env.root().join("export");
    env.ok(&["export", out.to_str().unwrap()]);
    let step = ts_step(&out, &start, &head, &role, (&this, go_on));
    set_ts_head(&out, &t, &step);
    env.ok(&["thread", "pause", &t]);
    let r = env.run(&["import", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert_eq!(
        thread_counts(&json(&r.stdout)),
        ((0.0, 2.0, 0.0, 1.0), vec![])
    );
    let shown = env.show(&t);
    assert_eq!(shown.get("head").unwrap().as_str(), Some(step.as_str()));
    assert_eq!(shown.get("status").unwrap().as_str(), Some("paused"));
    assert_eq!(
        shown.get("currentRole").unwrap().as_str(),
        Some(if role == "for" { "against" } else { "for" })
    );

    // The other side behind (the fixture's head is an ancestor of the thread's): present, with
    // no conflict.
    let rep = import(&env, &ts_root());
    assert_eq!(thread_counts(&rep), ((0.0, 3.0, 0.0, 0.0), vec![]));
    assert_eq!(env.head(&t), step);

    // Diverged (another step after the old head): a conflict, and the thread stays.
    let other = tempfile::tempdir().unwrap();
    copy_tree(&ts_root(), other.path());
    let other_turn = r#"{"$status":"continue","argument":"Another turn."}"#;
    let branch = ts_step(other.path(), &start, &head, &role, (&this, other_turn));
    set_ts_head(other.path(), &t, &branch);
    let (counts, conflicts) = thread_counts(&import(&env, other.path()));
    assert_eq!(counts, (0.0, 2.0, 1.0, 0.0));
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert!(
        conflicts[0].contains(&t) && conflicts[0].contains("exists with another head"),
        "{conflicts:?}"
    );
    assert_eq!(env.head(&t), step);

    // A thread with a live step lease is never moved: a conflict line.
    let next = env
        .show(&t)
        .get("currentRole")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let further = ts_step(&out, &start, &step, &next, (&that, go_on));
    set_ts_head(&out, &t, &further);
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let key = ThreadId::parse(&t).unwrap();
    env.store()
        .write(|w| {
            w.set_lease(
                &key,
                &uwf::store::Lease {
                    pid: sleeper.id(),
                    since_ms: 1,
                    boot_id: uwf::engine::boot_id(),
                    start_ticks: uwf::engine::start_ticks(sleeper.id()),
                    expires_ms: None,
                },
            )
        })
        .unwrap();
    let (counts, conflicts) = thread_counts(&import(&env, &out));
    assert_eq!(counts, (0.0, 2.0, 1.0, 0.0));
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert!(
        conflicts[0].contains(&t) && conflicts[0].contains("has a step running"),
        "{conflicts:?}"
    );
    assert_eq!(env.head(&t), step);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // Once the step has ended, the same import moves it.
    assert_eq!(
        thread_counts(&import(&env, &out)),
        ((0.0, 2.0, 0.0, 1.0), vec![])
    );
    assert_eq!(env.head(&t), further);
    assert_eq!(env.show(&t).get("status").unwrap().as_str(), Some("paused"));

    // A step that ends the workflow there: the thread completes here too.
    let end = r#"{"$status":"conceded","argument":"Agreed."}"#;
    let last = ts_step(&out, &start, &further, &role, (&this, end));
    set_ts_head(&out, &t, &last);
    assert_eq!(
        thread_counts(&import(&env, &out)),
        ((0.0, 2.0, 0.0, 1.0), vec![])
    );
    let shown = env.show(&t);
    assert_eq!(shown.get("head").unwrap().as_str(), Some(last.as_str()));
    assert_eq!(shown.get("status").unwrap().as_str(), Some("completed"));
    assert!(!env.ok(&["thread", "list"]).contains(&t));
}

#[test]
fn first_use_imports_the_layout_and_leaves_files_alone() {
    let env = TestEnv::new();
    copy_tree(&ts_root(), env.root());
    let before = tree(env.root());
    let r = env.run(&["cas", "has", "DDY7SM1N7BV4G"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("imported the file layout"),
        "{}",
        r.stderr
    );
    let mut after = tree(env.root());
    after.remove("uwf.redb");
    // The process's log is the one other file it writes.
    after.retain(|k, _| !k.starts_with("logs/"));
    assert_eq!(after, before);
    // Only once.
    let r = env.run(&["cas", "has", "DDY7SM1N7BV4G"]);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    let s = env.store();
    assert_eq!(s.threads().unwrap().len(), 3);
    assert_eq!(s.registry().unwrap().len(), 2);
}

#[test]
fn conflicting_names_are_kept_unless_overwrite() {
    let env = TestEnv::new();
    let src = tempfile::tempdir().unwrap();
    copy_tree(&ts_root(), src.path());
    env.ok(&["import", src.path().to_str().unwrap()]);
    let s = env.store();
    let (thread, rec) = s.threads().unwrap().into_iter().next().unwrap();
    let (name, wf) = s.registry().unwrap().into_iter().next().unwrap();
    drop(s);
    // Point the thread at another StartNode and the name at another workflow.
    let other_start = "2B77HPWKR4V3V";
    env.ok(&[
        "cas",
        "put",
        "44P8EP6N3NXZ5",
        r#"{"workflow":"DDY7SM1N7BV4G","prompt":"Is Rust better than Go?","cwd":"/tmp/x"}"#,
    ]);
    let other_wf = fs::read_to_string(src.path().join("workflows.yaml")).unwrap();
    let other_wf_id = other_wf
        .lines()
        .map(|l| l.split(": ").nth(1).unwrap().to_string())
        .find(|h| *h != wf.to_wire())
        .unwrap();
    fs::write(
        src.path().join("threads.yaml"),
        format!("{thread}: {other_start}\n"),
    )
    .unwrap();
    fs::write(
        src.path().join("workflows.yaml"),
        format!("{name}: {other_wf_id}\n"),
    )
    .unwrap();
    fs::remove_file(src.path().join("history.jsonl")).unwrap();

    let r = env.run(&["import", src.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("thread {thread} exists with another head; kept")),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains(&format!("workflow \"{name}\" exists with another id; kept")),
        "{}",
        r.stderr
    );
    let s = env.store();
    assert_eq!(s.thread(&thread).unwrap().unwrap().head, rec.head);
    drop(s);

    env.ok(&["import", "--overwrite", src.path().to_str().unwrap()]);
    let s = env.store();
    assert_eq!(
        s.thread(&thread).unwrap().unwrap().head.to_wire(),
        other_start
    );
    let reg: BTreeMap<_, _> = s.registry().unwrap().into_iter().collect();
    assert_eq!(reg[&name].to_wire(), other_wf_id);
    assert_eq!(
        s.registry_history(&name).unwrap().len(),
        2,
        "both versions are kept"
    );
}

#[test]
fn bad_layout_is_reported_and_nothing_escapes() {
    let env = TestEnv::new();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("layout");
    copy_tree(&crate::interchange::fixture("interchange/bad"), &dir);
    // Cases made at test time: symlinks out of DIR, a directory named like a node file.
    let outside = work.path().join("outside.bin");
    fs::write(&outside, b"secret").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("cas/5555555555555.bin")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("threads-link.yaml")).unwrap();
    fs::create_dir_all(dir.join("cas/6666666666666.bin")).unwrap();
    let dir_before = tree(&dir);
    let work_before = tree(work.path());

    let r = env.run(&["import", dir.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let problems = json(&r.stdout)
        .get("problems")
        .unwrap()
        .as_array()
        .unwrap()
        .clone();
    assert!(problems.len() >= 8, "{problems:?}");
    for p in &problems {
        let p = p.as_str().unwrap();
        assert!(!p.contains('\n'), "one line: {p:?}");
        assert!(r.stderr.contains(p), "{p} on stderr");
    }
    let all = r.stderr.clone();
    for needle in [
        "5555555555555.bin",
        "6666666666666.bin",
        "not-an-id.bin",
        "1111111111111.bin",
        "history.jsonl",
    ] {
        assert!(all.contains(needle), "{needle} reported in {all}");
    }
    assert!(all.contains("import finished with"), "{all}");
    assert_eq!(tree(&dir), dir_before, "the layout is only read");
    assert_eq!(tree(work.path()), work_before, "nothing written beside it");
    // The good nodes of the corpus are in, and the store is sound.
    assert_eq!(
        json(&env.ok(&["cas", "verify"]))
            .get("status")
            .unwrap()
            .as_str(),
        Some("ok")
    );
}

#[test]
fn oversized_node_is_skipped_without_reading_it() {
    let env = TestEnv::new();
    let work = tempfile::tempdir().unwrap();
    fs::create_dir_all(work.path().join("cas")).unwrap();
    let big = fs::File::create(work.path().join("cas/7777777777777.bin")).unwrap();
    big.set_len(100 << 20).unwrap();
    let r = env.run(&["import", work.path().to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("7777777777777.bin"), "{}", r.stderr);
    assert!(
        r.stderr.to_lowercase().contains("larger") || r.stderr.contains("limit"),
        "{}",
        r.stderr
    );
}

/// Writes `n` nodes as thread-like chains, with threads, registry entries and history.
pub(crate) fn populate(s: &Store, n: usize) -> (Vec<String>, usize) {
    let text = NodeId::parse("7VQ43ZSJTEWA7").unwrap();
    let start_t = NodeId::parse("44P8EP6N3NXZ5").unwrap();
    let step_t = NodeId::parse("108DB063KRQWW").unwrap();
    let wf_t = NodeId::parse("AZF3FA1TN3D4A").unwrap();
    let wf = s
        .prepare(
            wf_t,
            &Value::from_json_str(r#"{"name":"wf","description":"d","roles":{},"graph":{}}"#)
                .unwrap(),
            true,
        )
        .unwrap();
    s.put(std::slice::from_ref(&wf), 1).unwrap();
    let mut threads = Vec::new();
    let mut written = 1;
    let mut t = 0u64;
    while written < n {
        let mut batch = Vec::new();
        let start = s
            .prepare(
                start_t,
                &Value::from_json_str(&format!(
                    r#"{{"workflow":"{}","prompt":"task {t}","cwd":"/w"}}"#,
                    wf.id
                ))
                .unwrap(),
                true,
            )
            .unwrap();
        let mut prev = "null".to_string();
        let mut head = start.id;
        batch.push(start.clone());
        for i in 0..48 {
            let out = s
                .prepare(
                    text,
                    &Value::str(format!("thread {t} step {i} {}", "o".repeat(200))),
                    true,
                )
                .unwrap();
            let step = s
                .prepare(step_t, &Value::from_json_str(&format!(
                    r#"{{"start":"{}","prev":{prev},"role":"r{}","output":"{}","detail":"{}","agent":"a","startedAtMs":{i},"completedAtMs":{},"cwd":"/w"}}"#,
                    start.id, i % 3, out.id, out.id, i + 1
                )).unwrap(), true)
                .unwrap();
            prev = format!("\"{}\"", step.id);
            head = step.id;
            batch.push(out);
            batch.push(step);
        }
        written += batch.len();
        s.put(&batch, 1_700_000_000_000 + t).unwrap();
        let id = format!("06F8B8A800{:016}", t);
        s.write(|w| {
            if t.is_multiple_of(4) {
                w.append_history(&HistoryEntry {
                    thread: id.clone(),
                    workflow: wf.id.into(),
                    head: head.into(),
                    completed_at: 5 + t,
                    reason: "completed".into(),
                })
            } else {
                w.set_thread(
                    &ThreadId::parse(&id).unwrap(),
                    &ThreadRecord {
                        head,
                        workflow: Some(wf.id),
                        updated_ms: 0,
                    },
                )
            }
        })
        .unwrap();
        threads.push(id);
        t += 1;
    }
    s.write(|w| w.registry_set("wf", wf.id, 9)).unwrap();
    (threads, written)
}

/// Export of a store of many nodes imported into an empty one: the same ids, bytes, heads,
/// registry and history. `UWF_TEST_ROUND_TRIP_NODES` sets the size (20,000; the scale check is
/// 100,000 and more, which writes one file per node).
#[test]
fn round_trip_of_many_nodes() {
    let n: usize = std::env::var("UWF_TEST_ROUND_TRIP_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let work = tempfile::tempdir().unwrap();
    let a = Store::open(&work.path().join("a.redb")).unwrap();
    let (_, written) = populate(&a, n);
    assert!(written >= n);
    let out = work.path().join("layout");
    let rep = transfer::export(&a, &out, &|_, _, _| {}).unwrap();
    assert_eq!(rep.nodes, a.node_count().unwrap());

    let b = Store::open(&work.path().join("b.redb")).unwrap();
    let r = transfer::import(&b, &out, ImportOptions::default(), &|_, _, _| {}).unwrap();
    assert!(
        r.problems.is_empty(),
        "{:?}",
        &r.problems[..r.problems.len().min(5)]
    );
    assert_eq!(r.nodes.imported + r.nodes.present, rep.nodes);

    let mut na = Vec::new();
    a.for_each_node::<uwf::store::StoreError>(|n| {
        na.push((n.id, n.type_id, n.timestamp, n.digest));
        Ok(())
    })
    .unwrap();
    let mut nb = Vec::new();
    b.for_each_node::<uwf::store::StoreError>(|n| {
        nb.push((n.id, n.type_id, n.timestamp, n.digest));
        Ok(())
    })
    .unwrap();
    assert_eq!(na.len(), nb.len());
    assert!(na == nb, "same ids, types, timestamps and bytes");
    let heads = |s: &Store| {
        s.threads()
            .unwrap()
            .into_iter()
            .map(|(t, r)| (t, r.head))
            .collect::<Vec<_>>()
    };
    assert_eq!(heads(&a), heads(&b));
    assert_eq!(a.registry().unwrap(), b.registry().unwrap());
    let hist = |s: &Store| {
        let mut v = Vec::new();
        s.for_each_history::<uwf::store::StoreError>(|e| {
            v.push(e);
            Ok(())
        })
        .unwrap();
        v
    };
    assert_eq!(hist(&a), hist(&b));
    assert!(b.verify(&|_, _| {}).unwrap().is_clean());
}

fn bin_files(dir: &Path) -> usize {
    fs::read_dir(dir.join("cas"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".bin"))
                .count()
        })
        .unwrap_or(0)
}

/// An export killed half way and run again gives the same files as an export never stopped;
/// an import killed half way and run again gives the whole store.
#[test]
fn interrupted_export_and_import_resume() {
    let env = TestEnv::new();
    {
        let s = env.store();
        populate(&s, 20_000);
    }
    let clean = env.root().join("clean");
    env.ok(&["export", clean.to_str().unwrap()]);
    let total = bin_files(&clean);

    let out = env.root().join("out");
    let mut child = env
        .std_cmd()
        .args(["export", out.to_str().unwrap()])
        .spawn()
        .unwrap();
    while bin_files(&out) < total / 4 {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("export ended before it could be interrupted: {st}");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(bin_files(&out) < total, "killed before the end");
    env.ok(&["export", out.to_str().unwrap()]);
    let strip = |mut t: BTreeMap<String, String>| {
        t.retain(|k, _| !k.ends_with(".tmp"));
        t
    };
    assert_eq!(strip(tree(&out)), strip(tree(&clean)));

    let other = TestEnv::new();
    let mut child = other
        .std_cmd()
        .args(["import", clean.to_str().unwrap()])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(150));
    let _ = child.kill();
    child.wait().unwrap();
    other.ok(&["import", clean.to_str().unwrap()]);
    let a = env.store();
    let b = other.store();
    assert_eq!(a.node_count().unwrap(), b.node_count().unwrap());
    assert_eq!(a.threads().unwrap().len(), b.threads().unwrap().len());
    assert!(b.verify(&|_, _| {}).unwrap().is_clean());
}

/// Nodes typed by a schema of the layout are imported whatever order their files are read in:
/// with the layout's schema index (schemas read first), without it (a node waits for its
/// schema), and with a commit every few nodes (a node waits for its schema's commit).
#[test]
fn nodes_typed_by_imported_schemas_import_in_any_order() {
    let work = tempfile::tempdir().unwrap();
    let indexed = work.path().join("indexed");
    copy_tree(&ts_root(), &indexed);
    let bare = work.path().join("bare");
    copy_tree(&ts_root(), &bare);
    fs::remove_dir_all(bare.join("cas/_index")).unwrap();
    let nodes = |s: &Store| {
        let mut v = Vec::new();
        s.for_each_node::<uwf::store::StoreError>(|n| {
            v.push((n.id, n.type_id, n.timestamp, n.digest));
            Ok(())
        })
        .unwrap();
        v
    };
    let mut first: Option<Vec<_>> = None;
    for (i, (dir, batch)) in [(&indexed, 8192), (&bare, 8192), (&indexed, 3), (&bare, 3)]
        .into_iter()
        .enumerate()
    {
        let s = Store::open(&work.path().join(format!("{i}.redb"))).unwrap();
        let builtin: Vec<NodeId> = nodes(&s).into_iter().map(|n| n.0).collect();
        let opts = ImportOptions {
            batch,
            ..ImportOptions::default()
        };
        let r = transfer::import(&s, dir, opts, &|_, _, _| {}).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.nodes.imported + r.nodes.present, 199);
        let got = nodes(&s);
        // The case this test is about: a node whose schema came with the import and sorts
        // after it, so an id-ordered read meets the node first.
        assert!(
            got.iter()
                .any(|n| !builtin.contains(&n.1) && n.1.0 > n.0.0 && n.1 != n.0),
            "the fixture has a node read before its schema"
        );
        assert!(s.verify(&|_, _| {}).unwrap().is_clean());
        match &first {
            None => first = Some(got),
            Some(f) => assert!(*f == got, "the same nodes whatever the order and batch"),
        }
    }
}

/// A node file cut short (what a killed export leaves behind) is replaced by the next export,
/// and a file already right is left alone.
#[test]
fn export_repairs_a_partial_node_file() {
    let env = TestEnv::new();
    env.ok(&["import", ts_root().to_str().unwrap()]);
    let out = env.root().join("out");
    env.ok(&["export", out.to_str().unwrap()]);
    let clean = tree(&out);
    let victim = fs::read_dir(out.join("cas"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "bin"))
        .unwrap();
    let bytes = fs::read(&victim).unwrap();
    fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let r = json(&env.ok(&["export", out.to_str().unwrap()]));
    assert_eq!(r.get("written").and_then(Value::as_f64), Some(1.0));
    assert_eq!(r.get("unchanged").and_then(Value::as_f64), Some(198.0));
    assert_eq!(tree(&out), clean);
}

/// A node file that cannot be written stops the export with an error naming it, also when the
/// store holds many more nodes than the writers' queue (the walk must not wait for writers
/// that have stopped).
#[test]
fn export_stops_with_an_error_when_node_files_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let text = NodeId::parse(uwf::cas::bootstrap::ids::TEXT).unwrap();
    let batch: Vec<_> = (0..5000)
        .map(|i| s.prepare(text, &Value::str(format!("n{i}")), true).unwrap())
        .collect();
    s.put(&batch, 1).unwrap();
    let out = dir.path().join("out");
    fs::create_dir_all(out.join("cas")).unwrap();
    // Every node file's name is taken by a directory.
    let mut ids = Vec::new();
    s.for_each_node::<uwf::store::StoreError>(|n| {
        ids.push(n.id);
        Ok(())
    })
    .unwrap();
    for id in &ids {
        fs::create_dir(out.join("cas").join(format!("{id}.bin"))).unwrap();
    }
    // On its own thread, so that a hang fails the test instead of stalling it.
    let (done, result) = std::sync::mpsc::channel();
    let path = out.clone();
    std::thread::spawn(move || {
        let r = transfer::export(&s, &path, &|_, _, _| {}).map(|_| ());
        let _ = done.send(r.map_err(|e| e.to_string()));
    });
    let e = result
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the export returns instead of hanging")
        .expect_err("the export fails");
    assert!(
        e.contains(".bin") && e.contains("not a regular file"),
        "{e}"
    );
}
