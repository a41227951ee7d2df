//! uwf: a stateless workflow engine for AI agents on an embedded content-addressed store.
//!
//! ```
//! use uwf::cas::{cbor, hash, bootstrap, Value};
//! let payload = Value::from_json_str("\"hello\"").unwrap();
//! let text = bootstrap::by_name("@ocas/string").unwrap().id;
//! assert_eq!(hash::node_id(text, &cbor::encode(&payload)).to_string(), "95ST8MZ0QTKP9");
//! ```

pub mod agent;
pub(crate) mod builtin;
pub mod cas;
pub mod cli;
pub mod engine;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod interchange;
pub mod llm;
pub(crate) mod logs;
pub(crate) mod mcp;
pub mod model;
pub(crate) mod proc;
pub(crate) mod query;
pub(crate) mod runner;
pub(crate) mod serve;
pub mod store;
pub(crate) mod supervise;
pub mod thread;
pub(crate) mod time;
pub(crate) mod traces;
pub mod workflow;

pub use error::ErrorKind;
