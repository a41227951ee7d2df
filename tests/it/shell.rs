//! Shell conventions: completions, manual pages, prompts from stdin or a file, `-q`, shell-word
//! splitting of `--agent`, "did you mean" hints, and `NO_COLOR`.

use crate::common::*;

/// Whether `s` is one id and a line end, nothing else.
fn only_id(s: &str) -> bool {
    s.ends_with('\n')
        && s.trim_end().len() >= 13
        && s.trim_end().bytes().all(|c| c.is_ascii_alphanumeric())
}

#[test]
fn completions_for_every_shell() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = env.ok(&["completions", shell]);
        assert!(out.contains("thread"), "{shell}: {out}");
        assert!(out.contains("prompt-file"), "{shell}");
    }
    let r = env.run(&["completions", "tcsh"]);
    assert_eq!(r.code, 2, "a usage error: {}", r.stderr);
}

#[test]
fn manual_pages() {
    let env = TestEnv::new();
    let page = env.ok(&["man"]);
    assert!(
        page.starts_with(".ie") || page.contains(".TH uwf"),
        "{page}"
    );
    assert!(page.contains("thread"));
    let dir = env.root().join("man");
    let listed = env.ok(&["man", dir.to_str().unwrap()]);
    for name in [
        "uwf.1",
        "uwf-thread.1",
        "uwf-thread-start.1",
        "uwf-cas-verify.1",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(text.contains(".TH"), "{name}");
        assert!(listed.contains(name), "{listed}");
    }
    let start = std::fs::read_to_string(dir.join("uwf-thread-start.1")).unwrap();
    assert!(start.contains("prompt\\-file"), "{start}");
}

