//! [`Writer`]: the one write transaction every change goes through, on any backend, with the
//! rules written once above the backends (merging an import's names, whether a history entry
//! is recorded, the steps per minute a transaction adds and when old minutes go).

use super::backend::WriteTx;
use super::error::Result;
use super::minutes::{KEEP_MINUTES, MinuteRow, PRUNE_EVERY, StepCounts, minute_of};
use super::node::{Prepared, PutOutcome};
use super::records::{
    HistoryEntry, Lease, Merge, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use super::usage::{Budget, StepUsage};
use crate::cas::NodeId;
use crate::model::{FinishReason, ThreadId};

/// Writes inside one transaction; see [`super::Store::write`].
pub struct Writer<'a> {
    tx: &'a mut dyn WriteTx,
    /// The steps and failures the transaction counts, by (minute, workflow name), written
    /// once each when it ends ([`Writer::finish`]): a group commit's steps of one workflow and
    /// minute add to their row once.
    counts: Vec<MinuteRow>,
}

impl<'a> Writer<'a> {
    /// The facade of a backend's write transaction.
    pub(crate) fn new(tx: &'a mut dyn WriteTx) -> Writer<'a> {
        Writer {
            tx,
            counts: Vec::new(),
        }
    }
}

impl Writer<'_> {
    /// Puts nodes (see [`super::Store::put`]).
    ///
    /// # Errors
    /// As [`super::Store::put`].
    pub fn put(&mut self, nodes: &[Prepared], now_ms: u64) -> Result<Vec<PutOutcome>> {
        let items: Vec<(&Prepared, u64)> = nodes.iter().map(|p| (p, now_ms)).collect();
        self.tx.put(&items)
    }

    /// Puts nodes that carry their own first-write timestamps.
    ///
    /// # Errors
    /// As [`super::Store::put`].
    pub(crate) fn put_at(&mut self, nodes: &[(Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        let items: Vec<(&Prepared, u64)> = nodes.iter().map(|(p, t)| (p, *t)).collect();
        self.tx.put(&items)
    }

    /// Whether node `id` is stored, seeing this transaction's writes. On a server it waits out
    /// a sweep in progress first, and a sweep waits for this transaction.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn has(&mut self, id: NodeId) -> Result<bool> {
        self.tx.has(id)
    }

    /// The first node missing from what `from` reaches, seeing this transaction's writes: the
    /// walk does not go past the nodes of `stop` (present ones: checked, not walked) nor past
    /// present nodes other than `from` whose type is in `stop_types`. `None` when all are
    /// stored. A head move checks with it that a collection has not removed what it adds.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn first_missing(
        &mut self,
        from: NodeId,
        stop: &[NodeId],
        stop_types: &[NodeId],
    ) -> Result<Option<NodeId>> {
        self.tx.first_missing(from, stop, stop_types)
    }

    /// Takes the locks of threads `ids` and reads their rows ahead, and whether nodes `nodes`
    /// are stored (holding them, as [`Writer::hold_nodes`]): a group commit's writes about
    /// them then wait for no lock or read of their own (see
    /// [`crate::store::Store::write_grouped_for`]).
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn prefetch(&mut self, ids: &[ThreadId], nodes: &[NodeId]) -> Result<()> {
        self.tx.prefetch(ids, nodes)
    }

