//! `thread read` and `step read` on steps built node by node: turns with and without tool
//! calls, a tool-result turn, a text detail, a step with no recorded prompt, durations in
//! seconds and minutes, and quotas counted in UTF-16 code units.

use crate::common::{TestEnv, json};
use uwf::cas::Value;

const STEP_NODE: &str = "108DB063KRQWW";

const TURN_SCHEMA: &str = r#"{"title":"test-turn","type":"object","required":["index","role","content"],"properties":{"index":{"type":"integer"},"role":{"type":"string"},"content":{"type":"string"},"toolCalls":{"anyOf":[{"type":"array","items":{"type":"object"}},{"type":"null"}]}},"additionalProperties":false}"#;
const DETAIL_SCHEMA: &str = r#"{"title":"test-detail","type":"object","required":["turns"],"properties":{"turns":{"type":"array","items":{"type":"string","format":"ocas_ref"}}},"additionalProperties":false}"#;

fn hash_of(out: &str) -> String {
    json(out).get("hash").unwrap().as_str().unwrap().to_string()
}

fn put(env: &TestEnv, ty: &str, payload: &str) -> String {
    hash_of(&env.ok(&["cas", "put", ty, payload]))
}

fn put_text(env: &TestEnv, text: &str) -> String {
    hash_of(&env.ok(&["cas", "put-text", text]))
}

