//! Errors of the store layer, and the one alias every file of it uses.

use crate::cas::NodeId;
use crate::cas::schema::SchemaError;
use std::path::{Path, PathBuf};

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
