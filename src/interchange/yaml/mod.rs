//! The flat `name → string` YAML maps of the storage root (`threads.yaml`, `workflows.yaml`,
//! `registry.yaml`), written exactly as the npm `yaml` 2.x package's
//! `stringify(obj, {indent: 2})` writes them, and read under the YAML 1.2 core schema; and any
//! value written as that package's `stringify` writes it (`--format yaml`).
//!
//! The writer (`write`) is a port of the scalar rules of `yaml` 2.9 (`stringifyString.js`,
//! `foldFlowLines.js`, `stringifyPair.js`: `scalar`) restricted to block maps and sequences:
//! plain scalars where they read back as the same string, otherwise single- or double-quoted
//! (or a block scalar for a multi-line value), lines folded at 80 columns. Lengths are counted
//! in UTF-16 code units, as JavaScript counts them. `tests/fixtures/interchange/yaml_quoting.json`
//! holds the reference outputs of the real package. The reader is `read`.

mod read;
mod scalar;
mod write;

pub use read::{SkippedEntry, StringMap, YamlError, read_string_map};
pub use write::{stringify_value, write_string_map};
