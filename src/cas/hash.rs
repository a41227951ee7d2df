//! The content hash: `XXH64_seed0(ASCII(type id) ‖ CBOR_det(payload))`, and the BLAKE3 digest
//! kept beside it to detect XXH64 collisions.

use super::id::NodeId;
use std::hash::Hasher;
use twox_hash::XxHash64;

/// The id of a node of type `type_id` whose canonical payload is `payload_cbor`.
#[inline]
pub fn node_id(type_id: NodeId, payload_cbor: &[u8]) -> NodeId {
    let mut h = XxHash64::with_seed(0);
    h.write(&type_id.to_chars());
    h.write(payload_cbor);
    NodeId(h.finish())
}

/// The id of a self-typed node (the meta-schema): the hash of its payload alone.
#[inline]
pub fn self_id(payload_cbor: &[u8]) -> NodeId {
    NodeId(XxHash64::oneshot(0, payload_cbor))
}

/// The id of a node of type `type_id`, or of a self-typed node (the meta-schema, whose type is
/// its own id) when `self_typed`.
#[inline]
pub(crate) fn id_for(type_id: NodeId, self_typed: bool, payload_cbor: &[u8]) -> NodeId {
    if self_typed {
        self_id(payload_cbor)
    } else {
        node_id(type_id, payload_cbor)
    }
}

/// BLAKE3 of the same bytes the id hashes (`type id ‖ payload`, or the payload alone for a
/// self-typed node).
pub(crate) fn digest(type_id: NodeId, self_typed: bool, payload_cbor: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    if !self_typed {
        h.update(&type_id.to_chars());
    }
    h.update(payload_cbor);
    *h.finalize().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input() {
        assert_eq!(self_id(b"").to_string(), "EYHPV6X8XHTCS");
    }
}
