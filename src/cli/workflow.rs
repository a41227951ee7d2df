//! `uwf workflow …`: register, show, list, validate, history and rollback.

use super::output::{NodeIdStr, print_as, write_stdout};
use super::{CliError, CliResult, Env};
use crate::query::workflow::{history, list_rows, load, parse, shown};
use crate::thread::registry;
use crate::workflow::{self, GraphFormat, Jsonata};
use clap::Subcommand;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
#[command(defer = true)]
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

/// `workflow list`.
fn cmd_list(env: &Env) -> CliResult {
    let s = env.open_ro()?;
    print_as(env.format, &list_rows(&s, &env.cwd)?)
}

/// `workflow history NAME`.
fn cmd_history(env: &Env, name: String) -> CliResult {
    let s = env.open_ro()?;
    print_as(env.format, &history(&s, name)?)
}
