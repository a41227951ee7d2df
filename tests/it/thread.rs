//! Threads through the real binary: start, step with real agent processes, the checks on what
//! an agent returns, leases and compare-and-swap under concurrency, show/list/steps/read/fork/
//! kill, and threads imported from a TypeScript root.

use crate::common::{TestEnv, example, json, uwf_bin, workflow_fixture};
use std::process::{Command, Stdio};
use uwf::cas::schema::Validator;
use uwf::cas::{NodeId, Value, bootstrap};
use uwf::store::Lease;
use uwf::thread::ThreadId;

fn p(path: &std::path::Path) -> String {
    path.display().to_string()
}

fn debate_script(env: &TestEnv) -> String {
    env.scripted(&example("debate.script.yaml"))
}

fn solve_script(env: &TestEnv) -> String {
    env.scripted(&example("solve-issue.script.yaml"))
}

/// Starts a thread of an example workflow in `/tmp` (node ids do not depend on the root);
/// returns its id.
fn start_fixed(env: &TestEnv, example_file: &str, prompt: &str) -> String {
    let wf = p(&example(example_file));
    let out = env.ok(&["thread", "start", &wf, "-p", prompt, "--cwd", "/tmp"]);
    json(&out)
        .get("thread")
        .and_then(Value::as_str)
        .expect("thread id")
        .to_string()
}

// ---- ids and schemas of the TypeScript tool ----

#[test]
fn fixture_workflows_get_the_recorded_ids() {
    let env = TestEnv::new();
    let store = env.store();
    for (file, id) in [
        ("debate.yaml", "DDY7SM1N7BV4G"),
        ("review-loop.yaml", "AZAY8RX9BJ358"),
    ] {
        let (name, wf) =
            uwf::thread::register_workflow(&store, &workflow_fixture(file), 1).unwrap();
        assert_eq!(wf.to_string(), id, "{file}");
        assert_eq!(
            store
                .registry()
                .unwrap()
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap()
                .1,
            wf
        );
    }
    drop(store);
    // The registered name and the file both start threads of the same workflow.
    let t = env.start("debate", "Is Rust better than Go?");
    assert_eq!(
        env.show(&t).get("workflow"),
        Some(&Value::str("DDY7SM1N7BV4G"))
    );
    let out = json(&env.ok(&[
        "thread",
        "start",
        &p(&workflow_fixture("debate.yaml")),
        "-p",
        "Is Rust better than Go?",
        "--cwd",
        "/tmp/x",
    ]));
    assert_eq!(out.get("workflow"), Some(&Value::str("DDY7SM1N7BV4G")));
    let t2 = out.get("thread").unwrap().as_str().unwrap();
    // The StartNode of the interop vectors.
    assert_eq!(env.head(t2), "2B77HPWKR4V3V");
    assert!(t2.len() == 26 && t2.bytes().all(|c| c.is_ascii_alphanumeric()));
}

#[test]
fn nodes_written_by_uwf_validate_against_the_typescript_schemas() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let out = json(&env.ok(&[
        "thread",
        "step",
        &t,
        "-c",
        "10",
        "--agent",
        &debate_script(&env),
    ]));
    assert_eq!(
        out.as_array().unwrap().last().unwrap().get("done"),
        Some(&Value::Bool(true))
    );
    let store = env.store();
    let mut checked = 0;
    for name in ["uwf/StartNode", "uwf/StepNode"] {
        let b = bootstrap::by_name(name).unwrap();
        let v = Validator::new(&b.payload).unwrap();
        for id in store.list_by_type(b.id).unwrap() {
            let n = store.get(id).unwrap().unwrap();
            v.validate(&n.payload().unwrap(), &b.id.to_wire())
                .unwrap_or_else(|e| panic!("{name} {id}: {e}"));
            checked += 1;
        }
    }
    assert_eq!(checked, 1 + 3);
}

// ---- routing ----

