//! The model usage the pages show: a thread's calls, tokens and cost, and a workflow's spend per
//! UTC day as a bar chart in SVG drawn here (no script, no external asset), its days in a table
//! below it with their total. Every value is escaped; a cost no call reported or priced shows
//! as `—`.

use super::chart::{Frame, nice_step};
use crate::store::{DAY_MS, UsageTotals};
use crate::workflow::render::xml_text as esc;
use std::fmt::Write;

/// The most days the chart shows: the latest that have calls.
pub(crate) const CHART_DAYS: usize = 30;

/// The chart's size (its view box) and the margins around its plot.
const FRAME: Frame = Frame {
    w: 720.0,
    h: 290.0,
    left: 78.0,
    right: 14.0,
    top: 14.0,
    bottom: 86.0,
};

/// `n` with its thousands separated by commas.
pub(super) fn count(n: u64) -> String {
    let s = n.to_string();
    let mut o = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            o.push(',');
        }
        o.push(c);
    }
    o
}

/// A cost in USD: two decimals from a dollar, four below it, six below a hundredth of a cent.
fn usd(c: f64) -> String {
    let a = c.abs();
    if a == 0.0 {
        "$0.00".into()
    } else if a >= 1.0 {
        format!("${c:.2}")
    } else if a >= 0.0001 {
        format!("${c:.4}")
    } else {
        format!("${c:.6}")
    }
}

/// The cells of `t`: calls, input, output and cached input tokens, cost.
fn cells(t: &UsageTotals) -> String {
    let cost = match t.cost() {
        Some(c) if t.costed_calls < t.calls => format!(
            r#"<td class="cost" data-usd="{c}" title="the cost of {} of {} calls; the others have no price">{} <span class="note">({} of {} calls)</span></td>"#,
            t.costed_calls,
            t.calls,
            usd(c),
            t.costed_calls,
            t.calls
        ),
        Some(c) => format!(r#"<td class="cost" data-usd="{c}">{}</td>"#, usd(c)),
        None => r#"<td class="cost unknown" title="unknown: no call's cost was reported or priced in config.yaml">—</td>"#.into(),
    };
    format!(
        r#"<td class="calls">{}</td><td class="input">{}</td><td class="output">{}</td><td class="cached">{}</td>{cost}"#,
        count(t.calls),
        count(t.input_tokens),
        count(t.output_tokens),
        count(t.cached_input_tokens),
    )
}

/// The head of a usage table whose first column is `first` (none when empty).
fn head(first: &str) -> String {
    let first = match first {
        "" => String::new(),
        f => format!("<th>{f}</th>"),
    };
    format!(
        "<thead><tr>{first}<th>Calls</th><th>Input tokens</th><th>Output tokens</th><th>Cached input tokens</th><th>Cost</th></tr></thead>"
    )
}

/// A thread's model usage: its calls, tokens and cost in one row, or that it made none.
pub(crate) fn thread_usage(t: &UsageTotals) -> String {
    if t.calls == 0 {
        return "<p class=\"empty\">No model calls recorded.</p>".into();
    }
    format!(
        "<table class=\"usage\">{}<tbody><tr class=\"thread-usage\">{}</tr></tbody></table>",
        head(""),
        cells(t)
    )
}

/// UTC day `day` (days since 1970-01-01) as `YYYY-MM-DD`.
fn date(day: u32) -> String {
    let iso = crate::time::format_iso(u64::from(day) * DAY_MS);
    iso.get(..10).unwrap_or(&iso).to_string()
}

/// What the bars measure: the known cost, or the tokens when no shown day's cost is known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Metric {
    Cost,
    Tokens,
}

impl Metric {
    fn of(self, t: &UsageTotals) -> f64 {
        match self {
            Metric::Cost => t.cost().unwrap_or(0.0),
            // Cached input tokens are counted among the input tokens.
            Metric::Tokens => (t.input_tokens + t.output_tokens) as f64,
        }
    }

