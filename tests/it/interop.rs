//! What an export and an import keep across the two tools: uwf's transition-list workflows go
//! to `uwf.jsonl` and come back whole, the TypeScript tool's root files list only what it reads,
//! and an import keeps what the TypeScript tool kept (nodes of any type, any thread id, a
//! history line it added). Every case starts from the TypeScript tool's fixture root.

use crate::common::{TestEnv, example, json};
use crate::interchange::{copy_tree, ts_root};
use std::fs;
use std::path::Path;
use uwf::cas::{NodeId, Value, cbor};

/// The TypeScript tool's Workflow schema.
const TS_WORKFLOW: &str = "AZF3FA1TN3D4A";

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string {k:?} in {}", v.to_json()))
}

/// A home holding the TypeScript fixture root, imported.
fn ts_home() -> TestEnv {
    let env = TestEnv::new();
    let r = env.run(&["import", ts_root().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    env
}

/// The type of stored node `id`.
fn type_of(env: &TestEnv, id: &str) -> String {
    s(&json(&env.ok(&["cas", "get", id])), "type").to_string()
}

/// Every line of `path` (empty when absent).
fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// `name: ID` entries of a YAML map written by the export.
fn yaml_values(path: &Path) -> Vec<(String, String)> {
    lines(path)
        .iter()
        .filter_map(|l| l.split_once(": "))
        .map(|(a, b)| (a.to_string(), b.trim_matches('"').to_string()))
        .collect()
}

/// What a home shows of its workflows, registry history and threads.
fn state(env: &TestEnv) -> Vec<String> {
    let mut out = vec![env.ok(&["workflow", "list"])];
    for w in json(&out[0]).as_array().unwrap() {
        out.push(env.ok(&["workflow", "history", s(w, "name")]));
    }
    let list = env.ok(&["thread", "list", "--all"]);
    for t in json(&list).as_array().unwrap() {
        out.push(env.ok(&["thread", "show", s(t, "thread")]));
        out.push(env.ok(&["thread", "steps", s(t, "thread")]));
    }
    out.push(list);
    out
}

/// Every file under `dir` with its bytes, by relative path; the lines of a type index sorted
/// (an import stores nodes in id order, so its index lists them in that order).
fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
                let mut bytes = fs::read(e.path()).unwrap();
                if rel.starts_with("cas/_index/") {
                    let mut l = lines(&e.path());
                    l.sort();
                    bytes = l.join("\n").into_bytes();
                }
                out.insert(rel, bytes);
            }
        }
    }
    out
}

