//! `uwf log list|show|clean`: the structured logs of `<root>/logs/` (see [`crate::logs`]).

use super::output::{print_as, write_stdout};
use super::{CliError, CliResult, Env};
use crate::logs::{self, LogFile};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

/// `uwf log …`.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum LogCmd {
    /// The log files, newest first: `[{"name","size","date"}]`.
    List,
    /// Log entries, oldest first.
    Show(ShowArgs),
    /// Delete the files of the days before DATE: `{"deleted":n}`.
    Clean {
        /// `YYYY-MM-DD`; files whose date is earlier are deleted.
        #[arg(long, value_name = "DATE")]
        before: String,
    },
}

// `uwf log show`.
#[derive(Args, Debug)]
pub(crate) struct ShowArgs {
    /// Only the events of this thread.
    #[arg(long, value_name = "ID")]
    thread: Option<String>,
    /// Only the events of this process: its `pid` field (`<ms>-<pid>`) or its process id.
    #[arg(long, value_name = "PID")]
    process: Option<String>,
    /// Only the file of this day (`YYYY-MM-DD`).
    #[arg(long, value_name = "DATE")]
    date: Option<String>,
    /// Only events since this time: `1h`, `30m`, `7d` ago, or an ISO date or time.
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Only events of this level or worse (trace, debug, info, warn, error).
    #[arg(long, value_name = "LEVEL")]
    level: Option<String>,
    /// Print the entries, then each new one as it is written, until interrupted.
    #[arg(short, long)]
    follow: bool,
    /// JSON even on a terminal (where entries are otherwise printed as readable lines; piped,
    /// or with `--format`, they are JSON).
    #[arg(long)]
    json: bool,
}

/// A line of `log list`.
#[derive(Serialize)]
struct FileOut<'a> {
    name: &'a str,
    size: u64,
    date: &'a str,
}

/// `log clean`'s output.
#[derive(Serialize)]
struct CleanOut {
    deleted: usize,
}

/// Runs a `log` subcommand.
pub(crate) fn run(cmd: LogCmd, env: &Env) -> CliResult {
    match cmd {
        LogCmd::List => cmd_list(env),
        LogCmd::Show(a) => cmd_show(env, &a),
        LogCmd::Clean { before } => cmd_clean(env, &before),
    }
}

fn dir(env: &Env) -> PathBuf {
    env.root.join(logs::DIR)
}

fn cmd_list(env: &Env) -> CliResult {
    let files = logs::files(&dir(env));
    let out: Vec<FileOut<'_>> = files
        .iter()
        .map(|f| FileOut {
            name: &f.name,
            size: f.size,
            date: &f.date,
        })
        .collect();
    print_as(env.format, &out)
}

fn cmd_clean(env: &Env, before: &str) -> CliResult {
    let dir = dir(env);
    let mut deleted = 0;
    for f in logs::files(&dir) {
        if f.date.as_str() < before {
            std::fs::remove_file(dir.join(&f.name))
                .map_err(|e| CliError::new(format!("cannot delete {}: {e}", f.name)))?;
            deleted += 1;
        }
    }
    print_as(env.format, &CleanOut { deleted })
}

/// What `log show` keeps.
struct Filter {
    thread: Option<String>,
    process: Option<String>,
    since: Option<String>,
    level: Option<u8>,
}

impl Filter {
    fn new(env: &Env, a: &ShowArgs) -> CliResult<Filter> {
        let since = a
            .since
            .as_deref()
            .map(|s| crate::thread::time::parse_time(s, env.clock()))
            .transpose()?
            .map(crate::thread::time::format_iso);
        let level = a
            .level
            .as_deref()
            .map(|l| {
                logs::level_rank(&l.to_ascii_lowercase()).ok_or_else(|| {
                    CliError::new(format!(
                        "invalid --level: {l} (trace, debug, info, warn or error)"
                    ))
                })
            })
            .transpose()?;
        Ok(Filter {
            thread: a.thread.as_ref().map(|t| t.trim().to_ascii_uppercase()),
            process: a.process.clone(),
            since,
            level,
        })
    }

