//! Model usage: every call the built-in LLM agent, the extraction and a coding-agent CLI make
//! is kept with its step and added up by `uwf usage`, against what a real local model server
//! answered.

use crate::common::{TestEnv, example, json, on_postgres, p};
use crate::fake_api::{Answer, FakeApi};
use std::sync::Arc;
use std::time::Duration;
use uwf::cas::Value;

pub(crate) const PROMPT: &str = "Is Rust better than Go?";
const VALID: &str = r#"{"$status":"continue","argument":"from the model"}"#;

/// The usage the server reports for its `n`th answer (from 0): prompt, completion, cached.
fn tokens(n: usize) -> (u64, u64, u64) {
    let n = n as u64;
    (100 + 10 * n, 5 + n, n)
}

/// A chat answer with `content` and the usage of answer `n`, and `cost` when given.
fn answer(content: &str, n: usize, cost: Option<f64>) -> Answer {
    let (i, o, c) = tokens(n);
    let cost = cost.map_or(String::new(), |c| format!(r#","cost":{c}"#));
    Answer {
        status: 200,
        headers: Vec::new(),
        body: format!(
            r#"{{"model":"fake-1","choices":[{{"index":0,"message":{{"role":"assistant","content":{}}}}}],"usage":{{"prompt_tokens":{i},"completion_tokens":{o},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":{c}}}{cost}}}}}"#,
            Value::str(content).to_json(),
            i + o
        ),
        delay: Duration::ZERO,
    }
}

/// The debate's model: `against` never writes frontmatter (two corrections, then the
/// extraction, answered by the `extract` model), `for` concedes at once.
pub(crate) fn debater(cost: Option<f64>) -> FakeApi {
    FakeApi::with(Arc::new(move |body: &str, n| {
        let v = json(body);
        let msgs = v.get("messages").and_then(Value::as_array).unwrap();
        let system = msgs[0].get("content").and_then(Value::as_str).unwrap_or("");
        let text = if system.starts_with("Extract structured data") {
            VALID
        } else if system.contains("# Role: against") {
            "I forgot the format, again."
        } else {
            "---\n$status: conceded\nargument: fair point\n---\nI concede."
        };
        answer(text, n, cost)
    }))
}

/// A root whose LLM agent runs `default` and whose extraction runs `extract`, both at `api`;
/// `default` priced when `price` is given.
pub(crate) fn env_for(api: &FakeApi, price: &str) -> TestEnv {
    let env = TestEnv::new();
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "providers:\n  fake:\n    baseUrl: {}\n    apiKey: sk-test\n    timeoutSeconds: 5\n    maxRetries: 0\nmodels:\n  default:\n    provider: fake\n    name: fake-model\n{price}  extract:\n    provider: fake\n    name: fake-extract\ndefaultModel: default\nagents:\n  llm:\n    command: uwf-llm\n    args: []\ndefaultAgent: llm\n",
            api.url
        ),
    )
    .unwrap();
    env
}

/// The model each request went to, in order.
fn models_asked(api: &FakeApi) -> Vec<String> {
    api.bodies()
        .iter()
        .map(|b| {
            json(b)
                .get("model")
                .and_then(Value::as_str)
                .unwrap()
                .to_string()
        })
        .collect()
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number {k} in {}", v.to_json()))
}

/// The groups of a `--by` answer, by key.
fn groups(v: &Value, key: &str) -> Vec<(String, Value)> {
    v.get("by")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|g| {
            (
                g.get(key).and_then(Value::as_str).unwrap().to_string(),
                g.clone(),
            )
        })
        .collect()
}

