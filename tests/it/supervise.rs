//! The supervised step through the real binary: signals to `uwf thread step`, agents that
//! print too much or leave descendants holding the pipes, and the documented exit codes.

#![allow(unsafe_code)] // Signals to processes the tests spawn.

use crate::common::{TestEnv, example, json, p, running};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use uwf::cas::Value;

/// Waits until `file` holds a line per pid, `n` of them; returns the pids.
fn wait_for_pids(file: &Path, n: usize) -> Vec<u32> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(t) = std::fs::read_to_string(file) {
            let pids: Vec<u32> = t.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.len() >= n {
                return pids;
            }
        }
        assert!(
            Instant::now() < until,
            "agent never wrote {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to 10 s for `pid` to end; fails with `why` if it does not.
fn wait_ended(pid: u32, why: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while running(pid) {
        assert!(Instant::now() < until, "{why}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `sig` to a child the test spawned.
pub(crate) fn signal(child: &Child, sig: i32) {
    // SAFETY: a signal to the child this test spawned.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

pub(crate) fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("uwf did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn debate(env: &TestEnv) -> String {
    env.start(&p(&example("debate.yaml")), "Is Rust better than Go?")
}

pub(crate) fn no_lease_left(env: &TestEnv, t: &str) {
    let store = env.store();
    assert!(
        store.leases().expect("leases").is_empty(),
        "a lease is left"
    );
    drop(store);
    assert_eq!(env.show(t).get("status"), Some(&Value::str("idle")));
}

/// An agent that records its pid and its child's, then waits.
fn sleeper(env: &TestEnv, pids: &Path) -> std::path::PathBuf {
    env.agent(
        "sleeper.sh",
        &format!(
            "echo $$ >> {0}\nsleep 60 &\necho $! >> {0}\nwait",
            pids.display()
        ),
    )
}

fn signal_ends_the_step(sig: i32, code: i32) {
    let env = TestEnv::new();
    let t = debate(&env);
    let before = env.head(&t);
    let pids = env.root().join("pids");
    let agent = sleeper(&env, &pids);
    let mut child = env
        .spawn_cmd()
        .args(["thread", "step", &t, "--agent", &p(&agent)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn uwf");
    let agents = wait_for_pids(&pids, 2);
    // SAFETY: a signal to the child this test spawned.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    let status = wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(code));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut err).unwrap();
    assert!(
        err.contains(&format!("interrupted by signal {sig}")),
        "{err}"
    );
    for pid in agents {
        assert!(!running(pid), "agent process {pid} outlived uwf");
    }
    no_lease_left(&env, &t);
    assert_eq!(env.head(&t), before);
}

#[test]
fn sigterm_ends_the_agent_releases_the_lease_and_exits_143() {
    signal_ends_the_step(libc::SIGTERM, 143);
}

#[test]
fn sigint_ends_the_agent_releases_the_lease_and_exits_130() {
    signal_ends_the_step(libc::SIGINT, 130);
}

#[test]
fn sigkill_of_uwf_takes_the_agent_with_it() {
    let env = TestEnv::new();
    let t = debate(&env);
    let pids = env.root().join("pids");
    let agent = env.agent(
        "leader.sh",
        &format!("echo $$ >> {}\nsleep 60", pids.display()),
    );
    let mut child = env
        .spawn_cmd()
        .args(["thread", "step", &t, "--agent", &p(&agent)])
        .spawn()
        .expect("spawn uwf");
    let leader = wait_for_pids(&pids, 1)[0];
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    wait_ended(leader, "the agent outlived a SIGKILLed uwf");
    // The dead owner's lease is taken over by the next step.
    env.ok(&[
        "thread",
        "step",
        &t,
        "--agent",
        &env.scripted(&example("debate.script.yaml")),
    ]);
}

/// Waits for a child, sampling its peak resident memory (`VmHWM`, KiB, counted from its
/// `exec`) until it exits; returns its exit code and the last peak seen.
fn wait_with_peak_rss(child: &mut Child) -> (i32, u64) {
    let mut peak = 0;
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return (s.code().unwrap_or(-1), peak);
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
        if let Some(kib) = status.ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        }) {
            peak = peak.max(kib);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_gigabyte_of_output_stays_within_the_cap() {
    let env = TestEnv::new();
    let t = debate(&env);
    let agent = env.agent(
        "loud.sh",
        "head -c 1000000000 /dev/zero\necho\necho not-an-id",
    );
    let child = env
        .spawn_cmd()
        .args(["thread", "step", &t, "--agent", &p(&agent)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn uwf");
    let mut child = child;
    let (code, max_rss_kib) = wait_with_peak_rss(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut err).unwrap();
    // The tail was kept: its last line is what the check saw.
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("\"not-an-id\""), "{err}");
    assert!(max_rss_kib > 0, "no sample of uwf's memory");
    assert!(
        max_rss_kib < 64 * 1024,
        "uwf grew to {max_rss_kib} KiB reading 1 GB of agent output"
    );
    no_lease_left(&env, &t);
}

#[test]
fn a_setsid_grandchild_holding_stdout_is_ended_at_the_time_limit() {
    let env = TestEnv::new();
    let t = debate(&env);
    let pids = env.root().join("pids");
    // The grandchild leaves the process group and the session, and keeps stdout open.
    let agent = env.agent(
        "escape.sh",
        &format!(
            "setsid sh -c 'echo $$ >> {0}; exec sleep 60' &\nsleep 60",
            pids.display()
        ),
    );
    let started = Instant::now();
    let r = env.run(&[
        "thread",
        "step",
        &t,
        "--agent",
        &p(&agent),
        "--timeout",
        "1",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("agent timed out after 1s"),
        "{}",
        r.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let grandchild = wait_for_pids(&pids, 1)[0];
    wait_ended(grandchild, "the setsid grandchild survived");
    no_lease_left(&env, &t);
}

#[test]
fn an_agent_that_exits_leaving_a_daemon_on_stdout_still_ends_the_step() {
    let env = TestEnv::new();
    let t = debate(&env);
    let pids = env.root().join("pids");
    let script = env.scripted(&example("debate.script.yaml"));
    let agent = env.agent(
        "daemon.sh",
        &format!(
            "setsid sh -c 'echo $$ >> {0}; exec sleep 60' &\nexec {script} \"$@\"",
            pids.display()
        ),
    );
    let started = Instant::now();
    let out = json(&env.ok(&["thread", "step", &t, "--agent", &p(&agent)]));
    assert_eq!(out.get("status"), Some(&Value::str("idle")));
    assert!(started.elapsed() < Duration::from_secs(20));
    let daemon = wait_for_pids(&pids, 1)[0];
    assert!(!running(daemon), "the daemon the agent left was not ended");
}

// ---- exit codes, one test per code ----

#[test]
fn exit_0_on_success() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["cas", "put-text", "hello"]).code, 0);
}

#[test]
fn exit_1_for_a_user_error() {
    let env = TestEnv::new();
    let r = env.fails(&["cas", "put", "7VQ43ZSJTEWA7", "{not json"], "");
    assert_eq!(r.code, 1);
    // Pinned by the TypeScript tool: a node that is not stored.
    assert_eq!(env.run(&["cas", "get", "0000000000000"]).code, 1);
}

#[test]
fn exit_2_for_a_usage_error_with_clap_message() {
    let env = TestEnv::new();
    let r = env.run(&["thread", "step"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("<THREAD>"),
        "names the missing argument: {}",
        r.stderr
    );
    assert!(r.stderr.contains("Usage:"), "{}", r.stderr);
}

#[test]
fn exit_3_for_a_thread_or_workflow_not_found() {
    let env = TestEnv::new();
    let r = env.fails(
        &["thread", "show", "06H08SPVKKAF3JCSEB1P6P2JD0"],
        "not found",
    );
    assert_eq!(r.code, 3);
    let r = env.fails(
        &["thread", "start", "no-such-workflow", "-p", "x"],
        "not found",
    );
    assert_eq!(r.code, 3);
}

#[test]
fn exit_65_for_a_damaged_store() {
    let env = TestEnv::new();
    env.ok(&["cas", "put-text", "hello"]);
    let len = std::fs::metadata(env.db()).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(env.db())
        .unwrap();
    f.set_len(len / 3).unwrap();
    drop(f);
    let r = env.fails(&["cas", "get", "95ST8MZ0QTKP9"], "");
    assert_eq!(r.code, 65, "{}", r.stderr);
}

#[test]
fn exit_70_for_a_system_failure() {
    let env = TestEnv::new();
    env.ok(&["cas", "put-text", "hello"]);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let status = env
        .spawn_cmd()
        .args(["cas", "get", "95ST8MZ0QTKP9"])
        .stdout(full)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(70));
}

#[test]
fn exit_75_for_a_busy_thread_with_json_error_object() {
    let env = TestEnv::new();
    let t = debate(&env);
    let pids = env.root().join("pids");
    let agent = sleeper(&env, &pids);
    let mut first = env
        .spawn_cmd()
        .args(["thread", "step", &t, "--agent", &p(&agent)])
        .spawn()
        .expect("spawn uwf");
    wait_for_pids(&pids, 2);
    let r = env.run(&["--format", "json", "thread", "step", &t, "--agent", "true"]);
    // SAFETY: a signal to the child this test spawned.
    unsafe {
        libc::kill(first.id() as i32, libc::SIGTERM);
    }
    wait_exit(&mut first, Duration::from_secs(20));
    assert_eq!(r.code, 75, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert!(
        lines[0].contains("is busy: step in progress by pid"),
        "{}",
        r.stderr
    );
    assert!(lines[1].starts_with("hint: "), "{}", r.stderr);
    let obj = json(lines.last().unwrap());
    let e = obj.get("error").expect("error object");
    assert_eq!(e.get("code"), Some(&Value::Number(75.0)));
    assert_eq!(e.get("kind"), Some(&Value::str("retry")));
    assert_eq!(e.get("retryable"), Some(&Value::Bool(true)));
}
