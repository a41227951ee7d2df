//! Agents of the TypeScript tool's protocol (7a0c): called as `CMD --thread T --role R
//! --prompt P`, they read `threads.yaml` and `cas/` under `UNCAGED_WORKFLOW_STORAGE_ROOT`,
//! write their nodes to `cas/` and print `{"stepHash": …}` last; uwf exports what they read
//! before and imports what they wrote after.

use crate::common::{TestEnv, example, json};
use std::collections::BTreeSet;
use std::path::Path;
use uwf::cas::Value;

const PROMPT: &str = "Is Rust better than Go?";

fn p(path: &Path) -> String {
    path.display().to_string()
}

fn walk(env: &TestEnv, id: &str) -> BTreeSet<String> {
    let v = json(&env.ok(&["cas", "walk", id]));
    v.get("hashes")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap().to_string())
        .collect()
}

/// The type of the node file `cas/<id>.bin` under `dir`.
fn file_type(dir: &Path, id: &str) -> String {
    let bytes = std::fs::read(dir.join("cas").join(format!("{id}.bin"))).unwrap();
    let v = uwf::cas::cbor::decode(&bytes).unwrap();
    v.get("type").and_then(Value::as_str).unwrap().to_string()
}

/// Runs the debate to its end in a scratch store with the scripted agent (the thread's cwd is
/// `cwd`, so its StartNode is the one a thread of the same prompt and cwd gets anywhere) and
/// writes, under `replies/<HEAD>/`, what an agent continuing from that head writes: `role`,
/// `step` (the StepNode id), `files/` (the new node files and the schemas typing them) and
/// `needs` (the nodes it reads, which uwf must have exported).
fn make_replies(cwd: &Path, replies: &Path) {
    let scratch = TestEnv::new();
    let script = example("debate.script.yaml");
    let out = json(&scratch.ok(&[
        "thread",
        "start",
        &p(&example("debate.yaml")),
        "-p",
        PROMPT,
        "--cwd",
        &p(cwd),
    ]));
    let t = out.get("thread").unwrap().as_str().unwrap().to_string();
    scratch.ok(&[
        "thread",
        "step",
        &t,
        "-c",
        "10",
        "--agent",
        &scratch.scripted(&script),
    ]);
    let exported = scratch.root().join("export");
    scratch.ok(&["export", &p(&exported)]);
    let steps = json(&scratch.ok(&["thread", "steps", &t]));
    let steps = steps.get("steps").and_then(Value::as_array).unwrap();
    let hash = |s: &Value| s.get("hash").and_then(Value::as_str).unwrap().to_string();
    for pair in steps.windows(2) {
        let (prev, step) = (hash(&pair[0]), hash(&pair[1]));
        let role = pair[1].get("role").and_then(Value::as_str).unwrap();
        let dir = replies.join(&prev);
        std::fs::create_dir_all(dir.join("files")).unwrap();
        std::fs::write(dir.join("role"), role).unwrap();
        std::fs::write(dir.join("step"), &step).unwrap();
        let before = walk(&scratch, &prev);
        let mut needs = before.clone();
        needs.extend(
            before
                .iter()
                .map(|id| file_type(&exported, id))
                .collect::<Vec<_>>(),
        );
        let new: BTreeSet<String> = walk(&scratch, &step).difference(&before).cloned().collect();
        let mut files = new.clone();
        files.extend(new.iter().map(|id| file_type(&exported, id)));
        for id in &files {
            let name = format!("{id}.bin");
            std::fs::copy(
                exported.join("cas").join(&name),
                dir.join("files").join(&name),
            )
            .unwrap();
        }
        let needs: Vec<String> = needs.into_iter().collect();
        std::fs::write(dir.join("needs"), needs.join("\n") + "\n").unwrap();
    }
}

/// An agent of the TypeScript tool's protocol that works only on the files: it finds the
/// thread's head in `threads.yaml`, checks that what it reads was exported to `cas/`, writes
/// the node files of its reply into `cas/` (a temporary file renamed, as @ocas/fs does) and
/// prints `{"stepHash": …}` last. It never opens
/// the store. `args` are the arguments it expects before the protocol's.
fn ts_agent(env: &TestEnv, replies: &Path, args: &str) -> std::path::PathBuf {
    ts_agent_after(env, replies, args, "")
}

