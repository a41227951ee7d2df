//! The server's state and the answers every handler shares: a read on the blocking pool,
//! an error as JSON or a page, JSON and HTML bodies.

use super::page;
use crate::query::error::{CliError, CliResult};
use crate::store::{self, Store};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;

/// What the server reads: the store, its root (background-run markers) and the directory
/// local workflow names resolve from.
pub(crate) struct Context {
    /// The store, opened read-only.
    pub store: Store,
    /// The storage root.
    pub root: PathBuf,
    /// The working directory (`.workflow/` names).
    pub cwd: PathBuf,
    /// Listening on a loopback address only: requests must name the host as a loopback
    /// address or `localhost`, so a web page whose name resolves to 127.0.0.1 (DNS
    /// rebinding) cannot read the view.
    pub loopback: bool,
    /// The per-process token: writes need it, and every request on a non-loopback address.
    pub token: String,
    /// This binary, run to act (`uwf thread pause` …).
    pub exe: PathBuf,
    /// The variables its runs get besides the server's own (`UWF_HOME`, `UWF_STORE`).
    pub env: Vec<(String, String)>,
    /// The clock (ms since the epoch) of the dashboard's running times and last hour.
    pub clock: Arc<dyn Fn() -> u64 + Send + Sync>,
}

/// The shared state of the handlers.
pub(super) struct App {
    pub(super) ctx: Context,
    /// A number that grows each time the store file changes.
    pub(super) version: watch::Receiver<u64>,
}

pub(super) type Shared = Arc<App>;

/// Whether an error answers a page (HTML) or the API (JSON).
#[derive(Clone, Copy)]
pub(super) enum Answer {
    Page,
    Api,
}

/// Runs `f` on the blocking pool, catching store damage, and turns an error into an answer.
pub(super) async fn read<F>(app: Shared, answer: Answer, f: F) -> Response
where
    F: FnOnce(&App) -> CliResult<Response> + Send + 'static,
{
    let r = tokio::task::spawn_blocking(move || {
        let path = app.ctx.store.path().to_path_buf();
        store::catching_damage(&path, || f(&app))
    })
    .await;
    match r {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => error(&e, answer),
        Err(e) => error(
            &CliError::of(crate::ErrorKind::Internal, e.to_string()),
            answer,
        ),
    }
}

/// The answer to a failed read: the CLI's JSON error object, or a page saying it.
pub(super) fn error(e: &CliError, answer: Answer) -> Response {
    let status = match e.kind {
        crate::ErrorKind::NotFound => StatusCode::NOT_FOUND,
        _ if e.missing.is_some() => StatusCode::NOT_FOUND,
        crate::ErrorKind::User | crate::ErrorKind::Usage => StatusCode::BAD_REQUEST,
        crate::ErrorKind::Retry => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    match answer {
        Answer::Api => (status, json(format!("{}\n", e.to_json()).into_bytes())).into_response(),
        Answer::Page => (status, html(page::error(status, &e.message))).into_response(),
    }
}

/// A JSON body, never cached.
pub(super) fn json(body: Vec<u8>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// An HTML body, never cached.
pub(super) fn html(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

impl App {
    /// The store version the page shows.
    pub(super) fn version(&self) -> u64 {
        *self.version.borrow()
    }
}
