//! `uwf serve`'s runner dashboard: `/runs` and `/api/runs`, which answers with the bytes of
//! `uwf ps --stats`. Steps and failed steps land in their minute of the last hour, each
//! workflow's queue and limits match `thread list` and `uwf limits list`, a step running in
//! another process is listed with its holder while its agent sleeps; and a headless Chromium
//! sees the running steps and the chart follow a `uwf run` without a reload (screenshot
//! `target/serve-screenshots/runs.png`).

use crate::common::{FIXED_NOW_MS, TestEnv};
use crate::runner::LINE;
use crate::serve::{Killed, Server, screenshot_dir, value, with_browser};
use crate::serve_browser::{attr, count, mark_page, not_reloaded, wait_for, wait_live};
use serde_json::Value;
use std::process::Child;
use std::time::{Duration, Instant};

/// A root with the three-role `line` workflow registered, and agents: `fast.sh` answers at
/// once, `slow.sh` after `slow` seconds, `bad.sh` crashes.
fn line_root(env: &TestEnv, slow: &str) {
    let wf = env.root().join("line.yaml");
    std::fs::write(&wf, LINE).unwrap();
    env.ok(&["workflow", "put", wf.to_str().unwrap()]);
    let submit = "printf -- '---\\nnote: %s\\n---\\n' \"$2\" | @UWF@ agent submit \"$1\" \"$2\"";
    env.agent("fast.sh", submit);
    env.agent("slow.sh", &format!("sleep {slow}\n{submit}"));
    env.agent("bad.sh", "echo 'the agent crashed' >&2\nexit 3");
}

/// The `--agent` value of agent `name` of [`line_root`].
fn agent(env: &TestEnv, name: &str) -> String {
    env.root().join(name).display().to_string()
}

/// Starts a thread of `line`; returns its id.
fn start(env: &TestEnv) -> String {
    let root = env.root().display().to_string();
    env.ok(&["thread", "start", "line", "-p", "go", "--cwd", &root, "-q"])
        .trim()
        .to_string()
}

/// `uwf ARGS` in the root with the fixed clock: its stdout (whatever its exit code).
fn cli_at(env: &TestEnv, args: &[&str]) -> String {
    env.run_at(FIXED_NOW_MS, args).stdout
}

/// The thread ids `uwf thread list --status S` prints.
fn listed(env: &TestEnv, status: &str) -> usize {
    value(&cli_at(env, &["thread", "list", "--status", status]))
        .as_array()
        .unwrap()
        .len()
}

/// `uwf thread step THREAD --agent AGENT` in the background with the fixed clock.
fn step_in_background(env: &TestEnv, thread: &str, agent: &str) -> Child {
    env.std_cmd()
        .env("UWF_TEST_NOW_MS", FIXED_NOW_MS.to_string())
        .args(["thread", "step", thread, "--agent", agent])
        .current_dir(env.root())
        .spawn()
        .expect("start a step")
}

