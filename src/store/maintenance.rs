//! Maintenance through the store's handle: garbage collection, pins and counts, compaction,
//! verify and reindex. What each does on a backend is the backend's; the roots a collection
//! keeps and the checks of a node are the same everywhere (`report.rs`, `node.rs`).

use super::error::Result;
use super::handle::Store;
use super::report::{Count, GcOptions, GcReport, Progress, VerifyReport};
use crate::cas::NodeId;

impl Store {
    /// Collects the nodes no root reaches: active and archived heads, registry names and
    /// versions, every schema and the bootstrap nodes, pins, ids named by thread states, and
    /// nodes younger than the grace or than the oldest live step lease.
    ///
    /// # Errors
    /// [`super::StoreError::GcRunning`] when another live process is collecting, a store
    /// failure, or damage found on the way.
    pub fn gc(&self, opts: &GcOptions<'_>) -> Result<GcReport> {
        self.guard(|| self.backend.gc(self, opts))
    }

    /// The store's size and what no root reaches (`cas count`), without collecting.
    ///
    /// # Errors
    /// A store failure or damage.
    pub(crate) fn count(&self) -> Result<Count> {
        self.guard(|| self.backend.count())
    }

    /// Gives the space of removed data back: a redb file shrinks to the pages in use (other
    /// processes' transactions wait meanwhile); on a PostgreSQL server, `VACUUM (ANALYZE)` of
    /// uwf's tables, which makes the space of removed rows reusable while steps go on.
    ///
    /// # Errors
    /// [`super::StoreError::InUse`] while another process has a transaction open,
    /// [`super::StoreError::ReadOnly`], a store failure.
    pub fn compact(&mut self) -> Result<()> {
        let path = self.path().to_path_buf();
        super::damage::guard_at(&path, || self.backend.compact())
    }

    /// The bytes the store takes: the redb file's length, or on a PostgreSQL server those of
    /// uwf's tables with their indexes.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn size_bytes(&self) -> Result<u64> {
        self.guard(|| self.backend.size_bytes())
    }

    /// Pins stored nodes: a collection keeps them and what they reach. Returns, for each,
    /// whether it was not pinned before.
    ///
    /// # Errors
    /// [`super::StoreError::NotFound`] for an id that is not stored (nothing is pinned then).
    pub fn pin(&self, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>> {
        self.write(|w| w.pin(ids, now_ms))
    }

    /// Releases pins; returns, for each id, whether it was pinned.
    ///
    /// # Errors
    /// A store failure.
    pub fn unpin(&self, ids: &[NodeId]) -> Result<Vec<bool>> {
        self.write(|w| w.unpin(ids))
    }

    /// Every pin: (id, when pinned), in id order.
    ///
    /// # Errors
    /// A store failure.
    pub fn pins(&self) -> Result<Vec<(NodeId, u64)>> {
        self.guard(|| self.read()?.pins())
    }

    /// Re-hashes every node, checks its digest, recomputes its references and compares them
    /// with the stored ones, and checks the indexes against the nodes.
    ///
    /// # Errors
    /// A store failure.
    pub fn verify(&self, progress: Progress<'_>) -> Result<VerifyReport> {
        self.guard(|| self.backend.verify(self, progress))
    }

    /// Rebuilds the derived data from the nodes and their payloads; returns the number of
    /// nodes indexed. A store whose derived data is right is read and not written.
    ///
    /// # Errors
    /// A store failure, or a node whose payload is corrupt.
    pub fn reindex(&self, progress: Progress<'_>) -> Result<u64> {
        self.guard(|| self.backend.reindex(self, progress))
    }
}

/// Sets the recorded format version of a store's file (tests of migrations and of files from a
/// newer uwf).
///
/// # Errors
/// A store failure, or a backend without such a record.
#[doc(hidden)]
pub fn force_version(store: &Store, v: u64) -> Result<()> {
    store.guard(|| store.backend.force_version(v))
}
