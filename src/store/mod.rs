//! The store: every node, its payload, the type index and the format record in one redb file.
//! This is the only module that names redb.
//!
//! Tables (see ARCHITECTURE.md):
//! - `nodes`: id → `digest(32) ‖ timestamp(u64 LE) ‖ type(u64 LE) ‖ seq(u64 LE) ‖ refs`, where
//!   `refs` (derived) are the ids the payload references, packed u64 LE, in schema order
//! - `payloads`: seq of the first entry → `n(u32 LE) ‖ end offsets(u32 LE × n) ‖ entries`, an
//!   entry being `id(u64 LE) ‖ payload CBOR` for seq, seq+1, …; append-only
//! - `type_index` (derived): (type, seq) → id, in write order
//! - `meta`: `format_version`, `next_seq`
//! - `threads`, `registry`, `registry_history`, `history`, `history_by_thread` (threads.rs)
//! - `leases`: thread id → the process running a step of it (leases.rs)
//! - `pins`, `gc_owner`, `gc_touched`: pinned nodes and a running collection (gc.rs)
//!
//! Node ids are uniformly random, so a put dirties a random `nodes` leaf; keeping those records
//! small (about 90 bytes) and appending the payloads under ascending sequence numbers keeps that
//! cost low. Derived data is rebuilt from `nodes` and `payloads` by [`Store::reindex`].

mod copy;
mod gc;
mod group;
mod import;
mod leases;
mod lifecycle;
mod limits;
mod migrate;
mod nodes;
mod pg;
mod pg_gc;
mod records;
mod removals;
mod threads;
mod verify;

pub use copy::{CopyProgress, CopyReport, copy};
pub use gc::{GcOptions, GcReport};
pub use leases::Lease;
pub use lifecycle::{Phase, StepFailure, ThreadState};
pub use limits::WorkflowLimits;
pub use migrate::{FORMAT_VERSION, MIGRATIONS, Migration, force_version};
pub use nodes::{
    Bulk, Prepared, PutOutcome, Snapshot, StoredNode, WalkEvent, WalkStats, prepare_unchecked,
};
pub use pg::Listener;
pub use pg::SCHEMA_VERSION as PG_SCHEMA_VERSION;
pub(crate) use pg::{mask_url, url_password};
pub use removals::Removal;
pub use threads::{Counts, HistoryEntry, Merge, RegistryEntry, ThreadRecord, Writer};
pub use verify::{Damage, Progress, VerifyReport};

