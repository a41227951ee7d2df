//! The directory layout, in one place: which path holds what, file name ↔ id, and a streaming
//! scanner that reads and checks every node file of an export directory.
//!
//! ```text
//! DIR/cas/<ID>.bin          node, flat (@ocas/fs 0.1 – 0.3)
//! DIR/cas/nodes/<ID>.bin    node (@ocas/fs 0.4 and later)
//! DIR/cas/<ID>.tmp          transient, ignored
//! DIR/cas/_index/<TYPE>     ids of that type, one per line (rebuilt on import, so ignored)
//! DIR/cas/_index/_meta      ids of self-typed nodes
//! DIR/threads.yaml  DIR/workflows.yaml  DIR/registry.yaml  DIR/history.jsonl
//! ```
//!
//! The scanner trusts nothing: it never follows a symbolic link, never opens anything but a
//! regular file, never reads a file larger than its limit, and re-hashes every node it reads.
//! A node file that decodes but is not in canonical form is still a node: its id depends only
//! on the canonical payload, so when that id equals the file name it is yielded (with
//! `canonical: false`, and the canonical payload bytes) for the importer to store in canonical
//! form; when it does not, it is a wrong-id problem like any other.

use crate::cas::cbor::{self, CborError};
use crate::cas::id::ID_LEN;
use crate::cas::{NodeId, hash};
use std::ffi::OsStr;
use std::fs::{self, ReadDir};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// Directory of the CAS inside a root.
pub(crate) const CAS_DIR: &str = "cas";
/// Sub-directory of node files in the later (@ocas/fs 0.4) layout.
pub(crate) const NODES_DIR: &str = "nodes";
/// Directory of the type index inside the CAS directory.
pub(crate) const INDEX_DIR: &str = "_index";
/// Index file listing self-typed (meta) nodes.
pub(crate) const META_INDEX: &str = "_meta";
/// Where the export writer stages index files before moving them into [`INDEX_DIR`].
pub(crate) const INDEX_STAGING_DIR: &str = "_index.staging";
/// Active threads: `THREADID: HEADID`.
pub(crate) const THREADS_FILE: &str = "threads.yaml";
/// The workflow registry as the shipped tool names it: `name: WORKFLOWID`.
pub(crate) const WORKFLOWS_FILE: &str = "workflows.yaml";
/// The workflow registry as the documentation names it (same content).
pub(crate) const REGISTRY_FILE: &str = "registry.yaml";
/// Finished threads, one JSON object per line.
pub(crate) const HISTORY_FILE: &str = "history.jsonl";
/// Extension of a node file.
pub(crate) const NODE_EXT: &str = ".bin";
/// Extension of a node file being written.
pub(crate) const TMP_EXT: &str = ".tmp";
/// Default largest node file the scanner reads: 64 MiB.
pub(crate) const DEFAULT_MAX_FILE_SIZE: u64 = 64 << 20;

/// `<ID>.bin`.
pub fn node_file_name(id: NodeId) -> String {
    format!("{}{NODE_EXT}", id.to_wire())
}

/// `<ID>.<pid>-<n>.tmp`, a name no other writer uses: processes (the agents' roots of threads
/// stepped at once) and threads writing the same node never rename each other's file away.
pub(crate) fn tmp_file_name(id: NodeId) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}.{}-{n}{TMP_EXT}", id.to_wire(), std::process::id())
}

/// The id a node file name stands for: exactly 13 upper-case Crockford characters and `.bin`,
/// as the TypeScript tool writes them. `None` for anything else.
pub(crate) fn parse_node_file_name(name: &OsStr) -> Option<NodeId> {
    let name = name.to_str()?;
    let stem = name.strip_suffix(NODE_EXT)?;
    if stem.len() != ID_LEN {
        return None;
    }
    NodeId::parse_strict(stem)
}

