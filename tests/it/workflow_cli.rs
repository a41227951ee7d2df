//! `uwf workflow …` through the real binary.

use crate::common::{TestEnv, json};
use std::path::PathBuf;

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
    let env = TestEnv::fixed();
    insta::assert_snapshot!(env.transcript(&format!("workflow put {}", p("debate.yaml"))), @r#"{"name":"debate","hash":"DDY7SM1N7BV4G"}"#);
    insta::assert_snapshot!(env.transcript(&format!("workflow add {}", p("review-loop.yaml"))), @r#"{"name":"review-loop","hash":"AZAY8RX9BJ358"}"#);
    // The role schemas are stored as schema nodes with the reference ids.
    for id in ["CC1TJZFP1CW44", "9X16DR9CPBZS0"] {
        env.ok(&["cas", "schema", "get", id]);
    }
    insta::assert_snapshot!(env.transcript("workflow list"), @r#"[{"name":"debate","hash":"DDY7SM1N7BV4G","origin":"global"},{"name":"review-loop","hash":"AZAY8RX9BJ358","origin":"global"}]"#);
    insta::assert_snapshot!(env.transcript("workflow show debate"), @r#"{"hash":"DDY7SM1N7BV4G","name":"debate","type":"AZF3FA1TN3D4A","payload":{"name":"debate","graph":{"for":{"conceded":{"role":"$END","prompt":"The for side conceded. Debate over.","location":null},"continue":{"role":"against","prompt":"Counter the opposing argument: {{{argument}}}","location":null}},"$START":{"_":{"role":"against","prompt":"Present your opening argument against the proposition.","location":null}},"against":{"conceded":{"role":"$END","prompt":"The against side conceded. Debate over.","location":null},"continue":{"role":"for","prompt":"Counter the opposing argument: {{{argument}}}","location":null}}},"roles":{"for":{"goal":"You are a skilled debater arguing FOR the proposition.\nBe logical, cite evidence, and directly address your opponent's points.\nKeep each argument concise (under 200 words).\n","output":"Provide your argument in the frontmatter.\nSet status to \"conceded\" ONLY if you are genuinely convinced and wish to stop debating.\nOtherwise set status to \"continue\".\n","procedure":"1. Read the opposing side's latest argument carefully.\n2. Counter their points with evidence and logic.\n3. If you find yourself genuinely convinced by the other side, you may concede.\n","description":"Argues for the proposition","frontmatter":"9X16DR9CPBZS0","capabilities":["argumentation","critical-thinking"]},"against":{"goal":"You are a skilled debater arguing AGAINST the proposition.\nBe logical, cite evidence, and directly address your opponent's points.\nKeep each argument concise (under 200 words).\n","output":"Provide your argument in the frontmatter.\nSet status to \"conceded\" ONLY if you are genuinely convinced and wish to stop debating.\nOtherwise set status to \"continue\".\n","procedure":"1. If this is the opening, present your strongest argument against the proposition.\n2. If responding to the other side, directly counter their points with evidence and logic.\n3. If you find yourself genuinely convinced by the other side, you may concede.\n","description":"Argues against the proposition","frontmatter":"CC1TJZFP1CW44","capabilities":["argumentation","critical-thinking"]}},"description":"Structured debate between two sides. Tests cross-process session resume."},"timestamp":1767225600000}"#);
    insta::assert_snapshot!(env.transcript("--format yaml workflow show DDY7").lines().take(4).collect::<Vec<_>>().join("\n"), @"
    hash: DDY7SM1N7BV4G
    name: debate
    type: AZF3FA1TN3D4A
    payload:
    ");

    // A second version under the same name, then rollback.
    let text = std::fs::read_to_string(wf("debate.yaml"))
        .unwrap()
        .replace("Structured debate", "A debate");
    let v2 = env.root().join("debate.yaml");
    std::fs::write(&v2, text).unwrap();
    insta::assert_snapshot!(env.transcript(&format!("workflow put {}", v2.display())), @r#"{"name":"debate","hash":"9SYFPMYJWTZ2J"}"#);
    insta::assert_snapshot!(env.transcript("workflow history debate"), @r#"{"name":"debate","versions":[{"hash":"DDY7SM1N7BV4G","registeredAt":1767225600000,"current":false},{"hash":"9SYFPMYJWTZ2J","registeredAt":1767225600000,"current":true}]}"#);
    insta::assert_snapshot!(env.transcript("workflow rollback debate"), @r#"{"name":"debate","hash":"DDY7SM1N7BV4G","previous":"9SYFPMYJWTZ2J"}"#);
    insta::assert_snapshot!(env.transcript("workflow show debate").get(..22).unwrap_or(""), @r#"{"hash":"DDY7SM1N7BV4G"#);
    insta::assert_snapshot!(env.transcript("workflow rollback debate 9SYFPMYJWTZ2J"), @r#"{"name":"debate","hash":"9SYFPMYJWTZ2J","previous":"DDY7SM1N7BV4G"}"#);
    insta::assert_snapshot!(env.transcript("workflow show debate").get(..22).unwrap_or(""), @r#"{"hash":"9SYFPMYJWTZ2J"#);
    insta::assert_snapshot!(env.transcript("workflow rollback debate 95ST8MZ0QTKP9"), @r#"
    ! 95ST8MZ0QTKP9 is not a version of workflow "debate"; run "uwf workflow history debate"
    [exit 1]
    "#);
}

#[test]
fn graphs_draw_both_forms() {
    let env = TestEnv::fixed();
    env.ok(&["workflow", "put", &p("debate.yaml")]);
    env.ok(&["workflow", "put", &p("solve-issue.yaml")]);
    let m = env.ok(&["workflow", "show", "debate", "--graph", "mermaid"]);
    assert!(m.starts_with("flowchart"), "{m}");
    assert!(m.contains("conceded"), "{m}");
    let d = env.ok(&["workflow", "show", "solve-issue", "--graph", "dot"]);
    assert!(d.starts_with("digraph"), "{d}");
    assert!(d.contains("notApproved"), "{d}");
    // A usage error: clap's whole message and its exit code.
    insta::assert_snapshot!(env.transcript("workflow show debate --graph png"), @r#"
    ! error: invalid value 'png' for '--graph <FORMAT>': unknown graph format "png"; use "mermaid" or "dot"
    ! 
    ! For more information, try '--help'.
    [exit 2]
    "#);
}

#[test]
fn validate_reports_every_error_together() {
    let env = TestEnv::fixed();
    let f = env.root().join("broken.yaml");
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
    insta::assert_snapshot!(env.transcript(&format!("workflow validate {}", f.display())), @r#"
    ! workflow validation failed:
    !   - reserved name "$START" must not appear in roles
    !   - $END must not have outgoing edges
    !   - edge worker→done: unknown target role "ghost"
    !   - role "isolated" is not reachable from $START
    !   - role "worker" graph has extra status keys: timeout
    !   - role "worker" graph is missing status keys: failed
    !   - prompt variable "nothere" in graph[worker][timeout] not found in role "worker" frontmatter
    [exit 1]
    "#);
}

#[test]
fn bad_workflows_change_nothing() {
    let env = TestEnv::fixed();
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
    insta::assert_snapshot!(env.transcript("workflow show deploy"), @r#"
    ! unknown workflow "deploy"; run "uwf workflow list" to see registered names
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("workflow history deploy"), @r#"
    ! unknown workflow "deploy"; run "uwf workflow list" to see registered names
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("workflow show 95ST"), @r#"
    ! unknown workflow "95ST"; run "uwf workflow list" to see registered names
    [exit 1]
    "#);
    assert_eq!(env.ok(&["workflow", "list"]), before);
    assert_eq!(nodes(), n0);
}