/// `YYYY-MM-DD HH:MM:SS` of a node's timestamp, in UTC.
fn time_of(env: &TestEnv, id: &str) -> String {
    let n = json(&env.ok(&["cas", "get", id, "--timestamp"]));
    let ms = n.get("timestamp").unwrap().as_f64().unwrap() as i64;
    let (days, secs) = (ms / 1000 / 86_400, ms / 1000 % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn utf16(s: &str) -> usize {
    s.encode_utf16().count()
}

struct Built {
    env: TestEnv,
    thread: String,
    wf: String,
    goal: String,
    s1: String,
    s2: String,
    prompt_text: String,
}

/// A debate thread whose head is two steps of role `for`: the first with a three-turn detail
/// (tool calls, a tool result, a markdown answer) and a recorded prompt, 90.5 s long; the
/// second with a text detail and no recorded prompt, 1.25 s long.
fn build() -> Built {
    let env = TestEnv::new();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ts-golden/workflows/debate.yaml");
    let file = env.root().join("debate.yaml");
    std::fs::copy(&src, &file).unwrap();
    let wf = json(&env.ok(&["workflow", "put", file.to_str().unwrap()]));
    let wf = wf.get("hash").unwrap().as_str().unwrap().to_string();
    let shown = json(&env.ok(&["workflow", "show", &wf]));
    let goal = shown
        .get("payload")
        .and_then(|p| p.get("roles"))
        .and_then(|r| r.get("for"))
        .and_then(|r| r.get("goal"))
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    assert!(goal.ends_with(".\n"), "a `|` goal keeps its final newline");
    let task = "Is é better than 🦀?";
    let started = json(&env.ok(&["thread", "start", &wf, "-p", task, "--cwd", "/"]));
    let t0 = started.get("thread").unwrap().as_str().unwrap().to_string();
    let start = json(&env.ok(&["thread", "show", &t0]));
    let start = start.get("head").unwrap().as_str().unwrap().to_string();

    let turn_schema = hash_of(&env.ok(&["cas", "schema", "put", TURN_SCHEMA]));
    let detail_schema = hash_of(&env.ok(&["cas", "schema", "put", DETAIL_SCHEMA]));
    let turns = [
        r#"{"index":0,"role":"assistant","content":"Let me look.","toolCalls":[{"name":"read_file","args":"{\"path\":\"a.md\"}"},{"name":"list"}]}"#,
        r#"{"index":1,"role":"tool","content":"file contents","toolCalls":null}"#,
        r#"{"index":2,"role":"assistant","content":"Final **markdown** answer\n\n- one\n- two","toolCalls":null}"#,
    ]
    .map(|t| put(&env, &turn_schema, t));
    let detail = put(
        &env,
        &detail_schema,
        &format!(
            r#"{{"turns":["{}","{}","{}"]}}"#,
            turns[0], turns[1], turns[2]
        ),
    );
    let output = put_text(&env, "out");
    let prompt_text = "The assembled prompt.\nSecond line.".to_string();
    let prompt = put_text(&env, &prompt_text);
    let s1 = put(
        &env,
        STEP_NODE,
        &format!(
            r#"{{"start":"{start}","prev":null,"role":"for","output":"{output}","detail":"{detail}","agent":"agent-a","startedAtMs":1000,"completedAtMs":91500,"cwd":"/","assembledPrompt":"{prompt}"}}"#
        ),
    );
    let text_detail = put_text(&env, "a text detail is never an output");
    let s2 = put(
        &env,
        STEP_NODE,
        &format!(
            r#"{{"start":"{start}","prev":"{s1}","role":"for","output":"{output}","detail":"{text_detail}","agent":"agent-b","startedAtMs":5000,"completedAtMs":6250,"cwd":"/"}}"#
        ),
    );
    let forked = json(&env.ok(&["step", "fork", &s2]));
    let thread = forked.get("thread").unwrap().as_str().unwrap().to_string();
    Built {
        env,
        thread,
        wf,
        goal,
        s1,
        s2,
        prompt_text,
    }
}

#[test]
fn thread_read_matches_the_typescript_format() {
    let b = build();
    let (env, t) = (&b.env, &b.thread);
    let start = format!(
        "# Thread `{t}`\n\n**Workflow:** debate (`{}`)\n\n## Task\n\nIs é better than 🦀?",
        b.wf
    );
    let step1 = format!(
        "## Step 1: for `{}`\n**Agent:** agent-a | **Time:** {} | **Duration:** 1m31s\n\n<prompt>\n{}\n</prompt>\n\n<output>\nFinal **markdown** answer\n\n- one\n- two\n</output>",
        b.s1,
        time_of(env, &b.s1),
        b.goal
    );
    let step2 = format!(
        "## Step 2: for `{}`\n**Agent:** agent-b | **Time:** {} | **Duration:** 1.3s",
        b.s2,
        time_of(env, &b.s2)
    );
    let sep = "\n\n---\n\n";
    let full = format!("{start}{sep}{step1}{sep}{step2}");
    assert_eq!(env.ok(&["thread", "read", t]), format!("{full}\n"));

    // Each step costs its block and 6 for a separator (which is 7 long), on top of the start
    // section; step 2's cost counts its role's prompt block too, although only step 1 prints it.
    let prompt_block = format!("\n\n<prompt>\n{}\n</prompt>", b.goal);
    let cost = utf16(&start) + 6 + utf16(&step2) + utf16(&prompt_block) + 6 + utf16(&step1);
    assert_eq!(cost, utf16(&full) - 2 + utf16(&prompt_block));
    let both = cost.to_string();
    assert_eq!(
        env.ok(&["thread", "read", t, "--quota", &both]),
        format!("{full}\n")
    );
    let one_less = (cost - 1).to_string();
    let hint = format!(
        "*(1 earlier step, load with `uwf thread read {t} --before {}`)*",
        b.s2
    );
    let step2_alone = format!("{step2}{prompt_block}");
    assert_eq!(
        env.ok(&["thread", "read", t, "--quota", &one_less]),
        format!("{start}{sep}{hint}{sep}{step2_alone}\n")
    );
    // --before leaves out the start section unless --start.
    assert_eq!(
        env.ok(&["thread", "read", t, "--before", &b.s2]),
        format!("{step1}\n")
    );
    assert_eq!(
        env.ok(&["thread", "read", t, "--before", &b.s2, "--start"]),
        format!("{start}{sep}{step1}\n")
    );
    env.fails(
        &["thread", "read", t, "--quota", "0"],
        "invalid --quota: must be a positive integer",
    );
}

#[test]
fn step_read_matches_the_typescript_format() {
    let b = build();
    let env = &b.env;
    let header = format!("# Step {}\n\n**Role:** for\n**Agent:** agent-a", b.s1);
    let turn1 = "## Turn 1\n\n**Turn role:** assistant\n- **read_file** — `{\"path\":\"a.md\"}`\n- **list**\n\nLet me look.";
    let turn2 = "## Turn 2\n\n**Turn role:** tool\n\nfile contents";
    let turn3 =
        "## Turn 3\n\n**Turn role:** assistant\n\nFinal **markdown** answer\n\n- one\n- two";
    assert_eq!(
        env.ok(&["step", "read", &b.s1]),
        format!("{header}\n\n{turn1}\n\n{turn2}\n\n{turn3}\n")
    );
    // The quota less the header and 200 holds the newest turns, 2 units between turns.
    let omitted = "_[Earlier turns omitted due to quota. Use --quota to increase.]_";
    let two = (utf16(&header) + 200 + utf16(turn3) + 2 + utf16(turn2)).to_string();
    assert_eq!(
        env.ok(&["step", "read", &b.s1, "--quota", &two]),
        format!("{header}\n\n{omitted}\n\n{turn2}\n\n{turn3}\n")
    );
    assert_eq!(
        env.ok(&["step", "read", &b.s1, "--quota", "1"]),
        format!("{header}\n\n{omitted}\n\n{turn3}\n")
    );
    assert_eq!(
        env.ok(&["step", "read", &b.s1, "--prompt"]),
        format!("{header}\n\n## Prompt\n\n{}\n", b.prompt_text)
    );
    // A text detail has no turns; a step with no recorded prompt says so.
    assert_eq!(
        env.ok(&["step", "read", &b.s2]),
        format!("# Step {}\n\n**Role:** for\n**Agent:** agent-b\n", b.s2)
    );
    assert_eq!(
        env.ok(&["step", "read", &b.s2, "--prompt"]),
        format!("# Step {}\n\n_Prompt not recorded (legacy step)._\n", b.s2)
    );
    env.fails(&["step", "read", &b.wf], "is not a StepNode");
}

#[test]
fn step_show_expands_a_repeated_reference_once() {
    let b = build();
    let env = &b.env;
    let schema = hash_of(&env.ok(&["cas", "schema", "put", DETAIL_SCHEMA]));
    let text = put_text(env, "shared");
    let detail = put(env, &schema, &format!(r#"{{"turns":["{text}","{text}"]}}"#));
    let output = put_text(env, "out");
    let start = json(&env.ok(&["cas", "get", &b.s1]));
    let start = start
        .get("payload")
        .and_then(|p| p.get("start"))
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    let step = put(
        env,
        STEP_NODE,
        &format!(
            r#"{{"start":"{start}","prev":null,"role":"for","output":"{output}","detail":"{detail}","agent":"a","startedAtMs":0,"completedAtMs":1,"cwd":"/"}}"#
        ),
    );
    assert_eq!(
        env.ok(&["step", "show", &step]),
        format!("{{\"turns\":[\"shared\",\"{text}\"]}}\n")
    );
}
