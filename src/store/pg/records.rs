//! Reads of the thread layer's records on the server.

use super::*;
use crate::store::minutes::{MinuteRow, StepCounts};
use crate::store::usage::{GroupKey, UsageGroup, UsageQuery};
use std::ops::ControlFlow;

impl Pg {
    pub(crate) fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.conn()?.record(self, THREAD, id.as_str())
    }

    pub(crate) fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        self.conn()?.records(self, THREADS)
    }

    pub(crate) fn thread_state(&self, id: &ThreadId) -> Result<ThreadState> {
        Ok(self
            .conn()?
            .record(self, STATE, id.as_str())?
            .unwrap_or_default())
    }

    pub(crate) fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        self.conn()?.records(self, STATES)
    }

    /// A thread's lease, record and state in one query.
    pub(crate) fn leased_thread(
        &self,
        id: &ThreadId,
    ) -> Result<crate::store::backend::LeasedThread> {
        let r = self
            .conn()?
            .opt(
                "SELECT l.rec, (extract(epoch FROM l.expires_at - now()) * 1000)::int8, \
                 (SELECT rec FROM uwf_threads WHERE id = $1), \
                 (SELECT rec FROM uwf_thread_state WHERE thread = $1) \
                 FROM (SELECT 1) one LEFT JOIN uwf_leases l ON l.thread = $1",
                &[&id.as_str()],
            )
            .map_err(|e| self.err(&e))?
            .ok_or_else(|| StoreError::Internal("no row for a thread's lease".into()))?;
        leased_row(&r, 0)
    }

    /// [`Pg::leased_thread`] of each thread of `ids`, in one query.
    pub(crate) fn leased_threads(
        &self,
        ids: &[ThreadId],
    ) -> Result<Vec<crate::store::backend::LeasedThread>> {
        let names: Vec<&str> = ids.iter().map(ThreadId::as_str).collect();
        let rows = self
            .conn()?
            .query(
                "SELECT l.rec, (extract(epoch FROM l.expires_at - now()) * 1000)::int8, \
                 (SELECT rec FROM uwf_threads WHERE id = t.id), \
                 (SELECT rec FROM uwf_thread_state WHERE thread = t.id) \
                 FROM unnest($1::text[]) WITH ORDINALITY AS t(id, o) \
                 LEFT JOIN uwf_leases l ON l.thread = t.id ORDER BY t.o",
                &[&names],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| leased_row(r, 0)).collect()
    }

    pub(crate) fn lease(&self, id: &ThreadId) -> Result<Option<Lease>> {
        self.conn()?.lease(self, id)
    }

    pub(crate) fn leases(&self) -> Result<Vec<(ThreadId, Lease)>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT rec, (extract(epoch FROM expires_at - now()) * 1000)::int8, thread FROM uwf_leases ORDER BY thread",
                &[],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| Ok((ThreadId::from_stored(r.get(2)), lease_of_row(r, 0)?)))
            .collect()
    }

    pub(crate) fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>> {
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT name, rec FROM uwf_limits ORDER BY name", &[])
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| Ok((r.get(0), dec(r.get(1))?)))
            .collect()
    }

    pub(crate) fn registry(&self) -> Result<Vec<(String, NodeId)>> {
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT name, workflow FROM uwf_registry ORDER BY name", &[])
            .map_err(|e| self.err(&e))?;
        Ok(rows.iter().map(|r| (r.get(0), unkey(r.get(1)))).collect())
    }

    pub(crate) fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT rec FROM uwf_registry_history WHERE name = $1 ORDER BY seq",
                &[&name],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| dec(r.get(0))).collect()
    }

    pub(crate) fn registry_places(&self) -> Result<Vec<(String, u64)>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT name, min(seq) FROM uwf_registry_history GROUP BY name ORDER BY name",
                &[],
            )
            .map_err(|e| self.err(&e))?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
            .collect())
    }

    pub(crate) fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT name, rec FROM uwf_registry_history ORDER BY name, seq",
                &[],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| Ok((r.get(0), dec(r.get(1))?)))
            .collect()
    }

    pub(crate) fn for_each_history<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(HistoryEntry) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut after = 0i64;
        loop {
            let rows = {
                let mut c = self.conn()?;
                c.query(
                    "SELECT seq, rec FROM uwf_history WHERE seq > $1 ORDER BY seq LIMIT 8192",
                    &[&after],
                )
                .map_err(|e| self.err(&e))?
            };
            let Some(last) = rows.last() else {
                return Ok(());
            };
            after = last.get(0);
            for r in &rows {
                f(dec(r.get(1))?)?;
            }
        }
    }

    pub(crate) fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        let mut c = self.conn()?;
        let r = c
            .opt(
                "SELECT rec FROM uwf_history WHERE thread = $1 ORDER BY seq DESC LIMIT 1",
                &[&id.as_str()],
            )
            .map_err(|e| self.err(&e))?;
        r.map(|r| dec(r.get(0))).transpose()
    }

    pub(crate) fn removal_mark(&self) -> Result<u64> {
        let mut c = self.conn()?;
        let r = c
            .query("SELECT coalesce(max(seq), 0) FROM uwf_removals", &[])
            .map_err(|e| self.err(&e))?;
        Ok(u(r[0].get(0)))
    }

    pub(crate) fn removals_since(&self, from: u64) -> Result<Vec<Removal>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT rec FROM uwf_removals WHERE seq > $1 ORDER BY seq",
                &[&i(from)],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| dec(r.get(0))).collect()
    }

    /// Counts for `uwf store info`: nodes, active threads, history entries, registry names,
    /// leases.
    pub(crate) fn counts(&self) -> Result<[u64; 5]> {
        let mut c = self.conn()?;
        let r = c
            .query(
                "SELECT (SELECT count(*) FROM uwf_nodes), (SELECT count(*) FROM uwf_threads),
                        (SELECT count(*) FROM uwf_history), (SELECT count(*) FROM uwf_registry),
                        (SELECT count(*) FROM uwf_leases)",
                &[],
            )
            .map_err(|e| self.err(&e))?;
        Ok([0, 1, 2, 3, 4].map(|k| u(r[0].get(k))))
    }

    pub(crate) fn usage_rows(&self, thread: Option<&str>) -> Result<Vec<UsageRow>> {
        let mut c = self.conn()?;
        const ALL: &str = "SELECT thread, day, role, model, workflow, calls, input_tokens, \
            output_tokens, cached_input_tokens, cost_usd, costed_calls FROM uwf_usage \
            ORDER BY thread, day, role, model";
        const ONE: &str = "SELECT thread, day, role, model, workflow, calls, input_tokens, \
            output_tokens, cached_input_tokens, cost_usd, costed_calls FROM uwf_usage \
            WHERE thread = $1 ORDER BY thread, day, role, model";
        let rows = match thread {
            Some(t) => c.query(ONE, &[&t]),
            None => c.query(ALL, &[]),
        }
        .map_err(|e| self.err(&e))?;
        Ok(rows
            .iter()
            .map(|r| UsageRow {
                thread: r.get(0),
                day: u32::try_from(r.get::<_, i32>(1)).unwrap_or(0),
                role: r.get(2),
                model: r.get(3),
                workflow: r.get::<_, Option<i64>>(4).map(unkey),
                totals: day_totals(r, 5),
            })
            .collect())
    }

    pub(crate) fn step_usage(&self, step: NodeId) -> Result<Option<StepCalls>> {
        let mut c = self.conn()?;
        let r = c
            .opt(
                "SELECT rec FROM uwf_usage_calls WHERE step = $1",
                &[&key(step)],
            )
            .map_err(|e| self.err(&e))?;
        r.map(|r| dec(r.get(0))).transpose()
    }

    /// Every step's calls, in id order, in pages of 8,192 rows.
    pub(crate) fn for_each_step_usage(
        &self,
        f: &mut dyn FnMut((NodeId, StepCalls)) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut after = i64::MIN;
        loop {
            let rows = self
                .conn()?
                .query(
                    "SELECT step, rec FROM uwf_usage_calls WHERE step > $1 ORDER BY step LIMIT 8192",
                    &[&after],
                )
                .map_err(|e| self.err(&e))?;
            for r in &rows {
                after = r.get(0);
                if f((unkey(after), dec(r.get(1))?)).is_break() {
                    return Ok(());
                }
            }
            if rows.len() < 8192 {
                return Ok(());
            }
        }
    }

    pub(crate) fn day_usage(&self, name: &str, day: u32) -> Result<UsageTotals> {
        let day = i32::try_from(day).unwrap_or(i32::MAX);
        let r = self
            .conn()?
            .opt(
                "SELECT calls, input_tokens, output_tokens, cached_input_tokens, cost_usd,
                        costed_calls FROM uwf_usage_days WHERE name = $1 AND day = $2",
                &[&name, &day],
            )
            .map_err(|e| self.err(&e))?;
        Ok(r.map_or_else(UsageTotals::default, |r| day_totals(&r, 0)))
    }

    /// Workflow `name`'s days with their totals, oldest first.
    pub(crate) fn usage_days(&self, name: &str) -> Result<Vec<(u32, UsageTotals)>> {
        let rows = self
            .conn()?
            .query(
                "SELECT day, calls, input_tokens, output_tokens, cached_input_tokens, cost_usd,
                        costed_calls FROM uwf_usage_days WHERE name = $1 ORDER BY day",
                &[&name],
            )
            .map_err(|e| self.err(&e))?;
        Ok(rows
            .iter()
            .map(|r| {
                let day = u32::try_from(r.get::<_, i32>(0)).unwrap_or(0);
                (day, day_totals(r, 1))
            })
            .collect())
    }

    pub(crate) fn budgets(&self) -> Result<Vec<(String, Budget)>> {
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT name, rec FROM uwf_budgets ORDER BY name", &[])
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| Ok((r.get(0), dec(r.get(1))?)))
            .collect()
    }

    /// The steps per minute from minute `from` on, in (minute, workflow) order.
    pub(crate) fn step_minutes(&self, from: u32) -> Result<Vec<MinuteRow>> {
        let from = i32::try_from(from).unwrap_or(i32::MAX);
        let rows = self
            .conn()?
            .query(
                "SELECT minute, name, steps, failures FROM uwf_step_minutes
                 WHERE minute >= $1 ORDER BY minute, name",
                &[&from],
            )
            .map_err(|e| self.err(&e))?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(rows
            .iter()
            .map(|r| MinuteRow {
                minute: u32::try_from(r.get::<_, i32>(0)).unwrap_or(0),
                workflow: r.get(1),
                counts: StepCounts {
                    steps: n(r.get(2)),
                    failures: n(r.get(3)),
                },
            })
            .collect())
    }

    pub(crate) fn today(&self) -> Result<u32> {
        let r = self
            .conn()?
            .query("SELECT floor(extract(epoch FROM now()) / 86400)::int4", &[])
            .map_err(|e| self.err(&e))?;
        Ok(r.first()
            .and_then(|r| u32::try_from(r.get::<_, i32>(0)).ok())
            .unwrap_or(0))
    }
}

