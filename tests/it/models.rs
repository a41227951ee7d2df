//! Real agents against a real local model server: the second layer of extraction in
//! `uwf agent submit`, the built-in LLM agent running a workflow to its end, the coding-agent
//! presets driven through fake `hermes` and `claude` programs, setup and config, and a sweep
//! for the API key through everything a run leaves behind.

use crate::common::{Run, TestEnv, example, json, p};
use crate::fake_api::{Answer, FakeApi, ok, status};
use std::sync::Arc;
use std::time::Duration;
use uwf::cas::Value;

const KEY: &str = "sk-test-SECRET-7f3a9c2e51";
const PROMPT: &str = "Is Rust better than Go?";

/// A root whose config points at `api` (key from `.env` through `apiKeyEnv`), with `retries`
/// and a one-second request limit.
fn env_for(api: &FakeApi, retries: u32, extra: &str) -> TestEnv {
    env_at(&api.url, retries, extra)
}

/// A root whose config points at the provider `url`, as `env_for` does.
fn env_at(url: &str, retries: u32, extra: &str) -> TestEnv {
    let env = TestEnv::new();
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "providers:\n  fake:\n    baseUrl: {}\n    apiKeyEnv: FAKE_KEY\n    timeoutSeconds: 1\n    maxRetries: {retries}\nmodels:\n  default:\n    provider: fake\n    name: fake-model\ndefaultModel: default\n{extra}",
            url
        ),
    )
    .unwrap();
    std::fs::write(env.root().join(".env"), format!("FAKE_KEY={KEY}\n")).unwrap();
    env
}

fn debate(env: &TestEnv) -> String {
    env.start(&p(&example("debate.yaml")), PROMPT)
}

/// A chat reply whose content is `v` as JSON.
fn reply(v: &str) -> Answer {
    ok(v)
}

const VALID: &str = r#"{"$status":"continue","argument":"from the model"}"#;

fn submit(env: &TestEnv, t: &str, raw: &str) -> Run {
    env.run_stdin(&["agent", "submit", t, "against"], raw)
}

/// The payload of node `id`.
fn payload(env: &TestEnv, id: &str) -> Value {
    json(&env.ok(&["cas", "get", id]))
        .get("payload")
        .unwrap()
        .clone()
}

fn output_of(env: &TestEnv, step: &str) -> Value {
    let node = json(&env.ok(&["cas", "get", step]));
    let out = node
        .get("payload")
        .and_then(|p| p.get("output"))
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    payload(env, &out)
}

/// A provider named by a host name rather than an address: the binary resolves it through
/// the C library's resolver (`localhost` from `/etc/hosts`), as it resolves a real provider's.
#[test]
fn a_provider_named_by_host_name_is_resolved_and_reached() {
    let api = FakeApi::start(vec![reply(VALID)]);
    let by_name = api.url.replace("127.0.0.1", "localhost");
    assert_ne!(by_name, api.url, "the fake server's URL names 127.0.0.1");
    let env = env_at(&by_name, 0, "");
    let t = debate(&env);
    let r = submit(&env, &t, "I argue, without any frontmatter.");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(output_of(&env, r.stdout.trim()).to_json(), VALID);
    assert_eq!(api.requests(), 1);
}

