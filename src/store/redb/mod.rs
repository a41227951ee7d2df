//! The store in one redb file, the embedded default.
//!
//! Tables (see ARCHITECTURE.md): the nodes (`nodes.rs`: `ids`, `links`, `payloads`,
//! `type_index`), the thread layer (`records.rs`), model usage and budgets (`usage.rs`), steps
//! per minute (`minutes.rs`), pins and a running collection (`gc.rs`) and
//! `meta` (`format_version`, `next_seq` and the other counters). Many processes open the file
//! at once (`ConcurrencyMode::MultiWriter`); each holds it only for short transactions.

mod file;
pub(crate) mod gc;
pub(crate) mod migrate;
pub(crate) mod minutes;
pub(crate) mod nodes;
pub(crate) mod read;
pub(crate) mod records;
pub(crate) mod tables;
#[cfg(test)]
pub(crate) mod tests;
mod tx;
pub(crate) mod usage;

use file::Db;
pub(crate) use file::Redb;
use tables::META_TABLE;
use tx::RedbTx;
mod verify;

use crate::store::backend::{Backend, BulkLoad, ReadTx, Types, WriteTx};
use crate::store::damage::guard_at;
use crate::store::error::{Result, StoreError};
use crate::store::node::{Prepared, PutOutcome};
use crate::store::report::{Count, GcOptions, GcReport, Progress, VerifyReport};
use migrate::FORMAT_VERSION;
use redb::{ConcurrencyMode, Database, WriteTransaction};
use std::path::Path;

/// redb's page cache per open store, by default. The operating system's page cache holds the
/// file as well, so a small cache costs little speed and keeps a process's memory bounded
/// whatever the size of the store (an import or export of millions of nodes stays well under
/// 200 MB). A bulk load into a store of many millions of nodes goes faster with a cache that
/// holds the `ids` table (16 bytes a node): see [`set_cache_size`].
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

static CACHE_BYTES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(DEFAULT_CACHE_BYTES);

/// Sets the page cache of the stores this process opens from now on (the CLI's
/// `UWF_CACHE_MB`). It is memory the process may fill, on top of what a command holds.
pub fn set_cache_size(bytes: usize) {
    CACHE_BYTES.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

fn builder() -> redb::Builder {
    let mut b = Database::builder();
    b.set_concurrency_mode(ConcurrencyMode::MultiWriter);
    b.set_cache_size(CACHE_BYTES.load(std::sync::atomic::Ordering::Relaxed));
    b
}

fn open_err(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

impl Redb {
    /// Opens (creating and bootstrapping if needed) the file at `path` for reading and
    /// writing. Many processes may do this at once.
    ///
    /// # Errors
    /// [`StoreError::Open`] for a damaged file, [`StoreError::TooNew`] for a newer format.
    pub(crate) fn open(path: &Path) -> Result<Redb> {
        guard_at(path, || {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| open_err(path, e))?;
            }
            // A file from a newer uwf is refused before a read-write open can touch it.
            if path.exists()
                && let Ok(db) = builder().open_read_only(path)
            {
                let probe = Redb {
                    db: Db::Ro(db),
                    path: path.to_path_buf(),
                };
                if let Some(v) = migrate::read_version(&probe).map_err(|e| open_err(path, e))?
                    && v > FORMAT_VERSION
                {
                    return Err(StoreError::TooNew {
                        path: path.to_path_buf(),
                        found: v,
                        supported: FORMAT_VERSION,
                    });
                }
            }
            let db = builder().create(path).map_err(|e| open_err(path, e))?;
            let store = Redb {
                db: Db::Rw(db),
                path: path.to_path_buf(),
            };
            migrate::check_and_migrate(&store)?;
            Ok(store)
        })
    }

    /// Opens an existing file for reading only, without writing to it; falls back to a
    /// read-write open when the file needs recovery after a crash or a migration.
    ///
    /// # Errors
    /// As [`Redb::open`].
    pub(crate) fn open_read_only(path: &Path) -> Result<Redb> {
        guard_at(path, || match builder().open_read_only(path) {
            Ok(db) => {
                let store = Redb {
                    db: Db::Ro(db),
                    path: path.to_path_buf(),
                };
                match migrate::read_version(&store).map_err(|e| open_err(path, e))? {
                    Some(v) if v == FORMAT_VERSION => Ok(store),
                    Some(v) if v > FORMAT_VERSION => Err(StoreError::TooNew {
                        path: path.to_path_buf(),
                        found: v,
                        supported: FORMAT_VERSION,
                    }),
                    _ => {
                        drop(store);
                        Redb::open(path)
                    }
                }
            }
            Err(redb::DatabaseError::RepairAborted | redb::DatabaseError::Storage(_))
                if path.exists() =>
            {
                Redb::open(path)
            }
            Err(e) => Err(open_err(path, e)),
        })
    }
}

impl Backend for Redb {
    fn name(&self) -> &'static str {
        "redb"
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn format_version(&self) -> Result<u64> {
        Ok(migrate::read_version(self)?.unwrap_or(0))
    }

    fn read(&self) -> Result<Box<dyn ReadTx>> {
        Ok(Box::new(read::RedbRead::new(self.begin_read()?)))
    }

    fn write(&self, f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>) -> Result<()> {
        let tx = self.begin_write()?;
        let mut w = RedbTx::new(&tx);
        f(&mut w)?;
        w.settle()?;
        drop(w);
        tx.commit()?;
        Ok(())
    }

    fn bulk(&self, commit_every: usize) -> Box<dyn BulkLoad + '_> {
        Box::new(RedbBulk {
            redb: self,
            tx: None,
            pending: 0,
            commit_every,
        })
    }

    fn listen(&self, _f: Box<dyn Fn() + Send + 'static>) -> Option<crate::store::pg::Listener> {
        None
    }

    fn gc(&self, _types: &dyn Types, opts: &GcOptions<'_>) -> Result<GcReport> {
        Redb::gc(self, opts)
    }

    fn count(&self) -> Result<Count> {
        Redb::count(self)
    }

    fn compact(&mut self) -> Result<()> {
        Redb::compact(self)
    }

    fn size_bytes(&self) -> Result<u64> {
        Ok(Redb::size_bytes(self))
    }

    fn verify(&self, types: &dyn Types, progress: Progress<'_>) -> Result<VerifyReport> {
        Redb::verify(self, types, progress)
    }

    fn reindex(&self, types: &dyn Types, progress: Progress<'_>) -> Result<u64> {
        Redb::reindex(self, types, progress)
    }

    fn force_version(&self, v: u64) -> Result<()> {
        let tx = self.begin_write()?;
        tx.open_table(META_TABLE)?.insert("format_version", v)?;
        tx.commit()?;
        Ok(())
    }
}

/// Puts sharing write transactions of the file.
struct RedbBulk<'a> {
    redb: &'a Redb,
    tx: Option<WriteTransaction>,
    pending: usize,
    commit_every: usize,
}

impl BulkLoad for RedbBulk<'_> {
    fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        if self.tx.is_none() {
            self.tx = Some(self.redb.begin_write()?);
        }
        let tx = self.tx.as_ref().expect("opened above");
        let out = nodes::put_in(tx, items.iter().copied())?;
        self.pending += items.len();
        if self.pending >= self.commit_every {
            self.commit()?;
        }
        Ok(out)
    }

    fn commit(&mut self) -> Result<()> {
        self.pending = 0;
        match self.tx.take() {
            Some(tx) => Ok(tx.commit()?),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.commit()
    }
}