#[test]
fn transition_list_loops_reviewer_to_developer_until_approved() {
    let env = TestEnv::fixed();
    let t = start_fixed(&env, "solve-issue.yaml", "The parser crashes");
    let script = solve_script(&env);
    insta::assert_snapshot!(env.transcript(&format!("thread exec {t} -c 20 --agent '{script}'")), @r#"[{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"CPTZ86N4052VR","status":"idle","currentRole":"developer","done":false,"background":null},{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"2BATEXT2FMFZA","status":"idle","currentRole":"reviewer","done":false,"background":null},{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"9WY490F0XNTNN","status":"idle","currentRole":"developer","done":false,"background":null},{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"27EZPMYYV9RY8","status":"idle","currentRole":"reviewer","done":false,"background":null},{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"7WT46Z8JAG2YZ","status":"completed","currentRole":null,"done":true,"background":null}]"#);
    assert_eq!(
        env.roles(&t),
        ["planner", "developer", "reviewer", "developer", "reviewer"]
    );
    insta::assert_snapshot!(env.transcript(&format!("thread show {t}")), @r#"{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"7WT46Z8JAG2YZ","status":"completed","currentRole":null,"done":true,"background":null}"#);
}

#[test]
fn status_map_follows_status_and_renders_edge_prompts() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    // An agent that records its environment, then answers from the script.
    let log = env.root().join("env.log");
    let agent = env.agent(
        "logging-agent",
        &format!(
            "echo \"$UWF_ROLE|$UWF_EDGE_PROMPT|$UWF_THREAD|$UWF_HOME|$UWF_CWD|$(pwd)|$*\" >> {}\nexec {} \"$@\"",
            log.display(),
            debate_script(&env)
        ),
    );
    env.ok(&["thread", "step", &t, "-c", "9", "--agent", &p(&agent)]);
    assert_eq!(env.roles(&t), ["against", "for", "against"]);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(lines.len(), 3);
    let root = p(env.root());
    let root = std::fs::canonicalize(&root).map_or(root, |r| p(&r));
    assert_eq!(lines[0][0], "against");
    assert_eq!(
        lines[0][1],
        "Present your opening argument against the proposition."
    );
    assert_eq!(
        lines[1][1],
        "Counter the opposing argument: Go compiles faster and its tooling is simpler."
    );
    for l in &lines {
        assert_eq!(l[2], t);
        assert_eq!(l[3], p(env.root()));
        assert_eq!(l[4], p(env.root()));
        assert_eq!(l[5], root);
        assert!(l[6].ends_with(&format!("{t} {}", l[0])), "{:?}", l[6]);
    }
    // The edge prompt is recorded in the StepNode.
    let steps = json(&env.ok(&["thread", "steps", &t]));
    let step1 = steps.get("steps").unwrap().as_array().unwrap()[1]
        .get("hash")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let node = json(&env.ok(&["cas", "get", &step1]));
    assert_eq!(
        node.get("payload").unwrap().get("edgePrompt"),
        Some(&Value::str(
            "Present your opening argument against the proposition."
        ))
    );
}

#[test]
fn agents_come_from_config_with_overrides() {
    let env = TestEnv::new();
    let marker = env.root().join("override-used");
    let over = env.agent(
        "override-agent",
        &format!(
            "touch {}\nexec {} \"$@\"",
            marker.display(),
            debate_script(&env)
        ),
    );
    let script = example("debate.script.yaml");
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "providers: {{}}\nmodels: {{}}\nagents:\n  scripted:\n    command: {}\n    args: [agent, scripted, --script, {}]\n  over:\n    command: {}\ndefaultAgent: scripted\ndefaultModel: default\nagentOverrides:\n  debate:\n    for: over\n",
            uwf_bin().display(),
            script.display(),
            over.display()
        ),
    )
    .unwrap();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    env.ok(&["thread", "step", &t]);
    assert!(!marker.exists());
    env.ok(&["thread", "step", &t]);
    assert!(marker.exists(), "the override agent ran for role \"for\"");
    std::fs::write(
        env.root().join("config.yaml"),
        "defaultAgent: nope\nagents: {}\n",
    )
    .unwrap();
    insta::assert_snapshot!(env.transcript(&format!("thread step {t}")).replace(&t, "[THREAD]"), @"
    ! unknown agent alias in config: nope
    [exit 1]
    ");
}

