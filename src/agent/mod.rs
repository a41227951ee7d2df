//! The agent kit's pure parts: reading an agent's output (the frontmatter fast path), the
//! output-format instruction agents are given, the prompt of a step, the model extract request,
//! and the scripted agent's script.

pub(crate) mod context;
pub mod extract;
pub(crate) mod fields;
pub(crate) mod frontmatter;
pub(crate) mod instruction;
pub(crate) mod prompt;
pub(crate) mod script;

pub(crate) use context::agent_context;
pub use frontmatter::{FastPath, FastPathError, fast_path, fast_path_with};
pub use script::{Reply, Script, ScriptError};
