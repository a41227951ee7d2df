//! `uwf serve`: a real server process on a free port of 127.0.0.1. The JSON API answers with the
//! CLI's bytes, pages show threads, steps and graphs, a thread's model usage and a workflow's
//! spend per day (from calls to a local model server), the event stream reports steps, the
//! store file is never written; and a headless Chromium driven over WebDriver sees the thread list,
//! a thread's steps and graph, and a step appear without a reload (screenshots in
//! `target/serve-screenshots/`).

use crate::common::{TestEnv, example, fingerprint, json, on_postgres};
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `uwf serve --port 0` process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    /// The token of its URL line (`?token=`).
    pub(crate) token: String,
}

impl Server {
    /// Starts the server in `env`'s root (also its working directory) and waits for the line
    /// naming its URL.
    pub(crate) fn start(env: &TestEnv) -> Server {
        Server::start_with(env, &[])
    }

    /// `start` with more arguments of `uwf serve`.
    pub(crate) fn start_with(env: &TestEnv, more: &[&str]) -> Server {
        Server::start_env(env, more, &[])
    }

    /// `start_with`, the server's environment given `vars` too.
    pub(crate) fn start_env(env: &TestEnv, more: &[&str], vars: &[(&str, &str)]) -> Server {
        let mut child = env
            .std_cmd()
            .args(["serve", "--port", "0"])
            .args(more)
            .envs(vars.iter().copied())
            .current_dir(env.root())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start uwf serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // A warning of a non-loopback address comes first.
        let line = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(30)).ok())
            .find(|l| l.starts_with("serving "))
            .expect("uwf serve prints its URL");
        let (port, token) = line
            .rsplit_once("http://127.0.0.1:")
            .and_then(|(_, rest)| rest.split_once("/?token="))
            .and_then(|(p, t)| Some((p.parse().ok()?, t.to_string())))
            .unwrap_or_else(|| panic!("no URL with a token in {line:?}"));
        assert_eq!(token.len(), 40, "160 bits as hex: {line}");
        Server { child, port, token }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `GET path`: the status and the body.
    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        get(self.port, path)
    }

    /// `GET path`, expecting 200.
    pub(crate) fn ok(&self, path: &str) -> String {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET over a fresh connection: the status and the (de-chunked) body.
fn get(port: u16, path: &str) -> (u16, String) {
    request(port, "GET", path, &[], "")
}

/// An HTTP/1.1 request over a fresh connection (`headers` as `Name: value` lines): the status
/// and the (de-chunked) body.
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read answer");
    let text = String::from_utf8(raw).expect("UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("headers end");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        let mut out = String::new();
        let mut rest = body;
        loop {
            let (size, after) = rest.split_once("\r\n").unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    (status, body)
}

/// The scripted agent for one of the example workflows.
pub(crate) fn agent(env: &TestEnv, script: &str) -> String {
    env.scripted(&example(script))
}

/// A root with both example workflows registered, a finished debate thread and a
/// solve-issue thread two steps in (its reviewer next). Returns (debate, solve) thread ids.
pub(crate) fn setup(env: &TestEnv) -> (String, String) {
    let root = env.root().display().to_string();
    for wf in ["debate.yaml", "solve-issue.yaml"] {
        env.ok(&["workflow", "put", &example(wf).display().to_string()]);
    }
    let start = |wf: &str, prompt: &str| {
        env.ok(&["thread", "start", wf, "-p", prompt, "--cwd", &root, "-q"])
            .trim()
            .to_string()
    };
    let debate = start("debate", "Tabs or spaces?");
    let solve = start("solve-issue", "Fix the parser");
    env.ok(&[
        "thread",
        "step",
        &debate,
        "-c",
        "10",
        "--agent",
        &agent(env, "debate.script.yaml"),
    ]);
    env.ok(&[
        "thread",
        "step",
        &solve,
        "-c",
        "2",
        "--agent",
        &agent(env, "solve-issue.script.yaml"),
    ]);
    (debate, solve)
}

/// `uwf ARGS` run in the root, its stdout.
pub(crate) fn cli(env: &TestEnv, args: &[&str]) -> String {
    let out = env
        .cmd()
        .args(args)
        .current_dir(env.root())
        .output()
        .unwrap();
    assert!(out.status.success(), "uwf {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn api_answers_with_the_cli_bytes() {
    let env = TestEnv::new();
    let (debate, solve) = setup(&env);
    let server = Server::start(&env);
    let same = |path: &str, args: &[&str]| {
        assert_eq!(
            server.ok(path),
            cli(&env, args),
            "GET {path} vs uwf {args:?}"
        );
    };
    same("/api/threads", &["thread", "list", "--all"]);
    same(
        "/api/threads?status=completed",
        &["thread", "list", "--status", "completed"],
    );
    same("/api/threads?status=active", &["thread", "list"]);
    for t in [&debate, &solve] {
        same(&format!("/api/threads/{t}"), &["thread", "show", t]);
        same(&format!("/api/threads/{t}/steps"), &["thread", "steps", t]);
        same(&format!("/api/threads/{t}/read"), &["thread", "read", t]);
        same(
            &format!("/api/threads/{t}/usage"),
            &["usage", "--thread", t],
        );
    }
    same("/api/workflows", &["workflow", "list"]);
    same("/api/workflows/debate", &["workflow", "show", "debate"]);
    same(
        "/api/workflows/debate/history",
        &["workflow", "history", "debate"],
    );
    same(
        "/api/workflows/debate/usage",
        &["usage", "--workflow", "debate", "--by", "day"],
    );
    // Errors: the CLI's JSON error object with a 404 or 400.
    let (status, body) = server.get("/api/threads/06H0BC6VKJH5J4CGMT9MDDFENC");
    assert_eq!(status, 404, "{body}");
    let e = json(&body);
    assert_eq!(
        e.get("error")
            .and_then(|e| e.get("kind"))
            .and_then(|k| k.as_str()),
        Some("not_found"),
        "{body}"
    );
    assert_eq!(server.get("/api/workflows/nope").0, 404);
    assert_eq!(server.get("/api/workflows/nope/usage").0, 404);
    assert_eq!(server.get("/api/threads?status=sleepy").0, 400);
    assert_eq!(server.get("/no/such/page").0, 404);
    // Only loopback names reach a loopback server (no DNS rebinding).
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(
        s,
        "GET /api/threads HTTP/1.1\r\nHost: evil.example:{}\r\nConnection: close\r\n\r\n",
        server.port
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");
    assert!(!answer.contains(&debate), "{answer}");
}

#[test]
fn pages_show_threads_steps_graphs_and_versions() {
    let env = TestEnv::new();
    let (debate, solve) = setup(&env);
    let server = Server::start(&env);
    let list = server.ok("/");
    for (t, status) in [(&debate, "completed"), (&solve, "idle")] {
        assert!(
            list.contains(&format!(r#"data-thread="{t}" data-status="{status}""#)),
            "{list}"
        );
    }
    assert!(list.contains(">reviewer<"), "the current role: {list}");
    // A filter for each of the eight states, and for active ones.
    for status in std::iter::once("active").chain(crate::common::THREAD_STATES) {
        assert!(
            list.contains(&format!(r#"<a href="/?status={status}">{status}</a>"#)),
            "{status}: {list}"
        );
        server.ok(&format!("/?status={status}"));
    }
    let page = server.ok(&format!("/threads/{solve}"));
    assert!(page.contains("<svg"), "a graph: {page}");
    assert!(
        page.contains(r#"class="node role current" data-node="reviewer""#),
        "the current role marked: {page}"
    );
    assert_eq!(page.matches(r#"<tr class="step""#).count(), 2, "{page}");
    assert!(
        page.contains("Added the length check."),
        "an output: {page}"
    );
    // The thread's log events: its start, the moderator's choices, the head moves.
    assert!(
        page.contains(r#"<section class="panel" id="events">"#),
        "{page}"
    );
    assert!(page.contains("<td>thread started</td>"), "{page}");
    assert_eq!(
        page.matches("<td>head moved</td>").count(),
        2,
        "one head move a step: {page}"
    );
    // The conversation is rendered markdown, with raw HTML shown as text.
    assert!(page.contains("<h2>Task</h2>"), "{page}");
    assert!(page.contains("&lt;prompt&gt;"), "{page}");
    // A finished thread marks the end.
    let done = server.ok(&format!("/threads/{debate}"));
    assert!(
        done.contains(r#"class="node terminal current" data-node="$END""#),
        "{done}"
    );
    // The scripted agent calls no model.
    assert!(done.contains("No model calls recorded."), "{done}");
    let wfs = server.ok("/workflows");
    assert!(wfs.contains(r#"href="/workflows/solve-issue""#), "{wfs}");
    assert!(
        wfs.contains("<td>global</td><td>1</td>"),
        "one version: {wfs}"
    );
    let wf = server.ok("/workflows/solve-issue");
    assert!(
        wf.contains("<svg") && wf.contains(r#"class="version current""#),
        "{wf}"
    );
    // Assets are embedded.
    assert!(server.ok("/assets/app.js").contains("EventSource"));
    assert!(server.ok("/assets/style.css").contains("svg.graph"));
}

/// The value of attribute `name` in the first tag of `page` that contains `marker`.
fn attr_in(page: &str, marker: &str, name: &str) -> String {
    let at = page
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in {page}"));
    let tag = &page[page[..=at].rfind('<').unwrap()..];
    let tag = &tag[..tag.find('>').unwrap()];
    let key = format!("{name}=\"");
    let from = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    tag[from..][..tag[from..].find('"').unwrap()].to_string()
}

#[test]
fn pages_show_a_threads_usage_and_a_workflows_spend_per_day() {
    use crate::usage::{PROMPT, debater, env_for};
    let api = debater(None);
    let env = env_for(&api, "    price: {input: 2, output: 8, cachedInput: 0.5}\n");
    env.ok(&[
        "workflow",
        "put",
        &example("debate.yaml").display().to_string(),
    ]);
    let t = env.start("debate", PROMPT);
    let out = env.ok(&["thread", "step", &t, "--count", "5"]);
    assert!(out.contains("\"done\":true"), "{out}");
    let server = Server::start(&env);
    // The API: the CLI's bytes; the thread's own answer is unchanged.
    let thread_usage = cli(&env, &["usage", "--thread", &t]);
    assert_eq!(server.ok(&format!("/api/threads/{t}/usage")), thread_usage);
    assert_eq!(
        server.ok(&format!("/api/threads/{t}")),
        cli(&env, &["thread", "show", &t])
    );
    let days = cli(&env, &["usage", "--workflow", "debate", "--by", "day"]);
    assert_eq!(server.ok("/api/workflows/debate/usage"), days);

    // The thread's page: its calls, tokens and cost (four of the five calls are priced:
    // the extraction's model has no price).
    let u = json(&thread_usage);
    let n = |v: &uwf::cas::Value, k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap();
    assert_eq!(n(&u, "calls"), 5.0);
    let cost = n(&u, "costUsd");
    let page = server.ok(&format!("/threads/{t}"));
    for (class, key) in [
        ("calls", "calls"),
        ("input", "inputTokens"),
        ("output", "outputTokens"),
        ("cached", "cachedInputTokens"),
    ] {
        let cell = format!(r#"<td class="{class}">{}</td>"#, n(&u, key));
        assert!(page.contains(&cell), "{cell}: {page}");
    }
    assert_eq!(
        attr_in(&page, r#"<td class="cost""#, "data-usd"),
        cost.to_string()
    );
    assert!(
        page.contains(&format!(
            "${cost:.4} <span class=\"note\">(4 of 5 calls)</span>"
        )),
        "{page}"
    );
    assert!(page.contains(&format!(r#"href="/api/threads/{t}/usage""#)));

    // The workflow's page: a chart of its one day by cost, with the day's totals below.
    let by = json(&days);
    let day = &by.get("by").and_then(|b| b.as_array()).unwrap()[0];
    let date = day.get("day").and_then(|d| d.as_str()).unwrap().to_string();
    assert_eq!(n(day, "calls"), 5.0);
    let wf = server.ok("/workflows/debate");
    assert!(
        wf.contains(r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart""#),
        "{wf}"
    );
    assert_eq!(attr_in(&wf, r#"class="chart""#, "data-metric"), "cost");
    assert_eq!(wf.matches(r#"<g class="bar""#).count(), 1, "{wf}");
    let bar = attr_in(
        &wf,
        &format!(r#"<g class="bar" data-day="{date}""#),
        "data-value",
    );
    assert!(
        (bar.parse::<f64>().unwrap() - n(day, "costUsd")).abs() < 1e-12,
        "{bar}"
    );
    assert!(
        wf.contains(&format!(">{date}</text>")),
        "the date on the axis: {wf}"
    );
    assert!(wf.contains(">cost (USD)</text>"), "the axis title: {wf}");
    assert!(
        wf.contains(&format!(
            r#"<tr class="day" data-day="{date}"><td>{date}</td><td class="calls">5</td>"#
        )),
        "{wf}"
    );
    assert!(
        wf.contains("<th>Total, 1 day</th><td class=\"calls\">5</td>"),
        "{wf}"
    );
    // A workflow with no calls says so.
    env.ok(&[
        "workflow",
        "put",
        &example("solve-issue.yaml").display().to_string(),
    ]);
    let other = server.ok("/workflows/solve-issue");
    assert!(
        other.contains("No model calls recorded for workflow"),
        "{other}"
    );
    assert!(!other.contains(r#"class="chart""#), "{other}");
}

#[test]
fn events_report_a_step() {
    let env = TestEnv::new();
    let (_, solve) = setup(&env);
    let server = Server::start(&env);
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    // The current version comes at once.
    let mut next_change = || -> String {
        let mut line = String::new();
        let mut event = false;
        loop {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "stream ended");
            if line.trim() == "event: change" {
                event = true;
            } else if event && let Some(d) = line.trim().strip_prefix("data: ") {
                return d.to_string();
            }
        }
    };
    let first = next_change();
    env.ok(&[
        "thread",
        "step",
        &solve,
        "--agent",
        &agent(&env, "solve-issue.script.yaml"),
    ]);
    let second = next_change();
    assert_ne!(first, second);
}

#[test]
fn browsing_never_writes_the_store() {
    let env = TestEnv::new();
    let (debate, solve) = setup(&env);
    let before = fingerprint(&env.db());
    let modified = std::fs::metadata(env.db()).unwrap().modified().unwrap();
    let server = Server::start(&env);
    for path in [
        "/".to_string(),
        "/?status=active".to_string(),
        format!("/threads/{debate}"),
        format!("/threads/{solve}"),
        "/workflows".to_string(),
        "/workflows/debate".to_string(),
        "/api/threads".to_string(),
        format!("/api/threads/{solve}/steps"),
        format!("/api/threads/{solve}/read"),
        "/api/workflows/solve-issue/history".to_string(),
        format!("/api/threads/{debate}/usage"),
        "/api/workflows/debate/usage".to_string(),
        "/runs".to_string(),
        "/api/runs".to_string(),
    ] {
        server.ok(&path);
    }
    drop(server);
    assert_eq!(fingerprint(&env.db()), before);
    assert_eq!(
        std::fs::metadata(env.db()).unwrap().modified().unwrap(),
        modified
    );
}

impl Server {
    /// `POST path` with `headers`: the status and the body.
    pub(crate) fn post(&self, path: &str, headers: &[&str], body: &str) -> (u16, String) {
        request(self.port, "POST", path, headers, body)
    }

    /// `POST path` with the token from the page's own origin, expecting 200.
    pub(crate) fn act(&self, path: &str, body: &str) -> String {
        let token = format!("X-Uwf-Token: {}", self.token);
        let origin = format!("Origin: http://127.0.0.1:{}", self.port);
        let (status, out) = self.post(path, &[&token, &origin], body);
        assert_eq!(status, 200, "POST {path}: {out}");
        out
    }
}

/// A JSON answer as a `serde_json::Value`.
pub(crate) fn value(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// A thread's status as `uwf thread show` says it.
pub(crate) fn status(env: &TestEnv, thread: &str) -> String {
    value(&cli(env, &["thread", "show", thread]))["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Writes need the token and the page's own origin; with both, pause, resume, cancel and a
/// start answer the CLI's bytes and change what `thread show` says.
#[test]
fn writes_need_the_token_and_act_as_the_cli() {
    let env = TestEnv::new();
    let (_, solve) = setup(&env);
    let server = Server::start(&env);
    let pause = format!("/api/threads/{solve}/pause");
    assert_eq!(status(&env, &solve), "idle");
    // The file's bytes where the store is a file (on a server, what `thread show` says).
    let before = (!on_postgres()).then(|| fingerprint(&env.db()));
    // No token, a wrong one, a foreign origin: refused, nothing written.
    let (code, body) = server.post(&pause, &[], "");
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("X-Uwf-Token"), "{body}");
    let (code, _) = server.post(&pause, &["X-Uwf-Token: 00"], "");
    assert_eq!(code, 403);
    let token = format!("X-Uwf-Token: {}", server.token);
    let (code, body) = server.post(&pause, &[&token, "Origin: http://evil.example"], "");
    assert_eq!(code, 403, "{body}");
    assert_eq!(status(&env, &solve), "idle");
    if let Some(before) = before {
        assert_eq!(fingerprint(&env.db()), before);
    }
    // Pause and resume answer what `thread show` prints afterwards.
    let out = server.act(&pause, "");
    assert_eq!(status(&env, &solve), "paused");
    assert_eq!(out, cli(&env, &["thread", "show", &solve]));
    // No Origin (a script, curl) with the token is let through.
    let (code, out) = server.post(&format!("/api/threads/{solve}/resume"), &[&token], "");
    assert_eq!(code, 200, "{out}");
    assert_eq!(status(&env, &solve), "idle");
    assert_eq!(out, cli(&env, &["thread", "show", &solve]));
    // A start from the workflow's endpoint; an unknown workflow is a 404 with the error.
    let root = env.root().display().to_string();
    let body = serde_json::json!({ "prompt": "-- Fix the lexer", "cwd": root }).to_string();
    let started = value(&server.act("/api/workflows/solve-issue/threads", &body));
    let new = started["thread"].as_str().expect("a thread id").to_string();
    assert_eq!(status(&env, &new), "idle");
    let read = cli(&env, &["thread", "read", &new]);
    assert!(read.contains("-- Fix the lexer"), "{read}");
    let (code, body) = server.post(
        "/api/workflows/nope/threads",
        &[&token],
        r#"{"prompt":"x"}"#,
    );
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("nope"), "{body}");
    // Cancel: the thread is archived as cancelled.
    let out = value(&server.act(&format!("/api/threads/{new}/cancel"), ""));
    assert_eq!(out["cancelled"], true);
    assert_eq!(status(&env, &new), "cancelled");
    // Reads on loopback stay open; the pages have the actions.
    server.ok(&format!("/api/threads/{solve}"));
    let page = server.ok(&format!("/threads/{solve}"));
    for act in ["pause", "resume", "cancel", "step"] {
        assert!(page.contains(&format!("data-act=\"{act}\"")), "{act}");
    }
    let page = server.ok("/workflows/solve-issue");
    assert!(page.contains(r#"id="start-thread" data-workflow="solve-issue""#));
}

/// Off loopback every request but the assets needs the token (`?token=` or the header).
#[test]
fn off_loopback_reads_need_the_token() {
    let env = TestEnv::new();
    let (_, solve) = setup(&env);
    let server = Server::start_with(&env, &["--bind", "0.0.0.0"]);
    let (code, body) = server.get("/");
    assert_eq!(code, 403, "{body}");
    let (code, _) = server.get(&format!("/api/threads/{solve}"));
    assert_eq!(code, 403);
    let (code, _) = server.get("/?token=wrong");
    assert_eq!(code, 403);
    server.ok(&format!("/?token={}", server.token));
    let token = format!("X-Uwf-Token: {}", server.token);
    let (code, body) = request(
        server.port,
        "GET",
        &format!("/api/threads/{solve}"),
        &[&token],
        "",
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, cli(&env, &["thread", "show", &solve]));
    server.ok("/assets/app.js");
}

#[test]
fn no_store_or_a_damaged_one_is_a_one_line_error() {
    let env = TestEnv::new();
    let r = env.fails(&["serve", "--port", "0"], "no store at");
    assert_eq!(r.code, 3);
    assert!(!env.db().exists(), "serve creates no store");
    std::fs::write(env.db(), vec![0x5a; 4096]).unwrap();
    let before = fingerprint(&env.db());
    let r = env.fails(&["serve", "--port", "0"], "uwf.redb");
    assert_eq!(r.code, 65);
    assert_eq!(fingerprint(&env.db()), before);
}

// ---- the headless browser ----

/// Chromium and chromedriver, or `None` (with a note) when either is missing outside CI.
pub(crate) fn browser() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
    };
    match (find("chromium"), find("chromedriver")) {
        (Some(c), Some(d)) => Some((c, d)),
        _ if std::env::var_os("CI").is_some() => panic!(
            "the browser test needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)"
        ),
        _ => {
            eprintln!(
                "note: chromium or chromedriver not found; the browser test of uwf serve is skipped (apt-get install chromium chromium-driver)"
            );
            None
        }
    }
}

/// A free port of 127.0.0.1 (bound, then released).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process killed when dropped.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where the browser test writes its screenshots.
pub(crate) fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("serve-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `f` with a WebDriver session of a headless Chromium (1280×1500), on a runtime of its
/// own; does nothing (with a note) when Chromium or chromedriver is missing outside CI.
pub(crate) fn with_browser<F, Fut>(f: F)
where
    F: FnOnce(fantoccini::Client) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let dport = free_port();
    // Chromium's profile and scratch folders, removed with the session (after the driver).
    let scratch = tempfile::tempdir().expect("tempdir");
    let _driver = Killed(
        Command::new(&driver)
            .arg(format!("--port={dport}"))
            .arg("--allowed-ips=127.0.0.1")
            .env("TMPDIR", scratch.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", dport)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1500",
                         format!("--user-data-dir={}", scratch.path().join("profile").display())],
            }),
        );
        let c = fantoccini::ClientBuilder::new(
            hyper_util::client::legacy::connect::HttpConnector::new(),
        )
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{dport}"))
        .await
        .expect("a WebDriver session");
        f(c.clone()).await;
        c.close().await.unwrap();
    });
}

#[test]
fn a_browser_sees_threads_steps_graph_and_a_new_step_without_reload() {
    let env = TestEnv::new();
    let (debate, solve) = setup(&env);
    let server = Server::start(&env);
    let shots = screenshot_dir();
    with_browser(|c| async move {
        use fantoccini::Locator;
        let count = |css: &'static str| {
            let c = c.clone();
            async move {
                c.execute(
                    &format!("return document.querySelectorAll({css:?}).length"),
                    vec![],
                )
                .await
                .unwrap()
                .as_u64()
                .unwrap()
            }
        };
        // Read in one script run: the page may swap its <main> between two WebDriver calls.
        let attr = |css: String, name: &'static str| {
            let c = c.clone();
            async move {
                let v = c
                    .execute(
                        "const e = document.querySelector(arguments[0]); \
                         return e ? e.getAttribute(arguments[1]) : null",
                        vec![css.clone().into(), name.into()],
                    )
                    .await
                    .unwrap();
                v.as_str().map(str::to_string)
            }
        };
        let text = |css: String| {
            let c = c.clone();
            async move {
                let v = c
                    .execute(
                        "const e = document.querySelector(arguments[0]); \
                         return e ? e.textContent : null",
                        vec![css.clone().into()],
                    )
                    .await
                    .unwrap();
                v.as_str().map(str::to_string)
            }
        };
        // Waits until `css` matches `n` elements (the page updates itself).
        let wait_count = |css: &'static str, n: u64| {
            let count = &count;
            async move {
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    let k = count(css).await;
                    if k == n {
                        return;
                    }
                    assert!(Instant::now() < deadline, "{css}: {k} elements, not {n}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        let wait_live = || {
            let c = c.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    let t = c
                        .find(Locator::Id("live"))
                        .await
                        .unwrap()
                        .text()
                        .await
                        .unwrap();
                    if t == "live" {
                        return;
                    }
                    assert!(Instant::now() < deadline, "the event stream did not open");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };

        // The thread list: each thread with its state.
        c.goto(&server.url("/")).await.unwrap();
        wait_count("tr.thread", 2).await;
        for (t, status) in [(&debate, "completed"), (&solve, "idle")] {
            let row = format!("tr[data-thread='{t}']");
            assert_eq!(
                attr(row.clone(), "data-status").await.as_deref(),
                Some(status)
            );
            assert_eq!(
                text(format!("{row} .status")).await.as_deref(),
                Some(status)
            );
        }
        std::fs::write(shots.join("threads.png"), c.screenshot().await.unwrap()).unwrap();

        // A thread: its steps and its graph with the reviewer marked.
        c.goto(&server.url(&format!("/threads/{solve}")))
            .await
            .unwrap();
        wait_count("tr.step", 2).await;
        wait_count("svg.graph .node", 5).await;
        assert_eq!(
            attr("svg.graph .node.current".into(), "data-node")
                .await
                .as_deref(),
            Some("reviewer")
        );
        // A step taken while the page is open appears without a reload.
        wait_live().await;
        c.execute("window.notReloaded = true", vec![])
            .await
            .unwrap();
        let out = cli(
            &env,
            &[
                "thread",
                "step",
                &solve,
                "--agent",
                &agent(&env, "solve-issue.script.yaml"),
            ],
        );
        assert!(out.contains("\"currentRole\":\"developer\""), "{out}");
        wait_count("tr.step", 3).await;
        assert_eq!(
            attr("svg.graph .node.current".into(), "data-node")
                .await
                .as_deref(),
            Some("developer")
        );
        assert_eq!(
            c.execute("return window.notReloaded === true", vec![])
                .await
                .unwrap(),
            serde_json::Value::Bool(true),
            "the page was not reloaded"
        );
        std::fs::write(shots.join("thread.png"), c.screenshot().await.unwrap()).unwrap();

        // Pause from the page (the token of the URL line): the status changes live, and the
        // page says what the action did.
        c.goto(&server.url(&format!("/threads/{solve}?token={}", server.token)))
            .await
            .unwrap();
        wait_live().await;
        wait_count("#actions button[data-act]", 4).await;
        c.execute(
            "document.querySelector(\"button[data-act='pause']\").click()",
            vec![],
        )
        .await
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while attr("#summary".into(), "data-status").await.as_deref() != Some("paused") {
            assert!(Instant::now() < deadline, "the page did not show the pause");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let said = text("#action-result".into()).await.unwrap_or_default();
        assert!(said.contains("status paused"), "{said}");
        assert_eq!(status(&env, &solve), "paused");
        std::fs::write(
            shots.join("thread-actions.png"),
            c.screenshot().await.unwrap(),
        )
        .unwrap();

        // The list follows too.
        c.goto(&server.url("/")).await.unwrap();
        wait_live().await;
        cli(&env, &["thread", "kill", &solve]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while attr(format!("tr[data-thread='{solve}']"), "data-status")
            .await
            .as_deref()
            != Some("cancelled")
        {
            assert!(Instant::now() < deadline, "the list did not show the kill");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // Workflows, and one with its graph and versions.
        c.goto(&server.url("/workflows")).await.unwrap();
        wait_count("tr.workflow", 2).await;
        std::fs::write(shots.join("workflows.png"), c.screenshot().await.unwrap()).unwrap();
        c.goto(&server.url("/workflows/debate")).await.unwrap();
        wait_count("svg.graph", 1).await;
        wait_count("tr.version", 1).await;
        std::fs::write(shots.join("workflow.png"), c.screenshot().await.unwrap()).unwrap();
        for f in [
            "threads.png",
            "thread.png",
            "thread-actions.png",
            "workflows.png",
            "workflow.png",
        ] {
            let b = std::fs::read(shots.join(f)).unwrap();
            assert!(b.starts_with(b"\x89PNG"), "{f} is a PNG");
        }
    });
}

/// A step from the page's API runs in the background with the configured agent: the answer
/// comes at once, the head moves soon after.
#[test]
fn a_step_from_the_api_runs_with_the_configured_agent() {
    let env = TestEnv::new();
    let (debate, solve) = setup(&env);
    let command = agent(&env, "solve-issue.script.yaml");
    std::fs::write(
        env.root().join("config.yaml"),
        format!(
            "agents:\n  scripted:\n    command: {}\n    args: {}\ndefaultAgent: scripted\n",
            serde_json::Value::String(command.split_whitespace().next().unwrap().into()),
            serde_json::Value::Array(
                command
                    .split_whitespace()
                    .skip(1)
                    .map(|a| serde_json::Value::String(a.into()))
                    .collect()
            )
        ),
    )
    .unwrap();
    let head = value(&cli(&env, &["thread", "show", &solve]))["head"].clone();
    let server = Server::start(&env);
    let out = value(&server.act(&format!("/api/threads/{solve}/step"), ""));
    assert_eq!(out["thread"], serde_json::Value::String(solve.clone()));
    assert_eq!(out["started"], serde_json::Value::Bool(true));
    let until = Instant::now() + Duration::from_secs(30);
    while value(&cli(&env, &["thread", "show", &solve]))["head"] == head {
        assert!(Instant::now() < until, "the step did not run");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Not for a thread that does not exist.
    let token = format!("X-Uwf-Token: {}", server.token);
    let origin = format!("Origin: http://127.0.0.1:{}", server.port);
    let (code, body) = server.post(
        "/api/threads/01JNOSUCHTHREAD00000000000/step",
        &[&token, &origin],
        "",
    );
    assert_eq!(code, 404, "{body}");
    // Nor for one that has ended.
    let (code, body) = server.post(
        &format!("/api/threads/{debate}/step"),
        &[&token, &origin],
        "",
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("has ended"), "{body}");
}
