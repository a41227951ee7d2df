//! Budgets: what a thread and a workflow's UTC day may spend on models, kept in the store
//! (`uwf limits set W --max-cost-per-thread … --max-tokens-per-thread … --max-cost-per-day …`,
//! `*` for the defaults), checked before each step by every process that steps threads of the
//! store. A thread whose spend reached its budget is paused for it; a workflow whose day is
//! spent starts no step until the next UTC day or a raise. Steps already running finish, so
//! the overshoot is bounded by the steps in flight.

pub use super::overrun::Overrun;
use super::{Result, ThreadId};
use crate::store::{Budget, Phase, Store, UsageTotals};

/// The budget of workflow `name` among `all`: its own, each unset field from `*`'s.
pub(crate) fn budget_of(all: &[(String, Budget)], name: &str) -> Budget {
    let find = |n: &str| {
        all.iter()
            .find(|(k, _)| k == n)
            .map(|(_, b)| *b)
            .unwrap_or_default()
    };
    find(name).over(&find("*"))
}

/// USD as printed in messages.
pub(crate) fn usd(v: f64) -> String {
    format!("${v:.4}")
}

/// The thread budget of `b` that `spent` reached, as (spent, budget, flag).
fn thread_overrun(b: &Budget, spent: &UsageTotals) -> Option<(String, String, &'static str)> {
    if let Some(max) = b.max_cost_per_thread
        && spent.cost_usd >= max
    {
        return Some((usd(spent.cost_usd), usd(max), "--max-cost-per-thread"));
    }
    let tokens = spent.input_tokens + spent.output_tokens;
    match b.max_tokens_per_thread {
        Some(max) if tokens >= max => Some((
            format!("{tokens} tokens"),
            format!("{max} tokens"),
            "--max-tokens-per-thread",
        )),
        _ => None,
    }
}

/// The budgets a step of `thread` (of workflow `name`) would go past, checked before it starts:
/// `None` when it may run. A thread over its own budget is paused for it here.
///
/// # Errors
/// Store failures.
///
/// `budgets`, the store's budgets as a caller read them lately (a runner, once per look at the
/// store), else read now.
pub(crate) fn check(
    store: &Store,
    thread: &ThreadId,
    name: &str,
    now_ms: u64,
    budgets: Option<&[(String, Budget)]>,
) -> Result<Option<Overrun>> {
    let read;
    let all = match budgets {
        Some(b) => b,
        None => {
            read = store.budgets()?;
            &read[..]
        }
    };
    if all.is_empty() {
        return Ok(None);
    }
    let b = budget_of(all, name);
    if let Some(over) = thread_over(store, thread, name, &b)? {
        pause_for_budget(store, thread)?;
        return Ok(Some(over));
    }
    day_over(store, name, &b, now_ms)
}

/// The thread budget of `b` that `thread` reached.
fn thread_over(
    store: &Store,
    thread: &ThreadId,
    name: &str,
    b: &Budget,
) -> Result<Option<Overrun>> {
    if b.max_cost_per_thread.is_none() && b.max_tokens_per_thread.is_none() {
        return Ok(None);
    }
    let spent = store.thread_usage(thread.as_str())?;
    Ok(
        thread_overrun(b, &spent).map(|(spent, budget, flag)| Overrun::Thread {
            thread: thread.to_string(),
            workflow: name.to_string(),
            spent,
            budget,
            flag,
        }),
    )
}

/// The day budget of `b` that workflow `name` reached today.
fn day_over(store: &Store, name: &str, b: &Budget, now_ms: u64) -> Result<Option<Overrun>> {
    let Some(max) = b.max_cost_per_day else {
        return Ok(None);
    };
    let today = store.day_usage(name, store.today(now_ms)?)?;
    Ok((today.cost_usd >= max).then(|| Overrun::Day {
        workflow: name.to_string(),
        spent: usd(today.cost_usd),
        budget: usd(max),
    }))
}

/// The workflows whose day budget is spent today: those with a day budget of their own and,
/// when `*` has one, the registered names and those `more` gives (say, the workflows of
/// active threads).
///
/// # Errors
/// Store failures.
pub(crate) fn spent_days(
    store: &Store,
    more: &dyn Fn() -> Vec<String>,
    now_ms: u64,
) -> Result<Vec<Overrun>> {
    let all = store.budgets()?;
    let mut names: Vec<String> = all
        .iter()
        .filter(|(n, b)| n != "*" && b.max_cost_per_day.is_some())
        .map(|(n, _)| n.clone())
        .collect();
    if budget_of(&all, "*").max_cost_per_day.is_some() {
        names.extend(store.registry()?.into_iter().map(|(n, _)| n));
        names.extend(more());
    }
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for n in names {
        if let Some(o) = day_over(store, &n, &budget_of(&all, &n), now_ms)? {
            out.push(o);
        }
    }
    Ok(out)
}

/// Pauses `thread` for its budget, unless it was paused or changed meanwhile.
fn pause_for_budget(store: &Store, thread: &ThreadId) -> Result<()> {
    store.write(|w| {
        if w.thread(thread)?.is_none() {
            return Ok(());
        }
        let mut s = w.thread_state(thread)?;
        if s.phase == Phase::Ready {
            s.phase = Phase::PausedForBudget;
            w.set_thread_state(thread, &s)?;
        }
        Ok(())
    })?;
    tracing::warn!(tag = "BQ4WN7XD", thread = %thread, "thread paused: its budget is spent");
    Ok(())
}

/// Whether `thread`, paused for its budget, may go on: the overrun that still holds it back.
///
/// # Errors
/// Store failures, a broken chain.
pub(crate) fn still_over(store: &Store, thread: &ThreadId, name: &str) -> Result<Option<Overrun>> {
    let b = budget_of(&store.budgets()?, name);
    thread_over(store, thread, name, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workflows_budget_takes_the_defaults_field_by_field() {
        let all = vec![
            (
                "*".to_string(),
                Budget {
                    max_cost_per_thread: Some(1.0),
                    max_tokens_per_thread: Some(500),
                    max_cost_per_day: None,
                },
            ),
            (
                "debate".to_string(),
                Budget {
                    max_cost_per_thread: Some(0.5),
                    ..Budget::default()
                },
            ),
        ];
        let b = budget_of(&all, "debate");
        assert_eq!(b.max_cost_per_thread, Some(0.5));
        assert_eq!(b.max_tokens_per_thread, Some(500));
        assert_eq!(budget_of(&all, "other").max_cost_per_thread, Some(1.0));
        assert!(budget_of(&[], "x").is_empty());
    }

    #[test]
    fn a_thread_is_over_when_its_cost_or_its_tokens_reach_the_budget() {
        let b = Budget {
            max_cost_per_thread: Some(0.01),
            max_tokens_per_thread: Some(100),
            max_cost_per_day: None,
        };
        let mut t = UsageTotals::default();
        assert_eq!(thread_overrun(&b, &t), None);
        t.cost_usd = 0.01;
        assert_eq!(
            thread_overrun(&b, &t).map(|o| o.2),
            Some("--max-cost-per-thread")
        );
        t.cost_usd = 0.0;
        t.input_tokens = 60;
        t.output_tokens = 40;
        assert_eq!(
            thread_overrun(&b, &t),
            Some((
                "100 tokens".into(),
                "100 tokens".into(),
                "--max-tokens-per-thread"
            ))
        );
    }
}
