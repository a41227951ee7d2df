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
    let r = env.run(&["thread", "start", &wf]);
    assert!(r.code == 2 && r.stderr.contains("--prompt"), "{}", r.stderr);
    let r = env.run(&["thread", "start", &wf, "-p", "x", "--prompt-file", "f"]);
    assert!(
        r.code == 2 && r.stderr.contains("cannot be used with"),
        "{}",
        r.stderr
    );
    env.fails(
        &["thread", "start", &wf, "--prompt-file", "/nonexistent/task"],
        "cannot read prompt file /nonexistent/task",
    );
}

#[test]
fn quiet_prints_only_the_id() {
    let env = TestEnv::new();
    let wf = example("debate.yaml").display().to_string();
    let w = env.ok(&["workflow", "put", &wf, "-q"]);
    assert!(only_id(&w), "{w:?}");
    let t = env.ok(&["thread", "start", "debate", "-p", "x", "--quiet"]);
    assert!(only_id(&t) && t.trim().len() == 26, "{t:?}");
    let start = env.head(t.trim());
    let f = env.ok(&["thread", "fork", &start, "-q"]);
    assert!(only_id(&f) && f != t, "{f:?}");
    let f = env.ok(&["step", "fork", &start, "-q"]);
    assert!(only_id(&f), "{f:?}");
    let h = env.ok(&["cas", "put-text", "hello", "-q"]);
    assert!(only_id(&h), "{h:?}");
    let h = env.ok(&["cas", "put", "7VQ43ZSJTEWA7", "\"a\"", "-q"]);
    assert!(only_id(&h), "{h:?}");
    let r = env.run_stdin(
        &["cas", "put", "7VQ43ZSJTEWA7", "-", "--jsonl", "-q"],
        "\"b\"\n\"c\"\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    assert!(r.stdout.lines().all(|l| only_id(&format!("{l}\n"))));
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

    env.fails(
        &["thread", "step", &t, "--agent", "agent 'unclosed"],
        "unclosed quote",
    );
}

#[test]
fn did_you_mean() {
    let env = TestEnv::new();
    env.ok(&["workflow", "put", example("debate.yaml").to_str().unwrap()]);
    let r = env.fails(&["thread", "start", "debat", "-p", "x"], "debat");
    assert!(
        r.stderr.contains("hint: did you mean \"debate\"?"),
        "{}",
        r.stderr
    );
    let r = env.fails(&["workflow", "show", "debte"], "unknown workflow");
    assert!(
        r.stderr.contains("hint: did you mean \"debate\"?"),
        "{}",
        r.stderr
    );
    let r = env.fails(&["thread", "start", "planner", "-p", "x"], "planner");
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);

    let t = env.start("debate", "x");
    // One character off, and a prefix of the id.
    let mut near = t.clone();
    near.replace_range(25.., if t.ends_with('0') { "1" } else { "0" });
    let r = env.fails(&["thread", "show", &near], "thread not found");
    assert!(
        r.stderr.contains(&format!("hint: did you mean {t}?")),
        "{}",
        r.stderr
    );
    let r = env.fails(&["thread", "show", &t[..12]], "invalid thread id");
    assert!(
        r.stderr.contains(&format!("hint: did you mean {t}?")),
        "{}",
        r.stderr
    );
    let r = env.fails(
        &["thread", "show", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"],
        "thread not found",
    );
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
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