    /// An axis tick's label, `step` apart from the next.
    fn tick(self, v: f64, step: f64) -> String {
        match self {
            Metric::Cost if v == 0.0 => "$0".into(),
            Metric::Cost => {
                let decimals = (-step.log10().floor()).clamp(0.0, 10.0) as usize;
                format!("${v:.decimals$}")
            }
            Metric::Tokens => compact(v),
        }
    }

    /// A bar's value in its tooltip.
    fn value(self, t: &UsageTotals) -> String {
        match (self, t.cost()) {
            (Metric::Cost, Some(c)) => usd(c),
            (Metric::Cost, None) => "cost unknown".into(),
            (Metric::Tokens, _) => format!("{} tokens", count(t.input_tokens + t.output_tokens)),
        }
    }

    fn axis(self) -> &'static str {
        match self {
            Metric::Cost => "cost (USD)",
            Metric::Tokens => "tokens (input + output)",
        }
    }
}

/// A token count for an axis: `k`, `M` or `G` with at most two decimals.
fn compact(v: f64) -> String {
    let (d, unit) = match v {
        v if v >= 1e9 => (1e9, "G"),
        v if v >= 1e6 => (1e6, "M"),
        v if v >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let s = format!("{:.2}", v / d);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

/// The axis of values up to `max`: a step of 1, 2 or 5 times a power of ten giving about four
/// ticks, and the top, the first tick at or above `max`.
fn scale(max: f64, metric: Metric) -> (f64, f64) {
    let max = match (max > 0.0, metric) {
        (true, _) => max,
        (false, Metric::Cost) => 0.01,
        (false, Metric::Tokens) => 4.0,
    };
    let mut step = nice_step(max / 4.0);
    if metric == Metric::Tokens {
        step = step.max(1.0);
    }
    (step, (max / step).ceil().max(1.0) * step)
}

/// A workflow's spend per UTC day: the latest [`CHART_DAYS`] of `days` (oldest first, as
/// `Store::usage_days` gives them) as bars of their cost in USD, or of their tokens when no
/// shown day's cost is known, then a table of those days and their total.
pub(crate) fn workflow_days(name: &str, days: &[(u32, UsageTotals)]) -> String {
    if days.is_empty() {
        return format!(
            "<p class=\"empty\">No model calls recorded for workflow \"{}\".</p>",
            esc(name)
        );
    }
    let shown = &days[days.len().saturating_sub(CHART_DAYS)..];
    let metric = match shown.iter().any(|(_, t)| t.cost().is_some()) {
        true => Metric::Cost,
        false => Metric::Tokens,
    };
    let mut m = chart(name, shown, metric);
    if shown.len() < days.len() {
        let _ = write!(
            m,
            "<p class=\"count\">The latest {} of {} days with calls.</p>",
            shown.len(),
            days.len()
        );
    }
    m.push_str("<table class=\"usage days\">");
    m.push_str(&head("Day (UTC)"));
    m.push_str("<tbody>");
    let mut total = UsageTotals::default();
    for (day, t) in shown {
        total.add(t);
        let d = date(*day);
        let _ = write!(
            m,
            r#"<tr class="day" data-day="{d}"><td>{d}</td>{}</tr>"#,
            cells(t)
        );
    }
    let _ = write!(
        m,
        "<tr class=\"total\"><th>Total, {} day{}</th>{}</tr></tbody></table>",
        shown.len(),
        if shown.len() == 1 { "" } else { "s" },
        cells(&total)
    );
    m
}

/// The bar chart of `shown`'s days by `metric`, with its axes, ticks, dates and axis titles.
fn chart(name: &str, shown: &[(u32, UsageTotals)], metric: Metric) -> String {
    let max = shown.iter().map(|(_, t)| metric.of(t)).fold(0.0, f64::max);
    let (step, top) = scale(max, metric);
    let Frame { w, h, left, .. } = FRAME;
    let base = FRAME.base();
    let y = |v: f64| FRAME.y(v, top);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{} of workflow {} per UTC day" data-metric="{}">"#,
        metric.axis(),
        esc(name),
        match metric {
            Metric::Cost => "cost",
            Metric::Tokens => "tokens",
        }
    );
    FRAME.grid(&mut s, step, top, |v| esc(&metric.tick(v, step)));
    let slot = FRAME.plot_width() / shown.len() as f64;
    let width = (slot * 0.7).min(48.0);
    for (i, (day, t)) in shown.iter().enumerate() {
        let v = metric.of(t);
        let (x, d) = (left + slot * (i as f64 + 0.5), date(*day));
        let _ = write!(
            s,
            r#"<g class="bar{}" data-day="{d}" data-value="{v}"><rect x="{:.1}" y="{:.1}" width="{width:.1}" height="{:.1}"/><title>{d}: {}, {} call{}</title></g>"#,
            if metric == Metric::Cost && t.cost().is_none() {
                " unknown"
            } else {
                ""
            },
            x - width / 2.0,
            y(v),
            base - y(v),
            esc(&metric.value(t)),
            count(t.calls),
            if t.calls == 1 { "" } else { "s" },
        );
        let _ = write!(
            s,
            r#"<text class="date" x="{x:.1}" y="{:.1}" text-anchor="end" transform="rotate(-40 {x:.1} {:.1})">{d}</text>"#,
            base + 14.0,
            base + 14.0,
        );
    }
    FRAME.axes(&mut s, metric.axis(), "day (UTC)");
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(calls: u64, cost: Option<f64>) -> UsageTotals {
        UsageTotals {
            calls,
            input_tokens: 1000 * calls,
            output_tokens: 10 * calls,
            cached_input_tokens: 0,
            cost_usd: cost.unwrap_or(0.0),
            costed_calls: if cost.is_some() { calls } else { 0 },
        }
    }

    #[test]
    fn numbers_and_costs() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(usd(0.00123), "$0.0012");
        assert_eq!(usd(0.00001), "$0.000010");
        assert_eq!(usd(1234.5), "$1234.50");
        assert_eq!(usd(1.11), "$1.11");
        assert_eq!(compact(2_500_000.0), "2.5M");
        assert_eq!(compact(750.0), "750");
        let near = |(a, b): (f64, f64), (x, y): (f64, f64)| {
            assert!((a - x).abs() < 1e-12 && (b - y).abs() < 1e-12, "{a} {b}");
        };
        near(scale(0.0012, Metric::Cost), (0.0005, 0.0015));
        near(scale(0.0, Metric::Cost), (0.005, 0.01));
        near(scale(3.0, Metric::Tokens), (1.0, 3.0));
        near(scale(9500.0, Metric::Tokens), (5000.0, 10000.0));
        assert_eq!(Metric::Cost.tick(0.0015, 0.0005), "$0.0015");
    }

    #[test]
    fn a_thread_without_calls_says_so_and_an_unknown_cost_is_a_dash() {
        assert!(thread_usage(&UsageTotals::default()).contains("No model calls"));
        let h = thread_usage(&day(3, None));
        assert!(h.contains(r#"<td class="calls">3</td>"#), "{h}");
        assert!(h.contains(r#"<td class="input">3,000</td>"#), "{h}");
        assert!(h.contains(">—</td>"), "{h}");
    }

    #[test]
    fn the_chart_shows_the_latest_days_by_cost_or_by_tokens() {
        let days: Vec<(u32, UsageTotals)> = (0..40)
            .map(|d| (20_454 + d, day(u64::from(d) + 1, Some(0.01))))
            .collect();
        let h = workflow_days("debate", &days);
        assert_eq!(h.matches(r#"<g class="bar""#).count(), CHART_DAYS, "{h}");
        assert!(
            !h.contains(r#"data-day="2026-01-01""#),
            "the oldest days left out"
        );
        assert!(h.contains(r#"data-day="2026-02-09""#), "{h}");
        assert!(h.contains(r#"data-metric="cost""#), "{h}");
        assert!(h.contains("The latest 30 of 40 days"), "{h}");
        assert!(h.contains("Total, 30 days"), "{h}");
        let h = workflow_days("x<y", &[(20_454, day(2, None))]);
        assert!(h.contains(r#"data-metric="tokens""#), "{h}");
        assert!(h.contains(r#"data-value="2020""#), "{h}");
        assert!(h.contains("x&lt;y"), "{h}");
        assert!(workflow_days("debate", &[]).contains("No model calls"));
    }
}
