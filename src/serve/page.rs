//! The HTML of the view's pages: plain markup around the data, one embedded stylesheet and
//! script, every value escaped; the conversation's markdown rendered here with raw HTML shown
//! as text.

use super::spend;
use crate::query::workflow::{History, ListRow, Shown};
use crate::store::UsageTotals;
use crate::thread::{Listed, StepOutput, Steps};
use crate::time::{format_duration, format_utc};
use crate::workflow::StoredWorkflow;
use crate::workflow::render::render_svg;
use axum::http::StatusCode;
use std::collections::HashMap;
use std::fmt::Write;

/// The stylesheet, `/assets/style.css`.
pub(crate) const STYLE: &str = include_str!("assets/style.css");
/// The script of every page, `/assets/app.js`: live updates over `/api/events`.
pub(crate) const SCRIPT: &str = include_str!("assets/app.js");

/// Rows the thread list shows at most; `/api/threads` has them all.
const MAX_ROWS: usize = 1000;

/// The section a page belongs to, marked in the navigation.
#[derive(PartialEq, Eq, Clone, Copy)]
pub(super) enum Section {
    Threads,
    Workflows,
    Runs,
}

/// `s` escaped for HTML text and attribute values (the graph's SVG escaper).
pub(crate) use crate::workflow::render::xml_text as esc;

/// `s` as one percent-encoded URL path segment.
pub(super) fn seg(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else {
            let _ = write!(o, "%{b:02X}");
        }
    }
    o
}

