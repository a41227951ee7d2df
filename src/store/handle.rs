//! [`Store`]: one open store, on whichever backend it was opened.

use super::backend::{Backend, ReadTx, Types};
use super::damage::guard_at;
use super::error::{Result, StoreError};
use super::memory::Memory;
use super::pg::{self, Pg, backend::PgBackend};
use super::queue::{Group, LeaseReads};
use super::redb::Redb;
use super::types::TypeInfo;
use crate::cas::NodeId;
use crate::cas::bootstrap::{self, META};
use foldhash::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An open store.
pub struct Store {
    pub(super) backend: Box<dyn Backend>,
    /// The file, the server without its password, or `memory:N`.
    path: PathBuf,
    types: Mutex<HashMap<NodeId, Arc<TypeInfo>>>,
    pub(super) group: Group,
    pub(super) lease_reads: LeaseReads,
    /// The UTC minute at which this handle's writes last deleted the old rows of the
    /// steps-per-minute aggregate (0: not yet).
    pub(super) minutes_pruned: std::sync::atomic::AtomicU32,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    fn with(backend: Box<dyn Backend>, path: PathBuf) -> Store {
        Store {
            backend,
            path,
            types: Mutex::default(),
            group: Group::default(),
            lease_reads: LeaseReads::default(),
            minutes_pruned: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Opens (creating and bootstrapping if needed) the store file at `path` for reading and
    /// writing. Many processes may do this at once.
    ///
    /// # Errors
    /// [`StoreError::Open`] for a damaged file, [`StoreError::TooNew`] for a newer format.
    pub fn open(path: &Path) -> Result<Store> {
        Ok(Store::with(Box::new(Redb::open(path)?), path.to_path_buf()))
    }

    /// Opens an existing store file for reading only, without writing to it.
    ///
    /// Falls back to a read-write open when the file needs recovery after a crash.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_read_only(path: &Path) -> Result<Store> {
        Ok(Store::with(
            Box::new(Redb::open_read_only(path)?),
            path.to_path_buf(),
        ))
    }

    /// A new, empty store in memory, bootstrapped like a new file: for tests and for programs
    /// that embed uwf and keep nothing. It lives as long as this handle.
    pub fn memory() -> Store {
        // Each store in memory is a store of its own, and is named so (`memory:N`).
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Store::with(
            Box::new(Memory::new()),
            PathBuf::from(format!("memory:{n}")),
        )
    }

    /// Connects to the PostgreSQL server of `url` (`postgres://` or `postgresql://`), creating
    /// or migrating uwf's schema there on first use. `env` looks up libpq's variables
    /// (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`) for what the URL leaves out.
    ///
    /// # Errors
    /// [`StoreError::Server`] naming the server (never the password) when it cannot be
    /// reached or refuses the login; [`StoreError::TooNew`] for a newer schema.
    pub fn open_url(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Store> {
        Ok(Store::on_server(Pg::open(url, env)?))
    }

    /// [`Store::open_url`] for a database that already holds a store: `None` when it holds
    /// none, and nothing is created then.
    ///
    /// # Errors
    /// As [`Store::open_url`].
    pub fn open_url_existing(
        url: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Store>> {
        Ok(Pg::open_existing(url, env)?.map(Store::on_server))
    }

    fn on_server(pg: Pg) -> Store {
        let path = PathBuf::from(pg.server());
        Store::with(Box::new(PgBackend(Arc::new(pg))), path)
    }

    /// Whether `location` names a PostgreSQL server rather than a redb file.
    pub fn is_server_url(location: &str) -> bool {
        pg::is_url(location)
    }

    /// Calls `f` whenever a thread starts or a step lease is freed, by any process on any
    /// machine, for a store on a PostgreSQL server (`LISTEN/NOTIFY`); `None` for a redb file,
    /// which a caller watches instead.
    pub fn on_change(&self, f: impl Fn() + Send + 'static) -> Option<pg::Listener> {
        self.backend.listen(Box::new(f))
    }

    /// Where the store is: the redb file, or the PostgreSQL server without its password.
    pub fn location(&self) -> String {
        self.path.display().to_string()
    }

    /// The file this store lives in (the server or `memory` for the others), named by errors.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The backend's name and the version of its format (redb: the file's format version;
    /// PostgreSQL: the schema version).
    ///
    /// # Errors
    /// A store failure.
    pub fn backend(&self) -> Result<(&'static str, u64)> {
        Ok((self.backend.name(), self.backend.format_version()?))
    }

    /// Runs a store operation at the store's boundary: an engine panic and an error that
    /// means damage become [`StoreError::Damaged`] naming the store.
    pub(crate) fn guard<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        guard_at(&self.path, f)
    }

    /// A read transaction of the backend.
    pub(crate) fn read(&self) -> Result<Box<dyn ReadTx>> {
        self.backend.read()
    }

    /// The schema and checks of `type_id`, from the cache or the store.
    pub(crate) fn type_info(&self, type_id: NodeId) -> Result<Arc<TypeInfo>> {
        if let Some(t) = self.types.lock().expect("type cache lock").get(&type_id) {
            return Ok(t.clone());
        }
        let schema = if type_id == META {
            bootstrap::builtins()[0].payload.clone()
        } else {
            match self.get(type_id)? {
                Some(n) if n.type_id == META => n.payload()?,
                _ => return Err(StoreError::UnknownType(type_id)),
            }
        };
        let info = Arc::new(TypeInfo::new(schema));
        self.types
            .lock()
            .expect("type cache lock")
            .insert(type_id, info.clone());
        Ok(info)
    }

    /// The backend, for tests of one backend's own records.
    #[cfg(test)]
    pub(crate) fn backend_any(&self) -> &dyn std::any::Any {
        self.backend.as_any()
    }
}

impl Types for Store {
    fn type_info(&self, type_id: NodeId) -> Result<Arc<TypeInfo>> {
        Store::type_info(self, type_id)
    }
}

/// The storage root: `$UWF_HOME`, else `$UNCAGED_WORKFLOW_STORAGE_ROOT`, else
/// `$WORKFLOW_STORAGE_ROOT`, else `~/.uncaged/workflow`. `env` looks a variable up.
pub(crate) fn resolve_root(env: impl Fn(&str) -> Option<String>) -> PathBuf {
    for var in [
        "UWF_HOME",
        "UNCAGED_WORKFLOW_STORAGE_ROOT",
        "WORKFLOW_STORAGE_ROOT",
    ] {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            return PathBuf::from(v);
        }
    }
    let home = env("HOME")
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| ".".to_string());
    Path::new(&home).join(".uncaged").join("workflow")
}
