//! `uwf store info|copy`: where the store is, how much it holds, and copying a whole store
//! between backends (a redb file and a PostgreSQL server, either way); `uwf limits`: the
//! per-workflow limits kept in the store, which every runner sharing it enforces.

use super::cas::Bar;
use super::output::print_as;
use super::{CliError, CliResult, Env};
use crate::store::{self, Store};
use clap::Subcommand;
use serde::Serialize;
use std::path::Path;

/// `uwf store …`.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
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
