//! Traces: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the steps of a debate run by the built-in LLM
//! agent against the local model server reach an OTLP/HTTP receiver as one trace per thread:
//! a span a step, a child for the agent and one for each model call with the GenAI attributes.
//! The receiver here is the test's own loopback server, decoding the protobuf uwf sent;
//! `phoenix.rs` sends the same to Arize Phoenix.

use crate::common::{Run, TestEnv, example, json, p};
use crate::usage::{debater_api, priced_env};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROMPT: &str = "Is Rust better than Go?";

/// An OTLP/HTTP receiver on 127.0.0.1 that keeps the bodies it was sent (`POST /v1/traces`,
/// protobuf) and answers 200; it stops after two minutes.
pub(crate) struct Receiver {
    pub url: String,
    pub bodies: Arc<Mutex<Vec<Request>>>,
}

/// A request's path and body.
type Request = (String, Vec<u8>);

impl Receiver {
    pub(crate) fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            while Instant::now() < until {
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        let kept = kept.clone();
                        std::thread::spawn(move || serve(s, &kept));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Receiver { url, bodies }
    }

    /// The spans received, with the names of the attributes and their values as text.
    pub(crate) fn spans(&self) -> Vec<Span> {
        let mut out = Vec::new();
        for (path, b) in self.bodies.lock().unwrap().iter() {
            assert_eq!(path, "/v1/traces");
            let req = ExportTraceServiceRequest::decode(b.as_slice()).expect("OTLP protobuf");
            for rs in req.resource_spans {
                for ss in rs.scope_spans {
                    out.extend(ss.spans);
                }
            }
        }
        out
    }
}

/// Answers the requests of one connection (kept alive) until it closes.
fn serve(s: std::net::TcpStream, kept: &Mutex<Vec<Request>>) {
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        kept.lock().unwrap().push((path, body));
        let _ = w.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
        );
    }
}

/// The value of attribute `key` of `s`, as text.
pub(crate) fn attr(s: &Span, key: &str) -> Option<String> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            AnyValue::IntValue(i) => i.to_string(),
            AnyValue::DoubleValue(d) => d.to_string(),
            AnyValue::BoolValue(b) => b.to_string(),
            other => format!("{other:?}"),
        })
}

/// The 128 bits of a ULID thread id, big-endian, as OTLP carries a trace id.
pub(crate) fn ulid_bytes(t: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let v = t.bytes().fold(0u128, |acc, c| {
        acc * 32 + ALPHABET.iter().position(|&a| a == c).unwrap() as u128
    });
    v.to_be_bytes().to_vec()
}

/// `uwf` with traces sent to `endpoint`.
pub(crate) fn traced(env: &TestEnv, endpoint: &str, args: &[&str]) -> Run {
    let out = env
        .cmd()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .args(args)
        .output()
        .unwrap();
    Run::from(out)
}

#[test]
fn each_threads_steps_and_model_calls_reach_the_receiver_as_one_trace() {
    let rx = Receiver::start();
    let api = debater_api();
    let env = priced_env(&api);
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    let other = env.start(&p(&example("debate.yaml")), PROMPT);
    let began = Instant::now();
    let r = traced(&env, &rx.url, &["thread", "step", &t, "--count", "5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Flushed at exit: everything is there when the process has ended, and quickly.
    assert!(began.elapsed() < Duration::from_secs(10));
    let spans = rx.spans();
    let steps: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("step"))
        .collect();
    assert_eq!(
        steps.len(),
        2,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let trace = ulid_bytes(&t);
    assert!(
        spans.iter().all(|s| s.trace_id == trace),
        "one trace, the thread's"
    );
    assert_eq!(attr(steps[0], "uwf.role").as_deref(), Some("against"));
    assert_eq!(attr(steps[1], "uwf.role").as_deref(), Some("for"));
    assert_eq!(attr(steps[1], "uwf.outcome").as_deref(), Some("completed"));
    assert_eq!(attr(steps[0], "uwf.workflow").as_deref(), Some("debate"));
    assert_eq!(attr(steps[0], "uwf.thread").as_deref(), Some(t.as_str()));
    let heads = json(&env.ok(&["thread", "steps", &t]));
    let first_step = heads.get("steps").and_then(|s| s.as_array()).unwrap()[1]
        .get("hash")
        .and_then(|h| h.as_str())
        .unwrap()
        .to_string();
    assert_eq!(attr(steps[0], "uwf.head"), Some(first_step));
    // The model calls: against's three and the extraction's, then for's; children of their
    // step, with the GenAI attributes and the usage the server returned.
    let calls: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(calls.len(), 5);
    let under = |step: &Span| {
        calls
            .iter()
            .filter(|c| c.parent_span_id == step.span_id)
            .count()
    };
    assert_eq!((under(steps[0]), under(steps[1])), (4, 1));
    let first = calls
        .iter()
        .find(|c| attr(c, "gen_ai.usage.input_tokens").as_deref() == Some("100"))
        .expect("the first call");
    assert_eq!(attr(first, "gen_ai.system").as_deref(), Some("fake"));
    assert_eq!(
        attr(first, "gen_ai.request.model").as_deref(),
        Some("default")
    );
    assert_eq!(
        attr(first, "gen_ai.usage.output_tokens").as_deref(),
        Some("5")
    );
    let agents: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("agent "))
        .collect();
    assert_eq!(agents.len(), 2);
    assert_eq!(agents[0].name, "agent uwf-llm");
    // Ids, names, outcomes and usage: never the prompt or an output.
    for (_, b) in rx.bodies.lock().unwrap().iter() {
        let text = String::from_utf8_lossy(b);
        assert!(!text.contains("Rust better"), "the prompt was sent");
        assert!(!text.contains("fair point"), "an output was sent");
        assert!(!text.contains("sk-test"), "the key was sent");
    }
    // Another thread: another trace.
    let r = traced(&env, &rx.url, &["thread", "step", &other]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(rx.spans().iter().any(|s| s.trace_id == ulid_bytes(&other)));
}

#[test]
fn an_unreachable_receiver_never_fails_or_holds_up_a_step() {
    let api = debater_api();
    let env = priced_env(&api);
    let t = env.start(&p(&example("debate.yaml")), PROMPT);
    // A port nothing listens on.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let began = Instant::now();
    let r = traced(&env, &dead, &["thread", "step", &t, "--count", "5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\"done\":true"), "{}", r.stdout);
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    // Off without the variable: nothing is sent anywhere (the run above already proved the
    // steps do not depend on it).
    let rx = Receiver::start();
    let t2 = env.start(&p(&example("debate.yaml")), PROMPT);
    env.ok(&["thread", "step", &t2]);
    std::thread::sleep(Duration::from_millis(200));
    assert!(rx.bodies.lock().unwrap().is_empty());
}
