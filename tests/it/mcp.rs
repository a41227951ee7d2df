//! `uwf mcp` driven by a client nobody here wrote: the official MCP Python SDK (PyPI `mcp`,
//! pinned in `.ci/run`, which installs it into a cache folder and names its Python in
//! `UWF_MCP_PYTHON`) runs a whole debate over stdio (`tests/fixtures/mcp/debate_client.py`).
//! Without it the test says so and passes, unless `CI` is set.

use crate::common::{TestEnv, example, json, uwf_bin};
use std::path::PathBuf;
use uwf::cas::Value;

/// A Python with the MCP SDK: `UWF_MCP_PYTHON`, else `python3` when it has `mcp`; `None`
/// (the test says so and passes) without one, unless `CI` is set.
fn python() -> Option<PathBuf> {
    let found = match std::env::var_os("UWF_MCP_PYTHON").map(PathBuf::from) {
        Some(p) => p.is_file().then_some(p),
        None => std::process::Command::new("python3")
            .args(["-c", "import mcp.client.stdio"])
            .output()
            .is_ok_and(|o| o.status.success())
            .then(|| PathBuf::from("python3")),
    };
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the MCP Python SDK is missing: .ci/run installs mcp and sets UWF_MCP_PYTHON"
        );
        eprintln!("skipped: no MCP Python SDK (pip install mcp, or set UWF_MCP_PYTHON)");
    }
    found
}

