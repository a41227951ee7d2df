//! The structured logs: `logs/YYYY-MM-DD.jsonl` written by every process, `log list`, `log
//! show` with its filters and `--follow`, `log clean`, the retention, masking, and `-v`.

use crate::common::{Run, TestEnv, example, json, p, uwf_bin};
use serde_json::Value;
use std::io::BufRead;
use std::time::{Duration, Instant};

/// Every line of every file under `logs/`, parsed (a line that does not parse fails the test).
fn lines(env: &TestEnv) -> Vec<serde_json::Map<String, Value>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(env.root().join("logs")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "{} ends mid-line", path.display());
        for l in text.lines() {
            match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(o)) => out.push(o),
                _ => panic!("not a JSON object line in {}: {l}", path.display()),
            }
        }
    }
    out
}

fn s<'a>(e: &'a serde_json::Map<String, Value>, k: &str) -> &'a str {
    e.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn scripted() -> String {
    format!(
        "uwf agent scripted --script {}",
        p(&example("solve-issue.script.yaml"))
    )
}

#[test]
fn a_run_logs_its_start_the_moderator_the_agents_and_the_head_moves() {
    let env = TestEnv::new();
    let wf = p(&example("solve-issue.yaml"));
    let t = env.start(&wf, "fix the parser");
    env.ok(&[
        "thread",
        "step",
        &t,
        "--count",
        "10",
        "--agent",
        &scripted(),
    ]);
    let all = lines(&env);
    for e in &all {
        for k in ["ts", "pid", "tag", "level", "msg"] {
            assert!(e.contains_key(k), "{k} missing in {e:?}");
        }
        assert_eq!(s(e, "tag").len(), 8, "{e:?}");
        assert!(s(e, "ts").ends_with('Z'), "{e:?}");
    }
    // The first line of each process is its start, with its argv.
    let mut seen = std::collections::HashSet::new();
    for e in &all {
        if seen.insert(s(e, "pid").to_string()) {
            assert_eq!(s(e, "tag"), "W9F3RK2M", "{e:?}");
            assert!(s(e, "msg").starts_with("process start argv=["), "{e:?}");
        }
    }
    assert_eq!(seen.len(), 2);
    let out = json(&env.ok(&["log", "show", "--thread", &t]));
    let tags: Vec<&str> = out
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.get("tag").and_then(|t| t.as_str()).unwrap())
        .collect();
    let count = |tag: &str| tags.iter().filter(|t| **t == tag).count();
    assert_eq!(count("S9B8YM57"), 1, "thread started: {tags:?}");
    assert_eq!(count("JN8SQVEH"), 5, "moderator decisions: {tags:?}");
    assert_eq!(count("8VDW5NMT"), 5, "agent exits: {tags:?}");
    assert_eq!(count("RBZJDXFA"), 5, "head moves: {tags:?}");
    // The last head move finishes the thread and names the head `thread show` gives.
    let last = out.as_array().unwrap().last().unwrap();
    assert_eq!(last.get("done"), Some(&uwf::cas::Value::Bool(true)));
    assert_eq!(
        last.get("head").and_then(|h| h.as_str()).unwrap(),
        env.head(&t)
    );
    // `log list`: one file, today's, with its size.
    let list = json(&env.ok(&["log", "list"]));
    let files = list.as_array().unwrap();
    assert_eq!(files.len(), 1);
    let name = files[0].get("name").and_then(|n| n.as_str()).unwrap();
    let size = std::fs::metadata(env.root().join("logs").join(name))
        .unwrap()
        .len();
    assert!(files[0].get("size").and_then(|s| s.as_f64()).unwrap() as u64 <= size);
    assert_eq!(
        format!(
            "{}.jsonl",
            files[0].get("date").and_then(|d| d.as_str()).unwrap()
        ),
        name
    );
}

