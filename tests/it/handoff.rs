//! `uwf agent submit` under `uwf run`: the submission handed to the runner over its socket
//! (`UWF_SUBMIT_SOCKET`) and written there, with the same ids, errors, exit codes and hints as
//! the direct path; the direct path when no runner answers (no socket, a runner gone before
//! its answer, an answer that is not one), when the agent names another store, and when a
//! model is to extract the output. Real processes, the real store (redb only: a runner on a
//! PostgreSQL server offers no socket).

use crate::common::{Run, TestEnv, json, on_postgres, p};
use crate::fake_api::{FakeApi, ok};
use crate::runner::LINE;
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every log line of the root with `tag`, parsed.
fn log_lines(env: &TestEnv, tag: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(env.root().join("logs")) else {
        return out;
    };
    for e in dir {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for l in text.lines() {
            if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(l)
                && o.get("tag").and_then(|t| t.as_str()) == Some(tag)
            {
                out.push(o);
            }
        }
    }
    out
}

/// The runner's lines for handed-in submissions: `(thread, role, status)`.
fn handed(env: &TestEnv) -> Vec<(String, String, String)> {
    let s = |o: &serde_json::Map<String, serde_json::Value>, k: &str| {
        o.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    log_lines(env, "SBM7RNQX")
        .iter()
        .map(|o| (s(o, "thread"), s(o, "role"), s(o, "status")))
        .collect()
}

/// Asserts that the runner wrote every submission of the threads `ts` (roles a, b, c).
fn assert_all_handed(env: &TestEnv, ts: &[String]) {
    let mut lines = handed(env);
    lines.sort();
    let mut want: Vec<(String, String, String)> = ts
        .iter()
        .flat_map(|t| ["a", "b", "c"].map(|r| (t.clone(), r.to_string(), "ok".to_string())))
        .collect();
    want.sort();
    assert_eq!(lines, want);
}

/// A root with the three-role line workflow, a temporary directory of its own for the
/// runner's socket, and `agent.sh` running `body`.
fn line_env(env: TestEnv, body: &str) -> (TestEnv, PathBuf) {
    let wf = env.root().join("line.yaml");
    std::fs::write(&wf, LINE).unwrap();
    std::fs::create_dir(env.root().join("tmp")).unwrap();
    env.agent("agent.sh", body);
    (env, wf)
}

/// `uwf run --until-idle` with `agent.sh`, its temporary directory under the root.
fn run(env: &TestEnv, extra: &[&str]) -> Run {
    let agent = p(&env.root().join("agent.sh"));
    let mut args = vec!["run", "--until-idle", "--agent", &agent];
    args.extend(extra);
    let out = env
        .cmd()
        .env("TMPDIR", env.root().join("tmp"))
        .args(&args)
        .output()
        .unwrap();
    Run::from(out)
}

fn start(env: &TestEnv, wf: &Path) -> String {
    let out = env.ok(&[
        "thread",
        "start",
        wf.to_str().unwrap(),
        "-p",
        "go",
        "--cwd",
        "/tmp",
    ]);
    json(&out)
        .get("thread")
        .and_then(|t| t.as_str())
        .unwrap()
        .to_string()
}

const GOOD: &str = "printf -- '---\\nnote: %s\\n---\\n' \"$2\" | @UWF@ agent submit \"$1\" \"$2\"";

#[test]
fn a_runners_agents_submit_through_it_and_its_socket_goes_with_it() {
    if on_postgres() {
        return;
    }
    let (env, wf) = line_env(
        TestEnv::new(),
        &format!(
            "[ -S \"$UWF_SUBMIT_SOCKET\" ] || exit 7\necho \"$UWF_SUBMIT_SOCKET\" >> \"$UWF_HOME/sockets.txt\"\n{GOOD}"
        ),
    );
    let ts = [start(&env, &wf), start(&env, &wf)];
    // What a runner killed by SIGKILL leaves behind is removed by the next one; a live
    // process's directory stays.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = env.root().join(format!("tmp/uwf-run-{dead}-0000abcd"));
    let live = env
        .root()
        .join(format!("tmp/uwf-run-{}-0000abcd", std::process::id()));
    for d in [&stale, &live] {
        std::fs::create_dir(d).unwrap();
        drop(UnixListener::bind(d.join("submit.sock")).unwrap());
    }
    let r = run(&env, &["-j", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\"completed\":2"), "{}", r.stdout);
    for t in &ts {
        assert_eq!(env.roles(t), ["a", "b", "c"]);
        assert_eq!(
            env.show(t).get("status").unwrap().as_str(),
            Some("completed")
        );
    }
    // Every submission was written by the runner.
    assert_all_handed(&env, &ts);
    // One socket for the run, in a directory of the temporary directory, both gone after it.
    let sockets = std::fs::read_to_string(env.root().join("sockets.txt")).unwrap();
    let first = sockets.lines().next().unwrap();
    assert!(sockets.lines().all(|l| l == first), "{sockets}");
    let sock = Path::new(first);
    assert_eq!(
        sock.parent().unwrap().parent().unwrap(),
        env.root().join("tmp")
    );
    assert!(!sock.exists() && !sock.parent().unwrap().exists());
    assert!(!stale.exists());
    assert!(live.join("submit.sock").exists());
    std::fs::remove_file(live.join("submit.sock")).unwrap();
    std::fs::remove_dir(&live).unwrap();
    assert_eq!(
        std::fs::read_dir(env.root().join("tmp")).unwrap().count(),
        0
    );
}

/// Submissions that arrive together are all answered by the runner: the first six wait for
/// each other, so their connections overlap, and the later ones reuse the answering threads.
#[test]
fn submissions_that_arrive_together_are_all_answered_by_the_runner() {
    if on_postgres() {
        return;
    }
    let (env, wf) = line_env(
        TestEnv::new(),
        &format!(
            "touch \"$UWF_HOME/ready.$$\"\nn=0\nwhile [ \"$(ls \"$UWF_HOME\" | grep -c '^ready\\.')\" -lt 6 ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n+1)); done\n{GOOD}"
        ),
    );
    let ts: Vec<String> = (0..6).map(|_| start(&env, &wf)).collect();
    let r = run(&env, &["-j", "6"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\"completed\":6"), "{}", r.stdout);
    assert_all_handed(&env, &ts);
}

#[test]
fn a_submission_through_the_runner_is_the_one_the_direct_path_writes() {
    if on_postgres() {
        return;
    }
    // Fixed clocks and seeds: the same commands in two roots give the same threads.
    let (handed_env, wf1) = line_env(TestEnv::fixed(), GOOD);
    let (direct_env, wf2) = line_env(TestEnv::fixed(), GOOD);
    let t1 = start(&handed_env, &wf1);
    let t2 = start(&direct_env, &wf2);
    assert_eq!(t1, t2);
    assert_eq!(run(&handed_env, &[]).code, 0);
    let agent = p(&direct_env.root().join("agent.sh"));
    for _ in 0..3 {
        direct_env.ok(&["thread", "step", &t2, "--agent", &agent]);
    }
    assert_eq!(handed(&handed_env).len(), 3);
    assert!(handed(&direct_env).is_empty());
    let steps = |env: &TestEnv, t: &str| {
        json(&env.ok(&["thread", "steps", t]))
            .get("steps")
            .unwrap()
            .to_json()
    };
    assert_eq!(handed_env.head(&t1), direct_env.head(&t2));
    assert_eq!(steps(&handed_env, &t1), steps(&direct_env, &t2));
}

#[test]
fn a_submission_through_the_runner_is_written_with_its_steps_head_move() {
    if on_postgres() {
        return;
    }
    // The agent of each step submits twice and returns the first; on the first thread's first
    // step it also submits a step of the other thread, whose step is not running. Inside the
    // agent, `cas get` (the direct way) says whether each submission is stored yet.
    let (env, wf) = line_env(
        TestEnv::new(),
        r#"cd "$UWF_HOME"
one=$(printf -- '---\nnote: first %s\n---\n' "$2" | @UWF@ agent submit "$1" "$2")
two=$(printf -- '---\nnote: second %s\n---\n' "$2" | @UWF@ agent submit "$1" "$2")
env -u UWF_SUBMIT_SOCKET @UWF@ cas get "$one" >/dev/null 2>&1; echo "$1 $2 $one $? $two" >> held.txt
if [ "$1" = "$(cat first.txt)" ] && [ "$2" = a ]; then
  other=$(printf -- '---\nnote: from elsewhere\n---\n' | @UWF@ agent submit "$(cat second.txt)" a)
  env -u UWF_SUBMIT_SOCKET @UWF@ cas get "$other" >/dev/null 2>&1; echo "$other $?" > other.txt
fi
echo "$one""#,
    );
    let (t1, t2) = (start(&env, &wf), start(&env, &wf));
    std::fs::write(env.root().join("first.txt"), &t1).unwrap();
    std::fs::write(env.root().join("second.txt"), &t2).unwrap();
    let r = run(&env, &["-j", "1", "--thread", &t1]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\"completed\":1"), "{}", r.stdout);
    let held = std::fs::read_to_string(env.root().join("held.txt")).unwrap();
    let lines: Vec<Vec<&str>> = held.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 3, "{held}");
    for (l, role) in lines.iter().zip(["a", "b", "c"]) {
        let [t, r, one, code, two] = l[..] else {
            panic!("{held}")
        };
        assert_eq!((t, r), (t1.as_str(), role));
        // Not stored while the agent ran: it waits for the head move, which writes it.
        assert_ne!(code, "0", "{held}");
        let step = json(&env.ok(&["cas", "get", one]));
        assert_eq!(step.get("type").unwrap().as_str(), Some("108DB063KRQWW"));
        // The submission the agent did not return is stored too, as its own writes would be.
        let other = json(&env.ok(&["cas", "get", two]));
        assert!(other.get("payload").is_some());
    }
    assert_eq!(env.head(&t1), lines[2][2]);
    assert_eq!(env.roles(&t1), ["a", "b", "c"]);
    // A submission for a thread no step of the runner waits for is written at once.
    let other = std::fs::read_to_string(env.root().join("other.txt")).unwrap();
    let [id, code] = other.split_whitespace().collect::<Vec<_>>()[..] else {
        panic!("{other}")
    };
    assert_eq!(code, "0", "{other}");
    assert!(json(&env.ok(&["cas", "get", id])).get("payload").is_some());
    assert_eq!(env.roles(&t2), Vec::<String>::new());
}