    fn keeps(&self, e: &Map<String, Value>) -> bool {
        let s = |k: &str| e.get(k).and_then(Value::as_str);
        if let Some(t) = &self.thread
            && s("thread").map(str::to_ascii_uppercase).as_deref() != Some(t.as_str())
        {
            return false;
        }
        if let Some(p) = &self.process {
            let pid = s("pid").unwrap_or_default();
            if pid != p && pid.rsplit('-').next() != Some(p.as_str()) {
                return false;
            }
        }
        if let Some(since) = &self.since
            && s("ts").is_none_or(|ts| ts < since.as_str())
        {
            return false;
        }
        if let Some(min) = self.level
            && logs::level_rank(s("level").unwrap_or("info")).unwrap_or(2) < min
        {
            return false;
        }
        true
    }

    /// Whether a file of `date` can hold kept entries.
    fn reads(&self, f: &LogFile, date: Option<&str>) -> bool {
        match (date, &self.since) {
            (Some(d), _) => f.date == d,
            (None, Some(since)) => f.date.as_str() >= &since[..10.min(since.len())],
            (None, None) => true,
        }
    }
}

fn cmd_show(env: &Env, a: &ShowArgs) -> CliResult {
    let filter = Filter::new(env, a)?;
    let dir = dir(env);
    let mut offsets: HashMap<String, u64> = HashMap::new();
    let mut entries = Vec::new();
    for f in logs::files(&dir)
        .iter()
        .filter(|f| filter.reads(f, a.date.as_deref()))
    {
        let (text, consumed) = read_from(&dir.join(&f.name), 0)?;
        offsets.insert(f.name.clone(), consumed);
        entries.extend(
            logs::parse_lines(&text)
                .into_iter()
                .filter(|e| filter.keeps(e)),
        );
    }
    entries.sort_by(|x, y| logs::ts(x).cmp(logs::ts(y)));
    let readable = !a.json
        && env.explicit_format.is_none()
        && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let emit = |e: &Map<String, Value>| {
        if readable {
            write_stdout(readable_line(e).as_bytes())
        } else {
            print_line(e)
        }
    };
    if !a.follow && !readable {
        return print_as(env.format, &entries);
    }
    for e in &entries {
        emit(e)?;
    }
    if !a.follow {
        return Ok(());
    }
    loop {
        std::thread::sleep(Duration::from_millis(200));
        for f in logs::files(&dir)
            .iter()
            .rev()
            .filter(|f| filter.reads(f, a.date.as_deref()))
        {
            let from = offsets.get(&f.name).copied().unwrap_or(0);
            if f.size <= from {
                continue;
            }
            let (text, consumed) = read_from(&dir.join(&f.name), from)?;
            offsets.insert(f.name.clone(), from + consumed);
            for e in logs::parse_lines(&text)
                .into_iter()
                .filter(|e| filter.keeps(e))
            {
                emit(&e)?;
            }
        }
    }
}

/// One entry as a line for people: time, level, message, then the other fields as `key=value`
/// and the process last (`tag` is left out).
fn readable_line(e: &Map<String, Value>) -> String {
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
    let ts = s("ts").replacen('T', " ", 1);
    let level = e.get("level").and_then(Value::as_str).unwrap_or("info");
    let mut line = format!(
        "{} {:<5} {}",
        ts.trim_end_matches('Z'),
        level.to_ascii_uppercase(),
        s("msg")
    );
    let skip = ["ts", "pid", "tag", "level", "msg"];
    for (k, v) in e.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
        let v = match v {
            Value::String(t) if !t.is_empty() && !t.contains(char::is_whitespace) => t.clone(),
            v => v.to_string(),
        };
        line.push_str(&format!(" {k}={v}"));
    }
    line.push_str(&format!(" pid={}\n", s("pid")));
    line
}

/// One entry as a JSON line (`--follow`).
fn print_line(e: &Map<String, Value>) -> CliResult {
    let mut line = Value::Object(e.clone()).to_string();
    line.push('\n');
    write_stdout(line.as_bytes())
}

/// The text of `path` from byte `from` up to its last complete line, and that text's length.
fn read_from(path: &std::path::Path, from: u64) -> CliResult<(String, u64)> {
    let mut f = std::fs::File::open(path)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
    f.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(end);
    Ok((String::from_utf8_lossy(&bytes).into_owned(), end as u64))
}