#[test]
fn json_step_hash_line_is_accepted() {
    let env = TestEnv::fixed();
    let t = start_fixed(&env, "debate.yaml", "q");
    let agent = env.agent(
        "json-agent",
        "id=$(printf -- '---\\n$status: conceded\\nargument: ok\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\")\necho some log line\necho \"{\\\"stepHash\\\":\\\"$id\\\",\\\"role\\\":\\\"$2\\\"}\"",
    );
    insta::assert_snapshot!(env.transcript(&format!("thread step {t} --agent {}", agent.display())), @r#"{"workflow":"DDY7SM1N7BV4G","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"5KH4AXWS2BBSP","status":"completed","currentRole":null,"done":true,"background":null}"#);
}

// ---- bad input: a clear one-line error, head unchanged, nothing lost ----

#[test]
fn bad_workflows_are_refused_at_start() {
    let env = TestEnv::fixed();
    let start = |wf: &str| env.transcript(&format!("thread start {wf} -p x --cwd /tmp"));
    insta::assert_snapshot!(start("no-such-workflow"), @r#"
    ! workflow not found: no-such-workflow; run "uwf workflow list" to see registered names
    [exit 3]
    "#);
    insta::assert_snapshot!(start("ABCDEFGHJKMNP"), @r#"
    ! workflow not found: ABCDEFGHJKMNP; run "uwf workflow list" to see registered names
    [exit 3]
    "#);
    insta::assert_snapshot!(start(&p(&workflow_fixture("invalid/bad-yaml.yaml"))), @"
    ! invalid YAML: [REPO]/tests/fixtures/workflows/invalid/bad-yaml.yaml: found unexpected end of stream at line 5 column 1, while scanning a quoted scalar at line 3 column 14
    [exit 1]
    ");
    insta::assert_snapshot!(start(&p(&workflow_fixture("invalid/escape/escape.yaml"))), @r#"
    ! invalid YAML: [REPO]/tests/fixtures/workflows/invalid/escape/escape.yaml: !include "../../debate.yaml": path traversal blocked (includes must stay inside the including file's directory)
    [exit 1]
    "#);
    insta::assert_snapshot!(start(&p(&workflow_fixture("invalid/unknown-role.yaml"))), @r#"
    ! workflow validation failed:   - edge worker→_: unknown target role "ghost"
    [exit 1]
    "#);
    // A file that does not exist is a workflow that does not exist, as a name is.
    insta::assert_snapshot!(start(&p(&workflow_fixture("missing.yaml"))), @"
    ! file not found: [REPO]/tests/fixtures/workflows/missing.yaml
    [exit 3]
    ");
    insta::assert_snapshot!(start("examples/nosuch.yaml"), @"
    ! file not found: examples/nosuch.yaml
    [exit 3]
    ");
    let debate = p(&example("debate.yaml"));
    insta::assert_snapshot!(env.transcript(&format!("thread start {debate} -p x --cwd rel/dir")), @"
    ! cwd must be an absolute path, got: rel/dir
    [exit 1]
    ");
    // A node that is not a workflow.
    env.ok(&["cas", "put-text", "hello"]);
    insta::assert_snapshot!(start("95ST8MZ0QTKP9"), @"
    ! node 95ST8MZ0QTKP9 is not a Workflow (type 7VQ43ZSJTEWA7)
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("thread list --all"), @"[]");
}

#[test]
fn bad_counts_and_ids() {
    let env = TestEnv::fixed();
    let t = start_fixed(&env, "debate.yaml", "q");
    // The count reads as a JavaScript number and is checked before the thread id.
    for (c, shown) in [("0", "0"), ("-1", "-1"), ("x", "NaN"), ("1.5", "1.5")] {
        for th in [t.as_str(), "NOSUCHTHREAD"] {
            env.fails(
                &["thread", "exec", th, "-c", c, "--agent", "true"],
                &format!("--count must be a positive integer, got: {shown}"),
            );
        }
    }
    insta::assert_snapshot!(env.transcript("thread show nop"), @r#"
    ! invalid thread id "nop": expected 26 letters and digits, or a unique prefix of 4 or more
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("thread show 06H01H81R5YCT74RZ86VBY5KNC"), @"
    ! thread not found: 06H01H81R5YCT74RZ86VBY5KNC
    [exit 3]
    ");
    insta::assert_snapshot!(env.transcript(&format!("thread step {t} --timeout 0 --agent true")), @"
    ! --timeout must be a positive number of seconds, got: 0
    [exit 1]
    ");
}

#[test]
fn thread_ids_resolve_from_unique_prefixes() {
    let env = TestEnv::fixed();
    // Started at the same millisecond, the three ids share their first nine characters.
    let ts: Vec<String> = (0..3)
        .map(|i| start_fixed(&env, "debate.yaml", &format!("q{i}")))
        .collect();
    let shared = &ts[0][..9];
    assert!(ts.iter().all(|t| t.starts_with(shared)), "{ts:?}");
    // A unique prefix, in any case, wherever a thread id is taken; output names the whole id.
    let unique = |t: &str| {
        (4..=26)
            .map(|n| t[..n].to_string())
            .find(|p| ts.iter().filter(|o| o.starts_with(p.as_str())).count() == 1)
            .unwrap()
    };
    let short = unique(&ts[1]);
    let shown = env.show(&short.to_ascii_lowercase());
    assert_eq!(
        shown.get("thread").and_then(Value::as_str),
        Some(ts[1].as_str())
    );
    assert!(env.ok(&["thread", "read", &short]).contains("q1"));
    let steps = json(&env.ok(&["thread", "steps", &short]));
    assert_eq!(
        steps.get("thread").and_then(Value::as_str),
        Some(ts[1].as_str())
    );
    // A finished thread resolves too.
    env.ok(&["thread", "kill", &short]);
    assert_eq!(
        env.show(&short).get("status").and_then(Value::as_str),
        Some("cancelled")
    );
    // Ambiguous: one line naming every candidate, exit 1.
    let r = env.fails(
        &["thread", "show", shared],
        &format!("ambiguous thread id prefix \"{shared}\""),
    );
    assert_eq!(r.code, 1);
    assert!(
        ts.iter().all(|t| r.stderr.contains(t.as_str())),
        "{}",
        r.stderr
    );
    // Unknown: exit 3, as a missing thread.
    let r = env.fails(&["thread", "show", "ZZZZZZ"], "thread not found: ZZZZZZ");
    assert_eq!(r.code, 3);
    let r = env.fails(
        &["thread", "step", "zzzz", "--agent", "true"],
        "thread not found",
    );
    assert_eq!(r.code, 3);
    // Too short to be a prefix.
    env.fails(&["thread", "show", &ts[0][..3]], "invalid thread id");
}

/// Runs one bad agent and checks the error, that the head did not move, and that the lease was
/// released (a good step works right after).
fn bad_agent(env: &TestEnv, t: &str, body: &str, extra: &[&str], needle: &str) {
    let before = env.head(t);
    let agent = env.agent("bad-agent", body);
    let ap = p(&agent);
    let mut args = vec!["thread", "step", t, "--agent", ap.as_str()];
    args.extend_from_slice(extra);
    env.fails(&args, needle);
    assert_eq!(env.head(t), before, "head unchanged after {needle:?}");
    assert_eq!(env.show(t).get("status"), Some(&Value::str("idle")));
}

#[test]
fn bad_agents_leave_the_head_alone() {
    let env = TestEnv::new();
    // Many failures in a row here: none may fail the thread.
    std::fs::write(env.root().join("config.yaml"), "maxRetries: 1000\n").unwrap();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let other = env.start(&p(&example("debate.yaml")), "Another thread");
    // One good step so that prev checks have a head that is a step.
    env.ok(&["thread", "step", &t, "--agent", &debate_script(&env)]);
    let head = env.head(&t);
    let start_of_t = json(&env.ok(&["thread", "steps", &t]))
        .get("steps")
        .unwrap()
        .as_array()
        .unwrap()[0]
        .get("hash")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();

    bad_agent(
        &env,
        &t,
        "echo 'model overloaded' >&2\necho partial\nexit 3",
        &[],
        "agent command failed (",
    );
    bad_agent(
        &env,
        &t,
        "echo 'model overloaded' >&2\nexit 3",
        &[],
        "model overloaded",
    );
    bad_agent(&env, &t, "exit 0", &[], "agent printed nothing on stdout");
    bad_agent(&env, &t, "echo not-an-id", &[], "not a node id");
    bad_agent(
        &env,
        &t,
        "echo 0000000000000",
        &[],
        "which is not in the store",
    );
    bad_agent(
        &env,
        &t,
        "@UWF@ cas put-text hello | sed 's/.*\"hash\":\"\\([0-9A-Z]*\\)\".*/\\1/'",
        &[],
        "not a StepNode",
    );
    bad_agent(
        &env,
        &t,
        "echo '{\"nope\":1}'",
        &[],
        "missing valid stepHash",
    );
    // A StepNode of another thread.
    bad_agent(
        &env,
        &t,
        &format!(
            "printf -- '---\\n$status: continue\\nargument: x\\n---\\n' | @UWF@ agent submit {other} against"
        ),
        &[],
        "of another thread",
    );
    // A StepNode whose prev is not the head (it continues the StartNode instead).
    let forged = format!(
        "{{\"start\":\"{start_of_t}\",\"prev\":null,\"role\":\"for\",\"output\":\"{start_of_t}\",\"detail\":\"{start_of_t}\",\"agent\":\"forger\",\"startedAtMs\":1,\"completedAtMs\":2,\"cwd\":\"/\"}}"
    );
    let body = format!(
        "@UWF@ cas put 108DB063KRQWW '{forged}' | sed 's/.*\"hash\":\"\\([0-9A-Z]*\\)\".*/\\1/'"
    );
    bad_agent(&env, &t, &body, &[], "whose prev is null, expected");
    // The wrong role.
    let forged = forged
        .replace("\"prev\":null", &format!("\"prev\":\"{head}\""))
        .replace("\"for\"", "\"against\"");
    let body = format!(
        "@UWF@ cas put 108DB063KRQWW '{forged}' | sed 's/.*\"hash\":\"\\([0-9A-Z]*\\)\".*/\\1/'"
    );
    bad_agent(&env, &t, &body, &[], "expected role \"for\"");
    // An agent that hangs, with a child of its own: the whole group is killed.
    bad_agent(
        &env,
        &t,
        "sleep 60 &\nsleep 60\necho late",
        &["--timeout", "1"],
        "agent timed out after 1s",
    );
    // A missing program.
    env.fails(
        &["thread", "step", &t, "--agent", "/no/such/agent"],
        "cannot start agent command (/no/such/agent)",
    );
    // Nothing was lost: the thread still steps to the end.
    env.ok(&[
        "thread",
        "step",
        &t,
        "-c",
        "5",
        "--agent",
        &debate_script(&env),
    ]);
    assert_eq!(env.roles(&t), ["against", "for", "against"]);
}

// ---- leases and concurrency, with real processes ----

#[test]
fn dead_lease_is_taken_over_and_live_one_makes_busy() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "q");
    let set = |lease: Lease| {
        let s = env.store();
        s.write(|w| w.set_lease(&ThreadId::parse(&t).unwrap(), &lease))
            .unwrap();
    };
    // A process that has exited.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    set(Lease {
        pid: dead,
        since_ms: 1,
        boot_id: String::new(),
        start_ticks: 0,
        expires_ms: None,
    });
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("idle")));
    env.ok(&["thread", "step", &t, "--agent", &debate_script(&env)]);
    // A live process holds it.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    set(Lease {
        pid: sleeper.id(),
        since_ms: 1,
        boot_id: uwf::engine::boot_id(),
        start_ticks: uwf::engine::start_ticks(sleeper.id()),
        expires_ms: None,
    });
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("running")));
    let listed = json(&env.ok(&["thread", "list", "--status", "running"]));
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let head = env.head(&t);
    env.fails(
        &["thread", "step", &t, "--agent", &debate_script(&env)],
        &format!(
            "thread {t} is busy: step in progress by pid {}",
            sleeper.id()
        ),
    );
    assert_eq!(env.head(&t), head);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    env.ok(&["thread", "step", &t, "--agent", &debate_script(&env)]);
}

#[test]
fn sixteen_processes_step_their_own_threads() {
    let env = TestEnv::new();
    let wf = p(&example("solve-issue.yaml"));
    let threads: Vec<String> = (0..16)
        .map(|i| env.start(&wf, &format!("issue {i}")))
        .collect();
    let agent = solve_script(&env);
    let children: Vec<_> = threads
        .iter()
        .map(|t| {
            env.spawn_cmd()
                .args(["thread", "step", t, "-c", "20", "--agent", &agent])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for t in &threads {
        assert_eq!(env.show(t).get("status"), Some(&Value::str("completed")));
        assert_eq!(
            env.roles(t),
            ["planner", "developer", "reviewer", "developer", "reviewer"]
        );
    }
    let done = json(&env.ok(&["thread", "list", "--status", "completed"]));
    assert_eq!(done.as_array().unwrap().len(), 16);
}

#[test]
fn four_processes_race_on_one_thread() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("solve-issue.yaml")), "race");
    // A slow agent, so that the racers overlap.
    let agent = env.agent(
        "slow-agent",
        &format!("sleep 1\nexec {} \"$@\"", solve_script(&env)),
    );
    let children: Vec<_> = (0..4)
        .map(|_| {
            env.spawn_cmd()
                .args(["thread", "step", &t, "--agent", &p(&agent)])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut wins = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            wins += 1;
        } else {
            assert!(
                err.contains("is busy: step in progress by pid")
                    || err.contains("thread advanced concurrently"),
                "loser error: {err}"
            );
            assert_eq!(out.status.code(), Some(75), "retryable: {err}");
            let lines: Vec<&str> = err.trim_end().lines().collect();
            assert!(lines[1..].iter().all(|l| l.starts_with("hint: ")), "{err}");
        }
    }
    assert!(wins >= 1);
    // Every win is one step of an intact chain; no StepNode of this thread is left over.
    let roles = env.roles(&t);
    assert_eq!(roles.len(), wins);
    let expected = ["planner", "developer", "reviewer", "developer"];
    assert_eq!(roles, expected[..wins]);
    let store = env.store();
    let step_type = bootstrap::by_name("uwf/StepNode").unwrap().id;
    let start = json(&env.ok(&["thread", "steps", &t]))
        .get("steps")
        .unwrap()
        .as_array()
        .unwrap()[0]
        .get("hash")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let ours = store
        .list_by_type(step_type)
        .unwrap()
        .into_iter()
        .filter(|id| {
            store
                .get(*id)
                .unwrap()
                .unwrap()
                .payload()
                .unwrap()
                .get("start")
                == Some(&Value::str(&start))
        })
        .count();
    assert_eq!(ours, wins, "every StepNode produced is on the chain");
    drop(store);
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("idle")));
}

