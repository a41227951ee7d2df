//! The agent kit's pure parts: reading an agent's output (the frontmatter fast path), the
//! output-format instruction agents are given, the prompt of a step, the model extract request,
//! and the scripted agent's script.

pub mod context;
pub mod extract;
pub mod fields;
pub mod frontmatter;
pub mod instruction;
pub mod prompt;
pub mod script;

pub use context::agent_context;
pub use fields::{SchemaField, schema_fields};
pub use frontmatter::{FastPath, FastPathError, fast_path};
pub use instruction::output_format_instruction;
pub use script::{Reply, Script, ScriptError};
