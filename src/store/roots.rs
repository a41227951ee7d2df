//! What a garbage collection keeps, the same on every backend: the roots and the time from which
//! every node is kept whatever reaches it.

use super::backend::ReadTx;
use super::error::Result;
use super::node::bootstrap_nodes;
use super::records::Lease;
use super::report::ids_in_text;
use crate::cas::bootstrap::META;
use std::ops::ControlFlow;

/// The roots of a collection in one read transaction: active heads and workflows, archived
/// heads and workflows, registry names and every version, the meta-schema, the bootstrap
/// schemas and every schema, pins, and the ids a thread state's last error names (a failed
/// step's raw output, kept for its message).
///
/// # Errors
/// A store failure or a corrupt record.
pub(crate) fn gc_roots(r: &dyn ReadTx) -> Result<Vec<u64>> {
    let mut roots = Vec::new();
    for (_, t) in r.threads()? {
        roots.push(t.head.0);
        roots.extend(t.workflow.map(|w| w.0));
    }
    r.for_each_history(&mut |h| {
        roots.extend(h.names().map(|id| id.0));
        ControlFlow::Continue(())
    })?;
    roots.extend(r.registry()?.into_iter().map(|(_, w)| w.0));
    roots.extend(
        r.all_registry_history()?
            .into_iter()
            .map(|(_, e)| e.workflow.0),
    );
    roots.push(META.0);
    roots.extend(bootstrap_nodes().iter().map(|p| p.id.0));
    roots.extend(r.list_by_type(META)?.into_iter().map(|id| id.0));
    roots.extend(r.pins()?.into_iter().map(|(id, _)| id.0));
    for (_, s) in r.thread_states()? {
        if let Some(f) = &s.last_error {
            roots.extend(ids_in_text(&f.message));
        }
    }
    Ok(roots)
}

/// The time from which nodes are kept whatever reaches them: `cutoff_ms` (now less the grace),
/// or the start of the oldest live step lease if earlier, so that what a step in progress
/// wrote is kept.
///
/// # Errors
/// A store failure or a corrupt record.
pub(crate) fn keep_from(
    r: &dyn ReadTx,
    cutoff_ms: u64,
    is_live: &dyn Fn(&Lease) -> bool,
) -> Result<u64> {
    Ok(r.leases()?
        .iter()
        .filter(|(_, l)| is_live(l))
        .map(|(_, l)| l.since_ms)
        .fold(cutoff_ms, u64::min))
}