/// Each case: a name and the command line of `uwf agent submit` (stdin and arguments).
const CASES: &[(&str, &str)] = &[
    (
        "nofront",
        "printf 'no frontmatter at all' | @UWF@ agent submit \"$1\" \"$2\"",
    ),
    (
        "schema",
        "printf -- '---\\nother: 1\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\"",
    ),
    (
        "badyaml",
        "printf -- '---\\nnote: [unclosed\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\"",
    ),
    (
        "role",
        "printf -- '---\\nnote: x\\n---\\n' | @UWF@ agent submit \"$1\" nosuchrole",
    ),
    (
        "json",
        "printf -- '---\\nother: 1\\n---\\n' | @UWF@ --format json agent submit \"$1\" \"$2\"",
    ),
    (
        "thread",
        "printf -- '---\\nnote: x\\n---\\n' | @UWF@ agent submit 7ZZZZZZZZZZZZZZZZZZZZZZZZZ \"$2\"",
    ),
    (
        "nearly",
        "printf -- '---\\nnote: x\\n---\\n' | @UWF@ agent submit \"$(echo \"$1\" | sed 's/.$/Z/')\" \"$2\"",
    ),
    (
        "store",
        "printf -- '---\\nnote: x\\n---\\n' | UWF_STORE=\"$UWF_HOME/other.redb\" @UWF@ agent submit \"$1\" \"$2\"",
    ),
    (
        "good",
        "printf -- '---\\nnote: fine\\n---\\n' | @UWF@ agent submit --name shell \"$1\" \"$2\"",
    ),
];

