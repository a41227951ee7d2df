//! The import of an archive: every member checked in a first pass, then imported through the
//! directory import's own paths.

use super::{ArchiveError, Manifest, Scratch, io_err};
use super::{MANIFEST, MAX_MANIFEST, RUN_BYTES, ZSTD_MAGIC};
use crate::cas::bootstrap::META;
use crate::interchange::layout::{
    self, LayoutPath, PathRefusal, ROOT_FILES, ScanItem, ScannedNode,
};
use crate::interchange::transfer::{self, ImportOptions, ImportReport, Progress, TransferError};
use crate::store::Store;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

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
