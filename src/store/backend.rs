//! The seam between the store's facade ([`super::Store`], [`super::Snapshot`],
//! [`super::Writer`]) and the backends that keep its data: the redb file (`redb/`), a
//! PostgreSQL server (`pg/`) and memory (`memory/`).
//!
//! A backend offers three things: read transactions ([`ReadTx`]: a consistent view for many
//! reads where the backend has one), write transactions ([`WriteTx`]: committed whole or not at
//! all, every head move a compare-and-swap inside one) and maintenance ([`Backend`]'s own
//! methods: garbage collection, verify, reindex, compaction). The rules that hold on every
//! backend (what archiving a thread writes, what an import merges, the walk's check of a
//! missing node's referrer, the limits a start honours) are written once, above this seam; a
//! backend does only the narrow part underneath. Nothing above the seam asks which backend it
//! is on.

use super::error::Result;
use super::minutes::MinuteRow;
use super::node::{Prepared, PutOutcome, StoredNode, WalkStats};
use super::records::{
    Counts, HistoryEntry, Lease, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use super::report::{Count, GcOptions, GcReport, Progress, VerifyReport};
use super::types::TypeInfo;
use super::usage::{Budget, GroupKey, StepCalls, StepUsage, UsageQuery, UsageRow, UsageTotals};
use crate::cas::NodeId;
use crate::model::ThreadId;
use std::ops::ControlFlow;
use std::sync::Arc;

/// A thread's step lease, record and state ([`ReadTx::leased_thread`]).
pub(crate) type LeasedThread = (Option<Lease>, Option<ThreadRecord>, ThreadState);

/// The schemas a backend needs to find references (reindex, verify, gc), from the store
/// handle's cache.
pub(crate) trait Types {
    /// The schema and checks of `type_id`.
    ///
    /// # Errors
    /// [`super::StoreError::UnknownType`] when no schema node has this id.
    fn type_info(&self, type_id: NodeId) -> Result<Arc<TypeInfo>>;
}

/// The order of a walk over every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// By id.
    Id,
    /// By write sequence, the nodes whose sequence number is in `from..until`.
    Written {
        /// The first sequence number.
        from: u64,
        /// The sequence number after the last.
        until: u64,
    },
}

/// A visitor of nodes: `Break` stops the walk (the caller keeps its reason).
pub(crate) type Each<'a, T> = &'a mut dyn FnMut(T) -> ControlFlow<()>;

/// What a walk reports, in walk order: a run of present nodes, or one missing node with the
/// node that referenced it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Walked<'a> {
    /// Present nodes, in walk order.
    Found(&'a [NodeId]),
    /// A referenced node that is not stored, and its referrer (`None` for the root).
    Missing(NodeId, Option<NodeId>),
}

/// A visitor of a walk; an error stops the walk.
pub(crate) type Visit<'a> = &'a mut dyn FnMut(Walked<'_>) -> Result<()>;

/// Hands a backend's walk to its visitor: present nodes in runs (one call per run, not per
/// node), a missing node at once, after the run before it; counts both.
pub(crate) struct WalkReport<'v> {
    visit: Visit<'v>,
    found: Vec<NodeId>,
    stats: WalkStats,
}

impl<'v> WalkReport<'v> {
    /// Nodes handed on in one run.
    const RUN: usize = 1024;

    pub(crate) fn new(visit: Visit<'v>) -> Self {
        Self {
            visit,
            found: Vec::with_capacity(Self::RUN),
            stats: WalkStats::default(),
        }
    }

    /// A present node.
    #[inline]
    pub(crate) fn found(&mut self, id: NodeId) -> Result<()> {
        self.stats.visited += 1;
        self.found.push(id);
        if self.found.len() == Self::RUN {
            self.flush()?;
        }
        Ok(())
    }

    /// A missing node and its referrer.
    pub(crate) fn missing(&mut self, id: NodeId, parent: Option<NodeId>) -> Result<()> {
        self.flush()?;
        self.stats.missing += 1;
        (self.visit)(Walked::Missing(id, parent))
    }

    /// The totals, once the last run is handed on.
    pub(crate) fn finish(mut self) -> Result<WalkStats> {
        self.flush()?;
        Ok(self.stats)
    }

    fn flush(&mut self) -> Result<()> {
        if !self.found.is_empty() {
            (self.visit)(Walked::Found(&self.found))?;
            self.found.clear();
        }
        Ok(())
    }
}

/// A store's data, kept somewhere.
pub(crate) trait Backend: Send + Sync {
    /// The backend's name (`redb`, `postgresql`, `memory`).
    fn name(&self) -> &'static str;

    /// The backend as `Any`, for tests of one backend's own records.
    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any;

