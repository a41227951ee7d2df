//! The usage and the steps per minute a transaction's steps add, and a workflow's budgets:
//! [`PgWriter`]'s part.

use super::{BUDGETS_BY_NAME, PgWriter, UsageDeltas};
use crate::store::error::Result;
use crate::store::minutes::MinuteRow;
use crate::store::pg::{Param, key};
use crate::store::records::enc;
use crate::store::usage::{Budget, StepCalls, StepUsage, UsageTotals, by_model};

/// The totals of aggregate rows, as the columns of an `unnest`.
#[derive(Default)]
struct Cols {
    day: Vec<i32>,
    calls: Vec<i64>,
    input: Vec<i64>,
    output: Vec<i64>,
    cached: Vec<i64>,
    cost: Vec<f64>,
    costed: Vec<i64>,
}

impl Cols {
    fn push(&mut self, day: i32, t: &UsageTotals, n: impl Fn(u64) -> i64) {
        self.day.push(day);
        self.calls.push(n(t.calls));
        self.input.push(n(t.input_tokens));
        self.output.push(n(t.output_tokens));
        self.cached.push(n(t.cached_input_tokens));
        self.cost.push(t.cost_usd);
        self.costed.push(n(t.costed_calls));
    }

    /// The totals' parameters, after the key's.
    fn totals(&self) -> [&dyn Param; 6] {
        [
            &self.calls,
            &self.input,
            &self.output,
            &self.cached,
            &self.cost,
            &self.costed,
        ]
    }
}

/// An upsert of aggregate rows: `insert` up to its conflict target, then the totals added to
/// the row that is there.
macro_rules! added {
    ($insert:literal) => {
        concat!(
            $insert,
            " DO UPDATE SET calls = u.calls + EXCLUDED.calls, \
             input_tokens = u.input_tokens + EXCLUDED.input_tokens, \
             output_tokens = u.output_tokens + EXCLUDED.output_tokens, \
             cached_input_tokens = u.cached_input_tokens + EXCLUDED.cached_input_tokens, \
             cost_usd = u.cost_usd + EXCLUDED.cost_usd, \
             costed_calls = u.costed_calls + EXCLUDED.costed_calls"
        )
    };
}

impl PgWriter<'_> {
    /// Records a step's calls and adds them to the aggregate (at commit), on `u.day`, else the
    /// server's UTC day.
    pub(crate) fn add_usage(&mut self, u: &StepUsage<'_>) -> Result<()> {
        let day = match (u.day, self.usage.as_ref().and_then(|d| d.today)) {
            (Some(d), _) | (None, Some(d)) => d,
            (None, None) => {
                let r = self
                    .s()?
                    .query("SELECT floor(extract(epoch FROM now()) / 86400)::int4", &[])
                    .map_err(self.e())?;
                let d = r
                    .first()
                    .and_then(|r| u32::try_from(r.get::<_, i32>(0)).ok())
                    .unwrap_or(0);
                self.usage.get_or_insert_default().today = Some(d);
                d
            }
        };
        let new = self
            .s()?
            .execute(
                "INSERT INTO uwf_usage_calls (step, rec) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&key(u.step), &enc(&StepCalls::of(u, day))],
            )
            .map_err(self.e())?;
        if new == 0 {
            return Ok(());
        }
        let d = self.usage.get_or_insert_default();
        for (model, t) in by_model(u.calls) {
            d.threads
                .entry((
                    u.thread.to_string(),
                    day,
                    u.role.to_string(),
                    model.to_string(),
                ))
                .or_insert((u.workflow.map(key), UsageTotals::default()))
                .1
                .add(&t);
        }
        let t = d
            .days
            .entry((u.workflow_name.to_string(), day))
            .or_default();
        u.calls.iter().for_each(|c| t.add_call(c));
        Ok(())
    }

    /// Adds `u` to the aggregate's rows: one statement for the threads' rows, one for the
    /// workflows' days.
    pub(super) fn flush_usage(&mut self, u: &UsageDeltas) -> Result<()> {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let day = |d: u32| i32::try_from(d).unwrap_or(i32::MAX);
        if !u.threads.is_empty() {
            let mut cols = Cols::default();
            let (mut thread, mut role, mut model, mut wf) = (vec![], vec![], vec![], vec![]);
            for ((t, d, r, m), (w, tot)) in &u.threads {
                thread.push(t.as_str());
                role.push(r.as_str());
                model.push(m.as_str());
                wf.push(*w);
                cols.push(day(*d), tot, n);
            }
            self.s()?
                .execute(
                    added!(
                        "INSERT INTO uwf_usage AS u (thread, day, role, model, workflow, calls,
                             input_tokens, output_tokens, cached_input_tokens, cost_usd,
                             costed_calls)
                         SELECT * FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[],
                             $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::int8[],
                             $10::float8[], $11::int8[])
                         ON CONFLICT (thread, day, role, model)"
                    ),
                    &[&thread as &dyn Param, &cols.day, &role, &model, &wf]
                        .into_iter()
                        .chain(cols.totals())
                        .collect::<Vec<_>>(),
                )
                .map_err(self.e())?;
        }
        if !u.days.is_empty() {
            let mut cols = Cols::default();
            let mut name = vec![];
            for ((w, d), tot) in &u.days {
                name.push(w.as_str());
                cols.push(day(*d), tot, n);
            }
            self.s()?
                .execute(
                    added!(
                        "INSERT INTO uwf_usage_days AS u (name, day, calls, input_tokens,
                             output_tokens, cached_input_tokens, cost_usd, costed_calls)
                         SELECT * FROM unnest($1::text[], $2::int4[], $3::int8[], $4::int8[],
                             $5::int8[], $6::int8[], $7::float8[], $8::int8[])
                         ON CONFLICT (name, day)"
                    ),
                    &[&name as &dyn Param, &cols.day]
                        .into_iter()
                        .chain(cols.totals())
                        .collect::<Vec<_>>(),
                )
                .map_err(self.e())?;
        }
        Ok(())
    }

    /// Adds `rows` to the steps per minute, and deletes the minutes before `prune_before`,
    /// with the transaction's `COMMIT` (in its round trip): a row shared with other processes'
    /// transactions (a workflow's minute) is locked only for that moment.
    pub(crate) fn add_step_counts(
        &mut self,
        rows: &[MinuteRow],
        prune_before: Option<u32>,
    ) -> Result<()> {
        if rows.is_empty() && prune_before.is_none() {
            return Ok(());
        }
        // The COMMIT's round trip carries it; a transaction that sent nothing yet begins.
        self.s()?;
        self.minutes = Some(minutes_sql(rows, prune_before));
        Ok(())
    }

    pub(crate) fn set_budget(&mut self, name: &str, b: Option<&Budget>) -> Result<Option<Budget>> {
        self.set_by_name(&BUDGETS_BY_NAME, name, b)
    }
}

