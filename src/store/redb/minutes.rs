//! The steps-per-minute table of the redb file, `step_minutes`: (UTC minute, workflow name) →
//! [`StepCounts`]. Created by the first write that counts a step, so a file of an older binary
//! opens with no such table (read as empty) and the format version stays; an older binary
//! leaves the table alone.

use super::records::opt_table;
use crate::store::error::Result;
use crate::store::minutes::{MinuteRow, StepCounts};
use crate::store::records::{dec, enc};
use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};

pub(crate) const STEP_MINUTES: TableDefinition<(u32, &str), &[u8]> =
    TableDefinition::new("step_minutes");

/// The rows from minute `from` on, in key order.
pub(crate) fn rows(tx: &ReadTransaction, from: u32) -> Result<Vec<MinuteRow>> {
    let Some(t) = opt_table(tx, STEP_MINUTES)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in t.range((from, "")..)? {
        let (k, v) = e?;
        let (minute, workflow) = k.value();
        out.push(MinuteRow {
            minute,
            workflow: workflow.to_string(),
            counts: dec(v.value())?,
        });
    }
    Ok(out)
}

/// Adds `rows` to their rows of the table; deletes the rows before minute `prune_before`.
pub(crate) fn add(
    tx: &WriteTransaction,
    rows: &[MinuteRow],
    prune_before: Option<u32>,
) -> Result<()> {
    let mut t = tx.open_table(STEP_MINUTES)?;
    for r in rows {
        let key = (r.minute, r.workflow.as_str());
        let mut c = match t.get(key)? {
            Some(v) => dec::<StepCounts>(v.value())?,
            None => StepCounts::default(),
        };
        c.add(&r.counts);
        t.insert(key, enc(&c).as_slice())?;
    }
    if let Some(before) = prune_before {
        let old = t.first()?.is_some_and(|(k, _)| k.value().0 < before);
        if old {
            t.retain_in(..(before, ""), |_, _| false)?;
        }
    }
    Ok(())
}