/// `dir/name`, refusing a `name` that is not one plain path component (no separator, no
/// `..`, not absolute), so that nothing built from data can point outside `dir`.
///
/// # Errors
/// [`ScanProblem::UnsafeName`] naming the component.
pub(crate) fn join_component(dir: &Path, name: &str) -> Result<PathBuf, ScanProblem> {
    let mut comps = Path::new(name).components();
    match (comps.next(), comps.next()) {
        (Some(Component::Normal(c)), None) if c == OsStr::new(name) => Ok(dir.join(name)),
        _ => Err(ScanProblem::UnsafeName {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        }),
    }
}

/// The root files of the layout, in the order an archive holds them: the TypeScript tool's,
/// then uwf's own (`uwf.jsonl`).
pub const ROOT_FILES: [&str; 5] = [
    THREADS_FILE,
    WORKFLOWS_FILE,
    REGISTRY_FILE,
    HISTORY_FILE,
    super::extra::UWF_FILE,
];

/// What a relative path of the layout stands for (see [`classify_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutPath {
    /// A directory of the layout: `cas`, `cas/nodes` or `cas/_index`.
    Dir,
    /// A node file.
    Node(NodeId, Layout),
    /// An index file `cas/_index/<TYPE>` or `cas/_index/_meta` (rebuilt on import, not read).
    Index,
    /// One of [`ROOT_FILES`].
    Root(&'static str),
}

/// Why a relative path is not one of the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRefusal {
    /// Absolute, or with a `..` component: it could point outside the target directory.
    Unsafe,
    /// Safe, but not a path the layout has.
    NotInLayout,
}

/// Classifies a relative, `/`-separated path of the layout (as a tar member names it): a
/// leading `./` and one trailing `/` are allowed, empty and `.` components are not (`./`
/// itself is the root directory).
///
/// # Errors
/// [`PathRefusal::Unsafe`] for an absolute path or a `..` component, else
/// [`PathRefusal::NotInLayout`] for anything but a directory, node file, index file or root
/// file of the layout.
pub fn classify_path(path: &str) -> Result<LayoutPath, PathRefusal> {
    if path.starts_with('/') || path.split(['/', '\\']).any(|c| c == "..") {
        return Err(PathRefusal::Unsafe);
    }
    if path == "." || path == "./" {
        // The root itself, as `tar cf - -C DIR .` names it.
        return Ok(LayoutPath::Dir);
    }
    let rel = path.strip_prefix("./").unwrap_or(path);
    let rel = rel.strip_suffix('/').unwrap_or(rel);
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.iter().any(|c| c.is_empty() || *c == ".") {
        return Err(PathRefusal::NotInLayout);
    }
    let index_name =
        |n: &str| n == META_INDEX || (n.len() == ID_LEN && NodeId::parse_strict(n).is_some());
    let node = |n: &str, layout| {
        parse_node_file_name(OsStr::new(n))
            .map(|id| LayoutPath::Node(id, layout))
            .ok_or(PathRefusal::NotInLayout)
    };
    match parts.as_slice() {
        [CAS_DIR] | [CAS_DIR, NODES_DIR | INDEX_DIR] => Ok(LayoutPath::Dir),
        [CAS_DIR, INDEX_DIR, n] if index_name(n) => Ok(LayoutPath::Index),
        [CAS_DIR, NODES_DIR, n] => node(n, Layout::Nodes),
        [CAS_DIR, n] => node(n, Layout::Flat),
        [n] => ROOT_FILES
            .iter()
            .find(|f| **f == *n)
            .map(|f| LayoutPath::Root(f))
            .ok_or(PathRefusal::NotInLayout),
        _ => Err(PathRefusal::NotInLayout),
    }
}

/// Which layout a node file was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `cas/<ID>.bin`.
    Flat,
    /// `cas/nodes/<ID>.bin`.
    Nodes,
}

/// A node file that decoded and whose recomputed id equals its name.
#[derive(Debug, Clone, PartialEq)]
pub struct ScannedNode {
    /// The file.
    pub path: PathBuf,
    /// Where it was found.
    pub layout: Layout,
    /// Its id (the file name, confirmed by re-hashing).
    pub id: NodeId,
    /// The type id.
    pub type_id: NodeId,
    /// Whether the node is its own type (the meta-schema).
    pub self_typed: bool,
    /// The canonical CBOR of the payload (what the id hashes).
    pub payload_cbor: Vec<u8>,
    /// BLAKE3 of the hashed bytes (what the store records beside the id).
    pub digest: [u8; 32],
    /// Milliseconds since the epoch of the first write.
    pub timestamp: u64,
    /// Whether the file is byte-identical to the canonical encoding of the node.
    pub canonical: bool,
}

