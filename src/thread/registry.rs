//! Workflows by name: storing and registering workflow files, rolling a name back, and the one
//! resolver `thread start`, `workflow show` and `workflow list` share.
//!
//! A name resolves in the TypeScript tool's order: a 13-character id; a file path (it contains
//! `/` or `\`, or ends in `.yaml`/`.yml`); a `<name>.yaml|yml` or `<name>/index.yaml|yml` in a
//! `.workflow/` or `.workflows/` directory of the search directory or a parent (the nearest
//! directory first, `.workflow/` before `.workflows/` in each); a registered name.
//! [`list`] prints exactly the names this resolves to a local file or the registry.

use super::{Result, ThreadError};
use crate::cas::NodeId;
use crate::cas::bootstrap::META;
use crate::store::Store;
use crate::workflow::{self, Jsonata, Materialized, WorkflowDef, WorkflowError, is_workflow_type};
use std::path::{Path, PathBuf};

/// Stores a parsed workflow: its schema nodes, then the workflow node. Returns what was stored.
///
/// # Errors
/// A role schema the store refuses, or a store failure.
pub(crate) fn store_workflow(
    store: &Store,
    def: &WorkflowDef,
    now_ms: u64,
) -> Result<Materialized> {
    let m = workflow::materialize(def)?;
    let schemas = m
        .schemas
        .iter()
        .map(|s| store.prepare(META, &s.payload, false))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    store.put(&schemas, now_ms)?;
    let wf = store.prepare(m.workflow_type, &m.workflow, true)?;
    debug_assert_eq!(wf.id, m.workflow_id);
    store.put(&[wf], now_ms)?;
    Ok(m)
}

/// Loads, checks and stores the workflow file at `path` and registers it under its name (a
/// new registry version only when the id changed). Returns the name and the workflow id.
///
/// # Errors
/// Any [`WorkflowError`] of the file, or a store failure.
pub fn register_workflow(store: &Store, path: &Path, now_ms: u64) -> Result<(String, NodeId)> {
    let def = workflow::load_file(path, &Jsonata::default())?;
    register_def(store, &def, now_ms)
}

/// Stores a checked workflow and registers it under its name (a new registry version only when
/// the id changed). Returns the name and the workflow id.
///
/// # Errors
/// A schema the store refuses, or a store failure.
pub(crate) fn register_def(
    store: &Store,
    def: &WorkflowDef,
    now_ms: u64,
) -> Result<(String, NodeId)> {
    let m = store_workflow(store, def, now_ms)?;
    let (name, id) = (def.name.clone(), m.workflow_id);
    store.write(|w| {
        // A garbage collection may have removed the workflow since it was stored.
        if !w.has(id)? {
            return Err(crate::store::StoreError::NotFound(id));
        }
        if w.registry_get(&name)? != Some(id) {
            w.registry_set(&name, id, now_ms)?;
        }
        Ok(())
    })?;
    Ok((name, id))
}

/// The id a registered name points at, if any.
///
/// # Errors
/// A store failure.
pub(crate) fn registered(store: &Store, name: &str) -> Result<Option<NodeId>> {
    Ok(store
        .registry()?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, id)| id))
}

/// Points `name` back at an earlier version: `to` when given (it must be one of the name's
/// versions), else the latest version that differs from the current one. Returns the new and
/// the previous id.
///
/// # Errors
/// [`ThreadError::UnknownName`] for a name that is not registered, [`ThreadError::Invalid`]
/// for a version that is not the name's or a name with no earlier version.
/// `workflow remove`: the name leaves the registry; its versions stay for `workflow history`
/// unless `purge`. Nodes stay.
///
/// # Errors
/// [`ThreadError::UnknownName`] when the name is not registered.
pub(crate) fn remove_name(store: &Store, name: &str, purge: bool) -> Result<()> {
    let had = store.write(|w| {
        let had = w.remove_registry_name(name, purge)?;
        if had {
            w.record_removal(&if purge {
                crate::store::Removal::WorkflowPurged(name.to_string())
            } else {
                crate::store::Removal::Workflow(name.to_string())
            })?;
        }
        Ok(had)
    })?;
    if !had {
        return Err(ThreadError::UnknownName(name.to_string()));
    }
    Ok(())
}