#[test]
fn usage_adds_up_what_the_server_returned_with_the_extractions_calls() {
    let api = debater(None);
    let env = env_for(&api, "    price: {input: 2, output: 8, cachedInput: 0.5}\n");
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    let out = env.ok(&["thread", "step", &t, "--count", "5"]);
    assert!(out.contains("\"done\":true"), "{out}");
    // against: the reply and two corrections, then the extraction; for: one reply.
    let asked = models_asked(&api);
    assert_eq!(
        asked,
        [
            "fake-model",
            "fake-model",
            "fake-model",
            "fake-extract",
            "fake-model"
        ]
    );
    let u = json(&env.ok(&["usage"]));
    let all: Vec<(u64, u64, u64)> = (0..asked.len()).map(tokens).collect();
    assert_eq!(num(&u, "calls"), 5.0);
    assert_eq!(
        num(&u, "inputTokens"),
        all.iter().map(|t| t.0).sum::<u64>() as f64
    );
    assert_eq!(
        num(&u, "outputTokens"),
        all.iter().map(|t| t.1).sum::<u64>() as f64
    );
    assert_eq!(
        num(&u, "cachedInputTokens"),
        all.iter().map(|t| t.2).sum::<u64>() as f64
    );
    // Only `default` has a price: the extraction's call counts its tokens, not a cost.
    let priced =
        |(i, o, c): (u64, u64, u64)| ((i - c) as f64 * 2.0 + c as f64 * 0.5 + o as f64 * 8.0) / 1e6;
    let want: f64 = [0, 1, 2, 4].iter().map(|&n| priced(all[n])).sum();
    assert!((num(&u, "costUsd") - want).abs() < 1e-12, "{}", u.to_json());

    let by = json(&env.ok(&["usage", "--by", "model"]));
    let g = groups(&by, "model");
    assert_eq!(g.len(), 2, "{}", by.to_json());
    assert_eq!((g[0].0.as_str(), num(&g[0].1, "calls")), ("default", 4.0));
    assert_eq!((g[1].0.as_str(), num(&g[1].1, "calls")), ("extract", 1.0));
    assert_eq!(g[1].1.get("costUsd"), Some(&Value::Null));
    assert_eq!(num(&g[1].1, "inputTokens"), all[3].0 as f64);

    let by = json(&env.ok(&["usage", "--by", "role"]));
    let g = groups(&by, "role");
    assert_eq!(g[0].0, "against");
    assert_eq!(num(&g[0].1, "calls"), 4.0);
    assert_eq!((g[1].0.as_str(), num(&g[1].1, "calls")), ("for", 1.0));

    // One thread, one workflow (by its file here), one day: the same totals.
    let wf = p(&example("debate.yaml"));
    let by = json(&env.ok(&["usage", "--by", "thread"]));
    assert_eq!(groups(&by, "thread")[0].0, t);
    for args in [
        vec!["usage", "--thread", t.as_str()],
        vec!["usage", "--workflow", &wf],
        vec!["usage", "--since", "1d"],
    ] {
        let one = json(&env.ok(&args));
        assert_eq!(one.to_json(), u.to_json(), "{args:?}");
    }
    let by = json(&env.ok(&["usage", "--by", "day"]));
    assert_eq!(groups(&by, "day").len(), 1);
    // Every step's calls are kept with it.
    let steps = json(&env.ok(&["thread", "steps", &t]));
    assert_eq!(
        steps.get("steps").and_then(Value::as_array).unwrap().len(),
        3
    );
}

#[test]
fn no_price_gives_a_null_cost_and_a_reported_cost_wins_over_a_price() {
    let api = debater(None);
    let env = env_for(&api, "");
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    env.ok(&["thread", "step", &t, "--count", "5"]);
    let u = json(&env.ok(&["usage"]));
    assert_eq!(num(&u, "calls"), 5.0);
    assert_eq!(u.get("costUsd"), Some(&Value::Null), "{}", u.to_json());

    let api = debater(Some(0.25));
    let env = env_for(&api, "    price: {input: 1000, output: 1000}\n");
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    env.ok(&["thread", "step", &t, "--count", "5"]);
    let u = json(&env.ok(&["usage"]));
    assert!((num(&u, "costUsd") - 1.25).abs() < 1e-12, "{}", u.to_json());
}