/// A file or directory of the layout that is not an acceptable node file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanProblem {
    /// A directory could not be listed.
    #[error("cannot list {path}: {source}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A name that is not `<13 Crockford characters>.bin`.
    #[error("{path}: not a node file name (expected <13 Crockford characters>.bin)")]
    BadName {
        /// The entry.
        path: PathBuf,
    },
    /// A symbolic link; links are never followed.
    #[error("{path}: symbolic link refused (links are never followed)")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A directory, device, FIFO or socket where a node file should be.
    #[error("{path}: not a regular file ({kind})")]
    NotAFile {
        /// The entry.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// A file that could not be read.
    #[error("cannot read {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A file larger than the scanner's limit; it was not read.
    #[error("{path}: {size} bytes is larger than the limit of {limit} bytes; skipped")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Bytes that are not a CBOR node `{type, payload, timestamp}`.
    #[error("{path}: not a node: {error}")]
    Undecodable {
        /// The file.
        path: PathBuf,
        /// The decoder's error.
        error: CborError,
    },
    /// A node whose `type` is not an id.
    #[error("{path}: type {type_id:?} is not a node id")]
    BadType {
        /// The file.
        path: PathBuf,
        /// The type as written.
        type_id: String,
    },
    /// A node whose content hashes to another id than its file name.
    #[error("{path}: content hashes to {actual}, not to its file name {name}")]
    WrongId {
        /// The file.
        path: PathBuf,
        /// The id the name claims.
        name: NodeId,
        /// The id of the content.
        actual: NodeId,
    },
    /// A name built from data that is not a single path component.
    #[error("unsafe file name {name:?} in {dir}")]
    UnsafeName {
        /// The directory it would be joined to.
        dir: PathBuf,
        /// The name.
        name: String,
    },
}

impl ScanProblem {
    /// The path the problem is about.
    pub fn path(&self) -> &Path {
        match self {
            ScanProblem::ReadDir { path, .. }
            | ScanProblem::BadName { path }
            | ScanProblem::Symlink { path }
            | ScanProblem::NotAFile { path, .. }
            | ScanProblem::Unreadable { path, .. }
            | ScanProblem::TooLarge { path, .. }
            | ScanProblem::Undecodable { path, .. }
            | ScanProblem::BadType { path, .. }
            | ScanProblem::WrongId { path, .. } => path,
            ScanProblem::UnsafeName { dir, .. } => dir,
        }
    }
}

/// One item of a scan.
#[derive(Debug)]
pub enum ScanItem {
    /// A good node.
    Node(Box<ScannedNode>),
    /// An entry that is not a good node, with the reason.
    Problem(ScanProblem),
    /// An entry the layout allows and import does not need (`_index/`, `*.tmp`).
    Ignored(PathBuf),
}

/// One entry of a listing: a node file to read, or an entry settled without reading it.
#[derive(Debug)]
pub(crate) enum Listed {
    /// A regular file named `<ID>.bin`, not read yet.
    File(NodeId, Layout),
    /// A problem or an ignored entry.
    Item(ScanItem),
}

/// Lists the entries of `DIR/cas/` and then `DIR/cas/nodes/` without reading any file: node
/// file names become [`Listed::File`], everything else is classified on the spot.
///
/// Memory stays bounded by one directory handle, whatever the number of files. The order is
/// the file system's (not sorted).
pub(crate) struct Lister {
    cas: PathBuf,
    current: Option<(ReadDir, Layout)>,
    pending_nodes_dir: bool,
    started: bool,
}

impl Lister {
    /// A lister of the root `dir` (the directory holding `cas/`). A root without `cas/`
    /// lists nothing.
    pub(crate) fn new(dir: &Path) -> Lister {
        Lister::of_cas(&dir.join(CAS_DIR))
    }