#[test]
fn a_failing_agent_is_logged_with_its_status_and_stderr() {
    let env = TestEnv::new();
    let agent = env.agent("broken.sh", "echo 'something broke here' >&2\nexit 3");
    let t = env.start(&p(&example("solve-issue.yaml")), "x");
    let r = env.run(&["thread", "step", &t, "--agent", &p(&agent)]);
    assert_ne!(r.code, 0);
    let all = lines(&env);
    let exit = all
        .iter()
        .find(|e| s(e, "tag") == "VA8HT6J7")
        .expect("agent exit line");
    assert_eq!(s(exit, "status"), "exit 3");
    assert!(s(exit, "stderr_tail").contains("something broke here"));
    assert_eq!(s(exit, "thread"), t);
    let failed = all
        .iter()
        .find(|e| s(e, "tag") == "FR23R1AV")
        .expect("step failed line");
    assert_eq!(s(failed, "level"), "warn");
    // `--level warn` keeps the failure and drops the info lines.
    let warn = json(&env.ok(&["log", "show", "--level", "warn"]));
    let levels: Vec<&str> = warn
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.get("level").and_then(|l| l.as_str()).unwrap())
        .collect();
    assert!(!levels.is_empty());
    assert!(
        levels.iter().all(|l| *l == "warn" || *l == "error"),
        "{levels:?}"
    );
}

#[test]
fn eight_processes_at_once_append_whole_lines() {
    let env = TestEnv::new();
    let wf = p(&example("solve-issue.yaml"));
    let threads: Vec<String> = (0..8).map(|i| env.start(&wf, &format!("t{i}"))).collect();
    let agent = scripted();
    let children: Vec<_> = threads
        .iter()
        .map(|t| {
            env.spawn_cmd()
                .args(["thread", "step", t, "--count", "10", "--agent", &agent])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    // Every line parses; each stepping process wrote its start and its five head moves.
    let all = lines(&env);
    for t in &threads {
        let mine: Vec<_> = all.iter().filter(|e| s(e, "thread") == t).collect();
        let pids: std::collections::HashSet<&str> = mine
            .iter()
            .filter(|e| s(e, "tag") == "RBZJDXFA")
            .map(|e| s(e, "pid"))
            .collect();
        assert_eq!(pids.len(), 1, "{t}: head moves from one process");
        assert_eq!(
            mine.iter().filter(|e| s(e, "tag") == "RBZJDXFA").count(),
            5,
            "{t}"
        );
        let pid = *pids.iter().next().unwrap();
        assert!(
            all.iter()
                .any(|e| s(e, "pid") == pid && s(e, "tag") == "W9F3RK2M"),
            "{pid} has a start line"
        );
        // `--process` with the bare process id finds the same lines.
        let bare = pid.rsplit('-').next().unwrap();
        let by_pid = json(&env.ok(&["log", "show", "--process", bare]));
        assert!(by_pid.as_array().unwrap().len() >= 16);
        assert!(
            by_pid
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e.get("pid").and_then(|x| x.as_str()) == Some(pid))
        );
    }
}

#[test]
fn show_filters_by_date_and_time_and_clean_deletes_earlier_days() {
    let env = TestEnv::fixed();
    std::fs::write(env.root().join("config.yaml"), "logs: {keepDays: 0}\n").unwrap();
    let dir = env.root().join("logs");
    std::fs::create_dir_all(&dir).unwrap();
    // Lines the TypeScript tool wrote (no level) and a torn last line.
    std::fs::write(
        dir.join("2025-06-01.jsonl"),
        concat!(
            r#"{"ts":"2025-06-01T10:00:00.000Z","pid":"1-7","tag":"W9F3RK2M","msg":"process start argv=x node=v22"}"#,
            "\n",
            r#"{"ts":"2025-06-01T09:00:00.000Z","pid":"1-7","tag":"AAAAAAAA","msg":"earlier","thread":"T1"}"#,
            "\n",
            r#"{"ts":"2025-06-01T11:00:00.000Z","pid":"1-7","tag":"BBBB"#,
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("2025-12-31.jsonl"),
        concat!(
            r#"{"ts":"2025-12-31T23:30:00.000Z","pid":"2-8","tag":"CCCCCCCC","level":"error","msg":"late","thread":"T1"}"#,
            "\n"
        ),
    )
    .unwrap();
    // Sorted by time, the torn line left out.
    let d = json(&env.ok(&["log", "show", "--date", "2025-06-01"]));
    let msgs: Vec<&str> = d
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.get("msg").and_then(|m| m.as_str()).unwrap())
        .collect();
    assert_eq!(msgs, ["earlier", "process start argv=x node=v22"]);
    let t1 = json(&env.ok(&["log", "show", "--thread", "t1"]));
    assert_eq!(t1.as_array().unwrap().len(), 2);
    // The fixed clock is 2026-01-01T00:00Z: an hour back reaches the last line of 2025.
    let recent = json(&env.ok(&["log", "show", "--since", "1h", "--thread", "T1"]));
    assert_eq!(recent.as_array().unwrap().len(), 1);
    let errors = json(&env.ok(&["log", "show", "--level", "error"]));
    assert_eq!(errors.as_array().unwrap().len(), 1);
    env.fails(&["log", "show", "--level", "loud"], "invalid --level");
    let list = json(&env.ok(&["log", "list"]));
    let dates: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.get("date").and_then(|d| d.as_str()).unwrap())
        .collect();
    assert_eq!(dates, ["2026-01-01", "2025-12-31", "2025-06-01"]);
    assert_eq!(
        env.ok(&["log", "clean", "--before", "2025-12-31"]).trim(),
        r#"{"deleted":1}"#
    );
    assert!(!dir.join("2025-06-01.jsonl").exists());
    assert!(dir.join("2025-12-31.jsonl").exists());
    // `logs` is the same command.
    assert_eq!(
        json(&env.ok(&["logs", "list"])).as_array().unwrap().len(),
        2
    );
}

