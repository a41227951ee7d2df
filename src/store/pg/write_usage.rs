//! The usage a transaction's steps add, and a workflow's budgets: [`PgWriter`]'s part.

use super::{BUDGETS_BY_NAME, PgWriter, UsageDeltas};
use crate::store::error::Result;
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

    pub(crate) fn set_budget(&mut self, name: &str, b: Option<&Budget>) -> Result<Option<Budget>> {
        self.set_by_name(&BUDGETS_BY_NAME, name, b)
    }
}
