//! The file side of export: a sink the store-backed exporter feeds node by node.
//!
//! - Node files `cas/<ID>.bin` are written incrementally. A new file is created in place with
//!   `O_CREAT|O_EXCL` (one directory operation, where a temporary file and a rename take
//!   three; in a directory of 100k files this makes the export 2–3× faster). A file already
//!   holding the same bytes is skipped; one holding other bytes (say, the partial file of a
//!   killed export) is replaced by `cas/<ID>.tmp` renamed over it. Node files are
//!   content-addressed, so they are not fsynced one by one.
//! - Index files `cas/_index/<TYPE>` and `cas/_index/_meta` are streamed to a staging
//!   directory `cas/_index.staging/` (same file system) and moved into `_index/` one by one by
//!   [`ExportWriter::finish`], each by an atomic rename. At most `MAX_OPEN_INDEX_FILES` are
//!   open at once; the others are reopened for appending when needed.
//! - The root files (`threads.yaml`, `workflows.yaml`, `registry.yaml`, `history.jsonl`) are
//!   replaced atomically: written to a temporary file in the same directory, fsynced, renamed.
//!
//! Nothing is written outside the export directory, and a symbolic link found where a file is
//! to be written is refused, never followed.

use super::layout::{
    CAS_DIR, INDEX_DIR, INDEX_STAGING_DIR, META_INDEX, join_component, node_file_name,
    tmp_file_name,
};
use crate::cas::{NodeId, cbor};
use std::collections::{HashSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Most index files kept open at once.
pub(crate) const MAX_OPEN_INDEX_FILES: usize = 32;

/// Why writing the export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// A file system operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done ("write", "rename", …).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Something that is not a regular file (a symbolic link, a directory) is in the way.
    #[error("refusing to write {path}: it is {kind}; move it away and export again")]
    InTheWay {
        /// The path.
        path: PathBuf,
        /// What is there.
        kind: &'static str,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ExportError + 'a {
    move |source| ExportError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// What [`ExportWriter::add_node`] did with a node file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The file was created (or replaced, when it held other bytes).
    Written,
    /// A file with identical bytes was already there.
    Skipped,
}

/// Counts of a finished export.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Node files written.
    pub written: u64,
    /// Node files already present with identical bytes.
    pub skipped: u64,
    /// Node files that held other bytes and were replaced.
    pub replaced: u64,
    /// Index files moved into `cas/_index/` (including `_meta`).
    pub index_files: u64,
}

/// Checks that `path` is absent or a regular file (never a link or directory).
fn ensure_file_or_absent(path: &Path) -> Result<Option<fs::Metadata>, ExportError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(ExportError::InTheWay {
            path: path.to_path_buf(),
            kind: "a symbolic link",
        }),
        Ok(m) if !m.is_file() => Err(ExportError::InTheWay {
            path: path.to_path_buf(),
            kind: "not a regular file",
        }),
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("inspect", path)(e)),
    }
}

/// Writes `cas/<id>.bin` holding `bytes` (the node file), unless a file with the same bytes is
/// there: created in place when absent, else through a temporary file of its own renamed over
/// the name. Returns what was done and whether another file was replaced. `buf` is scratch
/// space. Safe to call from several threads and processes at once, for the same id too.
///
/// # Errors
/// An I/O error, or [`ExportError::InTheWay`] when a link or directory has the file's name.
pub(crate) fn write_node_file(
    cas: &Path,
    id: NodeId,
    bytes: &[u8],
    buf: &mut Vec<u8>,
) -> Result<(Written, bool), ExportError> {
    let path = cas.join(node_file_name(id));
    // A new file is created in place: O_CREAT|O_EXCL fails on anything already there (a
    // link is not followed), which then goes the careful way below.
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(mut f) => {
            return match f.write_all(bytes) {
                Ok(()) => Ok((Written::Written, false)),
                Err(e) => {
                    drop(f);
                    let _ = fs::remove_file(&path);
                    Err(io_err("write", &path)(e))
                }
            };
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("create", &path)(e)),
    }
    let existing = ensure_file_or_absent(&path)?;
    if let Some(m) = &existing
        && m.len() == bytes.len() as u64
    {
        buf.clear();
        File::open(&path)
            .and_then(|f| f.take(bytes.len() as u64 + 1).read_to_end(buf))
            .map_err(io_err("read", &path))?;
        if buf.as_slice() == bytes {
            return Ok((Written::Skipped, false));
        }
    }
    let tmp = cas.join(tmp_file_name(id));
    // O_CREAT|O_EXCL never follows a link; a file left by a killed process whose pid came
    // back is replaced, anything else in the way refused.
    let f = match OpenOptions::new().write(true).create_new(true).open(&tmp) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            ensure_file_or_absent(&tmp)?;
            File::create(&tmp)
        }
        r => r,
    };
    if let Err(e) = f.and_then(|mut f| f.write_all(bytes)) {
        let _ = fs::remove_file(&tmp);
        return Err(io_err("write", &tmp)(e));
    }
    fs::rename(&tmp, &path).map_err(io_err("rename", &tmp))?;
    Ok((Written::Written, existing.is_some()))
}