#[test]
fn the_first_process_of_a_day_removes_files_past_the_retention() {
    let env = TestEnv::fixed();
    let dir = env.root().join("logs");
    std::fs::create_dir_all(&dir).unwrap();
    for d in ["2025-10-01", "2025-12-15", "notes"] {
        std::fs::write(dir.join(format!("{d}.jsonl")), "").unwrap();
    }
    // A command that writes writes the day's file (one that only reads writes nothing).
    env.ok(&["cas", "put-text", "x"]);
    // 2026-01-01 less the default 30 days is 2025-12-02.
    assert!(!dir.join("2025-10-01.jsonl").exists());
    assert!(dir.join("2025-12-15.jsonl").exists());
    assert!(dir.join("notes.jsonl").exists());
    assert!(dir.join("2026-01-01.jsonl").exists());
    // A shorter retention from config.yaml, applied when the next day's file is made.
    std::fs::write(env.root().join("config.yaml"), "logs: {keepDays: 7}\n").unwrap();
    env.cmd()
        .env(
            "UWF_TEST_NOW_MS",
            (crate::common::FIXED_NOW_MS + 86_400_000).to_string(),
        )
        .args(["cas", "put-text", "y"])
        .assert()
        .success();
    assert!(!dir.join("2025-12-15.jsonl").exists());
    assert!(dir.join("2026-01-01.jsonl").exists());
    assert!(dir.join("2026-01-02.jsonl").exists());
}

