//! The PostgreSQL server as a backend of the store: reads as queries (nodes never change on the
//! server, so a read transaction is the server's latest state, with the nodes it read kept),
//! writes in one server transaction each.

use super::{CHAIN_PAGE, Pg, PgWriter, gc};
use crate::cas::NodeId;
use crate::model::ThreadId;
use crate::store::backend::{Backend, BulkLoad, Each, Order, ReadTx, Types, Visit, WriteTx};
use crate::store::error::{Result, StoreError};
use crate::store::minutes::MinuteRow;
use crate::store::node::{Prepared, PutOutcome, StoredNode, WalkStats};
use crate::store::records::{
    Counts, HistoryEntry, Lease, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use crate::store::report::{Count, GcOptions, GcReport, Progress, VerifyReport};
use crate::store::usage::{
    Budget, GroupKey, StepCalls, StepUsage, UsageQuery, UsageRow, UsageTotals,
};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, MutexGuard};

/// Nodes a bulk load brings before the server's tables are analyzed at its end.
const ANALYZE_FROM: usize = 10_000;

/// A store on a PostgreSQL server.
pub(crate) struct PgBackend(pub(crate) Arc<Pg>);

/// Why a streamed read stopped: the visitor's wish, or a failure.
enum Halt {
    Stop,
    Failed(StoreError),
}

impl From<StoreError> for Halt {
    fn from(e: StoreError) -> Self {
        Halt::Failed(e)
    }
}

/// A visitor that stops a streamed read when `f` breaks.
fn halting<T>(f: Each<'_, T>) -> impl FnMut(T) -> std::result::Result<(), Halt> + '_ {
    move |t| match f(t) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => Err(Halt::Stop),
    }
}

fn halted(r: std::result::Result<(), Halt>) -> Result<()> {
    match r {
        Ok(()) | Err(Halt::Stop) => Ok(()),
        Err(Halt::Failed(e)) => Err(e),
    }
}

impl Backend for PgBackend {
    fn name(&self) -> &'static str {
        "postgresql"
    }

    fn one_writer(&self) -> bool {
        false
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn format_version(&self) -> Result<u64> {
        Ok(self.0.schema_version()?.unwrap_or(0))
    }

    fn read(&self) -> Result<Box<dyn ReadTx>> {
        Ok(Box::new(PgRead {
            pg: self.0.clone(),
            ahead: Mutex::default(),
        }))
    }

    fn write(&self, f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>) -> Result<()> {
        let mut c = self.0.conn()?;
        let mut tx = PgTx {
            w: PgWriter::begin(&self.0, &mut c)?,
            pg: &self.0,
        };
        f(&mut tx)?;
        tx.w.commit()
    }

    fn bulk(&self, _commit_every: usize) -> Box<dyn BulkLoad + '_> {
        Box::new(PgBulk {
            backend: self,
            loaded: 0,
        })
    }

    fn listen(&self, f: Box<dyn Fn() + Send + 'static>) -> Option<super::Listener> {
        Some(self.0.listen(f))
    }

    fn gc(&self, _types: &dyn Types, opts: &GcOptions<'_>) -> Result<GcReport> {
        gc::gc(&self.0, opts)
    }

    fn count(&self) -> Result<Count> {
        gc::count(&self.0)
    }

    fn compact(&mut self) -> Result<()> {
        gc::vacuum(&self.0)
    }

    fn size_bytes(&self) -> Result<u64> {
        gc::size_bytes(&self.0)
    }

    fn verify(&self, types: &dyn Types, progress: Progress<'_>) -> Result<VerifyReport> {
        self.0.verify(types, progress)
    }

    fn reindex(&self, types: &dyn Types, progress: Progress<'_>) -> Result<u64> {
        self.0.reindex(types, progress)
    }

    fn force_version(&self, _v: u64) -> Result<()> {
        Err(StoreError::Unsupported {
            server: self.0.server().to_string(),
        })
    }
}

