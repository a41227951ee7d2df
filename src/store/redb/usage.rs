//! The usage tables of the redb file (created when first written):
//! - `usage_calls`: StepNode id → the step's model calls, its thread, role and day
//!   ([`StepCalls`])
//! - `usage_totals`: (thread, UTC day, role, model) → the thread's workflow and the totals
//!   ([`TotalsRec`]); the aggregate `uwf usage` and the budgets read, added to by the write
//!   that records a step's calls
//! - `usage_days`: (workflow name, UTC day) → [`UsageTotals`], a workflow's day, for its day
//!   budget
//! - `budgets`: workflow name (`*` for the defaults) → [`Budget`]

use super::records::{by_name, opt_table, set_by_name};
use crate::cas::NodeId;
use crate::store::error::Result;
use crate::store::records::{dec, enc};
use crate::store::usage::{
    Budget, DAY_MS, StepCalls, StepUsage, TotalsRec, UsageRow, UsageTotals, by_model,
};
use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};
use std::ops::ControlFlow;

pub(crate) const USAGE_CALLS: TableDefinition<u64, &[u8]> = TableDefinition::new("usage_calls");
pub(crate) const USAGE_TOTALS: TableDefinition<(&str, u32, &str, &str), &[u8]> =
    TableDefinition::new("usage_totals");
pub(crate) const USAGE_DAYS: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("usage_days");
pub(crate) const BUDGETS: TableDefinition<&str, &[u8]> = TableDefinition::new("budgets");

/// Workflow `name`'s totals on `day`.
pub(crate) fn day(tx: &ReadTransaction, name: &str, day: u32) -> Result<UsageTotals> {
    let Some(t) = opt_table(tx, USAGE_DAYS)? else {
        return Ok(UsageTotals::default());
    };
    Ok(match t.get((name, day))? {
        Some(v) => dec(v.value())?,
        None => UsageTotals::default(),
    })
}

/// Workflow `name`'s days with their totals, oldest first.
pub(crate) fn days(tx: &ReadTransaction, name: &str) -> Result<Vec<(u32, UsageTotals)>> {
    let Some(t) = opt_table(tx, USAGE_DAYS)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in t.range((name, 0)..=(name, u32::MAX))? {
        let (k, v) = e?;
        out.push((k.value().1, dec(v.value())?));
    }
    Ok(out)
}

/// Every budget, in name order.
pub(crate) fn budgets(tx: &ReadTransaction) -> Result<Vec<(String, Budget)>> {
    by_name(tx, BUDGETS)
}

/// Sets or removes workflow `name`'s budget; returns the old one.
pub(crate) fn set_budget(
    tx: &WriteTransaction,
    name: &str,
    budget: Option<&Budget>,
) -> Result<Option<Budget>> {
    set_by_name(tx, BUDGETS, name, budget)
}

/// The aggregate's rows, of `thread` only when given.
pub(crate) fn rows(tx: &ReadTransaction, thread: Option<&str>) -> Result<Vec<UsageRow>> {
    let Some(t) = opt_table(tx, USAGE_TOTALS)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let thread_only = thread;
    let range = match thread {
        Some(th) => t.range((th, 0, "", "")..)?,
        None => t.range::<(&str, u32, &str, &str)>(..)?,
    };
    for e in range {
        let (k, v) = e?;
        let (thread, day, role, model) = k.value();
        if thread_only.is_some_and(|th| th != thread) {
            break;
        }
        let TotalsRec(workflow, totals) = dec(v.value())?;
        out.push(UsageRow {
            thread: thread.to_string(),
            day,
            role: role.to_string(),
            model: model.to_string(),
            workflow,
            totals,
        });
    }
    Ok(out)
}

/// The calls recorded with `step`.
pub(crate) fn step_calls(tx: &ReadTransaction, step: NodeId) -> Result<Option<StepCalls>> {
    let Some(t) = opt_table(tx, USAGE_CALLS)? else {
        return Ok(None);
    };
    t.get(step.0)?.map(|v| dec(v.value())).transpose()
}

/// Every step's calls, in id order.
pub(crate) fn each_step(
    tx: &ReadTransaction,
    f: &mut dyn FnMut((NodeId, StepCalls)) -> ControlFlow<()>,
) -> Result<()> {
    let Some(t) = opt_table(tx, USAGE_CALLS)? else {
        return Ok(());
    };
    for e in t.iter()? {
        let (k, v) = e?;
        if f((NodeId(k.value()), dec(v.value())?)).is_break() {
            break;
        }
    }
    Ok(())
}

/// Records `u`'s calls and adds them to the aggregate, on `u.day` or the UTC day of `now_ms`.
pub(crate) fn add(tx: &WriteTransaction, u: &StepUsage<'_>, now_ms: u64) -> Result<()> {
    let mut calls = tx.open_table(USAGE_CALLS)?;
    if calls.get(u.step.0)?.is_some() {
        return Ok(());
    }
    let day = u
        .day
        .unwrap_or_else(|| u32::try_from(now_ms / DAY_MS).unwrap_or(u32::MAX));
    calls.insert(u.step.0, enc(&StepCalls::of(u, day)).as_slice())?;
    let mut totals = tx.open_table(USAGE_TOTALS)?;
    for (model, add) in by_model(u.calls) {
        let key = (u.thread, day, u.role, model);
        let mut rec = match totals.get(key)? {
            Some(v) => dec::<TotalsRec>(v.value())?,
            None => TotalsRec(u.workflow, UsageTotals::default()),
        };
        rec.1.add(&add);
        totals.insert(key, enc(&rec).as_slice())?;
    }
    let mut days = tx.open_table(USAGE_DAYS)?;
    let key = (u.workflow_name, day);
    let mut t = match days.get(key)? {
        Some(v) => dec::<UsageTotals>(v.value())?,
        None => UsageTotals::default(),
    };
    u.calls.iter().for_each(|c| t.add_call(c));
    days.insert(key, enc(&t).as_slice())?;
    Ok(())
}
