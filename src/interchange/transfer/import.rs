//! Import of a whole layout: node files first, then the root files, each checked.

use super::nodes::{read_all, run_node_import, schema_hint};
use super::roots::{import_history, import_registry, import_threads, read_extra, thread_key};
use super::{ImportOptions, ImportReport, Progress, TransferError};
use crate::interchange::extra::UWF_FILE;
use crate::interchange::layout::{CAS_DIR, ScanItem};
use crate::store::Store;
use std::path::Path;

/// Imports the layout under `dir` into `store`. Every node file is re-hashed; nothing is
/// trusted from file names. Files are only read.
///
/// # Errors
/// A store failure (bad files are reported in the result, not as errors).
pub fn import(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    progress: Progress<'_>,
) -> Result<ImportReport, TransferError> {
    import_with_cas(store, dir, &[], opts, progress)
}

/// [`import`], with the nodes of more CAS directories than `<dir>/cas`: the CAS is their
/// union. The TypeScript CLI keeps its own nodes in `$UNCAGED_CAS_DIR` or
/// `~/.uncaged/json-cas` while its agents write to `<root>/cas`. `more_cas` is read first (the
/// schemas a workflow was added with live there), then `<dir>/cas`; an absent directory adds
/// nothing.
///
/// # Errors
/// As [`import`].
pub(crate) fn import_with_cas(
    store: &Store,
    dir: &Path,
    more_cas: &[std::path::PathBuf],
    opts: ImportOptions,
    progress: Progress<'_>,
) -> Result<ImportReport, TransferError> {
    let mut r = ImportReport::default();
    for cas in more_cas
        .iter()
        .map(|p| p.as_path())
        .chain([dir.join(CAS_DIR).as_path()])
    {
        let n = import_nodes(store, cas, opts, progress, false)?;
        r.nodes.imported += n.nodes.imported;
        r.nodes.present += n.nodes.present;
        r.nodes.skipped += n.nodes.skipped;
        r.problems.extend(n.problems);
        r.warnings.extend(n.warnings);
    }
    import_root_files(store, dir, opts, &mut r)?;
    Ok(r)
}

/// The root-file part of [`import`]: `threads.yaml`, `workflows.yaml`, `registry.yaml`,
/// `history.jsonl` and `uwf.jsonl` under `dir`, read after the nodes they name.
pub(crate) fn import_root_files(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let mut extra = read_extra(dir, r)?;
    let states = std::mem::take(&mut extra.states);
    let usage = std::mem::take(&mut extra.usage);
    import_threads(store, dir, opts, &extra, r)?;
    import_registry(store, dir, opts, &extra, r)?;
    import_history(store, dir, extra, r)?;
    import_states(store, states, r)?;
    import_usage(store, usage, r)
}

/// Keeps the model calls of the imported steps and adds them to the usage aggregate on the
/// days they were counted on; a step the store holds calls for already is left as it is (an
/// import again counts nothing twice), one whose StepNode is not stored is reported and
/// skipped.
fn import_usage(
    store: &Store,
    usage: Vec<(String, crate::store::StepCalls)>,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    let mut known = Vec::new();
    for (step, c) in usage {
        match crate::cas::NodeId::parse(&step) {
            Ok(id) if store.has(id)? => known.push((id, c)),
            _ => r.problems.push(format!(
                "skipped the model calls of step {step} in {UWF_FILE}: no such node"
            )),
        }
    }
    for chunk in known.chunks(10_000) {
        store.write(|w| {
            for (step, c) in chunk {
                w.add_usage(
                    &crate::store::StepUsage {
                        step: *step,
                        thread: &c.thread,
                        workflow: c.workflow,
                        workflow_name: &c.workflow_name,
                        role: &c.role,
                        calls: &c.calls,
                        day: Some(c.day),
                    },
                    0,
                )?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Sets the imported threads' states (queued, paused, round limit, failures) on the threads
/// the store now holds; a state of an unknown thread is reported and skipped.
fn import_states(
    store: &Store,
    states: Vec<(String, crate::store::ThreadState)>,
    r: &mut ImportReport,
) -> Result<(), TransferError> {
    if states.is_empty() {
        return Ok(());
    }
    let mut known = Vec::new();
    for (t, st) in states {
        let Some(key) = thread_key(&t) else {
            r.problems.push(format!(
                "skipped the state of {t} in {UWF_FILE}: not a thread id"
            ));
            continue;
        };
        if store.thread(&key)?.is_none() && store.history_of(&key)?.is_none() {
            r.problems.push(format!(
                "skipped the state of {t} in {UWF_FILE}: no such thread"
            ));
            continue;
        }
        known.push((key, st));
    }
    store.write(|w| {
        for (t, st) in &known {
            w.set_thread_state(t, st)?;
        }
        Ok(())
    })?;
    Ok(())
}

/// Imports the node files under `dir` that are not in the store (checked as [`import`]
/// checks every file); the root files are not read. Files whose ids the store holds are
/// not opened.
///
/// # Errors
/// A store failure (bad files are reported in the result, not as errors).
pub(crate) fn import_new_nodes(
    store: &Store,
    dir: &Path,
    opts: ImportOptions,
) -> Result<ImportReport, TransferError> {
    import_nodes(store, &dir.join(CAS_DIR), opts, &|_, _, _| {}, true)
}

/// The node part of [`import`]; with `only_new`, listed files whose ids are stored are
/// dropped before they are read.
fn import_nodes(
    store: &Store,
    cas: &Path,
    opts: ImportOptions,
    progress: Progress<'_>,
    only_new: bool,
) -> Result<ImportReport, TransferError> {
    let schemas = schema_hint(cas);
    run_node_import(store, Some(cas), opts, progress, |take| {
        read_all(store, cas, &schemas, opts, only_new, take)
    })
}

/// Imports the nodes `feed` hands over (read and checked, as [`import`] reads node files),
/// with the checks and batching of a directory import. Nodes that must wait for their schema
/// are kept in memory, to be put once every node has been handed over.
///
/// # Errors
/// A store failure, or the first error of `feed` (bad nodes are reported in the result).
pub(crate) fn import_node_items(
    store: &Store,
    opts: ImportOptions,
    progress: Progress<'_>,
    feed: impl FnOnce(
        &mut dyn FnMut(ScanItem) -> Result<(), TransferError>,
    ) -> Result<(), TransferError>,
) -> Result<ImportReport, TransferError> {
    run_node_import(store, None, opts, progress, feed)
}
