//! Export of a store to the directory layout, and import of that layout into a store.
//!
//! Both stream: export walks the store in write order in one read snapshot and writes file
//! by file; import lists the node files, reads them in runs sorted by id (a few reader
//! threads, a bounded number of files in flight) and commits in batches, so an interrupted run
//! leaves only whole batches and a second run finishes the work.
//!
//! `export` writes; `import` reads a whole layout, node files through `nodes` and the root
//! files through `roots`.

mod export;
mod import;
mod nodes;
mod roots;

pub(crate) use export::write_root_files;
pub use export::{ExportReport, export};
pub use import::import;
pub(crate) use import::{import_new_nodes, import_node_items, import_root_files, import_with_cas};
pub(crate) use roots::read_optional;

use super::export_files::ExportError;
use super::layout::{CAS_DIR, REGISTRY_FILE, THREADS_FILE, WORKFLOWS_FILE};
use crate::store::StoreError;
use std::path::{Path, PathBuf};

/// Why an export or import stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the export failed.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// A file of the layout could not be read at all.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Progress callback: (what, done, total or 0 when unknown).
pub(crate) type Progress<'a> = &'a dyn Fn(&str, u64, u64);

/// Options of an import.
#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    /// Replace thread heads and registry names that exist with other values.
    pub overwrite: bool,
    /// Nodes per transaction.
    pub batch: usize,
    /// Largest node file read.
    pub max_file_size: u64,
    /// Time recorded for imported registry names, ms since the epoch.
    pub now_ms: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            overwrite: false,
            batch: 8192,
            max_file_size: super::layout::DEFAULT_MAX_FILE_SIZE,
            now_ms: 0,
        }
    }
}

/// Counts of one kind of imported item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// New in the store.
    pub imported: u64,
    /// Already there with the same value.
    pub present: u64,
    /// Left out (see the problems).
    pub skipped: u64,
    /// Threads moved forward to an incoming head that continues theirs.
    pub fast_forwarded: u64,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Node files.
    pub nodes: Counts,
    /// `threads.yaml` entries.
    pub threads: Counts,
    /// `workflows.yaml` / `registry.yaml` entries.
    pub registry: Counts,
    /// `history.jsonl` lines.
    pub history: Counts,
    /// Names that exist with another value (kept, or replaced with `overwrite`).
    pub conflicts: Vec<String>,
    /// Everything skipped, one line each.
    pub problems: Vec<String>,
    /// What was kept but is worth knowing (nodes whose type is not a schema), one line each.
    pub warnings: Vec<String>,
}

/// Nodes whose type is not a schema named one by one in an import's warnings.
const UNTYPED_WARNINGS: usize = 100;

/// Whether `root` holds the file layout (a `cas/` directory or the root files).
pub(crate) fn has_layout(root: &Path) -> bool {
    root.join(CAS_DIR).is_dir()
        || root.join(THREADS_FILE).is_file()
        || root.join(WORKFLOWS_FILE).is_file()
        || root.join(REGISTRY_FILE).is_file()
}
