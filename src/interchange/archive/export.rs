//! `uwf export --archive`: the store written as one tar stream, node members as the store is
//! walked, then the index and root files.

use super::{ArchiveError, ArchiveReport, Manifest, Scratch, io_err};
use super::{CHUNK_BYTES, DIR_MODE, FILE_MODE, FORMAT, MANIFEST, MTIME, VERSION, ZSTD_LEVEL};
use crate::cas::{NodeId, cbor};
use crate::interchange::layout::{INDEX_DIR, META_INDEX, ROOT_FILES, node_file_name};
use crate::interchange::transfer::{Progress, write_root_files};
use crate::store::{Store, StoreError};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

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
    let from = first_seq(store, since, until, label)?;
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

    let full = since.is_none();
    let (mut tar, walked, nodes) = write_nodes(tar, store, (from, until), full, label, progress)?;
    report.nodes = nodes;
    append_dir(&mut tar, &format!("cas/{INDEX_DIR}/")).map_err(io_err("write", label))?;
    report.index_files = write_index(&mut tar, store, walked, full, label)?;

    report.root_files = append_root_files(&mut tar, &manifest, since, scratch.path(), label)?;
    tar.into_inner()
        .and_then(|w| w.into_inner().map_err(io::IntoInnerError::into_error))
        .and_then(Sink::finish)
        .map_err(io_err("write", label))?;
    report.manifest = Some(manifest);
    Ok(report)
}

/// Writes the node members stored from write mark `range.0` to `range.1`, in write order: the
/// walk lays each member out (header, data, padding) in chunks, a thread of its own compresses
/// and writes them. Returns the builder, what the index files need, and the count.
fn write_nodes<W: Write + Send>(
    mut tar: Tar<W>,
    store: &Store,
    range: (u64, u64),
    full: bool,
    label: &str,
    progress: Progress<'_>,
) -> Result<(Tar<W>, Walked, u64), ArchiveError> {
    let (from, until) = range;
    let total = store.node_count()?;
    let mut nodes: u64 = 0;
    // (type, id) of every node of a full archive, in write order; the types of a `--since`.
    let mut index: Vec<(NodeId, NodeId)> = Vec::new();
    let mut changed: BTreeSet<u64> = BTreeSet::new();
    let mut new_self_typed = false;
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
            nodes += 1;
            if nodes.is_multiple_of(4096) {
                progress("export nodes", nodes, total);
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
    let tar = tar.map_err(io_err("write", label))?;
    walked?;
    progress("export nodes", nodes, total);
    let walked = Walked {
        index,
        changed,
        new_self_typed,
    };
    Ok((tar, walked, nodes))
}

/// Where the nodes of this archive start: 0 for a full one; for a `--since` one, the earlier
/// archive's write mark, once it is known to be an earlier archive of this store.
///
/// # Errors
/// [`ArchiveError::Refused`] for an archive of another store or made after this one's `until`.
fn first_seq(
    store: &Store,
    since: Option<&Manifest>,
    until: u64,
    label: &str,
) -> Result<u64, ArchiveError> {
    Ok(match since {
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
    })
}

/// What the walk of the nodes gathered for the index files: every (type, id) of a full
/// archive in write order, or the types that gained nodes since the earlier archive.
struct Walked {
    index: Vec<(NodeId, NodeId)>,
    changed: BTreeSet<u64>,
    new_self_typed: bool,
}

/// Writes the index files (`cas/_index/<TYPE>`, then `_meta` when there is one); returns how
/// many.
fn write_index<W: Write>(
    tar: &mut Tar<W>,
    store: &Store,
    walked: Walked,
    full: bool,
    label: &str,
) -> Result<u64, ArchiveError> {
    let Walked {
        mut index,
        changed,
        new_self_typed,
    } = walked;
    let mut files = 0;
    let mut add_index = |tar: &mut Tar<W>, name: &str, ids: &[NodeId]| -> io::Result<()> {
        let mut bytes = Vec::with_capacity(ids.len() * 14);
        for id in ids {
            bytes.extend_from_slice(&id.to_chars());
            bytes.push(b'\n');
        }
        files += 1;
        append_file(tar, &format!("cas/{INDEX_DIR}/{name}"), &bytes)
    };
    let mut meta: Vec<NodeId> = Vec::new();
    if full {
        // As a directory export writes them: from the nodes walked, write order per type.
        index.sort_by_key(|(type_id, _)| type_id.0);
        for group in index.chunk_by(|a, b| a.0 == b.0) {
            let ids: Vec<NodeId> = group.iter().map(|&(_, id)| id).collect();
            meta.extend(group.iter().filter(|(t, id)| t == id).map(|&(_, id)| id));
            add_index(tar, &group[0].0.to_wire(), &ids).map_err(io_err("write", label))?;
        }
    } else {
        for &t in &changed {
            let ids = store.list_by_type(NodeId(t))?;
            add_index(tar, &NodeId(t).to_wire(), &ids).map_err(io_err("write", label))?;
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
        add_index(tar, META_INDEX, &meta).map_err(io_err("write", label))?;
    }
    Ok(files)
}

/// Appends the root files written under `dir` that differ from the earlier archive's (all of
/// them for a full archive); returns how many.
fn append_root_files<W: Write>(
    tar: &mut Tar<W>,
    manifest: &Manifest,
    since: Option<&Manifest>,
    dir: &Path,
    label: &str,
) -> Result<u64, ArchiveError> {
    let mut n = 0;
    for name in ROOT_FILES {
        let Some(d) = manifest.files.get(name) else {
            continue;
        };
        if since.is_some_and(|m| m.files.get(name) == Some(d)) {
            continue;
        }
        let p = dir.join(name);
        let shown = p.display().to_string();
        let f = File::open(&p).map_err(io_err("read", &shown))?;
        let len = f.metadata().map_err(io_err("read", &shown))?.len();
        tar.append(
            &header(name, len, false).map_err(io_err("write", label))?,
            f.take(len),
        )
        .map_err(io_err("write", label))?;
        n += 1;
    }
    Ok(n)
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
}
