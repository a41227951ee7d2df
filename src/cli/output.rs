//! Printing data: compact JSON (`JSON.stringify`) or YAML, one document per command.

use super::{CliError, CliResult};
use crate::cas::Value;
use std::io::Write;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Compact JSON on one line.
    Json,
    /// YAML.
    Yaml,
}

/// Prints `v` to stdout in `format`. A closed pipe ends quietly.
///
/// # Errors
/// An I/O error other than a broken pipe.
pub fn print(format: Format, v: &Value) -> CliResult {
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
pub fn write_stdout(b: &[u8]) -> CliResult {
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

/// Builds an object value from pairs.
pub fn obj<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
