//! `uwf run` with real agent processes and the real store: workflow limits (concurrency,
//! queue, drop), pause and resume, round limits, failures up to `maxRetries`, forks from a
//! role, Ctrl-C with agents running, a SIGKILL of the runner, and two runners at once.

use crate::common::{Run, TestEnv, json, p, running};
use crate::supervise::{signal, wait_exit};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use uwf::cas::Value;

/// Three roles in a row.
pub const LINE: &str = "name: line\ndescription: three roles in a row\nroles:\n  a: {description: first, goal: go, capabilities: [], procedure: do it, output: a note, frontmatter: {type: object, properties: {note: {type: string}}, required: [note]}}\n  b: {description: second, goal: go, capabilities: [], procedure: do it, output: a note, frontmatter: {type: object, properties: {note: {type: string}}, required: [note]}}\n  c: {description: third, goal: go, capabilities: [], procedure: do it, output: a note, frontmatter: {type: object, properties: {note: {type: string}}, required: [note]}}\ngraph:\n  $START: {_: {role: a, prompt: start}}\n  a: {_: {role: b, prompt: next}}\n  b: {_: {role: c, prompt: next}}\n  c: {_: {role: $END, prompt: done}}\n";

struct Line {
    env: TestEnv,
    wf: PathBuf,
    log: PathBuf,
}

impl Line {
    /// A root with the workflow, `config` and an agent that logs `start`/`end` lines
    /// (thread, role, pid, nanoseconds) around a sleep of `secs`.
    fn new(config: &str, secs: &str) -> Line {
        let env = TestEnv::new();
        let wf = env.root().join("line.yaml");
        std::fs::write(&wf, LINE).unwrap();
        std::fs::write(env.root().join("config.yaml"), config).unwrap();
        let log = env.root().join("agent.log");
        env.agent(
            "agent.sh",
            &format!(
                "echo \"start $1 $2 $$ $(date +%s%N)\" >> {log}\nsleep {secs}\necho \"end $1 $2 $$ $(date +%s%N)\" >> {log}\nprintf -- '---\\nnote: %s\\n---\\n' \"$2\" | @UWF@ agent submit \"$1\" \"$2\"",
                log = log.display()
            ),
        );
        Line { env, wf, log }
    }

    fn agent(&self) -> String {
        p(&self.env.root().join("agent.sh"))
    }

    fn start(&self, extra: &[&str]) -> Value {
        let mut args = vec!["thread", "start", self.wf.to_str().unwrap(), "-p", "go"];
        args.extend(extra);
        json(&self.env.ok(&args))
    }

    /// `thread start --batch -` of `lines` (JSON Lines); the start objects printed.
    fn start_batch(&self, lines: &str, extra: &[&str]) -> Vec<Value> {
        let mut args = vec!["thread", "start", self.wf.to_str().unwrap(), "--batch", "-"];
        args.extend(extra);
        let r = self.env.run_stdin(&args, lines);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout.lines().map(json).collect()
    }

    fn run(&self, extra: &[&str]) -> Run {
        let agent = self.agent();
        let mut args = vec!["run", "--until-idle", "--agent", &agent];
        args.extend(extra);
        self.env.run(&args)
    }

    fn status(&self, t: &str) -> String {
        self.env
            .show(t)
            .get("status")
            .and_then(Value::as_str)
            .unwrap()
            .to_string()
    }

    /// `(thread, role, pid, start_ns, end_ns)` of every agent run that ended.
    fn runs(&self) -> Vec<(String, String, u32, u128, u128)> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut starts: HashMap<String, (String, String, u128)> = HashMap::new();
        let mut out = Vec::new();
        for l in text.lines() {
            let f: Vec<&str> = l.split(' ').collect();
            let ns: u128 = f[4].parse().unwrap();
            match f[0] {
                "start" => {
                    starts.insert(f[3].to_string(), (f[1].to_string(), f[2].to_string(), ns));
                }
                _ => {
                    if let Some((t, r, s)) = starts.remove(f[3]) {
                        out.push((t, r, f[3].parse().unwrap(), s, ns));
                    }
                }
            }
        }
        out
    }

    /// Pids of agents that started.
    fn started_pids(&self) -> Vec<u32> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("start "))
            .map(|l| l.split(' ').nth(3).unwrap().parse().unwrap())
            .collect()
    }
}

fn thread_of(v: &Value) -> String {
    v.get("thread").and_then(Value::as_str).unwrap().to_string()
}

/// The message of the last error in a thread's `thread show`.
fn last_error(show: &Value) -> String {
    show.get("lastError")
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no lastError message in {}", show.to_json()))
        .to_string()
}