/// Puts of a bulk load: each its own transaction (a `COPY` for a large one).
struct PgBulk<'a> {
    backend: &'a PgBackend,
    loaded: usize,
}

impl BulkLoad for PgBulk<'_> {
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        self.loaded += items.len();
        let mut out = Vec::new();
        self.backend.write(&mut |w| {
            out = w.put(items)?;
            Ok(())
        })?;
        Ok(out)
    }

    fn commit(&mut self) -> Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        // The server's planner needs statistics of what a large load brought, or a walk over
        // it scans whole tables.
        if self.loaded >= ANALYZE_FROM {
            self.backend.0.analyze()?;
        }
        Ok(())
    }
}

/// Reads from the server, with the nodes read kept for the reads that follow.
struct PgRead {
    pg: Arc<Pg>,
    /// Nodes read from the server, ahead or one by one, by id.
    ahead: Mutex<HashMap<NodeId, StoredNode>>,
}

impl PgRead {
    fn ahead(&self) -> MutexGuard<'_, HashMap<NodeId, StoredNode>> {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ReadTx for PgRead {
    fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        if let Some(n) = self.ahead().get(&id) {
            return Ok(Some(n.clone()));
        }
        // Kept for later reads (a step reads its role's schemas more than once).
        let n = self.pg.get(id)?;
        if let Some(n) = &n {
            self.ahead().insert(id, n.clone());
        }
        Ok(n)
    }

    fn read_ahead(&self, ids: &[NodeId]) -> Result<()> {
        let want: Vec<NodeId> = {
            let have = self.ahead();
            ids.iter()
                .copied()
                .filter(|id| !have.contains_key(id))
                .collect()
        };
        if want.len() > 1 {
            let nodes = self.pg.get_many(&want)?;
            self.ahead().extend(nodes.into_iter().map(|n| (n.id, n)));
        }
        Ok(())
    }

    /// A query a page of nodes instead of one a node: `head`, then, while the node is of type
    /// `step`, the node its first reference names; it stops at a node read already (a damaged
    /// chain may loop). A reader still checks each link itself.
    fn read_chain_ahead(&self, head: NodeId, step: NodeId) -> Result<()> {
        let mut cur = head;
        loop {
            if self.ahead().contains_key(&cur) {
                // Read already, or a cycle (which the reader reports).
                return Ok(());
            }
            let page = self.pg.chain(cur, step, CHAIN_PAGE)?;
            let full = page.len() == CHAIN_PAGE as usize;
            let mut ahead = self.ahead();
            let mut next = None;
            for (n, after) in page {
                if n.type_id != step {
                    next = None;
                } else {
                    next = after;
                }
                if ahead.insert(n.id, n).is_some() {
                    return Ok(());
                }
            }
            match next {
                Some(n) if full => cur = n,
                _ => return Ok(()),
            }
        }
    }

    fn type_of(&self, id: NodeId) -> Result<Option<NodeId>> {
        self.pg.type_of(id)
    }

    fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>> {
        self.pg.digests(ids)
    }

    fn has(&self, id: NodeId) -> Result<bool> {
        self.pg.has(id)
    }

    fn node_count(&self) -> Result<u64> {
        self.pg.node_count()
    }

    fn ids_in(&self, lo: u64, hi: u64) -> Result<Vec<NodeId>> {
        self.pg.ids_in(lo, hi)
    }

    fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        self.pg.refs(id)
    }

    fn walk(&self, root: NodeId, visit: Visit<'_>) -> Result<WalkStats> {
        self.pg.walk(root, visit)
    }

    fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        self.pg.list_by_type(type_id)
    }

    fn for_each_node(&self, order: Order, f: Each<'_, StoredNode>) -> Result<()> {
        halted(match order {
            Order::Id => self.pg.for_each_node(false, halting(f)),
            Order::Written { from: 0, until } if until == u64::MAX => {
                self.pg.for_each_node(true, halting(f))
            }
            Order::Written { from, until } => {
                gc::for_each_node_written_between(&self.pg, from, until, halting(f))
            }
        })
    }

    fn for_each_indexed(&self, f: Each<'_, (NodeId, NodeId)>) -> Result<()> {
        let mut f = halting(f);
        halted(gc::for_each_indexed(&self.pg, |t, id| f((t, id))))
    }

    fn write_mark(&self) -> Result<u64> {
        gc::write_mark(&self.pg)
    }

    fn last_written_before(&self, mark: u64) -> Result<Option<(u64, NodeId)>> {
        gc::last_written_before(&self.pg, mark)
    }

    fn counts(&self) -> Result<Counts> {
        let [nodes, threads, history, workflows, leases] = self.pg.counts()?;
        Ok(Counts {
            nodes,
            threads,
            history,
            workflows,
            leases,
        })
    }

    fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        self.pg.threads()
    }

    fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.pg.thread(id)
    }

    fn registry(&self) -> Result<Vec<(String, NodeId)>> {
        self.pg.registry()
    }

    fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        self.pg.registry_history(name)
    }

    fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>> {
        self.pg.all_registry_history()
    }

    fn registry_places(&self) -> Result<Vec<(String, u64)>> {
        self.pg.registry_places()
    }

    fn for_each_history(&self, f: Each<'_, HistoryEntry>) -> Result<()> {
        halted(self.pg.for_each_history(halting(f)))
    }

    fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        self.pg.history_of(id)
    }

    fn leases(&self) -> Result<Vec<(ThreadId, Lease)>> {
        self.pg.leases()
    }

    fn lease(&self, id: &ThreadId) -> Result<Option<Lease>> {
        self.pg.lease(id)
    }

    fn thread_state(&self, id: &ThreadId) -> Result<ThreadState> {
        self.pg.thread_state(id)
    }

    fn leased_thread(&self, id: &ThreadId) -> Result<crate::store::backend::LeasedThread> {
        self.pg.leased_thread(id)
    }

    fn leased_threads(&self, ids: &[ThreadId]) -> Result<Vec<crate::store::backend::LeasedThread>> {
        self.pg.leased_threads(ids)
    }

    fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        self.pg.thread_states()
    }

    fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>> {
        self.pg.workflow_limits()
    }

    fn usage_rows(&self, thread: Option<&str>) -> Result<Vec<UsageRow>> {
        self.pg.usage_rows(thread)
    }

    fn step_usage(&self, step: NodeId) -> Result<Option<StepCalls>> {
        self.pg.step_usage(step)
    }

    fn for_each_step_usage(&self, f: Each<'_, (NodeId, StepCalls)>) -> Result<()> {
        self.pg.for_each_step_usage(f)
    }

    fn day_usage(&self, name: &str, day: u32) -> Result<UsageTotals> {
        self.pg.day_usage(name, day)
    }

    fn usage_days(&self, name: &str) -> Result<Vec<(u32, UsageTotals)>> {
        self.pg.usage_days(name)
    }

    fn budgets(&self) -> Result<Vec<(String, Budget)>> {
        self.pg.budgets()
    }

    fn usage_sums(&self, q: &UsageQuery<'_>) -> Result<Vec<(GroupKey, UsageTotals)>> {
        self.pg.usage_sums(q)
    }

    fn today(&self, _now_ms: u64) -> Result<u32> {
        self.pg.today()
    }

    fn step_minutes(&self, from: u32) -> Result<Vec<MinuteRow>> {
        self.pg.step_minutes(from)
    }

    fn removal_mark(&self) -> Result<u64> {
        self.pg.removal_mark()
    }

    fn removals_since(&self, from: u64) -> Result<Vec<Removal>> {
        self.pg.removals_since(from)
    }

    fn pins(&self) -> Result<Vec<(NodeId, u64)>> {
        gc::pins(&self.pg)
    }
}

