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
//! layout ([`layout::classify_path`]: no absolute path, no `..`), a link is refused, a node
//! file must hold the node its name says (`layout::check_node_bytes`), a root file must have
//! the manifest's digest, and the stream must end with tar's end-of-archive block and a
//! complete zstd frame. Any of these stops the import with one line before anything is stored.
//! The second pass imports through the directory import's own path
//! (`transfer::import_node_items` and `transfer::import_root_files`), checking each node again.

use super::export_files::ExportError;
use super::layout::{
    self, INDEX_DIR, LayoutPath, META_INDEX, PathRefusal, ROOT_FILES, ScanItem, ScannedNode,
    node_file_name,
};
use super::transfer::{
    self, ExportReport, ImportOptions, ImportReport, Progress, TransferError, write_root_files,
};
use crate::cas::bootstrap::META;
use crate::cas::{NodeId, cbor};
use crate::store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
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
const ZSTD_LEVEL: i32 = 1;
/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// Largest manifest read.
const MAX_MANIFEST: u64 = 1 << 20;
/// Node members sorted by id and imported together, at most (payload bytes): the store's
/// batches then write neighbouring keys.
const RUN_BYTES: usize = 64 << 20;
/// Bytes of node members handed to the compressing thread at a time.
const CHUNK_BYTES: usize = 256 << 10;