#[test]
fn errors_through_the_runner_are_the_direct_paths_errors() {
    if on_postgres() {
        return;
    }
    // Each case runs twice, through the runner and the direct way (no socket), with stderr
    // and the exit code kept; then the agent fails, and with `maxRetries: 1` the thread too.
    let mut body = String::from("cd \"$UWF_HOME\"\n");
    for (name, cmd) in CASES {
        body.push_str(&format!(
            "{cmd} > {name}.handed.out 2> {name}.handed.err; echo $? > {name}.handed.code\n"
        ));
        let direct = cmd.replace("@UWF@", "env -u UWF_SUBMIT_SOCKET @UWF@");
        body.push_str(&format!(
            "{direct} > {name}.direct.out 2> {name}.direct.err; echo $? > {name}.direct.code\n"
        ));
    }
    body.push_str("exit 1");
    let (env, wf) = line_env(TestEnv::fixed(), &body);
    std::fs::write(env.root().join("config.yaml"), "maxRetries: 1\n").unwrap();
    let t = start(&env, &wf);
    // The other store exists: the runner is asked, and sends the submission back.
    let made = env
        .cmd()
        .env("UWF_STORE", env.root().join("other.redb"))
        .args(["thread", "list"])
        .output()
        .unwrap();
    assert!(made.status.success());
    let r = run(&env, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\"failed\":1"), "{}", r.stdout);
    let read = |n: &str, how: &str, what: &str| {
        std::fs::read_to_string(env.root().join(format!("{n}.{how}.{what}"))).unwrap()
    };
    for (name, _) in CASES {
        for what in ["out", "err", "code"] {
            assert_eq!(
                read(name, "handed", what),
                read(name, "direct", what),
                "{name}: {what}"
            );
        }
        let code: i32 = read(name, "handed", "code").trim().parse().unwrap();
        let err = read(name, "handed", "err");
        if *name == "good" {
            assert_eq!(code, 0, "{err}");
            continue;
        }
        assert_ne!(code, 0, "{name}");
        assert!(read(name, "handed", "out").is_empty(), "{name}");
        // One line of error, then `hint:` lines (and the JSON object with --format json).
        let first: Vec<&str> = err.lines().filter(|l| !l.starts_with("hint: ")).collect();
        let want = if *name == "json" { 2 } else { 1 };
        assert_eq!(first.len(), want, "{name}: {err}");
    }
    let code = |n: &str| read(n, "handed", "code").trim().to_string();
    let err = |n: &str| read(n, "handed", "err");
    assert_eq!(code("nofront"), "1");
    assert!(err("nofront").contains("does not begin with a YAML frontmatter"));
    assert!(err("schema").contains("note"), "{}", err("schema"));
    assert!(err("role").contains("unknown role \"nosuchrole\""));
    assert!(err("json").contains("\"error\":{"), "{}", err("json"));
    assert_eq!(code("thread"), "3");
    assert_eq!(code("nearly"), "3");
    assert!(
        err("nearly").contains(&format!("hint: did you mean {t}?")),
        "{}",
        err("nearly")
    );
    // The raw output of a failed extraction is kept, whoever wrote it.
    let raw = err("nofront")
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    let node = json(&env.ok(&["cas", "get", &raw]));
    assert_eq!(
        node.get("payload").unwrap().as_str(),
        Some("no frontmatter at all")
    );
    // The good submission gave the same StepNode both ways, and it is stored.
    let id = read("good", "handed", "out").trim().to_string();
    let step = json(&env.ok(&["cas", "get", &id]));
    assert_eq!(
        step.get("payload").unwrap().get("agent").unwrap().as_str(),
        Some("shell")
    );
    // Another store's submission went the direct way, to that store (which lacks the thread).
    assert_eq!(code("store"), "3");
    // The runner wrote or refused every case but the other store's, which it sent back.
    let statuses: Vec<String> = handed(&env).into_iter().map(|(_, _, s)| s).collect();
    let mut want = vec!["error"; 7];
    want.extend(["direct", "ok"]);
    assert_eq!(statuses, want);
}

