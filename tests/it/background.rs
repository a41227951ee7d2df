//! `thread exec --background` and `thread stop` through the real binary: the detached worker,
//! the TypeScript tool's running marker, and what a stop leaves behind.

use crate::common::{TestEnv, example, json, p, running};
use std::path::Path;
use std::time::{Duration, Instant};
use uwf::cas::Value;

/// Polls `f` for up to 30 s.
fn wait_until(what: &str, f: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pids_in(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn status(env: &TestEnv, t: &str) -> Value {
    env.show(t).get("status").cloned().unwrap()
}

fn marker(env: &TestEnv, t: &str) -> std::path::PathBuf {
    env.root().join("running").join(format!("{t}.json"))
}

#[test]
fn a_background_run_is_running_until_thread_stop_ends_it() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let head = env.head(&t);
    let pids = env.root().join("pids");
    let agent = env.agent(
        "sleeper.sh",
        &format!(
            "echo $$ >> {0}\nsleep 60 &\necho $! >> {0}\nwait",
            pids.display()
        ),
    );
    let out = json(&env.ok(&["thread", "exec", &t, "--background", "--agent", &p(&agent)]));
    assert_eq!(out.get("status"), Some(&Value::str("running")));
    assert_eq!(out.get("background"), Some(&Value::Bool(true)));
    assert_eq!(out.get("done"), Some(&Value::Bool(false)));
    assert_eq!(out.get("head"), Some(&Value::str(&head)));

    // The marker is the TypeScript tool's: pretty JSON naming the worker.
    let m = json(&std::fs::read_to_string(marker(&env, &t)).unwrap());
    assert_eq!(m.get("thread"), Some(&Value::str(&t)));
    let worker = match m.get("pid") {
        Some(Value::Number(n)) => *n as u32,
        other => panic!("marker pid {other:?}"),
    };
    assert!(running(worker));
    wait_until("the agent", || pids_in(&pids).len() >= 2);
    assert_eq!(status(&env, &t), Value::str("running"));
    let listed = env.ok(&["thread", "list", "--status", "running"]);
    assert!(listed.contains(&t), "{listed}");
    env.fails(&["thread", "exec", &t, "--agent", &p(&agent)], "PID: ");

    let out = json(&env.ok(&["thread", "stop", &t]));
    assert_eq!(out.get("stopped"), Some(&Value::Bool(true)));
    assert!(!running(worker), "the worker outlived thread stop");
    wait_until("the agent to end", || {
        pids_in(&pids).iter().all(|p| !running(*p))
    });
    assert!(!marker(&env, &t).exists());
    let store = env.store();
    assert!(store.leases().unwrap().is_empty(), "a lease is left");
    drop(store);
    assert_eq!(status(&env, &t), Value::str("idle"));
    assert_eq!(env.head(&t), head);
    let log = std::fs::read_to_string(env.root().join("background").join(format!("{t}.log")));
    assert!(log.unwrap().contains("interrupted by signal 15"));

    // Nothing runs now: a second stop says so and stops nothing.
    let r = env.run(&["thread", "stop", &t]);
    assert_eq!(r.code, 0);
    assert!(
        r.stderr.contains("is not currently running"),
        "{}",
        r.stderr
    );
    assert_eq!(json(&r.stdout).get("stopped"), Some(&Value::Bool(false)));
}

#[test]
fn a_background_run_to_the_end_completes_the_thread() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let agent = env.scripted(&example("debate.script.yaml"));
    env.ok(&[
        "thread",
        "exec",
        &t,
        "--background",
        "-c",
        "20",
        "--agent",
        &agent,
    ]);
    wait_until("the thread to complete", || {
        status(&env, &t) == Value::str("completed")
    });
    wait_until("the marker to go", || !marker(&env, &t).exists());
    env.fails(
        &["thread", "exec", &t, "--background", "--agent", &agent],
        "thread not active",
    );
}

#[test]
fn cancel_ends_a_background_run_first() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let pids = env.root().join("pids");
    let agent = env.agent(
        "sleeper.sh",
        &format!("echo $$ >> {}\nsleep 60", pids.display()),
    );
    env.ok(&["thread", "exec", &t, "--background", "--agent", &p(&agent)]);
    wait_until("the agent", || !pids_in(&pids).is_empty());
    env.ok(&["thread", "cancel", &t]);
    assert!(
        pids_in(&pids).iter().all(|p| !running(*p)),
        "the agent outlived the cancel"
    );
    assert!(!marker(&env, &t).exists());
    assert_eq!(status(&env, &t), Value::str("cancelled"));
}

#[test]
fn a_thread_stepped_in_the_foreground_is_not_started_in_the_background() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let pids = env.root().join("pids");
    let agent = env.agent(
        "sleeper.sh",
        &format!("echo $$ >> {}\nsleep 60", pids.display()),
    );
    let mut fg = env
        .spawn_cmd()
        .args(["thread", "exec", &t, "--agent", &p(&agent)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the agent", || !pids_in(&pids).is_empty());
    let r = env.fails(
        &["thread", "exec", &t, "--background", "--agent", &p(&agent)],
        "is busy",
    );
    assert_eq!(r.code, 75);
    assert!(!marker(&env, &t).exists());
    fg.kill().unwrap();
    fg.wait().unwrap();
}