    /// The version of the backend's format (the file's format version, the server's schema
    /// version).
    ///
    /// # Errors
    /// A store failure.
    fn format_version(&self) -> Result<u64>;

    /// A read transaction: what it reads is the store as it was when it began (on a server,
    /// each read sees the latest commit; nodes never change there).
    ///
    /// # Errors
    /// A store failure.
    fn read(&self) -> Result<Box<dyn ReadTx>>;

    /// Runs `f` in one write transaction and commits it when `f` succeeds; nothing of it is
    /// kept when `f` fails. `f` is called once.
    ///
    /// # Errors
    /// The error of `f`, or a store failure (nothing is committed then).
    fn write(&self, f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>) -> Result<()>;

    /// Whether write transactions run one at a time (a file's one writer): a write of its own
    /// then waits for the group commit's and adds a commit, where a server runs it beside the
    /// group on a connection of its own.
    fn one_writer(&self) -> bool {
        true
    }

    /// A bulk load: puts sharing write transactions, committed every `commit_every` nodes.
    fn bulk(&self, commit_every: usize) -> Box<dyn BulkLoad + '_>;

    /// Calls `f` whenever a thread starts or a step lease is freed, by any process on any
    /// machine, where the backend can tell (a server's notifications); `None` where a caller
    /// watches the file instead.
    fn listen(&self, f: Box<dyn Fn() + Send + 'static>) -> Option<super::pg::Listener>;

    /// Collects garbage (see [`super::Store::gc`]).
    ///
    /// # Errors
    /// A store failure, [`super::StoreError::GcRunning`].
    fn gc(&self, types: &dyn Types, opts: &GcOptions<'_>) -> Result<GcReport>;

    /// What a collection would find, without one.
    ///
    /// # Errors
    /// A store failure.
    fn count(&self) -> Result<Count>;

    /// Gives the space of removed data back (a redb compaction, a server's `VACUUM`).
    ///
    /// # Errors
    /// A store failure, [`super::StoreError::InUse`].
    fn compact(&mut self) -> Result<()>;

    /// The bytes the store takes.
    ///
    /// # Errors
    /// A store failure.
    fn size_bytes(&self) -> Result<u64>;

    /// Re-checks every node and index (see [`super::Store::verify`]).
    ///
    /// # Errors
    /// A store failure.
    fn verify(&self, types: &dyn Types, progress: Progress<'_>) -> Result<VerifyReport>;

    /// Rebuilds everything derived from the nodes; returns the nodes read.
    ///
    /// # Errors
    /// A store failure.
    fn reindex(&self, types: &dyn Types, progress: Progress<'_>) -> Result<u64>;

    /// Sets the recorded format version (tests of migrations).
    ///
    /// # Errors
    /// A store failure, or a backend without such a record.
    fn force_version(&self, v: u64) -> Result<()>;
}

/// Puts sharing write transactions: see [`super::Store::bulk`].
pub(crate) trait BulkLoad {
    /// Puts nodes with their first-write timestamps; commits when enough are pending.
    ///
    /// # Errors
    /// As [`WriteTx::put`].
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>>;

    /// Commits what is pending.
    ///
    /// # Errors
    /// A store failure.
    fn commit(&mut self) -> Result<()>;

    /// Commits what is pending and ends the load (a server then analyzes a large one).
    ///
    /// # Errors
    /// A store failure.
    fn finish(&mut self) -> Result<()>;
}

/// Reads inside one read transaction.
pub(crate) trait ReadTx {
    /// The node `id`, if stored.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn get(&self, id: NodeId) -> Result<Option<StoredNode>>;

    /// Reads the nodes of `ids` ahead, where a read costs a round trip; nothing elsewhere.
    ///
    /// # Errors
    /// A store failure.
    fn read_ahead(&self, _ids: &[NodeId]) -> Result<()> {
        Ok(())
    }

    /// Reads the chain of a thread ending at `head` ahead, where a read costs a round trip.
    ///
    /// # Errors
    /// A store failure.
    fn read_chain_ahead(&self, _head: NodeId, _step: NodeId) -> Result<()> {
        Ok(())
    }

    /// The type of node `id`, if stored.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn type_of(&self, id: NodeId) -> Result<Option<NodeId>>;

    /// The digests of `ids` (`None` for one not stored), in their order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>>;

    /// Whether `id` is stored.
    ///
    /// # Errors
    /// A store failure.
    fn has(&self, id: NodeId) -> Result<bool>;

    /// How many nodes are stored.
    ///
    /// # Errors
    /// A store failure.
    fn node_count(&self) -> Result<u64>;

    /// Up to 10 stored ids in `lo..=hi`, in id order.
    ///
    /// # Errors
    /// A store failure.
    fn ids_in(&self, lo: u64, hi: u64) -> Result<Vec<NodeId>>;

    /// The stored references of node `id`, in schema order; `None` when it is not stored.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>>;

    /// Breadth-first walk from `root`, root first, each node once; a missing node comes with
    /// the node that referenced it.
    ///
    /// # Errors
    /// A store failure, or the first error `visit` returns.
    fn walk(&self, root: NodeId, visit: Visit<'_>) -> Result<WalkStats>;

    /// Ids of type `type_id`, in write order.
    ///
    /// # Errors
    /// A store failure.
    fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>>;

    /// Visits stored nodes in `order`, streaming.
    ///
    /// # Errors
    /// A store failure or damage met on the way.
    fn for_each_node(&self, order: Order, f: Each<'_, StoredNode>) -> Result<()>;

    /// Visits the type index: (type, id) pairs in type order, then write order.
    ///
    /// # Errors
    /// A store failure.
    fn for_each_indexed(&self, f: Each<'_, (NodeId, NodeId)>) -> Result<()>;

    /// The next sequence number a node would be stored under.
    ///
    /// # Errors
    /// A store failure.
    fn write_mark(&self) -> Result<u64>;

    /// The last node written before the write mark `mark`.
    ///
    /// # Errors
    /// A store failure.
    fn last_written_before(&self, mark: u64) -> Result<Option<(u64, NodeId)>>;

    /// How much the store holds.
    ///
    /// # Errors
    /// A store failure.
    fn counts(&self) -> Result<Counts>;

    /// Every active thread, in id order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>>;

    /// The active thread `id`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>>;

    /// Every registry name with its workflow, in name order.
    ///
    /// # Errors
    /// A store failure.
    fn registry(&self) -> Result<Vec<(String, NodeId)>>;

    /// The versions of `name`, oldest first.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>>;

    /// Every version of every name, by name then age.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>>;

    /// Each name with versions and the sequence number of its oldest version (versions of all
    /// names are numbered in one sequence, in the order they were recorded).
    ///
    /// # Errors
    /// A store failure.
    fn registry_places(&self) -> Result<Vec<(String, u64)>>;

    /// Visits the finished threads in the order they finished.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn for_each_history(&self, f: Each<'_, HistoryEntry>) -> Result<()>;

    /// The latest history entry of thread `id`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>>;

    /// Every step lease.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn leases(&self) -> Result<Vec<(ThreadId, Lease)>>;

    /// The step lease of thread `id`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn lease(&self, id: &ThreadId) -> Result<Option<Lease>>;

    /// The state of thread `id` (the default when none is kept).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn thread_state(&self, id: &ThreadId) -> Result<ThreadState>;

    /// Thread `id`'s step lease, record and state, read together (one round trip on a
    /// server).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn leased_thread(&self, id: &ThreadId) -> Result<LeasedThread> {
        Ok((self.lease(id)?, self.thread(id)?, self.thread_state(id)?))
    }

    /// [`ReadTx::leased_thread`] of each thread of `ids`, in their order (one round trip for
    /// all on a server).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn leased_threads(&self, ids: &[ThreadId]) -> Result<Vec<LeasedThread>> {
        ids.iter().map(|id| self.leased_thread(id)).collect()
    }

    /// Every kept thread state.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>>;

    /// Every workflow's limits, in name order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>>;

    /// The number the next removal will be recorded under.
    ///
    /// # Errors
    /// A store failure.
    fn removal_mark(&self) -> Result<u64>;

    /// The removals recorded from number `from` on, in order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn removals_since(&self, from: u64) -> Result<Vec<Removal>>;

    /// Every pinned node with the time it was pinned.
    ///
    /// # Errors
    /// A store failure.
    fn pins(&self) -> Result<Vec<(NodeId, u64)>>;

    /// The usage aggregate's rows (thread, day, role, model), of `thread` only when given.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn usage_rows(&self, thread: Option<&str>) -> Result<Vec<UsageRow>>;

    /// The model calls recorded with StepNode `step`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn step_usage(&self, step: NodeId) -> Result<Option<StepCalls>>;

    /// Every step's recorded calls, in StepNode id order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn for_each_step_usage(&self, f: Each<'_, (NodeId, StepCalls)>) -> Result<()>;

    /// The totals of workflow `name`'s calls on UTC day `day`.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn day_usage(&self, name: &str, day: u32) -> Result<UsageTotals>;

    /// The UTC days of workflow `name` that have calls, with their totals, oldest first.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn usage_days(&self, name: &str) -> Result<Vec<(u32, UsageTotals)>>;

    /// Every budget, in name order (`*` for the store's defaults).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn budgets(&self) -> Result<Vec<(String, Budget)>>;

    /// The aggregate's rows `q` selects, added up by its groups, in key order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn usage_sums(&self, q: &UsageQuery<'_>) -> Result<Vec<(GroupKey, UsageTotals)>> {
        Ok(super::usage::sum_rows(&self.usage_rows(q.thread)?, q))
    }

    /// The rows of the steps-per-minute aggregate from UTC minute `from` on, in (minute,
    /// workflow) order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    fn step_minutes(&self, from: u32) -> Result<Vec<MinuteRow>>;

    /// Today's UTC day, days since 1970-01-01: of `now_ms`, or of the server's clock on a
    /// server.
    ///
    /// # Errors
    /// A store failure.
    fn today(&self, now_ms: u64) -> Result<u32> {
        Ok(u32::try_from(now_ms / super::usage::DAY_MS).unwrap_or(u32::MAX))
    }
}

/// Writes inside one write transaction: see [`super::Writer`], whose methods document each.
#[allow(missing_docs)]
pub(crate) trait WriteTx {
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>>;
    fn has(&mut self, id: NodeId) -> Result<bool>;
    /// Takes the locks of threads `ids` (in one order, whatever theirs) and reads their rows
    /// ahead, and whether nodes `nodes` are stored (holding them, as [`WriteTx::hold_nodes`]
    /// does, when there are any), for writes about them that follow in this transaction
    /// (nothing to do where a write transaction excludes every other and reads cost no round
    /// trip).
    fn prefetch(&mut self, _ids: &[ThreadId], _nodes: &[NodeId]) -> Result<()> {
        Ok(())
    }
    /// From now until the transaction ends, a node present stays present: a collection's
    /// removal waits (nothing to do where a write transaction excludes collections).
    fn hold_nodes(&mut self) -> Result<()> {
        Ok(())
    }
    fn first_missing(
        &mut self,
        from: NodeId,
        stop: &[NodeId],
        stop_types: &[NodeId],
    ) -> Result<Option<NodeId>>;
    fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>>;
    fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>>;
    fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()>;
    /// Stores new threads with their states; [`crate::store::StoreError::ThreadExists`] if one
    /// is there already (the caller's write then rolls back).
    fn insert_threads(&mut self, threads: &[(ThreadId, ThreadRecord, ThreadState)]) -> Result<()> {
        for (id, rec, state) in threads {
            if self.thread(id)?.is_some() {
                return Err(crate::store::StoreError::ThreadExists(id.to_string()));
            }
            self.set_thread(id, rec)?;
            self.set_thread_state(id, state)?;
        }
        Ok(())
    }
    fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>>;
    fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>>;
    fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()>;
    fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()>;
    fn has_registry_history(&mut self, name: &str) -> Result<bool>;
    /// The versions of `name`, oldest first.
    fn registry_versions(&mut self, name: &str) -> Result<Vec<RegistryEntry>>;
    fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool>;
    fn append_history(&mut self, e: &HistoryEntry) -> Result<()>;
    fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize>;
    fn history_latest(&mut self, thread: &str) -> Result<Option<HistoryEntry>>;
    fn history_entries_of(&mut self, thread: &str) -> Result<Vec<HistoryEntry>>;
    fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>>;
    fn set_lease(&mut self, id: &ThreadId, lease: &Lease) -> Result<()>;
    fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>>;
    fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState>;
    fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>>;
    fn set_thread_state(&mut self, id: &ThreadId, s: &ThreadState) -> Result<()>;
    fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()>;
    fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>>;
    fn lock_workflow(&mut self, key: &str) -> Result<()>;
    fn record_removal(&mut self, r: &Removal) -> Result<()>;
    fn pin(&mut self, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>>;
    fn unpin(&mut self, ids: &[NodeId]) -> Result<Vec<bool>>;
    /// Records a step's calls (once: a step recorded already is left as it is) and adds them
    /// to the aggregate's rows of their day (the thread's and the workflow's): `u.day`, else
    /// the UTC day of `now_ms`, or of the server's clock where the backend has one.
    fn add_usage(&mut self, u: &StepUsage<'_>, now_ms: u64) -> Result<()>;
    fn set_budget(&mut self, name: &str, budget: Option<&Budget>) -> Result<Option<Budget>>;
    /// Adds `rows` (one per (minute, workflow), in that order) to the steps-per-minute
    /// aggregate, and deletes its rows of minutes before `prune_before` when given.
    fn add_step_counts(&mut self, rows: &[MinuteRow], prune_before: Option<u32>) -> Result<()>;
}