/// Why an archive export or import stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The store, or the import's own reading of the layout, failed.
    #[error(transparent)]
    Transfer(#[from] TransferError),
    /// The archive is not one uwf imports (or `--since` cannot use it); nothing was changed.
    #[error("{archive}: {message}")]
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

fn io_err<'a>(action: &'static str, path: &'a str) -> impl FnOnce(io::Error) -> ArchiveError + 'a {
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
struct Scratch(PathBuf);

impl Scratch {
    fn new(parent: &Path) -> Result<Scratch, ArchiveError> {
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

/// The compressed or plain output stream.
enum Sink<W: Write> {
    Plain(W),
    Zstd(zstd::stream::write::Encoder<'static, W>),
}

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Zstd(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Zstd(w) => w.flush(),
        }
    }
}

impl<W: Write> Sink<W> {
    fn finish(self) -> io::Result<()> {
        match self {
            Sink::Plain(mut w) => w.flush(),
            Sink::Zstd(e) => e.finish()?.flush(),
        }
    }
}

type Tar<W> = tar::Builder<BufWriter<Sink<W>>>;

fn header(path: &str, size: u64, dir: bool) -> io::Result<tar::Header> {
    let mut h = tar::Header::new_ustar();
    h.set_path(path)?;
    h.set_size(size);
    h.set_mode(if dir { DIR_MODE } else { FILE_MODE });
    h.set_mtime(MTIME);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(if dir {
        tar::EntryType::Directory
    } else {
        tar::EntryType::Regular
    });
    h.set_cksum();
    Ok(h)
}

fn append_file<W: Write>(tar: &mut Tar<W>, path: &str, data: &[u8]) -> io::Result<()> {
    tar.append(&header(path, data.len() as u64, false)?, data)
}

fn append_dir<W: Write>(tar: &mut Tar<W>, path: &str) -> io::Result<()> {
    tar.append(&header(path, 0, true)?, io::empty())
}

/// BLAKE3 of a file, hex.
fn digest_file(path: &Path) -> io::Result<String> {
    let mut h = blake3::Hasher::new();
    io::copy(&mut File::open(path)?, &mut h)?;
    Ok(h.finalize().to_hex().to_string())
}

/// Applies the removals a `--since` archive carries, each recorded again in `store`; a thread
/// with a step lease is kept (a conflict).
fn apply_removals(
    store: &Store,
    removed: &[crate::store::Removal],
    r: &mut ImportReport,
) -> Result<(), ArchiveError> {
    use crate::store::Removal;
    if removed.is_empty() {
        return Ok(());
    }
    let conflicts = store
        .write(|w| {
            let mut conflicts = Vec::new();
            for x in removed {
                match x {
                    Removal::Thread(t) => {
                        let id = crate::workflow::ThreadId::from_stored(t);
                        if w.lease(&id)?.is_some() {
                            conflicts.push(format!(
                                "thread {t} has a step lease here; its removal in the archive was not applied"
                            ));
                            continue;
                        }
                        w.remove_thread(&id)?;
                        w.remove_thread_state(&id)?;
                        w.remove_history_of(&id)?;
                    }
                    Removal::Workflow(n) => {
                        w.remove_registry_name(n, false)?;
                    }
                    Removal::WorkflowPurged(n) => {
                        w.remove_registry_name(n, true)?;
                    }
                }
                w.record_removal(x)?;
            }
            Ok(conflicts)
        })
        .map_err(TransferError::from)?;
    tracing::info!(
        tag = "KHPFJAZ3",
        removed = removed.len(),
        kept = conflicts.len(),
        "archive removals applied"
    );
    r.conflicts.extend(conflicts);
    Ok(())
}

/// Writes the store (or, with `since`, what changed after that archive) to `out` as one tar
/// stream, zstd-compressed when `compress`; `label` names `out` in errors.
///
/// # Errors
/// A store failure, a write failure, or [`ArchiveError::Refused`] when `since` was made after
/// the store's last write (it is not an earlier archive of this store).
pub fn export_archive<W: Write + Send>(
    store: &Store,
    out: W,
    label: &str,
    compress: bool,
    since: Option<&Manifest>,
    progress: Progress<'_>,
) -> Result<ArchiveReport, ArchiveError> {
    let mut report = ArchiveReport::default();
    // The removal mark comes before the root files: a removal made meanwhile is in the next
    // archive again, where applying it once more changes nothing.
    let removal_mark = store.removal_mark()?;
    // The root files come first, and the write mark after them: every node they name was
    // stored before the mark, so it is in this archive or an earlier one.
    let scratch = Scratch::new(&std::env::temp_dir())?;
    write_root_files(store, scratch.path(), &mut report.state)?;
    let mut files = BTreeMap::new();
    for name in ROOT_FILES {
        let p = scratch.path().join(name);
        if p.is_file() {
            let d = digest_file(&p).map_err(io_err("read", &p.display().to_string()))?;
            files.insert(name.to_string(), d);
        }
    }
    let until = store.write_mark()?;
    let from = match since {
        Some(m) if m.until > until => {
            return Err(ArchiveError::Refused {
                archive: label.to_string(),
                message: format!(
                    "the earlier archive ends at write mark {}, after this store's {until}; it is not an earlier archive of this store",
                    m.until
                ),
            });
        }
        Some(m) => {
            // The earlier archive must come from this store's own history.
            let here = store.last_written_before(m.until)?;
            let theirs = m.last.as_ref();
            if here.map(|(seq, id)| (seq, id.to_wire())).as_ref() != theirs {
                return Err(ArchiveError::Refused {
                    archive: label.to_string(),
                    message: format!(
                        "the earlier archive's last node ({}) is not this store's node at that place; it is not an earlier archive of this store",
                        theirs.map_or_else(|| "none".to_string(), |(s, id)| format!("{id} at {s}"))
                    ),
                });
            }
            m.until
        }
        None => 0,
    };
    let manifest = Manifest {
        format: FORMAT.into(),
        version: VERSION,
        since: since.map(|m| m.until),
        until,
        last: store
            .last_written_before(until)?
            .map(|(seq, id)| (seq, id.to_wire())),
        files,
        removal_mark,
        removed: match since {
            Some(m) => store.removals_since(m.removal_mark)?,
            None => Vec::new(),
        },
    };
    let write = io_err("write", label);
    let sink = if compress {
        let mut e = zstd::stream::write::Encoder::new(out, ZSTD_LEVEL).map_err(write)?;
        e.include_checksum(true).map_err(io_err("write", label))?;
        Sink::Zstd(e)
    } else {
        Sink::Plain(out)
    };
    let mut tar = tar::Builder::new(BufWriter::with_capacity(1 << 20, sink));
    let mut text = serde_json::to_vec(&manifest).expect("a manifest serializes");
    text.push(b'\n');
    append_file(&mut tar, MANIFEST, &text).map_err(io_err("write", label))?;
    append_dir(&mut tar, "cas/").map_err(io_err("write", label))?;

    let total = store.node_count()?;
    // (type, id) of every node of a full archive, in write order; the types of a `--since`.
    let mut index: Vec<(NodeId, NodeId)> = Vec::new();
    let mut changed: BTreeSet<u64> = BTreeSet::new();
    let mut new_self_typed = false;
    let full = since.is_none();
    // The walk lays out the node members (header, data, padding) in chunks; the other thread
    // only compresses and writes them, so the two share the work.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(8);
    let (tar, walked) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> io::Result<Tar<W>> {
            for chunk in rx {
                tar.get_mut().write_all(&chunk)?;
            }
            Ok(tar)
        });
        let mut chunk = Vec::with_capacity(CHUNK_BYTES + (64 << 10));
        let gone = || ArchiveError::Io {
            action: "write",
            path: label.to_string(),
            source: io::Error::other("the archive writer stopped"),
        };
        let walked = store.for_each_node_written_between::<ArchiveError>(from, until, |n| {
            // A damaged node is refused, never archived as if it were the node.
            if !n.is_intact() {
                return Err(StoreError::Corrupt(n.id).located(store.path()).into());
            }
            if full {
                index.push((n.type_id, n.id));
            } else {
                changed.insert(n.type_id.0);
                new_self_typed |= n.type_id == n.id;
            }
            let bytes = cbor::encode_node(&n.type_id.to_wire(), &n.payload_cbor, n.timestamp);
            let path = format!("cas/{}", node_file_name(n.id));
            let h = header(&path, bytes.len() as u64, false).map_err(io_err("write", label))?;
            chunk.extend_from_slice(h.as_bytes());
            chunk.extend_from_slice(&bytes);
            chunk.resize(chunk.len().next_multiple_of(512), 0);
            if chunk.len() >= CHUNK_BYTES {
                let full =
                    std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_BYTES + (64 << 10)));
                tx.send(full).map_err(|_| gone())?;
            }
            report.nodes += 1;
            if report.nodes.is_multiple_of(4096) {
                progress("export nodes", report.nodes, total);
            }
            Ok(())
        });
        let walked = walked.and_then(|()| {
            if chunk.is_empty() {
                return Ok(());
            }
            tx.send(chunk).map_err(|_| gone())
        });
        drop(tx);
        (writer.join().expect("archive writer thread"), walked)
    });
    // The writer's error explains a failed hand-over, so it comes first.
    let mut tar = tar.map_err(io_err("write", label))?;
    walked?;
    progress("export nodes", report.nodes, total);

    append_dir(&mut tar, &format!("cas/{INDEX_DIR}/")).map_err(io_err("write", label))?;
    let mut add_index = |tar: &mut Tar<W>, name: &str, ids: &[NodeId]| -> io::Result<()> {
        let mut bytes = Vec::with_capacity(ids.len() * 14);
        for id in ids {
            bytes.extend_from_slice(&id.to_chars());
            bytes.push(b'\n');
        }
        report.index_files += 1;
        append_file(tar, &format!("cas/{INDEX_DIR}/{name}"), &bytes)
    };
    let mut meta: Vec<NodeId> = Vec::new();
    if full {
        // As a directory export writes them: from the nodes walked, write order per type.
        index.sort_by_key(|(type_id, _)| type_id.0);
        for group in index.chunk_by(|a, b| a.0 == b.0) {
            let ids: Vec<NodeId> = group.iter().map(|&(_, id)| id).collect();
            meta.extend(group.iter().filter(|(t, id)| t == id).map(|&(_, id)| id));
            add_index(&mut tar, &group[0].0.to_wire(), &ids).map_err(io_err("write", label))?;
        }
    } else {
        for &t in &changed {
            let ids = store.list_by_type(NodeId(t))?;
            add_index(&mut tar, &NodeId(t).to_wire(), &ids).map_err(io_err("write", label))?;
        }
        if new_self_typed {
            store.for_each_indexed::<StoreError>(|t, id| {
                if t == id {
                    meta.push(id);
                }
                Ok(())
            })?;
        }
    }
    if !meta.is_empty() {
        add_index(&mut tar, META_INDEX, &meta).map_err(io_err("write", label))?;
    }

    for name in ROOT_FILES {
        let Some(d) = manifest.files.get(name) else {
            continue;
        };
        if since.is_some_and(|m| m.files.get(name) == Some(d)) {
            continue;
        }
        let p = scratch.path().join(name);
        let shown = p.display().to_string();
        let f = File::open(&p).map_err(io_err("read", &shown))?;
        let len = f.metadata().map_err(io_err("read", &shown))?.len();
        tar.append(
            &header(name, len, false).map_err(io_err("write", label))?,
            f.take(len),
        )
        .map_err(io_err("write", label))?;
        report.root_files += 1;
    }
    tar.into_inner()
        .and_then(|w| w.into_inner().map_err(io::IntoInnerError::into_error))
        .and_then(Sink::finish)
        .map_err(io_err("write", label))?;
    report.manifest = Some(manifest);
    Ok(report)
}

