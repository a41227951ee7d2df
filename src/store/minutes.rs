//! Steps and failed steps per UTC minute and workflow name: the aggregate the runner's
//! dashboard reads (`uwf serve`'s `/runs`, `uwf ps --stats`), with its fixed encoding (a
//! MessagePack array, as every record of `records.rs`):
//! - [`StepCounts`]: `[steps, failures]`
//!
//! A step counts in the transaction that moves its thread's head, a failed step in the one that
//! records its failure, both in the minute of the stepping process's clock (the clock every
//! time the store keeps is read from, save the usage's days on a server). A transaction adds
//! to each (minute, workflow) row once, however many steps a group commit holds
//! ([`super::Writer`] merges them). Rows are kept [`KEEP_MINUTES`]: a writer deletes the older
//! ones, at most once every [`PRUNE_EVERY`] minutes a process.

use super::records::Record;

/// Milliseconds in a minute.
pub(crate) const MINUTE_MS: u64 = 60_000;

/// How many minutes of counts the store keeps: 48 hours before the newest minute a process
/// counts in.
pub const KEEP_MINUTES: u32 = 48 * 60;

/// How often (in minutes of the counted steps) a process deletes the rows older than
/// [`KEEP_MINUTES`]: its first counting write, then once every so many minutes.
pub(crate) const PRUNE_EVERY: u32 = 10;

/// The UTC minute of `ms` (ms since the epoch): minutes since 1970-01-01T00:00Z.
pub fn minute_of(ms: u64) -> u32 {
    u32::try_from(ms / MINUTE_MS).unwrap_or(u32::MAX)
}

/// Steps and failed steps, added up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepCounts {
    /// Steps whose head move committed.
    pub steps: u64,
    /// Steps that failed (each failure recorded, whether or not it failed the thread).
    pub failures: u64,
}

impl StepCounts {
    /// Adds other counts.
    pub fn add(&mut self, o: &StepCounts) {
        self.steps += o.steps;
        self.failures += o.failures;
    }
}

impl Record for StepCounts {
    type Wire = (u64, u64);
    const WHAT: &'static str = "step counts";
    fn to_wire(&self) -> Self::Wire {
        (self.steps, self.failures)
    }
    fn from_wire((steps, failures): Self::Wire) -> Self {
        StepCounts { steps, failures }
    }
}

/// One row of the aggregate: a workflow's steps in one UTC minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinuteRow {
    /// The UTC minute ([`minute_of`]).
    pub minute: u32,
    /// The workflow's name (the name the workflow gives itself, as the usage's days use).
    pub workflow: String,
    /// Its counts.
    pub counts: StepCounts,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::{dec, enc};

    #[test]
    fn step_counts_golden() {
        let c = StepCounts {
            steps: 3,
            failures: 0,
        };
        assert_eq!(enc(&c), [0x92, 0x03, 0x00]);
        let big = StepCounts {
            steps: 300,
            failures: 1,
        };
        assert_eq!(enc(&big), [0x92, 0xcd, 0x01, 0x2c, 0x01]);
        assert_eq!(dec::<StepCounts>(&enc(&big)).expect("decodes"), big);
    }

    #[test]
    fn minutes_of_times() {
        // 2026-01-01T00:00:00Z and a minute later, less a millisecond.
        assert_eq!(minute_of(1_767_225_600_000), 29_453_760);
        assert_eq!(minute_of(1_767_225_659_999), 29_453_760);
        assert_eq!(minute_of(u64::MAX), u32::MAX);
    }
}