    /// A lister of the CAS directory `cas` itself (`<root>/cas`, or a CAS kept elsewhere such
    /// as the TypeScript CLI's `~/.uncaged/json-cas`). An absent directory lists nothing.
    pub(crate) fn of_cas(cas: &Path) -> Lister {
        Lister {
            cas: cas.to_path_buf(),
            current: None,
            pending_nodes_dir: false,
            started: false,
        }
    }

    /// Opens a directory of node files, refusing a symbolic link; `Ok(None)` when absent.
    fn open_dir(path: &Path) -> Result<Option<ReadDir>, ScanProblem> {
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ScanProblem::ReadDir {
                path: path.to_path_buf(),
                source,
            }),
            Ok(m) if m.file_type().is_symlink() => Err(ScanProblem::Symlink {
                path: path.to_path_buf(),
            }),
            Ok(m) if !m.is_dir() => Err(ScanProblem::NotAFile {
                path: path.to_path_buf(),
                kind: "expected a directory",
            }),
            Ok(_) => fs::read_dir(path)
                .map(Some)
                .map_err(|source| ScanProblem::ReadDir {
                    path: path.to_path_buf(),
                    source,
                }),
        }
    }

    /// Classifies one directory entry. `ft` is the entry's own type (links not followed), as
    /// the directory listing gives it, so a good node file costs no system call here.
    fn entry(
        &mut self,
        path: PathBuf,
        name: &OsStr,
        ft: io::Result<fs::FileType>,
        layout: Layout,
    ) -> Option<Listed> {
        let problem = |p| Some(Listed::Item(ScanItem::Problem(p)));
        let ft = match ft {
            Ok(ft) => ft,
            Err(source) => return problem(ScanProblem::Unreadable { path, source }),
        };
        if ft.is_symlink() {
            return problem(ScanProblem::Symlink { path });
        }
        if layout == Layout::Flat && ft.is_dir() {
            if name == INDEX_DIR || name == INDEX_STAGING_DIR {
                return Some(Listed::Item(ScanItem::Ignored(path)));
            }
            if name == NODES_DIR {
                self.pending_nodes_dir = true;
                return None;
            }
        }
        let Some(id) = parse_node_file_name(name) else {
            if name.to_str().is_some_and(|n| n.ends_with(TMP_EXT)) && ft.is_file() {
                return Some(Listed::Item(ScanItem::Ignored(path)));
            }
            if ft.is_dir() {
                return problem(ScanProblem::NotAFile {
                    path,
                    kind: "unexpected directory",
                });
            }
            return problem(ScanProblem::BadName { path });
        };
        if !ft.is_file() {
            let kind = if ft.is_dir() {
                "a directory"
            } else {
                "a device, FIFO or socket"
            };
            return problem(ScanProblem::NotAFile { path, kind });
        }
        Some(Listed::File(id, layout))
    }
}

impl Iterator for Lister {
    type Item = Listed;

    fn next(&mut self) -> Option<Listed> {
        loop {
            if self.current.is_none() {
                let (path, layout) = if !self.started {
                    self.started = true;
                    (self.cas.clone(), Layout::Flat)
                } else if self.pending_nodes_dir {
                    self.pending_nodes_dir = false;
                    (self.cas.join(NODES_DIR), Layout::Nodes)
                } else {
                    return None;
                };
                match Lister::open_dir(&path) {
                    Ok(Some(rd)) => self.current = Some((rd, layout)),
                    Ok(None) => continue,
                    Err(p) => return Some(Listed::Item(ScanItem::Problem(p))),
                }
            }
            let (rd, layout) = self.current.as_mut().expect("set above");
            let layout = *layout;
            match rd.next() {
                None => self.current = None,
                Some(Err(source)) => {
                    let path = if layout == Layout::Flat {
                        self.cas.clone()
                    } else {
                        self.cas.join(NODES_DIR)
                    };
                    // A failing directory stream does not recover: stop this directory.
                    self.current = None;
                    return Some(Listed::Item(ScanItem::Problem(ScanProblem::ReadDir {
                        path,
                        source,
                    })));
                }
                Some(Ok(entry)) => {
                    let name = entry.file_name();
                    let ft = entry.file_type();
                    if let Some(item) = self.entry(entry.path(), &name, ft, layout) {
                        return Some(item);
                    }
                }
            }
        }
    }
}

