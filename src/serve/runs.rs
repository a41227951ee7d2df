//! `/runs`, the runner's dashboard: the steps running now across every process sharing the
//! store, the steps and failed steps per minute over the last hour as an SVG bar chart drawn
//! here (as `spend` draws its days) with a table of the same minutes beside it, and each
//! workflow's threads by state with its limits and budgets. The data is
//! [`crate::query::runs::Runs`], what `/api/runs` and `uwf ps --stats` print.

use super::chart::{Frame, nice_step};
use super::page::{Section, esc, layout, seg, time};
use super::spend::count;
use crate::query::runs::{Minute, Runs, WorkflowRuns};
use crate::time::format_duration;
use std::fmt::Write;

/// The chart's size (its view box) and the margins around its plot.
const FRAME: Frame = Frame {
    w: 720.0,
    h: 250.0,
    left: 56.0,
    right: 14.0,
    top: 14.0,
    bottom: 46.0,
};

/// How often the page fetches itself again when nothing changed (seconds): running steps'
/// elapsed times and the hour's window move on.
const TICK_SECONDS: u32 = 10;

/// `/runs`.
pub(crate) fn page(version: u64, r: &Runs) -> String {
    let h = &r.last_hour;
    let mut m = String::from("<h1>Runs</h1>\n");
    let _ = write!(
        m,
        r#"<dl class="summary" id="runs-summary" data-running="{}" data-steps="{}" data-failures="{}"><dt>Running now</dt><dd>{} step{}</dd><dt>Last hour</dt><dd>{} step{}, {} a minute, {} a second; {} failed</dd><dt>As of</dt><dd>{} UTC</dd></dl>"#,
        r.running.len(),
        h.steps,
        h.failures,
        r.running.len(),
        plural(r.running.len() as u64),
        count(h.steps),
        plural(h.steps),
        rate(h.steps_per_minute),
        rate(h.steps_per_second),
        count(h.failures),
        time(r.now_ms),
    );
    m.push('\n');
    running(&mut m, r);
    let _ = writeln!(
        m,
        "<section class=\"panel\" id=\"rate\"><h2>Steps per minute, last hour</h2><div class=\"chart-and-table\">{}{}</div><p class=\"more\"><a href=\"/api/runs\">as JSON</a></p></section>",
        chart(&r.minutes),
        minutes_table(&r.minutes),
    );
    workflows(&mut m, &r.workflows);
    // The page fetches itself every so often: `main[data-tick]` (see app.js).
    layout(
        "Runs",
        Some(Section::Runs),
        version,
        &format!("<div id=\"runs\" data-tick=\"{TICK_SECONDS}\">{m}</div>"),
    )
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A rate with three significant digits (whole from 100 on), trailing zeros dropped.
fn rate(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return "0".into();
    }
    let decimals = (2.0 - v.log10().floor()).clamp(0.0, 8.0) as usize;
    let s = format!("{v:.decimals$}");
    match s.contains('.') {
        true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => s,
    }
}

