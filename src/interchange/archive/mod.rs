//! The layout as one tar stream: `uwf export --archive` and the import of such a stream.
//!
//! `tar x` of an archive gives exactly the files `uwf export DIR` writes (same paths, same
//! bytes), plus `uwf.archive.json`. Members, in this order:
//!
//! ```text
//! uwf.archive.json          the manifest (below), always first
//! cas/                      directory
//! cas/<ID>.bin …            node files, in write order (sequence number)
//! cas/_index/               directory
//! cas/_index/<TYPE> …       index files, by type id; then cas/_index/_meta when there is one
//! threads.yaml  workflows.yaml  registry.yaml  history.jsonl  uwf.jsonl
//! ```
//!
//! Every header is ustar with mode 0644 (directories 0755), mtime 0, uid and gid 0 and empty
//! owner names, so the same store gives the same archive bytes. A name ending in `.zst` is
//! compressed with zstd (level 1, with the frame checksum); an import detects zstd by its magic
//! bytes, whatever the name. The export streams: node members are written as the store is
//! walked (a second thread compresses), and only the index (16 bytes a node, as for a
//! directory export) is kept until the nodes are written.
//!
//! The manifest is one JSON object:
//! `{"format":"uwf-archive","version":1,"since":null,"until":N,"last":[N-1,"<ID>"],"files":{"threads.yaml":"<BLAKE3>",…}}`.
//! `until` is the store's write mark when the archive was made (every node written before has
//! a smaller sequence number); `last` is the last node written before it (a `--since` from an
//! archive of another store is refused when this store does not hold that node at that place);
//! `files` holds the digests of the root files of that state.
//! `export --archive NEW --since OLD` reads only OLD's manifest and writes the nodes written
//! from OLD's `until` to its own, the index files of the types that gained nodes (whole), and
//! the root files whose digests differ from OLD's; `since` is OLD's `until`. So extracting a
//! full archive and then each `--since` archive in order gives the directory export of the
//! latest state, and importing them in that order gives the store one full archive gives. The
//! import of a `--since` archive replaces thread heads and registry names (it holds a later
//! state of the same store), as `--overwrite` does. A node whose timestamp an import made
//! earlier keeps its sequence number, so a `--since` archive does not carry that change.
//!
//! An import reads the archive twice (standard input is first copied to a file beside the
//! store): the first pass checks every member and changes nothing: its path must be one of the
//! layout ([`classify_path`](super::layout::classify_path): no absolute path, no `..`), a link is refused, a node
//! file must hold the node its name says (`layout::check_node_bytes`), a root file must have
//! the manifest's digest, and the stream must end with tar's end-of-archive block and a
//! complete zstd frame. Any of these stops the import with one line before anything is stored.
//! The second pass imports through the directory import's own path
//! (`transfer::import_node_items` and `transfer::import_root_files`), checking each node again.
//!
//! `export` writes an archive; `import` checks one, then imports it.

mod export;
mod import;

pub use export::export_archive;
pub use import::{CheckedArchive, Source, check_archive, import_archive, read_manifest};

use crate::interchange::export_files::ExportError;
use crate::interchange::transfer::{ExportReport, TransferError};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// The manifest's member name, first in every archive.
pub const MANIFEST: &str = "uwf.archive.json";
/// The `format` field of the manifest.
pub const FORMAT: &str = "uwf-archive";
/// The manifest version written; a newer one is refused.
pub const VERSION: u64 = 1;
/// Mode of a file member.
pub const FILE_MODE: u32 = 0o644;
/// Mode of a directory member.
pub const DIR_MODE: u32 = 0o755;
/// Modification time of every member (seconds since the epoch).
pub const MTIME: u64 = 0;
/// zstd level of a `.zst` archive: level 1 compresses the bench's layout 30 % faster than the
/// default level 3, for an archive 6 % larger.
pub(super) const ZSTD_LEVEL: i32 = 1;
/// The first bytes of a zstd frame.
pub(super) const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// Largest manifest read.
pub(super) const MAX_MANIFEST: u64 = 1 << 20;
/// Node members sorted by id and imported together, at most (payload bytes): the store's
/// batches then write neighbouring keys.
pub(super) const RUN_BYTES: usize = 64 << 20;
/// Bytes of node members handed to the compressing thread at a time.
pub(super) const CHUNK_BYTES: usize = 256 << 10;

/// Why an archive export or import stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The store, or the import's own reading of the layout, failed.
    #[error(transparent)]
    Transfer(#[from] TransferError),
    /// The archive is not one uwf imports (or `--since` cannot use it); nothing was changed.
    /// Shown on one line: a message quoting the archive's own bytes (a member's name, a
    /// corrupt header field) has its control characters escaped.
    #[error("{}: {}", escaped(.archive), escaped(.message))]
    Refused {
        /// The archive as the user named it.
        archive: String,
        /// Why.
        message: String,
    },
    /// A file could not be written or read.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
}

