//! The domain's plain values, at the bottom of the crate: thread ids, node ids as records wrote
//! them, how a thread ends and the states it goes through, and the ids of the built-in node types. The store, the workflow
//! layer and everything above name them from here; nothing here does I/O or imports a layer
//! above `cas`.

mod finish;
mod id_text;
mod thread_id;
pub mod types;

pub use finish::{FinishReason, ThreadStatus};
pub use id_text::IdText;
pub use thread_id::ThreadId;
pub(crate) use thread_id::time_of;