// ---- show, list, steps, read, fork, kill ----

#[test]
fn kill_archives_and_fork_continues() {
    let env = TestEnv::fixed();
    let t = start_fixed(&env, "solve-issue.yaml", "kill me");
    let script = solve_script(&env);
    env.ok(&["thread", "step", &t, "-c", "2", "--agent", &script]);
    insta::assert_snapshot!(env.transcript(&format!("thread cancel {t}")), @r#"{"thread":"06DQDPN800TCJTPDSBDHQEV0Q0","cancelled":true}"#);
    insta::assert_snapshot!(env.transcript(&format!("thread show {t}")), @r#"{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"FTDS89D8SB6H5","status":"cancelled","currentRole":null,"done":true,"background":null}"#);
    insta::assert_snapshot!(env.transcript(&format!("thread step {t} --agent true")), @"
    ! thread not active: 06DQDPN800TCJTPDSBDHQEV0Q0 (cancelled)
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript(&format!("thread kill {t}")), @"
    ! thread not active: 06DQDPN800TCJTPDSBDHQEV0Q0 (cancelled)
    [exit 1]
    ");
    // Steps still work on the archived thread.
    assert_eq!(env.roles(&t), ["planner", "developer"]);
    // Fork from the first step: a new active thread whose head is that step.
    let steps = json(&env.ok(&["thread", "steps", &t]));
    let first = steps.get("steps").unwrap().as_array().unwrap()[1]
        .get("hash")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    insta::assert_snapshot!(env.transcript(&format!("step fork {}", &first[..8])), @r#"{"thread":"06DQDPN801AZSEJ47JTQXV5B8R","forkedFrom":{"step":"FYH0F42GDFCMQ"}}"#);
    let nt = json(&env.ok(&["thread", "list"])).as_array().unwrap()[0]
        .get("thread")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(nt, t);
    insta::assert_snapshot!(env.transcript(&format!("thread show {nt}")), @r#"{"workflow":"48YZ260G6XFJ6","thread":"06DQDPN801AZSEJ47JTQXV5B8R","head":"FYH0F42GDFCMQ","status":"idle","currentRole":"developer","done":false,"background":null}"#);
    env.ok(&["thread", "step", &nt, "--agent", &script]);
    assert_eq!(env.roles(&nt), ["planner", "developer"]);
    // Forking a node that is not a step.
    env.ok(&["cas", "put-text", "x"]);
    insta::assert_snapshot!(env.transcript("thread fork 66N8CBG6X348T"), @"
    ! node 66N8CBG6X348T is not a StartNode or StepNode
    [exit 1]
    ");
}

#[test]
fn list_filters_and_pages() {
    let env = TestEnv::new();
    let wf = p(&example("debate.yaml"));
    let a = env.start(&wf, "a");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let b = env.start(&wf, "b");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let c = env.start(&wf, "c");
    env.ok(&[
        "thread",
        "step",
        &c,
        "-c",
        "9",
        "--agent",
        &debate_script(&env),
    ]);
    let ids = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["thread", "list"];
        full.extend_from_slice(args);
        json(&env.ok(&full))
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.get("thread").unwrap().as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&[]), [b.clone(), a.clone()]);
    assert_eq!(ids(&["--all"]), [c.clone(), b.clone(), a.clone()]);
    assert_eq!(ids(&["--status", "completed"]), std::slice::from_ref(&c));
    assert_eq!(
        ids(&["--status", "active,completed"]),
        [c.clone(), b.clone(), a.clone()]
    );
    assert_eq!(
        ids(&["--all", "--skip", "1", "--take", "1"]),
        std::slice::from_ref(&b)
    );
    assert_eq!(ids(&["--all", "--skip", "5"]), Vec::<String>::new());
    assert_eq!(ids(&["--all", "--after", "1h"]).len(), 3);
    assert_eq!(ids(&["--all", "--before", "1h"]).len(), 0);
    assert_eq!(ids(&["--all", "--after", "2000-01-01"]).len(), 3);
    let listed = json(&env.ok(&["thread", "list"]));
    let row = &listed.as_array().unwrap()[0];
    assert_eq!(row.get("status"), Some(&Value::str("idle")));
    assert_eq!(row.get("currentRole"), Some(&Value::str("against")));
    assert_eq!(row.get("workflow"), Some(&Value::str("DDY7SM1N7BV4G")));
    insta::assert_snapshot!(env.transcript("thread list --after soon"), @"
    ! invalid time format: soon
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("thread list --status sleepy"), @r#"
    ! invalid status "sleepy": expected queued, idle, running, paused, completed, failed, cancelled, dropped or active
    [exit 1]
    "#);
}

/// `thread list` decides the role of a thread still at its StartNode once per status-map
/// workflow; every row agrees with `thread show`, for both graph forms, at the start and after
/// a step.
#[test]
fn list_roles_agree_with_show_at_start_and_after_a_step() {
    let env = TestEnv::new();
    let mut threads = Vec::new();
    for (file, script) in [
        ("debate.yaml", debate_script(&env)),
        ("solve-issue.yaml", solve_script(&env)),
    ] {
        let wf = p(&example(file));
        let fresh = [env.start(&wf, "one"), env.start(&wf, "two")];
        let stepped = env.start(&wf, "three");
        env.ok(&["thread", "step", &stepped, "--agent", &script]);
        threads.extend(fresh);
        threads.push(stepped);
    }
    let listed = json(&env.ok(&["thread", "list"]));
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), threads.len());
    let mut roles = Vec::new();
    for row in rows {
        let t = row.get("thread").unwrap().as_str().unwrap();
        let shown = json(&env.ok(&["thread", "show", t]));
        assert_eq!(row.get("currentRole"), shown.get("currentRole"), "{t}");
        roles.push(
            row.get("currentRole")
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    roles.sort();
    assert_eq!(
        roles,
        [
            "against",
            "against",
            "developer",
            "for",
            "planner",
            "planner"
        ]
    );
}

#[test]
fn read_renders_markdown_with_quota_and_before() {
    let env = TestEnv::new();
    let t = env.start(
        &p(&example("solve-issue.yaml")),
        "Fix <the> \"parser\" & more",
    );
    env.ok(&[
        "thread",
        "step",
        &t,
        "-c",
        "9",
        "--agent",
        &solve_script(&env),
    ]);
    let md = env.ok(&["thread", "read", &t]);
    assert!(
        md.starts_with(&format!("# Thread `{t}`\n\n**Workflow:** solve-issue (`")),
        "{md}"
    );
    assert!(md.contains("## Task\n\nFix <the> \"parser\" & more"));
    assert!(md.contains("## Step 1: planner `"));
    assert!(md.contains("<prompt>\nYou are a planning agent."));
    // The scripted agent keeps its reply as its detail's turn: each step shows it.
    assert_eq!(md.matches("<output>").count(), 5, "{md}");
    assert!(md.contains("approved: true\ncomments: Looks good."), "{md}");
    assert_eq!(
        md.matches("<prompt>\nYou are a developer agent.").count(),
        1
    );
    assert!(md.contains("\n\n---\n\n## Step 5: reviewer"));
    let short = env.ok(&["thread", "read", &t, "--quota", "1"]);
    assert!(short.contains("## Step 5: reviewer"));
    assert!(!short.contains("## Step 4:"));
    assert!(short.contains("*(4 earlier steps, load with `uwf thread read"));
    let steps = json(&env.ok(&["thread", "steps", &t]));
    let s3 = steps.get("steps").unwrap().as_array().unwrap()[3]
        .get("hash")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let before = env.ok(&["thread", "read", &t, "--before", &s3]);
    assert!(!before.contains("# Thread"));
    assert!(before.contains("## Step 2: developer") && !before.contains("## Step 3:"));
    let with_start = env.ok(&["thread", "read", &t, "--before", &s3, "--start"]);
    assert!(with_start.starts_with("# Thread"));
    insta::assert_snapshot!(env.transcript(&format!("thread read {t} --quota 0")), @"
    ! invalid --quota: must be a positive integer
    [exit 1]
    ");
    // steps: durations; step-details: the detail expanded.
    let st = &steps.get("steps").unwrap().as_array().unwrap()[1];
    assert!(st.get("durationMs").unwrap().as_f64().unwrap() >= 0.0);
    assert_eq!(
        st.get("output").unwrap().get("plan"),
        Some(&Value::str("Validate the input before parsing it."))
    );
    let h = st.get("hash").unwrap().as_str().unwrap();
    let d = json(&env.ok(&["thread", "step-details", h]));
    // The scripted agent's detail: its reply as the one turn.
    assert_eq!(d.get("turnCount").and_then(Value::as_f64), Some(1.0));
    let turn = &d.get("turns").and_then(Value::as_array).unwrap()[0];
    assert_eq!(turn.get("role").and_then(Value::as_str), Some("assistant"));
    let content = turn.get("content").and_then(Value::as_str).unwrap();
    assert!(content.starts_with("---\nplan:"), "{content}");
    assert_eq!(
        env.ok(&["step", "show", h]),
        env.ok(&["thread", "step-details", h])
    );
    let start = steps.get("steps").unwrap().as_array().unwrap()[0]
        .get("hash")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    insta::assert_snapshot!(env.transcript(&format!("step show {start}")).replace(&start, "[START]"), @"
    ! node [START] is not a StepNode
    [exit 1]
    ");
}

// ---- threads from the TypeScript tool ----

fn ts_root(env: &TestEnv) {
    let src = std::path::Path::new("/work/shared/fixtures/ts-root-small");
    let src = if src.exists() {
        src.to_path_buf()
    } else {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ts-root-small")
    };
    let status = Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", src.display()))
        .arg(env.root())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_file(env.root().join("config.yaml")).ok();
}

#[test]
fn typescript_threads_show_read_fork_and_step() {
    let env = TestEnv::fixed();
    ts_root(&env);
    insta::assert_snapshot!(env.transcript("thread list"), @r#"
    [{"thread":"06DQDRD4E845AZCJB34RENTHEW","workflow":"AZAY8RX9BJ358","head":"4AK7X5KMXX8GG","status":"idle","currentRole":"coder"},{"thread":"06DQDQTZB90Y4CWJP4NPAVJW2W","workflow":"DDY7SM1N7BV4G","head":"0HJCYKQT06GBV","status":"idle","currentRole":"against"},{"thread":"06DQDQD8R3SYN75HX43EQ49CJR","workflow":"DDY7SM1N7BV4G","head":"77PZAJHZM536J","status":"idle","currentRole":"against"}]
    ! uwf: imported the file layout of [ROOT] into [ROOT]/uwf.redb (199 nodes, 3 threads, 2 workflows, 2 history lines; 0 problem(s)); the files are left as they were
    "#);
    insta::assert_snapshot!(env.transcript("thread list --all"), @r#"[{"thread":"06DQDRX41CCN7CE1S7JX6ZBQ2W","workflow":"AZAY8RX9BJ358","head":"3HG4EGKTRBW16","status":"completed","currentRole":null},{"thread":"06DQDRD4E845AZCJB34RENTHEW","workflow":"AZAY8RX9BJ358","head":"4AK7X5KMXX8GG","status":"idle","currentRole":"coder"},{"thread":"06DQDR1M6EQ7NCZ33B97M17GKM","workflow":"DDY7SM1N7BV4G","head":"54P65EVPHGKZJ","status":"completed","currentRole":null},{"thread":"06DQDQTZB90Y4CWJP4NPAVJW2W","workflow":"DDY7SM1N7BV4G","head":"0HJCYKQT06GBV","status":"idle","currentRole":"against"},{"thread":"06DQDQD8R3SYN75HX43EQ49CJR","workflow":"DDY7SM1N7BV4G","head":"77PZAJHZM536J","status":"idle","currentRole":"against"}]"#);
    // A completed thread from history.
    insta::assert_snapshot!(env.transcript("thread show 06DQDR1M6EQ7NCZ33B97M17GKM"), @r#"{"workflow":"DDY7SM1N7BV4G","thread":"06DQDR1M6EQ7NCZ33B97M17GKM","head":"54P65EVPHGKZJ","status":"completed","currentRole":null,"done":true,"background":null}"#);
    let md = env.ok(&["thread", "read", "06DQDR1M6EQ7NCZ33B97M17GKM"]);
    assert!(
        md.contains("**Workflow:** debate (`DDY7SM1N7BV4G`)"),
        "{md}"
    );
    assert!(md.contains("<output>"), "{md}");
    // A debate thread that is active: step it with a shell agent using the agent kit.
    let t = "06DQDQD8R3SYN75HX43EQ49CJR";
    let s = env.show(t);
    assert_eq!(s.get("workflow"), Some(&Value::str("DDY7SM1N7BV4G")));
    let role = s.get("currentRole").unwrap().as_str().unwrap().to_string();
    let details = json(&env.ok(&["thread", "step-details", "77PZAJHZM536J"]));
    assert!(details.to_json().len() > 20);
    let f = json(&env.ok(&["thread", "fork", "77PZAJHZM536J"]));
    let forked = f.get("thread").unwrap().as_str().unwrap().to_string();
    let agent = env.agent(
        "kit-agent",
        "@UWF@ agent context \"$1\" \"$2\" > /dev/null || exit 1\nprintf -- '---\\n$status: conceded\\nargument: fair point\\n---\\nI concede.\\n' | @UWF@ agent submit --name shell-agent \"$1\" \"$2\"",
    );
    for th in [t, forked.as_str()] {
        let out = json(&env.ok(&["thread", "step", th, "--agent", &p(&agent)]));
        assert_eq!(out.get("status"), Some(&Value::str("completed")), "{th}");
        let steps = json(&env.ok(&["thread", "steps", th]));
        let last = steps
            .get("steps")
            .unwrap()
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last.get("role"), Some(&Value::str(&role)));
        assert_eq!(last.get("agent"), Some(&Value::str("shell-agent")));
    }
    // And the result exports back to the TypeScript layout.
    let out = env.root().join("export");
    env.ok(&["export", &p(&out)]);
    let hist = std::fs::read_to_string(out.join("history.jsonl")).unwrap();
    assert!(hist.contains(t));
    let _ = NodeId::parse("77PZAJHZM536J").unwrap();
}

#[test]
fn head_moved_or_thread_cancelled_during_the_step() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "q");
    let start = env.head(&t);
    // The agent moves the head itself (through an import that overwrites it), then returns
    // its step: the compare-and-swap sees the moved head.
    let mover = env.agent(
        "mover",
        "id=$(printf -- '---\\n$status: continue\\nargument: x\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\")\nd=$(mktemp -d)\nmkdir -p $d/cas\necho \"$1: $id\" > $d/threads.yaml\n@UWF@ import $d --overwrite > /dev/null 2>&1\necho $id",
    );
    let r = env.fails(
        &["thread", "step", &t, "--agent", &p(&mover)],
        "thread advanced concurrently",
    );
    assert!(
        r.stderr.contains(&format!("expected {start}")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("is kept in the store"), "{}", r.stderr);
    // The agent cancels the thread while it runs.
    let t2 = env.start(&p(&example("debate.yaml")), "q");
    let killer = env.agent(
        "killer",
        &format!(
            "id=$({} \"$@\")\n@UWF@ thread kill \"$1\" > /dev/null\necho $id",
            debate_script(&env)
        ),
    );
    env.fails(
        &["thread", "step", &t2, "--agent", &p(&killer)],
        "was archived while its step ran",
    );
    assert_eq!(env.show(&t2).get("status"), Some(&Value::str("cancelled")));
}

/// A step of a store chosen by `--store` gives it to its agent, so that the agent's `uwf agent
/// submit`, from another working directory, writes where the step reads.
#[test]
fn an_agent_submits_to_the_store_its_step_was_given() {
    let env = TestEnv::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let db = elsewhere.path().join("other.redb");
    let store = p(&db);
    let wf = p(&example("debate.yaml"));
    let t = json(&env.ok(&[
        "--store", &store, "thread", "start", &wf, "-p", "q", "--cwd", "/tmp",
    ]))
    .get("thread")
    .and_then(Value::as_str)
    .expect("thread id")
    .to_string();
    let agent = env.agent(
        "elsewhere.sh",
        "cd /\nprintf -- '---\\n$status: conceded\\nargument: ok\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\"",
    );
    let out = json(&env.ok(&[
        "--store",
        &store,
        "thread",
        "step",
        &t,
        "--agent",
        &p(&agent),
    ]));
    assert_eq!(
        out.get("done"),
        Some(&Value::Bool(true)),
        "{}",
        out.to_json()
    );
    // The step is in that store, and the root's own store has no such thread.
    assert_eq!(env.run(&["thread", "show", &t]).code, 3);
    let shown = json(&env.ok(&["--store", &store, "thread", "show", &t]));
    assert_eq!(
        shown.get("status"),
        Some(&Value::str("completed")),
        "{}",
        shown.to_json()
    );
}

/// A config.yaml that does not parse stops `thread step` and `agent submit` with one line
/// naming it, before anything is written; once mended, the same step runs.
#[test]
fn a_broken_config_stops_a_step_and_a_submit_and_writes_nothing() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let before = env.head(&t);
    let config = env.root().join("config.yaml");
    std::fs::write(&config, "models: [unclosed\n").unwrap();
    env.fails(
        &["thread", "step", &t, "--agent", &debate_script(&env)],
        "invalid config",
    );
    let r = env.run_stdin(
        &["agent", "submit", &t, "moderator"],
        "---\n$status: continue\n---\n",
    );
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("config.yaml"), "{}", r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    assert_eq!(env.head(&t), before, "nothing written");
    std::fs::write(&config, "maxRetries: 1\n").unwrap();
    env.ok(&["thread", "step", &t, "--agent", &debate_script(&env)]);
    assert_ne!(env.head(&t), before);
}

/// `store:` in config.yaml moves a command's store to that file: a thread started there is
/// listed there, and the root's own file never holds it.
#[test]
fn store_in_the_config_is_where_commands_read_and_write() {
    if crate::common::on_postgres() {
        return; // UWF_STORE names the test's database, and wins over config.yaml.
    }
    let env = TestEnv::new();
    let other = env.root().join("elsewhere.redb");
    std::fs::write(
        env.root().join("config.yaml"),
        format!("store: {}\n", other.display()),
    )
    .unwrap();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    assert!(other.exists());
    assert!(!env.root().join("uwf.redb").exists());
    assert!(env.ok(&["thread", "list"]).contains(&t));
    env.ok(&["thread", "step", &t, "--agent", &debate_script(&env)]);
    assert_eq!(env.roles(&t).len(), 1);
}
