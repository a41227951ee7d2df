//! Nodes through the store's handle: prepare (hash, check, find refs), put, get, prefix
//! lookup, refs and walk; read snapshots and bulk loads.

use super::backend::{BulkLoad, Order, ReadTx, Walked};
use super::damage::{catching_damage, guard_at};
use super::error::{Result, StoreError};
use super::handle::Store;
use super::node::refs_in;
use super::node::{Prepared, PutOutcome, StoredNode, WalkEvent, WalkStats, prepare_unchecked};
use crate::cas::bootstrap::META;
use crate::cas::id::{ID_LEN, digit_value};
use crate::cas::{NodeId, Value, cbor, hash, schema};
use std::ops::ControlFlow;
use std::path::PathBuf;

/// A consistent view of the nodes at one moment: see [`Store::snapshot`].
pub struct Snapshot {
    tx: Box<dyn ReadTx>,
    /// The store, named by damage errors.
    path: PathBuf,
}

impl Snapshot {
    /// The node `id`, if stored.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        guard_at(&self.path, || self.tx.get(id))
    }

    /// Reads the nodes of `ids` ahead in one query, for a store on a server, so that the
    /// [`Snapshot::get`]s that follow make no round trip; nothing for a file, whose reads are
    /// local.
    ///
    /// # Errors
    /// A failure of the server.
    pub(crate) fn read_ahead(&self, ids: impl IntoIterator<Item = NodeId>) -> Result<()> {
        let ids: Vec<NodeId> = ids.into_iter().collect();
        guard_at(&self.path, || self.tx.read_ahead(&ids))
    }

    /// Reads the chain of a thread ending at `head` ahead, for a store on a server (a query a
    /// page of nodes instead of one a node). A reader still checks each link itself.
    ///
    /// # Errors
    /// A failure of the server.
    pub(crate) fn read_chain_ahead(&self, head: NodeId, step: NodeId) -> Result<()> {
        guard_at(&self.path, || self.tx.read_chain_ahead(head, step))
    }

    /// The type of node `id`, if stored (the payload is not read).
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn type_of(&self, id: NodeId) -> Result<Option<NodeId>> {
        guard_at(&self.path, || self.tx.type_of(id))
    }

    /// The digests of `ids` (`None` for one not stored), in their order.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub(crate) fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>> {
        guard_at(&self.path, || self.tx.digests(ids))
    }

    /// Whether `id` is stored.
    ///
    /// # Errors
    /// A store failure.
    pub(crate) fn has(&self, id: NodeId) -> Result<bool> {
        guard_at(&self.path, || self.tx.has(id))
    }
}

/// Puts sharing write transactions: see [`Store::bulk`]. Dropped without
/// [`finish`](Bulk::finish), the puts since the last commit are lost.
pub struct Bulk<'a> {
    store: &'a Store,
    load: Box<dyn BulkLoad + 'a>,
}

impl Bulk<'_> {
    /// Puts nodes (as [`Store::put`]); commits when `commit_every` nodes are pending.
    ///
    /// # Errors
    /// As [`Store::put`]; after a hash collision nothing of this call is written and the
    /// load may go on.
    pub fn put(&mut self, nodes: &[Prepared], now_ms: u64) -> Result<Vec<PutOutcome>> {
        let items: Vec<(&Prepared, u64)> = nodes.iter().map(|p| (p, now_ms)).collect();
        self.store.guard(|| self.load.put(&items))
    }

    /// Puts nodes that carry their own first-write timestamps (an import).
    ///
    /// # Errors
    /// As [`Bulk::put`].
    pub(crate) fn put_at(&mut self, nodes: &[(Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        let items: Vec<(&Prepared, u64)> = nodes.iter().map(|(p, t)| (p, *t)).collect();
        self.store.guard(|| self.load.put(&items))
    }

    /// Commits what is pending.
    ///
    /// # Errors
    /// A store failure.
    pub fn commit(&mut self) -> Result<()> {
        self.store.guard(|| self.load.commit())
    }

    /// Commits what is pending and ends the load.
    ///
    /// # Errors
    /// A store failure.
    pub fn finish(mut self) -> Result<()> {
        self.store.guard(|| self.load.finish())
    }
}

/// Runs a streamed read whose visitor may fail with the caller's error `E`: the visitor's
/// first error stops the read and is returned as it is; the store's own errors are named
/// with the store where they mean damage.
pub(crate) fn streamed<T, E: From<StoreError>>(
    path: &std::path::Path,
    mut f: impl FnMut(T) -> std::result::Result<(), E>,
    read: impl FnOnce(&mut dyn FnMut(T) -> ControlFlow<()>) -> Result<()>,
) -> std::result::Result<(), E> {
    let mut failed: Option<E> = None;
    let r = catching_damage(path, || {
        read(&mut |t| match f(t) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        })
    })
    .map_err(|e| e.located(path));
    match failed {
        Some(e) => Err(e),
        None => r.map_err(E::from),
    }
}