/// A whole page: head, navigation, `main` and the script. `version` is the store version the
/// data is from (the script compares it with the event stream's).
pub(super) fn layout(title: &str, section: Option<Section>, version: u64, main: &str) -> String {
    let nav = |s: Section, href: &str, label: &str| {
        let on = if section == Some(s) {
            r#" class="on""#
        } else {
            ""
        };
        format!(r#"<a href="{href}"{on}>{label}</a>"#)
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{} · uwf</title><link rel="stylesheet" href="/assets/style.css"></head>
<body data-version="{version}"><header><a class="brand" href="/">uwf</a><nav>{}{}{}</nav><span id="live" class="live" title="live updates">connecting</span></header>
<p id="action-result" class="action-result" role="status" hidden></p>
<main>{main}</main>
<script src="/assets/app.js"></script></body></html>
"#,
        esc(title),
        nav(Section::Threads, "/", "Threads"),
        nav(Section::Workflows, "/workflows", "Workflows"),
        nav(Section::Runs, "/runs", "Runs"),
    )
}

/// A thread's actions: buttons the script posts to `/api/threads/{id}/…` with the token.
fn thread_actions(thread: &str) -> String {
    let mut m = format!(
        r#"<div class="actions" id="actions" data-thread="{}">"#,
        esc(thread)
    );
    for (act, label, title) in [
        ("pause", "Pause", "no step starts until it is resumed"),
        ("resume", "Resume", "idle again, its failures forgotten"),
        ("cancel", "Cancel", "archive the thread as cancelled"),
        (
            "step",
            "Step once",
            "run one step with the configured agent",
        ),
    ] {
        let _ = write!(
            m,
            r#"<button type="button" data-act="{act}" title="{title}">{label}</button>"#
        );
    }
    m.push_str("</div>\n");
    m
}

/// A workflow's form to start a thread: the script posts it to
/// `/api/workflows/{name}/threads` with the token.
fn start_form(name: &str) -> String {
    format!(
        r#"<form class="start" id="start-thread" data-workflow="{}"><input id="start-prompt" name="prompt" placeholder="Prompt of a new thread" required><input id="start-cwd" name="cwd" placeholder="Working directory (optional)"><button type="submit">Start thread</button></form>
"#,
        esc(name)
    )
}

/// A status as a badge.
fn badge(status: &str) -> String {
    format!(
        r#"<span class="status s-{0}" data-status="{0}">{0}</span>"#,
        esc(status)
    )
}

/// A time as `YYYY-MM-DD HH:MM:SS` UTC.
pub(super) fn time(ms: u64) -> String {
    format!(r#"<time data-ms="{ms}">{}</time>"#, esc(&format_utc(ms)))
}

/// A link to a workflow page, by name when it has one, else by id.
pub(super) fn workflow_link(id: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!(
            r#"<a href="/workflows/{}">{}</a> <code class="id">{}</code>"#,
            seg(n),
            esc(n),
            esc(id)
        ),
        None => format!(
            r#"<a href="/workflows/{}"><code class="id">{}</code></a>"#,
            seg(id),
            esc(id)
        ),
    }
}

/// `/`: the threads with their states, newest first.
pub(crate) fn threads(
    version: u64,
    status: Option<&str>,
    rows: &[Listed],
    names: &HashMap<String, String>,
) -> String {
    let mut m = String::from("<h1>Threads</h1>\n<p class=\"filters\">");
    for (label, value) in [
        ("all", ""),
        ("active", "active"),
        ("queued", "queued"),
        ("running", "running"),
        ("idle", "idle"),
        ("paused", "paused"),
        ("completed", "completed"),
        ("failed", "failed"),
        ("cancelled", "cancelled"),
        ("dropped", "dropped"),
    ] {
        let on = status.unwrap_or("") == value;
        let href = if value.is_empty() {
            "/".to_string()
        } else {
            format!("/?status={value}")
        };
        let _ = write!(
            m,
            r#"<a href="{href}"{}>{label}</a> "#,
            if on { r#" class="on""# } else { "" }
        );
    }
    let shown = rows.len().min(MAX_ROWS);
    let _ = write!(
        m,
        "</p>\n<p class=\"count\" id=\"thread-count\" data-count=\"{}\">{} thread{}{}</p>\n",
        rows.len(),
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        if shown < rows.len() {
            format!(", the newest {shown} shown (<a href=\"/api/threads\">all as JSON</a>)")
        } else {
            String::new()
        }
    );
    if rows.is_empty() {
        m.push_str("<p class=\"empty\">No threads.</p>\n");
        return layout("Threads", Some(Section::Threads), version, &m);
    }
    m.push_str("<table class=\"threads\"><thead><tr><th>Thread</th><th>Status</th><th>Current role</th><th>Workflow</th><th>Started</th><th>Head</th></tr></thead><tbody>\n");
    for r in rows.iter().take(MAX_ROWS) {
        let started = crate::model::time_of(&r.thread)
            .map(time)
            .unwrap_or_default();
        let wf = r
            .workflow
            .as_deref()
            .map(|w| workflow_link(w, names.get(w).map(String::as_str)))
            .unwrap_or_default();
        let _ = writeln!(
            m,
            r#"<tr class="thread" data-thread="{t}" data-status="{s}"><td><a href="/threads/{t}"><code>{t}</code></a></td><td>{}</td><td class="role">{}</td><td>{wf}</td><td>{started}</td><td><code class="id">{}</code></td></tr>"#,
            badge(r.status.as_str()),
            esc(r.current_role.as_deref().unwrap_or("")),
            esc(&r.head),
            t = esc(&r.thread),
            s = r.status.as_str(),
        );
    }
    m.push_str("</tbody></table>\n");
    layout("Threads", Some(Section::Threads), version, &m)
}

/// What the thread page shows.
pub(crate) struct ThreadView<'a> {
    /// `thread show`.
    pub state: &'a StepOutput,
    /// `thread steps`.
    pub steps: &'a Steps,
    /// `thread read`.
    pub markdown: &'a str,
    /// The thread's workflow.
    pub workflow: &'a StoredWorkflow,
    /// Its registered name.
    pub workflow_name: Option<&'a str>,
    /// Its latest log events, oldest first.
    pub events: &'a [serde_json::Map<String, serde_json::Value>],
    /// What its model calls add up to.
    pub usage: &'a UsageTotals,
}

/// `/threads/{id}`: state, graph with the current role marked, conversation, steps.
pub(crate) fn thread(version: u64, v: &ThreadView<'_>) -> String {
    let st = v.state;
    let t = st.thread.as_str();
    let mut m = format!("<h1>Thread <code>{}</code></h1>\n", esc(t));
    let _ = write!(
        m,
        r#"<dl class="summary" id="summary" data-status="{}"><dt>Status</dt><dd>{}</dd><dt>Current role</dt><dd class="role">{}</dd><dt>Workflow</dt><dd>{}</dd><dt>Head</dt><dd><code class="id">{}</code></dd><dt>Steps</dt><dd id="step-count">{}</dd>"#,
        st.status.as_str(),
        badge(st.status.as_str()),
        esc(st.current_role.as_deref().unwrap_or("—")),
        workflow_link(&st.workflow, v.workflow_name),
        esc(&st.head),
        v.steps.steps.len(),
    );
    if let Some((pid, since)) = st.running {
        let _ = write!(
            m,
            "<dt>Running</dt><dd>pid {pid} since {}</dd>",
            time(since)
        );
    }
    m.push_str("</dl>\n");
    m.push_str(&thread_actions(t));
    if let Some(e) = &st.last_error {
        let _ = writeln!(
            m,
            r#"<div class="error-box"><strong>Last error</strong> ({}, agent {}): {}</div>"#,
            time(e.time_ms),
            esc(&e.agent),
            esc(&e.message)
        );
    }
    let _ = writeln!(
        m,
        "<section class=\"panel\" id=\"usage\"><h2>Model usage</h2>{}<p class=\"more\"><a href=\"/api/threads/{}/usage\">as JSON</a></p></section>",
        spend::thread_usage(v.usage),
        seg(t)
    );
    let current = if st.done {
        st.status
            .as_str()
            .eq("completed")
            .then_some(crate::workflow::model::END)
    } else {
        st.current_role.as_deref()
    };
    let _ = write!(
        m,
        "<div class=\"cols\"><section class=\"panel\" id=\"graph\"><h2>Graph</h2>{}</section>\n<section class=\"panel\" id=\"read\"><h2>Conversation</h2><div class=\"md\">{}</div></section></div>\n",
        render_svg(v.workflow, current),
        markdown(v.markdown)
    );
    m.push_str("<section class=\"panel\" id=\"steps\"><h2>Steps</h2><table class=\"steps\"><thead><tr><th>#</th><th>Role</th><th>Agent</th><th>Time</th><th>Duration</th><th>Output</th></tr></thead><tbody>\n");
    let s = v.steps;
    let _ = writeln!(
        m,
        r#"<tr class="start" id="n-{}"><td>0</td><td>start</td><td></td><td>{}</td><td></td><td><pre class="out">{}</pre></td></tr>"#,
        s.start.to_wire(),
        time(s.start_timestamp),
        esc(&s.prompt)
    );
    for (i, row) in s.steps.iter().enumerate() {
        let _ = writeln!(
            m,
            r#"<tr class="step" id="n-{}" data-role="{}"><td>{}</td><td class="role">{}</td><td>{}</td><td>{}</td><td>{}</td><td><pre class="out">{}</pre></td></tr>"#,
            row.id.to_wire(),
            esc(&row.role),
            i + 1,
            esc(&row.role),
            esc(&row.agent),
            time(row.timestamp),
            row.duration_ms.map(format_duration).unwrap_or_default(),
            esc(&row.output.to_json_pretty())
        );
    }
    m.push_str("</tbody></table></section>\n");
    events(&mut m, v.events);
    layout(&format!("Thread {t}"), Some(Section::Threads), version, &m)
}

/// The thread's log events: time, level, message and the other fields.
fn events(m: &mut String, events: &[serde_json::Map<String, serde_json::Value>]) {
    use serde_json::Value;
    m.push_str("<section class=\"panel\" id=\"events\"><h2>Events</h2>");
    if events.is_empty() {
        m.push_str("<p class=\"empty\">No events in the logs.</p></section>\n");
        return;
    }
    m.push_str("<table class=\"events\"><thead><tr><th>Time</th><th>Level</th><th>Event</th><th>Details</th></tr></thead><tbody>\n");
    for e in events {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
        let details: Vec<String> = e
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "ts" | "pid" | "tag" | "level" | "msg" | "thread"
                )
            })
            .map(|(k, v)| match v {
                Value::String(x) => format!("{k}={x}"),
                other => format!("{k}={other}"),
            })
            .collect();
        let _ = writeln!(
            m,
            r#"<tr class="event level-{l}"><td>{}</td><td>{l}</td><td>{}</td><td><code>{}</code></td></tr>"#,
            esc(s("ts")),
            esc(s("msg")),
            esc(&details.join(" ")),
            l = esc(if s("level").is_empty() {
                "info"
            } else {
                s("level")
            }),
        );
    }
    m.push_str("</tbody></table></section>\n");
}