/// The statements of [`PgWriter::add_step_counts`], as text for a simple query (no
/// parameters there): minutes and counts as numbers, a workflow's name as a
/// [`super::text_literal`], each ending in `;`.
fn minutes_sql(rows: &[MinuteRow], prune_before: Option<u32>) -> String {
    use std::fmt::Write;
    let mut sql = String::new();
    if !rows.is_empty() {
        sql.push_str("INSERT INTO uwf_step_minutes AS m (minute, name, steps, failures) VALUES ");
        for (i, r) in rows.iter().enumerate() {
            let _ = write!(
                sql,
                "{}({}, {}, {}, {})",
                if i == 0 { "" } else { ", " },
                i32::try_from(r.minute).unwrap_or(i32::MAX),
                super::text_literal(&r.workflow),
                i64::try_from(r.counts.steps).unwrap_or(i64::MAX),
                i64::try_from(r.counts.failures).unwrap_or(i64::MAX),
            );
        }
        sql.push_str(
            " ON CONFLICT (minute, name) DO UPDATE SET steps = m.steps + EXCLUDED.steps, \
             failures = m.failures + EXCLUDED.failures; ",
        );
    }
    if let Some(before) = prune_before {
        let _ = write!(
            sql,
            "DELETE FROM uwf_step_minutes WHERE minute < {}; ",
            i32::try_from(before).unwrap_or(i32::MAX)
        );
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::minutes::StepCounts;

    #[test]
    fn minutes_as_one_statement_with_names_in_hex() {
        let row = |minute, workflow: &str, steps| MinuteRow {
            minute,
            workflow: workflow.into(),
            counts: StepCounts { steps, failures: 1 },
        };
        let sql = minutes_sql(&[row(7, "a'b", 2), row(8, "é", 0)], Some(5));
        assert!(sql.starts_with("INSERT INTO uwf_step_minutes"), "{sql}");
        assert!(sql.contains("(7, convert_from(decode('612762', 'hex'), 'UTF8'), 2, 1), (8, convert_from(decode('c3a9', 'hex'), 'UTF8'), 0, 1)"), "{sql}");
        assert!(!sql.contains("a'b"), "{sql}");
        assert!(
            sql.ends_with("DELETE FROM uwf_step_minutes WHERE minute < 5; "),
            "{sql}"
        );
        assert_eq!(
            minutes_sql(&[], Some(3)),
            "DELETE FROM uwf_step_minutes WHERE minute < 3; "
        );
    }
}