impl Store {
    /// Hashes and checks a payload of type `type_id`: the type must be a stored schema and, when
    /// `validate` is set, the payload must match it.
    ///
    /// # Errors
    /// [`StoreError::UnknownType`], [`StoreError::Schema`].
    pub fn prepare(&self, type_id: NodeId, payload: &Value, validate: bool) -> Result<Prepared> {
        if type_id == META {
            return self.prepare_schema(payload);
        }
        let info = self.type_info(type_id)?;
        if validate {
            info.validator()?.validate(payload, &type_id.to_wire())?;
        }
        let payload_cbor = cbor::encode(payload);
        let id = hash::node_id(type_id, &payload_cbor);
        let refs = refs_in(&info, id, &payload_cbor)?;
        Ok(Prepared {
            id,
            digest: hash::digest(type_id, false, &payload_cbor),
            type_id,
            payload_cbor,
            refs,
        })
    }

    /// Checks a schema against the ocas whitelist and prepares it as a node of the meta type.
    ///
    /// # Errors
    /// [`StoreError::Schema`] naming the offending keyword.
    pub fn prepare_schema(&self, schema: &Value) -> Result<Prepared> {
        schema::check_schema(schema)?;
        Ok(prepare_unchecked(META, schema))
    }

    /// Writes nodes in one transaction. Existing ids with identical bytes are left alone.
    ///
    /// # Errors
    /// [`StoreError::HashCollision`] when an id exists with different bytes (nothing is
    /// written then).
    pub fn put(&self, nodes: &[Prepared], now_ms: u64) -> Result<Vec<PutOutcome>> {
        self.write(|w| w.put(nodes, now_ms))
    }

    /// Writes nodes that carry their own first-write timestamps (import), in one transaction.
    ///
    /// # Errors
    /// As [`Store::put`].
    pub(crate) fn put_at(&self, nodes: &[(Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        self.write(|w| w.put_at(nodes))
    }

    /// A bulk load: puts that share one write transaction, committed every `commit_every`
    /// nodes and at [`Bulk::finish`]. Each random `ids` leaf is then written once per commit
    /// instead of once per batch; other writers wait while a commit is pending.
    pub fn bulk(&self, commit_every: usize) -> Bulk<'_> {
        Bulk {
            store: self,
            load: self.backend.bulk(commit_every),
        }
    }

    /// The node `id`, if stored.
    ///
    /// # Errors
    /// A store failure or a corrupt record.
    pub fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        self.guard(|| self.read()?.get(id))
    }

    /// A read snapshot for many lookups: one read transaction instead of one per
    /// [`Store::get`] (each costs file locks and a header read when several processes share
    /// the file). It sees the store as it was when taken.
    ///
    /// # Errors
    /// A store failure.
    pub fn snapshot(&self) -> Result<Snapshot> {
        Ok(Snapshot {
            tx: self.guard(|| self.read())?,
            path: self.path().to_path_buf(),
        })
    }

    /// Whether `id` is stored.
    ///
    /// # Errors
    /// A store failure.
    pub fn has(&self, id: NodeId) -> Result<bool> {
        self.guard(|| self.read()?.has(id))
    }

    /// Number of stored nodes.
    ///
    /// # Errors
    /// A store failure.
    pub fn node_count(&self) -> Result<u64> {
        self.guard(|| self.read()?.node_count())
    }

    /// Resolves a full id or a unique prefix of 4 or more characters (any case).
    ///
    /// # Errors
    /// [`StoreError::BadId`], [`StoreError::NotFound`], [`StoreError::Ambiguous`].
    pub(crate) fn resolve(&self, input: &str) -> Result<NodeId> {
        self.guard(|| {
            let s = input.trim();
            let bad = || StoreError::BadId(input.to_string());
            if s.len() == ID_LEN {
                return NodeId::parse(s).map_err(|_| bad());
            }
            if s.len() < 4 || s.len() > ID_LEN {
                return Err(bad());
            }
            let mut p: u128 = 0;
            for (i, c) in s.bytes().enumerate() {
                let d = digit_value(c).ok_or_else(bad)?;
                if i == 0 && d >= 16 {
                    return Err(bad());
                }
                p = (p << 5) | u128::from(d);
            }
            let shift = 5 * (ID_LEN - s.len()) as u32;
            let lo = (p << shift) as u64;
            let hi = (((p + 1) << shift) - 1) as u64;
            let found = self.read()?.ids_in(lo, hi)?;
            match found.len() {
                0 => Err(StoreError::NoMatch(input.to_string())),
                1 => Ok(found[0]),
                _ => Err(StoreError::Ambiguous {
                    prefix: input.to_string(),
                    candidates: found,
                }),
            }
        })
    }

