//! `uwf workflow …`: register, show, list, validate, history and rollback.

use super::output::{obj, print, write_stdout};
use super::{CliError, CliResult, Env};
use crate::cas::{NodeId, Value};
use crate::store::Store;
use crate::workflow::{self, GraphFormat, Jsonata, Materialized, StoredWorkflow, materialize};
use clap::Subcommand;
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
    /// Print a registered workflow (by name or id).
    Show {
        /// Name or node id.
        workflow: String,
        /// Draw the graph instead: mermaid or dot.
        #[arg(long, value_name = "FORMAT")]
        graph: Option<GraphFormat>,
    },
    /// List local (./.workflow, ./.workflows) and registered workflows.
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
    /// Point a name back at an earlier version (the previous one by default).
    Rollback {
        /// The name.
        name: String,
        /// The version to restore (an id from `uwf workflow history`).
        id: Option<String>,
    },
}

pub(crate) fn run(c: WorkflowCommand, env: &Env) -> CliResult {
    match c {
        WorkflowCommand::Put { file, quiet } => {
            // Check the file before the store is opened (or created).
            let def = workflow::load_file(&file, &Jsonata::default())
                .map_err(|e| CliError::new(e.to_string()))?;
            let s = env.open_rw()?;
            let (name, id) = crate::thread::register_def(&s, &def, env.now_ms)
                .map_err(|e| CliError::new(e.to_string()))?;
            if quiet {
                return write_stdout(format!("{}\n", id.to_wire()).as_bytes());
            }
            print(
                env.format,
                &obj([
                    ("name", Value::str(name)),
                    ("hash", Value::str(id.to_wire())),
                ]),
            )
        }
        WorkflowCommand::Validate { file } => {
            let (m, name) = load(&file)?;
            print(
                env.format,
                &obj([
                    ("name", Value::str(name)),
                    ("valid", Value::Bool(true)),
                    ("hash", Value::str(m.workflow_id.to_wire())),
                ]),
            )
        }
        WorkflowCommand::Show { workflow, graph } => {
            let s = env.open_ro()?;
            let (id, name) = resolve(&s, &workflow)?;
            let n = s
                .get(id)?
                .ok_or_else(|| CliError::new(format!("CAS node not found: {id}")))?;
            if !workflow::materialize::is_workflow_type(n.type_id) {
                return Err(CliError::new(format!(
                    "node {id} is not a Workflow (type {})",
                    n.type_id
                )));
            }
            let payload = n.payload()?;
            if let Some(format) = graph {
                let wf = StoredWorkflow::from_payload(&payload)
                    .map_err(|e| CliError::new(e.to_string()))?;
                let mut text = workflow::render_graph(&wf, format);
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                return write_stdout(text.as_bytes());
            }
            print(
                env.format,
                &obj([
                    ("hash", Value::str(id.to_wire())),
                    ("name", name.map_or(Value::Null, Value::String)),
                    ("type", Value::str(n.type_id.to_wire())),
                    ("payload", payload),
                    ("timestamp", Value::Number(n.timestamp as f64)),
                ]),
            )
        }
        WorkflowCommand::List => {
            let s = env.open_ro()?;
            let mut out = Vec::new();
            let mut local = std::collections::BTreeSet::new();
            for dir in [".workflow", ".workflows"] {
                for name in local_names(&env.cwd.join(dir)) {
                    if local.insert(name.clone()) {
                        out.push(obj([
                            ("name", Value::String(name)),
                            ("hash", Value::str("(local)")),
                            ("origin", Value::str("local")),
                        ]));
                    }
                }
            }
            for (name, id) in s.registry()? {
                if !local.contains(&name) {
                    out.push(obj([
                        ("name", Value::String(name)),
                        ("hash", Value::str(id.to_wire())),
                        ("origin", Value::str("global")),
                    ]));
                }
            }
            print(env.format, &Value::Array(out))
        }
        WorkflowCommand::History { name } => {
            let s = env.open_ro()?;
            let versions = s.registry_history(&name)?;
            if versions.is_empty() {
                return Err(unknown(&name));
            }
            let current = s
                .registry()?
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, id)| id);
            let list = versions
                .iter()
                .map(|v| {
                    obj([
                        ("hash", Value::str(v.workflow.to_wire())),
                        ("registeredAt", Value::Number(v.time_ms as f64)),
                        ("current", Value::Bool(Some(v.workflow) == current)),
                    ])
                })
                .collect();
            print(
                env.format,
                &obj([("name", Value::str(name)), ("versions", Value::Array(list))]),
            )
        }
        WorkflowCommand::Rollback { name, id } => {
            let s = env.open_rw()?;
            let versions = s.registry_history(&name)?;
            let current = s
                .registry()?
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, id)| id)
                .ok_or_else(|| unknown(&name))?;
            let target = match id {
                Some(id) => {
                    let id = s.resolve(&id)?;
                    if !versions.iter().any(|v| v.workflow == id) {
                        return Err(CliError::new(format!(
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
                        CliError::new(format!("workflow \"{name}\" has no earlier version"))
                    })?,
            };
            s.write(|w| w.registry_set(&name, target, env.now_ms))?;
            print(
                env.format,
                &obj([
                    ("name", Value::str(name)),
                    ("hash", Value::str(target.to_wire())),
                    ("previous", Value::str(current.to_wire())),
                ]),
            )
        }
    }
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

/// A workflow by registry name, else by id or prefix; with its registry name when it has one.
fn resolve(s: &Store, arg: &str) -> CliResult<(NodeId, Option<String>)> {
    let reg = s.registry()?;
    if let Some((name, id)) = reg.iter().find(|(n, _)| n == arg) {
        return Ok((*id, Some(name.clone())));
    }
    let id = match s.resolve(arg) {
        Ok(id) => id,
        Err(crate::store::StoreError::NoMatch(_) | crate::store::StoreError::BadId(_)) => {
            return Err(unknown(arg));
        }
        Err(e) => return Err(e.into()),
    };
    let name = reg.into_iter().find(|(_, i)| *i == id).map(|(n, _)| n);
    Ok((id, name))
}

/// Workflow names in a local directory: `<name>.yaml|yml` and `<name>/index.yaml|yml`.
fn local_names(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(Result::ok)
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