/// Checks the dashboard of `/api/runs` against the CLI and the store: the bytes of `uwf ps
/// --stats`, `steps` and `failures` in the fixed clock's minute (the last of the hour) and
/// none in the others, the `line` workflow's threads by state as `thread list` has them, its
/// limits as `uwf limits list` prints them. Returns the answer.
fn check_dashboard(env: &TestEnv, server: &Server, steps: u64, failures: u64) -> Value {
    let api = server.ok("/api/runs");
    assert_eq!(
        api,
        cli_at(env, &["ps", "--stats"]),
        "/api/runs vs uwf ps --stats"
    );
    let d = value(&api);
    assert_eq!(d["now"], "2026-01-01T00:00:00.000Z");
    let minutes = d["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 60);
    assert_eq!(minutes[0]["minute"], "2025-12-31T23:01:00.000Z");
    let last = &minutes[59];
    assert_eq!(last["minute"], "2026-01-01T00:00:00.000Z");
    assert_eq!(
        (last["steps"].as_u64(), last["failures"].as_u64()),
        (Some(steps), Some(failures))
    );
    if steps + failures > 0 {
        assert_eq!(last["byWorkflow"]["line"]["steps"], steps);
        assert_eq!(last["byWorkflow"]["line"]["failures"], failures);
    } else {
        assert!(last.get("byWorkflow").is_none(), "{api}");
    }
    assert!(
        minutes[..59]
            .iter()
            .all(|m| m["steps"] == 0 && m["failures"] == 0),
        "{api}"
    );
    assert_eq!(d["lastHour"]["steps"], steps);
    assert_eq!(d["lastHour"]["failures"], failures);
    assert_eq!(
        d["lastHour"]["stepsPerMinute"].as_f64(),
        Some(steps as f64 / 60.0)
    );
    let ws = d["workflows"].as_array().unwrap();
    assert_eq!(ws.len(), 1, "{api}");
    let w = &ws[0];
    assert_eq!(w["workflow"], "line");
    let queued = listed(env, "queued");
    let active = listed(env, "active");
    assert_eq!(w["queued"].as_u64(), Some(queued as u64), "{api}");
    assert_eq!(
        w["inProgress"].as_u64(),
        Some((active - queued) as u64),
        "{api}"
    );
    assert_eq!(
        (w["stepsLastHour"].as_u64(), w["failuresLastHour"].as_u64()),
        (Some(steps), Some(failures))
    );
    let limits = value(&cli_at(env, &["limits", "list"]));
    assert_eq!(
        w["limits"], limits[0],
        "the entry of uwf limits list: {api}"
    );
    assert_eq!(w["limitsFrom"], "store");
    // Its day budget is set: what today cost (the scripted agents call no model).
    assert_eq!(w["spentTodayUsd"], 0);
    d
}

#[test]
fn runs_show_steps_failures_queues_and_a_running_step_with_its_holder() {
    let env = TestEnv::fixed();
    line_root(&env, "3");
    env.ok(&[
        "limits",
        "set",
        "line",
        "--concurrency",
        "2",
        "--max-cost-per-day",
        "5",
    ]);
    let threads: Vec<String> = (0..4).map(|_| start(&env)).collect();
    assert_eq!(listed(&env, "queued"), 2);
    let server = Server::start_env(&env, &[], &[("UWF_TEST_NOW_MS", &FIXED_NOW_MS.to_string())]);
    // Nothing yet: a quiet hour, two threads in progress and two queued.
    let d = check_dashboard(&env, &server, 0, 0);
    assert_eq!(d["workflows"][0]["queued"], 2);
    assert_eq!(d["running"], serde_json::json!([]));
    let page = server.ok("/runs");
    assert!(
        page.contains(r#"<a href="/runs" class="on">Runs</a>"#),
        "{page}"
    );
    assert!(page.contains("No step is running."), "{page}");
    assert!(page.contains("No steps in the last hour."), "{page}");

    // One thread to its end (three steps), one step of another that crashes.
    let fast = agent(&env, "fast.sh");
    env.ok(&["thread", "step", &threads[0], "--agent", &fast, "-c", "3"]);
    let r = env.run(&[
        "thread",
        "step",
        &threads[1],
        "--agent",
        &agent(&env, "bad.sh"),
    ]);
    assert_ne!(r.code, 0, "the crash is a failed step: {}", r.stdout);
    check_dashboard(&env, &server, 3, 1);
    let page = server.ok("/runs");
    assert!(
        page.contains(r#"<g class="minute" data-minute="2026-01-01T00:00:00.000Z" data-steps="3" data-failures="1">"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<tr class="minute" data-minute="2026-01-01T00:00:00.000Z"><td>00:00</td><td class="steps">3</td>"#),
        "the table beside the chart: {page}"
    );
    let queued = listed(&env, "queued");
    assert!(
        page.contains(&format!(
            r#"<tr class="queue" data-workflow="line" data-running="0" data-in-progress="{}" data-queued="{queued}" data-paused="0" data-concurrency="2">"#,
            listed(&env, "active") - queued
        )),
        "{page}"
    );
    assert!(
        page.contains("$5 a day ($0.00 spent today)"),
        "the day budget: {page}"
    );

    // A step of a slow agent in another process: listed while it runs, with its holder.
    let t = &threads[1];
    let mut child = step_in_background(&env, t, &agent(&env, "slow.sh"));
    let pid = child.id();
    let until = Instant::now() + Duration::from_secs(20);
    let row = loop {
        let d = value(&server.ok("/api/runs"));
        if let Some(r) = d["running"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["thread"] == *t)
        {
            break r.clone();
        }
        assert!(Instant::now() < until, "the step was never listed: {d}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(row["workflow"], "line");
    assert_eq!(row["role"], "a");
    assert_eq!(row["pid"].as_u64(), Some(u64::from(pid)));
    assert_eq!(row["since"].as_u64(), Some(FIXED_NOW_MS));
    assert_eq!(row["thisMachine"], true);
    let holder = row["holder"].as_str().unwrap();
    assert_eq!(
        holder,
        format!(
            "{}:{pid}:{}",
            uwf::engine::boot_id(),
            uwf::engine::start_ticks(pid)
        )
    );
    let d = value(&server.ok("/api/runs"));
    assert_eq!(d["workflows"][0]["running"], 1);
    assert_eq!(
        d["running"],
        value(&cli_at(&env, &["ps"])),
        "uwf ps lists the same"
    );
    let page = server.ok("/runs");
    assert!(
        page.contains(&format!(
            r#"<tr class="running" data-thread="{t}" data-pid="{pid}" data-holder="{holder}">"#
        )),
        "{page}"
    );
    assert!(page.contains(&format!("pid {pid}, this machine")), "{page}");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // Its step counts once it moved the head.
    let d = check_dashboard(&env, &server, 4, 1);
    assert_eq!(d["running"], serde_json::json!([]));
}

#[test]
fn a_browser_sees_the_runs_dashboard_follow_a_run_without_reload() {
    let env = TestEnv::new();
    line_root(&env, "1.5");
    for _ in 0..3 {
        start(&env);
    }
    let server = Server::start(&env);
    let shots = screenshot_dir();
    let slow = agent(&env, "slow.sh");
    let mut run: Option<Killed> = None;
    let (run_ref, env_ref, server_ref, shots_ref) = (&mut run, &env, &server, &shots);
    with_browser(|c| async move {
        let (env, server, shots) = (env_ref, server_ref, shots_ref);
        c.goto(&server.url("/runs")).await.unwrap();
        wait_live(&c).await;
        assert_eq!(count(&c, "tr.running").await, 0);
        let before: u64 = attr(&c, "svg.chart.runs", "data-steps")
            .await
            .unwrap()
            .parse()
            .unwrap();
        mark_page(&c).await;
        // A runner in another process, two steps at a time.
        let child = env
            .std_cmd()
            .args(["run", "--until-idle", "-j", "2", "--agent", &slow])
            .current_dir(env.root())
            .spawn()
            .expect("start uwf run");
        let pid = child.id();
        *run_ref = Some(Killed(child));
        // Its steps appear as they run, with their holder.
        wait_for("a running step", || count(&c, "tr.running"), |n| *n >= 1).await;
        let holder = attr(&c, "tr.running", "data-holder").await.unwrap();
        assert!(holder.contains(&format!(":{pid}:")), "{holder}");
        // The chart follows as they end.
        wait_for(
            "the chart to count the run's steps",
            || async {
                attr(&c, "svg.chart.runs", "data-steps")
                    .await
                    .and_then(|s| s.parse::<u64>().ok())
            },
            |n| n.is_some_and(|n| n > before),
        )
        .await;
        // A moment with both: steps counted and steps running.
        wait_for(
            "steps counted while others run",
            || async {
                (
                    count(&c, "tr.running").await,
                    count(&c, "svg.chart.runs rect.steps").await,
                )
            },
            |(r, bars)| *r >= 1 && *bars >= 1,
        )
        .await;
        assert!(
            attr(&c, "tr.queue[data-workflow='line']", "data-in-progress")
                .await
                .is_some()
        );
        assert!(not_reloaded(&c).await, "the page was not reloaded");
        std::fs::write(shots.join("runs.png"), c.screenshot().await.unwrap()).unwrap();
    });
    if let Some(Killed(child)) = run.as_mut() {
        let until = Instant::now() + Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < until, "the run did not end");
            std::thread::sleep(Duration::from_millis(100));
        }
        let b = std::fs::read(shots.join("runs.png")).unwrap();
        assert!(b.starts_with(b"\x89PNG"), "runs.png is a PNG");
    }
}
