//! `uwf workflow …`: register, show, list, validate, history and rollback.

use super::output::{NodeIdStr, print_as, write_stdout};
use super::{CliError, CliResult, Env};
use crate::cas::{NodeId, Value};
use crate::store::Store;
use crate::thread::registry::{self, Listed, Located};
use crate::workflow::{self, GraphFormat, Jsonata, Materialized, StoredWorkflow, materialize};
use clap::Subcommand;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub(crate) enum WorkflowCommand {
    /// Register a workflow file (a new version when the name exists).
    #[command(alias = "add")]
    Put {
        /// The workflow YAML.
        file: PathBuf,
        /// Print only the workflow's id.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Print a workflow (id, file, .workflow/ name or registered name).
    Show {
        /// Id, id prefix, file, .workflow/ name or registered name.
        workflow: String,
        /// Draw the graph instead: mermaid or dot.
        #[arg(long, value_name = "FORMAT")]
        graph: Option<GraphFormat>,
    },
    /// List the names thread start finds: .workflow/ and .workflows/ here and above, registered.
    List,
    /// Check a workflow file without registering it.
    Validate {
        /// The workflow YAML.
        file: PathBuf,
    },
    /// Every registered version of a name, oldest first.
    History {
        /// The name.
        name: String,
    },
    /// Remove a name from the registry (its versions stay for `history` unless --purge; nodes stay).
    #[command(alias = "rm")]
    Remove {
        /// The name.
        name: String,
        /// Also forget the name's versions.
        #[arg(long)]
        purge: bool,
    },
    /// Point a name back at an earlier version (the previous one by default).
    Rollback {
        /// The name.
        name: String,
        /// The version to restore (an id from `uwf workflow history`).
        id: Option<String>,
    },
}

/// `workflow remove`.
#[derive(Serialize)]
struct Removed {
    name: String,
    removed: bool,
    purged: bool,
}

/// `workflow put`: the name and id registered.
#[derive(Serialize)]
struct Registered {
    name: String,
    hash: NodeIdStr,
}

/// `workflow validate`.
#[derive(Serialize)]
struct Validated {
    name: String,
    valid: bool,
    hash: NodeIdStr,
}

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

/// `workflow rollback`.
#[derive(Serialize)]
struct RolledBack {
    name: String,
    hash: NodeIdStr,
    previous: NodeIdStr,
}

pub(crate) fn run(c: WorkflowCommand, env: &Env) -> CliResult {
    match c {
        WorkflowCommand::Put { file, quiet } => cmd_put(env, &file, quiet),
        WorkflowCommand::Validate { file } => {
            let (m, name) = load(&file)?;
            let out = Validated {
                name,
                valid: true,
                hash: NodeIdStr(m.workflow_id),
            };
            print_as(env.format, &out)
        }
        WorkflowCommand::Show { workflow, graph } => cmd_show(env, &workflow, graph),
        WorkflowCommand::List => cmd_list(env),
        WorkflowCommand::History { name } => cmd_history(env, name),
        WorkflowCommand::Remove { name, purge } => {
            let s = env.open_rw()?;
            registry::remove_name(&s, &name, purge)?;
            tracing::info!(tag = "JYA2YEYE", workflow = %name, purge, "workflow removed");
            print_as(
                env.format,
                &Removed {
                    name,
                    removed: true,
                    purged: purge,
                },
            )
        }
        WorkflowCommand::Rollback { name, id } => {
            let s = env.open_rw()?;
            let to = id.map(|id| s.resolve(&id)).transpose()?;
            let (target, previous) = registry::rollback(&s, &name, to, env.now_ms)?;
            let out = RolledBack {
                name,
                hash: NodeIdStr(target),
                previous: NodeIdStr(previous),
            };
            print_as(env.format, &out)
        }
    }
}

/// `workflow put FILE`.
fn cmd_put(env: &Env, file: &Path, quiet: bool) -> CliResult {
    // Check the file before the store is opened (or created).
    let def =
        workflow::load_file(file, &Jsonata::default()).map_err(|e| CliError::new(e.to_string()))?;
    let s = env.open_rw()?;
    let (name, id) = crate::thread::register_def(&s, &def, env.now_ms)
        .map_err(|e| CliError::new(e.to_string()))?;
    if quiet {
        return write_stdout(format!("{}\n", id.to_wire()).as_bytes());
    }
    let out = Registered {
        name,
        hash: NodeIdStr(id),
    };
    print_as(env.format, &out)
}

/// `workflow show WORKFLOW [--graph FORMAT]`.
fn cmd_show(env: &Env, workflow: &str, graph: Option<GraphFormat>) -> CliResult {
    let s = env.open_ro()?;
    let out = shown(&s, workflow, &env.cwd)?;
    if let Some(format) = graph {
        let wf = parse(&out.payload)?;
        let mut text = workflow::render_graph(&wf, format);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        return write_stdout(text.as_bytes());
    }
    print_as(env.format, &out)
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

/// `workflow list`.
fn cmd_list(env: &Env) -> CliResult {
    let s = env.open_ro()?;
    print_as(env.format, &list_rows(&s, &env.cwd)?)
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

/// `workflow history NAME`.
fn cmd_history(env: &Env, name: String) -> CliResult {
    let s = env.open_ro()?;
    print_as(env.format, &history(&s, name)?)
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

fn unknown(name: &str) -> CliError {
    CliError::new(format!(
        "unknown workflow \"{name}\"; run \"uwf workflow list\" to see registered names"
    ))
    .missing(super::Missing::Workflow(name.to_string()))
}

/// Reads, checks and materialises a workflow file.
fn load(file: &Path) -> CliResult<(Materialized, String)> {
    let def =
        workflow::load_file(file, &Jsonata::default()).map_err(|e| CliError::new(e.to_string()))?;
    let name = def.name.clone();
    let m = materialize(&def).map_err(|e| CliError::new(e.to_string()))?;
    Ok((m, name))
}

/// The workflow `arg` names, by the resolver `thread start` uses (an id, a file, a local name,
/// a registered name), else by id prefix: its id, type, payload and first-stored time (`None`
/// for a workflow file that is not stored; it is shown as materialised, not stored).
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