#[test]
fn concurrency_two_never_has_three_threads_in_progress() {
    let l = Line::new("workflows:\n  line: {concurrency: 2}\n", "0.15");
    let mut threads = Vec::new();
    for i in 0..6 {
        let v = l.start(&[]);
        let status = v.get("status").and_then(Value::as_str);
        assert_eq!(status, if i < 2 { None } else { Some("queued") }, "{v}");
        threads.push(thread_of(&v));
    }
    assert_eq!(l.status(&threads[3]), "queued");
    // A queued thread is not stepped by hand either.
    l.env.fails(
        &["thread", "step", &threads[3], "--agent", &l.agent()],
        "is queued",
    );
    let r = l.run(&["-j", "8"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let summary = json(&r.stdout);
    assert_eq!(
        summary.get("completed"),
        Some(&Value::Number(6.0)),
        "{summary}"
    );
    // The summary's keys and their order are part of the output.
    let steps = summary.get("steps").unwrap().to_json();
    assert_eq!(
        r.stdout,
        format!(
            "{{\"steps\":{steps},\"completed\":6,\"failed\":0,\"errors\":0,\"workflows\":{{\"line\":{{\"steps\":{steps},\"completed\":6,\"failed\":0}}}}}}\n"
        )
    );
    for t in &threads {
        assert_eq!(l.status(t), "completed");
        assert_eq!(l.env.roles(t), ["a", "b", "c"]);
    }
    // A thread is in progress from its first agent's start to its last agent's end.
    let mut span: HashMap<String, (u128, u128)> = HashMap::new();
    for (t, _, _, s, e) in l.runs() {
        let x = span.entry(t).or_insert((s, e));
        x.0 = x.0.min(s);
        x.1 = x.1.max(e);
    }
    assert_eq!(span.len(), 6);
    for (t, (s, _)) in &span {
        let at_once = span.values().filter(|(a, b)| a <= s && s < b).count();
        assert!(at_once <= 2, "{t}: {at_once} threads in progress at once");
    }
}

#[test]
fn a_full_queue_drops_its_oldest_and_drop_drops_at_once() {
    let l = Line::new(
        "workflows:\n  line: {concurrency: 1, overflow: queue, max_queue: 2}\n",
        "0",
    );
    let ts: Vec<Value> = (0..5).map(|_| l.start(&[])).collect();
    let st = |i: usize| ts[i].get("status").and_then(Value::as_str);
    assert_eq!(
        (st(0), st(1), st(2), st(3), st(4)),
        (
            None,
            Some("queued"),
            Some("queued"),
            Some("queued"),
            Some("queued")
        )
    );
    let ids: Vec<String> = ts.iter().map(thread_of).collect();
    // Two waited longest and were dropped when the queue overflowed.
    assert_eq!(l.status(&ids[1]), "dropped");
    assert_eq!(l.status(&ids[2]), "dropped");
    assert_eq!(l.status(&ids[3]), "queued");
    let r = l.run(&[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let want = ["completed", "dropped", "dropped", "completed", "completed"];
    for (t, w) in ids.iter().zip(want) {
        assert_eq!(l.status(t), w, "{t}");
    }

    let l = Line::new(
        "workflows:\n  line: {concurrency: 1, overflow: drop}\n",
        "0",
    );
    let first = thread_of(&l.start(&[]));
    let second = l.start(&[]);
    assert_eq!(second.get("status"), Some(&Value::str("dropped")));
    assert_eq!(l.status(&thread_of(&second)), "dropped");
    let listed = l.env.ok(&["thread", "list", "--status", "dropped"]);
    assert!(listed.contains(&thread_of(&second)), "{listed}");
    assert_eq!(l.run(&[]).code, 0);
    assert_eq!(l.status(&first), "completed");
}

#[test]
fn a_batch_start_overflowing_a_queue_behaves_like_single_starts() {
    let config = "workflows:\n  line: {concurrency: 1, overflow: queue, max_queue: 2}\n";
    let single = Line::new(config, "0");
    let batch = Line::new(config, "0");
    // Two threads already there, then five more: singly, and in one batch.
    let before: Vec<Value> = (0..2).map(|_| single.start(&[])).collect();
    let after: Vec<Value> = (0..5).map(|_| single.start(&[])).collect();
    let b_before = batch.start_batch("{\"prompt\":\"go\"}\n{\"prompt\":\"go\"}\n", &[]);
    let b_after = batch.start_batch(&"{\"prompt\":\"go\"}\n".repeat(5), &[]);
    let status = |v: &Value| v.get("status").and_then(Value::as_str).map(str::to_string);
    let states = |l: &Line, vs: &[Value]| -> Vec<String> {
        vs.iter().map(|v| l.status(&thread_of(v))).collect()
    };
    for (s, b) in [(&before, &b_before), (&after, &b_after)] {
        assert_eq!(
            s.iter().map(status).collect::<Vec<_>>(),
            b.iter().map(status).collect::<Vec<_>>()
        );
    }
    assert_eq!(states(&single, &before), states(&batch, &b_before));
    assert_eq!(states(&single, &after), states(&batch, &b_after));
    assert_eq!(
        states(&batch, &b_after),
        ["dropped", "dropped", "dropped", "queued", "queued"]
    );
    // The batch's ids sort in its order, as single starts' do, so the queue keeps it.
    let ids: Vec<String> = b_after.iter().map(thread_of).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for l in [&single, &batch] {
        let r = l.run(&[]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(json(&r.stdout).get("completed"), Some(&Value::Number(3.0)));
    }

    // `overflow: drop` drops what the limit has no room for, line by line.
    let l = Line::new(
        "workflows:\n  line: {concurrency: 2, overflow: drop}\n",
        "0",
    );
    let out = l.start_batch(&"{\"prompt\":\"go\"}\n".repeat(4), &[]);
    let got: Vec<Option<String>> = out.iter().map(status).collect();
    assert_eq!(
        got,
        [None, None, Some("dropped".into()), Some("dropped".into())]
    );
    assert_eq!(
        json(&l.run(&[]).stdout).get("completed"),
        Some(&Value::Number(2.0))
    );
}

#[test]
fn a_batch_start_writes_every_line_or_none() {
    let l = Line::new("", "0");
    let lines = "{\"prompt\":\"first task\"}\n\n{\"prompt\":\"second task\",\"cwd\":\"/tmp\",\"maxRounds\":1}\n";
    let out = l.start_batch(lines, &["--cwd", "/"]);
    assert_eq!(out.len(), 2);
    let ts: Vec<String> = out.iter().map(thread_of).collect();
    for (t, (task, cwd)) in ts
        .iter()
        .zip([("first task", "/"), ("second task", "/tmp")])
    {
        let head = l.env.head(t);
        let start = json(&l.env.ok(&["cas", "get", &head]));
        let payload = start.get("payload").unwrap_or(&start);
        assert_eq!(payload.get("prompt"), Some(&Value::str(task)), "{start}");
        assert_eq!(payload.get("cwd"), Some(&Value::str(cwd)), "{start}");
    }
    // `maxRounds` of a line holds like `--max-rounds`.
    let r = l.run(&[]);
    assert_eq!(
        json(&r.stdout).get("failed"),
        Some(&Value::Number(1.0)),
        "{}",
        r.stdout
    );
    assert_eq!(l.status(&ts[0]), "completed");
    assert_eq!(l.status(&ts[1]), "failed");
    // `-q`: the ids, one a line.
    let r = l.env.run_stdin(
        &["thread", "start", &p(&l.wf), "--batch", "-", "-q"],
        "{\"prompt\":\"a\"}\n{\"prompt\":\"b\"}\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ids: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|t| t.len() == 26), "{ids:?}");
    let listed = l.env.ok(&["thread", "list"]);
    assert!(ids.iter().all(|t| listed.contains(t)), "{listed}");
    // A bad line, a relative cwd, an unknown workflow: one line of error, nothing written.
    for (lines, wf, want) in [
        (
            "{\"prompt\":\"a\"}\n{\"prompt\":\"b\"}\n{\"prompt\":3}\n",
            p(&l.wf),
            "batch line 3: invalid type",
        ),
        (
            "{\"prompt\":\"a\",\"cwd\":\"rel\"}\n",
            p(&l.wf),
            "batch line 1: cwd must be an absolute path",
        ),
        (
            "{\"prompt\":\"a\"}\n{\"prompt\":\"a\",\"x\":1}\n",
            p(&l.wf),
            "batch line 2: unknown field `x`",
        ),
        (
            "{\"prompt\":\"a\"}\n",
            "no-such-workflow".to_string(),
            "no-such-workflow",
        ),
        ("", p(&l.wf), "the batch has no thread"),
    ] {
        let r = l
            .env
            .run_stdin(&["thread", "start", &wf, "--batch", "-"], lines);
        assert_ne!(r.code, 0, "{lines:?}");
        assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
        assert!(r.stderr.contains(want), "{lines:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    }
    assert_eq!(l.env.ok(&["thread", "list"]), listed, "nothing written");
    // A file works as standard input does; `-p` and `--batch` exclude each other.
    let f = l.env.root().join("batch.jsonl");
    std::fs::write(&f, "{\"prompt\":\"from a file\"}\n").unwrap();
    let out = l.env.ok(&["thread", "start", &p(&l.wf), "--batch", &p(&f)]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let r = l
        .env
        .run(&["thread", "start", &p(&l.wf), "-p", "x", "--batch", &p(&f)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn pause_and_resume() {
    let l = Line::new("", "0");
    let t = thread_of(&l.start(&[]));
    let out = json(&l.env.ok(&["thread", "pause", &t]));
    assert_eq!(out.get("status"), Some(&Value::str("paused")));
    l.env
        .fails(&["thread", "step", &t, "--agent", &l.agent()], "is paused");
    let r = l.run(&[]);
    assert_eq!(json(&r.stdout).get("steps"), Some(&Value::Number(0.0)));
    assert_eq!(l.status(&t), "paused");
    let out = json(&l.env.ok(&["thread", "resume", &t]));
    assert_eq!(out.get("status"), Some(&Value::str("idle")));
    assert_eq!(l.run(&[]).code, 0);
    assert_eq!(l.status(&t), "completed");
    // Only a paused or failed thread resumes.
    l.env.fails(
        &["thread", "resume", &t],
        "only a paused or failed thread resumes",
    );
}

#[test]
fn a_round_limit_fails_the_thread() {
    let l = Line::new("", "0");
    let t = thread_of(&l.start(&["--max-rounds", "2"]));
    let r = l.run(&[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(json(&r.stdout).get("failed"), Some(&Value::Number(1.0)));
    let show = l.env.show(&t);
    assert_eq!(show.get("status"), Some(&Value::str("failed")));
    let err = show.get("lastError").unwrap();
    assert!(
        err.get("message")
            .and_then(Value::as_str)
            .unwrap()
            .contains("round limit of 2"),
        "{err}"
    );
    assert_eq!(l.env.roles(&t), ["a", "b"]);
}

#[test]
fn run_lines_name_each_ended_thread_then_the_summary() {
    let l = Line::new("", "0");
    let t = thread_of(&l.start(&["--max-rounds", "2"]));
    let r = l.run(&["--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    let error = json(lines[0]).get("error").unwrap().to_json();
    assert_eq!(
        lines[0],
        format!(
            "{{\"thread\":\"{t}\",\"workflow\":\"line\",\"status\":\"failed\",\"steps\":2,\"error\":{error}}}"
        )
    );
    assert_eq!(
        lines[1],
        "{\"summary\":{\"steps\":2,\"completed\":0,\"failed\":1,\"errors\":0,\"workflows\":{\"line\":{\"steps\":2,\"completed\":0,\"failed\":1}}}}"
    );
}

#[test]
fn failures_up_to_max_retries_then_resume() {
    let l = Line::new("maxRetries: 2\n", "0");
    let bad = l.env.agent("bad.sh", "echo 'no luck today' >&2\nexit 4");
    let t = thread_of(&l.start(&[]));
    // One failure is recorded and the thread goes on being idle.
    let r = l.env.run(&["thread", "step", &t, "--agent", &p(&bad)]);
    assert_eq!(r.code, 1);
    let show = l.env.show(&t);
    assert_eq!(show.get("status"), Some(&Value::str("idle")));
    let err = show.get("lastError").unwrap();
    assert!(
        err.get("message")
            .and_then(Value::as_str)
            .unwrap()
            .contains("no luck today")
    );
    assert_eq!(err.get("agent"), Some(&Value::str(p(&bad))));
    // The runner retries once more, and the second failure in a row fails it.
    let r = l.env.run(&["run", "--until-idle", "--agent", &p(&bad)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(json(&r.stdout).get("failed"), Some(&Value::Number(1.0)));
    assert_eq!(l.status(&t), "failed");
    let failed = l.env.ok(&["thread", "list", "--status", "failed"]);
    assert!(failed.contains(&t));
    // Resumed, it is idle again and completes with a working agent.
    let out = json(&l.env.ok(&["thread", "resume", &t]));
    assert_eq!(out.get("status"), Some(&Value::str("idle")));
    assert_eq!(l.run(&[]).code, 0);
    assert_eq!(l.status(&t), "completed");
    assert_eq!(l.env.roles(&t), ["a", "b", "c"]);
}

#[test]
fn a_failing_built_in_agent_is_recorded_as_an_agent_program_is() {
    let l = Line::new("maxRetries: 2\n", "0");
    let t = thread_of(&l.start(&[]));
    let missing = p(&l.env.root().join("nonexistent.yaml"));
    let scripted = format!("uwf agent scripted --script {missing}");
    let r = l.env.run(&["thread", "step", &t, "--agent", &scripted]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("cannot read script"), "{}", r.stderr);
    let show = l.env.show(&t);
    assert_eq!(show.get("status"), Some(&Value::str("idle")));
    let err = show
        .get("lastError")
        .expect("lastError after a failed step");
    assert_eq!(err.get("agent"), Some(&Value::str(scripted.as_str())));
    let message = err.get("message").and_then(Value::as_str).unwrap();
    assert!(message.starts_with("cannot read script"), "{message}");
    // The second failure in a row is the thread's `maxRetries`-th: it fails, as with a program.
    let r = l.env.run(&["thread", "step", &t, "--agent", &scripted]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("failed after 2 failed steps"),
        "{}",
        r.stderr
    );
    assert_eq!(l.status(&t), "failed");
    // Resumed, it completes with a working agent.
    let out = json(&l.env.ok(&["thread", "resume", &t]));
    assert_eq!(out.get("status"), Some(&Value::str("idle")));
    assert_eq!(l.run(&[]).code, 0);
    assert_eq!(l.status(&t), "completed");
}

#[test]
fn fork_from_a_role() {
    let l = Line::new("", "0");
    let t = thread_of(&l.start(&[]));
    assert_eq!(l.run(&[]).code, 0);
    let f = l.env.ok(&["thread", "fork", &t, "--from-role", "b", "-q"]);
    let f = f.trim();
    assert_eq!(l.env.roles(f), ["a", "b"]);
    assert_eq!(l.run(&[]).code, 0);
    assert_eq!(l.env.roles(f), ["a", "b", "c"]);
    l.env.fails(
        &["thread", "fork", &t, "--from-role", "z"],
        "no step of role \"z\"",
    );
}

fn spawn_run(l: &Line, extra: &[&str]) -> Child {
    let agent = l.agent();
    let mut args = vec!["run", "--agent", agent.as_str()];
    args.extend(extra);
    l.env
        .spawn_cmd()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every thread's roles are a prefix of a, b, c (exactly that when `complete`).
fn chains_are_sound(l: &Line, threads: &[String], complete: bool) {
    for t in threads {
        let roles = l.env.roles(t);
        let want = ["a", "b", "c"];
        if complete {
            assert_eq!(roles, want, "{t}");
            assert_eq!(l.status(t), "completed");
        } else {
            assert!(want.starts_with(&roles.iter().map(String::as_str).collect::<Vec<_>>()));
        }
    }
}

#[test]
fn ctrl_c_waits_for_the_grace_period_then_kills_and_releases() {
    let l = Line::new("", "30");
    let threads: Vec<String> = (0..4).map(|_| thread_of(&l.start(&[]))).collect();
    let mut child = spawn_run(&l, &["-j", "4", "--grace", "1"]);
    wait_for("four agents", || l.started_pids().len() >= 4);
    let asked = Instant::now();
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(130));
    assert!(
        asked.elapsed() >= Duration::from_millis(900),
        "did not wait for the grace"
    );
    for pid in l.started_pids() {
        assert!(!running(pid), "agent {pid} outlived uwf run");
    }
    let store = l.env.store();
    assert!(store.leases().unwrap().is_empty(), "a lease is left");
    drop(store);
    chains_are_sound(&l, &threads, false);
    for t in &threads {
        assert_eq!(l.status(t), "idle");
    }
}

#[test]
fn sigkill_of_the_runner_takes_its_agents_with_it() {
    // The runner starts its agents without forking itself; they still die with it.
    let l = Line::new("", "30");
    for _ in 0..3 {
        l.start(&[]);
    }
    let mut child = spawn_run(&l, &["-j", "3"]);
    wait_for("three agents", || l.started_pids().len() >= 3);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    for pid in l.started_pids() {
        wait_for("the agent to die with the runner", || !running(pid));
    }
}

#[test]
fn a_missing_agent_program_is_one_line_in_the_run() {
    let l = Line::new("", "0");
    let t = thread_of(&l.start(&[]));
    let r = l
        .env
        .run(&["run", "--until-idle", "--agent", "no-such-agent-program-x"]);
    assert!(
        r.stderr
            .contains("cannot start agent command (no-such-agent-program-x)"),
        "{}",
        r.stderr
    );
    // A program that cannot start is a failed step: after maxRetries the thread fails.
    assert_eq!(l.status(&t), "failed");
    let message = last_error(&l.env.show(&t));
    assert!(message.contains("no-such-agent-program-x"), "{message}");
}

#[test]
fn a_killed_runner_loses_and_doubles_nothing() {
    let l = Line::new("", "0.05");
    let threads: Vec<String> = (0..20).map(|_| thread_of(&l.start(&[]))).collect();
    let mut child = spawn_run(&l, &["-j", "4"]);
    // Somewhere in the middle: some steps done, some running.
    let seed = std::process::id() as u64 % 7;
    wait_for("a few steps", || l.runs().len() as u64 >= 6 + seed);
    signal(&child, libc::SIGKILL);
    let _ = wait_exit(&mut child, Duration::from_secs(10));
    chains_are_sound(&l, &threads, false);
    let r = l.run(&["-j", "4"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    chains_are_sound(&l, &threads, true);
}

#[test]
fn two_runners_share_the_work_and_ps_sees_both() {
    let l = Line::new("", "0.1");
    // Started in one batch, as a fleet's threads are.
    let threads: Vec<String> = l
        .start_batch(&"{\"prompt\":\"go\"}\n".repeat(200), &[])
        .iter()
        .map(thread_of)
        .collect();
    let a = spawn_run(&l, &["-j", "8", "--until-idle"]);
    let b = spawn_run(&l, &["-j", "8", "--until-idle"]);
    let pids = [a.id(), b.id()];
    let mut seen = std::collections::HashSet::new();
    let until = Instant::now() + Duration::from_secs(60);
    while seen.len() < 2 && Instant::now() < until {
        let rows = json(&l.env.ok(&["ps"]));
        for r in rows.as_array().unwrap() {
            let pid = r.get("pid").and_then(Value::as_f64).unwrap() as u32;
            if pids.contains(&pid) {
                assert!(r.get("role").and_then(Value::as_str).is_some(), "{r}");
                assert_eq!(r.get("workflow"), Some(&Value::str("line")));
                seen.insert(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(seen.len(), 2, "ps did not show steps of both runners");
    for mut c in [a, b] {
        assert_eq!(wait_exit(&mut c, Duration::from_secs(120)).code(), Some(0));
    }
    chains_are_sound(&l, &threads, true);
    // No agent ran twice for one step: 200 threads × 3 roles.
    assert_eq!(l.runs().len(), 600);
}

#[test]
fn a_waiting_runner_picks_up_new_threads() {
    let l = Line::new("", "0");
    let mut child = spawn_run(&l, &["-j", "2", "--grace", "5"]);
    // Started after the runner: it is found and driven to its end.
    std::thread::sleep(Duration::from_millis(300));
    let t = thread_of(&l.start(&[]));
    wait_for("the new thread to complete", || l.status(&t) == "completed");
    signal(&child, libc::SIGTERM);
    let status = wait_exit(&mut child, Duration::from_secs(20));
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert_eq!(status.code(), Some(143), "{status:?}: {err}");
    assert_eq!(l.env.roles(&t), ["a", "b", "c"]);
}

#[test]
fn thread_rm_and_workflow_remove() {
    let l = Line::new("", "0");
    let done = thread_of(&l.start(&[]));
    assert_eq!(l.run(&[]).code, 0);
    let active = thread_of(&l.start(&[]));
    // A finished thread goes; an active one only with --force.
    let out = json(&l.env.ok(&["thread", "rm", &done]));
    assert_eq!(
        out.to_json(),
        format!(r#"[{{"thread":"{done}","removed":true}}]"#)
    );
    assert_eq!(l.env.run(&["thread", "show", &done]).code, 3);
    assert!(!l.env.ok(&["thread", "list", "--all"]).contains(&done));
    l.env.fails(&["thread", "rm", &active], "pass --force");
    assert_eq!(l.status(&active), "idle");
    // Never one with a step running.
    let slow = l.env.agent("slow.sh", "sleep 30");
    let mut step = l
        .env
        .spawn_cmd()
        .args(["thread", "step", &active, "--agent", &p(&slow)])
        .spawn()
        .unwrap();
    wait_for("the step to run", || l.status(&active) == "running");
    // `thread show` names the process running the step, and since when.
    let running = l.env.show(&active).get("running").cloned().unwrap();
    assert_eq!(
        running.get("pid").and_then(Value::as_f64),
        Some(f64::from(step.id()))
    );
    assert!(running.get("since").and_then(Value::as_f64).unwrap() > 0.0);
    l.env
        .fails(&["thread", "rm", &active, "--force"], "has a step running");
    signal(&step, libc::SIGTERM);
    let _ = wait_exit(&mut step, Duration::from_secs(20));
    l.env.ok(&["thread", "rm", &active, "--force"]);
    assert_eq!(l.env.run(&["thread", "show", &active]).code, 3);
    l.env.fails(&["thread", "rm", &active], "thread not found");

    // A removed name leaves the registry; its versions stay unless purged.
    l.env.ok(&["workflow", "put", l.wf.to_str().unwrap()]);
    let out = json(&l.env.ok(&["workflow", "remove", "line"]));
    assert_eq!(out.get("removed"), Some(&Value::Bool(true)));
    assert!(!l.env.ok(&["workflow", "list"]).contains("\"line\""));
    assert!(
        l.env
            .ok(&["workflow", "history", "line"])
            .contains("\"hash\"")
    );
    l.env
        .fails(&["workflow", "remove", "line"], "unknown workflow \"line\"");
    l.env.ok(&["workflow", "put", l.wf.to_str().unwrap()]);
    l.env.ok(&["workflow", "remove", "line", "--purge"]);
    let r = l.env.run(&["workflow", "history", "line"]);
    assert!(!r.stdout.contains("\"hash\""), "{}", r.stdout);
}

#[test]
fn thread_states_survive_export_and_import() {
    let l = Line::new("workflows:\n  line: {concurrency: 1}\nmaxRetries: 1\n", "0");
    let bad = l.env.agent("bad.sh", "echo 'broken agent' >&2\nexit 3");
    let failed = thread_of(&l.start(&["--max-rounds", "7"]));
    let queued = thread_of(&l.start(&[]));
    assert_eq!(l.status(&queued), "queued");
    l.env.fails(
        &["thread", "step", &failed, "--agent", &p(&bad)],
        "failed after 1 failed steps",
    );
    assert_eq!(l.status(&failed), "failed");
    // Failing made room: the queued one started; pause it.
    assert_eq!(l.status(&queued), "idle");
    l.env.ok(&["thread", "pause", &queued]);
    let limited = thread_of(&l.start(&["--max-rounds", "1"]));
    let export = l.env.root().join("backup");
    l.env.ok(&["export", &p(&export)]);
    let jsonl = std::fs::read_to_string(export.join("uwf.jsonl")).unwrap();
    assert!(jsonl.contains("\"kind\":\"state\""), "{jsonl}");
    assert!(jsonl.contains("\"maxRounds\":1"), "{jsonl}");

    let other = TestEnv::new();
    other.ok(&["import", &p(&export)]);
    let show = |t: &str| other.show(t);
    assert_eq!(show(&failed).get("status"), Some(&Value::str("failed")));
    assert!(last_error(&show(&failed)).contains("broken agent"));
    assert_eq!(show(&queued).get("status"), Some(&Value::str("paused")));
    assert_eq!(show(&limited).get("status"), Some(&Value::str("queued")));
    // The paused thread, resumed in the new store, runs to its end.
    other.ok(&["thread", "resume", &queued]);
    let agent = p(&l.env.root().join("agent.sh"));
    let r = other.run(&[
        "run",
        "--until-idle",
        "--agent",
        &agent,
        "--thread",
        &queued,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        other.show(&queued).get("status"),
        Some(&Value::str("completed"))
    );
}

/// One role that reports `continue` until its script says `done`, forty times.
const COUNT: &str = "name: count\ndescription: one role, forty times\nroles:\n  worker:\n    description: works\n    goal: work\n    capabilities: []\n    procedure: do it\n    output: a note\n    frontmatter:\n      type: object\n      properties:\n        $status: {enum: [continue, done]}\n        note: {type: string}\n      required: [$status, note]\ngraph:\n  $START: {_: {role: worker, prompt: start}}\n  worker:\n    continue: {role: worker, prompt: again}\n    done: {role: $END, prompt: finished}\n";

/// A root with the `count` workflow, `n` threads of it started and the scripted agent's
/// command for a script of `steps` steps (the last `done`).
fn counting(steps: usize, n: usize) -> (TestEnv, Vec<String>, String) {
    counting_with(steps, n, "")
}

/// [`counting`], with `more` (fields after a comma) in each thread's start line.
fn counting_with(steps: usize, n: usize, more: &str) -> (TestEnv, Vec<String>, String) {
    let env = TestEnv::new();
    let wf = env.root().join("count.yaml");
    std::fs::write(&wf, COUNT).unwrap();
    let mut script = String::from("worker:\n");
    for i in 0..steps {
        let s = if i + 1 == steps { "done" } else { "continue" };
        script.push_str(&format!("  - $status: {s}\n    note: step {i}\n"));
    }
    let script_path = env.root().join("count.script.yaml");
    std::fs::write(&script_path, script).unwrap();
    env.ok(&["workflow", "put", &p(&wf)]);
    let cwd = p(env.root());
    let r = env.run_stdin(
        &["thread", "start", "count", "--batch", "-", "-q"],
        &format!("{{\"prompt\":\"go\",\"cwd\":\"{cwd}\"{more}}}\n").repeat(n),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let threads = r.stdout.lines().map(str::to_string).collect();
    let agent = env.scripted(&script_path);
    (env, threads, agent)
}

/// Two runners with the in-process scripted agent over threads longer than the steps a runner
/// makes of a thread in a row: threads pass from one runner to the other on the way, and each
/// step is made once, from the thread as it is (every thread's notes in the script's order).
#[test]
fn two_runners_pass_threads_between_them_and_make_each_step_once() {
    const STEPS: usize = 40;
    let (env, threads, agent) = counting(STEPS, 60);
    let spawn = || {
        env.spawn_cmd()
            .args(["run", "--until-idle", "-j", "8", "--agent", &agent])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn(), spawn());
    let mut total = 0.0;
    for c in [&mut a, &mut b] {
        assert_eq!(wait_exit(c, Duration::from_secs(120)).code(), Some(0));
        let mut out = String::new();
        std::io::Read::read_to_string(c.stdout.as_mut().unwrap(), &mut out).unwrap();
        let summary = json(out.lines().last().unwrap());
        total += summary.get("steps").and_then(Value::as_f64).unwrap();
    }
    // Each step once over both runners.
    assert_eq!(total as usize, threads.len() * STEPS);
    let want: Vec<String> = (0..STEPS).map(|i| format!("step {i}")).collect();
    for t in &threads {
        let steps = json(&env.ok(&["thread", "steps", t]));
        let notes: Vec<String> = steps
            .get("steps")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .filter_map(|s| s.get("output")?.get("note")?.as_str().map(str::to_string))
            .collect();
        assert_eq!(notes, want, "{t}");
        assert_eq!(
            env.show(t).get("status").and_then(Value::as_str),
            Some("completed")
        );
    }
}

/// Many threads of one runner reaching their round limit together: their failures are written
/// in the runner's group commits, and each thread fails once, after exactly its rounds, with
/// its limit's error, counted once among the workflow's failed steps.
#[test]
fn threads_failing_at_their_round_limit_together_each_fail_once() {
    const ROUNDS: usize = 3;
    // The script goes on past the limit: every thread would continue.
    let (env, threads, agent) = counting_with(10, 120, ",\"maxRounds\":3");
    let r = env.run(&["run", "--until-idle", "-j", "32", "--agent", &agent]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let summary = json(r.stdout.lines().last().unwrap());
    assert_eq!(
        summary.get("steps").and_then(Value::as_f64),
        Some((threads.len() * ROUNDS) as f64)
    );
    assert_eq!(
        summary.get("failed").and_then(Value::as_f64),
        Some(threads.len() as f64)
    );
    for t in &threads {
        let show = env.show(t);
        assert_eq!(show.get("status").and_then(Value::as_str), Some("failed"));
        let message = last_error(&show);
        assert!(message.contains("round limit of 3"), "{t}: {message}");
        let steps = json(&env.ok(&["thread", "steps", t]));
        let roles = steps
            .get("steps")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .filter(|s| s.get("role").is_some())
            .count();
        assert_eq!(roles, ROUNDS, "{t}");
    }
    let stats = json(&env.ok(&["ps", "--stats"]));
    let hour = stats.get("lastHour").unwrap();
    assert_eq!(
        hour.get("failures").and_then(Value::as_f64),
        Some(threads.len() as f64),
        "{}",
        stats.to_json()
    );
    assert_eq!(
        hour.get("steps").and_then(Value::as_f64),
        Some((threads.len() * ROUNDS) as f64)
    );
    env.ok(&["cas", "verify"]);
}

#[test]
fn a_runner_gives_back_kept_leases_when_a_thread_pauses_and_when_it_stops() {
    // A runner going on with a thread keeps its lease from one step to the next; a pause
    // between two steps, and the runner's end, must give it back.
    const STEPS: usize = 3000;
    let (env, threads, agent) = counting(STEPS, 2);
    // Killed if the test fails before it stops it.
    let mut child = crate::serve::Killed(
        env.spawn_cmd()
            .args(["run", "-j", "2", "--agent", &agent])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let steps = |t: &str| {
        let s = json(&env.ok(&["thread", "steps", t]));
        s.get("steps").and_then(Value::as_array).unwrap().len()
    };
    let leased = |t: &str| {
        env.store()
            .leases()
            .unwrap()
            .iter()
            .any(|(id, _)| id.as_str() == t)
    };
    wait_for("steps of the first thread", || steps(&threads[0]) >= 20);
    env.ok(&["thread", "pause", &threads[0]]);
    wait_for("the paused thread's lease to be given back", || {
        !leased(&threads[0])
    });
    // The runner goes on with the other thread, not with the paused one.
    let paused_at = steps(&threads[0]);
    let other = steps(&threads[1]);
    wait_for("more steps of the other thread", || {
        steps(&threads[1]) >= other + 20
    });
    assert_eq!(steps(&threads[0]), paused_at, "a paused thread was stepped");
    assert!(!leased(&threads[0]));
    signal(&child.0, libc::SIGTERM);
    let status = wait_exit(&mut child.0, Duration::from_secs(30));
    assert!(status.code().is_some(), "{status:?}");
    assert!(
        env.store().leases().unwrap().is_empty(),
        "a lease is left after the runner stopped"
    );
    // Another process steps the thread the runner was on at once, with no lease to take over.
    let r = env.run(&["thread", "step", &threads[1], "--agent", &agent]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("took over"), "{}", r.stderr);
}

/// A lease left in the store by the runner's own process (a step whose lease could not be
/// given back when its connection was cut) does not hold the thread back from that runner: the
/// runner steps it to the end rather than leaving it, as a thread another process steps.
#[test]
fn a_lease_the_runners_own_process_left_does_not_hold_it_back() {
    use std::io::Write;
    let (env, threads, agent) = counting(3, 1);
    // The runner's process, as a shell that waits for a line and then becomes `uwf run`.
    let uwf = env.spawn_cmd();
    let mut sh = std::process::Command::new("sh");
    sh.env_clear();
    for (k, v) in uwf.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    let mut child = crate::serve::Killed(
        sh.args(["-c", "read go; exec \"$0\" \"$@\""])
            .arg(uwf.get_program())
            .args(["run", "--until-idle", "--agent", &agent])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let lease = uwf::store::Lease {
        pid,
        since_ms: 1,
        boot_id: uwf::engine::boot_id(),
        start_ticks: uwf::engine::start_ticks(pid),
        expires_ms: None,
    };
    env.store()
        .write(|w| w.set_lease(&uwf::thread::ThreadId::parse(&threads[0]).unwrap(), &lease))
        .unwrap();
    assert_eq!(
        env.show(&threads[0]).get("status").and_then(Value::as_str),
        Some("running")
    );
    let mut stdin = child.0.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let status = wait_exit(&mut child.0, Duration::from_secs(60));
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(
        env.show(&threads[0]).get("status").and_then(Value::as_str),
        Some("completed"),
        "{err}"
    );
    assert!(env.store().leases().unwrap().is_empty());
}