#[test]
fn a_thread_cancelled_while_its_agent_runs_refuses_its_submission_both_ways() {
    if on_postgres() {
        return;
    }
    // The runner keeps the thread as its step read it, for the agent's submissions; one made
    // after the thread was cancelled is refused as the direct path refuses it.
    let cmd = "printf -- '---\\nnote: late\\n---\\n' | @UWF@ agent submit \"$1\" \"$2\"";
    let direct = cmd.replace("@UWF@", "env -u UWF_SUBMIT_SOCKET @UWF@");
    let body = format!(
        "cd \"$UWF_HOME\"\n@UWF@ thread kill \"$1\" >/dev/null || exit 9\n\
         {cmd} > handed.out 2> handed.err; echo $? > handed.code\n\
         {direct} > direct.out 2> direct.err; echo $? > direct.code\n\
         cat handed.out"
    );
    let (env, wf) = line_env(TestEnv::new(), &body);
    let t = start(&env, &wf);
    let head = env.head(&t);
    let r = run(&env, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let read = |n: &str| std::fs::read_to_string(env.root().join(n)).unwrap();
    for what in ["out", "err", "code"] {
        assert_eq!(
            read(&format!("handed.{what}")),
            read(&format!("direct.{what}")),
            "{what}"
        );
    }
    assert_ne!(read("handed.code").trim(), "0");
    assert!(
        read("handed.err").contains("not active"),
        "{}",
        read("handed.err")
    );
    assert!(read("handed.out").is_empty());
    assert_eq!(
        handed(&env),
        [(t.clone(), "a".to_string(), "error".to_string())]
    );
    // Nothing was written for the thread: its head is where it was.
    assert_eq!(env.head(&t), head);
    assert_eq!(env.roles(&t), Vec::<String>::new());
}

/// `uwf agent submit` with `UWF_SUBMIT_SOCKET` set to `socket`.
fn submit_via(env: &TestEnv, socket: &Path, t: &str, raw: &str) -> Run {
    let out = env
        .cmd()
        .env("UWF_SUBMIT_SOCKET", socket)
        .args(["agent", "submit", t, "a"])
        .write_stdin(raw.to_string())
        .output()
        .unwrap();
    Run::from(out)
}

/// A fake runner on `path` that takes one connection (within 30 s), reads what it is sent
/// (all of it when `read_all`), answers `answer` and closes; returns what it read, `None` when
/// nothing connected.
fn fake_runner(
    path: &Path,
    read_all: bool,
    answer: &'static [u8],
) -> std::thread::JoinHandle<Option<Vec<u8>>> {
    let l = UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(30);
        let mut c = loop {
            match l.accept() {
                Ok((c, _)) => break c,
                Err(_) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return None,
            }
        };
        c.set_nonblocking(false).unwrap();
        let mut got = Vec::new();
        if read_all {
            c.read_to_end(&mut got).unwrap();
        }
        let _ = c.write_all(answer);
        Some(got)
    })
}

