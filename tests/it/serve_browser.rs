//! `uwf serve` in a headless Chromium driven over WebDriver (the helpers the browser tests
//! share, and the tests of the pages' writes): resume from a thread's page changes its status
//! live, a thread started from a workflow's form is stored, a write without the token is
//! refused with 403 and one from another origin is refused, neither changing anything.

use crate::common::TestEnv;
use crate::serve::{Server, cli, setup, status, value, with_browser};
use fantoccini::{Client, Locator};
use std::future::Future;
use std::time::{Duration, Instant};

/// What `script` returns (its `arguments` are `args`), run in the page in one go: the page
/// may swap its `<main>` between two WebDriver calls.
pub(crate) async fn js(
    c: &Client,
    script: &str,
    args: Vec<serde_json::Value>,
) -> serde_json::Value {
    c.execute(script, args).await.unwrap()
}

/// How many elements `css` matches.
pub(crate) async fn count(c: &Client, css: &str) -> u64 {
    js(
        c,
        "return document.querySelectorAll(arguments[0]).length",
        vec![css.into()],
    )
    .await
    .as_u64()
    .unwrap()
}

/// Attribute `name` of the first element `css` matches.
pub(crate) async fn attr(c: &Client, css: &str, name: &str) -> Option<String> {
    js(
        c,
        "const e = document.querySelector(arguments[0]); \
         return e ? e.getAttribute(arguments[1]) : null",
        vec![css.into(), name.into()],
    )
    .await
    .as_str()
    .map(str::to_string)
}

/// The text of the first element `css` matches.
pub(crate) async fn text(c: &Client, css: &str) -> Option<String> {
    js(
        c,
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null",
        vec![css.into()],
    )
    .await
    .as_str()
    .map(str::to_string)
}

