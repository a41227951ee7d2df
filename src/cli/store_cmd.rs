//! `uwf store info|copy`: where the store is, how much it holds, and copying a whole store
//! between backends (a redb file and a PostgreSQL server, either way); `uwf limits`: the
//! per-workflow limits kept in the store, which every runner sharing it enforces.

use super::cas::Bar;
use super::output::print_as;
use super::{CliError, CliResult, Env};
use crate::store::{self, Store, WorkflowLimits};
use clap::Subcommand;
use serde::Serialize;
use std::path::Path;

/// `uwf store …`.
#[derive(Subcommand, Debug)]
pub(crate) enum StoreCommand {
    /// The backend, where it is (a server without its password), its format or schema version
    /// and what it holds.
    Info,
    /// Copy a whole store to another: nodes, threads, registry and history. Each of FROM and
    /// TO is a `postgres://` URL or a redb file path. Run again, it copies only what TO lacks
    /// (an interrupted copy resumes); it ends by checking every node in TO.
    Copy {
        /// The store to read.
        from: String,
        /// The store to write (created when it does not exist).
        to: String,
    },
}

/// `store info`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InfoOut {
    backend: &'static str,
    location: String,
    /// The redb file's format version, or the PostgreSQL schema version.
    version: u64,
    nodes: u64,
    threads: u64,
    history: u64,
    workflows: u64,
    leases: u64,
}

/// `store copy`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CopyOut {
    from: String,
    to: String,
    nodes: u64,
    nodes_written: u64,
    threads: u64,
    workflows: u64,
    history_written: u64,
    verified: u64,
}

pub(crate) fn run(c: StoreCommand, env: &Env) -> CliResult {
    match c {
        StoreCommand::Info => {
            let s = env.open_ro()?;
            let (backend, version) = s.backend()?;
            let n = s.counts()?;
            print_as(
                env.format,
                &InfoOut {
                    backend,
                    location: s.location(),
                    version,
                    nodes: n.nodes,
                    threads: n.threads,
                    history: n.history,
                    workflows: n.workflows,
                    leases: n.leases,
                },
            )
        }
        StoreCommand::Copy { from, to } => {
            let src = open_at(env, &from, false)?;
            let dst = open_at(env, &to, true)?;
            if src.location() == dst.location() {
                return Err(CliError::of(
                    crate::error::ErrorKind::User,
                    format!("FROM and TO are the same store ({})", src.location()),
                ));
            }
            let bar = Bar::new(env, "copy");
            let r = store::copy(&src, &dst, &|_, done, total| bar.set(done, total))?;
            bar.finish();
            print_as(
                env.format,
                &CopyOut {
                    from: src.location(),
                    to: dst.location(),
                    nodes: r.nodes,
                    nodes_written: r.nodes_written,
                    threads: r.threads,
                    workflows: r.workflows,
                    history_written: r.history_written,
                    verified: r.verified,
                },
            )
        }
    }
}

/// The store at `location`: a server URL, or a redb file (relative to the working directory;
/// created only when `create`).
fn open_at(env: &Env, location: &str, create: bool) -> CliResult<Store> {
    if Store::is_server_url(location) {
        return Ok(Store::open_url(location, &|k| std::env::var(k).ok())?);
    }
    let path = env.cwd.join(location);
    if !create && !Path::new(&path).exists() {
        return Err(CliError::of(
            crate::error::ErrorKind::User,
            format!(
                "no store at {}: expected a redb file or a postgres:// URL",
                path.display()
            ),
        ));
    }
    Ok(if create {
        Store::open(&path)?
    } else {
        Store::open_read_only(&path)?
    })
}

/// `uwf limits …`.
#[derive(Subcommand, Debug)]
pub(crate) enum LimitsCommand {
    /// Set limits of a workflow in the store (what is not given stays as it was); they win over
    /// `workflows.<name>` of config.yaml, on every machine whose runners share the store.
    Set {
        /// The workflow's registered name.
        name: String,
        /// Threads of it in progress at once.
        #[arg(long)]
        concurrency: Option<u32>,
        /// What a thread started beyond the limit does.
        #[arg(long, value_parser = ["queue", "drop"])]
        overflow: Option<String>,
        /// The most threads waiting (the oldest is dropped beyond it).
        #[arg(long)]
        max_queue: Option<u32>,
        /// Consecutive failed steps after which a thread fails.
        #[arg(long)]
        max_retries: Option<u32>,
    },
    /// The limits kept in the store, by workflow name.
    List,
    /// Remove a workflow's limits from the store.
    Rm {
        /// The workflow's registered name.
        name: String,
    },
}

/// One workflow's limits.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LimitsOut<'a> {
    workflow: &'a str,
    concurrency: Option<u32>,
    overflow: &'static str,
    max_queue: Option<u32>,
    max_retries: Option<u32>,
}

impl<'a> LimitsOut<'a> {
    fn of(workflow: &'a str, l: &WorkflowLimits) -> LimitsOut<'a> {
        LimitsOut {
            workflow,
            concurrency: (l.concurrency > 0).then_some(l.concurrency),
            overflow: if l.drop { "drop" } else { "queue" },
            max_queue: l.max_queue,
            max_retries: l.max_retries,
        }
    }
}

/// `limits rm`.
#[derive(Serialize)]
struct Removed<'a> {
    workflow: &'a str,
    removed: bool,
}

pub(crate) fn limits(c: LimitsCommand, env: &Env) -> CliResult {
    match c {
        LimitsCommand::Set {
            name,
            concurrency,
            overflow,
            max_queue,
            max_retries,
        } => {
            if concurrency == Some(0) {
                return Err(CliError::of(
                    crate::error::ErrorKind::User,
                    "--concurrency must be at least 1",
                ));
            }
            if max_retries == Some(0) {
                return Err(CliError::of(
                    crate::error::ErrorKind::User,
                    "--max-retries must be at least 1",
                ));
            }
            let s = env.open_rw()?;
            let l = s.write(|w| {
                let old = w.set_workflow_limits(&name, None)?;
                let mut l = old.unwrap_or(WorkflowLimits {
                    concurrency: 0,
                    drop: false,
                    max_queue: None,
                    max_retries: None,
                });
                if let Some(c) = concurrency {
                    l.concurrency = c;
                }
                if let Some(o) = &overflow {
                    l.drop = o == "drop";
                }
                if max_queue.is_some() {
                    l.max_queue = max_queue;
                }
                if max_retries.is_some() {
                    l.max_retries = max_retries;
                }
                w.set_workflow_limits(&name, Some(&l))?;
                Ok(l)
            })?;
            print_as(env.format, &LimitsOut::of(&name, &l))
        }
        LimitsCommand::List => {
            let s = env.open_ro()?;
            let all = s.workflow_limits()?;
            let out: Vec<LimitsOut<'_>> = all.iter().map(|(n, l)| LimitsOut::of(n, l)).collect();
            print_as(env.format, &out)
        }
        LimitsCommand::Rm { name } => {
            let s = env.open_rw()?;
            let old = s.write(|w| w.set_workflow_limits(&name, None))?;
            print_as(
                env.format,
                &Removed {
                    workflow: &name,
                    removed: old.is_some(),
                },
            )
        }
    }
}