/// The steps running now.
fn running(m: &mut String, r: &Runs) {
    m.push_str("<section class=\"panel\" id=\"running\"><h2>Running now</h2>");
    if r.running.is_empty() {
        m.push_str("<p class=\"empty\">No step is running.</p></section>\n");
        return;
    }
    m.push_str("<table class=\"running\"><thead><tr><th>Thread</th><th>Workflow</th><th>Role</th><th>Agent</th><th>Holder</th><th>Since</th><th>Elapsed</th></tr></thead><tbody>\n");
    for p in &r.running {
        let machine = match (p.this_machine, p.holder.split(':').next()) {
            (true, _) => "this machine".to_string(),
            (false, Some(boot)) if !boot.is_empty() => {
                format!("another machine (boot {})", boot.get(..8).unwrap_or(boot))
            }
            _ => "another machine".to_string(),
        };
        let wf = match p.workflow.as_str() {
            "" => "—".to_string(),
            w => format!(r#"<a href="/workflows/{}">{}</a>"#, seg(w), esc(w)),
        };
        let _ = writeln!(
            m,
            r#"<tr class="running" data-thread="{t}" data-pid="{}" data-holder="{}"><td><a href="/threads/{t}"><code>{t}</code></a></td><td>{wf}</td><td class="role">{}</td><td><code>{}</code></td><td title="{}">pid {}, {}</td><td>{}</td><td class="elapsed">{}</td></tr>"#,
            p.pid,
            esc(&p.holder),
            esc(p.role.as_deref().unwrap_or("—")),
            esc(p.agent.as_deref().unwrap_or("—")),
            esc(&p.holder),
            p.pid,
            esc(&machine),
            time(p.since),
            format_duration(p.elapsed_ms as f64),
            t = esc(&p.thread),
        );
    }
    m.push_str("</tbody></table></section>\n");
}

/// The axis of counts up to `max`: a whole step of 1, 2 or 5 times a power of ten giving about
/// four ticks, and the top, the first tick at or above `max`.
fn scale(max: u64) -> (u64, u64) {
    let max = max.max(4);
    let step = nice_step(max.div_ceil(4) as f64) as u64;
    (step, max.div_ceil(step) * step)
}

/// `HH:MM` of an ISO time.
fn hhmm(iso: &str) -> &str {
    iso.get(11..16).unwrap_or(iso)
}

/// The bar chart of the minutes: steps stacked under failed steps, a minute a slot, the hours'
/// minutes marked every ten.
fn chart(minutes: &[Minute]) -> String {
    let max = minutes
        .iter()
        .map(|m| m.steps + m.failures)
        .max()
        .unwrap_or(0);
    let (step, top) = scale(max);
    let Frame {
        w,
        h,
        left,
        right,
        top: t,
        ..
    } = FRAME;
    let base = FRAME.base();
    let y = |v: u64| FRAME.y(v as f64, top as f64);
    let (steps, failures) = minutes
        .iter()
        .fold((0, 0), |(s, f), m| (s + m.steps, f + m.failures));
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart runs" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="steps and failed steps per minute over the last hour; the table beside lists them" data-steps="{steps}" data-failures="{failures}">"#
    );
    FRAME.grid(&mut s, step as f64, top as f64, |v| count(v as u64));
    let slot = FRAME.plot_width() / minutes.len().max(1) as f64;
    let width = (slot * 0.75).max(1.0);
    for (i, m) in minutes.iter().enumerate() {
        let x = left + slot * i as f64 + (slot - width) / 2.0;
        let _ = write!(
            s,
            r#"<g class="minute" data-minute="{}" data-steps="{}" data-failures="{}">"#,
            m.minute, m.steps, m.failures
        );
        if m.steps > 0 {
            let _ = write!(
                s,
                r#"<rect class="steps" x="{x:.1}" y="{:.1}" width="{width:.1}" height="{:.1}"/>"#,
                y(m.steps),
                base - y(m.steps),
            );
        }
        if m.failures > 0 {
            let _ = write!(
                s,
                r#"<rect class="failures" x="{x:.1}" y="{:.1}" width="{width:.1}" height="{:.1}"/>"#,
                y(m.steps + m.failures),
                y(m.steps) - y(m.steps + m.failures),
            );
        }
        let _ = write!(
            s,
            "<title>{} UTC: {} step{}, {} failed</title></g>",
            hhmm(&m.minute),
            m.steps,
            plural(m.steps),
            m.failures
        );
        if i % 10 == 0 || i + 1 == minutes.len() {
            let _ = write!(
                s,
                r#"<text class="date" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                left + slot * (i as f64 + 0.5),
                base + 14.0,
                hhmm(&m.minute)
            );
        }
    }
    FRAME.axes(&mut s, "steps a minute", "minute (UTC)");
    let _ = write!(
        s,
        r#"<g class="legend"><rect class="steps" x="{}" y="{t}" width="10" height="10"/><text x="{}" y="{}">steps</text><rect class="failures" x="{}" y="{t}" width="10" height="10"/><text x="{}" y="{}">failed</text></g></svg>"#,
        w - right - 130.0,
        w - right - 116.0,
        t + 9.0,
        w - right - 66.0,
        w - right - 52.0,
        t + 9.0,
    );
    s
}

