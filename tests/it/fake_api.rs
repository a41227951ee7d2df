//! An OpenAI-compatible `/chat/completions` server on 127.0.0.1 for tests: it answers from a
//! script (one answer per request, the last one repeating) or from a function of the request,
//! records what it was sent, and stops when dropped (or after two minutes).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uwf::llm::{Provider, Secret};

/// One scripted answer: status, extra headers, body, and a delay before answering.
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub delay: Duration,
}

pub fn ok(content: &str) -> Answer {
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

pub fn status(code: u16, body: &str) -> Answer {
    Answer {
        status: code,
        headers: Vec::new(),
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

/// A request the server saw.
pub struct Seen {
    pub path: String,
    pub authorization: Option<String>,
    pub body: String,
}

/// An OpenAI-compatible server on 127.0.0.1 answering from a script, one answer per
/// request (the last one repeats); it stops when dropped.
pub struct FakeApi {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

/// Picks the answer to a request: its body and how many requests came before it.
pub type Responder = Arc<dyn Fn(&str, usize) -> Answer + Send + Sync>;

impl FakeApi {
    /// A server answering from `script`, one answer per request, the last one repeating.
    pub fn start(script: Vec<Answer>) -> FakeApi {
        FakeApi::with(Arc::new(move |_, n| {
            script[n.min(script.len() - 1)].clone()
        }))
    }

    /// A server answering each request with `respond(body, n)`.
    pub fn with(respond: Responder) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        listener.set_nonblocking(true).expect("nonblocking");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let n = Arc::new(Mutex::new(0usize));
            let until = Instant::now() + Duration::from_secs(120);
            while !stop2.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < until {
                match listener.accept() {
                    Ok((s, _)) => {
                        let (seen, respond, n) = (seen2.clone(), respond.clone(), n.clone());
                        std::thread::spawn(move || serve(s, &*respond, &n, &seen));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeApi { url, seen, stop }
    }

    /// The request bodies seen so far, in order.
    pub fn bodies(&self) -> Vec<String> {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .map(|s| s.body.clone())
            .collect()
    }

    pub fn provider(&self, key: &str) -> Provider {
        Provider {
            name: "fake".into(),
            base_url: self.url.clone(),
            api_key: Some(Secret::new(key)),
        }
    }

    pub fn requests(&self) -> usize {
        self.seen.lock().expect("lock").len()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn serve(
    s: TcpStream,
    respond: &(dyn Fn(&str, usize) -> Answer + Send + Sync),
    n: &Mutex<usize>,
    seen: &Mutex<Vec<Seen>>,
) {
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
    let a = {
        let mut n = n.lock().expect("lock");
        let text = String::from_utf8_lossy(&body).into_owned();
        let a = respond(&text, *n);
        *n += 1;
        a
    };
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