/// One transaction on the server.
struct PgTx<'a> {
    w: PgWriter<'a>,
    pg: &'a Arc<Pg>,
}

impl WriteTx for PgTx<'_> {
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        self.w.put(items)
    }

    fn has(&mut self, id: NodeId) -> Result<bool> {
        gc::has(&mut self.w, id)
    }

    fn prefetch(&mut self, ids: &[ThreadId], nodes: &[NodeId]) -> Result<()> {
        self.w.prefetch(ids, nodes)
    }

    fn hold_nodes(&mut self) -> Result<()> {
        self.w.hold_nodes();
        Ok(())
    }

    fn first_missing(
        &mut self,
        from: NodeId,
        stop: &[NodeId],
        stop_types: &[NodeId],
    ) -> Result<Option<NodeId>> {
        gc::first_missing(&mut self.w, from, stop, stop_types)
    }

    fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.w.thread(id)
    }

    fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        self.w.threads()
    }

    fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()> {
        self.w.set_thread(id, rec)
    }

    fn insert_threads(&mut self, threads: &[(ThreadId, ThreadRecord, ThreadState)]) -> Result<()> {
        self.w.insert_threads(threads)
    }

    fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.w.remove_thread(id)
    }

    fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>> {
        self.w.registry_get(name)
    }

    fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()> {
        self.w.set_registry_name(name, workflow)
    }

    fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()> {
        self.w.append_registry_version(name, e)
    }

    fn has_registry_history(&mut self, name: &str) -> Result<bool> {
        self.w.has_registry_history(name)
    }

    fn registry_versions(&mut self, name: &str) -> Result<Vec<RegistryEntry>> {
        self.w.registry_versions(name)
    }

    fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool> {
        self.w.remove_registry_name(name, purge)
    }

    fn append_history(&mut self, e: &HistoryEntry) -> Result<()> {
        self.w.append_history(e)
    }

    fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize> {
        self.w.remove_history_of(id)
    }

    fn history_latest(&mut self, thread: &str) -> Result<Option<HistoryEntry>> {
        Ok(self.w.history_entries_of(thread, true)?.pop())
    }

    fn history_entries_of(&mut self, thread: &str) -> Result<Vec<HistoryEntry>> {
        self.w.history_entries_of(thread, false)
    }

    fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.w.lease(id)
    }

    fn set_lease(&mut self, id: &ThreadId, lease: &Lease) -> Result<()> {
        self.w.set_lease(id, lease, self.pg)
    }

    fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.w.remove_lease(id)
    }

    fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState> {
        self.w.thread_state(id)
    }

    fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>> {
        self.w.thread_states()
    }

    fn set_thread_state(&mut self, id: &ThreadId, s: &ThreadState) -> Result<()> {
        self.w.set_thread_state(id, s)
    }

    fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()> {
        self.w.remove_thread_state(id)
    }

    fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        self.w.set_workflow_limits(name, limits)
    }

    fn add_usage(&mut self, u: &StepUsage<'_>, _now_ms: u64) -> Result<()> {
        // Today is the server's: hosts with different clocks count alike.
        self.w.add_usage(u)
    }

    fn set_budget(&mut self, name: &str, budget: Option<&Budget>) -> Result<Option<Budget>> {
        self.w.set_budget(name, budget)
    }

    fn add_step_counts(&mut self, rows: &[MinuteRow], prune_before: Option<u32>) -> Result<()> {
        self.w.add_step_counts(rows, prune_before)
    }

    fn lock_workflow(&mut self, key: &str) -> Result<()> {
        self.w.lock_workflow(key)
    }

    fn record_removal(&mut self, r: &Removal) -> Result<()> {
        self.w.record_removal(r)
    }

    fn pin(&mut self, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>> {
        gc::pin(&mut self.w, ids, now_ms)
    }

    fn unpin(&mut self, ids: &[NodeId]) -> Result<Vec<bool>> {
        gc::unpin(&mut self.w, ids)
    }
}