/// A fake runner: whether it reads the whole request, and what it answers; `None` for none.
type Fake = Option<(bool, &'static [u8])>;

#[test]
fn without_a_runner_to_answer_a_submission_goes_the_direct_way() {
    if on_postgres() {
        return;
    }
    let (env, wf) = line_env(TestEnv::fixed(), GOOD);
    let t = start(&env, &wf);
    let raw = "---\nnote: hello\n---\n";
    // The id the direct path gives, on another root in the same state.
    let (other, wf2) = line_env(TestEnv::fixed(), GOOD);
    assert_eq!(start(&other, &wf2), t);
    let want = other.run_stdin(&["agent", "submit", &t, "a"], raw);
    assert_eq!(want.code, 0, "{}", want.stderr);
    let dir = env.root().join("tmp");
    // No socket there; a runner gone before it answered (its connection closed after the
    // request); one that closed at once; one whose answer is not one.
    let cases: [(&str, Fake); 4] = [
        ("none", None),
        ("gone", Some((true, b""))),
        ("closed", Some((false, b""))),
        ("garbage", Some((true, b"{\"Id\": 42"))),
    ];
    for (name, fake) in cases {
        let path = dir.join(format!("{name}.sock"));
        let server = fake.map(|(all, answer)| fake_runner(&path, all, answer));
        let r = submit_via(&env, &path, &t, raw);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert_eq!(r.stdout, want.stdout, "{name}");
        assert!(r.stderr.is_empty(), "{name}: {}", r.stderr);
        if let Some(s) = server {
            let got = s.join().unwrap().expect("the submission tried the socket");
            if fake.is_some_and(|(all, _)| all) {
                assert!(String::from_utf8_lossy(&got).contains(&t), "{name}");
            }
        }
    }
    let id = want.stdout.trim();
    assert_eq!(
        json(&env.ok(&["cas", "get", id]))
            .get("payload")
            .unwrap()
            .get("role")
            .unwrap()
            .as_str(),
        Some("a")
    );
    // An error of the direct path after a runner gone keeps its one line and exit code.
    let path = dir.join("gone2.sock");
    let server = fake_runner(&path, true, b"");
    let r = submit_via(&env, &path, &t, "prose");
    let direct = env.run_stdin(&["agent", "submit", &t, "a"], "prose");
    assert_eq!(r.code, 1);
    assert_eq!((r.code, &r.stderr), (direct.code, &direct.stderr));
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    assert!(!server.join().unwrap().unwrap().is_empty());
}

#[test]
fn a_model_extraction_under_a_runner_is_the_submitting_processs() {
    if on_postgres() {
        return;
    }
    let api = FakeApi::start(vec![ok(r#"{"note":"from the model"}"#)]);
    let (env, wf) = line_env(
        TestEnv::new(),
        "printf 'prose, no frontmatter' | @UWF@ agent submit \"$1\" \"$2\"",
    );
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "providers:\n  fake:\n    baseUrl: {}\n    apiKeyEnv: FAKE_KEY\n    timeoutSeconds: 5\n    maxRetries: 0\nmodels:\n  default:\n    provider: fake\n    name: fake-model\ndefaultModel: default\n",
            api.url
        ),
    )
    .unwrap();
    std::fs::write(env.root().join(".env"), "FAKE_KEY=sk-test-handoff\n").unwrap();
    let t = start(&env, &wf);
    let r = run(&env, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.roles(&t), ["a", "b", "c"]);
    assert_eq!(api.requests(), 3);
    let statuses: Vec<String> = handed(&env).into_iter().map(|(_, _, s)| s).collect();
    assert_eq!(statuses, ["direct", "direct", "direct"]);
    let head = env.head(&t);
    let step = json(&env.ok(&["cas", "get", &head]));
    let out = step
        .get("payload")
        .unwrap()
        .get("output")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let note = json(&env.ok(&["cas", "get", &out]));
    assert_eq!(
        note.get("payload").unwrap().get("note").unwrap().as_str(),
        Some("from the model")
    );
}