/// Reads the manifest of the archive at `path` (its first member) without reading further.
///
/// # Errors
/// [`ArchiveError::Refused`] when the file is not an archive with a manifest first.
pub fn read_manifest(path: &Path) -> Result<Manifest, ArchiveError> {
    let label = path.display().to_string();
    let refused = |message: String| ArchiveError::Refused {
        archive: label.clone(),
        message,
    };
    let input = open_stream(path, &label)?;
    let mut archive = tar::Archive::new(input);
    let mut entries = archive
        .entries()
        .map_err(|e| refused(format!("not a tar archive: {e}")))?;
    let mut first = match entries.next() {
        Some(Ok(e)) => e,
        Some(Err(e)) => return Err(refused(format!("truncated or corrupted archive: {e}"))),
        None => {
            return Err(refused(format!(
                "an empty archive; {MANIFEST} expected first"
            )));
        }
    };
    let name = String::from_utf8_lossy(&first.path_bytes()).into_owned();
    if name.strip_prefix("./").unwrap_or(&name) != MANIFEST {
        return Err(refused(format!(
            "not an archive uwf wrote: its first member is {name:?}, not {MANIFEST}"
        )));
    }
    let size = first.size();
    let bytes = read_data(&mut first, size, MAX_MANIFEST, &name).map_err(refused)?;
    Manifest::parse(&bytes).map_err(refused)
}

