//! The model client against a real local HTTP server speaking the OpenAI chat API: retries
//! with `Retry-After`, server errors until the retries run out, a reply that never comes, a
//! malformed body, and the provider's own message on a 401 — never the key.

use crate::fake_api::{FakeApi, ok, status};
use std::net::TcpListener;
use std::time::{Duration, Instant};
use uwf::llm::{ChatRequest, Client, ClientOptions, LlmError, Message, Provider};

fn quick() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(5),
        overall_timeout: Duration::from_secs(20),
        max_retries: 3,
        backoff: Duration::from_millis(20),
        max_backoff: Duration::from_secs(5),
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "fake-model".into(),
        messages: vec![
            Message::new("system", "be brief"),
            Message::new("user", "hi"),
        ],
        json_object: true,
        temperature: None,
    }
}

const KEY: &str = "sk-test-SECRET-0123456789";

#[test]
fn a_reply_with_its_usage_and_the_exact_request() {
    let api = FakeApi::start(vec![ok("hello")]);
    let client = Client::new(quick()).expect("client");
    let r = client
        .chat_blocking(&api.provider(KEY), &request())
        .expect("reply");
    assert_eq!(r.content, "hello");
    assert_eq!(
        (r.model.as_str(), r.usage.total_tokens, r.attempts),
        ("fake-1", 9, 1)
    );
    let seen = api.seen.lock().expect("lock");
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(
        seen[0].body,
        r#"{"model":"fake-model","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}"#
    );
}

#[test]
fn a_429_with_retry_after_then_success() {
    let mut limited = status(429, r#"{"error":{"message":"Rate limit reached"}}"#);
    limited.headers.push(("retry-after", "1".into()));
    let api = FakeApi::start(vec![limited, ok("after the wait")]);
    let client = Client::new(quick()).expect("client");
    let t = Instant::now();
    let r = client
        .chat_blocking(&api.provider(KEY), &request())
        .expect("reply");
    assert_eq!((r.content.as_str(), r.attempts), ("after the wait", 2));
    assert!(
        t.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
}

#[test]
fn server_errors_until_the_retries_run_out() {
    let api = FakeApi::start(vec![status(503, r#"{"error":{"message":"overloaded"}}"#)]);
    let client = Client::new(quick()).expect("client");
    let e = client
        .chat_blocking(&api.provider(KEY), &request())
        .unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::Status {
                status: 503,
                attempts: 4,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "fake (fake-model): HTTP 503: overloaded");
    assert_eq!(api.requests(), 4);
}

#[test]
fn a_reply_that_never_comes_hits_the_time_limit() {
    let mut slow = ok("late");
    slow.delay = Duration::from_secs(30);
    let api = FakeApi::start(vec![slow]);
    let opts = ClientOptions {
        request_timeout: Duration::from_millis(300),
        overall_timeout: Duration::from_secs(2),
        max_retries: 1,
        ..quick()
    };
    let t = Instant::now();
    let e = Client::new(opts)
        .expect("client")
        .chat_blocking(&api.provider(KEY), &request())
        .unwrap_err();
    assert!(matches!(e, LlmError::Timeout { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("fake (fake-model): no reply within"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_malformed_body_is_not_retried() {
    let api = FakeApi::start(vec![status(200, "{\"choices\": 42}"), ok("never")]);
    let e = Client::new(quick())
        .expect("client")
        .chat_blocking(&api.provider(KEY), &request())
        .unwrap_err();
    assert!(matches!(e, LlmError::Malformed { .. }), "{e:?}");
    assert_eq!(api.requests(), 1);
}

#[test]
fn a_401_gives_the_providers_message_and_never_the_key() {
    let api = FakeApi::start(vec![status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-tes***6789","type":"invalid_request_error"}}"#,
    )]);
    let e = Client::new(quick())
        .expect("client")
        .chat_blocking(&api.provider(KEY), &request())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "fake (fake-model): HTTP 401: Incorrect API key provided: sk-tes***6789"
    );
    assert!(!e.retryable());
    assert_eq!(api.requests(), 1);
    assert!(!format!("{e} {e:?}").contains(KEY));
}

#[test]
fn a_refused_connection_names_the_url() {
    // A port that was free a moment ago and has no listener now.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let p = Provider {
        name: "local".into(),
        base_url: format!("http://127.0.0.1:{port}/v1"),
        api_key: None,
    };
    let opts = ClientOptions {
        max_retries: 1,
        ..quick()
    };
    let e = Client::new(opts)
        .expect("client")
        .chat_blocking(&p, &request())
        .unwrap_err();
    assert!(matches!(e, LlmError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}