/// Waits (10 s at most) until `ok` holds of what `read` gives; returns that.
pub(crate) async fn wait_for<T: std::fmt::Debug, R: Future<Output = T>>(
    what: &str,
    mut read: impl FnMut() -> R,
    ok: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = read().await;
        if ok(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: still {v:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the page's event stream is open (the page then follows the store).
pub(crate) async fn wait_live(c: &Client) {
    wait_for(
        "the event stream to open",
        || async {
            c.find(Locator::Id("live"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        },
        |t| t == "live",
    )
    .await;
}

/// Marks the page, to tell later that it was not loaded again.
pub(crate) async fn mark_page(c: &Client) {
    js(c, "window.notReloaded = true", vec![]).await;
}

/// Whether the page marked by [`mark_page`] is still the one shown.
pub(crate) async fn not_reloaded(c: &Client) -> bool {
    js(c, "return window.notReloaded === true", vec![]).await == serde_json::Value::Bool(true)
}

/// A page of another origin: a server on a port of its own that answers every request with
/// an empty page, for as long as the test runs. Returns its URL.
fn other_origin() -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/", l.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let body = "<!doctype html><title>elsewhere</title><p>another site</p>";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn a_browser_resumes_starts_and_is_refused_without_the_token_or_from_another_origin() {
    let env = TestEnv::new();
    let (_, solve) = setup(&env);
    let server = Server::start(&env);
    cli(&env, &["thread", "pause", &solve]);
    let threads_before = cli(&env, &["thread", "list", "--all"]);
    with_browser(|c| async move {
        // Resume from the thread's page: the status changes without a reload.
        c.goto(&server.url(&format!("/threads/{solve}?token={}", server.token)))
            .await
            .unwrap();
        wait_live(&c).await;
        assert_eq!(
            attr(&c, "#summary", "data-status").await.as_deref(),
            Some("paused")
        );
        mark_page(&c).await;
        js(
            &c,
            "document.querySelector(\"button[data-act='resume']\").click()",
            vec![],
        )
        .await;
        wait_for(
            "the page to show the thread idle",
            || attr(&c, "#summary", "data-status"),
            |s| s.as_deref() == Some("idle"),
        )
        .await;
        let said = text(&c, "#action-result").await.unwrap_or_default();
        assert!(said.contains("status idle"), "{said}");
        assert!(not_reloaded(&c).await);
        assert_eq!(status(&env, &solve), "idle");

        // Start a thread from the workflow's form.
        c.goto(&server.url("/workflows/solve-issue")).await.unwrap();
        wait_live(&c).await;
        js(
            &c,
            "document.getElementById('start-prompt').value = 'Fix the lexer, from the form'; \
             document.querySelector('#start-thread button[type=submit]').click()",
            vec![],
        )
        .await;
        let said = wait_for(
            "the form to say which thread started",
            || text(&c, "#action-result"),
            |t| t.as_deref().is_some_and(|t| t.contains("Start: thread ")),
        )
        .await
        .unwrap();
        let started = said
            .split("thread ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap()
            .to_string();
        assert_eq!(status(&env, &started), "idle");
        let read = cli(&env, &["thread", "read", &started]);
        assert!(read.contains("Fix the lexer, from the form"), "{read}");
        assert_eq!(
            attr(&c, "#action-result a", "href").await,
            Some(format!("/threads/{started}"))
        );
        let before = cli(&env, &["thread", "list", "--all"]);
        assert_ne!(before, threads_before);

        // Without the token (a new tab's storage, a page opened without `?token=`): the
        // browser's write is refused with 403 and changes nothing.
        js(&c, "sessionStorage.clear()", vec![]).await;
        c.goto(&server.url(&format!("/threads/{solve}")))
            .await
            .unwrap();
        wait_live(&c).await;
        let answer = js(
            &c,
            "return fetch(arguments[0], {method: 'POST'}) \
               .then(r => r.text().then(t => [r.status, t]))",
            vec![format!("/api/threads/{solve}/pause").into()],
        )
        .await;
        assert_eq!(answer[0], 403, "{answer}");
        assert!(
            answer[1].as_str().unwrap().contains("X-Uwf-Token"),
            "{answer}"
        );
        // The button says so too: no token to send.
        js(
            &c,
            "document.querySelector(\"button[data-act='pause']\").click()",
            vec![],
        )
        .await;
        let said = text(&c, "#action-result").await.unwrap_or_default();
        assert!(said.contains("no token"), "{said}");
        // A wrong one: the server's 403 is shown.
        js(&c, "sessionStorage.setItem('uwf-token', '00')", vec![]).await;
        c.goto(&server.url(&format!("/threads/{solve}")))
            .await
            .unwrap();
        wait_live(&c).await;
        js(
            &c,
            "document.querySelector(\"button[data-act='pause']\").click()",
            vec![],
        )
        .await;
        wait_for(
            "the page to show the refusal",
            || text(&c, "#action-result"),
            |t| t.as_deref().is_some_and(|t| t.contains("failed (403)")),
        )
        .await;
        assert_eq!(status(&env, &solve), "idle");

        // Another origin (another port): a page there that knows the token posts to the
        // view; the server refuses it (the browser shows that page nothing of the answer),
        // and nothing changes.
        let other = other_origin();
        c.goto(&other).await.unwrap();
        let answer = js(
            &c,
            "return fetch(arguments[0], {method: 'POST', mode: 'no-cors', body: 'x'}) \
               .then(r => r.type, e => 'error: ' + e)",
            vec![
                format!(
                    "http://127.0.0.1:{}/api/threads/{solve}/pause?token={}",
                    server.port, server.token
                )
                .into(),
            ],
        )
        .await;
        assert_eq!(answer, "opaque", "{answer}");
        // With the token in the header, the browser asks first (CORS), is not allowed, and
        // sends no write.
        let answer = js(
            &c,
            "return fetch(arguments[0], {method: 'POST', headers: {'X-Uwf-Token': arguments[1]}}) \
               .then(r => 'answered ' + r.status, e => 'blocked')",
            vec![
                format!("http://127.0.0.1:{}/api/threads/{solve}/pause", server.port).into(),
                server.token.clone().into(),
            ],
        )
        .await;
        assert_eq!(answer, "blocked", "{answer}");
        assert_eq!(status(&env, &solve), "idle");
        assert_eq!(cli(&env, &["thread", "list", "--all"]), before);
        let shown = value(&cli(&env, &["thread", "show", &solve]));
        assert_eq!(shown["status"], "idle");
    });
}
