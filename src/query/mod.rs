//! The answers that the CLI and the web view share: "thread show", "thread list", "thread
//! steps", "workflow list", "workflow show", "workflow history", "usage", "limits list", "ps"
//! and the runner's dashboard ("ps --stats"), with their output structs (the
//! bytes of `--format json` and of the web view's API), the running markers of background runs,
//! and the error an answer fails with.

pub(crate) mod error;
pub(crate) mod limits;
pub(crate) mod output;
pub(crate) mod running;
pub(crate) mod runs;
pub(crate) mod thread;
pub(crate) mod usage;
pub(crate) mod workflow;