/// The decompressed stream of the file at `path`: zstd when it starts with zstd's magic
/// bytes, else the bytes as they are.
fn open_stream(path: &Path, label: &str) -> Result<Box<dyn Read>, ArchiveError> {
    let f = File::open(path).map_err(io_err("read", label))?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let magic = r.fill_buf().map_err(io_err("read", label))?;
    if magic.starts_with(&ZSTD_MAGIC) {
        let d = zstd::stream::read::Decoder::with_buffer(r).map_err(io_err("read", label))?;
        Ok(Box::new(d))
    } else {
        Ok(Box::new(r))
    }
}

/// All of a member's data (`size` bytes by its header), refusing more than `limit` bytes or a
/// stream that ends early.
fn read_data(entry: &mut dyn Read, size: u64, limit: u64, name: &str) -> Result<Vec<u8>, String> {
    if size > limit {
        return Err(format!(
            "{name}: {size} bytes is larger than the limit of {limit} bytes; refused"
        ));
    }
    let mut bytes = Vec::new();
    Read::take(entry, limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("truncated or corrupted archive at {name}: {e}"))?;
    if bytes.len() as u64 != size {
        return Err(format!(
            "truncated archive: {name} ends after {} of its {size} bytes",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// A reader that counts the bytes read through it.
struct Counted<R> {
    inner: R,
    n: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.set(self.n.get() + k as u64);
        Ok(k)
    }
}

/// A member of the layout, as [`read_members`] hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Manifest,
    Layout(LayoutPath),
}

/// Reads the archive at `path` member by member: refuses a member that is a link, not a file
/// or directory, or not at a path of the layout; hands the others to `visit` (name, data,
/// size); checks the end-of-archive block and reads the stream to its end, so that a
/// truncated tar stream or an incomplete zstd frame is refused too.
fn read_members(
    path: &Path,
    label: &str,
    mut visit: impl FnMut(Member, &str, &mut dyn Read, u64) -> Result<(), ArchiveError>,
) -> Result<(), ArchiveError> {
    let refused = |message: String| ArchiveError::Refused {
        archive: label.to_string(),
        message,
    };
    let corrupt = |e: io::Error| refused(format!("truncated or corrupted archive: {e}"));
    let count = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let input = Counted {
        inner: open_stream(path, label)?,
        n: std::rc::Rc::clone(&count),
    };
    let mut archive = tar::Archive::new(input);
    // Where the next header starts: the end of the last member's data, in whole blocks.
    let mut next = 0u64;
    let mut first = true;
    {
        let entries = archive.entries().map_err(corrupt)?;
        for entry in entries {
            let mut entry = entry.map_err(corrupt)?;
            let size = entry.size();
            next = entry.raw_file_position() + size.div_ceil(512) * 512;
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let kind = entry.header().entry_type();
            if kind.is_pax_global_extensions() {
                continue;
            }
            if kind.is_symlink() || kind.is_hard_link() {
                return Err(refused(format!(
                    "member {name:?} is a link; links are refused"
                )));
            }
            let dir = kind.is_dir();
            if !(dir || kind.is_file() || kind == tar::EntryType::Continuous) {
                return Err(refused(format!(
                    "member {name:?} is not a regular file or directory"
                )));
            }
            let member = if name.strip_prefix("./").unwrap_or(&name) == MANIFEST && !dir {
                if !first {
                    return Err(refused(format!("{MANIFEST} is not the first member")));
                }
                Member::Manifest
            } else {
                match layout::classify_path(&name) {
                    Ok(LayoutPath::Dir) if dir => Member::Layout(LayoutPath::Dir),
                    Ok(p) if !dir && p != LayoutPath::Dir => Member::Layout(p),
                    Ok(_) | Err(PathRefusal::NotInLayout) => {
                        return Err(refused(format!(
                            "member {name:?} is not part of the layout (cas/<ID>.bin, cas/nodes/<ID>.bin, cas/_index/…, {})",
                            ROOT_FILES.join(", ")
                        )));
                    }
                    Err(PathRefusal::Unsafe) => {
                        return Err(refused(format!(
                            "member {name:?} has an absolute path or a \"..\" component; refused"
                        )));
                    }
                }
            };
            first = false;
            visit(member, &name, &mut entry, size)?;
        }
    }
    // An archive ends with a zero block right after its last member; a stream that simply
    // stops there was cut.
    if count.get() < next + 512 {
        return Err(refused(
            "truncated archive: no end-of-archive block after the last member".into(),
        ));
    }
    // The rest (tar's padding) is read so that zstd checks the frame's end and checksum.
    let mut rest = archive.into_inner();
    io::copy(&mut rest, &mut io::sink()).map_err(corrupt)?;
    Ok(())
}

/// Where an archive is read from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A file.
    File(&'a Path),
    /// Standard input (copied to a file beside the store first).
    Stdin,
}

/// An archive whose every member was checked ([`check_archive`]), ready to be imported.
pub struct CheckedArchive {
    scratch: Scratch,
    path: PathBuf,
    label: String,
    manifest: Option<Manifest>,
    max_file_size: u64,
}

/// Checks every member of an archive (plain or zstd tar of the layout; see the module docs)
/// without touching any store. Standard input is first copied to a file in `spool_dir`, which
/// also holds the root files during the import.
///
/// # Errors
/// [`ArchiveError::Refused`] for an archive that is not a good one, or an error reading it.
pub fn check_archive(
    source: Source<'_>,
    spool_dir: &Path,
    max_file_size: u64,
) -> Result<CheckedArchive, ArchiveError> {
    let scratch = Scratch::new(spool_dir)?;
    let (path, label) = match source {
        Source::File(p) => (p.to_path_buf(), p.display().to_string()),
        Source::Stdin => {
            let p = scratch.path().join("stdin");
            let mut f = File::create(&p).map_err(io_err("write", &p.display().to_string()))?;
            io::copy(&mut io::stdin().lock(), &mut f).map_err(io_err("read", "standard input"))?;
            (p, "<stdin>".to_string())
        }
    };
    let refused = |message: String| ArchiveError::Refused {
        archive: label.clone(),
        message,
    };

    // Pass 1: check everything; nothing is stored.
    let mut manifest: Option<Manifest> = None;
    read_members(&path, &label, |member, name, data, size| {
        match member {
            Member::Manifest => {
                let bytes = read_data(data, size, MAX_MANIFEST, name).map_err(refused)?;
                manifest = Some(Manifest::parse(&bytes).map_err(refused)?);
            }
            Member::Layout(LayoutPath::Node(id, layout)) => {
                let bytes = read_data(data, size, max_file_size, name).map_err(refused)?;
                layout::check_node_bytes(Path::new(name), &bytes, id, layout)
                    .map_err(|p| refused(p.to_string()))?;
            }
            Member::Layout(LayoutPath::Root(file)) => {
                let mut h = blake3::Hasher::new();
                let n = io::copy(data, &mut h)
                    .map_err(|e| refused(format!("truncated or corrupted archive: {e}")))?;
                if n != size {
                    return Err(refused(format!(
                        "truncated archive: {name} ends after {n} of its {size} bytes"
                    )));
                }
                if let Some(m) = &manifest {
                    let got = h.finalize().to_hex().to_string();
                    match m.files.get(file) {
                        Some(want) if *want == got => {}
                        Some(_) => {
                            return Err(refused(format!(
                                "{name} does not have the digest {MANIFEST} records (corrupted)"
                            )));
                        }
                        None => {
                            return Err(refused(format!("{name} is not listed in {MANIFEST}")));
                        }
                    }
                }
            }
            Member::Layout(_) => {}
        }
        Ok(())
    })?;

    Ok(CheckedArchive {
        scratch,
        path,
        label,
        manifest,
        max_file_size,
    })
}

/// Imports a checked archive into `store`, through the directory import's own path, checking
/// each node again. A `--since` archive replaces thread heads and registry names, as
/// `overwrite` does.
///
/// # Errors
/// A store failure, or [`ArchiveError::Refused`] when the file changed since it was checked
/// (the nodes imported by then are whole, checked nodes).
pub fn import_archive(
    store: &Store,
    checked: &CheckedArchive,
    opts: ImportOptions,
    progress: Progress<'_>,
) -> Result<ImportReport, ArchiveError> {
    let CheckedArchive {
        scratch,
        path,
        label,
        manifest,
        max_file_size,
    } = checked;
    let (label, max_file_size) = (label.as_str(), *max_file_size);
    let refused = |message: String| ArchiveError::Refused {
        archive: label.to_string(),
        message,
    };
    let mut opts = opts;
    opts.max_file_size = max_file_size;
    opts.overwrite |= manifest.as_ref().is_some_and(|m| m.since.is_some());
    let roots = scratch.path().join("root");
    std::fs::create_dir(&roots)
        .map_err(io_err("create directory", &roots.display().to_string()))?;
    let changed = || refused("the archive changed while it was imported".into());
    let mut r = transfer::import_node_items(store, opts, progress, |take| {
        let mut run: Vec<ScannedNode> = Vec::new();
        let mut run_bytes = 0usize;
        let flush = |run: &mut Vec<ScannedNode>,
                     take: &mut dyn FnMut(ScanItem) -> Result<(), TransferError>|
         -> Result<(), TransferError> {
            // Schemas first, then by id: a batch writes neighbouring keys.
            run.sort_unstable_by_key(|n| (!(n.type_id == META || n.self_typed), n.id.0));
            for n in run.drain(..) {
                take(ScanItem::Node(Box::new(n)))?;
            }
            Ok(())
        };
        let read = read_members(path, label, |member, name, data, size| {
            match member {
                Member::Layout(LayoutPath::Node(id, layout)) => {
                    let bytes = read_data(data, size, opts.max_file_size, name).map_err(refused)?;
                    let shown = PathBuf::from(format!("{label}:{name}"));
                    let n = layout::check_node_bytes(&shown, &bytes, id, layout)
                        .map_err(|_| changed())?;
                    run_bytes += n.payload_cbor.len() + 128;
                    run.push(n);
                    if run_bytes >= RUN_BYTES {
                        run_bytes = 0;
                        flush(&mut run, take)?;
                    }
                }
                Member::Layout(LayoutPath::Root(file)) => {
                    let p = roots.join(file);
                    let shown = p.display().to_string();
                    let mut f = File::create(&p).map_err(io_err("write", &shown))?;
                    if io::copy(data, &mut f).map_err(|_| changed())? != size {
                        return Err(changed());
                    }
                }
                _ => {}
            }
            Ok(())
        });
        match read {
            Ok(()) => flush(&mut run, take),
            Err(ArchiveError::Transfer(e)) => Err(e),
            Err(e) => Err(TransferError::Read {
                path: PathBuf::from(label),
                message: e.to_string(),
            }),
        }
    })?;
    if let Some(m) = manifest {
        apply_removals(store, &m.removed, &mut r)?;
    }
    transfer::import_root_files(store, &roots, opts, &mut r)?;
    // The root files were read from the scratch directory: name them as the archive's members.
    let prefix = format!("{}/", roots.display());
    let shown = format!("{label}:");
    for line in r
        .problems
        .iter_mut()
        .chain(r.conflicts.iter_mut())
        .chain(r.warnings.iter_mut())
    {
        if line.contains(&prefix) {
            *line = line.replace(&prefix, &shown);
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_fixed() {
        let h = header("cas/CTS5P6RD8HMCS.bin", 10, false).unwrap();
        assert_eq!(h.mode().unwrap(), FILE_MODE);
        assert_eq!(h.mtime().unwrap(), MTIME);
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
        let d = header("cas/", 0, true).unwrap();
        assert_eq!(d.mode().unwrap(), DIR_MODE);
        assert!(d.entry_type().is_dir());
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