use crate::cas::bootstrap::{self, META};
use crate::cas::refplan::RefPlan;
use crate::cas::schema::{SchemaError, Validator};
use crate::cas::{NodeId, Value};
use redb::{
    ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
    TableDefinition, WriteTransaction,
};
use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Node id → sequence number (format 2).
pub(crate) const IDS: TableDefinition<u64, u64> = TableDefinition::new("ids");
/// Sequence number → the node's id, type, timestamp, digest and references (format 2).
pub(crate) const LINKS: TableDefinition<u64, &[u8]> = TableDefinition::new("links");
/// Node id → digest, timestamp, type, seq and references: format 1, read by its migration.
pub(crate) const NODES_V1: TableDefinition<u64, &[u8]> = TableDefinition::new("nodes");
pub(crate) const TYPE_INDEX: TableDefinition<(u64, u64), u64> = TableDefinition::new("type_index");
pub(crate) const PAYLOADS: TableDefinition<u64, &[u8]> = TableDefinition::new("payloads");
pub(crate) const META_TABLE: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// File name of the store inside a storage root.
pub const DB_FILE: &str = "uwf.redb";

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file is not a readable redb database (truncated, corrupted, not redb).
    #[error(
        "cannot open store {path}: {message}; the file may be damaged: restore it from a backup or an export"
    )]
    Open {
        /// The file.
        path: PathBuf,
        /// What redb said.
        message: String,
    },
    /// The file was written by a newer uwf.
    #[error(
        "store {path} has format version {found}, newer than this uwf supports ({supported}); upgrade uwf"
    )]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u64,
        /// Ours.
        supported: u64,
    },
    /// A redb failure during a transaction.
    #[error("store error: {0}")]
    Db(#[from] redb::Error),
    /// A limit or a state of the store that the operation cannot handle.
    #[error("store error: {0}")]
    Internal(String),
    /// A thread id that is already taken.
    #[error("thread id {0} is already in use")]
    ThreadExists(String),
    /// A file written by a build before the first release.
    #[error(
        "format 1 file from a pre-release build (no payloads table); export it with that build and import it"
    )]
    PreRelease,
    /// A thread, registry, history or lease record that cannot be decoded.
    #[error("corrupt {what} record in the store: {message}; run \"uwf cas verify\"")]
    CorruptRecord {
        /// Which record.
        what: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// No node has this id.
    #[error("Node not found: {0}")]
    NotFound(NodeId),
    /// The type of a put is not a stored schema.
    #[error("unknown type {0}: no schema node has this id; run \"uwf cas schema list\"")]
    UnknownType(NodeId),
    /// An id that exists with different bytes.
    #[error("hash collision: node {0} exists with different content")]
    HashCollision(NodeId),
    /// A schema or payload problem.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// An id prefix that matches several nodes.
    #[error("ambiguous id prefix \"{prefix}\": matches {}", .candidates.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "))]
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// Some of the matching ids.
        candidates: Vec<NodeId>,
    },
    /// A prefix that matches no node.
    #[error("Node not found: no node id starts with \"{0}\"")]
    NoMatch(String),
    /// An id or prefix that is not Crockford.
    #[error("invalid id \"{0}\": expected 4 to 13 Crockford base-32 characters")]
    BadId(String),
    /// A stored record that cannot be read.
    #[error("corrupt record for node {0} in the store; run \"uwf cas verify\"")]
    Corrupt(NodeId),
    /// Another live process is collecting garbage.
    #[error("garbage collection is already running (pid {pid})")]
    GcRunning {
        /// Its pid.
        pid: u32,
    },
    /// The PostgreSQL server cannot be reached, refused the login or failed a statement.
    #[error("PostgreSQL server {server}: {message}")]
    Server {
        /// The server, without a password.
        server: String,
        /// What the server or the connection said.
        message: String,
        /// Whether the operation may succeed when tried again (a lost connection, a conflict
        /// the server aborted).
        retry: bool,
    },
    /// An operation the PostgreSQL backend does not offer.
    #[error(
        "this operation is not available on a PostgreSQL store ({server}); copy the store to a redb file with \"uwf store copy\" and run it there"
    )]
    Unsupported {
        /// The server.
        server: String,
    },
    /// Another process has a transaction open on the file (an operation that needs it alone).
    #[error(
        "another process is using the store; run the command again when no other uwf command is running"
    )]
    InUse,
    /// The store was opened read-only.
    #[error("store opened read-only")]
    ReadOnly,
    /// The file cannot be read past some damage: a record that does not decode, a page the
    /// database engine cannot read (its panics are caught at the store's boundary), a file
    /// shorter than its layout.
    #[error(
        "store {path} is damaged: {what}; run \"uwf cas verify\" to see the damage, and restore the store from an export or a backup"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What cannot be read.
        what: String,
    },
}

impl StoreError {
    /// This error as [`StoreError::Damaged`] naming `path` when it means the file is damaged
    /// (a record that does not decode, or a redb error that only damage explains).
    pub(crate) fn located(self, path: &Path) -> StoreError {
        let damaged = |what: String| StoreError::Damaged {
            path: path.to_path_buf(),
            what,
        };
        match self {
            StoreError::Corrupt(id) => damaged(format!("corrupt record for node {id}")),
            StoreError::CorruptRecord { what, message } => {
                damaged(format!("corrupt {what} record ({message})"))
            }
            StoreError::Db(redb::Error::Io(io))
                if io.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                damaged("it ends before its recorded layout does (cut short?)".into())
            }
            StoreError::Db(redb::Error::PreviousIo) => {
                damaged("a read of it failed (is it cut short?)".into())
            }
            StoreError::Db(e) if db_damage(&e) => damaged(format!("{e}")),
            e => e,
        }
    }
}

/// Whether a redb error means the file is damaged, not that the system failed.
pub(crate) fn db_damage(e: &redb::Error) -> bool {
    match e {
        redb::Error::Corrupted(_) | redb::Error::PreviousIo => true,
        redb::Error::Io(io) => io.kind() == std::io::ErrorKind::UnexpectedEof,
        _ => false,
    }
}

thread_local! {
    /// How many store operations on this thread's stack catch the database engine's panics.
    static CATCHING: Cell<u32> = const { Cell::new(0) };
    /// Set by [`panic_is_caught`] when a panic inside a store operation is not the engine's:
    /// a bug, which goes on unwinding.
    static FOREIGN_PANIC: Cell<bool> = const { Cell::new(false) };
}

/// For the process's panic hook: whether this panic is the database engine's, raised inside a
/// store operation that turns it into [`StoreError::Damaged`] (the hook then prints nothing).
/// redb panics on some damaged pages instead of returning an error. Without a hook that asks,
/// every panic inside a store operation is taken for damage.
pub fn panic_is_caught(info: &std::panic::PanicHookInfo<'_>) -> bool {
    if CATCHING.with(Cell::get) == 0 {
        return false;
    }
    let engine = info.location().is_some_and(|l| {
        let f = l.file().replace('\\', "/");
        f.contains("/redb-") || f.contains("/redb/")
    });
    FOREIGN_PANIC.with(|c| c.set(!engine));
    engine
}

