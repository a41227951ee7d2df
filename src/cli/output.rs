//! Printing data: compact JSON (`JSON.stringify`) or YAML, one document per command.

pub(crate) use crate::query::output::{NodeIdStr, json_line, to_value};

use crate::cas::Value;
use crate::query::error::{CliError, CliResult};
use serde::Serialize;
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
    match format {
        Format::Json => write_stdout(&json_line(v)?),
        Format::Yaml => print(format, &to_value(v)),
    }
}
