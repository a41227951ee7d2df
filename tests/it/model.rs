//! The domain rules that several commands share: which nodes are Workflows (import and
//! `thread start` agree), and which names resolve (`workflow list` shows exactly the names
//! `thread start` finds).

use crate::common::{TestEnv, json, workflow_fixture};
use std::fs;
use std::path::Path;
use uwf::cas::Value;

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap()
}

/// Runs `uwf args` in `cwd`.
fn run_in(env: &TestEnv, cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = env.cmd().current_dir(cwd).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Each kind of node, with whether it is a Workflow: the 7a0c Workflow, a WorkflowExt, a node
/// of a schema titled like a workflow, a text node. Import of a `workflows.yaml` naming it and
/// `thread start ID` both accept it or both refuse it.
#[test]
fn import_and_thread_start_accept_the_same_workflow_nodes() {
    let a = TestEnv::new();
    let ts = s(
        &json(&a.ok(&[
            "workflow",
            "put",
            workflow_fixture("debate.yaml").to_str().unwrap(),
        ])),
        "hash",
    )
    .to_string();
    let ext = s(
        &json(&a.ok(&[
            "workflow",
            "put",
            workflow_fixture("solve-issue.yaml").to_str().unwrap(),
        ])),
        "hash",
    )
    .to_string();
    assert_eq!(
        s(&json(&a.ok(&["cas", "get", &ts])), "type"),
        "AZF3FA1TN3D4A"
    );
    assert_eq!(
        s(&json(&a.ok(&["cas", "get", &ext])), "type"),
        "5Y17TTMQ6FQF1"
    );
    let like = s(
        &json(&a.ok(&[
            "cas",
            "schema",
            "put",
            r#"{"title":"WorkflowLike","type":"object"}"#,
        ])),
        "hash",
    )
    .to_string();
    let other = s(
        &json(&a.ok(&["cas", "put", &like, r#"{"name":"x"}"#])),
        "hash",
    )
    .to_string();
    let text = s(
        &json(&a.ok(&["cas", "put", "7VQ43ZSJTEWA7", r#""hello""#])),
        "hash",
    )
    .to_string();
    let cases = [
        ("ts", &ts, true),
        ("ext", &ext, true),
        ("like", &other, false),
        ("text", &text, false),
    ];

    let dir = tempfile::tempdir().unwrap();
    a.ok(&["export", dir.path().to_str().unwrap()]);
    for f in ["uwf.jsonl", "registry.yaml"] {
        let _ = fs::remove_file(dir.path().join(f));
    }
    let map: String = cases
        .iter()
        .map(|(name, id, _)| format!("{name}: {id}\n"))
        .collect();
    fs::write(dir.path().join("workflows.yaml"), map).unwrap();
    let b = TestEnv::new();
    // Refused names are problems: reported, and the rest imported.
    let r = b.run(&["import", dir.path().to_str().unwrap()]);
    assert!(r.stderr.contains("problem"), "{}", r.stderr);
    let listed = json(&b.ok(&["workflow", "list"])).to_json();

    for (name, id, is_workflow) in cases {
        let imported = listed.contains(&format!(r#""name":"{name}""#));
        let cwd = b.root().display().to_string();
        let started = b
            .run(&["thread", "start", id, "-p", "p", "--cwd", &cwd])
            .code
            == 0;
        assert_eq!(imported, is_workflow, "import of {name} ({id}): {listed}");
        assert_eq!(started, is_workflow, "thread start of {name} ({id})");
    }
}

/// A registered name, a `.workflow/` file in the cwd and one in a parent directory: every name
/// `workflow list` prints starts a thread, and every name `thread start` resolves is listed.
#[test]
fn workflow_list_shows_every_name_thread_start_resolves() {
    let env = TestEnv::new();
    env.ok(&[
        "workflow",
        "put",
        workflow_fixture("review-loop.yaml").to_str().unwrap(),
    ]);
    let top = tempfile::tempdir().unwrap();
    let parent = top.path().join("parent");
    let cwd = parent.join("child");
    fs::create_dir_all(cwd.join(".workflow")).unwrap();
    fs::create_dir_all(parent.join(".workflows")).unwrap();
    fs::copy(
        workflow_fixture("debate.yaml"),
        cwd.join(".workflow/debate.yaml"),
    )
    .unwrap();
    let solve = fs::read_to_string(workflow_fixture("solve-issue.yaml")).unwrap();
    fs::write(parent.join(".workflows/solve-issue.yaml"), solve).unwrap();
    // Not names: a hidden file and a file that is no workflow's name.
    fs::write(cwd.join(".workflow/.hidden.yaml"), "x").unwrap();

    let (code, out, err) = run_in(&env, &cwd, &["workflow", "list"]);
    assert_eq!(code, 0, "{err}");
    let list = json(&out);
    let names: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| s(r, "name").to_string())
        .collect();
    assert_eq!(names, ["debate", "solve-issue", "review-loop"], "{out}");
    let where_ = cwd.display().to_string();
    for name in &names {
        let (code, _, err) = run_in(
            &env,
            &cwd,
            &["thread", "start", name, "-p", "p", "--cwd", &where_],
        );
        assert_eq!(code, 0, "listed {name} does not start: {err}");
    }
    for name in ["debate", "solve-issue", "review-loop", "nope", ".hidden"] {
        let (code, _, _) = run_in(
            &env,
            &cwd,
            &["thread", "start", name, "-p", "p", "--cwd", &where_],
        );
        assert_eq!(code == 0, names.iter().any(|n| n == name), "{name}");
    }
    // `workflow show` resolves by the same rules: a local name shows the local file.
    let (code, out, err) = run_in(&env, &cwd, &["workflow", "show", "solve-issue"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(s(&json(&out), "type"), "5Y17TTMQ6FQF1");
}
