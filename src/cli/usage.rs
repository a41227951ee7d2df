//! `uwf usage`: model calls, tokens and cost, added up from the store's aggregate.

use super::env::Env;
use super::output::{print_as, write_stdout};
use crate::query::error::CliResult;
use crate::query::usage::{self, By, Selection, Totals, Usage};
use crate::thread::time::parse_time;
use std::io::IsTerminal;

// The arguments of `uwf usage`.
#[derive(clap::Args, Debug)]
pub(crate) struct UsageArgs {
    /// Only this thread's calls.
    #[arg(long, conflicts_with = "workflow")]
    thread: Option<String>,
    /// Only this workflow's (a registered name, every version of it, or a node id).
    #[arg(long)]
    workflow: Option<String>,
    /// Only from this time on, in whole UTC days: `7d`, `24h`, an ISO date or date-time.
    #[arg(long)]
    since: Option<String>,
    /// Also the totals of each thread, workflow, role, model or UTC day.
    #[arg(long, value_enum)]
    by: Option<By>,
}

/// `uwf usage`: JSON (`{"calls","inputTokens","outputTokens","cachedInputTokens","costUsd"}`,
/// and `by`), a table on a terminal unless `--format` is given.
///
/// # Errors
/// A bad time or thread, an unknown workflow, store failures.
pub(crate) fn run(a: UsageArgs, env: &Env) -> CliResult {
    let thread = match &a.thread {
        Some(t) => Some(super::thread::thread_id(env, t)?.as_str().to_string()),
        None => None,
    };
    let sel = Selection {
        thread,
        workflow: a.workflow,
        since_ms: a
            .since
            .as_deref()
            .map(|s| parse_time(s, env.now_ms))
            .transpose()?,
        by: a.by,
    };
    let s = env.open_ro()?;
    let u = usage::usage(&s, &sel, &env.cwd)?;
    if env.explicit_format.is_none() && std::io::stdout().is_terminal() {
        return write_stdout(table(&u).as_bytes());
    }
    print_as(env.format, &u)
}

/// `u` as a table: a row a group, then the total.
fn table(u: &Usage) -> String {
    let cost = |t: &Totals| t.cost_usd.map_or_else(|| "-".into(), |c| format!("{c:.4}"));
    let mut rows: Vec<[String; 6]> = vec![[
        u.by.as_ref()
            .and_then(|g| g.first())
            .and_then(|g| g.key.keys().next())
            .map_or("", |k| k)
            .to_uppercase(),
        "CALLS".into(),
        "INPUT".into(),
        "OUTPUT".into(),
        "CACHED".into(),
        "COST USD".into(),
    ]];
    let row = |name: String, t: &Totals| {
        [
            name,
            t.calls.to_string(),
            t.input_tokens.to_string(),
            t.output_tokens.to_string(),
            t.cached_input_tokens.to_string(),
            cost(t),
        ]
    };
    for g in u.by.iter().flatten() {
        rows.push(row(
            g.key.values().next().cloned().unwrap_or_default(),
            &g.totals,
        ));
    }
    rows.push(row("total".into(), &u.totals));
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = format!("{:<w$}", r[0], w = widths[0]);
        for (i, cell) in r.iter().enumerate().skip(1) {
            line.push_str(&format!("  {cell:>w$}", w = widths[i]));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
