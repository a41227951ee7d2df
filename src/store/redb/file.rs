//! An open redb file and its transactions.

use crate::store::damage::guard_at;
use crate::store::error::{Result, StoreError};
use redb::{Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, WriteTransaction};
use std::path::{Path, PathBuf};

pub(crate) enum Db {
    Rw(Database),
    Ro(ReadOnlyDatabase),
}

/// An open redb file.
pub(crate) struct Redb {
    pub(crate) db: Db,
    pub(crate) path: PathBuf,
}

impl Redb {
    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` at the boundary: an engine panic and an error that means damage become
    /// [`StoreError::Damaged`] naming the file.
    pub(crate) fn guard<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        guard_at(&self.path, f)
    }

    pub(crate) fn begin_read(&self) -> Result<ReadTransaction> {
        match &self.db {
            Db::Rw(d) => d.begin_read(),
            Db::Ro(d) => d.begin_read(),
        }
        .map_err(|e| StoreError::from(e).located(&self.path))
    }

    pub(crate) fn begin_write(&self) -> Result<WriteTransaction> {
        match &self.db {
            Db::Rw(d) => d
                .begin_write()
                .map_err(|e| StoreError::from(e).located(&self.path)),
            Db::Ro(_) => Err(StoreError::ReadOnly),
        }
    }
}
