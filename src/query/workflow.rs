//! The answers about workflows: "workflow list", "workflow show", "workflow history".

use super::error::{CliError, CliResult, Missing};
use super::output::NodeIdStr;
use crate::cas::{NodeId, Value};
use crate::store::Store;
use crate::thread::registry::{self, Listed, Located};
use crate::workflow::{self, Jsonata, Materialized, StoredWorkflow, materialize};
use serde::Serialize;
use std::path::Path;

/// `workflow show`: `name` and `timestamp` are null for a file that is not registered or stored.
#[derive(Serialize)]
pub(crate) struct Shown {
    pub hash: NodeIdStr,
    pub name: Option<String>,
    #[serde(rename = "type")]
    type_id: NodeIdStr,
    pub payload: Value,
    pub timestamp: Option<u64>,
}

/// One row of `workflow list`: `hash` is `(local)` for a workflow file.
#[derive(Serialize)]
pub(crate) struct ListRow {
    pub name: String,
    pub hash: String,
    pub origin: &'static str,
}

/// `workflow history`.
#[derive(Serialize)]
pub(crate) struct History {
    name: String,
    pub versions: Vec<Version>,
}

/// One registered version of a name.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Version {
    pub hash: NodeIdStr,
    pub registered_at: u64,
    pub current: bool,
}

/// The output of `workflow show WORKFLOW`, the workflow resolved from `cwd`.
///
/// # Errors
/// A name that resolves to nothing or to a node that is not a workflow, store failures.
pub(crate) fn shown(s: &Store, workflow: &str, cwd: &Path) -> CliResult<Shown> {
    let (id, type_id, payload, timestamp) = resolve(s, workflow, cwd)?;
    if !workflow::is_workflow_type(type_id) {
        return Err(CliError::new(format!(
            "node {id} is not a Workflow (type {type_id})"
        )));
    }
    // The name given when it is registered for this id, else the first one that is.
    let reg = s.registry()?;
    let name = reg
        .iter()
        .find(|(n, i)| *i == id && *n == workflow)
        .or_else(|| reg.iter().find(|(_, i)| *i == id))
        .map(|(n, _)| n.clone());
    Ok(Shown {
        hash: NodeIdStr(id),
        name,
        type_id: NodeIdStr(type_id),
        payload,
        timestamp,
    })
}

/// The model of a stored workflow's payload (its graph and roles).
///
/// # Errors
/// A payload that is not a workflow.
pub(crate) fn parse(payload: &Value) -> CliResult<StoredWorkflow> {
    StoredWorkflow::from_payload(payload).map_err(|e| CliError::new(e.to_string()))
}

/// The output of `workflow list`: the names `thread start` resolves from `cwd`.
///
/// # Errors
/// Store failures.
pub(crate) fn list_rows(s: &Store, cwd: &Path) -> CliResult<Vec<ListRow>> {
    Ok(registry::list(s, cwd)?
        .into_iter()
        .map(|row| match row {
            Listed::Local(name, _) => ListRow {
                name,
                hash: "(local)".to_string(),
                origin: "local",
            },
            Listed::Registered(name, id) => ListRow {
                name,
                hash: id.to_wire(),
                origin: "global",
            },
        })
        .collect())
}

/// The output of `workflow history NAME`.
///
/// # Errors
/// A name never registered, store failures.
pub(crate) fn history(s: &Store, name: String) -> CliResult<History> {
    let versions = s.registry_history(&name)?;
    if versions.is_empty() {
        return Err(unknown(&name));
    }
    let current = s
        .registry()?
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, id)| id);
    let versions = versions
        .iter()
        .map(|v| Version {
            hash: NodeIdStr(v.workflow),
            registered_at: v.time_ms,
            current: Some(v.workflow) == current,
        })
        .collect();
    Ok(History { name, versions })
}

pub(crate) fn unknown(name: &str) -> CliError {
    CliError::new(format!(
        "unknown workflow \"{name}\"; run \"uwf workflow list\" to see registered names"
    ))
    .missing(Missing::Workflow(name.to_string()))
}

/// Reads, checks and materialises a workflow file.
pub(crate) fn load(file: &Path) -> CliResult<(Materialized, String)> {
    let def =
        workflow::load_file(file, &Jsonata::default()).map_err(|e| CliError::new(e.to_string()))?;
    let name = def.name.clone();
    let m = materialize(&def).map_err(|e| CliError::new(e.to_string()))?;
    Ok((m, name))
}

/// The workflow `arg` names, by the resolver `thread start` uses (an id, a file, a local name,
/// a registered name), else by id prefix: its id, type, payload and first-stored time (`None`
/// for a workflow file that is not stored; it is shown as materialised, not stored).
/// The workflow node `arg` names (a registered name, a workflow file, a node id or prefix),
/// resolved from `cwd`.
///
/// # Errors
/// A name that resolves to nothing, store failures.
pub(crate) fn workflow_id(s: &Store, arg: &str, cwd: &Path) -> CliResult<NodeId> {
    resolve(s, arg, cwd).map(|r| r.0)
}

fn resolve(s: &Store, arg: &str, cwd: &Path) -> CliResult<(NodeId, NodeId, Value, Option<u64>)> {
    let id = match registry::locate(s, arg, cwd)? {
        Some(Located::Id(id) | Located::Registered(id)) => id,
        Some(Located::File(path) | Located::Local(path)) => {
            let (m, _) = load(&path)?;
            return Ok(match s.get(m.workflow_id)? {
                Some(n) => (m.workflow_id, n.type_id, n.payload()?, Some(n.timestamp)),
                None => (m.workflow_id, m.workflow_type, m.workflow, None),
            });
        }
        None => match s.resolve(arg) {
            Ok(id) => id,
            Err(crate::store::StoreError::NoMatch(_) | crate::store::StoreError::BadId(_)) => {
                return Err(unknown(arg));
            }
            Err(e) => return Err(e.into()),
        },
    };
    let n = s
        .get(id)?
        .ok_or_else(|| CliError::new(format!("CAS node not found: {id}")))?;
    Ok((id, n.type_id, n.payload()?, Some(n.timestamp)))
}