#[test]
fn follow_prints_an_event_written_after_it_started() {
    let env = TestEnv::new();
    env.ok(&["cas", "put-text", "before the follow"]);
    let mut child = env
        .spawn_cmd()
        .args(["log", "show", "--follow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let next = |want: &dyn Fn(&serde_json::Map<String, Value>) -> bool| {
        let until = Instant::now() + Duration::from_secs(20);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            let Ok(l) = rx.recv_timeout(left) else { break };
            let Ok(Value::Object(e)) = serde_json::from_str::<Value>(&l) else {
                panic!("--follow printed a line that is not a JSON object: {l}");
            };
            if want(&e) {
                return true;
            }
        }
        false
    };
    // The entries written before it started.
    assert!(next(&|e| s(e, "msg").contains("\"put-text\"")));
    let wf = p(&example("solve-issue.yaml"));
    let t = env.start(&wf, "after the follow began");
    assert!(
        next(&|e| s(e, "tag") == "S9B8YM57" && s(e, "thread") == t),
        "the thread's start did not appear"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn secrets_never_reach_a_log_line() {
    const DOTENV: &str = "tok-very-secret-123";
    const TYPED: &str = "sk-typed-in-argv-987";
    const FROM_ENV: &str = "pw-from-the-environment-4567";
    let env = TestEnv::new();
    std::fs::write(env.root().join(".env"), format!("MY_TOKEN={DOTENV}\n")).unwrap();
    // An agent that prints a variable of `.env` on stderr and fails.
    let agent = env.agent("leaky.sh", "echo \"token is $MY_TOKEN\" >&2\nexit 1");
    let t = env.start(
        &p(&example("solve-issue.yaml")),
        &format!("use {DOTENV} for the call"),
    );
    let r = env.run(&["thread", "step", &t, "--agent", &p(&agent)]);
    assert_ne!(r.code, 0);
    env.ok(&["config", "set", "providers.o.apiKey", TYPED]);
    // Setup's key in argv (the check of the key fails: nothing listens on port 1).
    let r = env.run(&[
        "-v",
        "setup",
        "--provider",
        "o",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--api-key",
        TYPED,
        "--model",
        "m",
    ]);
    assert!(r.stderr.contains("process start"), "{}", r.stderr);
    assert!(!r.stderr.contains(TYPED), "{}", r.stderr);
    // A variable of the process's environment whose name says it is a secret, in any case.
    let put = Run::from(
        env.cmd()
            .env("deploy_Password", FROM_ENV)
            .args(["cas", "put-text", FROM_ENV])
            .output()
            .unwrap(),
    );
    assert_eq!(put.code, 0, "{}", put.stderr);
    let mut text = String::new();
    for e in std::fs::read_dir(env.root().join("logs")).unwrap() {
        text.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap());
    }
    assert!(text.contains("token is ***"), "{text}");
    assert!(text.contains("use *** for the call"), "{text}");
    assert!(!text.contains(DOTENV), "{text}");
    assert!(!text.contains(TYPED), "{text}");
    assert!(text.contains(r#"\"put-text\",\"***\""#), "{text}");
    assert!(!text.contains(FROM_ENV), "{text}");
}

/// A variable whose name or value is not UTF-8, in the process's environment, is left alone
/// when the secrets are gathered: the command runs and logs as without it.
#[test]
fn variables_that_are_not_utf8_are_left_alone() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    let bad = std::ffi::OsStr::from_bytes(b"not-utf8-\xff-value");
    let r = Run::from(
        env.cmd()
            .env("DEPLOY_TOKEN", bad)
            .env(std::ffi::OsStr::from_bytes(b"ODD_\xfe_NAME"), "x")
            .args(["cas", "put-text", "hello"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    assert!(lines(&env).iter().any(|e| s(e, "msg").contains("put-text")));
}

#[test]
fn verbose_and_uwf_log_print_events_on_stderr() {
    let env = TestEnv::new();
    let quiet = env.run(&["thread", "list"]);
    assert_eq!(quiet.stderr, "");
    let v = env.run(&["-v", "cas", "put-text", "x"]);
    assert!(v.stderr.contains("process start"), "{}", v.stderr);
    assert!(v.stderr.contains("INFO"), "{}", v.stderr);
    // A command that only reads logs its start at debug.
    let v = env.run(&["-v", "thread", "list"]);
    assert!(!v.stderr.contains("process start"), "{}", v.stderr);
    let vv = env.run(&["-vv", "thread", "list"]);
    assert!(vv.stderr.contains("DEBUG"), "{}", vv.stderr);
    assert!(vv.stderr.contains("process start"), "{}", vv.stderr);
    let out = env
        .cmd()
        .env("UWF_LOG", "warn")
        .args(["cas", "get", "0000000000000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("WARN"), "{err}");
    assert!(!err.contains("process start"), "{err}");
}

/// `log show` on a terminal prints a line per entry for people; piped, or with `--json` or
/// `--format`, it prints JSON.
#[test]
fn show_is_readable_on_a_terminal_and_json_when_piped_or_asked() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("solve-issue.yaml")), "fix the parser");
    let on_terminal = |args: &[&str]| {
        let mut cmd = std::process::Command::new(uwf_bin());
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("UWF_HOME", env.root())
            .env("HOME", env.root())
            .envs(env.store_url.iter().map(|u| ("UWF_STORE", u)))
            .args(args);
        let mut s = rexpect::session::spawn_command(cmd, Some(20_000)).unwrap();
        s.exp_eof().unwrap()
    };
    let text = on_terminal(&["log", "show", "--thread", &t]);
    let started = text
        .lines()
        .find(|l| l.contains("thread started"))
        .unwrap_or_else(|| panic!("{text}"));
    // `2026-11-24 22:54:29.197 INFO  thread started thread=… workflow=… pid=…`
    assert!(!started.starts_with('{'), "{started}");
    assert_eq!(started.as_bytes()[10], b' ', "{started}");
    assert!(
        started[23..].starts_with(" INFO  thread started "),
        "{started}"
    );
    assert!(started.contains(&format!(" thread={t} ")), "{started}");
    assert!(started.contains(" pid="), "{started}");
    for asked in [&["--json"][..], &["--format", "json"][..]] {
        let mut args = vec!["log", "show", "--thread", &t];
        args.extend(asked);
        let text = on_terminal(&args);
        let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(v.as_array().is_some_and(|a| !a.is_empty()), "{text}");
    }
    // Piped: JSON.
    let piped = json(&env.ok(&["log", "show", "--thread", &t]));
    assert!(!piped.as_array().unwrap().is_empty());
}

/// A command that only reads logs no start line at info (the file holds nothing of it), one
/// that writes does; a failed read is logged.
#[test]
fn read_only_commands_log_no_start_line() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("solve-issue.yaml")), "fix the parser");
    let before = lines(&env).len();
    for args in [
        &["thread", "show", &t][..],
        &["thread", "list"],
        &["thread", "read", &t],
        &["workflow", "list"],
        &["cas", "verify"],
        &["log", "show"],
        &["log", "list"],
        &["config", "path"],
        &["store", "info"],
    ] {
        env.ok(args);
    }
    assert_eq!(lines(&env).len(), before, "{:?}", &lines(&env)[before..]);
    env.run(&["thread", "show", "ZZZZZZ"]);
    let after = lines(&env);
    assert_eq!(after.len(), before + 1);
    assert_eq!(s(&after[before], "tag"), "K7RW2QX4");
    // A command that writes starts with its start line.
    env.start(&p(&example("solve-issue.yaml")), "again");
    let pid = s(lines(&env).last().unwrap(), "pid").to_string();
    assert!(
        lines(&env)
            .iter()
            .any(|e| s(e, "pid") == pid && s(e, "tag") == "W9F3RK2M")
    );
}

/// The program running is built in by its path, whatever its file is called: a runner that is
/// a copy named `uwf-renamed` runs `…/uwf-renamed agent scripted …` in process, and a runner
/// that is another file runs the same command as a process of its own (whose start is logged).
#[test]
fn the_running_program_named_by_its_path_runs_its_agents_in_process() {
    let env = TestEnv::new();
    let copy = env.root().join("bin").join("uwf-renamed");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(uwf_bin(), &copy).unwrap();
    let agent = format!(
        "{} agent scripted --script {}",
        p(&copy),
        p(&example("solve-issue.script.yaml"))
    );
    let wf = p(&example("solve-issue.yaml"));
    // The processes that logged their start with `agent scripted` in their argv.
    let agent_processes = || {
        lines(&env)
            .iter()
            .filter(|e| s(e, "tag") == "W9F3RK2M" && s(e, "msg").contains("\"scripted\""))
            .count()
    };
    let run_with = |program: &std::path::Path| {
        // A copy just written may still be open in a child another test thread forked
        // meanwhile (until that child's exec): running it fails with ETXTBSY a moment.
        let mut tries = 0;
        let out = loop {
            match env
                .spawn_cmd_of(program)
                .args(["run", "--until-idle", "--agent", &agent])
                .output()
            {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => break r.unwrap(),
            }
        };
        let r = Run::from(out);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("\"completed\":1"), "{}", r.stdout);
    };
    let t = env.start(&wf, "fix the parser");
    run_with(&copy);
    assert_eq!(
        env.show(&t).get("status"),
        Some(&uwf::cas::Value::str("completed"))
    );
    assert_eq!(agent_processes(), 0);
    // The same command given to a runner that is another file: a process each step.
    let t = env.start(&wf, "fix the parser again");
    run_with(&uwf_bin());
    assert_eq!(
        env.show(&t).get("status"),
        Some(&uwf::cas::Value::str("completed"))
    );
    assert_eq!(agent_processes(), 5);
}