/// `s` with its control characters (a line break, an escape) written as escapes.
fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl From<StoreError> for ArchiveError {
    fn from(e: StoreError) -> Self {
        ArchiveError::Transfer(e.into())
    }
}

impl From<ExportError> for ArchiveError {
    fn from(e: ExportError) -> Self {
        ArchiveError::Transfer(e.into())
    }
}

pub(super) fn io_err<'a>(
    action: &'static str,
    path: &'a str,
) -> impl FnOnce(io::Error) -> ArchiveError + 'a {
    move |source| ArchiveError::Io {
        action,
        path: path.to_string(),
        source,
    }
}

/// The manifest `uwf.archive.json` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`] when written.
    pub version: u64,
    /// The write mark the archive starts from (`None`: a full archive).
    pub since: Option<u64>,
    /// The write mark the archive ends at.
    pub until: u64,
    /// The last node written before `until`, `[seq, "ID"]`: `--since` checks that the store
    /// holds it at that place, so that an archive of another store is refused.
    #[serde(default)]
    pub last: Option<(u64, String)>,
    /// BLAKE3 (hex) of each root file of the archived state, by name.
    pub files: BTreeMap<String, String>,
    /// The store's removal mark (`Store::removal_mark`) when the archive began.
    #[serde(default)]
    pub removal_mark: u64,
    /// With `since`: the threads and registry names removed after the earlier archive, in
    /// order; an import applies them before the root files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<crate::store::Removal>,
}

impl Manifest {
    fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let m: Manifest =
            serde_json::from_slice(bytes).map_err(|e| format!("{MANIFEST} does not parse: {e}"))?;
        if m.format != FORMAT {
            return Err(format!(
                "{MANIFEST}: format {:?} is not {FORMAT:?}",
                m.format
            ));
        }
        if m.version > VERSION {
            return Err(format!(
                "{MANIFEST}: version {} is newer than this uwf reads ({VERSION}); update uwf",
                m.version
            ));
        }
        Ok(m)
    }
}

/// What an archive export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchiveReport {
    /// Node members.
    pub nodes: u64,
    /// Index members.
    pub index_files: u64,
    /// Root file members.
    pub root_files: u64,
    /// The manifest.
    pub manifest: Option<Manifest>,
    /// Threads, registry names, history lines of the state (as a directory export counts them).
    pub state: ExportReport,
}

/// A directory of the archive code's own, removed with everything in it when dropped.
pub(super) struct Scratch(PathBuf);

impl Scratch {
    pub(super) fn new(parent: &Path) -> Result<Scratch, ArchiveError> {
        let mut n = 0u32;
        loop {
            let p = parent.join(format!(".uwf-archive-{}-{n}", std::process::id()));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(Scratch(p)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(io_err("create directory", &p.display().to_string())(e)),
            }
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_quoting_the_archives_bytes_is_one_line() {
        let e = ArchiveError::Refused {
            archive: "a.tar".into(),
            message: "numeric field was not a number: 0011 g\n\u{1b}[2J when getting cksum for x"
                .into(),
        };
        assert_eq!(
            e.to_string(),
            r"a.tar: numeric field was not a number: 0011 g\n\u{1b}[2J when getting cksum for x"
        );
        let plain = ArchiveError::Refused {
            archive: "b.tar.zst".into(),
            message: "truncated archive: cas/X.bin ends after 3 of its 9 bytes; ü".into(),
        };
        assert_eq!(
            plain.to_string(),
            "b.tar.zst: truncated archive: cas/X.bin ends after 3 of its 9 bytes; ü"
        );
    }

    #[test]
    fn manifest_round_trip_and_refusals() {
        let m = Manifest {
            format: FORMAT.into(),
            version: VERSION,
            since: Some(3),
            until: 9,
            last: Some((8, "CTS5P6RD8HMCS".into())),
            files: BTreeMap::from([("threads.yaml".to_string(), "ab".to_string())]),
            removal_mark: 2,
            removed: vec![crate::store::Removal::Thread("T".into())],
        };
        let text = serde_json::to_vec(&m).unwrap();
        assert!(
            String::from_utf8_lossy(&text).contains(r#""removed":[{"kind":"thread","name":"T"}]"#)
        );
        assert_eq!(Manifest::parse(&text).unwrap(), m);
        assert!(Manifest::parse(b"{}").is_err());
        let newer = String::from_utf8(text)
            .unwrap()
            .replace("\"version\":1", "\"version\":2");
        assert!(
            Manifest::parse(newer.as_bytes())
                .unwrap_err()
                .contains("newer")
        );
    }
}