/// Creates `path` as a directory if absent; refuses a link or a file in its place. A
/// directory another process creates between the look and the `mkdir` is taken as found.
pub(crate) fn ensure_dir(path: &Path) -> Result<(), ExportError> {
    let found = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => fs::symlink_metadata(path),
            r => return r.map_err(io_err("create directory", path)),
        },
        m => m,
    };
    match found {
        Ok(m) if m.file_type().is_symlink() => Err(ExportError::InTheWay {
            path: path.to_path_buf(),
            kind: "a symbolic link",
        }),
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(ExportError::InTheWay {
            path: path.to_path_buf(),
            kind: "not a directory",
        }),
        Err(e) => Err(io_err("inspect", path)(e)),
    }
}

fn sync_dir(path: &Path) -> Result<(), ExportError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", path))
}

/// A file replaced atomically: written under a temporary name in the same directory, then
/// fsynced and renamed over the target by [`AtomicFile::commit`]. Dropped without a commit,
/// the temporary file is removed and the target is untouched.
pub(crate) struct AtomicFile {
    target: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Starts replacing `dir/name`.
    ///
    /// # Errors
    /// [`ExportError::InTheWay`] when the target is a link or a directory, or an I/O error.
    pub(crate) fn create(dir: &Path, name: &str) -> Result<AtomicFile, ExportError> {
        let target = join_component(dir, name).map_err(|_| ExportError::InTheWay {
            path: dir.join(name),
            kind: "not a plain file name",
        })?;
        ensure_file_or_absent(&target)?;
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        ensure_file_or_absent(&tmp)?;
        let f = File::create(&tmp).map_err(io_err("create", &tmp))?;
        Ok(AtomicFile {
            target,
            tmp,
            out: Some(BufWriter::new(f)),
        })
    }