/// Runs `f`, turning a panic of the database engine into [`StoreError::Damaged`] naming
/// `path`. A panic that is not the engine's (see [`panic_is_caught`]) goes on unwinding.
///
/// # Errors
/// The error of `f`, or the damage a panic stands for.
pub(crate) fn catching_damage<T, E: From<StoreError>>(
    path: &Path,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let depth = CATCHING.with(|c| c.replace(c.get() + 1));
    if depth == 0 {
        FOREIGN_PANIC.with(|c| c.set(false));
    }
    // Nothing the closure borrows is used after a panic but to drop it.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(depth));
    match r {
        Ok(r) => r,
        Err(payload) => {
            // A bug unwinds through every enclosing operation, not only this one.
            if FOREIGN_PANIC.with(Cell::get) {
                std::panic::resume_unwind(payload);
            }
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(StoreError::Damaged {
                path: path.to_path_buf(),
                what: format!(
                    "the database engine cannot read it ({})",
                    msg.replace('\n', " ")
                ),
            }
            .into())
        }
    }
}

/// Result alias of the store layer.
pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

macro_rules! impl_db_err {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Db(e.into()) }
        }
    )*};
}
impl_db_err!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::DatabaseError
);

enum Db {
    Rw(Database),
    Ro(ReadOnlyDatabase),
    /// A PostgreSQL server.
    Pg(Arc<pg::Pg>),
}

/// What the store knows about one type: its schema and what it takes to check and walk it.
pub(crate) struct TypeInfo {
    pub(crate) schema: Value,
    validator: OnceLock<std::result::Result<Validator, SchemaError>>,
    /// Compiled once per store handle; an error (a pattern registration would have refused)
    /// fails every reference lookup of the type instead of skipping references.
    plan: std::result::Result<RefPlan, SchemaError>,
}

impl TypeInfo {
    pub(crate) fn new(schema: Value) -> TypeInfo {
        TypeInfo {
            plan: RefPlan::compile(&schema),
            schema,
            validator: OnceLock::new(),
        }
    }

    /// The reference plan of the schema.
    ///
    /// # Errors
    /// [`StoreError::Schema`] when the schema has a pattern the plan cannot compile.
    pub(crate) fn plan(&self) -> Result<&RefPlan> {
        self.plan
            .as_ref()
            .map_err(|e| StoreError::Schema(e.clone()))
    }

    pub(crate) fn validator(&self) -> std::result::Result<&Validator, SchemaError> {
        self.validator
            .get_or_init(|| Validator::new(&self.schema))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// An open store.
pub struct Store {
    db: Db,
    path: PathBuf,
    types: Mutex<HashMap<NodeId, Arc<TypeInfo>>>,
    group: group::Group,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

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

impl Store {
    /// Opens (creating and bootstrapping if needed) the store file at `path` for reading and
    /// writing. Many processes may do this at once.
    ///
    /// # Errors
    /// [`StoreError::Open`] for a damaged file, [`StoreError::TooNew`] for a newer format.
    pub fn open(path: &Path) -> Result<Store> {
        guard_at(path, || {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| open_err(path, e))?;
            }
            // A file from a newer uwf is refused before a read-write open can touch it.
            if path.exists()
                && let Ok(db) = builder().open_read_only(path)
            {
                let probe = Store {
                    db: Db::Ro(db),
                    path: path.to_path_buf(),
                    types: Default::default(),
                    group: group::Group::default(),
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
            let store = Store {
                db: Db::Rw(db),
                path: path.to_path_buf(),
                types: Default::default(),
                group: group::Group::default(),
            };
            migrate::check_and_migrate(&store)?;
            Ok(store)
        })
    }

    /// Opens an existing store file for reading only, without writing to it.
    ///
    /// Falls back to a read-write open when the file needs recovery after a crash.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_read_only(path: &Path) -> Result<Store> {
        guard_at(path, || match builder().open_read_only(path) {
            Ok(db) => {
                let store = Store {
                    db: Db::Ro(db),
                    path: path.to_path_buf(),
                    types: Default::default(),
                    group: group::Group::default(),
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
                        Store::open(path)
                    }
                }
            }
            Err(redb::DatabaseError::RepairAborted | redb::DatabaseError::Storage(_))
                if path.exists() =>
            {
                Store::open(path)
            }
            Err(e) => Err(open_err(path, e)),
        })
    }

    /// The file this store lives in.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Turns a failure of a read over the whole file into [`StoreError::Damaged`] naming this
    /// file where damage explains it (see [`StoreError::located`]), for `map_err`.
    pub(crate) fn located<E: Into<StoreError>>(&self) -> impl Fn(E) -> StoreError + '_ {
        move |e| e.into().located(&self.path)
    }