#[test]
fn the_model_fills_a_step_without_frontmatter_and_one_that_fails_the_schema() {
    let api = FakeApi::start(vec![reply(VALID)]);
    let env = env_for(&api, 0, "");
    let t = debate(&env);
    let r = submit(&env, &t, "I argue, without any frontmatter.");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = output_of(&env, r.stdout.trim());
    assert_eq!(out.to_json(), VALID);
    // Frontmatter that fails the schema goes to the model too.
    let r = submit(&env, &t, "---\n$status: maybe\n---\nbody");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(api.requests(), 2);
    // Valid frontmatter costs no model call.
    let r = submit(&env, &t, "---\n$status: conceded\nargument: fine\n---\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(api.requests(), 2);
    // --no-llm turns the second layer off.
    let r = env.run_stdin(&["agent", "submit", &t, "against", "--no-llm"], "prose");
    assert_ne!(r.code, 0);
    assert_eq!(api.requests(), 2);
}

#[test]
fn the_extract_request_is_the_typescript_tools() {
    let api = FakeApi::start(vec![reply(VALID)]);
    let env = env_for(&api, 0, "");
    let t = debate(&env);
    let ctx = json(&env.ok(&["agent", "context", &t, "against"]));
    let schema = ctx.get("role").unwrap().get("outputSchema").unwrap();
    let raw = "My raw \"output\"\nover two lines.";
    assert_eq!(submit(&env, &t, raw).code, 0);
    let schema_pretty = serde_json::to_string_pretty(
        &serde_json::from_str::<serde_json::Value>(&schema.to_json()).unwrap(),
    )
    .unwrap();
    let expected = serde_json::json!({
        "model": "fake-model",
        "messages": [
            {"role": "system", "content": format!("Extract structured data from the agent output. Reply with a single JSON object only, no markdown or prose. The JSON must validate against this JSON Schema:\n{schema_pretty}")},
            {"role": "user", "content": raw}
        ],
        "response_format": {"type": "json_object"}
    });
    let seen = api.seen.lock().unwrap();
    assert_eq!(seen[0].body, expected.to_string());
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[test]
fn a_corrective_retry_then_a_reply_that_stays_invalid() {
    let api = FakeApi::start(vec![reply(r#"{"argument":5}"#), reply(VALID)]);
    let env = env_for(&api, 0, "");
    let t = debate(&env);
    let r = submit(&env, &t, "prose");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(output_of(&env, r.stdout.trim()).to_json(), VALID);
    let second = json(&api.bodies()[1]);
    let msgs = second.get("messages").and_then(Value::as_array).unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(
        msgs[2].get("content"),
        Some(&Value::str(r#"{"argument":5}"#))
    );
    let fix = msgs[3].get("content").and_then(Value::as_str).unwrap();
    assert!(fix.contains("does not validate"), "{fix}");

    let bad = FakeApi::start(vec![reply(r#"{"argument":5}"#)]);
    let env = env_for(&bad, 0, "");
    let t = debate(&env);
    let head = env.head(&t);
    let raw = "prose the model cannot fix";
    env.fails(
        &["agent", "submit", &t, "against"],
        "also after a corrective retry",
    );
    let r = submit(&env, &t, raw);
    assert_eq!(r.code, 1);
    let line = r.stderr.trim();
    let id = line.rsplit(' ').next().unwrap();
    assert!(
        line.contains("the raw output is kept as text node"),
        "{line}"
    );
    let node = json(&env.ok(&["cas", "get", id]));
    assert_eq!(node.get("payload"), Some(&Value::str(raw)));
    assert_eq!(env.head(&t), head);
}

fn submit_fails(env: &TestEnv, t: &str, needle: &str) -> Run {
    let r = env.run_stdin(&["agent", "submit", t, "against"], "prose");
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(lines[0].contains(needle), "{needle:?} not in {}", lines[0]);
    assert!(!r.stderr.contains(KEY));
    r
}

#[test]
fn model_failures_are_one_line_and_retried_where_that_helps() {
    // A 429 with Retry-After, then success.
    let mut limited = status(429, r#"{"error":{"message":"slow down"}}"#);
    limited.headers.push(("retry-after", "0".into()));
    let api = FakeApi::start(vec![limited, reply(VALID)]);
    let env = env_for(&api, 2, "");
    let t = debate(&env);
    assert_eq!(submit(&env, &t, "prose").code, 0);
    assert_eq!(api.requests(), 2);
    // 5xx until the retries run out: 1 + 2 attempts.
    let api = FakeApi::start(vec![status(503, r#"{"error":{"message":"overloaded"}}"#)]);
    let env = env_for(&api, 2, "");
    let t = debate(&env);
    submit_fails(&env, &t, "fake (fake-model): HTTP 503: overloaded");
    assert_eq!(api.requests(), 3);
    // A reply that never comes.
    let mut slow = reply(VALID);
    slow.delay = Duration::from_secs(4);
    let api = FakeApi::start(vec![slow]);
    let env = env_for(&api, 0, "");
    let t = debate(&env);
    submit_fails(&env, &t, "no reply within");
    // A malformed body.
    let api = FakeApi::start(vec![status(200, "<html>not json</html>")]);
    let env = env_for(&api, 2, "");
    let t = debate(&env);
    submit_fails(&env, &t, "malformed reply");
    assert_eq!(api.requests(), 1);
    // A 401 gives the provider's message, never the key.
    let api = FakeApi::start(vec![status(
        401,
        r#"{"error":{"message":"Incorrect API key provided"}}"#,
    )]);
    let env = env_for(&api, 2, "");
    let t = debate(&env);
    submit_fails(&env, &t, "HTTP 401: Incorrect API key provided");
    assert_eq!(api.requests(), 1);
}

/// Answers the debate's LLM agent: `against` first forgets the frontmatter (and is corrected),
/// then argues; `for` concedes.
fn debater() -> FakeApi {
    FakeApi::with(Arc::new(|body: &str, _| {
        let v = json(body);
        let msgs = v.get("messages").and_then(Value::as_array).unwrap();
        let system = msgs[0].get("content").and_then(Value::as_str).unwrap_or("");
        if system.starts_with("Extract structured data") {
            return reply(VALID);
        }
        let text = if system.contains("# Role: against") {
            if msgs.len() == 2 {
                "I forgot the format."
            } else {
                "---\n$status: continue\nargument: Go is simpler\n---\nMy argument."
            }
        } else {
            "---\n$status: conceded\nargument: fair point\n---\nI concede."
        };
        reply(text)
    }))
}

#[test]
fn the_llm_agent_runs_the_debate_to_its_end() {
    let api = debater();
    let env = env_for(
        &api,
        0,
        "agents:\n  llm:\n    command: uwf-llm\n    args: []\ndefaultAgent: llm\n",
    );
    let t = debate(&env);
    let out = env.ok(&["thread", "step", &t, "--count", "5"]);
    assert!(out.contains("\"done\":true"), "{out}");
    let show = env.show(&t);
    assert_eq!(show.get("status"), Some(&Value::str("completed")));
    // against (corrected once), then for.
    assert_eq!(api.requests(), 3);
    assert_eq!(env.roles(&t), ["against", "for"]);
    // The first step's detail holds both turns, the model and the usage.
    let steps = json(&env.ok(&["thread", "steps", &t]));
    let first = steps.get("steps").and_then(Value::as_array).unwrap()[1]
        .get("hash")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    let node = payload(&env, &first);
    assert_eq!(node.get("agent"), Some(&Value::str("uwf-llm")));
    let detail = node.get("detail").and_then(Value::as_str).unwrap();
    let d = payload(&env, detail);
    assert_eq!(d.get("turnCount"), Some(&Value::Number(2.0)));
    assert_eq!(d.get("model"), Some(&Value::str("fake-1")));
    assert_eq!(
        d.get("usage").unwrap().to_json(),
        r#"{"totalTokens":18,"promptTokens":14,"completionTokens":4}"#
    );
    // The prompt of `for` carried the opponent's argument and the edge prompt.
    let for_body = api
        .bodies()
        .into_iter()
        .find(|b| b.contains("# Role: for"))
        .unwrap();
    assert!(for_body.contains("Counter the opposing argument: Go is simpler"));
    assert!(for_body.contains("### Step 1: against"));
}

#[test]
fn a_step_without_an_agent_points_at_setup() {
    let env = TestEnv::new();
    let t = debate(&env);
    let r = env.fails(&["thread", "step", &t], "uwf setup");
    assert_eq!(r.code, 1);
}

/// A directory with fake `hermes` and `claude` programs that behave as `mode` says, logging
/// their arguments to `calls.log` beside them.
fn fake_clis(env: &TestEnv, mode: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = env.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = bin.join("calls.log");
    let hermes = format!(
        r#"#!/bin/sh
echo "hermes $*" | tr '\n' ' ' >> {log}; echo >> {log}
n=$(grep -c '^hermes' {log})
case "{mode}" in
  prose) echo "Just prose, no frontmatter."; echo "session_id: h-$n"; exit 0;;
esac
if [ "$n" -ge 3 ]; then s=conceded; else s=continue; fi
printf -- '---\n$status: %s\nargument: point %s\n---\nbody\n\nsession_id: h-%s\n' "$s" "$n" "$n"
"#,
        log = log.display()
    );
    let claude = format!(
        r#"#!/bin/sh
echo "claude $*" >> {log}
cat > /dev/null
case "{mode}" in
  crash) echo "claude: boom" >&2; exit 3;;
  hang) sleep 30;;
esac
printf '%s\n' '{{"type":"result","subtype":"success","is_error":false,"duration_ms":12,"num_turns":1,"result":"---\n$status: continue\nargument: from claude\n---\ndone","session_id":"c-1","total_cost_usd":0.0125,"stop_reason":"end_turn","usage":{{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":2,"cache_creation_input_tokens":1}}}}'
"#,
        log = log.display()
    );
    for (name, text) in [("hermes", hermes), ("claude", claude)] {
        let f = bin.join(name);
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

fn run_with(env: &TestEnv, bin: &std::path::Path, args: &[&str]) -> Run {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = env.cmd().env("PATH", path).args(args).output().unwrap();
    Run::from(out)
}

#[test]
fn the_hermes_preset_resumes_a_roles_session() {
    let api = FakeApi::start(vec![reply(VALID)]);
    let env = env_for(
        &api,
        0,
        "agents:\n  hermes:\n    command: uwf-hermes\n    args: []\ndefaultAgent: hermes\n",
    );
    let bin = fake_clis(&env, "normal");
    let t = debate(&env);
    let r = run_with(&env, &bin, &["thread", "step", &t, "--count", "5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("completed")));
    let calls = std::fs::read_to_string(bin.join("calls.log")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls[0].starts_with("hermes chat -Q -q ## Deliverable Format"));
    assert!(!calls[1].contains("--resume"));
    // `against` comes back: its session of the first call is resumed.
    assert!(
        calls[2].starts_with("hermes chat --resume h-1 -Q -q"),
        "{}",
        calls[2]
    );
    let cache = std::fs::read_to_string(env.root().join("cache/hermes-sessions.json")).unwrap();
    assert!(
        cache.contains(&format!("\"{t}:against\": \"h-3\"")),
        "{cache}"
    );
    assert!(cache.ends_with("}\n"));
    assert_eq!(api.requests(), 0);
    // Each step's detail is the TypeScript tool's hermes detail; `step read` shows its turn.
    let head = env.head(&t);
    let node = payload(&env, &head);
    let detail = node.get("detail").and_then(Value::as_str).unwrap();
    let d = json(&env.ok(&["cas", "get", detail]));
    assert_eq!(d.get("type"), Some(&Value::str("6AT9BBJ2Y42ZV")));
    assert_eq!(
        d.get("payload").unwrap().get("sessionId"),
        Some(&Value::str("h-3"))
    );
    let md = env.ok(&["step", "read", &head]);
    assert!(md.contains("argument: point 3"), "{md}");
}

#[test]
fn the_claude_code_preset_keeps_session_usage_and_cost() {
    let api = FakeApi::start(vec![reply(VALID)]);
    let env = env_for(&api, 0, "");
    let bin = fake_clis(&env, "normal");
    let t = debate(&env);
    let r = run_with(
        &env,
        &bin,
        &[
            "thread",
            "step",
            &t,
            "--agent",
            "uwf agent command --preset claude-code",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Its usage is counted as one call: input 10 + cache read 2 + cache creation 1, and the
    // CLI's own total cost.
    let u = json(&env.ok(&["usage", "--by", "model"]));
    assert_eq!(
        u.to_json(),
        r#"{"calls":1,"inputTokens":13,"outputTokens":5,"cachedInputTokens":2,"costUsd":0.0125,"by":[{"model":"claude-code","calls":1,"inputTokens":13,"outputTokens":5,"cachedInputTokens":2,"costUsd":0.0125}]}"#
    );
    let head = env.head(&t);
    let node = payload(&env, &head);
    assert_eq!(node.get("agent"), Some(&Value::str("uwf-claude-code")));
    // The prompt the program was given is kept.
    let prompt = node.get("assembledPrompt").and_then(Value::as_str).unwrap();
    let prompt = json(&env.ok(&["cas", "get", prompt]));
    assert!(
        prompt
            .get("payload")
            .and_then(Value::as_str)
            .unwrap()
            .contains("## Task\nIs Rust better than Go?")
    );
    let d = node.get("detail").and_then(Value::as_str).unwrap();
    let d = json(&env.ok(&["cas", "get", d]));
    // The TypeScript tool's claude-code detail schema.
    assert_eq!(d.get("type"), Some(&Value::str("AEBZKYF1831T8")));
    let d = d.get("payload").unwrap().clone();
    assert_eq!(d.get("sessionId"), Some(&Value::str("c-1")));
    assert_eq!(d.get("totalCostUsd"), Some(&Value::Number(0.0125)));
    assert_eq!(
        d.get("usage").unwrap().to_json(),
        r#"{"inputTokens":10,"outputTokens":5,"cacheReadInputTokens":2,"cacheCreationInputTokens":1}"#
    );
    let calls = std::fs::read_to_string(bin.join("calls.log")).unwrap();
    assert_eq!(calls.trim(), "claude -p --output-format json");
}

#[test]
fn crashing_hanging_and_formatless_programs() {
    let api = FakeApi::start(vec![reply(VALID)]);
    let env = env_for(&api, 0, "");
    let t = debate(&env);
    let head = env.head(&t);
    let claude = [
        "thread",
        "step",
        &t,
        "--agent",
        "uwf agent command --preset claude-code",
    ];
    let bin = fake_clis(&env, "crash");
    let r = run_with(&env, &bin, &claude);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("agent command failed (claude): claude: boom"),
        "{}",
        r.stderr
    );
    assert_eq!(env.head(&t), head);

    let bin = fake_clis(&env, "hang");
    let started = std::time::Instant::now();
    let mut args = claude.to_vec();
    args.extend(["--timeout", "1"]);
    let r = run_with(&env, &bin, &args);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("timed out after 1s"), "{}", r.stderr);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(env.head(&t), head);

    // Prose without frontmatter: the model extracts it.
    let bin = fake_clis(&env, "prose");
    let r = run_with(
        &env,
        &bin,
        &[
            "thread",
            "step",
            &t,
            "--agent",
            "uwf agent command --preset hermes",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(api.requests(), 1);
    let head = env.head(&t);
    assert_eq!(output_of(&env, &head).to_json(), VALID);
}

#[test]
fn a_generic_program_gets_the_prompt_as_an_argument_or_on_stdin() {
    let api = FakeApi::start(vec![reply(VALID)]);
    let env = env_for(&api, 0, "");
    let t = debate(&env);
    let seen = env.root().join("seen.txt");
    let prog = env.agent(
        "my-cli",
        &format!(
            "printf '%s' \"$1\" > {}\ncat >> {}\nprintf -- '---\\n$status: continue\\nargument: mine\\n---\\n'",
            seen.display(),
            seen.display()
        ),
    );
    let agent = format!("uwf agent command -- {} {{prompt}}", prog.display());
    env.ok(&["thread", "step", &t, "--agent", &agent]);
    let text = std::fs::read_to_string(&seen).unwrap();
    assert!(
        text.starts_with("## Deliverable Format")
            && text.contains("## Task\nIs Rust better than Go?")
    );
    let node = payload(&env, &env.head(&t));
    assert_eq!(node.get("agent"), Some(&Value::str("uwf-command")));
    // Without {prompt}, the prompt arrives on stdin.
    let agent = format!("uwf agent command -- {}", prog.display());
    env.ok(&["thread", "step", &t, "--agent", &agent]);
    let text = std::fs::read_to_string(&seen).unwrap();
    assert!(text.contains("### Step 1: against"), "{text}");
}

#[test]
fn setup_with_flags_writes_the_typescript_config() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let out = env.ok(&[
        "setup",
        "--provider",
        "openai",
        "--api-key",
        KEY,
        "--model",
        "gpt-4o-mini",
    ]);
    assert!(!out.contains(KEY));
    let path = env.root().join("config.yaml");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!(
            "providers:\n  openai:\n    baseUrl: https://api.openai.com/v1\n    apiKey: {KEY}\nmodels:\n  default:\n    provider: openai\n    name: gpt-4o-mini\nagents:\n  hermes:\n    command: uwf-hermes\n    args: []\ndefaultAgent: hermes\ndefaultModel: default\n"
        )
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A second provider keeps the first; a `uwf-` prefix is dropped from the agent.
    env.ok(&[
        "setup",
        "--provider",
        "local",
        "--base-url",
        "http://127.0.0.1:11434/v1",
        "--api-key-env",
        "LOCAL_KEY",
        "--model",
        "llama3",
        "--agent",
        "uwf-llm",
    ]);
    let list = env.ok(&["config", "list"]);
    assert!(!list.contains(KEY), "{list}");
    assert!(list.contains(r#""apiKey":"***MASKED***""#), "{list}");
    // A variable's name is no secret.
    assert!(list.contains(r#""apiKeyEnv":"LOCAL_KEY""#), "{list}");
    assert!(
        list.contains(r#""llm":{"command":"uwf-llm","args":[]}"#),
        "{list}"
    );
    assert_eq!(
        env.ok(&["config", "get", "defaultAgent"]).trim(),
        r#""llm""#
    );
    assert_eq!(
        env.ok(&["config", "get", "providers.openai.apiKey"]).trim(),
        r#""***MASKED***""#
    );
    env.ok(&["config", "set", "timeoutSeconds", "30"]);
    assert_eq!(env.ok(&["config", "get", "timeoutSeconds"]).trim(), "30");
    assert_eq!(
        env.ok(&["config", "path"]).trim(),
        path.display().to_string()
    );
    let r = env.run(&["config", "get", "no.such"]);
    assert_eq!(r.code, 3);
    // Without flags and without a terminal, setup says what it needs.
    let r = env.run(&["setup"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--provider"), "{}", r.stderr);
}

#[test]
fn setup_asks_on_a_terminal_and_hides_the_key() {
    let env = TestEnv::new();
    let mut cmd = std::process::Command::new(crate::common::uwf_bin());
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("UWF_HOME", env.root())
        .env("HOME", env.root())
        .arg("setup");
    let mut s = rexpect::session::spawn_command(cmd, Some(20_000)).unwrap();
    s.exp_string("Provider").unwrap();
    s.send_line("openai").unwrap();
    s.exp_string("Base URL [https://api.openai.com/v1]:")
        .unwrap();
    s.send_line("").unwrap();
    s.exp_string("API key").unwrap();
    s.send_line("sk-typed-secret-42").unwrap();
    s.exp_string("Model").unwrap();
    s.send_line("gpt-4o-mini").unwrap();
    s.exp_string("Default agent").unwrap();
    s.send_line("").unwrap();
    let rest = s.exp_eof().unwrap();
    assert!(
        !rest.contains("sk-typed-secret-42"),
        "the key was echoed: {rest}"
    );
    let text = std::fs::read_to_string(env.root().join("config.yaml")).unwrap();
    assert!(text.contains("apiKey: sk-typed-secret-42"), "{text}");
    assert!(text.contains("defaultAgent: llm"), "{text}");
    assert!(
        text.contains("baseUrl: https://api.openai.com/v1"),
        "{text}"
    );
}

/// Every file under `dir`, recursively.
fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn the_key_appears_nowhere_a_run_leaves_behind() {
    let api = debater();
    // The key in config.yaml as a `${VAR}` reference, its value in `.env`.
    let env = env_for(
        &api,
        0,
        "agents:\n  llm: {command: uwf-llm}\ndefaultAgent: llm\n",
    );
    let cfg = std::fs::read_to_string(env.root().join("config.yaml"))
        .unwrap()
        .replace("apiKeyEnv: FAKE_KEY", "apiKey: ${FAKE_KEY}");
    std::fs::write(env.root().join("config.yaml"), cfg).unwrap();
    let t = debate(&env);
    let mut outputs = Vec::new();
    for args in [
        vec!["thread", "step", &t, "--count", "5"],
        vec!["thread", "read", &t],
        vec!["thread", "steps", &t],
        vec!["config", "list"],
        vec!["--format", "yaml", "config", "list"],
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        outputs.push(r.stdout);
        outputs.push(r.stderr);
    }
    // A failing run names no key either.
    let r = env.run_stdin(&["agent", "submit", &t, "against"], "x");
    outputs.push(r.stderr);
    for o in &outputs {
        assert!(!o.contains(KEY), "key printed: {o}");
    }
    let export = env.root().join("export");
    env.ok(&["export", &p(&export), "--with-config"]);
    let mut all = Vec::new();
    files(&export, &mut all);
    let before = all.len();
    files(&env.root().join("logs"), &mut all);
    assert!(all.len() > before, "the run left no log to search");
    files(&env.root().join("cache"), &mut all);
    all.push(env.db());
    assert!(all.len() > 10);
    for f in all {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "key found in {}",
            f.display()
        );
    }
}

#[test]
fn sigint_during_a_model_call_ends_the_step_at_once() {
    let mut slow = reply(VALID);
    slow.delay = Duration::from_secs(30);
    let api = FakeApi::start(vec![slow]);
    let env = env_for(&api, 0, "");
    std::fs::write(
        env.root().join("config.yaml"),
        std::fs::read_to_string(env.root().join("config.yaml"))
            .unwrap()
            .replace("timeoutSeconds: 1", "timeoutSeconds: 60"),
    )
    .unwrap();
    let t = debate(&env);
    let before = env.head(&t);
    let mut child = env
        .spawn_cmd()
        .args(["thread", "step", &t, "--agent", "uwf agent llm"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while api.requests() == 0 {
        assert!(std::time::Instant::now() < until, "no model call");
        std::thread::sleep(Duration::from_millis(10));
    }
    let asked = std::time::Instant::now();
    crate::supervise::signal(&child, libc::SIGINT);
    let status = crate::supervise::wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(130));
    assert!(asked.elapsed() < Duration::from_secs(5));
    crate::supervise::no_lease_left(&env, &t);
    assert_eq!(env.head(&t), before);
}

#[test]
fn the_cursor_preset_resumes_its_session() {
    use std::os::unix::fs::PermissionsExt;
    let api = FakeApi::start(vec![reply(VALID)]);
    let env = env_for(
        &api,
        0,
        "agents:\n  cursor: {command: uwf-cursor}\ndefaultAgent: cursor\n",
    );
    let bin = env.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = bin.join("calls.log");
    std::fs::write(
        bin.join("cursor-agent"),
        format!(
            "#!/bin/sh\necho \"cursor-agent $*\" >> {log}\ncat > /dev/null\nn=$(grep -c . {log})\nif [ \"$n\" -ge 3 ]; then s=conceded; else s=continue; fi\nprintf '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"duration_ms\":5,\"result\":\"---\\\\n$status: %s\\\\nargument: cursor %s\\\\n---\\\\n\",\"session_id\":\"cur-%s\"}}\\n' \"$s\" \"$n\" \"$n\"\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("cursor-agent"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let t = debate(&env);
    let r = run_with(&env, &bin, &["thread", "step", &t, "--count", "5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("completed")));
    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls[0], "cursor-agent -p --output-format json");
    assert_eq!(
        calls[2],
        "cursor-agent -p --output-format json --resume cur-1"
    );
    let head = env.head(&t);
    let node = payload(&env, &head);
    assert_eq!(node.get("agent"), Some(&Value::str("uwf-cursor")));
    let d = json(&env.ok(&[
        "cas",
        "get",
        node.get("detail").and_then(Value::as_str).unwrap(),
    ]));
    assert_eq!(
        d.get("payload").unwrap().get("sessionId"),
        Some(&Value::str("cur-3"))
    );
}