/// The path of node `id` of `layout` in the CAS directory `cas`.
pub(crate) fn node_path_in(cas: &Path, layout: Layout, id: NodeId) -> PathBuf {
    let cas = cas.to_path_buf();
    let base = match layout {
        Layout::Flat => cas,
        Layout::Nodes => cas.join(NODES_DIR),
    };
    base.join(node_file_name(id))
}

/// Reads and checks the listed file `id` of `layout` under the root `dir`.
pub(crate) fn read_listed(dir: &Path, layout: Layout, id: NodeId, max_size: u64) -> ScanItem {
    read_listed_in(&dir.join(CAS_DIR), layout, id, max_size)
}

/// Reads and checks the listed file `id` of `layout` in the CAS directory `cas`.
pub(crate) fn read_listed_in(cas: &Path, layout: Layout, id: NodeId, max_size: u64) -> ScanItem {
    match read_node_file(&node_path_in(cas, layout, id), id, layout, max_size) {
        Ok(n) => ScanItem::Node(Box::new(n)),
        Err(p) => ScanItem::Problem(p),
    }
}

/// Streams the node files of `DIR/cas/` and then `DIR/cas/nodes/`, one at a time: a
/// `Lister` that reads each node file as it is listed.
///
/// Memory stays bounded by one directory handle and one file, whatever the number of files.
/// The order is the file system's (not sorted).
pub struct Scanner {
    dir: PathBuf,
    lister: Lister,
    max_file_size: u64,
}

impl Scanner {
    /// A scanner of the root `dir` (the directory holding `cas/`), with the default size limit.
    ///
    /// A root without `cas/` yields nothing.
    pub fn new(dir: &Path) -> Scanner {
        Scanner {
            dir: dir.to_path_buf(),
            lister: Lister::new(dir),
            max_file_size: DEFAULT_MAX_FILE_SIZE,
        }
    }

    /// Sets the largest file size read; larger files are reported as [`ScanProblem::TooLarge`].
    pub fn max_file_size(mut self, bytes: u64) -> Scanner {
        self.max_file_size = bytes;
        self
    }
}

impl Iterator for Scanner {
    type Item = ScanItem;

    fn next(&mut self) -> Option<ScanItem> {
        Some(match self.lister.next()? {
            Listed::File(id, layout) => read_listed(&self.dir, layout, id, self.max_file_size),
            Listed::Item(item) => item,
        })
    }
}

/// Reads and checks one node file that should hold node `id` (see the module docs).
///
/// # Errors
/// The [`ScanProblem`] of the file: unreadable, too large, undecodable, bad type or wrong id.
pub fn read_node_file(
    path: &Path,
    id: NodeId,
    layout: Layout,
    max_size: u64,
) -> Result<ScannedNode, ScanProblem> {
    let unreadable = |source| ScanProblem::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(ScanProblem::NotAFile {
            path: path.to_path_buf(),
            kind: "not a regular file when opened",
        });
    }
    if meta.len() > max_size {
        return Err(ScanProblem::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit: max_size,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max_size) as usize);
    // `take` bounds the read even if the file grows after the size check.
    file.take(max_size + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > max_size {
        return Err(ScanProblem::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit: max_size,
        });
    }
    check_node_bytes(path, &bytes, id, layout)
}

