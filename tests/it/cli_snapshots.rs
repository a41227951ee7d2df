//! The command line as snapshots: the help of every command, and CLI cases of one line each
//! on a root with a fixed clock and seed (`TestEnv::fixed`).

use crate::common::{TestEnv, example};

/// Every command's help, in one snapshot: a changed flag or text shows up here.
#[test]
fn help_of_every_command() {
    fn walk(cmd: &mut clap::Command, path: &str, out: &mut String) {
        out.push_str(&format!("==== {path} --help\n"));
        out.push_str(&cmd.render_long_help().to_string());
        out.push('\n');
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .filter(|n| n != "help")
            .collect();
        for n in names {
            let sub = cmd.find_subcommand_mut(&n).expect("listed subcommand");
            walk(sub, &format!("{path} {n}"), out);
        }
    }
    let mut cmd = uwf::cli::command();
    cmd.build();
    let mut out = String::new();
    walk(&mut cmd, "uwf", &mut out);
    insta::assert_snapshot!("help", out);
}

#[test]
fn cas_cases() {
    let env = TestEnv::fixed();
    insta::assert_snapshot!(env.transcript("cas put-text hello"), @r#"{"hash":"95ST8MZ0QTKP9"}"#);
    insta::assert_snapshot!(env.transcript("cas get 95ST8MZ0QTKP9"), @r#"{"type":"7VQ43ZSJTEWA7","payload":"hello"}"#);
    insta::assert_snapshot!(env.transcript("cas get 95st --timestamp"), @r#"{"type":"7VQ43ZSJTEWA7","payload":"hello","timestamp":1767225600000}"#);
    insta::assert_snapshot!(env.transcript("cas has 95ST8MZ0QTKP9"), @r#"{"exists":true}"#);
    insta::assert_snapshot!(env.transcript("cas has 95ST8MZ0QTKP8"), @r#"
    {"exists":false}
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("--format yaml cas has 95ST8MZ0QTKP8"), @"
    exists: false
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("cas get 0000000000000"), @"
    ! Node not found: 0000000000000
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("cas get 95"), @"
    ! Node not found: 95
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("cas hash 7VQ43ZSJTEWA7 '\"hello\"'"), @r#"{"hash":"95ST8MZ0QTKP9"}"#);
    insta::assert_snapshot!(env.transcript("cas put 7VQ43ZSJTEWA7 42"), @r#"
    ! payload does not match schema 7VQ43ZSJTEWA7: at /: 42 is not of type "string"
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("cas put NOSUCHTYPE000 1"), @r#"
    ! invalid id "NOSUCHTYPE000": the first character must be 0-9 or A-F
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("cas refs 95ST8MZ0QTKP9"), @r#"{"refs":[]}"#);
    insta::assert_snapshot!(env.transcript("cas walk 95ST8MZ0QTKP9"), @r#"{"hashes":["95ST8MZ0QTKP9"]}"#);
}

#[test]
fn thread_cases() {
    let env = TestEnv::fixed();
    let debate = example("debate.yaml").display().to_string();
    let script = env.scripted(&example("debate.script.yaml"));
    insta::assert_snapshot!(env.transcript(&format!("workflow put {debate}")), @r#"{"name":"debate","hash":"DDY7SM1N7BV4G"}"#);
    insta::assert_snapshot!(env.transcript("workflow list"), @r#"[{"name":"debate","hash":"DDY7SM1N7BV4G","origin":"global"}]"#);
    insta::assert_snapshot!(env.transcript("thread start debate -p 'Is Rust better than Go?' --cwd /tmp"), @r#"{"workflow":"DDY7SM1N7BV4G","thread":"06DQDPN8028XY33RRFMH5J9JP4"}"#);
    let t = crate::common::json(&env.ok(&["thread", "list"]))
        .as_array()
        .expect("list")[0]
        .get("thread")
        .and_then(uwf::cas::Value::as_str)
        .expect("thread")
        .to_string();
    insta::assert_snapshot!(env.transcript(&format!("thread show {t}")), @r#"{"workflow":"DDY7SM1N7BV4G","thread":"06DQDPN8028XY33RRFMH5J9JP4","head":"96M92DEGEBC3E","status":"idle","currentRole":"against","done":false,"background":null}"#);
    insta::assert_snapshot!(env.transcript(&format!("thread step {t} --agent '{script}'")), @r#"{"workflow":"DDY7SM1N7BV4G","thread":"06DQDPN8028XY33RRFMH5J9JP4","head":"38SY7HZA82WV1","status":"idle","currentRole":"for","done":false,"background":null}"#);
    insta::assert_snapshot!(env.transcript(&format!("thread step {t} -c 0")), @"
    ! --count must be a positive integer, got: 0
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("thread step"), @"
    ! error: the following required arguments were not provided:
    !   <THREAD>
    ! 
    ! Usage: uwf thread step <THREAD>
    ! 
    ! For more information, try '--help'.
    [exit 2]
    ");
    insta::assert_snapshot!(env.transcript("thread show 06H08SPVKKAF3JCSEB1P6P2JD0"), @"
    ! thread not found: 06H08SPVKKAF3JCSEB1P6P2JD0
    [exit 3]
    ");
    insta::assert_snapshot!(env.transcript(&format!("thread step {t} -c 10 --agent '{script}'")), @r#"[{"workflow":"DDY7SM1N7BV4G","thread":"06DQDPN8028XY33RRFMH5J9JP4","head":"9J4P2P7WNYABX","status":"idle","currentRole":"against","done":false,"background":null},{"workflow":"DDY7SM1N7BV4G","thread":"06DQDPN8028XY33RRFMH5J9JP4","head":"ABENDK3NS9S48","status":"completed","currentRole":null,"done":true,"background":null}]"#);
    insta::assert_snapshot!(env.transcript("thread list --all"), @r#"[{"thread":"06DQDPN8028XY33RRFMH5J9JP4","workflow":"DDY7SM1N7BV4G","head":"ABENDK3NS9S48","status":"completed","currentRole":null}]"#);
    insta::assert_snapshot!(env.transcript(&format!("thread read {t} --quota 300")), @"
    # Thread `06DQDPN8028XY33RRFMH5J9JP4`

    **Workflow:** debate (`DDY7SM1N7BV4G`)

    ## Task

    Is Rust better than Go?

    ---

    *(2 earlier steps, load with `uwf thread read 06DQDPN8028XY33RRFMH5J9JP4 --before ABENDK3NS9S48`)*

    ---

    ## Step 3: against `ABENDK3NS9S48`
    **Agent:** uwf-scripted | **Time:** 2026-01-01 00:00:00 | **Duration:** 0ms

    <prompt>
    You are a skilled debater arguing AGAINST the proposition.
    Be logical, cite evidence, and directly address your opponent's points.
    Keep each argument concise (under 200 words).

    </prompt>

    <output>
    ---
    $status: conceded
    argument: Memory safety without a garbage collector wins.
    ---

    </output>
    ");
}

#[test]
fn skill_list_and_texts() {
    let env = TestEnv::fixed();
    insta::assert_snapshot!(env.transcript("skill list"), @"
    user       running workflows and threads with uwf
    author     writing workflow YAML: roles, graphs, !include, conditions, schemas
    developer  writing an agent in any language: the protocol and the agent kit
    adapter    wrapping a coding-agent CLI as an agent
    bootstrap  first steps on a new machine
    ");
    // Without a name: the same list.
    assert_eq!(env.ok(&["skill"]), env.ok(&["skill", "list"]));
    insta::assert_snapshot!(env.transcript("skill nosuch").lines().next().unwrap_or(""), @"! error: invalid value 'nosuch' for '[NAME]'");
    let mut all = String::new();
    for name in ["user", "author", "developer", "adapter", "bootstrap"] {
        let text = env.ok(&["skill", name]);
        assert!(text.starts_with("# uwf"), "{name}: {text}");
        assert!(text.lines().count() > 30, "{name} is too short");
        all.push_str(&text);
        let commands = skill_commands(&text);
        assert!(commands.len() > 5, "{name}: {commands:?}");
        for words in commands {
            check_command_line(&env, name, &words);
        }
        for span in inline_commands(&text) {
            check_inline_command(&env, name, &span);
        }
    }
    // What the program has, the skills mention.
    for word in [
        "uwf setup",
        "uwf agent scripted",
        "uwf agent llm",
        "uwf agent command",
        "uwf config",
        "uwf log",
        "uwf run",
        "uwf serve",
        "uwf thread pause",
        "uwf thread resume",
        "uwf thread rm",
        "cargo install --locked --path .",
    ] {
        assert!(all.contains(word), "no skill mentions {word}");
    }
    for status in crate::common::THREAD_STATES {
        assert!(all.contains(&format!("| `{status}` |")), "status {status}");
    }
}

/// A command's help lists its own options, then the global ones under their own heading.
#[test]
fn setup_help_keeps_global_options_apart() {
    let env = TestEnv::new();
    for cmd in [&["setup", "--help"][..], &["thread", "start", "--help"]] {
        let help = env.ok(cmd);
        let (own, global) = help.split_once("\nGlobal options:\n").expect("a heading");
        for flag in ["--format", "--verbose", "--store"] {
            assert!(
                !own.contains(flag) && global.contains(flag),
                "{flag}: {help}"
            );
        }
    }
    let setup = env.ok(&["setup", "--help"]);
    let own = setup.split_once("Global options:").unwrap().0;
    for flag in [
        "--provider",
        "--base-url",
        "--api-key",
        "--api-key-env",
        "--model",
        "--agent",
    ] {
        assert!(own.contains(flag), "{flag}: {setup}");
    }
}

/// The `uwf` command lines of a skill's shell code blocks, each as its words: every simple
/// command of a line, of a pipe or of a `$(…)` that starts with `uwf`, and every quoted word
/// that is one (an `--agent` value, given the thread and role it is called with).
fn skill_commands(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in text.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            match block.take() {
                Some(b) => out.extend(commands_of_script(&b)),
                None if fence == "sh" => block = Some(String::new()),
                None => block = Some("#".to_string()),
            }
            continue;
        }
        if let Some(b) = &mut block
            && !b.starts_with('#')
        {
            b.push_str(line);
            b.push('\n');
        }
    }
    out
}

/// The `uwf` commands of a shell script (see [`skill_commands`]).
fn commands_of_script(script: &str) -> Vec<Vec<String>> {
    let script = script.replace("\\\n", " ");
    let mut segments = vec![String::new()];
    let mut quote: Option<char> = None;
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                segments.last_mut().unwrap().push(c);
            }
            (Some(_), c) => segments.last_mut().unwrap().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                segments.last_mut().unwrap().push(c);
            }
            (None, '#')
                if segments.last().unwrap().ends_with(char::is_whitespace)
                    || segments.last().unwrap().is_empty() =>
            {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                segments.push(String::new());
            }
            (None, '\n' | '|' | ';' | '&' | '(' | ')' | '<' | '>' | '`') => {
                segments.push(String::new())
            }
            (None, c) => segments.last_mut().unwrap().push(c),
        }
    }
    let mut out = Vec::new();
    for seg in segments {
        let Ok(words) = shell_words::split(seg.trim_end_matches('$')) else {
            panic!("cannot split {seg:?}");
        };
        let words: Vec<String> = words
            .into_iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        for w in &words {
            if let Some(agent) = w.strip_prefix("uwf ") {
                let mut a = shell_words::split(agent).unwrap();
                // `agent command` takes them as options (its positionals are the program's).
                if a.starts_with(&["agent".to_string(), "command".to_string()]) {
                    a.splice(
                        2..2,
                        ["--thread", "THREAD", "--role", "ROLE"].map(String::from),
                    );
                } else {
                    a.extend(["THREAD".to_string(), "ROLE".to_string()]);
                }
                out.push(a);
            }
        }
        if words.first().map(String::as_str) == Some("uwf") {
            out.push(words[1..].to_vec());
        }
    }
    out
}

/// The inline code spans of a skill's prose that start with `uwf `.
fn inline_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            code = !code;
            continue;
        }
        if code {
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("uwf ") {
                out.push(span.to_string());
            }
        }
    }
    out
}

/// A command line a skill shows parses as uwf's command line, and its command's help works.
fn check_command_line(env: &TestEnv, skill: &str, words: &[String]) {
    let argv = std::iter::once("uwf".to_string()).chain(words.iter().cloned());
    let m = match uwf::cli::command().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion => return,
        Err(e) => panic!("{skill}: `uwf {}` does not parse: {e}", words.join(" ")),
    };
    let mut path = Vec::new();
    let mut at = &m;
    while let Some((name, sub)) = at.subcommand() {
        path.push(name.to_string());
        at = sub;
    }
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let r = env.run(&args);
    assert_eq!(r.code, 0, "{skill}: `uwf {}` has no help", path.join(" "));
}

/// A command named in prose exists (its help works) with every `--flag` it names.
fn check_inline_command(env: &TestEnv, skill: &str, span: &str) {
    let mut root = uwf::cli::command();
    root.build();
    let mut cmd = &root;
    let mut path = Vec::new();
    for w in span.split_whitespace().skip(1) {
        match cmd.find_subcommand(w) {
            Some(sub) => {
                path.push(w);
                cmd = sub;
            }
            None => break,
        }
    }
    let mut args = path.clone();
    args.push("--help");
    assert_eq!(env.run(&args).code, 0, "{skill}: `{span}`");
    for flag in span
        .split([' ', '[', ']', '|'])
        .filter_map(|w| w.strip_prefix("--"))
    {
        let flag = flag.split('=').next().unwrap_or("");
        if flag.is_empty() {
            continue;
        }
        assert!(
            cmd.get_arguments().any(|a| a.get_long() == Some(flag)),
            "{skill}: `{span}`: uwf {} has no --{flag}",
            path.join(" ")
        );
    }
}
