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
    insta::assert_snapshot!(env.transcript("skill nosuch").lines().next().unwrap_or(""), @"! error: invalid value 'nosuch' for '<NAME>'");
    for name in ["user", "author", "developer", "adapter", "bootstrap"] {
        let text = env.ok(&["skill", name]);
        assert!(text.starts_with("# uwf"), "{name}: {text}");
        assert!(text.lines().count() > 30, "{name} is too short");
        // Every command a code block shows exists: its help succeeds.
        let mut code = false;
        for line in text.lines() {
            if line.starts_with("```") {
                code = !code;
                continue;
            }
            let line = line.trim_start();
            if !code {
                continue;
            }
            let Some(rest) = line.strip_prefix("uwf ") else {
                continue;
            };
            let words: Vec<&str> = rest
                .split_whitespace()
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                .take(2)
                .collect();
            if words.is_empty() {
                continue;
            }
            let mut args = words.clone();
            args.push("--help");
            let r = env.run(&args);
            assert_eq!(
                r.code,
                0,
                "{name}: `uwf {}` is not a command",
                words.join(" ")
            );
        }
    }
}
