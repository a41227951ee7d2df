//! The model client against a real local HTTP server speaking the OpenAI chat API: retries
//! with `Retry-After`, server errors until the retries run out, a reply that never comes, a
//! malformed body, and the provider's own message on a 401 — never the key.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uwf::llm::{ChatRequest, Client, ClientOptions, LlmError, Message, Provider, Secret};

/// One scripted answer: status, extra headers, body, and a delay before answering.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn ok(content: &str) -> Answer {
    Answer {
        status: 200,
        headers: Vec::new(),
        body: format!(
            r#"{{"model":"fake-1","choices":[{{"index":0,"message":{{"role":"assistant","content":{}}}}}],"usage":{{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}}}"#,
            uwf::cas::Value::str(content).to_json()
        ),
        delay: Duration::ZERO,
    }
}

fn status(code: u16, body: &str) -> Answer {
    Answer {
        status: code,
        headers: Vec::new(),
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

/// A request the server saw.
struct Seen {
    path: String,
    authorization: Option<String>,
    body: String,
}

/// An OpenAI-compatible server on 127.0.0.1 answering from a script, one answer per
/// request (the last one repeats); it stops when dropped.
struct FakeApi {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl FakeApi {
    fn start(script: Vec<Answer>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        listener.set_nonblocking(true).expect("nonblocking");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            let until = Instant::now() + Duration::from_secs(120);
            while !stop2.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < until {
                match listener.accept() {
                    Ok((s, _)) => {
                        let a = script[n.min(script.len() - 1)].clone();
                        n += 1;
                        let seen = seen2.clone();
                        std::thread::spawn(move || serve(s, &a, &seen));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeApi { url, seen, stop }
    }

    fn provider(&self, key: &str) -> Provider {
        Provider {
            name: "fake".into(),
            base_url: self.url.clone(),
            api_key: Some(Secret::new(key)),
        }
    }

    fn requests(&self) -> usize {
        self.seen.lock().expect("lock").len()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn serve(s: TcpStream, a: &Answer, seen: &Mutex<Vec<Seen>>) {
    s.set_nonblocking(false).expect("blocking");
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let mut line = String::new();
    r.read_line(&mut line).expect("request line");
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut len, mut authorization) = (0usize, None);
    loop {
        let mut h = String::new();
        r.read_line(&mut h).expect("header");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').expect("header line");
        match k.to_ascii_lowercase().as_str() {
            "content-length" => len = v.trim().parse().expect("length"),
            "authorization" => authorization = Some(v.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).expect("body");
    seen.lock().expect("lock").push(Seen {
        path,
        authorization,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    std::thread::sleep(a.delay);
    let mut out = format!(
        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        a.status,
        a.body.len()
    );
    for (k, v) in &a.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&a.body);
    let mut s = s;
    let _ = s.write_all(out.as_bytes());
}

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