    /// Runs a store operation at the store's boundary: an engine panic and an error that
    /// means damage become [`StoreError::Damaged`] naming the file.
    pub(crate) fn guard<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        guard_at(&self.path, f)
    }

    pub(crate) fn begin_read(&self) -> Result<ReadTransaction> {
        match &self.db {
            Db::Rw(d) => d.begin_read(),
            Db::Ro(d) => d.begin_read(),
            Db::Pg(_) => return Err(self.unsupported()),
        }
        .map_err(self.located())
    }

    pub(crate) fn begin_write(&self) -> Result<WriteTransaction> {
        match &self.db {
            Db::Rw(d) => d.begin_write().map_err(self.located()),
            Db::Ro(_) => Err(StoreError::ReadOnly),
            Db::Pg(_) => Err(self.unsupported()),
        }
    }

    /// The PostgreSQL server of this store, if it is on one.
    pub(crate) fn pg(&self) -> Option<&Arc<pg::Pg>> {
        match &self.db {
            Db::Pg(p) => Some(p),
            _ => None,
        }
    }

    /// The error of an operation that the PostgreSQL backend does not offer.
    fn unsupported(&self) -> StoreError {
        StoreError::Unsupported {
            server: self.path.display().to_string(),
        }
    }

    /// Connects to the PostgreSQL server of `url` (`postgres://` or `postgresql://`), creating
    /// or migrating uwf's schema there on first use. `env` looks up libpq's variables
    /// (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`) for what the URL leaves out.
    ///
    /// # Errors
    /// [`StoreError::Server`] naming the server (never the password) when it cannot be
    /// reached or refuses the login; [`StoreError::TooNew`] for a newer schema.
    pub fn open_url(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Store> {
        let pg = pg::Pg::open(url, env)?;
        Ok(Store {
            path: PathBuf::from(pg.server()),
            db: Db::Pg(Arc::new(pg)),
            types: Default::default(),
            group: group::Group::default(),
        })
    }

    /// Calls `f` whenever a thread starts or a step lease is freed, by any process on any
    /// machine, for a store on a PostgreSQL server (`LISTEN/NOTIFY`); `None` for a redb file,
    /// which a caller watches instead.
    pub fn on_change(&self, f: impl Fn() + Send + 'static) -> Option<pg::Listener> {
        self.pg().map(|p| p.listen(f))
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
        Ok(pg::Pg::open_existing(url, env)?.map(|pg| Store {
            path: PathBuf::from(pg.server()),
            db: Db::Pg(Arc::new(pg)),
            types: Default::default(),
            group: group::Group::default(),
        }))
    }

    /// Whether `location` names a PostgreSQL server rather than a redb file.
    pub fn is_server_url(location: &str) -> bool {
        pg::is_url(location)
    }

    /// Where the store is: the redb file, or the PostgreSQL server without its password.
    pub fn location(&self) -> String {
        self.path.display().to_string()
    }

    /// The backend's name and the version of its format (redb: the file's format version;
    /// PostgreSQL: the schema version).
    ///
    /// # Errors
    /// A store failure.
    pub fn backend(&self) -> Result<(&'static str, u64)> {
        match &self.db {
            Db::Pg(p) => Ok(("postgresql", p.schema_version()?.unwrap_or(0))),
            _ => Ok(("redb", migrate::read_version(self)?.unwrap_or(0))),
        }
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
}

/// [`Store::guard`] for a path.
pub(crate) fn guard_at<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catching_damage(path, f).map_err(|e| e.located(path))
}

fn open_err(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_panic_becomes_damage_naming_the_file() {
        let path = Path::new("/x/uwf.redb");
        let ok: Result<u32> = catching_damage(path, || Ok(7));
        assert!(matches!(ok, Ok(7)));
        // Without a hook that tells them apart, a panic inside a store operation is damage.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r: Result<()> = catching_damage(path, || panic!("entered unreachable code"));
        std::panic::set_hook(hook);
        let e = r.expect_err("a panic is an error");
        assert!(matches!(e, StoreError::Damaged { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("/x/uwf.redb") && msg.contains("uwf cas verify"),
            "{msg}"
        );
        assert_eq!(CATCHING.with(Cell::get), 0);
    }

    #[test]
    fn damage_errors_are_located() {
        let path = Path::new("/x/uwf.redb");
        let e = StoreError::Corrupt(NodeId(1)).located(path);
        assert!(matches!(e, StoreError::Damaged { .. }));
        assert!(e.to_string().contains("corrupt record for node"));
        let e = StoreError::Db(redb::Error::PreviousIo).located(path);
        assert!(matches!(e, StoreError::Damaged { .. }));
        let e = StoreError::ReadOnly.located(path);
        assert!(matches!(e, StoreError::ReadOnly));
    }
}
