//! The agent kit through the binary: context, submit (and its extraction errors), the scripted
//! agent, and the examples run to `$END`.

use crate::common::{TestEnv, example, json};
use uwf::cas::Value;

fn p(path: &std::path::Path) -> String {
    path.display().to_string()
}

#[test]
fn examples_run_to_end() {
    for (wf, script, roles) in [
        (
            "solve-issue.yaml",
            "solve-issue.script.yaml",
            &["planner", "developer", "reviewer", "developer", "reviewer"][..],
        ),
        (
            "debate.yaml",
            "debate.script.yaml",
            &["against", "for", "against"][..],
        ),
    ] {
        let env = TestEnv::new();
        let t = env.start(&p(&example(wf)), "Is Rust better than Go?");
        let agent = env.scripted(&example(script));
        let out = json(&env.ok(&["thread", "step", &t, "-c", "50", "--agent", &agent]));
        let last = out.as_array().unwrap().last().unwrap();
        assert_eq!(last.get("done"), Some(&Value::Bool(true)), "{wf}");
        assert_eq!(env.roles(&t), roles, "{wf}");
    }
}

/// `thread run` starts and steps to the end in one command, with the agent named `uwf` run as
/// this binary even when `uwf` is not on `PATH` (the README's first command).
#[test]
fn thread_run_goes_to_end_without_uwf_on_path() {
    let env = TestEnv::new();
    let agent = format!(
        "uwf agent scripted --script {}",
        p(&example("solve-issue.script.yaml"))
    );
    let out = env
        .cmd()
        .env("PATH", "/usr/bin:/bin")
        .args([
            "thread",
            "run",
            &p(&example("solve-issue.yaml")),
            "-p",
            "fix it",
            "--agent",
            &agent,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = json(&String::from_utf8(out.stdout).unwrap());
    let steps = steps.as_array().unwrap();
    assert_eq!(steps.len(), 5);
    let last = steps.last().unwrap();
    assert_eq!(last.get("status").unwrap().as_str(), Some("completed"));
    let t = last.get("thread").unwrap().as_str().unwrap().to_string();
    assert_eq!(
        env.roles(&t),
        ["planner", "developer", "reviewer", "developer", "reviewer"]
    );
}

/// The quick start's debate: `thread read` shows what the scripted agent said at each step,
/// frontmatter and body, kept as its detail's turn as the LLM agent keeps its replies.
#[test]
fn thread_read_of_the_demo_shows_the_scripted_replies() {
    let env = TestEnv::new();
    env.ok(&["workflow", "put", &p(&example("debate.yaml")), "-q"]);
    let t = env.start("debate", "Is Rust better than Go?");
    let agent = env.scripted(&example("debate.script.yaml"));
    env.ok(&["thread", "step", &t, "-c", "10", "--agent", &agent]);
    let md = env.ok(&["thread", "read", &t]);
    for (step, reply) in [
        (
            "## Step 1: against",
            "<output>\n---\n$status: continue\nargument: Go compiles faster and its tooling is simpler.\n---\n\nOpening argument against the proposition.\n",
        ),
        (
            "## Step 2: for",
            "<output>\n---\n$status: continue\nargument: Rust prevents whole classes of bugs at compile time.\n---\n",
        ),
        (
            "## Step 3: against",
            "<output>\n---\n$status: conceded\nargument: Memory safety without a garbage collector wins.\n---\n",
        ),
    ] {
        let at = md.find(step).unwrap_or_else(|| panic!("{step} in {md}"));
        let next = md[at + 1..]
            .find("## Step")
            .map_or(md.len(), |n| at + 1 + n);
        assert!(md[at..next].contains(reply), "{step}: {reply:?} in {md}");
    }
    // The step's own reading shows the same turn.
    let steps = json(&env.ok(&["thread", "steps", &t]));
    let first = steps.get("steps").and_then(Value::as_array).unwrap()[1]
        .get("hash")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    let step_md = env.ok(&["step", "read", &first]);
    assert!(
        step_md.contains("Opening argument against the proposition."),
        "{step_md}"
    );
}

#[test]
fn context_has_start_steps_role_format_and_edge_prompt() {
    let env = TestEnv::fixed();
    let wf = p(&example("debate.yaml"));
    let t = json(&env.ok(&[
        "thread",
        "start",
        &wf,
        "-p",
        "Is Rust better than Go?",
        "--cwd",
        "/tmp",
    ]))
    .get("thread")
    .and_then(Value::as_str)
    .expect("thread id")
    .to_string();
    let agent = env.scripted(&example("debate.script.yaml"));
    env.ok(&["thread", "step", &t, "--agent", &agent]);
    insta::assert_snapshot!(env.transcript(&format!("agent context {t} for")), @r###"{"start":{"cwd":"/tmp","prompt":"Is Rust better than Go?","workflow":"DDY7SM1N7BV4G"},"steps":[{"role":"against","output":{"$status":"continue","argument":"Go compiles faster and its tooling is simpler."},"detail":"988SFC5XN7KH8","agent":"uwf-scripted"}],"role":{"name":"for","description":"Argues for the proposition","goal":"You are a skilled debater arguing FOR the proposition.\nBe logical, cite evidence, and directly address your opponent's points.\nKeep each argument concise (under 200 words).\n","capabilities":["argumentation","critical-thinking"],"procedure":"1. Read the opposing side's latest argument carefully.\n2. Counter their points with evidence and logic.\n3. If you find yourself genuinely convinced by the other side, you may concede.\n","output":"Provide your argument in the frontmatter.\nSet status to \"conceded\" ONLY if you are genuinely convinced and wish to stop debating.\nOtherwise set status to \"continue\".\n","outputSchema":{"type":"object","title":"debate.for","required":["$status","argument"],"properties":{"$status":{"enum":["continue","conceded"]},"argument":{"type":"string"}}}},"outputFormat":"## Deliverable Format\n\nYour response MUST begin with a YAML frontmatter block followed by your markdown work:\n\n```\n---\n$status: continue  # required | continue | conceded\nargument: <string>  # required\n---\n\n... your markdown work here ...\n```\n\nThe frontmatter is the **primary deliverable** — the engine reads it directly.\nYour meta output must satisfy these fields:\n\n  - `$status` (required)\n  - `argument` (required)\n\nOutput ONLY the fields listed above. Do not add extra fields that are not specified in the schema.\n\nFocus exclusively on YOUR role's deliverable. Do not perform actions outside your role's scope.","edgePrompt":"Counter the opposing argument: Go compiles faster and its tooling is simpler.","thread":"06DQDPN800TCJTPDSBDHQEV0Q0","head":"38SY7HZA82WV1"}"###);
    insta::assert_snapshot!(env.transcript(&format!("agent context {t} judge")), @r#"
    ! unknown role "judge" in workflow "debate"; roles: for, against
    [exit 1]
    "#);
}

#[test]
fn submit_writes_a_step_on_the_head_or_keeps_the_raw_output() {
    let env = TestEnv::new();
    let t = env.start(&p(&example("solve-issue.yaml")), "issue");
    let head = env.head(&t);
    // Missing a required field: the error names it and the raw output is kept.
    let r = env.run_stdin(
        &["agent", "submit", &t, "planner"],
        "---\nplan: p\n---\nbody\n",
    );
    assert_ne!(r.code, 0);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("cannot extract output for role \"planner\""),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("missing fields: steps"), "{}", r.stderr);
    let raw = r.stderr.trim_end().rsplit(' ').next().unwrap().to_string();
    assert_eq!(
        json(&env.ok(&["cas", "get", &raw])).get("payload"),
        Some(&Value::str("---\nplan: p\n---\nbody\n"))
    );
    let r = env.run_stdin(&["agent", "submit", &t, "planner"], "no frontmatter at all");
    assert!(
        r.stderr
            .contains("does not begin with a YAML frontmatter block"),
        "{}",
        r.stderr
    );
    // A good output: output, detail (from --detail) and StepNode on the head; the head itself
    // does not move.
    let detail = env.root().join("transcript.txt");
    std::fs::write(&detail, "the whole transcript").unwrap();
    let r = env.run_stdin(
        &["agent", "submit", &t, "planner", "--detail", &p(&detail)],
        "---\nplan: p\nsteps: [a, b]\n---\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let id = r.stdout.trim();
    let node = json(&env.ok(&["cas", "get", id]));
    assert_eq!(node.get("type"), Some(&Value::str("108DB063KRQWW")));
    let pl = node.get("payload").unwrap();
    assert_eq!(pl.get("prev"), Some(&Value::Null));
    assert_eq!(pl.get("start"), Some(&Value::str(&head)));
    assert_eq!(pl.get("role"), Some(&Value::str("planner")));
    assert_eq!(pl.get("agent"), Some(&Value::str("uwf-agent")));
    assert_eq!(pl.get("assembledPrompt"), Some(&Value::Null));
    let d = pl.get("detail").unwrap().as_str().unwrap();
    assert_eq!(
        json(&env.ok(&["cas", "get", d])).get("payload"),
        Some(&Value::str("the whole transcript"))
    );
    assert_eq!(env.head(&t), head);
    insta::assert_snapshot!(env.transcript("agent submit 06H01H81R5YCT74RZ86VBY5KNC planner"), @"
    ! thread not found: 06H01H81R5YCT74RZ86VBY5KNC
    [exit 3]
    ");
}

#[test]
fn scripted_agent_reports_an_exhausted_script() {
    let env = TestEnv::fixed();
    let script = env.root().join("short.script.yaml");
    std::fs::write(&script, "against:\n  - {$status: continue, argument: a}\nfor:\n  - {$status: continue, argument: b}\n").unwrap();
    let t = env.start(&p(&example("debate.yaml")), "q");
    let agent = env.scripted(&script);
    env.ok(&["thread", "step", &t, "-c", "2", "--agent", &agent]);
    let head = env.head(&t);
    insta::assert_snapshot!(env.transcript(&format!("thread step {t} --agent '{agent}'")), @r#"
    ! script has 1 replies for role "against" but reply 2 was asked for
    [exit 1]
    "#);
    assert_eq!(env.head(&t), head);
    std::fs::write(&script, "against: [1]\n").unwrap();
    insta::assert_snapshot!(env.transcript(&format!("agent scripted --script {} {t} against", script.display())), @r#"
    ! invalid script: role "against" reply 1 must be a string or a mapping
    [exit 1]
    "#);
}