/// `/workflows`: the names `thread start` resolves, with how many versions each registered
/// name has had.
pub(crate) fn workflows(
    version: u64,
    rows: &[ListRow],
    versions: &HashMap<String, usize>,
) -> String {
    let mut m = String::from("<h1>Workflows</h1>\n");
    if rows.is_empty() {
        m.push_str("<p class=\"empty\">No workflows.</p>\n");
        return layout("Workflows", Some(Section::Workflows), version, &m);
    }
    m.push_str("<table class=\"workflows\"><thead><tr><th>Name</th><th>Id</th><th>Origin</th><th>Versions</th></tr></thead><tbody>\n");
    for r in rows {
        let _ = writeln!(
            m,
            r#"<tr class="workflow" data-name="{n}"><td><a href="/workflows/{}">{n}</a></td><td><code class="id">{}</code></td><td>{}</td><td>{}</td></tr>"#,
            seg(&r.name),
            esc(&r.hash),
            r.origin,
            versions
                .get(&r.name)
                .filter(|_| r.origin == "global")
                .map(usize::to_string)
                .unwrap_or_default(),
            n = esc(&r.name),
        );
    }
    m.push_str("</tbody></table>\n");
    layout("Workflows", Some(Section::Workflows), version, &m)
}

/// `/workflows/{name}`: description, roles, graph, spend per UTC day (`days`, the days of the
/// name the workflow gives itself, oldest first) and registered versions.
pub(crate) fn workflow(
    version: u64,
    name: &str,
    shown: &Shown,
    wf: &StoredWorkflow,
    days: &[(u32, UsageTotals)],
    history: Option<&History>,
) -> String {
    let mut m = format!("<h1>Workflow {}</h1>\n", esc(&wf.name));
    let _ = write!(
        m,
        r#"<dl class="summary"><dt>Id</dt><dd><code class="id">{}</code></dd><dt>Registered as</dt><dd>{}</dd><dt>Stored</dt><dd>{}</dd><dt>Description</dt><dd>{}</dd></dl>"#,
        shown.hash.0.to_wire(),
        esc(shown.name.as_deref().unwrap_or("— (not registered)")),
        shown.timestamp.map(time).unwrap_or_else(|| "—".into()),
        esc(&wf.description),
    );
    m.push_str(&start_form(name));
    let _ = write!(
        m,
        "\n<div class=\"cols\"><section class=\"panel\" id=\"graph\"><h2>Graph</h2>{}</section>\n<section class=\"panel\" id=\"roles\"><h2>Roles</h2><table><tbody>",
        render_svg(wf, None)
    );
    for (r, role) in &wf.roles {
        let _ = write!(
            m,
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(r),
            esc(&role.description)
        );
    }
    m.push_str("</tbody></table></section></div>\n");
    let _ = writeln!(
        m,
        "<section class=\"panel\" id=\"usage\"><h2>Spend per day</h2>{}<p class=\"more\"><a href=\"/api/workflows/{}/usage\">as JSON</a></p></section>",
        spend::workflow_days(&wf.name, days),
        seg(name)
    );
    m.push_str("<section class=\"panel\" id=\"history\"><h2>Versions</h2>");
    match history {
        None => {
            let _ = write!(
                m,
                "<p class=\"empty\">\"{}\" is not a registered name; it has no version history.</p>",
                esc(name)
            );
        }
        Some(h) => {
            m.push_str("<table class=\"versions\"><thead><tr><th>#</th><th>Id</th><th>Registered</th><th></th></tr></thead><tbody>");
            for (i, v) in h.versions.iter().enumerate() {
                let id = v.hash.0.to_wire();
                let _ = write!(
                    m,
                    r#"<tr class="version{}"><td>{}</td><td><a href="/workflows/{id}"><code class="id">{id}</code></a></td><td>{}</td><td>{}</td></tr>"#,
                    if v.current { " current" } else { "" },
                    i + 1,
                    time(v.registered_at),
                    if v.current { "current" } else { "" },
                );
            }
            m.push_str("</tbody></table>");
        }
    }
    m.push_str("</section>\n");
    layout(
        &format!("Workflow {}", wf.name),
        Some(Section::Workflows),
        version,
        &m,
    )
}