/// Decodes and re-hashes node file bytes that should hold node `id`.
///
/// # Errors
/// [`ScanProblem::Undecodable`], [`ScanProblem::BadType`] or [`ScanProblem::WrongId`].
pub(crate) fn check_node_bytes(
    path: &Path,
    bytes: &[u8],
    id: NodeId,
    layout: Layout,
) -> Result<ScannedNode, ScanProblem> {
    // Files in canonical form (all that uwf and the TypeScript tool write) are checked in
    // place; only others are decoded into a value and encoded again.
    let (type_text, payload_cbor, timestamp, canonical) = match cbor::split_canonical_node(bytes) {
        Some(c) => (
            std::borrow::Cow::Borrowed(c.type_id),
            c.payload_cbor.to_vec(),
            c.timestamp,
            true,
        ),
        None => {
            let parts = cbor::decode_node(bytes).map_err(|error| ScanProblem::Undecodable {
                path: path.to_path_buf(),
                error,
            })?;
            (
                std::borrow::Cow::Owned(parts.type_id),
                cbor::encode(&parts.payload),
                parts.timestamp,
                false,
            )
        }
    };
    let Some(type_id) = NodeId::parse_strict(&type_text) else {
        return Err(ScanProblem::BadType {
            path: path.to_path_buf(),
            type_id: type_text.into_owned(),
        });
    };
    let mut actual = hash::node_id(type_id, &payload_cbor);
    let mut self_typed = false;
    if actual != id {
        // A self-typed node hashes its payload alone and names itself as its type.
        let s = hash::self_id(&payload_cbor);
        if s == type_id {
            actual = s;
            self_typed = true;
        }
    }
    if actual != id {
        return Err(ScanProblem::WrongId {
            path: path.to_path_buf(),
            name: id,
            actual,
        });
    }
    let digest = hash::digest(type_id, self_typed, &payload_cbor);
    Ok(ScannedNode {
        path: path.to_path_buf(),
        layout,
        id,
        type_id,
        self_typed,
        payload_cbor,
        digest,
        timestamp,
        canonical,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let id = NodeId::parse("CTS5P6RD8HMCS").unwrap();
        assert_eq!(node_file_name(id), "CTS5P6RD8HMCS.bin");
        assert_eq!(
            parse_node_file_name(OsStr::new("CTS5P6RD8HMCS.bin")),
            Some(id)
        );
        for bad in [
            "cts5p6rd8hmcs.bin",
            "CTS5P6RD8HMCS",
            "CTS5P6RD8HMC.bin",
            "ZTS5P6RD8HMCS.bin",
        ] {
            assert_eq!(parse_node_file_name(OsStr::new(bad)), None, "{bad}");
        }
        let id = NodeId::parse("CTS5P6RD8HMCS").unwrap();
        for (p, want) in [
            ("cas", Ok(LayoutPath::Dir)),
            ("./cas/", Ok(LayoutPath::Dir)),
            ("./", Ok(LayoutPath::Dir)),
            ("cas/nodes/", Ok(LayoutPath::Dir)),
            (
                "cas/CTS5P6RD8HMCS.bin",
                Ok(LayoutPath::Node(id, Layout::Flat)),
            ),
            (
                "cas/nodes/CTS5P6RD8HMCS.bin",
                Ok(LayoutPath::Node(id, Layout::Nodes)),
            ),
            ("cas/_index/CTS5P6RD8HMCS", Ok(LayoutPath::Index)),
            ("cas/_index/_meta", Ok(LayoutPath::Index)),
            ("threads.yaml", Ok(LayoutPath::Root(THREADS_FILE))),
            ("uwf.jsonl", Ok(LayoutPath::Root("uwf.jsonl"))),
            ("/threads.yaml", Err(PathRefusal::Unsafe)),
            ("cas/../threads.yaml", Err(PathRefusal::Unsafe)),
            ("..", Err(PathRefusal::Unsafe)),
            ("cas//CTS5P6RD8HMCS.bin", Err(PathRefusal::NotInLayout)),
            ("cas/x.bin", Err(PathRefusal::NotInLayout)),
            ("cas/CTS5P6RD8HMCS.tmp", Err(PathRefusal::NotInLayout)),
            ("cas/_index/x", Err(PathRefusal::NotInLayout)),
            ("etc/passwd", Err(PathRefusal::NotInLayout)),
            ("config.yaml", Err(PathRefusal::NotInLayout)),
            ("", Err(PathRefusal::NotInLayout)),
        ] {
            assert_eq!(classify_path(p), want, "{p}");
        }
        let d = Path::new("/x");
        assert!(join_component(d, "a").is_ok());
        for bad in ["..", "/etc", "a/b", ".", ""] {
            assert!(join_component(d, bad).is_err(), "{bad}");
        }
    }
}