#[test]
fn usage_since_counts_whole_utc_days_and_bad_arguments_fail_in_one_line() {
    let env = TestEnv::new();
    // Nothing recorded: zero calls, no cost.
    let u = json(&env.ok(&["usage"]));
    assert_eq!(
        u.to_json(),
        r#"{"calls":0,"inputTokens":0,"outputTokens":0,"cachedInputTokens":0,"costUsd":null}"#
    );
    env.fails(&["usage", "--since", "soon"], "invalid time format: soon");
    env.fails(&["usage", "--workflow", "nothing-here"], "unknown workflow");
    let r = env.run(&["usage", "--by", "colour"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("'colour'"), "{}", r.stderr);
    if on_postgres() {
        // The server's clock dates the calls there; the fixed clock below is this process's.
        return;
    }
    let api = debater(None);
    let env = env_for(&api, "");
    let day = 1_767_225_600_000_u64; // 2026-01-01
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    let r = env.run_at(day + 3_600_000, &["thread", "step", &t, "--count", "5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let at = |now: u64, since: &str| {
        let r = env.run_at(now, &["usage", "--since", since]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        num(&json(&r.stdout), "calls")
    };
    // Whole days: the day of the calls counts from its first millisecond.
    assert_eq!(at(day + 5 * 86_400_000, "5d"), 5.0);
    assert_eq!(at(day + 5 * 86_400_000, "4d"), 0.0);
    assert_eq!(at(day, "2026-01-01T23:00:00Z"), 5.0);
    assert_eq!(at(day, "2026-01-02"), 0.0);
    let by = json(&env.ok(&["usage", "--by", "day"]));
    assert_eq!(groups(&by, "day")[0].0, "2026-01-01");
}

#[test]
fn export_carries_the_usage_and_import_counts_it_once() {
    let api = debater(None);
    let env = env_for(&api, "    price: {input: 2, output: 8}\n");
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    env.ok(&["thread", "step", &t, "--count", "5"]);
    let before = env.ok(&["usage", "--by", "role"]);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("layout");
    env.ok(&["export", &p(&dir)]);
    let lines = std::fs::read_to_string(dir.join("uwf.jsonl")).unwrap();
    let usage: Vec<Value> = lines
        .lines()
        .map(json)
        .filter(|l| l.get("kind") == Some(&Value::str("usage")))
        .collect();
    // One line a step that called a model: against's and for's.
    assert_eq!(usage.len(), 2, "{lines}");
    let calls: usize = usage
        .iter()
        .map(|u| u.get("calls").and_then(Value::as_array).unwrap().len())
        .sum();
    assert_eq!(calls, 5);
    // The TypeScript tool's files say nothing of it.
    for f in ["threads.yaml", "history.jsonl"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        assert!(!text.contains("inputTokens"), "{f}: {text}");
    }
    let other = TestEnv::new();
    other.ok(&["import", &p(&dir)]);
    assert_eq!(other.ok(&["usage", "--by", "role"]), before);
    // Imported again: nothing counted twice.
    other.ok(&["import", &p(&dir)]);
    assert_eq!(other.ok(&["usage", "--by", "role"]), before);
    // The archive carries it too.
    let archive = out.path().join("a.tar.zst");
    env.ok(&["export", "--archive", &p(&archive)]);
    let third = TestEnv::new();
    third.ok(&["import", &p(&archive)]);
    assert_eq!(third.ok(&["usage", "--by", "role"]), before);
}

/// The debate, priced so that `against`'s first step (four calls) costs about $0.001.
fn priced_debate() -> (FakeApi, TestEnv) {
    let api = debater(None);
    let env = env_for(&api, "    price: {input: 2, output: 8}\n");
    (api, env)
}

fn step(env: &TestEnv, t: &str) -> crate::common::Run {
    env.run(&["thread", "step", t])
}

#[test]
fn a_thread_over_its_cost_budget_is_paused_and_goes_on_after_a_raise() {
    let (api, env) = priced_debate();
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    let set = json(&env.ok(&["limits", "set", "debate", "--max-cost-per-thread", "0.0005"]));
    assert_eq!(set.get("maxCostPerThread"), Some(&Value::Number(0.0005)));
    // The first step runs (nothing spent yet) and crosses the budget.
    let r = step(&env, &t);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let calls = api.requests();
    // The next one does not start: the thread is paused for its budget, exit 4, one line.
    let r = step(&env, &t);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let line = r.stderr.lines().next().unwrap();
    assert!(
        line.contains("has spent $0.00") && line.contains("of its budget of $0.0005"),
        "{line}"
    );
    assert_eq!(api.requests(), calls, "no model call after the budget");
    let show = env.show(&t);
    assert_eq!(show.get("status"), Some(&Value::str("paused")));
    assert_eq!(show.get("pausedFor"), Some(&Value::str("budget")));
    // Still over: resume says so and changes nothing.
    let r = env.run(&["thread", "resume", &t]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert_eq!(env.show(&t).get("pausedFor"), Some(&Value::str("budget")));
    // A raise does not start it by itself; a resume then does.
    env.ok(&["limits", "set", "debate", "--max-cost-per-thread", "1"]);
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("paused")));
    env.ok(&["thread", "resume", &t]);
    let show = env.show(&t);
    assert_eq!(show.get("status"), Some(&Value::str("idle")));
    assert_eq!(show.get("pausedFor"), None, "{}", show.to_json());
    let out = env.ok(&["thread", "step", &t, "--count", "5"]);
    assert!(out.contains("\"done\":true"), "{out}");
}

#[test]
fn a_token_budget_for_every_workflow_and_a_warning_for_unpriced_models() {
    let api = debater(None);
    let env = env_for(&api, "");
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    let r = env.run(&["limits", "set", "*", "--max-cost-per-thread", "5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("warning: no price in config.yaml for default, extract"),
        "{}",
        r.stderr
    );
    env.ok(&["limits", "set", "*", "--max-tokens-per-thread", "100"]);
    let list = json(&env.ok(&["limits", "list"]));
    assert_eq!(
        list.to_json(),
        r#"[{"workflow":"*","concurrency":null,"overflow":"queue","maxQueue":null,"maxRetries":null,"maxCostPerThread":5,"maxTokensPerThread":100}]"#
    );
    assert_eq!(step(&env, &t).code, 0);
    let r = step(&env, &t);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("tokens of its budget of 100 tokens"),
        "{}",
        r.stderr
    );
    env.fails(
        &["limits", "set", "*", "--concurrency", "2"],
        "budgets only",
    );
    env.fails(&["limits", "set", "debate"], "nothing to set");
    env.fails(
        &["limits", "set", "debate", "--max-cost-per-day=-1"],
        "--max-cost-per-day must be a number of USD",
    );
    // Removing the budget lets the thread go on once resumed.
    assert!(env.ok(&["limits", "rm", "*"]).contains("\"removed\":true"));
    env.ok(&["thread", "resume", &t]);
    assert_eq!(step(&env, &t).code, 0);
}

#[test]
fn a_spent_day_holds_back_every_runner_of_the_workflow() {
    let (api, env) = priced_debate();
    let threads: Vec<String> = (0..12)
        .map(|_| env.start(&p(&example("debate.yaml")), PROMPT))
        .collect();
    env.ok(&["limits", "set", "debate", "--max-cost-per-day", "0.002"]);
    // Two runners on the same store (PostgreSQL in CI's second run).
    let spawn = || {
        env.spawn_cmd()
            .args(["run", "--until-idle", "-j", "2"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    assert!(a.status.success() && b.status.success(), "{said}");
    assert!(
        said.contains("uwf run: workflow debate has spent $0.00")
            && said.contains("of its day budget of $0.0020 today (UTC)"),
        "{said}"
    );
    // The day stopped new steps: not every thread finished, and what was spent exceeds the
    // budget by at most the steps in flight (four runners' slots, four calls a step at most).
    let done = threads
        .iter()
        .filter(|t| env.show(t).get("status") == Some(&Value::str("completed")))
        .count();
    assert!(done < threads.len(), "all {done} threads ran");
    let u = json(&env.ok(&["usage"]));
    let per_step_max = 4.0 * ((200.0 * 2.0 + 30.0 * 8.0) / 1e6);
    assert!(
        num(&u, "costUsd") < 0.002 + 4.0 * per_step_max,
        "{}",
        u.to_json()
    );
    assert!(api.requests() < 12 * 5);
    // Held threads are not paused, and `uwf ps` says why nothing of it runs.
    let waiting = threads
        .iter()
        .find(|t| env.show(t).get("status") == Some(&Value::str("idle")))
        .expect("a waiting thread");
    let r = step(&env, waiting);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("day budget"), "{}", r.stderr);
    assert_eq!(env.show(waiting).get("status"), Some(&Value::str("idle")));
    let r = env.run(&["ps"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("uwf ps: workflow debate has spent"),
        "{}",
        r.stderr
    );
    // A raise lets them go on.
    env.ok(&["limits", "set", "debate", "--max-cost-per-day", "100"]);
    let r = step(&env, waiting);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// The debate's model server (for other suites).
pub(crate) fn debater_api() -> FakeApi {
    debater(None)
}

/// A root whose LLM agent and extraction use `api`, `default` priced (for other suites).
pub(crate) fn priced_env(api: &FakeApi) -> TestEnv {
    env_for(api, "    price: {input: 2, output: 8}\n")
}
