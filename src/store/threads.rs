//! Threads, the workflow registry (with history), the archive of finished threads, step leases,
//! thread states, limits and removals through the store's handle, and the write transaction
//! every change goes through ([`Writer`]).

use super::error::{Result, StoreError};
use super::handle::Store;
use super::minutes::MinuteRow;
use super::nodes::streamed;
use super::records::{
    Counts, HistoryEntry, Lease, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use super::usage::{Budget, GroupKey, StepCalls, UsageQuery, UsageRow, UsageTotals};
use super::writer::Writer;
use crate::cas::NodeId;
use crate::model::ThreadId;

impl Store {
    /// How much the store holds.
    ///
    /// # Errors
    /// A store failure.
    pub fn counts(&self) -> Result<Counts> {
        self.guard(|| self.read()?.counts())
    }

    /// Every active thread, in id order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        self.guard(|| self.read()?.threads())
    }

    /// The active thread `id`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.guard(|| self.read()?.thread(id))
    }

    /// The registry: name → workflow id, in name order.
    ///
    /// # Errors
    /// A store failure.
    pub fn registry(&self) -> Result<Vec<(String, NodeId)>> {
        self.guard(|| self.read()?.registry())
    }

    /// The registry: name → workflow id, in registration order, as the TypeScript tool lists
    /// its registry object: integer-like names (JavaScript array indices) first in ascending
    /// order, then each name at the place of its first registration (a new version or a
    /// rollback keeps it; `workflow remove` then a registration puts it last).
    ///
    /// # Errors
    /// A store failure.
    pub fn registry_in_order(&self) -> Result<Vec<(String, NodeId)>> {
        self.guard(|| {
            let r = self.read()?;
            let mut names = r.registry()?;
            registration_order(&mut names, &r.registry_places()?);
            Ok(names)
        })
    }

    /// Every version of every registry name: (name, version), the names in registration order
    /// ([`registration_order`]; names no longer registered among them), each oldest first.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn all_registry_history_in_order(&self) -> Result<Vec<(String, RegistryEntry)>> {
        self.guard(|| {
            let r = self.read()?;
            let mut versions = r.all_registry_history()?;
            registration_order(&mut versions, &r.registry_places()?);
            Ok(versions)
        })
    }

    /// Every version of registry name `name`, oldest first.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        self.guard(|| self.read()?.registry_history(name))
    }

    /// Every version of every registry name: (name, version), in name order, oldest first.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>> {
        self.guard(|| self.read()?.all_registry_history())
    }

    /// Visits finished threads in the order they finished.
    ///
    /// # Errors
    /// A store failure, a corrupt record, or the first error of `f`.
    pub fn for_each_history<E: From<StoreError>>(
        &self,
        f: impl FnMut(HistoryEntry) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        streamed(self.path(), f, |each| self.read()?.for_each_history(each))
    }

    /// The latest history entry of thread `id`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        self.guard(|| self.read()?.history_of(id))
    }

    /// The step lease of thread `id`, if one is held.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn lease(&self, id: &ThreadId) -> Result<Option<Lease>> {
        self.guard(|| self.read()?.lease(id))
    }

    /// Every step lease held: (thread, lease), in thread id order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn leases(&self) -> Result<Vec<(ThreadId, Lease)>> {
        self.guard(|| self.read()?.leases())
    }

    /// [`Store::leased_thread`] of each thread of `ids`, in their order, in one read
    /// transaction (one query on a server).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn leased_threads(
        &self,
        ids: &[ThreadId],
    ) -> Result<Vec<super::backend::LeasedThread>> {
        self.guard(|| self.read()?.leased_threads(ids))
    }

    /// Thread `id`'s step lease, record and state, read together. Threads asked for by other
    /// threads of the process while one read runs are read together next, in one read
    /// transaction (one query on a server), as writes are grouped.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn leased_thread(&self, id: &ThreadId) -> Result<super::backend::LeasedThread> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let lead = {
            let mut s = self.lease_reads.state.lock().expect("lease reads lock");
            s.queue.push((id.clone(), tx));
            !std::mem::replace(&mut s.leading, true)
        };
        if lead {
            // Should a read panic past the store's guard, the next caller leads.
            struct Resign<'a>(&'a super::queue::LeaseReads, bool);
            impl Drop for Resign<'_> {
                fn drop(&mut self) {
                    if self.1 {
                        self.0.resign();
                    }
                }
            }
            let mut resign = Resign(&self.lease_reads, true);
            loop {
                let batch = {
                    let mut s = self.lease_reads.state.lock().expect("lease reads lock");
                    if s.queue.is_empty() {
                        s.leading = false;
                        resign.1 = false;
                        break;
                    }
                    std::mem::take(&mut s.queue)
                };
                let ids: Vec<ThreadId> = batch.iter().map(|(t, _)| t.clone()).collect();
                let read = self
                    .guard(|| self.read()?.leased_threads(&ids))
                    .ok()
                    .filter(|r| r.len() == ids.len());
                match read {
                    Some(rows) => {
                        for ((_, to), r) in batch.into_iter().zip(rows) {
                            let _ = to.send(Some(r));
                        }
                    }
                    None => {
                        for (_, to) in batch {
                            let _ = to.send(None);
                        }
                    }
                }
            }
        }
        match rx.recv() {
            Ok(Some(r)) => Ok(r),
            // The read together failed: this thread's alone says why, or succeeds.
            _ => self.guard(|| self.read()?.leased_thread(id)),
        }
    }

    /// The state of thread `id` (the default when none is kept).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn thread_state(&self, id: &ThreadId) -> Result<ThreadState> {
        self.guard(|| self.read()?.thread_state(id))
    }

    /// Every kept thread state, in thread id order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        self.guard(|| self.read()?.thread_states())
    }

    /// Every workflow's limits, in name order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>> {
        self.guard(|| self.read()?.workflow_limits())
    }

    /// The usage aggregate's rows: per thread, UTC day, role and model, of `thread` only when
    /// given. Read from the aggregate the writes keep, never from the steps.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn usage_rows(&self, thread: Option<&str>) -> Result<Vec<UsageRow>> {
        self.guard(|| self.read()?.usage_rows(thread))
    }

    /// The usage aggregate's rows that `q` selects, added up by its groups, in key order (on a
    /// server, by the server).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn usage_sums(&self, q: &UsageQuery<'_>) -> Result<Vec<(GroupKey, UsageTotals)>> {
        self.guard(|| self.read()?.usage_sums(q))
    }

    /// What thread `thread`'s calls add up to, every day, role and model.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn thread_usage(&self, thread: &str) -> Result<UsageTotals> {
        // Summed where the rows are (on a server, by the server).
        let q = UsageQuery {
            thread: Some(thread),
            ..UsageQuery::default()
        };
        let mut t = UsageTotals::default();
        self.usage_sums(&q)?.iter().for_each(|(_, s)| t.add(s));
        Ok(t)
    }

    /// What workflow `name`'s calls add up to on UTC day `day`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn day_usage(&self, name: &str, day: u32) -> Result<UsageTotals> {
        self.guard(|| self.read()?.day_usage(name, day))
    }

    /// Workflow `name`'s UTC days (days since 1970-01-01) that have calls, with what the calls
    /// of each add up to, oldest first: the aggregate the day budget reads, by the name the
    /// workflow gives itself.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn usage_days(&self, name: &str) -> Result<Vec<(u32, UsageTotals)>> {
        self.guard(|| self.read()?.usage_days(name))
    }

    /// The steps and failed steps per UTC minute and workflow name from minute `from` on
    /// ([`super::minute_of`]), in (minute, workflow) order; the store keeps
    /// [`super::KEEP_MINUTES`] of them.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn step_minutes(&self, from: u32) -> Result<Vec<MinuteRow>> {
        self.guard(|| self.read()?.step_minutes(from))
    }

    /// Today, days since 1970-01-01 in UTC: by `now_ms`, or by the server's clock on a server
    /// (the day the calls of a step made now count on).
    ///
    /// # Errors
    /// A store failure.
    pub fn today(&self, now_ms: u64) -> Result<u32> {
        self.guard(|| self.read()?.today(now_ms))
    }

    /// Every budget, in name order (`*` for the store's defaults).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn budgets(&self) -> Result<Vec<(String, Budget)>> {
        self.guard(|| self.read()?.budgets())
    }

    /// The model calls recorded with StepNode `step`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn step_usage(&self, step: NodeId) -> Result<Option<StepCalls>> {
        self.guard(|| self.read()?.step_usage(step))
    }

    /// Every step's recorded calls, in StepNode id order; `f`'s error stops the walk and is
    /// returned unchanged.
    ///
    /// # Errors
    /// A store failure or a corrupt record, or `f`'s.
    pub fn for_each_step_usage<E: From<StoreError>>(
        &self,
        f: impl FnMut((NodeId, StepCalls)) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        streamed(self.path(), f, |each| {
            self.read()?.for_each_step_usage(each)
        })
    }

    /// The next removal's number: an archive records it, and a later `--since` archive takes
    /// the removals from there on.
    ///
    /// # Errors
    /// A store failure.
    pub fn removal_mark(&self) -> Result<u64> {
        self.guard(|| self.read()?.removal_mark())
    }

    /// The removals numbered `from` and later, oldest first.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn removals_since(&self, from: u64) -> Result<Vec<Removal>> {
        self.guard(|| self.read()?.removals_since(from))
    }

    /// Runs `f` in one write transaction and commits it when `f` succeeds.
    ///
    /// # Errors
    /// The error of `f` (nothing is committed then) or a store failure.
    pub fn write<T>(&self, f: impl FnOnce(&mut Writer<'_>) -> Result<T>) -> Result<T> {
        self.guard(|| self.transact(f))
    }

    /// Runs `f` in one write transaction of the backend and commits it when `f` succeeds;
    /// nothing of it is kept when `f` fails.
    pub(crate) fn transact<T>(&self, f: impl FnOnce(&mut Writer<'_>) -> Result<T>) -> Result<T> {
        let mut f = Some(f);
        let mut out = None;
        self.backend.write(&mut |tx| {
            let f = f.take().expect("a write transaction runs its closure once");
            let mut w = Writer::new(tx);
            out = Some(f(&mut w)?);
            w.finish(&self.minutes_pruned)
        })?;
        Ok(out.expect("set by the committed closure"))
    }
}

/// Sorts `(name, _)` pairs into registration order: a
/// JavaScript object's key order over the registry, as the TypeScript tool lists its own:
/// integer-like names (array indices, [`crate::cas::value::array_index`]) first in ascending
/// order, then each name at the place of its first registration, its oldest recorded version
/// (`places`, from [`super::backend::ReadTx::registry_places`]; a rollback or a new version
/// keeps it, and a name registered again after its removal is recorded again at the end, see
/// [`Writer::registry_set`]). A name with no version recorded comes last. The sort is stable,
/// so a name's pairs keep their order.
fn registration_order<T>(pairs: &mut [(String, T)], places: &[(String, u64)]) {
    let places: std::collections::HashMap<&str, u64> =
        places.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let place = |name: &str| places.get(name).copied().unwrap_or(u64::MAX);
    pairs.sort_by_cached_key(|(name, _)| match crate::cas::value::array_index(name) {
        Some(i) => (0, u64::from(i), String::new()),
        None => (1, place(name), name.clone()),
    });
}