    /// Flushes, fsyncs and renames the file into place.
    ///
    /// # Errors
    /// An I/O error naming the file.
    pub(crate) fn commit(mut self) -> Result<(), ExportError> {
        let out = self.out.take().expect("committed once");
        let f = out
            .into_inner()
            .map_err(|e| io_err("write", &self.tmp)(e.into_error()))?;
        f.sync_all().map_err(io_err("sync", &self.tmp))?;
        drop(f);
        ensure_file_or_absent(&self.target)?;
        fs::rename(&self.tmp, &self.target).map_err(io_err("rename", &self.tmp))?;
        if let Some(dir) = self.target.parent() {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.as_mut().expect("not committed").write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.as_mut().expect("not committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Replaces `dir/name` atomically with `bytes`.
///
/// # Errors
/// The file cannot be created, written, synced or renamed into place.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ExportError> {
    let mut f = AtomicFile::create(dir, name)?;
    f.write_all(bytes)
        .map_err(io_err("write", &dir.join(name)))?;
    f.commit()
}

/// The sink an exporter feeds: node files, index files, then [`finish`](Self::finish).
pub struct ExportWriter {
    cas: PathBuf,
    staging: PathBuf,
    /// Index names (a type id or `_meta`) whose staged file exists for this export.
    started: HashSet<String>,
    /// Open staged index files, most recently used last.
    open: VecDeque<(String, BufWriter<File>)>,
    summary: ExportSummary,
    buf: Vec<u8>,
}

impl ExportWriter {
    /// Prepares `root` (created if absent) for an export: `root/cas/` and a fresh index staging
    /// directory.
    ///
    /// # Errors
    /// An I/O error, or [`ExportError::InTheWay`] when a link or file stands where a directory
    /// goes.
    pub fn new(root: &Path) -> Result<ExportWriter, ExportError> {
        // The root is the user's choice (it may be a link); everything below it is checked.
        if !root.exists() {
            fs::create_dir_all(root).map_err(io_err("create directory", root))?;
        }
        if !root.is_dir() {
            return Err(ExportError::InTheWay {
                path: root.to_path_buf(),
                kind: "not a directory",
            });
        }
        let cas = root.join(CAS_DIR);
        ensure_dir(&cas)?;
        let staging = cas.join(INDEX_STAGING_DIR);
        match fs::symlink_metadata(&staging) {
            // Left over from an interrupted export: start again.
            Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {
                fs::remove_dir_all(&staging).map_err(io_err("remove", &staging))?
            }
            Ok(_) => {
                return Err(ExportError::InTheWay {
                    path: staging,
                    kind: "not a directory",
                });
            }
            Err(_) => {}
        }
        ensure_dir(&staging)?;
        Ok(ExportWriter {
            cas,
            staging,
            started: HashSet::new(),
            open: VecDeque::new(),
            summary: ExportSummary::default(),
            buf: Vec::new(),
        })
    }

    /// Writes `cas/<id>.bin` holding `CBOR_det({type, payload, timestamp})`, unless a file with
    /// the same bytes is there. `payload_cbor` must be the canonical payload that `id` hashes.
    ///
    /// # Errors
    /// An I/O error, or [`ExportError::InTheWay`] when a link or directory has the file's name.
    pub(crate) fn write_node(
        &mut self,
        id: NodeId,
        type_id: NodeId,
        payload_cbor: &[u8],
        timestamp: u64,
    ) -> Result<Written, ExportError> {
        let bytes = cbor::encode_node(&type_id.to_wire(), payload_cbor, timestamp);
        let (w, replaced) = write_node_file(&self.cas, id, &bytes, &mut self.buf)?;
        self.record(w, replaced);
        Ok(w)
    }

    /// The `cas/` directory node files go to (for writers running beside this one).
    pub(crate) fn cas_dir(&self) -> &Path {
        &self.cas
    }

    /// Counts a node file written by [`write_node_file`] outside this writer.
    pub(crate) fn record(&mut self, w: Written, replaced: bool) {
        match (w, replaced) {
            (Written::Skipped, _) => self.summary.skipped += 1,
            (Written::Written, true) => self.summary.replaced += 1,
            (Written::Written, false) => self.summary.written += 1,
        }
    }

    /// Writes a node and records it in the index: `_index/<type>`, and `_index/_meta` for a
    /// self-typed node (which is also listed in its own type index, as @ocas/fs does).
    ///
    /// # Errors
    /// The node file or the index line cannot be written.
    pub fn add_node(
        &mut self,
        id: NodeId,
        type_id: NodeId,
        payload_cbor: &[u8],
        timestamp: u64,
    ) -> Result<Written, ExportError> {
        let w = self.write_node(id, type_id, payload_cbor, timestamp)?;
        self.append_index(type_id, id)?;
        if type_id == id {
            self.append_meta(id)?;
        }
        Ok(w)
    }

    /// Appends `id` to the index of `type_id`.
    ///
    /// # Errors
    /// An I/O error naming the staged index file.
    pub fn append_index(&mut self, type_id: NodeId, id: NodeId) -> Result<(), ExportError> {
        self.append_line(type_id.to_wire(), id)
    }

    /// Appends `id` to `_index/_meta`.
    ///
    /// # Errors
    /// An I/O error naming the staged index file.
    pub(crate) fn append_meta(&mut self, id: NodeId) -> Result<(), ExportError> {
        self.append_line(META_INDEX.to_string(), id)
    }

    fn append_line(&mut self, name: String, id: NodeId) -> Result<(), ExportError> {
        let pos = self.open.iter().position(|(n, _)| *n == name);
        let mut entry = match pos {
            Some(p) => self.open.remove(p).expect("position is valid"),
            None => {
                if self.open.len() >= MAX_OPEN_INDEX_FILES
                    && let Some((old, mut w)) = self.open.pop_front()
                {
                    w.flush()
                        .map_err(io_err("write", &self.staging.join(&old)))?;
                }
                let path = self.staging.join(&name);
                let first = self.started.insert(name.clone());
                let f = OpenOptions::new()
                    .create(true)
                    .append(!first)
                    .write(true)
                    .truncate(first)
                    .open(&path)
                    .map_err(io_err("open", &path))?;
                (name, BufWriter::with_capacity(16 << 10, f))
            }
        };
        let mut line = [0u8; 14];
        line[..13].copy_from_slice(&id.to_chars());
        line[13] = b'\n';
        let r = entry.1.write_all(&line);
        let path = self.staging.join(&entry.0);
        self.open.push_back(entry);
        r.map_err(io_err("write", &path))
    }

    /// Closes the index files and moves each into `cas/_index/` by an atomic rename.
    ///
    /// Index files of `_index/` that this export did not write are left as they are.
    ///
    /// # Errors
    /// An I/O error naming the file.
    pub fn finish(mut self) -> Result<ExportSummary, ExportError> {
        for (name, mut w) in self.open.drain(..) {
            let path = self.staging.join(&name);
            w.flush().map_err(io_err("write", &path))?;
        }
        for name in &self.started {
            let path = self.staging.join(name);
            File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(io_err("sync", &path))?;
        }
        let index = self.cas.join(INDEX_DIR);
        ensure_dir(&index)?;
        for name in &self.started {
            let from = self.staging.join(name);
            let to = index.join(name);
            ensure_file_or_absent(&to)?;
            fs::rename(&from, &to).map_err(io_err("rename", &from))?;
            self.summary.index_files += 1;
        }
        fs::remove_dir(&self.staging).map_err(io_err("remove", &self.staging))?;
        sync_dir(&index)?;
        sync_dir(&self.cas)?;
        Ok(self.summary.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    /// Runs `f` on `n` threads released at the same moment; every result.
    fn at_once<T: Send>(n: usize, f: impl Fn() -> T + Sync) -> Vec<T> {
        let gate = Barrier::new(n);
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    s.spawn(|| {
                        gate.wait();
                        f()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn a_directory_made_by_many_at_once_is_found_by_all() {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..50 {
            let dir = tmp.path().join(format!("cas{i}"));
            for r in at_once(8, || ensure_dir(&dir)) {
                r.unwrap();
            }
            assert!(dir.is_dir());
        }
        // A file in its place is still refused.
        let file = tmp.path().join("file");
        fs::write(&file, b"x").unwrap();
        assert!(matches!(
            ensure_dir(&file),
            Err(ExportError::InTheWay {
                kind: "not a directory",
                ..
            })
        ));
    }

    #[test]
    fn one_node_written_by_many_at_once_ends_whole_with_no_temporary_left() {
        let tmp = tempfile::tempdir().unwrap();
        let id = NodeId::parse("D6ZZE5PR5CDQ2").unwrap();
        let bytes = vec![7u8; 4096];
        for round in 0..20 {
            // Other bytes in the way send every writer through a temporary file.
            fs::write(tmp.path().join(node_file_name(id)), format!("old {round}")).unwrap();
            let done = at_once(8, || {
                write_node_file(tmp.path(), id, &bytes, &mut Vec::new())
            });
            for r in done {
                r.unwrap();
            }
            assert_eq!(
                fs::read(tmp.path().join(node_file_name(id))).unwrap(),
                bytes
            );
            let names: Vec<_> = fs::read_dir(tmp.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            assert_eq!(names, [node_file_name(id)]);
        }
    }
}