/// A page saying what went wrong.
pub(crate) fn error(status: StatusCode, message: &str) -> String {
    let m = format!(
        "<h1>{}</h1>\n<p class=\"error-box\">{}</p>\n<p><a href=\"/\">Threads</a></p>\n",
        status.as_u16(),
        esc(message)
    );
    layout(&status.as_u16().to_string(), None, 0, &m)
}

/// Markdown as HTML: raw HTML in it is shown as text, and links and images keep only
/// `http`, `https`, `mailto`, relative and fragment targets.
pub(crate) fn markdown(md: &str) -> String {
    use pulldown_cmark::{CowStr, Event, Options, Parser, Tag};
    // A target with an unsafe scheme becomes `#`.
    fn clean(url: CowStr<'_>) -> CowStr<'_> {
        let u = url.trim().to_ascii_lowercase();
        let safe = match u.split_once(':') {
            None => true,
            Some((scheme, _)) if scheme.contains(['/', '?', '#']) => true,
            Some((scheme, _)) => matches!(scheme, "http" | "https" | "mailto"),
        };
        if safe { url } else { "#".into() }
    }
    let events = Parser::new_ext(
        md,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS,
    )
    .map(|e| match e {
        Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: clean(dest_url),
            title,
            id,
        }),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Image {
            link_type,
            dest_url: clean(dest_url),
            title,
            id,
        }),
        e => e,
    });
    let mut out = String::with_capacity(md.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_shows_raw_html_as_text() {
        let h = markdown(
            "# Hi\n\n<script>alert(1)</script>\n\nx <b>y</b> [a](javascript:alert(1)) [b](https://e.org)\n",
        );
        assert!(h.contains("<h1>Hi</h1>"), "{h}");
        assert!(!h.contains("<script>"), "{h}");
        assert!(h.contains("&lt;script&gt;"), "{h}");
        assert!(!h.contains("<b>"), "{h}");
        assert!(!h.contains("javascript:"), "{h}");
        assert!(h.contains(r#"href="https://e.org""#), "{h}");
    }

    #[test]
    fn escapes_and_segments() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(seg("a b/c"), "a%20b%2Fc");
    }
}
