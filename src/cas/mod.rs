//! The content-addressed model, pure: ids, canonical CBOR, hashing, schemas and references.
//! Nothing here does I/O.

pub mod bootstrap;
pub mod cbor;
pub mod hash;
pub mod id;
mod pattern;
pub mod refplan;
pub mod schema;
pub mod value;

pub use id::NodeId;
pub use value::Value;
