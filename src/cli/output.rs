//! Printing data: compact JSON (`JSON.stringify`) or YAML, one document per command.

use super::{CliError, CliResult};
use crate::cas::{NodeId, Value};
use serde::{Serialize, Serializer};
use std::io::Write;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Compact JSON on one line.
    Json,
    /// YAML.
    Yaml,
}

/// Prints `v` to stdout in `format`. A closed pipe ends quietly.
///
/// # Errors
/// An I/O error other than a broken pipe.
pub(crate) fn print(format: Format, v: &Value) -> CliResult {
    let text = match format {
        Format::Json => {
            let mut s = v.to_json();
            s.push('\n');
            s
        }
        Format::Yaml => {
            // `yaml.stringify(data).trimEnd()` and a newline, as the TypeScript tool prints.
            let s = crate::interchange::yaml::stringify_value(v);
            format!("{}\n", s.trim_end())
        }
    };
    write_stdout(text.as_bytes())
}

/// Writes raw bytes to stdout; a closed pipe ends quietly.
///
/// # Errors
/// An I/O error other than a broken pipe.
pub(crate) fn write_stdout(b: &[u8]) -> CliResult {
    let mut out = std::io::stdout().lock();
    match out.write_all(b).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError {
            quiet: true,
            ..CliError::new("")
        }),
        Err(e) => Err(e.into()),
    }
}

/// Prints a command's output struct to stdout in `format`, through [`Value`]: the same
/// JavaScript number rules and key order as any payload.
///
/// # Errors
/// An I/O error other than a broken pipe.
pub(crate) fn print_as<T: Serialize>(format: Format, v: &T) -> CliResult {
    print(format, &to_value(v))
}

/// `v` as a [`Value`]: fields in declaration order, numbers as doubles.
pub(crate) fn to_value<T: Serialize>(v: &T) -> Value {
    // serde_json keeps the field order (`preserve_order`), and `from_serde_json` applies the
    // number rule. An output struct has string keys and plain data only.
    let j = serde_json::to_value(v).expect("an output struct has string keys");
    Value::from_serde_json(&j)
}

/// A node id printed as its 13 Crockford characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeIdStr(pub NodeId);

impl Serialize for NodeIdStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_wire())
    }
}