    /// From now until the transaction ends, a node present stays present: a collection's
    /// removal waits. A head move takes this before it puts or checks what it adds.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn hold_nodes(&mut self) -> Result<()> {
        self.tx.hold_nodes()
    }

    /// [`Writer::first_missing`] for a head move onto nodes this transaction has put (`put`),
    /// after [`Writer::hold_nodes`]: the walk goes through them in memory, and asks the
    /// backend only when a reference leaves them for a node other than those of `kept`, which
    /// every collection keeps (the old head and the thread's start).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn first_missing_beyond(
        &mut self,
        from: NodeId,
        put: &[Prepared],
        kept: &[NodeId],
        stop_types: &[NodeId],
    ) -> Result<Option<NodeId>> {
        let by_id: foldhash::HashMap<NodeId, &Prepared> = put.iter().map(|p| (p.id, p)).collect();
        let mut seen = foldhash::HashSet::default();
        let mut next = vec![from];
        while let Some(id) = next.pop() {
            if !seen.insert(id) {
                continue;
            }
            match by_id.get(&id) {
                Some(p) if id == from || !stop_types.contains(&p.type_id) => {
                    next.extend(p.refs.iter().copied());
                }
                Some(_) => {}
                None if kept.contains(&id) => {}
                None => return self.first_missing(from, kept, stop_types),
            }
        }
        Ok(None)
    }

    /// The active thread `id`, seeing this transaction's writes: a head moves by
    /// compare-and-swap, checking it here before [`Writer::set_thread`].
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.tx.thread(id)
    }

    /// Every active thread, seeing this transaction's writes.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        self.tx.threads()
    }

    /// Sets thread `id` to `rec` unconditionally.
    ///
    /// # Errors
    /// A store failure.
    pub fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()> {
        self.tx.set_thread(id, rec)
    }

    /// Stores new threads with their states, in one go where the backend can.
    ///
    /// # Errors
    /// [`crate::store::StoreError::ThreadExists`] if one is there already; a store failure.
    pub fn insert_threads(
        &mut self,
        threads: &[(ThreadId, ThreadRecord, ThreadState)],
    ) -> Result<()> {
        self.tx.insert_threads(threads)
    }

    /// Removes thread `id` from the active threads; returns its record.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.tx.remove_thread(id)
    }

    /// Merges an imported thread head: new names are inserted; a different existing head is
    /// kept unless `overwrite`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn merge_thread(
        &mut self,
        id: &ThreadId,
        rec: &ThreadRecord,
        overwrite: bool,
    ) -> Result<Merge> {
        match self.thread(id)? {
            None => {
                self.set_thread(id, rec)?;
                Ok(Merge::Inserted)
            }
            Some(old) if old.head == rec.head => Ok(Merge::Same),
            Some(_) if overwrite => {
                self.set_thread(id, rec)?;
                Ok(Merge::Overwritten)
            }
            Some(_) => Ok(Merge::Kept),
        }
    }

    /// Moves thread `id`, which `rec` is, forward to `head`, a step that continues its head
    /// (steps another tool took on it, brought by an import), as a step of its own would: at
    /// the workflow's end (`done`) it is archived as completed; otherwise its record follows
    /// the new head and the step ends its run of failures. A queued thread is ready (the other
    /// tool ran it); a paused one stays paused.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn fast_forward_thread(
        &mut self,
        id: &ThreadId,
        rec: &ThreadRecord,
        head: NodeId,
        workflow: NodeId,
        done: bool,
        updated_ms: u64,
    ) -> Result<()> {
        let moved = ThreadRecord {
            head,
            workflow: Some(rec.workflow.unwrap_or(workflow)),
            updated_ms,
        };
        if done {
            return self.archive_thread(id, &moved, workflow, FinishReason::Completed, updated_ms);
        }
        let mut state = self.tx.thread_state(id)?;
        let before = state.clone();
        state.failures = 0;
        if state.phase == super::records::Phase::Queued {
            state.phase = super::records::Phase::Ready;
        }
        if state != before {
            self.tx.set_thread_state(id, &state)?;
        }
        self.tx.set_thread(id, &moved)
    }

    /// The registered workflow of `name`.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>> {
        self.tx.registry_get(name)
    }

    /// Registers `workflow` under `name` and records the version with its time.
    ///
    /// # Errors
    /// A store failure.
    pub fn registry_set(&mut self, name: &str, workflow: NodeId, time_ms: u64) -> Result<()> {
        // A name's place in the registry is its oldest version's. Registered again after a
        // `workflow remove`, it goes last as a new name does: its versions are recorded again,
        // in their order, after every other name's.
        if self.tx.registry_get(name)?.is_none() {
            let kept = self.tx.registry_versions(name)?;
            if !kept.is_empty() {
                self.tx.remove_registry_name(name, true)?;
                for e in &kept {
                    self.tx.append_registry_version(name, e)?;
                }
            }
        }
        self.tx.set_registry_name(name, workflow)?;
        self.tx
            .append_registry_version(name, &RegistryEntry { workflow, time_ms })
    }

    /// Whether `name` has any recorded version.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn has_registry_history(&mut self, name: &str) -> Result<bool> {
        self.tx.has_registry_history(name)
    }

    /// Records a version of `name` (an imported registry history) without changing the name.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()> {
        self.tx.append_registry_version(name, e)
    }

    /// Points `name` at `workflow` without recording a version (its history was imported).
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()> {
        self.tx.set_registry_name(name, workflow)
    }

    /// Merges an imported registry name, like [`Writer::merge_thread`].
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn merge_registry(
        &mut self,
        name: &str,
        workflow: NodeId,
        time_ms: u64,
        overwrite: bool,
    ) -> Result<Merge> {
        match self.registry_get(name)? {
            None => {
                self.registry_set(name, workflow, time_ms)?;
                Ok(Merge::Inserted)
            }
            Some(old) if old == workflow => Ok(Merge::Same),
            Some(_) if overwrite => {
                self.registry_set(name, workflow, time_ms)?;
                Ok(Merge::Overwritten)
            }
            Some(_) => Ok(Merge::Kept),
        }
    }

    /// Appends a finished thread to the history.
    ///
    /// # Errors
    /// A store failure.
    pub fn append_history(&mut self, e: &HistoryEntry) -> Result<()> {
        self.tx.append_history(e)
    }

    /// Archives thread `id`, which `rec` was: removes it, its step lease and (unless it failed,
    /// whose last error stays to be read) its state, and records it in the history as finished
    /// for `reason` at `now_ms`, with `workflow` when the record names none. The one way a
    /// thread ends, whoever ends it: its last step, a cancel, a failure, its limit.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn archive_thread(
        &mut self,
        id: &ThreadId,
        rec: &ThreadRecord,
        workflow: NodeId,
        reason: FinishReason,
        now_ms: u64,
    ) -> Result<()> {
        self.tx.remove_thread(id)?;
        self.tx.remove_lease(id)?;
        if reason != FinishReason::Failed {
            self.tx.remove_thread_state(id)?;
        }
        self.tx.append_history(&HistoryEntry {
            thread: id.to_string(),
            workflow: rec.workflow.unwrap_or(workflow).into(),
            head: rec.head.into(),
            completed_at: now_ms,
            reason,
        })
    }

    /// Removes every history entry of thread `id`; returns how many there were.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize> {
        self.tx.remove_history_of(id)
    }

    /// Removes registry name `name`; with `purge` its versions too. Returns whether the name
    /// was registered.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool> {
        self.tx.remove_registry_name(name, purge)
    }

    /// Whether an identical history entry is already recorded for its thread: its latest entry
    /// first (an import brings a thread's line again), then the thread's others.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn has_history(&mut self, e: &HistoryEntry) -> Result<bool> {
        match self.tx.history_latest(&e.thread)? {
            None => Ok(false),
            Some(latest) if latest == *e => Ok(true),
            Some(_) => Ok(self.tx.history_entries_of(&e.thread)?.contains(e)),
        }
    }

    /// The step lease of thread `id`, seeing this transaction's writes.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.tx.lease(id)
    }

    /// Records `lease` as the lease of thread `id`.
    ///
    /// # Errors
    /// A store failure.
    pub fn set_lease(&mut self, id: &ThreadId, lease: &Lease) -> Result<()> {
        self.tx.set_lease(id, lease)
    }

    /// Releases the lease of thread `id`; returns it.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.tx.remove_lease(id)
    }

    /// The state of thread `id`, seeing this transaction's writes.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState> {
        self.tx.thread_state(id)
    }

    /// Every kept thread state, seeing this transaction's writes.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>> {
        self.tx.thread_states()
    }

    /// Sets the state of thread `id` (the default removes its row).
    ///
    /// # Errors
    /// A store failure.
    pub fn set_thread_state(&mut self, id: &ThreadId, s: &ThreadState) -> Result<()> {
        self.tx.set_thread_state(id, s)
    }

    /// Removes the state of thread `id`.
    ///
    /// # Errors
    /// A store failure.
    pub fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()> {
        self.tx.remove_thread_state(id)
    }

    /// Sets (`Some`) or removes (`None`) the limits of workflow `name`; returns the old ones.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        self.tx.set_workflow_limits(name, limits)
    }

    /// Sets (`Some`) or removes (`None`) the budget of workflow `name` (`*`: the store's
    /// defaults); returns the old one.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn set_budget(&mut self, name: &str, budget: Option<&Budget>) -> Result<Option<Budget>> {
        self.tx.set_budget(name, budget)
    }

    /// Records the model calls of a step (once per StepNode) and adds them to the usage
    /// aggregate, on the UTC day of `now_ms` (of the server's clock on a server).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn add_usage(&mut self, u: &StepUsage<'_>, now_ms: u64) -> Result<()> {
        if u.calls.is_empty() {
            return Ok(());
        }
        self.tx.add_usage(u, now_ms)
    }

    /// Makes the transactions that admit threads of one workflow wait for each other, across
    /// processes and machines (a transaction-scoped lock on a server; a file's write
    /// transactions are one at a time already).
    ///
    /// # Errors
    /// A store failure.
    pub fn lock_workflow(&mut self, key: &str) -> Result<()> {
        self.tx.lock_workflow(key)
    }

    /// Records a removal.
    ///
    /// # Errors
    /// A store failure.
    pub fn record_removal(&mut self, r: &Removal) -> Result<()> {
        self.tx.record_removal(r)
    }

    /// Pins stored nodes: a collection keeps them and what they reach. Returns, for each,
    /// whether it was not pinned before.
    ///
    /// # Errors
    /// [`super::StoreError::NotFound`] for an id that is not stored (nothing is pinned then).
    pub(crate) fn pin(&mut self, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>> {
        self.tx.pin(ids, now_ms)
    }

    /// Releases pins; returns, for each id, whether it was pinned.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn unpin(&mut self, ids: &[NodeId]) -> Result<Vec<bool>> {
        self.tx.unpin(ids)
    }

    /// Counts a step of workflow `name` (its head moved) in the UTC minute of `now_ms`.
    pub fn count_step(&mut self, name: &str, now_ms: u64) {
        self.count(
            name,
            now_ms,
            StepCounts {
                steps: 1,
                failures: 0,
            },
        );
    }

    /// Counts a failed step of workflow `name` in the UTC minute of `now_ms`.
    pub fn count_failure(&mut self, name: &str, now_ms: u64) {
        self.count(
            name,
            now_ms,
            StepCounts {
                steps: 0,
                failures: 1,
            },
        );
    }

    fn count(&mut self, name: &str, now_ms: u64, c: StepCounts) {
        let minute = minute_of(now_ms);
        // A transaction counts few rows (a group commit's workflows): a scan finds its own.
        match self
            .counts
            .iter_mut()
            .find(|r| r.minute == minute && r.workflow == name)
        {
            Some(r) => r.counts.add(&c),
            None => self.counts.push(MinuteRow {
                minute,
                workflow: name.to_string(),
                counts: c,
            }),
        }
    }

    /// Ends the transaction's writes: adds what it counted to the steps-per-minute aggregate,
    /// one row each, in (minute, workflow) order (so two transactions lock shared rows in the
    /// same order). The rows older than [`KEEP_MINUTES`] before its newest minute go too when
    /// `pruned`, the minute this process last deleted them at, is [`PRUNE_EVERY`] minutes
    /// behind (its first counting write, then once every ten minutes).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn finish(&mut self, pruned: &std::sync::atomic::AtomicU32) -> Result<()> {
        if self.counts.is_empty() {
            return Ok(());
        }
        let mut rows = std::mem::take(&mut self.counts);
        rows.sort_by(|a, b| (a.minute, &a.workflow).cmp(&(b.minute, &b.workflow)));
        let newest = rows.iter().map(|r| r.minute).max().unwrap_or(0);
        let last = pruned.load(std::sync::atomic::Ordering::Relaxed);
        let prune = (last == 0 || newest >= last.saturating_add(PRUNE_EVERY)).then(|| {
            pruned.store(newest, std::sync::atomic::Ordering::Relaxed);
            newest.saturating_sub(KEEP_MINUTES)
        });
        self.tx.add_step_counts(&rows, prune)
    }
}