/// The totals of a usage row (either aggregate, or a sum) whose `calls` is column `at`, followed by
/// `input_tokens`, `output_tokens`, `cached_input_tokens`, `cost_usd` and `costed_calls`.
fn day_totals(r: &postgres::Row, at: usize) -> UsageTotals {
    let n = |i: usize| u64::try_from(r.get::<_, i64>(at + i)).unwrap_or(0);
    UsageTotals {
        calls: n(0),
        input_tokens: n(1),
        output_tokens: n(2),
        cached_input_tokens: n(3),
        cost_usd: r.get(at + 4),
        costed_calls: n(5),
    }
}

impl Pg {
    /// The aggregate's rows `q` selects, summed by the server.
    pub(crate) fn usage_sums(&self, q: &UsageQuery<'_>) -> Result<Vec<(GroupKey, UsageTotals)>> {
        let sql = match q.by {
            None => SUMS_ALL,
            Some(UsageGroup::Thread) => SUMS_THREAD,
            Some(UsageGroup::Role) => SUMS_ROLE,
            Some(UsageGroup::Model) => SUMS_MODEL,
            Some(UsageGroup::Workflow) => SUMS_WORKFLOW,
            Some(UsageGroup::Day) => SUMS_DAY,
        };
        let thread: Option<&str> = q.thread;
        let workflows: Option<Vec<i64>> =
            q.workflows.map(|ws| ws.iter().map(|w| key(*w)).collect());
        let from: Option<i32> = q.from_day.map(|d| i32::try_from(d).unwrap_or(i32::MAX));
        let rows = self
            .conn()?
            .query(sql, &[&thread, &workflows, &from])
            .map_err(|e| self.err(&e))?;
        let mut out: Vec<(GroupKey, UsageTotals)> = rows
            .iter()
            .map(|r| {
                let text: Option<String> = r.get(0);
                let int: Option<i64> = r.get(1);
                let k = match q.by {
                    None => GroupKey::All,
                    Some(UsageGroup::Workflow) => GroupKey::Workflow(int.map(unkey)),
                    Some(UsageGroup::Day) => {
                        GroupKey::Day(int.and_then(|d| u32::try_from(d).ok()).unwrap_or(0))
                    }
                    Some(_) => GroupKey::Text(text.unwrap_or_default()),
                };
                (k, day_totals(r, 2))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// The sums of `uwf usage`, one statement a grouping: the key as text or as a number, then
/// the totals; `$1` a thread, `$2` workflow keys, `$3` the first day (each null for all).
macro_rules! sums {
    ($text:literal, $int:literal) => {
        concat!(
            "SELECT ",
            $text,
            ", ",
            $int,
            ", sum(calls)::int8, sum(input_tokens)::int8, \
             sum(output_tokens)::int8, sum(cached_input_tokens)::int8, \
             sum(cost_usd)::float8, sum(costed_calls)::int8 FROM uwf_usage \
             WHERE ($1::text IS NULL OR thread = $1) \
             AND ($2::int8[] IS NULL OR workflow = ANY($2)) \
             AND ($3::int4 IS NULL OR day >= $3) GROUP BY 1, 2"
        )
    };
}
const SUMS_ALL: &str = sums!("NULL::text", "NULL::int8");
const SUMS_THREAD: &str = sums!("thread", "NULL::int8");
const SUMS_ROLE: &str = sums!("role", "NULL::int8");
const SUMS_MODEL: &str = sums!("model", "NULL::int8");
const SUMS_WORKFLOW: &str = sums!("NULL::text", "workflow");
const SUMS_DAY: &str = sums!("NULL::text", "day::int8");

/// A thread's lease (with the milliseconds to its expiry), record and state from the columns of
/// `r` from `at` on.
fn leased_row(r: &postgres::Row, at: usize) -> Result<crate::store::backend::LeasedThread> {
    let lease = match r.get::<_, Option<&[u8]>>(at) {
        Some(rec) => Some(lease_expiring(rec, r.get(at + 1))?),
        None => None,
    };
    let thread = r.get::<_, Option<&[u8]>>(at + 2).map(dec).transpose()?;
    let state = r.get::<_, Option<&[u8]>>(at + 3).map(dec).transpose()?;
    Ok((lease, thread, state.unwrap_or_default()))
}