/// [`ts_agent`] running the shell command `first` before it reads anything.
fn ts_agent_after(env: &TestEnv, replies: &Path, args: &str, first: &str) -> std::path::PathBuf {
    env.agent(
        "ts-agent",
        &format!(
            r#"set -eu
{first}
usage() {{ echo "usage: ts-agent --thread <id> --role <role> --prompt <text>" >&2; exit 2; }}
[ "${{1:-}}" = "{args}" ] || usage
shift
T= R= P=
while [ $# -gt 0 ]; do
  case "$1" in
    --thread) T=$2; shift 2 ;;
    --role) R=$2; shift 2 ;;
    --prompt) P=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$T" ] && [ -n "$R" ] && [ -n "$P" ] || usage
ROOT=$UNCAGED_WORKFLOW_STORAGE_ROOT
[ "$UNCAGED_CAS_DIR" = "$ROOT/cas" ] || {{ echo "UNCAGED_CAS_DIR is $UNCAGED_CAS_DIR" >&2; exit 3; }}
H=$(sed -n "s/^$T: //p" "$ROOT/threads.yaml")
[ -n "$H" ] || {{ echo "thread $T is not in threads.yaml" >&2; exit 4; }}
D={replies}/$H
[ -d "$D" ] || {{ echo "no reply after $H" >&2; exit 5; }}
[ "$(cat "$D/role")" = "$R" ] || {{ echo "role $R, expected $(cat "$D/role")" >&2; exit 6; }}
for id in $(cat "$D/needs"); do
  [ -f "$ROOT/cas/$id.bin" ] || {{ echo "node $id was not exported" >&2; exit 7; }}
done
printf '%s\t%s\n' "$R" "$P" >> {replies}/prompts
for f in "$D"/files/*.bin; do
  n=$(basename "$f")
  cp "$f" "$UNCAGED_CAS_DIR/$n.$$.tmp"
  mv -f "$UNCAGED_CAS_DIR/$n.$$.tmp" "$UNCAGED_CAS_DIR/$n"
done
echo "working on $T as $R"
echo "{{\"stepHash\":\"$(cat "$D/step")\",\"role\":\"$R\"}}"
"#,
            replies = replies.display()
        ),
    )
}

fn threads_yaml(env: &TestEnv) -> String {
    std::fs::read_to_string(env.root().join("threads.yaml")).unwrap()
}

#[test]
fn config_agent_of_the_typescript_protocol_steps_debate_to_the_end() {
    let env = TestEnv::new();
    let replies = env.root().join("replies");
    make_replies(env.root(), &replies);
    let agent = ts_agent(&env, &replies, "--from-config");
    // A config as the TypeScript tool writes it, with protocol added to one entry.
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "providers: {{}}\nmodels: {{}}\nagents:\n  ts:\n    command: {}\n    args: [--from-config]\n    protocol: 7a0c\ndefaultAgent: ts\ndefaultModel: default\n",
            agent.display()
        ),
    )
    .unwrap();
    let debate = p(&example("debate.yaml"));
    let a = env.start(&debate, PROMPT);
    let b = env.start(&debate, PROMPT);
    let start = env.head(&a);
    assert!(
        replies.join(&start).is_dir(),
        "same StartNode as the scratch run"
    );

    // Two threads stepped in turn: each finds itself in threads.yaml, the other stays.
    env.ok(&["thread", "step", &a]);
    env.ok(&["thread", "step", &b]);
    let listed = threads_yaml(&env);
    let s1 = std::fs::read_to_string(replies.join(&start).join("step")).unwrap();
    assert_eq!(listed, format!("{a}: {start}\n{b}: {start}\n"));
    assert_eq!(env.head(&a), s1);

    // To the end: the head is the scripted run's last step, the thread completed.
    let out = json(&env.ok(&["thread", "step", &a, "-c", "10"]));
    let last = out.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last.get("done"), Some(&Value::Bool(true)));
    assert_eq!(last.get("status"), Some(&Value::str("completed")));
    assert_eq!(env.roles(&a), ["against", "for", "against"]);
    let steps = json(&env.ok(&["thread", "steps", &a]));
    let last = steps
        .get("steps")
        .and_then(Value::as_array)
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last.get("output").and_then(|o| o.get("$status")),
        Some(&Value::str("conceded"))
    );
    let prompts = std::fs::read_to_string(replies.join("prompts")).unwrap();
    assert!(
        prompts.starts_with(
            "against\tPresent your opening argument against the proposition.\nagainst\t"
        ),
        "{prompts}"
    );
    assert!(
        prompts.contains("for\tCounter the opposing argument: Go compiles faster"),
        "{prompts}"
    );

    // The finished thread leaves threads.yaml at the next step of another.
    env.ok(&["thread", "step", &b]);
    let listed = threads_yaml(&env);
    assert!(!listed.contains(&a), "{listed}");
    assert!(listed.contains(&b), "{listed}");
    env.ok(&["cas", "verify"]);
}

#[test]
fn agents_running_at_once_each_find_their_thread() {
    let env = TestEnv::new();
    let replies = env.root().join("replies");
    make_replies(env.root(), &replies);
    // Each agent reads threads.yaml after the others have rewritten it.
    let agent = format!(
        "{} --cli",
        ts_agent_after(&env, &replies, "--cli", "sleep 0.3").display()
    );
    let debate = p(&example("debate.yaml"));
    let threads: Vec<String> = (0..4).map(|_| env.start(&debate, PROMPT)).collect();
    let children: Vec<_> = threads
        .iter()
        .map(|t| {
            env.spawn_cmd()
                .args(["thread", "step", t, "--agent", &agent])
                .args(["--agent-protocol", "7a0c"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
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
    let listed = threads_yaml(&env);
    for t in &threads {
        assert_eq!(env.roles(t), ["against"]);
        assert!(listed.contains(t.as_str()), "{listed}");
    }
}

#[test]
fn a_step_the_agent_did_not_write_well_is_refused() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    let head = env.head(&t);
    let step = |body: &str, needle: &str| {
        let agent = env.agent("bad-ts-agent", body);
        env.fails(
            &[
                "thread",
                "step",
                &t,
                "--agent",
                &p(&agent),
                "--agent-protocol",
                "7a0c",
            ],
            needle,
        );
        assert_eq!(env.head(&t), head);
    };
    step(
        "echo '{\"stepHash\":\"2B77HPWKR4V3V\"}'",
        "agent returned 2B77HPWKR4V3V, which is neither in the store nor in",
    );
    step(
        "echo junk > \"$UNCAGED_CAS_DIR/2B77HPWKR4V3V.bin\"\necho '{\"stepHash\":\"2B77HPWKR4V3V\"}'",
        "agent returned 2B77HPWKR4V3V, whose node file was refused: skipped",
    );
    // Import only reads the files: the refused one is left as it is.
    assert!(env.root().join("cas/2B77HPWKR4V3V.bin").exists());
}

#[test]
fn agent_protocol_flag_on_step_and_run() {
    let env = TestEnv::new();
    let replies = env.root().join("replies");
    make_replies(env.root(), &replies);
    let agent = format!("{} --cli", ts_agent(&env, &replies, "--cli").display());
    let debate = p(&example("debate.yaml"));
    let cwd = p(env.root());
    let out = env.ok(&[
        "thread",
        "run",
        &debate,
        "-p",
        PROMPT,
        "--cwd",
        &cwd,
        "--agent",
        &agent,
        "--agent-protocol",
        "7a0c",
    ]);
    let states = json(&out);
    let last = states.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last.get("status"), Some(&Value::str("completed")));

    let t = env.start(&debate, PROMPT);
    env.ok(&[
        "thread",
        "step",
        &t,
        "--agent",
        &agent,
        "--agent-protocol",
        "7a0c",
    ]);
    assert_eq!(env.roles(&t), ["against"]);
    // Without the flag the same agent is called as `CMD <thread> <role>` and says how it is
    // called instead; uwf names the protocol.
    let head = env.head(&t);
    env.fails(
        &["thread", "step", &t, "--agent", &agent],
        "looks like an agent for the TypeScript tool's protocol; set protocol: 7a0c on its config entry or pass --agent-protocol 7a0c",
    );
    assert_eq!(env.head(&t), head);
    let r = env.run(&["thread", "step", &t, "--agent-protocol", "7a0c"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = env.run(&[
        "thread",
        "step",
        &t,
        "--agent",
        &agent,
        "--agent-protocol",
        "v2",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn typescript_agent_under_the_uwf_protocol_gets_a_hint() {
    let env = TestEnv::new();
    let hermes = env.agent(
        "uwf-hermes",
        "echo 'usage: uwf-hermes --thread <id> --role <role> --prompt <text>' >&2\nexit 1",
    );
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "providers: {{}}\nmodels: {{}}\nagents:\n  hermes:\n    command: {}\n    args: []\ndefaultAgent: hermes\ndefaultModel: default\n",
            hermes.display()
        ),
    )
    .unwrap();
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    let head = env.head(&t);
    let r = env.fails(
        &["thread", "step", &t],
        "): usage: uwf-hermes --thread <id> --role <role> --prompt <text>; it looks like an agent for the TypeScript tool's protocol; set protocol: 7a0c on its config entry or pass --agent-protocol 7a0c",
    );
    assert_eq!(r.code, 1);
    assert_eq!(env.head(&t), head);
    // A bad protocol name is a config error.
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "agents:\n  hermes: {{command: {}, protocol: ts}}\ndefaultAgent: hermes\n",
            hermes.display()
        ),
    )
    .unwrap();
    env.fails(
        &["thread", "step", &t],
        "config.agents.hermes.protocol must be \"uwf\" or \"7a0c\", got: \"ts\"",
    );
}