#[test]
fn transition_list_workflows_round_trip_and_stay_out_of_the_typescript_files() {
    let a = ts_home();
    // Three versions of a transition-list workflow: put, changed, rolled back.
    a.ok(&[
        "workflow",
        "put",
        example("solve-issue.yaml").to_str().unwrap(),
    ]);
    let changed = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(example("solve-issue.yaml")).unwrap();
    let text = text.replace(
        "End-to-end issue resolution",
        "Issue resolution, second take",
    );
    fs::write(changed.path().join("solve-issue.yaml"), text).unwrap();
    a.ok(&[
        "workflow",
        "put",
        changed.path().join("solve-issue.yaml").to_str().unwrap(),
    ]);
    let versions = json(&a.ok(&["workflow", "history", "solve-issue"]));
    let first = s(
        &versions.get("versions").unwrap().as_array().unwrap()[0],
        "hash",
    )
    .to_string();
    a.ok(&["workflow", "rollback", "solve-issue", &first]);
    assert_ne!(type_of(&a, &first), TS_WORKFLOW);
    // One of its threads finished, one active, one cancelled; and a cancelled 7a0c thread.
    let agent = a.scripted(&example("solve-issue.script.yaml"));
    let done = a.start("solve-issue", "The parser crashes on empty input");
    a.ok(&["thread", "step", &done, "-c", "10", "--agent", &agent]);
    assert_eq!(s(&a.show(&done), "status"), "completed");
    let active = a.start("solve-issue", "Second issue");
    a.ok(&["thread", "step", &active, "--agent", &agent]);
    let cancelled = a.start("solve-issue", "Third issue");
    a.ok(&["thread", "kill", &cancelled]);
    let ts_cancelled = a.start("debate", "Is Rust better than Go?");
    a.ok(&["thread", "kill", &ts_cancelled]);

    let out = tempfile::tempdir().unwrap();
    let e = out.path().join("e");
    let rep = json(&a.ok(&["export", e.to_str().unwrap()]));
    assert_eq!(
        rep.get("uwfOnly").unwrap().as_f64(),
        Some(9.0),
        "{}",
        rep.to_json()
    );

    // The TypeScript tool's files name only workflows of its schema and their threads.
    let threads = yaml_values(&e.join("threads.yaml"));
    assert_eq!(
        threads.len(),
        3,
        "the fixture's active threads only: {threads:?}"
    );
    for (t, _) in &threads {
        let wf = s(&a.show(t), "workflow").to_string();
        assert_eq!(type_of(&a, &wf), TS_WORKFLOW, "thread {t}");
    }
    for file in ["workflows.yaml", "registry.yaml"] {
        let names = yaml_values(&e.join(file));
        assert_eq!(
            names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["debate", "review-loop"],
            "{file}"
        );
        for (_, id) in &names {
            assert_eq!(type_of(&a, id), TS_WORKFLOW);
        }
    }
    let history = lines(&e.join("history.jsonl"));
    assert_eq!(history.len(), 3, "{history:?}");
    for l in &history {
        assert_eq!(type_of(&a, s(&json(l), "workflow")), TS_WORKFLOW, "{l}");
    }
    assert!(history.iter().any(|l| l.contains(&ts_cancelled)));
    // The rest is in uwf.jsonl: the header, the name, 5 registry versions (2 + 3), one active
    // thread and two finished ones.
    let extra = lines(&e.join("uwf.jsonl"));
    assert_eq!(extra[0], r#"{"kind":"uwf","version":1}"#);
    let kinds: Vec<String> = extra[1..]
        .iter()
        .map(|l| s(&json(l), "kind").to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "thread", "workflow", "registry", "registry", "registry", "registry", "registry",
            "history", "history"
        ]
    );
    assert!(
        extra
            .iter()
            .any(|l| l.contains(&active) && l.contains("\"active\""))
    );
    assert!(
        extra
            .iter()
            .any(|l| l.contains(&done) && l.contains("\"completed\""))
    );
    assert!(
        extra
            .iter()
            .any(|l| l.contains(&cancelled) && l.contains("\"cancelled\""))
    );
    // Every node is in cas/, and the layout's index is complete.
    let verify = json(&a.ok(&["cas", "verify"]));
    let nodes = verify.get("nodes").unwrap().as_f64().unwrap() as usize;
    let bins = fs::read_dir(e.join("cas"))
        .unwrap()
        .filter(|f| {
            f.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "bin")
        })
        .count();
    assert_eq!(bins, nodes);
    let indexed: usize = fs::read_dir(e.join("cas/_index"))
        .unwrap()
        .map(|f| f.unwrap())
        .filter(|f| f.file_name() != "_meta")
        .map(|f| lines(&f.path()).len())
        .sum();
    assert_eq!(indexed, nodes);

    // Into an empty home: everything comes back, and its export is the same bytes.
    let b = TestEnv::new();
    let r = b.run(&["import", e.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert_eq!(state(&b), state(&a));
    let e2 = out.path().join("e2");
    b.ok(&["export", e2.to_str().unwrap()]);
    let (f1, f2) = (files(&e), files(&e2));
    let differ: Vec<&String> = f1
        .keys()
        .chain(f2.keys())
        .filter(|k| f1.get(*k) != f2.get(*k))
        .collect();
    assert!(differ.is_empty(), "the second export differs: {differ:?}");
    // The active thread goes on in the new home.
    let agent = b.scripted(&example("solve-issue.script.yaml"));
    b.ok(&["thread", "step", &active, "--agent", &agent]);
    // Importing again changes nothing.
    b.ok(&["import", e2.to_str().unwrap()]);
    let again = json(&b.ok(&["import", e2.to_str().unwrap()]));
    for k in ["registry", "history"] {
        let c = again.get(k).unwrap();
        assert_eq!(c.get("imported").unwrap().as_f64(), Some(0.0), "{k}");
    }
    assert_eq!(
        json(&b.ok(&["workflow", "history", "solve-issue"])),
        json(&a.ok(&["workflow", "history", "solve-issue"]))
    );
}

/// Writes a node file of type `type_id` into a layout's `cas/` and its type index; returns its id.
fn add_node(root: &Path, type_id: &str, payload: &str, timestamp: u64) -> String {
    let v = Value::from_json_str(payload).unwrap();
    let bytes = cbor::encode(&v);
    let id = uwf::cas::hash::node_id(NodeId::parse(type_id).unwrap(), &bytes).to_wire();
    fs::write(
        root.join("cas").join(format!("{id}.bin")),
        cbor::encode_node(type_id, &bytes, timestamp),
    )
    .unwrap();
    let index = root.join("cas/_index").join(type_id);
    let mut text = fs::read_to_string(&index).unwrap_or_default();
    text.push_str(&format!("{id}\n"));
    fs::write(index, text).unwrap();
    id
}

#[test]
fn a_node_whose_type_is_not_a_schema_is_kept_with_a_warning() {
    // What the TypeScript tool accepts: `cas put 0000000000000 '{"a":1}'`.
    let src = tempfile::tempdir().unwrap();
    copy_tree(&ts_root(), src.path());
    let id = add_node(src.path(), "0000000000000", r#"{"a":1}"#, 1_767_225_600_123);
    let env = TestEnv::new();
    let r = env.run(&["import", src.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rep = json(&r.stdout);
    let warnings = rep.get("warnings").unwrap().as_array().unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].as_str().unwrap().contains(&id),
        "{}",
        rep.to_json()
    );
    assert!(
        r.stderr.contains("warning:") && r.stderr.contains(&id),
        "{}",
        r.stderr
    );
    assert_eq!(rep.get("problems").unwrap().as_array().unwrap().len(), 0);
    let got = json(&env.ok(&["cas", "get", &id, "--timestamp"]));
    assert_eq!(s(&got, "type"), "0000000000000");
    assert_eq!(got.get("payload").unwrap().to_json(), r#"{"a":1}"#);
    assert_eq!(
        got.get("timestamp").unwrap().as_f64(),
        Some(1_767_225_600_123.0)
    );
    assert_eq!(
        json(&env.ok(&["cas", "refs", &id]))
            .get("refs")
            .unwrap()
            .to_json(),
        "[]"
    );
    // verify: a warning, not damage; reindex keeps it.
    let r = env.run(&["cas", "verify"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json(&r.stdout);
    assert_eq!(s(&v, "status"), "ok");
    assert_eq!(v.get("warningCount").unwrap().as_f64(), Some(1.0));
    assert!(r.stderr.contains(&id), "{}", r.stderr);
    env.ok(&["cas", "reindex"]);
    assert_eq!(s(&json(&env.ok(&["cas", "verify"])), "status"), "ok");
    // And it goes out again as it came in.
    let out = tempfile::tempdir().unwrap();
    env.ok(&["export", out.path().to_str().unwrap()]);
    let name = format!("cas/{id}.bin");
    assert_eq!(
        fs::read(out.path().join(&name)).unwrap(),
        fs::read(src.path().join(&name)).unwrap()
    );
    assert_eq!(lines(&out.path().join("cas/_index/0000000000000")), [id]);
}

/// The first active thread of the fixture: (id, head, StartNode).
fn fixture_thread(env: &TestEnv) -> (String, String, String) {
    let (t, head) = yaml_values(&ts_root().join("threads.yaml"))[0].clone();
    let n = json(&env.ok(&["cas", "get", &head]));
    let start = match n.get("payload").unwrap().get("start") {
        Some(s) => s.as_str().unwrap().to_string(),
        None => head.clone(),
    };
    (t, head, start)
}

/// A StepNode of the thread of `start` after `prev`, put into `env`; returns its id.
fn put_step(env: &TestEnv, start: &str, prev: &str, text: &str) -> String {
    let out = s(&json(&env.ok(&["cas", "put-text", text])), "hash").to_string();
    let step = format!(
        r#"{{"start":"{start}","prev":"{prev}","role":"for","output":"{out}","detail":"{out}","agent":"ts","startedAtMs":1767300000000,"completedAtMs":1767300001000,"cwd":"/tmp"}}"#
    );
    s(
        &json(&env.ok(&["cas", "put", "108DB063KRQWW", &step])),
        "hash",
    )
    .to_string()
}

/// Exports `env` to `dir`, then edits the layout as the TypeScript tool would finish `thread`
/// at `head`: gone from `threads.yaml`, a line in `history.jsonl`.
fn finish_in_layout(env: &TestEnv, dir: &Path, thread: &str, workflow: &str, head: &str) {
    env.ok(&["export", dir.to_str().unwrap()]);
    let kept: String = lines(&dir.join("threads.yaml"))
        .into_iter()
        .filter(|l| !l.starts_with(thread))
        .map(|l| l + "\n")
        .collect();
    fs::write(dir.join("threads.yaml"), kept).unwrap();
    let mut h = fs::read_to_string(dir.join("history.jsonl")).unwrap();
    h.push_str(&format!(
        "{{\"thread\":\"{thread}\",\"workflow\":\"{workflow}\",\"head\":\"{head}\",\"completedAt\":1767300002000,\"reason\":\"completed\"}}\n"
    ));
    fs::write(dir.join("history.jsonl"), h).unwrap();
}

#[test]
fn a_history_line_that_continues_an_active_thread_finishes_it() {
    let a = ts_home();
    let (t, head, start) = fixture_thread(&a);
    let wf = s(&a.show(&t), "workflow").to_string();
    // Elsewhere (the TypeScript tool on the export) the thread took two more steps and ended.
    let elsewhere = ts_home();
    let n1 = put_step(&elsewhere, &start, &head, "one");
    let n2 = put_step(&elsewhere, &start, &n1, "two");
    let out = tempfile::tempdir().unwrap();
    finish_in_layout(&elsewhere, out.path(), &t, &wf, &n2);
    assert_eq!(s(&a.show(&t), "status"), "idle");
    let r = a.run(&["import", out.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    let shown = a.show(&t);
    assert_eq!(s(&shown, "status"), "completed", "{}", shown.to_json());
    assert_eq!(s(&shown, "head"), n2);
    // It is finished for good: no longer among the active threads.
    let active = json(&a.ok(&["thread", "list"]));
    assert!(!active.to_json().contains(&t), "{}", active.to_json());
}

#[test]
fn a_history_line_that_does_not_continue_the_thread_is_a_conflict() {
    let a = ts_home();
    let (t, head, start) = fixture_thread(&a);
    let wf = s(&a.show(&t), "workflow").to_string();
    // A step on another branch: its prev is the StartNode, not the thread's head.
    let elsewhere = ts_home();
    assert_ne!(head, start, "the fixture thread has steps");
    let other = put_step(&elsewhere, &start, &start, "another branch");
    let out = tempfile::tempdir().unwrap();
    finish_in_layout(&elsewhere, out.path(), &t, &wf, &other);
    let r = a.run(&["import", out.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "a conflict is a warning: {}", r.stderr);
    assert!(
        r.stderr.contains(&t) && r.stderr.contains("does not continue it"),
        "{}",
        r.stderr
    );
    let rep = json(&r.stdout);
    assert_eq!(rep.get("conflicts").unwrap().as_array().unwrap().len(), 1);
    let shown = a.show(&t);
    assert_eq!(s(&shown, "status"), "idle");
    assert_eq!(s(&shown, "head"), head);
}

#[test]
fn any_thread_id_the_typescript_tool_wrote_is_imported_and_addressable() {
    let src = tempfile::tempdir().unwrap();
    copy_tree(&ts_root(), src.path());
    let (_, head) = yaml_values(&ts_root().join("threads.yaml"))[0].clone();
    let odd = "01JTEST000000000000CANCEL4";
    let mut text = fs::read_to_string(src.path().join("threads.yaml")).unwrap();
    text.push_str(&format!("{odd}: {head}\n"));
    fs::write(src.path().join("threads.yaml"), text).unwrap();
    let env = TestEnv::new();
    let r = env.run(&["import", src.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let shown = env.show(odd);
    assert_eq!(s(&shown, "thread"), odd);
    assert_eq!(s(&shown, "head"), head);
    assert_eq!(s(&shown, "status"), "idle");
    // In any case, like every id.
    assert_eq!(env.show(&odd.to_ascii_lowercase()), shown);
    env.ok(&["thread", "steps", odd]);
    env.ok(&["thread", "read", odd]);
    // A prefix resolves; other characters are refused in one line.
    assert_eq!(env.show("01jtest000000000000cancel"), shown);
    env.fails(
        &["thread", "show", "01JTEST00000000000-CANCEL4"],
        "invalid thread id",
    );
    // It goes out as it came in, and can be cancelled.
    let out = tempfile::tempdir().unwrap();
    env.ok(&["export", out.path().to_str().unwrap()]);
    assert!(lines(&out.path().join("threads.yaml")).contains(&format!("{odd}: {head}")));
    env.ok(&["thread", "kill", odd]);
    assert_eq!(s(&env.show(odd), "status"), "cancelled");
}

/// `uwf` with the TypeScript tool's variables only (no `UWF_HOME`): `HOME` and the root
/// `UNCAGED_WORKFLOW_STORAGE_ROOT`, plus `extra`.
fn ts_way(home: &Path, root: &Path, extra: &[(&str, &Path)], args: &[&str]) -> crate::common::Run {
    let mut c = std::process::Command::new(crate::common::uwf_bin());
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("UNCAGED_WORKFLOW_STORAGE_ROOT", root)
        .args(args);
    for (k, v) in extra {
        c.env(k, v);
    }
    let out = c.output().expect("run uwf");
    crate::common::Run::from(out)
}

/// The TypeScript CLI's own nodes in `~/.uncaged/json-cas` (its default, a root with no
/// `cas/`), in `$UNCAGED_CAS_DIR`, or named with `uwf import --cas`: all are imported, and
/// the threads read as in a root that holds its CAS itself.
#[test]
fn a_root_whose_cas_is_in_json_cas_imports_whole() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join(".uncaged/workflow");
    copy_tree(&ts_root(), &root);
    let json_cas = home.path().join(".uncaged/json-cas");
    fs::rename(root.join("cas"), &json_cas).unwrap();
    let r = ts_way(home.path(), &root, &[], &["thread", "list", "--all"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let threads = json(&r.stdout);
    assert_eq!(threads.as_array().unwrap().len(), 5, "{}", r.stdout);
    for t in threads.as_array().unwrap() {
        let id = t.get("thread").unwrap().as_str().unwrap();
        let r = ts_way(home.path(), &root, &[], &["thread", "steps", id]);
        assert_eq!(r.code, 0, "{id}: {}", r.stderr);
    }
    let r = ts_way(home.path(), &root, &[], &["cas", "verify"]);
    assert_eq!(r.code, 0, "{}", r.stdout);

    // UNCAGED_CAS_DIR names it, whatever the root.
    let home2 = tempfile::tempdir().unwrap();
    let root2 = home2.path().join("root");
    copy_tree(&ts_root(), &root2);
    let elsewhere = home2.path().join("elsewhere");
    fs::rename(root2.join("cas"), &elsewhere).unwrap();
    let r = ts_way(
        home2.path(),
        &root2,
        &[("UNCAGED_CAS_DIR", &elsewhere)],
        &["thread", "list", "--all"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(json(&r.stdout).as_array().unwrap().len(), 5);

    // `uwf import DIR --cas X` into a uwf home.
    let env = TestEnv::new();
    let src = tempfile::tempdir().unwrap();
    copy_tree(&ts_root(), src.path());
    let cas = home.path().join("cas-copy");
    fs::rename(src.path().join("cas"), &cas).unwrap();
    let out = env.ok(&[
        "import",
        &src.path().display().to_string(),
        "--cas",
        &cas.display().to_string(),
    ]);
    assert!(
        json(&out)
            .get("nodes")
            .unwrap()
            .get("imported")
            .unwrap()
            .as_f64()
            .unwrap()
            > 100.0
    );
    assert_eq!(
        json(&env.ok(&["thread", "list", "--all"]))
            .as_array()
            .unwrap()
            .len(),
        5
    );
}
