//! Copying a whole store to another, whatever the backends (`uwf store copy`): nodes in write
//! order with their first-write times, then the active threads and their states, the registry
//! with its versions, the workflows' limits and the history of finished threads. A copy run again over the same
//! target puts only what it lacks, so an interrupted copy resumes; at the end every node of the
//! source is looked up in the target and compared by digest.

use super::error::{Result, StoreError};
use super::handle::Store;
use super::node::{Prepared, PutOutcome};
use super::nodes::Bulk;
use super::records::HistoryEntry;
use crate::cas::NodeId;
use crate::cas::bootstrap::META;

/// Nodes a copy reads before it writes them, and looks up at a time when it checks.
const BATCH: usize = 4096;

/// What a copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// Nodes of the source.
    pub nodes: u64,
    /// Of those, nodes the target did not have.
    pub nodes_written: u64,
    /// Active threads.
    pub threads: u64,
    /// Registry names.
    pub workflows: u64,
    /// History entries the target did not have.
    pub history_written: u64,
    /// Nodes checked in the target after the copy (all of them).
    pub verified: u64,
}

/// Called with (what is being done, done, total).
pub type CopyProgress<'a> = &'a dyn Fn(&str, u64, u64);

/// Copies everything `from` holds into `to`; see the module's documentation.
///
/// # Errors
/// A failure of either store; [`StoreError::HashCollision`] when the target holds one of the
/// ids with other bytes; [`StoreError::Internal`] naming the first node the check finds
/// missing or different in the target.
// Long: the copy's phases in the order a resumed copy relies on (nodes, threads, registry, limits,
// history, check).
pub fn copy(from: &Store, to: &Store, progress: CopyProgress<'_>) -> Result<CopyReport> {
    let mut report = CopyReport {
        nodes: from.node_count()?,
        ..CopyReport::default()
    };
    let total = report.nodes;
    let mut batch: Vec<(Prepared, u64)> = Vec::with_capacity(BATCH);
    let mut seen = 0u64;
    let mut bulk = to.bulk(262_144);
    from.for_each_node_in_write_order(|n| -> Result<()> {
        let schema = n.type_id == META || n.type_id == n.id;
        let p = if schema || to.is_schema(n.type_id)? {
            to.prepare_imported(n.id, n.type_id, n.payload_cbor, n.digest)?
        } else {
            to.prepare_untyped(n.id, n.type_id, n.payload_cbor, n.digest)
        };
        batch.push((p, n.timestamp));
        // A schema is committed before the nodes it types are prepared against it.
        if batch.len() >= BATCH || schema {
            report.nodes_written += put_missing(&mut bulk, &mut batch)?;
            if schema {
                bulk.commit()?;
            }
        }
        seen += 1;
        if seen.is_multiple_of(BATCH as u64) {
            progress("nodes", seen.min(total), total);
        }
        Ok(())
    })?;
    report.nodes_written += put_missing(&mut bulk, &mut batch)?;
    bulk.finish()?;
    progress("nodes", total, total);

    let threads = from.threads()?;
    let states = from.thread_states()?;
    let registry = from.registry()?;
    let versions = from.all_registry_history()?;
    let limits = from.workflow_limits()?;
    report.threads = threads.len() as u64;
    report.workflows = registry.len() as u64;
    to.write(|w| {
        for (id, rec) in &threads {
            w.set_thread(id, rec)?;
        }
        for (id, s) in &states {
            w.set_thread_state(id, s)?;
        }
        // A name's versions are copied when the target has none of them yet.
        let mut skip: std::collections::HashMap<&str, bool> = Default::default();
        for (name, e) in &versions {
            let s = match skip.get(name.as_str()) {
                Some(&s) => s,
                None => {
                    let s = w.has_registry_history(name)?;
                    skip.insert(name.as_str(), s);
                    s
                }
            };
            if !s {
                w.append_registry_version(name, e)?;
            }
        }
        for (name, id) in &registry {
            w.set_registry_name(name, *id)?;
        }
        for (name, l) in &limits {
            w.set_workflow_limits(name, Some(l))?;
        }
        Ok(())
    })?;
    let mut pending = Vec::with_capacity(BATCH);
    let flush = |pending: &mut Vec<HistoryEntry>| -> Result<u64> {
        let n = to.write(|w| {
            let mut n = 0;
            for e in pending.iter() {
                if !w.has_history(e)? {
                    w.append_history(e)?;
                    n += 1;
                }
            }
            Ok(n)
        })?;
        pending.clear();
        Ok(n)
    };
    from.for_each_history(|e| -> Result<()> {
        pending.push(e);
        if pending.len() >= BATCH {
            report.history_written += flush(&mut pending)?;
        }
        Ok(())
    })?;
    report.history_written += flush(&mut pending)?;

    // The check: every node of the source is in the target with the same digest.
    let target = to.snapshot()?;
    let mut ids: Vec<(NodeId, [u8; 32])> = Vec::with_capacity(BATCH);
    let check = |ids: &mut Vec<(NodeId, [u8; 32])>, verified: &mut u64| -> Result<()> {
        let found = target.digests(&ids.iter().map(|(id, _)| *id).collect::<Vec<_>>())?;
        for ((id, d), f) in ids.iter().zip(found) {
            if f.as_ref() != Some(d) {
                return Err(StoreError::Internal(format!(
                    "the copy is incomplete: node {id} is {} in the target",
                    if f.is_some() { "different" } else { "missing" }
                )));
            }
        }
        *verified += ids.len() as u64;
        ids.clear();
        progress("check", *verified, total);
        Ok(())
    };
    let mut verified = 0;
    from.for_each_node(|n| -> Result<()> {
        ids.push((n.id, n.digest));
        if ids.len() >= BATCH {
            check(&mut ids, &mut verified)?;
        }
        Ok(())
    })?;
    check(&mut ids, &mut verified)?;
    report.verified = verified;
    Ok(report)
}

/// Puts the nodes of `batch` that `to` lacks; returns how many.
fn put_missing(bulk: &mut Bulk<'_>, batch: &mut Vec<(Prepared, u64)>) -> Result<u64> {
    if batch.is_empty() {
        return Ok(0);
    }
    let out = bulk.put_at(batch)?;
    batch.clear();
    Ok(out.iter().filter(|o| **o == PutOutcome::Inserted).count() as u64)
}