fn strs(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_python_sdk_runs_a_debate_through_uwf_mcp() {
    let Some(py) = python() else {
        return;
    };
    let env = TestEnv::new();
    let client =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/debate_client.py");
    let run = std::process::Command::new(py)
        .arg(client)
        .arg(uwf_bin())
        .arg(example("debate.yaml"))
        .arg(example("debate.script.yaml"))
        .env("UWF_HOME", env.root())
        .env("HOME", env.root())
        .envs(env.store_url.iter().map(|u| ("UWF_STORE", u)))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let seen = json(String::from_utf8_lossy(&run.stdout).trim());
    assert_eq!(seen.get("server"), Some(&Value::str("uwf")));
    assert_eq!(
        strs(&seen, "tools"),
        [
            "agent_context",
            "agent_submit",
            "thread_cancel",
            "thread_fork",
            "thread_list",
            "thread_pause",
            "thread_read",
            "thread_resume",
            "thread_show",
            "thread_start",
            "thread_step",
            "thread_steps",
            "usage",
            "workflow_list",
            "workflow_put",
            "workflow_show",
            "workflow_validate"
        ]
    );
    assert_eq!(strs(&seen, "destructive"), ["thread_cancel"]);
    assert!(strs(&seen, "read_only").contains(&"thread_show".to_string()));
    assert!(!strs(&seen, "read_only").contains(&"thread_step".to_string()));
    let schema = seen.get("thread_step_schema").unwrap();
    assert_eq!(schema.get("required").unwrap().to_json(), r#"["thread"]"#);
    // The CLI's own answers: `workflow put`, then the thread to its end.
    let t = seen
        .get("thread")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    assert_eq!(
        seen.get("put").unwrap().get("name"),
        Some(&Value::str("debate"))
    );
    assert_eq!(seen.get("steps"), Some(&Value::Number(3.0)));
    assert_eq!(seen.get("status"), Some(&Value::str("completed")));
    assert_eq!(env.show(&t).get("status"), Some(&Value::str("completed")));
    // The thread as a resource is `thread read`'s markdown.
    assert_eq!(
        seen.get("markdown").and_then(Value::as_str),
        Some(env.ok(&["thread", "read", &t]).as_str())
    );
    assert_eq!(seen.get("mime"), Some(&Value::str("text/markdown")));
    // An arbitrary command is refused, and nothing ran.
    let refused = seen.get("refused").unwrap();
    assert_eq!(refused.get("isError"), Some(&Value::Bool(true)));
    assert!(
        refused
            .get("text")
            .and_then(Value::as_str)
            .unwrap()
            .contains("--allow-commands")
    );
    // Several steps in one call: a state a step, to the end, and a progress note after each.
    assert_eq!(
        seen.get("many").unwrap().to_json(),
        r#"["idle","idle","completed"]"#
    );
    assert_eq!(
        seen.get("progress").unwrap().to_json(),
        r#"[[1,10,"step 1 of 10 done"],[2,10,"step 2 of 10 done"],[3,10,"step 3 of 10 done"]]"#
    );
    // A CLI error is the tool's error, with the CLI's one line.
    let missing = seen.get("missing").unwrap();
    assert_eq!(missing.get("isError"), Some(&Value::Bool(true)));
    assert_eq!(
        missing.get("text").and_then(Value::as_str),
        Some("thread not found: 01JNOSUCHTHREAD00000000000")
    );
}

#[test]
fn mcp_config_prints_each_clients_snippet_with_the_store() {
    let env = TestEnv::new();
    let generic = json(&env.ok(&["mcp", "config"]));
    let server = generic.get("mcpServers").unwrap().get("uwf").unwrap();
    assert_eq!(server.get("args").unwrap().to_json(), r#"["mcp"]"#);
    assert_eq!(
        server
            .get("env")
            .unwrap()
            .get("UWF_HOME")
            .and_then(Value::as_str),
        Some(env.root().to_str().unwrap())
    );
    assert!(
        server
            .get("command")
            .and_then(Value::as_str)
            .unwrap()
            .ends_with("/uwf")
    );
    let claude = env.ok(&["mcp", "config", "--client", "claude-code"]);
    assert!(
        claude.contains("claude mcp add uwf -e UWF_HOME="),
        "{claude}"
    );
    assert!(claude.contains(" mcp\n"), "{claude}");
    // A relative UWF_HOME is given to the client as an absolute path.
    let rel = env
        .cmd()
        .current_dir(env.root().parent().unwrap())
        .env("UWF_HOME", env.root().file_name().unwrap())
        .args(["mcp", "config"])
        .output()
        .unwrap();
    let rel = json(&String::from_utf8_lossy(&rel.stdout));
    assert_eq!(
        rel.get("mcpServers")
            .unwrap()
            .get("uwf")
            .unwrap()
            .get("env")
            .unwrap()
            .get("UWF_HOME")
            .and_then(Value::as_str),
        Some(env.root().to_str().unwrap())
    );
    let cursor = env.ok(&["mcp", "config", "--client", "cursor"]);
    assert!(cursor.contains(".cursor/mcp.json"), "{cursor}");
    let r = env.run(&["mcp", "config", "--client", "vim"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn an_agent_that_speaks_only_mcp_completes_its_role() {
    let Some(py) = python() else {
        return;
    };
    let env = TestEnv::new();
    let t = env.start(
        &crate::common::p(&example("debate.yaml")),
        "Is Rust better than Go?",
    );
    let agent = format!(
        "{} {} {}",
        py.display(),
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mcp/mcp_agent.py")
            .display(),
        uwf_bin().display()
    );
    // `uwf thread step` runs it with UWF_THREAD and UWF_ROLE; it reads its context and
    // submits through `uwf mcp`'s agent_context and agent_submit only.
    let out = json(&env.ok(&["thread", "step", &t, "--agent", &agent]));
    assert_eq!(out.get("done"), Some(&Value::Bool(true)));
    let steps = json(&env.ok(&["thread", "steps", &t]));
    let step = &steps.get("steps").and_then(Value::as_array).unwrap()[1];
    assert_eq!(step.get("role"), Some(&Value::str("against")));
    assert_eq!(
        step.get("output").unwrap().to_json(),
        r#"{"$status":"conceded","argument":"against via mcp"}"#
    );
}

/// `node_modules` holding the MCP TypeScript SDK: `UWF_MCP_NODE_MODULES`; `None` (the test
/// says so and passes) without it, or without `node`, unless `CI` is set.
fn node_modules() -> Option<PathBuf> {
    let found = std::env::var_os("UWF_MCP_NODE_MODULES")
        .map(PathBuf::from)
        .filter(|p| p.join("@modelcontextprotocol/sdk").is_dir())
        .filter(|_| {
            std::process::Command::new("node")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "node or the MCP TypeScript SDK is missing: .ci/run installs it and sets UWF_MCP_NODE_MODULES"
        );
        eprintln!(
            "skipped: no MCP TypeScript SDK (npm install @modelcontextprotocol/sdk, then set UWF_MCP_NODE_MODULES)"
        );
    }
    found
}

/// A `uwf mcp --http` process, killed when dropped.
struct HttpServer(std::process::Child);

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_typescript_sdk_calls_uwf_mcp_over_http_with_the_token_and_is_refused_without() {
    let Some(modules) = node_modules() else {
        return;
    };
    let env = TestEnv::new();
    let mut child = env
        .std_cmd()
        .args(["mcp", "--http"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stderr.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let _server = HttpServer(child);
    // `uwf mcp: serving Streamable HTTP at http://127.0.0.1:PORT/mcp; token T (…)`
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap()
        .trim_end_matches(';')
        .to_string();
    let token = line
        .split_whitespace()
        .skip_while(|w| *w != "token")
        .nth(1)
        .unwrap()
        .to_string();
    assert_eq!(token.len(), 40, "{line}");
    let client =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/http_client.cjs");
    let run = std::process::Command::new("node")
        .arg(client)
        .args([&url, &token])
        .arg(example("debate.yaml"))
        .env("NODE_PATH", &modules)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let seen = json(String::from_utf8_lossy(&run.stdout).trim());
    let refused = seen.get("withoutToken").and_then(Value::as_str).unwrap();
    assert!(refused.contains("a bearer token is required"), "{refused}");
    assert_eq!(strs(&seen, "tools").len(), 17);
    assert_eq!(
        seen.get("startSchema")
            .unwrap()
            .get("required")
            .unwrap()
            .to_json(),
        r#"["workflow","prompt"]"#
    );
    assert_eq!(
        seen.get("workflows").unwrap().to_json(),
        format!(r#"{{"items":{}}}"#, env.ok(&["workflow", "list"]).trim())
    );
    // Only loopback addresses.
    let r = env.run(&["mcp", "--http", "0.0.0.0:0"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("loopback address only"), "{}", r.stderr);
}
