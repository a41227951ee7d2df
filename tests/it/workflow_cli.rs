//! `uwf workflow …` through the real binary.

use crate::common::{TestEnv, json};
use std::path::PathBuf;
use uwf::cas::Value;

fn wf(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/workflows")
        .join(rel)
}

fn p(rel: &str) -> String {
    wf(rel).display().to_string()
}

#[test]
fn put_gives_the_typescript_ids_and_keeps_history() {
    let env = TestEnv::new();
    assert_eq!(
        env.ok(&["workflow", "put", &p("debate.yaml")]).trim(),
        r#"{"name":"debate","hash":"DDY7SM1N7BV4G"}"#
    );
    assert_eq!(
        env.ok(&["workflow", "add", &p("review-loop.yaml")]).trim(),
        r#"{"name":"review-loop","hash":"AZAY8RX9BJ358"}"#
    );
    // The role schemas are stored as schema nodes with the reference ids.
    for id in ["CC1TJZFP1CW44", "9X16DR9CPBZS0"] {
        env.ok(&["cas", "schema", "get", id]);
    }
    let list = json(&env.ok(&["workflow", "list"]));
    assert_eq!(
        list.to_json(),
        r#"[{"name":"debate","hash":"DDY7SM1N7BV4G","origin":"global"},{"name":"review-loop","hash":"AZAY8RX9BJ358","origin":"global"}]"#
    );
    let show = json(&env.ok(&["workflow", "show", "debate"]));
    assert_eq!(show.get("type").unwrap().as_str(), Some("AZF3FA1TN3D4A"));
    assert_eq!(
        show.get("payload")
            .unwrap()
            .get("roles")
            .unwrap()
            .get("against")
            .unwrap()
            .get("frontmatter")
            .unwrap()
            .as_str(),
        Some("CC1TJZFP1CW44")
    );
    assert_eq!(
        json(&env.ok(&["workflow", "show", "DDY7"]))
            .get("name")
            .unwrap()
            .as_str(),
        Some("debate")
    );

    // A second version under the same name, then rollback.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(wf("debate.yaml"))
        .unwrap()
        .replace("Structured debate", "A debate");
    let v2 = dir.path().join("debate.yaml");
    std::fs::write(&v2, text).unwrap();
    let h2 = json(&env.ok(&["workflow", "put", v2.to_str().unwrap()]));
    let h2 = h2.get("hash").unwrap().as_str().unwrap().to_string();
    assert_ne!(h2, "DDY7SM1N7BV4G");
    let hist = json(&env.ok(&["workflow", "history", "debate"]));
    let versions: Vec<_> = hist
        .get("versions")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.get("hash").unwrap().as_str().unwrap().to_string())
        .collect();
    assert_eq!(versions, ["DDY7SM1N7BV4G".to_string(), h2.clone()]);
    let rb = json(&env.ok(&["workflow", "rollback", "debate"]));
    assert_eq!(rb.get("hash").unwrap().as_str(), Some("DDY7SM1N7BV4G"));
    assert_eq!(
        json(&env.ok(&["workflow", "show", "debate"]))
            .get("hash")
            .unwrap()
            .as_str(),
        Some("DDY7SM1N7BV4G")
    );
    env.ok(&["workflow", "rollback", "debate", &h2]);
    assert_eq!(
        json(&env.ok(&["workflow", "show", "debate"]))
            .get("hash")
            .unwrap()
            .as_str(),
        Some(h2.as_str())
    );
    env.fails(
        &["workflow", "rollback", "debate", "95ST8MZ0QTKP9"],
        "is not a version of workflow \"debate\"",
    );
}

#[test]
fn graphs_draw_both_forms() {
    let env = TestEnv::new();
    env.ok(&["workflow", "put", &p("debate.yaml")]);
    env.ok(&["workflow", "put", &p("solve-issue.yaml")]);
    let m = env.ok(&["workflow", "show", "debate", "--graph", "mermaid"]);
    assert!(m.starts_with("flowchart"), "{m}");
    assert!(m.contains("conceded"), "{m}");
    let d = env.ok(&["workflow", "show", "solve-issue", "--graph", "dot"]);
    assert!(d.starts_with("digraph"), "{d}");
    assert!(d.contains("notApproved"), "{d}");
    // A usage error: clap's whole message and its exit code.
    let r = env.run(&["workflow", "show", "debate", "--graph", "png"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("unknown graph format \"png\""),
        "{}",
        r.stderr
    );
}

#[test]
fn validate_reports_every_error_together() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("broken.yaml");
    std::fs::write(
        &f,
        r#"name: broken
description: d
roles:
  $START: {description: d, goal: g, capabilities: [], procedure: p, output: o, frontmatter: {type: object}}
  worker: {description: d, goal: g, capabilities: [], procedure: p, output: o, frontmatter: {type: object, properties: {$status: {enum: [done, failed]}}}}
  isolated: {description: d, goal: g, capabilities: [], procedure: p, output: o, frontmatter: {type: object}}
graph:
  $START: {_: {role: worker, prompt: go}}
  worker: {done: {role: ghost, prompt: x}, timeout: {role: $END, prompt: "{{{nothere}}}"}}
  isolated: {_: {role: $END, prompt: bye}}
  $END: {_: {role: worker, prompt: again}}
"#,
    )
    .unwrap();
    let r = env.run(&["workflow", "validate", f.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.starts_with("workflow validation failed:\n  - "),
        "{}",
        r.stderr
    );
    for needle in [
        "reserved name \"$START\"",
        "$END must not have outgoing edges",
        "role \"isolated\" is not reachable from $START",
        "unknown target role \"ghost\"",
        "extra status keys: timeout",
        "missing status keys: failed",
    ] {
        assert!(r.stderr.contains(needle), "{needle} in {}", r.stderr);
    }
    assert!(
        r.stderr.lines().filter(|l| l.starts_with("  - ")).count() >= 6,
        "{}",
        r.stderr
    );
}

#[test]
fn bad_workflows_change_nothing() {
    let env = TestEnv::new();
    env.ok(&["workflow", "put", &p("debate.yaml")]);
    let before = env.ok(&["workflow", "list"]);
    let nodes = || {
        json(&env.ok(&["cas", "verify"]))
            .get("nodes")
            .unwrap()
            .as_f64()
            .unwrap()
    };
    let n0 = nodes();
    for (file, needle) in [
        ("invalid/bad-yaml.yaml", "invalid YAML"),
        ("invalid/unknown-role.yaml", "unknown target role"),
        ("invalid/absolute.yaml", "path traversal blocked"),
        ("invalid/escape/escape.yaml", "path traversal blocked"),
        ("invalid/name-mismatch.yaml", "workflow name mismatch"),
        ("invalid/not-a-workflow.yaml", "invalid workflow YAML"),
        ("does-not-exist.yaml", "file not found"),
    ] {
        let path = wf(file);
        if !path.exists() && !file.starts_with("does-not") {
            continue;
        }
        let r = env.run(&["workflow", "put", path.to_str().unwrap()]);
        assert_eq!(r.code, 1, "{file}");
        assert!(r.stderr.contains(needle), "{file}: {}", r.stderr);
    }
    env.fails(
        &["workflow", "show", "deploy"],
        "unknown workflow \"deploy\"; run \"uwf workflow list\"",
    );
    env.fails(
        &["workflow", "history", "deploy"],
        "unknown workflow \"deploy\"",
    );
    env.fails(&["workflow", "show", "95ST"], "");
    assert_eq!(env.ok(&["workflow", "list"]), before);
    assert_eq!(nodes(), n0);
    let _ = Value::Null;
}
