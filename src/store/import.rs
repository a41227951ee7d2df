//! Helpers for moving nodes in in bulk: nodes whose id was computed elsewhere, and whether a
//! type is a stored schema.

use super::error::{Result, StoreError};
use super::handle::Store;
use super::node::{Prepared, refs_in};
use super::nodes::streamed;
use crate::cas::NodeId;
use crate::cas::bootstrap::META;

impl Store {
    /// Prepares a node read from outside (an import) whose id and BLAKE3 `digest` the caller
    /// has computed from `payload_cbor` (canonical CBOR): finds its references. The type must
    /// be a stored schema unless the node is the meta-schema or a schema itself.
    ///
    /// # Errors
    /// [`StoreError::UnknownType`] when the type is not a stored schema,
    /// [`StoreError::Corrupt`] when `payload_cbor` does not decode, [`StoreError::Schema`] when
    /// the type's schema has a pattern its reference plan cannot compile.
    pub(crate) fn prepare_imported(
        &self,
        id: NodeId,
        type_id: NodeId,
        payload_cbor: Vec<u8>,
        digest: [u8; 32],
    ) -> Result<Prepared> {
        let self_typed = type_id == id;
        let refs = if self_typed || type_id == META {
            Vec::new()
        } else {
            let info = self.type_info(type_id)?;
            refs_in(&info, id, &payload_cbor)?
        };
        Ok(Prepared {
            id,
            type_id,
            digest,
            payload_cbor,
            refs,
        })
    }

    /// Prepares a node read from outside whose type is not a schema, unvalidated and with no
    /// references (nothing says which of its strings are ids): the TypeScript tool stores nodes
    /// of any type, and an import keeps everything it kept. `verify` lists such nodes as
    /// warnings; if their type is imported as a schema later, `reindex` finds their references.
    pub(crate) fn prepare_untyped(
        &self,
        id: NodeId,
        type_id: NodeId,
        payload_cbor: Vec<u8>,
        digest: [u8; 32],
    ) -> Prepared {
        Prepared {
            id,
            type_id,
            digest,
            payload_cbor,
            refs: Vec::new(),
        }
    }

    /// Whether `type_id` is a stored schema (or the meta-schema).
    ///
    /// # Errors
    /// A redb failure.
    pub(crate) fn is_schema(&self, type_id: NodeId) -> Result<bool> {
        match self.type_info(type_id) {
            Ok(_) => Ok(true),
            Err(StoreError::UnknownType(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Visits the type index: every (type, id) in type order, then write order.
    ///
    /// # Errors
    /// A redb failure, or the first error of `f`.
    pub(crate) fn for_each_indexed<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(NodeId, NodeId) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        streamed(
            self.path(),
            |(t, id)| f(t, id),
            |each| self.read()?.for_each_indexed(each),
        )
    }
}