pub(crate) fn rollback(
    store: &Store,
    name: &str,
    to: Option<NodeId>,
    now_ms: u64,
) -> Result<(NodeId, NodeId)> {
    let versions = store.registry_history(name)?;
    let current =
        registered(store, name)?.ok_or_else(|| ThreadError::UnknownName(name.to_string()))?;
    let target = match to {
        Some(id) => {
            if !versions.iter().any(|v| v.workflow == id) {
                return Err(ThreadError::Invalid(format!(
                    "{id} is not a version of workflow \"{name}\"; run \"uwf workflow history {name}\""
                )));
            }
            id
        }
        None => versions
            .iter()
            .rev()
            .map(|v| v.workflow)
            .find(|w| *w != current)
            .ok_or_else(|| {
                ThreadError::Invalid(format!("workflow \"{name}\" has no earlier version"))
            })?,
    };
    store.write(|w| w.registry_set(name, target, now_ms))?;
    Ok((target, current))
}

/// What a workflow argument names, before anything is read or stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Located {
    /// A 13-character id (not checked to be stored).
    Id(NodeId),
    /// A workflow file given as a path, resolved against the search directory.
    File(PathBuf),
    /// A workflow file found by name in a `.workflow/` or `.workflows/` directory.
    Local(PathBuf),
    /// A registered name and the id it points at.
    Registered(NodeId),
}

fn looks_like_path(s: &str) -> bool {
    s.contains('/') || s.contains('\\') || s.ends_with(".yaml") || s.ends_with(".yml")
}

/// The workflow directories searched from `from`: each directory up to the root, nearest
/// first, `.workflow/` before `.workflows/`.
fn search_dirs(from: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    from.ancestors()
        .flat_map(|d| [d.join(".workflow"), d.join(".workflows")])
}

fn local_file(from: &Path, name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.starts_with('.') {
        return None;
    }
    search_dirs(from).find_map(|base| {
        [
            base.join(format!("{name}.yaml")),
            base.join(format!("{name}.yml")),
            base.join(name).join("index.yaml"),
            base.join(name).join("index.yml"),
        ]
        .into_iter()
        .find(|c| c.is_file())
    })
}

/// Finds what `spec` names, looking up files and `.workflow/` directories from `from`;
/// `None` when nothing matches.
///
/// # Errors
/// [`WorkflowError::FileNotFound`] for a path that does not exist, a store failure.
pub(crate) fn locate(store: &Store, spec: &str, from: &Path) -> Result<Option<Located>> {
    if spec.len() == 13
        && let Some(id) = NodeId::parse_strict(spec)
    {
        return Ok(Some(Located::Id(id)));
    }
    if looks_like_path(spec) {
        let p = from.join(spec);
        if !p.exists() {
            return Err(WorkflowError::FileNotFound(spec.to_string()).into());
        }
        return Ok(Some(Located::File(p)));
    }
    if let Some(p) = local_file(from, spec) {
        return Ok(Some(Located::Local(p)));
    }
    Ok(registered(store, spec)?.map(Located::Registered))
}

