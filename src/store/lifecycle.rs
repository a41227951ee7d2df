//! Where an active thread stands besides its head: queued behind its workflow's concurrency
//! limit or paused by hand, the round limit it was started with, and its consecutive failed
//! steps with the last error.
//!
//! Table `thread_state`: thread id → [`ThreadState`], the MessagePack array
//! `[phase, max_rounds | nil, failures, nil | [time_ms, agent, message]]` (`records.rs`). A
//! thread without a row is ready, unlimited and without failures; the row goes with the thread
//! when it is archived.

use super::records::{dec, enc};
use super::{Result, Store, Writer};
use crate::workflow::ThreadId;
use redb::{ReadableTable, TableDefinition, WriteTransaction};

pub(crate) const THREAD_STATE: TableDefinition<&str, &[u8]> = TableDefinition::new("thread_state");

/// Whether an active thread may be stepped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    /// Ready for its next step.
    #[default]
    Ready,
    /// Waiting for room under its workflow's concurrency limit.
    Queued,
    /// Paused by hand (`thread pause`).
    Paused,
}

impl Phase {
    pub(crate) fn code(self) -> u8 {
        match self {
            Phase::Ready => 0,
            Phase::Queued => 1,
            Phase::Paused => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Phase {
        match c {
            1 => Phase::Queued,
            2 => Phase::Paused,
            _ => Phase::Ready,
        }
    }
}

/// A failed step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure {
    /// When it failed, ms since the epoch.
    pub time_ms: u64,
    /// The agent that ran.
    pub agent: String,
    /// The error, one line.
    pub message: String,
}

/// The state of an active thread besides its head.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadState {
    /// Ready, queued or paused.
    pub phase: Phase,
    /// The most steps the thread may take (`thread start --max-rounds`).
    pub max_rounds: Option<u32>,
    /// Consecutive failed steps.
    pub failures: u32,
    /// The last failed step.
    pub last_error: Option<StepFailure>,
}

impl ThreadState {
    /// Whether this is the state of a thread without a row.
    pub fn is_default(&self) -> bool {
        *self == ThreadState::default()
    }
}

/// Creates the table of this module (migration and first use).
pub(crate) fn create_tables(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(THREAD_STATE)?;
    Ok(())
}

impl Store {
    /// The state of thread `id` (the default when it has no row).
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn thread_state(&self, id: &ThreadId) -> Result<ThreadState> {
        if let Some(pg) = self.pg() {
            return pg.thread_state(id);
        }
        self.guard(|| {
            let tx = self.begin_read()?;
            let t = match tx.open_table(THREAD_STATE) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(ThreadState::default()),
                Err(e) => return Err(e.into()),
            };
            Ok(t.get(id.as_str())?
                .map(|v| dec(v.value()))
                .transpose()?
                .unwrap_or_default())
        })
    }

    /// Every thread with a state row, in thread id order.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        if let Some(pg) = self.pg() {
            return pg.thread_states();
        }
        self.thread_records(THREAD_STATE)
    }
}

impl Writer<'_> {
    /// The state of thread `id`, seeing this transaction's writes.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState> {
        if let Some(w) = self.pg() {
            return w.thread_state(id);
        }
        let t = self.redb()?.open_table(THREAD_STATE)?;
        Ok(t.get(id.as_str())?
            .map(|v| dec(v.value()))
            .transpose()?
            .unwrap_or_default())
    }

    /// Every thread with a state row, seeing this transaction's writes.
    ///
    /// # Errors
    /// A redb failure or a corrupt record.
    pub fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>> {
        if let Some(w) = self.pg() {
            return w.thread_states();
        }
        super::leases::all_records(&self.redb()?.open_table(THREAD_STATE)?)
    }

    /// Sets the state of thread `id`; the default state removes its row.
    ///
    /// # Errors
    /// A redb failure.
    pub fn set_thread_state(&mut self, id: &ThreadId, s: &ThreadState) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.set_thread_state(id, s);
        }
        let mut t = self.redb()?.open_table(THREAD_STATE)?;
        if s.is_default() {
            t.remove(id.as_str())?;
        } else {
            t.insert(id.as_str(), enc(s).as_slice())?;
        }
        Ok(())
    }

    /// Removes the state row of thread `id` (it was archived).
    ///
    /// # Errors
    /// A redb failure.
    pub fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()> {
        if let Some(w) = self.pg() {
            return w.remove_thread_state(id);
        }
        self.redb()?.open_table(THREAD_STATE)?.remove(id.as_str())?;
        Ok(())
    }
}
