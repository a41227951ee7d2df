//! `uwf serve`: a web view of the store on axum, read-only but for the writes of `act`.
//!
//! Pages (`/`, `/threads/{id}`, `/workflows`, `/workflows/{name}`, `/runs`) are HTML rendered
//! here, with one embedded stylesheet and script; the JSON API under `/api/` answers with the
//! bytes the CLI prints for the same question (`thread list --all`, `thread show`, `thread
//! steps`, `thread read`, `usage --thread`, `workflow list`, `workflow show`, `workflow
//! history`, `usage --workflow --by day`, `ps --stats`), built by the CLI's own functions. A
//! thread's page shows what its model calls add up to, a workflow's its spend per UTC day as a
//! chart (`spend`); `/runs` is the runner's dashboard (`runs`): the steps running now in every
//! process sharing the store, steps and failures per minute over the last hour as a chart, and
//! each workflow's queue and limits.
//! `/api/events` is a server-sent event stream that says `change` whenever the store file
//! changes; the pages' script then fetches the page again and swaps its `<main>`. The writes
//! (`act`) run the CLI as a child process, behind the token the URL line names.
//!
//! Invariants: the store is opened read-only and only read (one handle; each read is a read
//! transaction or snapshot of its own); every read runs on the blocking pool inside
//! `store::catching_damage`, so a damaged file gives an error answer, never a panic.

mod act;
mod app;
mod chart;
mod page;
mod runs;
mod spend;

use crate::query::error::{CliError, CliResult};
use crate::query::output::json_line;
use crate::query::usage::{By, Selection, usage};
use crate::query::{running, thread as answers, workflow as workflows};
use crate::store::Store;
use crate::thread::{self, ListFilter, ReadOptions, Status};
pub(crate) use act::token;
pub(crate) use app::Context;
use app::{Answer, App, Shared, error, html, json, read};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The most log events a thread's page shows (the latest).
const EVENTS_ON_PAGE: usize = 200;

/// How often the store file's size and modification time are looked at.
const POLL: Duration = Duration::from_millis(200);

/// Serves the view on `listener` until the process ends.
///
/// # Errors
/// An I/O error of the listener.
pub(crate) async fn run(listener: tokio::net::TcpListener, ctx: Context) -> std::io::Result<()> {
    let (tx, rx) = watch::channel(0u64);
    let tx = Arc::new(tx);
    // A store on a server says when threads start or steps end (LISTEN/NOTIFY); a file is
    // looked at.
    let _listen = ctx.store.on_change({
        let tx = tx.clone();
        move || tx.send_modify(|v| *v += 1)
    });
    if _listen.is_none() {
        tokio::spawn(watch_store(ctx.store.path().to_path_buf(), tx));
    }
    let app = Arc::new(App { ctx, version: rx });
    let router = Router::new()
        .route("/", get(threads_page))
        .route("/threads/{id}", get(thread_page))
        .route("/workflows", get(workflows_page))
        .route("/workflows/{name}", get(workflow_page))
        .route("/runs", get(runs_page))
        .route("/assets/style.css", get(style))
        .route("/assets/app.js", get(script))
        .route("/api/threads", get(api_threads))
        .route("/api/threads/{id}", get(api_thread))
        .route("/api/threads/{id}/steps", get(api_steps))
        .route("/api/threads/{id}/read", get(api_read))
        .route("/api/threads/{id}/usage", get(api_thread_usage))
        .route("/api/workflows", get(api_workflows))
        .route("/api/workflows/{name}", get(api_workflow))
        .route("/api/workflows/{name}/history", get(api_history))
        .route("/api/workflows/{name}/usage", get(api_workflow_usage))
        .route("/api/runs", get(api_runs))
        .route("/api/events", get(events))
        .route("/api/threads/{id}/pause", post(act::pause))
        .route("/api/threads/{id}/resume", post(act::resume))
        .route("/api/threads/{id}/cancel", post(act::cancel))
        .route("/api/threads/{id}/step", post(act::step))
        .route("/api/workflows/{name}/threads", post(act::start))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            act::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            local_host,
        ))
        .with_state(app);
    axum::serve(listener, router).await
}

/// Refuses a request of a loopback-only server whose `Host` is not a loopback name.
async fn local_host(
    State(app): State<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if app.ctx.loopback {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        // The name without the port: `[::1]:80`, `127.0.0.1:80`, `localhost`.
        let name = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(""),
            None => host.split(':').next().unwrap_or(""),
        };
        let local = name.eq_ignore_ascii_case("localhost")
            || name
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !local {
            let e = CliError::new(format!(
                "host \"{host}\" is not this machine's loopback name"
            ));
            return (StatusCode::MISDIRECTED_REQUEST, e.to_json() + "\n").into_response();
        }
    }
    next.run(req).await
}