#[test]
fn prompt_from_stdin_or_a_file() {
    let env = TestEnv::new();
    let wf = example("debate.yaml").display().to_string();
    let out = env.run_stdin(
        &["thread", "start", &wf, "-p", "-", "-q"],
        "a task\nover two lines\n",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let md = env.ok(&["thread", "read", out.stdout.trim()]);
    assert!(md.contains("a task\nover two lines\n"), "{md}");

    let file = env.root().join("task.md");
    std::fs::write(&file, "the task from a file\n").unwrap();
    let t = env.ok(&[
        "thread",
        "start",
        &wf,
        "--prompt-file",
        file.to_str().unwrap(),
        "-q",
    ]);
    let md = env.ok(&["thread", "read", t.trim()]);
    assert!(md.contains("the task from a file"), "{md}");

    // Usage errors: clap's message and exit 2.
    insta::assert_snapshot!(env.transcript(&format!("thread start {wf}")), @"
    ! error: the following required arguments were not provided:
    !   --prompt <PROMPT>
    ! 
    ! Usage: uwf thread start --prompt <PROMPT> <WORKFLOW>
    ! 
    ! For more information, try '--help'.
    [exit 2]
    ");
    insta::assert_snapshot!(env.transcript(&format!("thread start {wf} -p x --prompt-file f")), @"
    ! error: the argument '--prompt <PROMPT>' cannot be used with '--prompt-file <FILE>'
    ! 
    ! Usage: uwf thread start --prompt <PROMPT> <WORKFLOW>
    ! 
    ! For more information, try '--help'.
    [exit 2]
    ");
    insta::assert_snapshot!(env.transcript(&format!("thread start {wf} --prompt-file /nonexistent/task")), @"
    ! cannot read prompt file /nonexistent/task: No such file or directory (os error 2)
    [exit 1]
    ");
}

#[test]
fn quiet_prints_only_the_id() {
    let env = TestEnv::fixed();
    let wf = example("debate.yaml").display().to_string();
    insta::assert_snapshot!(env.transcript(&format!("workflow put {wf} -q")), @"DDY7SM1N7BV4G");
    insta::assert_snapshot!(env.transcript("thread start debate -p x --cwd /tmp --quiet"), @"06DQDPN800HCETQX2QR123WGNR");
    insta::assert_snapshot!(env.transcript("thread fork 4RNJ01W19QWEV -q"), @"06DQDPN8028XY33RRFMH5J9JP4");
    insta::assert_snapshot!(env.transcript("step fork 4RNJ01W19QWEV -q"), @"06DQDPN8031G3Y7G5VTB9AQF54");
    insta::assert_snapshot!(env.transcript("cas put-text hello -q"), @"95ST8MZ0QTKP9");
    insta::assert_snapshot!(env.transcript(r#"cas put 7VQ43ZSJTEWA7 "a" -q"#), @"0KXZWCA7H2CBK");
    let r = env.run_stdin(
        &["cas", "put", "7VQ43ZSJTEWA7", "-", "--jsonl", "-q"],
        "\"b\"\n\"c\"\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    assert!(r.stdout.lines().all(|l| only_id(&format!("{l}\n"))));
    // Each ends its line.
    for args in [
        &["workflow", "put", &wf, "-q"][..],
        &["thread", "start", "debate", "-p", "y", "-q"],
        &["cas", "put-text", "hello", "-q"],
    ] {
        let out = env.ok(args);
        assert!(only_id(&out), "{out:?}");
    }
}

#[test]
fn agent_words_follow_shell_quoting() {
    let env = TestEnv::new();
    let log = env.root().join("argv.txt");
    let agent = env.agent(
        "show-args.sh",
        &format!("printf '%s\\n' \"$@\" > '{}'\nexit 3", log.display()),
    );
    let wf = example("debate.yaml").display().to_string();
    let t = env.start(&wf, "x");
    let cmd = format!("{} 'two words' \"and three more\" plain", agent.display());
    let r = env.run(&["thread", "step", &t, "--agent", &cmd]);
    assert_ne!(r.code, 0);
    let argv = std::fs::read_to_string(&log).unwrap();
    let argv: Vec<&str> = argv.lines().collect();
    assert_eq!(
        argv[..3],
        ["two words", "and three more", "plain"],
        "{argv:?}"
    );
    assert_eq!(argv[3], t);

    // Config `args` given as one string are split the same way.
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "defaultAgent: a\nagents:\n  a:\n    command: {}\n    args: \"--name 'code reviewer'\"\n",
            agent.display()
        ),
    )
    .unwrap();
    let r = env.run(&["thread", "step", &t]);
    assert_ne!(r.code, 0);
    let argv = std::fs::read_to_string(&log).unwrap();
    assert!(argv.starts_with("--name\ncode reviewer\n"), "{argv:?}");

    insta::assert_snapshot!(env.transcript(&format!("thread step {t} --agent 'agent \"unclosed'")), @r#"
    ! --agent has an unclosed quote: agent "unclosed
    [exit 1]
    "#);
}

#[test]
fn did_you_mean() {
    let env = TestEnv::fixed();
    env.ok(&["workflow", "put", example("debate.yaml").to_str().unwrap()]);
    insta::assert_snapshot!(env.transcript("thread start debat -p x"), @r#"
    ! workflow not found: debat; run "uwf workflow list" to see registered names
    ! hint: did you mean "debate"?
    [exit 3]
    "#);
    insta::assert_snapshot!(env.transcript("workflow show debte"), @r#"
    ! unknown workflow "debte"; run "uwf workflow list" to see registered names
    ! hint: did you mean "debate"?
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("thread start planner -p x"), @r#"
    ! workflow not found: planner; run "uwf workflow list" to see registered names
    [exit 3]
    "#);
    let t = env.start("debate", "x");
    // One character off, and a prefix of the id.
    let mut near = t.clone();
    near.replace_range(25.., if t.ends_with('0') { "1" } else { "0" });
    insta::assert_snapshot!(env.transcript(&format!("thread show {near}")), @"
    ! thread not found: 06DQDPN8004BV1HR54TJ3HN5Q1
    ! hint: did you mean 06DQDPN8004BV1HR54TJ3HN5Q0?
    [exit 3]
    ");
    // A prefix that is not one: the thread whose start is nearest.
    let mut off = t[..12].to_string();
    off.replace_range(11.., if t[11..12] == *"0" { "1" } else { "0" });
    insta::assert_snapshot!(env.transcript(&format!("thread show {off}")), @"
    ! thread not found: 06DQDPN80040
    ! hint: did you mean 06DQDPN8004BV1HR54TJ3HN5Q0?
    [exit 3]
    ");
    insta::assert_snapshot!(env.transcript("thread show ZZZZZZZZZZZZZZZZZZZZZZZZZZ"), @"
    ! thread not found: ZZZZZZZZZZZZZZZZZZZZZZZZZZ
    [exit 3]
    ");
}

/// `uwf ARGS` on a pseudo-terminal (through `script`), with `NO_COLOR` set or not.
fn on_terminal(env: &TestEnv, args: &str, no_color: bool) -> Option<String> {
    let mut c = std::process::Command::new("script");
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("UWF_HOME", env.root())
        .env("TERM", "xterm")
        .args([
            "-qec",
            &format!("{} {args}", uwf_bin().display()),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::null());
    if no_color {
        c.env("NO_COLOR", "1");
    }
    let out = c.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let env = TestEnv::new();
    let piped = env.ok(&["thread", "--help"]);
    assert!(!piped.contains('\x1b'), "no colour into a pipe");
    // `script` (util-linux) gives the command a terminal; without it only the pipe is checked.
    let Some(coloured) = on_terminal(&env, "thread --help", false) else {
        return;
    };
    assert!(
        coloured.contains('\x1b'),
        "a terminal gets colour: {coloured:?}"
    );
    let plain = on_terminal(&env, "thread --help", true).unwrap();
    assert!(!plain.contains('\x1b'), "NO_COLOR: {plain:?}");
    assert!(plain.contains("start"));
}

/// A closed standard output is opened on /dev/null: the command succeeds, and nothing it
/// writes lands in a file it opens.
#[test]
fn a_closed_stdout_is_not_an_error() {
    let env = TestEnv::new();
    let wf = workflow_fixture("review-loop.yaml");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec \"$0\" workflow put {} >&-", wf.display()))
        .arg(uwf_bin())
        .env("UWF_HOME", env.root())
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The workflow was stored, and its id went nowhere: not into the log file the process
    // opened first.
    assert!(env.ok(&["workflow", "list"]).contains("review"));
    for f in std::fs::read_dir(env.root().join("logs")).expect("logs") {
        let text = std::fs::read_to_string(f.expect("entry").path()).expect("log");
        for line in text.lines() {
            assert!(line.starts_with("{\"ts\":"), "not a log line: {line}");
        }
    }
}

/// A reader that went away before the output is written ends the command with a closed pipe
/// it handles, not with the SIGPIPE signal.
#[test]
fn a_reader_gone_is_an_error_not_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    let env = TestEnv::new();
    // Many lines, more than a pipe holds, so a write meets the closed end.
    let mut child = std::process::Command::new(uwf_bin())
        .args(["completions", "bash"])
        .env("UWF_HOME", env.root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), None, "killed by a signal: {status:?}");
    assert_eq!(
        status.code(),
        Some(0),
        "the closed pipe ends the output quietly"
    );
}