/// The chart's minutes as a table: those with steps or failures, newest first, and the hour's
/// total.
fn minutes_table(minutes: &[Minute]) -> String {
    let mut t = String::from(
        "<table class=\"minutes\"><thead><tr><th>Minute (UTC)</th><th>Steps</th><th>Steps a second</th><th>Failed</th></tr></thead><tbody>",
    );
    let (mut steps, mut failures, mut shown) = (0, 0, 0);
    for m in minutes.iter().rev() {
        steps += m.steps;
        failures += m.failures;
        if m.steps == 0 && m.failures == 0 {
            continue;
        }
        shown += 1;
        let _ = write!(
            t,
            r#"<tr class="minute" data-minute="{}"><td>{}</td><td class="steps">{}</td><td class="rate">{}</td><td class="failures">{}</td></tr>"#,
            m.minute,
            hhmm(&m.minute),
            count(m.steps),
            rate(m.steps as f64 / 60.0),
            count(m.failures),
        );
    }
    if shown == 0 {
        t.push_str("<tr class=\"none\"><td colspan=\"4\" class=\"empty\">No steps in the last hour.</td></tr>");
    }
    let _ = write!(
        t,
        r#"<tr class="total"><th>Last hour</th><td class="steps">{}</td><td class="rate">{}</td><td class="failures">{}</td></tr></tbody></table>"#,
        count(steps),
        rate(steps as f64 / 3600.0),
        count(failures),
    );
    t
}

/// A workflow's limit and budgets in a few words.
fn limits_text(w: &WorkflowRuns) -> (String, String) {
    let (l, from) = (w.limits.as_ref(), w.limits_from);
    let Some(l) = l else {
        return ("—".into(), "—".into());
    };
    let limit = match l.concurrency {
        Some(c) => {
            let mut s = format!("{c} at once, overflow {}", l.overflow);
            if let Some(q) = l.max_queue {
                let _ = write!(s, ", queue of {q} at most");
            }
            if let Some(f) = from {
                let _ = write!(s, " ({f})");
            }
            s
        }
        None => "—".into(),
    };
    let mut budgets = Vec::new();
    if let Some(c) = l.max_cost_per_thread {
        budgets.push(format!("${c} a thread"));
    }
    if let Some(t) = l.max_tokens_per_thread {
        budgets.push(format!("{} tokens a thread", count(t)));
    }
    if let Some(c) = l.max_cost_per_day {
        budgets.push(match w.spent_today_usd {
            Some(s) => format!("${c} a day (${s:.2} spent today)"),
            None => format!("${c} a day"),
        });
    }
    let budgets = match budgets.is_empty() {
        true => "—".into(),
        false => budgets.join(", "),
    };
    (limit, budgets)
}