/// Bumps the version whenever the store file's length or modification time changes: every
/// commit of any process writes the file.
async fn watch_store(path: PathBuf, tx: Arc<watch::Sender<u64>>) {
    let mark = |p: &std::path::Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.modified().ok(), m.len()))
    };
    let mut last = mark(&path);
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        let now = mark(&path);
        if now != last {
            last = now;
            tx.send_modify(|v| *v += 1);
        }
    }
}

/// `/api/events`: `change` with the current version at once, then at every change.
async fn events(
    State(app): State<Shared>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let rx = app.version.clone();
    let stream = futures_util::stream::unfold((rx, true), |(mut rx, first)| async move {
        if !first && rx.changed().await.is_err() {
            return None;
        }
        let v = *rx.borrow_and_update();
        let e = Event::default().event("change").data(v.to_string());
        Some((Ok(e), (rx, false)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn not_found() -> Response {
    let e = CliError::of(crate::ErrorKind::NotFound, "no such page");
    error(&e, Answer::Page)
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        page::STYLE,
    )
        .into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        page::SCRIPT,
    )
        .into_response()
}

/// `?status=` of the thread list: the statuses `thread list --status` takes.
#[derive(serde::Deserialize)]
struct ListQuery {
    status: Option<String>,
}

impl ListQuery {
    /// The filter of `thread list --all [--status S]`.
    fn filter(&self, app: &App) -> CliResult<ListFilter> {
        Ok(ListFilter {
            statuses: self
                .status
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(Status::parse_list)
                .transpose()?,
            all: true,
            background: running::running_threads(&app.ctx.root),
            ..ListFilter::default()
        })
    }
}

/// `/api/threads`: `uwf thread list --all` (`?status=` as `--status`).
async fn api_threads(State(app): State<Shared>, Query(q): Query<ListQuery>) -> Response {
    read(app, Answer::Api, move |app| {
        let rows = thread::list(&app.ctx.store, &q.filter(app)?)?;
        Ok(json(json_line(&answers::list_rows(&rows))?))
    })
    .await
}

/// `/api/threads/{id}`: `uwf thread show`.
async fn api_thread(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let t = thread::resolve_thread(Some(&app.ctx.store), &id)?;
        let out = answers::shown(&app.ctx.root, &app.ctx.store, &t)?;
        Ok(json(json_line(&answers::State::from(&out))?))
    })
    .await
}

/// `/api/threads/{id}/steps`: `uwf thread steps`.
async fn api_steps(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let t = thread::resolve_thread(Some(&app.ctx.store), &id)?;
        let steps = thread::steps(&app.ctx.store, &t)?;
        Ok(json(json_line(&answers::StepsOut::new(
            t.as_str(),
            &steps,
        ))?))
    })
    .await
}

/// `/api/threads/{id}/read`: `uwf thread read` (markdown).
async fn api_read(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let t = thread::resolve_thread(Some(&app.ctx.store), &id)?;
        let md = thread_markdown(app, &t)?;
        Ok((
            [
                (header::CONTENT_TYPE, "text/markdown; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            md,
        )
            .into_response())
    })
    .await
}

/// `/api/threads/{id}/usage`: `uwf usage --thread`.
async fn api_thread_usage(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let t = thread::resolve_thread(Some(&app.ctx.store), &id)?;
        let sel = Selection {
            thread: Some(t.as_str().to_string()),
            ..Selection::default()
        };
        let out = usage(&app.ctx.store, &sel, &app.ctx.cwd)?;
        Ok(json(json_line(&out)?))
    })
    .await
}

/// What `uwf thread read THREAD` prints.
fn thread_markdown(app: &App, t: &thread::ThreadId) -> CliResult<String> {
    let opts = ReadOptions {
        quota: thread::DEFAULT_QUOTA,
        before: None,
        start: false,
    };
    Ok(thread::with_newline(thread::read(
        &app.ctx.store,
        t,
        &opts,
    )?))
}

/// `/api/workflows`: `uwf workflow list` (local names from the server's directory).
async fn api_workflows(State(app): State<Shared>) -> Response {
    read(app, Answer::Api, move |app| {
        let rows = workflows::list_rows(&app.ctx.store, &app.ctx.cwd)?;
        Ok(json(json_line(&rows)?))
    })
    .await
}

/// `/api/workflows/{name}`: `uwf workflow show`.
async fn api_workflow(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let out = workflows::shown(&app.ctx.store, &name, &app.ctx.cwd)?;
        Ok(json(json_line(&out)?))
    })
    .await
}

