//! Traces read back from a real trace receiver, Arize Phoenix (PyPI `arize-phoenix`, pinned
//! in `.ci/run`, which installs it into a cache folder and names it in `UWF_PHOENIX`): the test
//! starts `phoenix serve` on free loopback ports with a temporary working directory, runs a
//! debate with the built-in LLM agent against the local model server with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at it, and reads the spans back through Phoenix's
//! REST API. Without Phoenix it says so and passes, unless `CI` is set.

use crate::common::{TestEnv, example, json, p};
use crate::traces::traced;
use crate::usage::{debater_api, priced_env};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uwf::cas::Value;

/// `phoenix`: `UWF_PHOENIX`, else on `PATH`.
fn phoenix_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("UWF_PHOENIX").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join("phoenix"))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `phoenix serve`, killed when dropped.
struct Phoenix {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Phoenix {
    fn start(bin: &PathBuf) -> Phoenix {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(bin)
            .arg("serve")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("DO_NOT_TRACK", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start phoenix serve");
        let ph = Phoenix {
            child,
            port,
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(120);
        while get(port, "/healthz").is_none_or(|(code, _)| code != 200) {
            assert!(Instant::now() < until, "phoenix did not come up in 120 s");
            std::thread::sleep(Duration::from_millis(250));
        }
        ph
    }

    /// The spans of the default project, newest first.
    fn spans(&self) -> Vec<Value> {
        let (code, body) =
            get(self.port, "/v1/projects/default/spans?limit=1000").expect("phoenix answers");
        assert_eq!(code, 200, "{body}");
        json(&body)
            .get("data")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }
}

/// `GET path` on 127.0.0.1:`port`: the status and the body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    Some((code, body))
}

fn unchunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn text(v: &Value, path: &[&str]) -> Option<String> {
    let mut v = v;
    for k in path {
        v = v.get(k)?;
    }
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The attribute `key` of a span as Phoenix gives it (flat keys).
fn attr(span: &Value, key: &str) -> Option<String> {
    text(span.get("attributes")?, &[key])
}

#[test]
fn phoenix_holds_one_trace_per_thread_with_its_steps_and_model_calls() {
    let Some(bin) = phoenix_bin() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "phoenix is missing: .ci/run installs arize-phoenix and sets UWF_PHOENIX"
        );
        eprintln!("skipped: no phoenix (pip install arize-phoenix, or set UWF_PHOENIX)");
        return;
    };
    let phoenix = Phoenix::start(&bin);
    let api = debater_api();
    let env: TestEnv = priced_env(&api);
    let t = env.start(&p(&example("debate.yaml")), "Is Rust better than Go?");
    let endpoint = format!("http://127.0.0.1:{}", phoenix.port);
    let r = traced(&env, &endpoint, &["thread", "step", &t, "--count", "5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Phoenix stores what it received shortly after.
    let until = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let s = phoenix.spans();
        if s.len() >= 9 || Instant::now() > until {
            break s;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let names: Vec<String> = spans.iter().filter_map(|s| text(s, &["name"])).collect();
    assert_eq!(spans.len(), 9, "{names:?}");
    let trace: String = crate::traces::ulid_bytes(&t)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        spans
            .iter()
            .all(|s| text(s, &["context", "trace_id"]).as_deref() == Some(trace.as_str())),
        "one trace, the thread's ULID"
    );
    let steps: Vec<&Value> = spans
        .iter()
        .filter(|s| text(s, &["name"]).is_some_and(|n| n.starts_with("step ")))
        .collect();
    assert_eq!(steps.len(), 2, "{names:?}");
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|s| text(s, &["name"]).is_some_and(|n| n.starts_with("chat ")))
        .collect();
    assert_eq!(calls.len(), 5, "{names:?}");
    let step_ids: Vec<String> = steps
        .iter()
        .filter_map(|s| text(s, &["context", "span_id"]))
        .collect();
    for c in &calls {
        assert!(step_ids.contains(&text(c, &["parent_id"]).unwrap_or_default()));
        assert_eq!(attr(c, "gen_ai.system").as_deref(), Some("fake"));
        assert!(attr(c, "gen_ai.request.model").is_some());
        assert!(attr(c, "gen_ai.usage.input_tokens").is_some());
        assert!(attr(c, "gen_ai.usage.output_tokens").is_some());
    }
    let input: u64 = calls
        .iter()
        .filter_map(|c| attr(c, "gen_ai.usage.input_tokens")?.parse::<u64>().ok())
        .sum();
    let u = json(&env.ok(&["usage", "--thread", &t]));
    assert_eq!(
        Some(input as f64),
        u.get("inputTokens").and_then(Value::as_f64),
        "the calls' tokens are the usage uwf counted"
    );
}