/// Each workflow's threads by state, its hour, its limit and budgets.
fn workflows(m: &mut String, ws: &[WorkflowRuns]) {
    m.push_str("<section class=\"panel\" id=\"queues\"><h2>Workflows: queues and limits</h2>");
    if ws.is_empty() {
        m.push_str("<p class=\"empty\">No active threads, steps or limits.</p></section>\n");
        return;
    }
    m.push_str("<table class=\"queues\"><thead><tr><th>Workflow</th><th>Running</th><th>In progress</th><th>Queued</th><th>Paused</th><th>Concurrency limit</th><th>Budgets</th><th>Steps, last hour</th><th>Failed, last hour</th></tr></thead><tbody>\n");
    for w in ws {
        let (limit, budgets) = limits_text(w);
        let concurrency = w
            .limits
            .as_ref()
            .and_then(|l| l.concurrency)
            .map(|c| c.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            m,
            r#"<tr class="queue" data-workflow="{n}" data-running="{}" data-in-progress="{}" data-queued="{}" data-paused="{}" data-concurrency="{concurrency}"><td><a href="/workflows/{}">{n}</a></td><td class="running">{}</td><td>{}</td><td class="queued">{}</td><td>{}</td><td class="limit">{}</td><td class="budgets">{}</td><td class="steps">{}</td><td class="failures">{}</td></tr>"#,
            w.running,
            w.in_progress,
            w.queued,
            w.paused,
            seg(&w.workflow),
            w.running,
            w.in_progress,
            w.queued,
            w.paused,
            esc(&limit),
            esc(&budgets),
            count(w.steps_last_hour),
            count(w.failures_last_hour),
            n = esc(&w.workflow),
        );
    }
    m.push_str("</tbody></table></section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::limits::LimitsOut;
    use crate::query::runs::{Hour, Running};

    fn minute(i: u64, steps: u64, failures: u64) -> Minute {
        let start_ms = 1_767_225_600_000 + i * 60_000;
        Minute {
            minute: crate::time::format_iso(start_ms),
            start_ms,
            steps,
            failures,
            by_workflow: Default::default(),
        }
    }

    #[test]
    fn rates_keep_three_digits() {
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(2.0 / 3600.0), "0.000556");
        assert_eq!(rate(0.05), "0.05");
        assert_eq!(rate(1.0 / 30.0), "0.0333");
        assert_eq!(rate(12.345), "12.3");
        assert_eq!(rate(1234.4), "1234");
    }

    #[test]
    fn scales_are_whole() {
        assert_eq!(scale(0), (1, 4));
        assert_eq!(scale(7), (2, 8));
        assert_eq!(scale(39), (10, 40));
        assert_eq!(scale(1234), (500, 1500));
    }

    #[test]
    fn the_page_shows_minutes_running_steps_and_queues() {
        let minutes: Vec<Minute> = (0..60)
            .map(|i| match i {
                58 => minute(i, 4, 1),
                59 => minute(i, 2, 0),
                _ => minute(i, 0, 0),
            })
            .collect();
        let r = Runs {
            now: "2026-01-01T00:59:30.000Z".into(),
            now_ms: 1_767_229_170_000,
            running: vec![Running {
                thread: "01KDWT2ZX2Q8Y7E3M4N5P6R7S8".into(),
                workflow: "a<b".into(),
                role: Some("writer".into()),
                agent: Some("sleep 5".into()),
                pid: 42,
                since: 1_767_229_160_000,
                elapsed_ms: 10_000,
                holder: "abc:42:7".into(),
                this_machine: false,
            }],
            last_hour: Hour {
                from: minutes[0].minute.clone(),
                to: "2026-01-01T00:59:30.000Z".into(),
                steps: 6,
                failures: 1,
                steps_per_minute: 0.1,
                steps_per_second: 6.0 / 3600.0,
            },
            minutes,
            workflows: vec![WorkflowRuns {
                workflow: "a<b".into(),
                running: 1,
                in_progress: 2,
                queued: 3,
                paused: 0,
                steps_last_hour: 6,
                failures_last_hour: 1,
                limits: Some(LimitsOut::of(
                    "a<b",
                    Some(&crate::store::WorkflowLimits {
                        concurrency: 2,
                        drop: false,
                        max_queue: None,
                        max_retries: None,
                    }),
                    None,
                )),
                limits_from: Some("store"),
                spent_today_usd: None,
            }],
        };
        let h = page(3, &r);
        assert!(h.contains(r#"<a href="/runs" class="on">Runs</a>"#), "{h}");
        assert_eq!(h.matches(r#"<g class="minute""#).count(), 60);
        assert!(h.contains(r#"data-steps="6" data-failures="1">"#), "{h}");
        assert!(h.contains(r#"<g class="minute" data-minute="2026-01-01T00:58:00.000Z" data-steps="4" data-failures="1">"#), "{h}");
        assert_eq!(h.matches(r#"<tr class="minute""#).count(), 2, "{h}");
        assert!(h.contains(r#"data-holder="abc:42:7""#), "{h}");
        assert!(h.contains("another machine (boot abc)"), "{h}");
        assert!(h.contains("a&lt;b") && !h.contains("a<b"), "{h}");
        assert!(h.contains(r#"data-queued="3""#), "{h}");
        assert!(h.contains("2 at once, overflow queue (store)"), "{h}");
        assert!(h.contains(r#"data-tick="10""#), "{h}");
    }
}