/// `/api/workflows/{name}/history`: `uwf workflow history`.
async fn api_history(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let out = workflows::history(&app.ctx.store, name)?;
        Ok(json(json_line(&out)?))
    })
    .await
}

/// `/api/workflows/{name}/usage`: `uwf usage --workflow NAME --by day`.
async fn api_workflow_usage(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> Response {
    read(app, Answer::Api, move |app| {
        let sel = Selection {
            workflow: Some(name),
            by: Some(By::Day),
            ..Selection::default()
        };
        let out = usage(&app.ctx.store, &sel, &app.ctx.cwd)?;
        Ok(json(json_line(&out)?))
    })
    .await
}

/// `/`: the threads, newest first, with their states.
async fn threads_page(State(app): State<Shared>, Query(q): Query<ListQuery>) -> Response {
    read(app, Answer::Page, move |app| {
        let rows = thread::list(&app.ctx.store, &q.filter(app)?)?;
        let names = workflow_names(&app.ctx.store)?;
        Ok(html(page::threads(
            app.version(),
            q.status.as_deref(),
            &rows,
            &names,
        )))
    })
    .await
}

/// `/threads/{id}`: a thread's state, model usage, graph, conversation and steps.
async fn thread_page(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    read(app, Answer::Page, move |app| {
        let s = &app.ctx.store;
        let t = thread::resolve_thread(Some(&app.ctx.store), &id)?;
        let state = answers::shown(&app.ctx.root, s, &t)?;
        let steps = thread::steps(s, &t)?;
        let md = thread_markdown(app, &t)?;
        let wf = thread::load_workflow(&s.snapshot()?, steps.workflow)?;
        let names = workflow_names(s)?;
        let events = crate::logs::thread_events(
            &app.ctx.root.join(crate::logs::DIR),
            t.as_str(),
            EVENTS_ON_PAGE,
        );
        let usage = s.thread_usage(t.as_str())?;
        Ok(html(page::thread(
            app.version(),
            &page::ThreadView {
                state: &state,
                steps: &steps,
                markdown: &md,
                workflow: &wf,
                workflow_name: names.get(&steps.workflow.to_wire()).map(String::as_str),
                events: &events,
                usage: &usage,
            },
        )))
    })
    .await
}

/// `/workflows`: the names `thread start` resolves.
async fn workflows_page(State(app): State<Shared>) -> Response {
    read(app, Answer::Page, move |app| {
        let s = &app.ctx.store;
        let rows = workflows::list_rows(s, &app.ctx.cwd)?;
        let mut versions = std::collections::HashMap::new();
        for r in &rows {
            versions.insert(r.name.clone(), s.registry_history(&r.name)?.len());
        }
        Ok(html(page::workflows(app.version(), &rows, &versions)))
    })
    .await
}

/// `/workflows/{name}`: a workflow, its graph, its spend per UTC day (the days of the name it
/// gives itself, which its day budget counts) and its registered versions.
async fn workflow_page(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> Response {
    read(app, Answer::Page, move |app| {
        let s = &app.ctx.store;
        let shown = workflows::shown(s, &name, &app.ctx.cwd)?;
        let wf = workflows::parse(&shown.payload)?;
        // A workflow file or an id that was never registered under the name has no history.
        let history = match s.registry_history(&name)?.is_empty() {
            true => None,
            false => Some(workflows::history(s, name.clone())?),
        };
        let days = s.usage_days(&wf.name)?;
        Ok(html(page::workflow(
            app.version(),
            &name,
            &shown,
            &wf,
            &days,
            history.as_ref(),
        )))
    })
    .await
}

/// The dashboard now, with the config of the server's root (agents, limits).
fn dashboard(app: &App) -> CliResult<crate::query::runs::Runs> {
    let config = thread::Config::load(&app.ctx.root)?;
    crate::query::runs::runs(&app.ctx.store, &config, (app.ctx.clock)())
}

/// `/api/runs`: `uwf ps --stats`.
async fn api_runs(State(app): State<Shared>) -> Response {
    read(app, Answer::Api, move |app| {
        Ok(json(json_line(&dashboard(app)?)?))
    })
    .await
}

/// `/runs`: the runner's dashboard.
async fn runs_page(State(app): State<Shared>) -> Response {
    read(app, Answer::Page, move |app| {
        Ok(html(runs::page(app.version(), &dashboard(app)?)))
    })
    .await
}

/// The registered name of each workflow id (the first name of an id registered twice).
fn workflow_names(s: &Store) -> CliResult<std::collections::HashMap<String, String>> {
    let mut names = std::collections::HashMap::new();
    for (name, id) in s.registry()? {
        names.entry(id.to_wire()).or_insert(name);
    }
    Ok(names)
}