/// Resolves `spec` for `thread start`: an id must be a stored Workflow node; a file is loaded,
/// checked and stored (not registered).
///
/// # Errors
/// [`ThreadError::WorkflowNotFound`], [`ThreadError::NotWorkflow`], or the file's
/// [`WorkflowError`].
pub(crate) fn resolve_workflow(
    store: &Store,
    spec: &str,
    from: &Path,
    now_ms: u64,
) -> Result<NodeId> {
    match locate(store, spec, from)? {
        Some(Located::Id(id)) => {
            let node = store
                .get(id)?
                .ok_or_else(|| ThreadError::WorkflowNotFound(spec.to_string()))?;
            if !is_workflow_type(node.type_id) {
                return Err(ThreadError::NotWorkflow {
                    id,
                    type_id: node.type_id,
                });
            }
            Ok(id)
        }
        Some(Located::File(path) | Located::Local(path)) => {
            let def = workflow::load_file(&path, &Jsonata::default())?;
            Ok(store_workflow(store, &def, now_ms)?.workflow_id)
        }
        Some(Located::Registered(id)) => Ok(id),
        None => Err(ThreadError::WorkflowNotFound(spec.to_string())),
    }
}

/// One row of `workflow list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Listed {
    /// A name found in a `.workflow/` or `.workflows/` directory, with its file.
    Local(String, PathBuf),
    /// A registered name not shadowed by a local one.
    Registered(String, NodeId),
}

/// Workflow names in one directory: `<name>.yaml|yml` and `<name>/index.yaml|yml`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(std::result::Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let p = e.path();
            if p.is_dir() {
                (p.join("index.yaml").is_file() || p.join("index.yml").is_file()).then_some(name)
            } else {
                name.strip_suffix(".yaml")
                    .or_else(|| name.strip_suffix(".yml"))
                    .map(str::to_string)
            }
        })
        .collect();
    names.sort();
    names
}

/// `workflow list`: the local names [`locate`] finds from `from` (nearest directory first),
/// then the registered names it resolves to the registry, in registration order. Every row is
/// a name `thread start` resolves to that very workflow.
///
/// # Errors
/// A store failure.
pub(crate) fn list(store: &Store, from: &Path) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for dir in search_dirs(from) {
        for name in names_in(&dir) {
            if seen.contains(&name) {
                continue;
            }
            // Only what resolves to a local file: not names read as ids or paths.
            if let Ok(Some(Located::Local(p))) = locate(store, &name, from) {
                seen.insert(name.clone());
                out.push(Listed::Local(name, p));
            }
        }
    }
    for (name, id) in store.registry_in_order()? {
        if seen.contains(&name) {
            continue;
        }
        if let Ok(Some(Located::Registered(_))) = locate(store, &name, from) {
            out.push(Listed::Registered(name, id));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `.workflow/` wins over `.workflows/` in one directory, a nearer directory over a farther
    /// one; ids and paths are never read as names, and hidden names are not names.
    #[test]
    fn locate_follows_the_typescript_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("uwf.redb")).unwrap();
        let top = dir.path().join("top");
        let here = top.join("here");
        for d in [
            top.join(".workflow"),
            here.join(".workflow"),
            here.join(".workflows"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        for f in [
            top.join(".workflow/a.yaml"),
            here.join(".workflows/a.yaml"),
            here.join(".workflow/b.yml"),
            here.join(".workflows/b.yaml"),
            top.join(".workflow/.h.yaml"),
        ] {
            std::fs::write(f, "x").unwrap();
        }
        let at = |spec: &str| locate(&store, spec, &here).unwrap();
        assert_eq!(
            at("a"),
            Some(Located::Local(here.join(".workflows/a.yaml")))
        );
        assert_eq!(at("b"), Some(Located::Local(here.join(".workflow/b.yml"))));
        assert_eq!(at(".h"), None);
        assert_eq!(at("nope"), None);
        assert_eq!(
            at("AZF3FA1TN3D4A"),
            Some(Located::Id(workflow::nodes::WORKFLOW))
        );
        assert!(matches!(
            locate(&store, "missing.yaml", &here),
            Err(ThreadError::Workflow(WorkflowError::FileNotFound(_)))
        ));
        let names: Vec<String> = list(&store, &here)
            .unwrap()
            .into_iter()
            .map(|l| match l {
                Listed::Local(n, _) | Listed::Registered(n, _) => n,
            })
            .collect();
        assert_eq!(names, ["b", "a"]);
    }
}
