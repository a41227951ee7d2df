//! The view's writes: `POST /api/threads/{id}/{pause,resume,cancel,step}` and
//! `POST /api/workflows/{name}/threads`, each run as this binary (`uwf thread …`) with the
//! server's environment, answering the command's output; and the guard every request passes
//! (the token, the origin of a write).
//!
//! Invariants: the server never opens the store for writing, the child process does; a write
//! needs the process's token in `X-Uwf-Token` and an `Origin` that is absent or the page's
//! own; on a non-loopback address every request but the static assets needs the token.

use super::app::{Answer, Shared, error, json, read};
use crate::query::error::CliError;
use crate::thread;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::process::{Command, Stdio};

/// The header a write carries the token in.
const TOKEN_HEADER: &str = "x-uwf-token";

/// A token of 160 random bits, as hex.
pub(crate) fn token() -> String {
    let (a, b) = (thread::random_bytes(), thread::random_bytes());
    a.iter()
        .chain(b.iter())
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Whether `given` is `want`, in the same time whatever its first wrong byte.
fn same(given: &str, want: &str) -> bool {
    given.len() == want.len()
        && given
            .bytes()
            .zip(want.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The token a request carries: the header, else `?token=`.
fn given_token(req: &Request) -> Option<String> {
    if let Some(v) = req
        .headers()
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        return Some(v.to_string());
    }
    req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_string)
    })
}

/// Whether the request's `Origin` is absent or the page's own (`http://HOST`).
fn same_origin(h: &HeaderMap) -> bool {
    let Some(origin) = h.get(header::ORIGIN) else {
        return true;
    };
    let host = h.get(header::HOST).and_then(|v| v.to_str().ok());
    match (origin.to_str().ok(), host) {
        (Some(o), Some(host)) => o == format!("http://{host}"),
        _ => false,
    }
}

/// A 403 answer with the CLI's JSON error object.
fn forbidden(message: &str) -> Response {
    let e = CliError::new(message.to_string());
    (
        StatusCode::FORBIDDEN,
        json(format!("{}\n", e.to_json()).into_bytes()),
    )
        .into_response()
}

/// Lets a request through when it may: a write with the token from its own origin; on a
/// non-loopback address, anything but the assets only with the token.
pub(super) async fn guard(State(app): State<Shared>, req: Request, next: Next) -> Response {
    let want = app.ctx.token.as_str();
    let has_token = given_token(&req).is_some_and(|g| same(&g, want));
    if req.method() != Method::GET && req.method() != Method::HEAD {
        if !has_token {
            return forbidden(
                "a write needs the token uwf serve printed, in the X-Uwf-Token header",
            );
        }
        if !same_origin(req.headers()) {
            return forbidden("a write from another origin is refused");
        }
    } else if !app.ctx.loopback && !has_token && !req.uri().path().starts_with("/assets/") {
        return forbidden("this view needs the token uwf serve printed (?token=)");
    }
    next.run(req).await
}

/// Runs `uwf ARGS` (standard input from `stdin`; this binary, the server's environment, its
/// directory) and answers its standard output, or its first error line with the status of
/// its exit code.
async fn run_cli(app: Shared, args: Vec<String>, stdin: Option<String>) -> Response {
    let r = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(&app.ctx.exe)
            .args(&args)
            .envs(app.ctx.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&app.ctx.cwd)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let (Some(text), Some(mut w)) = (stdin, child.stdin.take()) {
            std::io::Write::write_all(&mut w, text.as_bytes())?;
        }
        child.wait_with_output()
    })
    .await;
    let out = match r {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return cannot_run(&e.to_string()),
        Err(e) => return cannot_run(&e.to_string()),
    };
    if out.status.success() {
        return json(out.stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().next().unwrap_or("").trim();
    let message = line.strip_prefix("error: ").unwrap_or(line);
    let kind = match out.status.code() {
        Some(3) => crate::ErrorKind::NotFound,
        Some(75) => crate::ErrorKind::Retry,
        Some(65 | 70) | None => crate::ErrorKind::Internal,
        Some(_) => crate::ErrorKind::User,
    };
    error(&CliError::of(kind, message.to_string()), Answer::Api)
}

/// The answer when the binary could not run.
fn cannot_run(e: &str) -> Response {
    let e = CliError::of(crate::ErrorKind::Internal, format!("cannot run uwf: {e}"));
    error(&e, Answer::Api)
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_string()).collect()
}

/// `POST /api/threads/{id}/pause`: `uwf thread pause`.
pub(super) async fn pause(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    run_cli(app, args(&["thread", "pause", "--", &id]), None).await
}

/// `POST /api/threads/{id}/resume`: `uwf thread resume`.
pub(super) async fn resume(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    run_cli(app, args(&["thread", "resume", "--", &id]), None).await
}

/// `POST /api/threads/{id}/cancel`: `uwf thread kill`.
pub(super) async fn cancel(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    run_cli(app, args(&["thread", "kill", "--", &id]), None).await
}

/// `POST /api/threads/{id}/step`: `uwf thread step ID` started in the background with the
/// configured agent; answers `{"thread":ID,"started":true}` at once.
pub(super) async fn step(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let t = thread::resolve_thread(Some(&app.ctx.store), &id)?;
        // Only an active thread: a thread that is not stored, or has ended, is said so now.
        let shown = thread::show(&app.ctx.store, &t)?;
        if shown.done {
            return Err(CliError::new(format!(
                "thread {t} has ended ({}); there is no step to run",
                shown.status.as_str()
            )));
        }
        let mut child = Command::new(&app.ctx.exe)
            .args(["thread", "step", "--", t.as_str()])
            .envs(app.ctx.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&app.ctx.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                CliError::of(crate::ErrorKind::Internal, format!("cannot run uwf: {e}"))
            })?;
        // Reaped when it ends.
        std::thread::spawn(move || child.wait());
        let out = serde_json::json!({ "thread": t.as_str(), "started": true });
        Ok(json(format!("{out}\n").into_bytes()))
    })
    .await
}

/// The body of `POST /api/workflows/{name}/threads`.
#[derive(serde::Deserialize)]
struct StartBody {
    prompt: String,
    cwd: Option<String>,
}

/// `POST /api/workflows/{name}/threads` with `{"prompt", "cwd"?}`: `uwf thread start`.
pub(super) async fn start(
    State(app): State<Shared>,
    UrlPath(name): UrlPath<String>,
    body: axum::body::Bytes,
) -> Response {
    let b: StartBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            let e = CliError::of(
                crate::ErrorKind::Usage,
                format!("the body must be {{\"prompt\": …, \"cwd\"?: …}}: {e}"),
            );
            return error(&e, Answer::Api);
        }
    };
    // The prompt on standard input, so that no text of it reads as an option.
    let mut a = args(&["thread", "start", "-p", "-"]);
    if let Some(cwd) = b.cwd.filter(|c| !c.is_empty()) {
        a.push(format!("--cwd={cwd}"));
    }
    a.extend(["--".to_string(), name]);
    run_cli(app, a, Some(b.prompt)).await
}