    /// The references of node `id`, in schema order, or `None` when `id` is not stored.
    ///
    /// # Errors
    /// A store failure.
    pub fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        self.guard(|| self.read()?.refs(id))
    }

    /// Breadth-first walk from `root`, root first, each node once. Missing nodes are reported
    /// through `visit` as [`WalkEvent::Missing`], never skipped silently, and only when the
    /// node that references them really names them: stored references that do not match the
    /// payload are damage.
    ///
    /// # Errors
    /// A store failure, [`StoreError::Corrupt`] for such a referrer.
    pub fn walk(&self, root: NodeId, mut visit: impl FnMut(WalkEvent)) -> Result<WalkStats> {
        self.guard(|| {
            self.read()?.walk(root, &mut |w| {
                match w {
                    Walked::Found(ids) => ids.iter().for_each(|&id| visit(WalkEvent::Node(id))),
                    Walked::Missing(id, parent) => {
                        if let Some(p) = parent {
                            self.check_refs(p)?;
                        }
                        visit(WalkEvent::Missing(id));
                    }
                }
                Ok(())
            })
        })
    }

    /// Checks that the stored references of node `id` are the ones its payload holds.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when they differ or the payload cannot be read.
    fn check_refs(&self, id: NodeId) -> Result<()> {
        let n = self.get(id)?.ok_or(StoreError::Corrupt(id))?;
        if !n.hashes_to_id() {
            return Err(StoreError::Corrupt(id));
        }
        let stored = self.refs(id)?.ok_or(StoreError::Corrupt(id))?;
        let found = if n.type_id == id || n.type_id == META {
            Vec::new()
        } else {
            match self.type_info(n.type_id) {
                Ok(info) => refs_in(&info, id, &n.payload_cbor)?,
                // A node whose type is not a schema has no references.
                Err(StoreError::UnknownType(_)) => Vec::new(),
                Err(e) => return Err(e),
            }
        };
        if found == stored {
            Ok(())
        } else {
            Err(StoreError::Corrupt(id))
        }
    }

    /// Ids of type `type_id`, in write order.
    ///
    /// # Errors
    /// A store failure.
    pub fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        self.guard(|| self.read()?.list_by_type(type_id))
    }

    /// Visits every stored node in id order, in one read snapshot, streaming.
    ///
    /// # Errors
    /// A store failure, or the first error `f` returns.
    pub fn for_each_node<E: From<StoreError>>(
        &self,
        f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        streamed(self.path(), f, |each| {
            self.read()?.for_each_node(Order::Id, each)
        })
    }

    /// Visits every stored node in write (sequence) order, in one read snapshot, streaming.
    ///
    /// The records are read in the order they lie in the file, each once, where
    /// [`for_each_node`](Self::for_each_node) looks each node up by its id; memory holds
    /// one chunk of nodes whatever the store's size.
    ///
    /// # Errors
    /// A store failure, [`StoreError::Corrupt`] for a node whose payload entry is missing, or
    /// the first error `f` returns.
    pub(crate) fn for_each_node_in_write_order<E: From<StoreError>>(
        &self,
        f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.for_each_node_written_between(0, u64::MAX, f)
    }

    /// The write sequence's high-water mark: every node stored so far has a smaller sequence
    /// number, every node stored later one at least as large. Sequence numbers only grow, so
    /// the nodes written between two marks are those of
    /// [`for_each_node_written_between`](Self::for_each_node_written_between).
    ///
    /// # Errors
    /// A store failure.
    pub fn write_mark(&self) -> Result<u64> {
        self.guard(|| self.read()?.write_mark())
    }

    /// The last node written before the write mark `mark`: its sequence number and id (`None`
    /// when there is none), in one lookup: a cheap fingerprint of the store's write history up
    /// to `mark`.
    ///
    /// # Errors
    /// A store failure, or a record that does not parse.
    pub fn last_written_before(&self, mark: u64) -> Result<Option<(u64, NodeId)>> {
        self.guard(|| self.read()?.last_written_before(mark))
    }

    /// `for_each_node_in_write_order`, restricted to the nodes whose sequence number is in
    /// `from..until` (two [`write_mark`](Self::write_mark)s).
    ///
    /// # Errors
    /// As `for_each_node_in_write_order`.
    pub fn for_each_node_written_between<E: From<StoreError>>(
        &self,
        from: u64,
        until: u64,
        f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        streamed(self.path(), f, |each| {
            self.read()?
                .for_each_node(Order::Written { from, until }, each)
        })
    }
}
