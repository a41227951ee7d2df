//! Structured logs: every uwf process appends its events to `<root>/logs/YYYY-MM-DD.jsonl`, one
//! JSON object a line in the TypeScript tool's shape: `ts` (ISO), `pid` (`"<ms>-<pid>"`, the
//! process's start and its id), `tag` (8 Crockford characters, one per call site, so a grep
//! finds the code), `level`, `msg`, then `thread`, `workflow` and the event's other fields.
//!
//! Events are `tracing` events; [`install`] sets up the process's subscriber once: a layer that
//! writes the file (info and above) and, when asked (`-v`, `UWF_LOG`), human lines on stderr.
//! Lines reach the file whole, in one `write` of one or more complete lines on a descriptor
//! opened for appending, so lines of many processes never interleave; a process keeps at most
//! 50 ms or 32 KiB of lines before writing them, and writes what it holds when it ends. A file is named by the UTC date of its events; the process
//! that creates a day's file removes the files older than the retention (`logs.keepDays`).
//! Every value registered with [`mask`] (API keys, `.env` values) is replaced by `***` in every
//! line, in the file and on stderr.

use serde_json::{Map, Value};
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// The logs' directory under the root.
pub(crate) const DIR: &str = "logs";
/// The tag of a process's first line (the TypeScript tool's own).
pub(crate) const START_TAG: &str = "W9F3RK2M";
/// Secrets shorter than this are not masked: they would mask common words and numbers.
const MIN_SECRET: usize = 6;

/// Where a process's events go.
pub(crate) struct Sink {
    /// `<root>/logs`.
    pub dir: PathBuf,
    /// `"<ms>-<pid>"`.
    pub pid: Arc<str>,
    /// The clock, ms since the epoch.
    pub clock: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Days a file is kept (0: for ever); asked only when a day's file is created.
    pub keep_days: Box<dyn Fn() -> u32 + Send + Sync>,
}

/// The open file of the current day.
struct Open {
    sink: Sink,
    /// The UTC day of the open file, days since 1970-01-01.
    day: u64,
    file: Option<File>,
    /// Complete lines not written yet.
    buf: Vec<u8>,
    /// When lines were last written (`None`: never).
    flushed: Option<std::time::Instant>,
}

/// The most bytes of lines kept before they are written.
const BUF_BYTES: usize = 32 << 10;
/// The longest lines are kept before they are written.
const BUF_TIME: std::time::Duration = std::time::Duration::from_millis(50);

impl Drop for Open {
    fn drop(&mut self) {
        self.flush();
    }
}

static OPEN: Mutex<Option<Open>> = Mutex::new(None);
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());
static INSTALLED: OnceLock<()> = OnceLock::new();

/// Masks `secret` in every later line (values shorter than 6 characters are left alone).
pub(crate) fn mask(secret: &str) {
    let s = secret.trim();
    if s.chars().count() < MIN_SECRET {
        return;
    }
    let mut all = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    if !all.iter().any(|x| x == s) {
        all.push(s.to_string());
        // Longest first, so a secret that contains another is masked whole.
        all.sort_by_key(|x| std::cmp::Reverse(x.len()));
    }
}

/// `line` with every registered secret, and its JSON-escaped form, replaced by `***`.
fn masked(mut line: String) -> String {
    let all = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    for s in all.iter() {
        if line.contains(s.as_str()) {
            line = line.replace(s.as_str(), "***");
        }
        let quoted = serde_json::to_string(s).unwrap_or_default();
        if let Some(escaped) = quoted.get(1..quoted.len().saturating_sub(1))
            && escaped != s
            && !escaped.is_empty()
            && line.contains(escaped)
        {
            line = line.replace(escaped, "***");
        }
    }
    line
}

/// Installs the process's subscriber (once) and sends its events to `sink` (replacing an
/// earlier sink); `stderr` is the filter of the human lines on stderr, if any.
pub(crate) fn install(sink: Option<Sink>, stderr: Option<tracing_subscriber::filter::Targets>) {
    *OPEN.lock().unwrap_or_else(|e| e.into_inner()) = sink.map(|sink| Open {
        sink,
        day: 0,
        file: None,
        buf: Vec::new(),
        flushed: None,
    });
    INSTALLED.get_or_init(|| {
        let file = FileLayer.with_filter(tracing_subscriber::filter::LevelFilter::INFO);
        let human = stderr.map(|targets| {
            tracing_subscriber::fmt::layer()
                .with_writer(|| MaskedStderr)
                .with_target(false)
                .with_filter(targets)
        });
        let subscriber = tracing_subscriber::registry().with(file).with(human);
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Writes the lines held and stops writing events (the rest of the process logs nothing).
pub(crate) fn close() {
    *OPEN.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// stderr, with secrets masked.
struct MaskedStderr;

impl Write for MaskedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = masked(String::from_utf8_lossy(buf).into_owned());
        std::io::stderr().lock().write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Writes each event as one line of the day's file.
struct FileLayer;

impl<S: Subscriber> Layer<S> for FileLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        // The line is made outside the lock; only its append is under it.
        let (pid, clock) = match OPEN.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(o) => (o.sink.pid.clone(), o.sink.clock.clone()),
            None => return,
        };
        let now = clock();
        let mut line = Vec::with_capacity(256 + f.extra.len());
        line.extend_from_slice(b"{\"ts\":\"");
        let mut ts = String::with_capacity(24);
        crate::time::push_iso(now, &mut ts);
        line.extend_from_slice(ts.as_bytes());
        line.extend_from_slice(b"\",\"pid\":");
        json_str(&mut line, &pid);
        line.extend_from_slice(b",\"tag\":");
        json_str(&mut line, f.tag.as_deref().unwrap_or_default());
        line.extend_from_slice(b",\"level\":\"");
        line.extend_from_slice(level_name(*event.metadata().level()).as_bytes());
        line.extend_from_slice(b"\",\"msg\":");
        json_str(&mut line, &f.msg);
        for (k, v) in [("thread", &f.thread), ("workflow", &f.workflow)] {
            if let Some(v) = v {
                line.extend_from_slice(b",\"");
                line.extend_from_slice(k.as_bytes());
                line.extend_from_slice(b"\":");
                json_str(&mut line, v);
            }
        }
        line.extend_from_slice(&f.extra);
        line.extend_from_slice(b"}\n");
        let line = masked_bytes(line);
        if let Some(open) = OPEN.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            open.write(now, &line);
        }
    }
}

/// [`masked`] of a line of bytes, without a copy when no secret is registered.
fn masked_bytes(line: Vec<u8>) -> Vec<u8> {
    if SECRETS.read().unwrap_or_else(|e| e.into_inner()).is_empty() {
        return line;
    }
    masked(String::from_utf8_lossy(&line).into_owned()).into_bytes()
}

/// `s` as a JSON string.
fn json_str(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(out, s);
}

impl Open {
    /// Appends `line` to the file of `now`'s date, opening (and on a new day creating) it.
    /// Adds `line` for the file of `now`'s date, and writes the lines held when there are
    /// enough of them, when they have waited long enough, or when the day changed.
    fn write(&mut self, now: u64, line: &[u8]) {
        let day = now / 86_400_000;
        if day != self.day || self.file.is_none() {
            let date = crate::time::utc_date(now);
            self.flush();
            self.file = self.open(&date, now);
            self.day = day;
        }
        self.buf.extend_from_slice(line);
        if self.buf.len() >= BUF_BYTES || self.flushed.is_none_or(|t| t.elapsed() >= BUF_TIME) {
            self.flush();
        }
    }

    /// Writes the lines held, in one `write`.
    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Some(f) = &mut self.file
            && f.write_all(&self.buf).is_err()
        {
            self.file = None;
        }
        self.buf.clear();
        self.flushed = Some(std::time::Instant::now());
    }

    fn open(&self, date: &str, now: u64) -> Option<File> {
        let path = self.sink.dir.join(format!("{date}.jsonl"));
        let create = || OpenOptions::new().append(true).create_new(true).open(&path);
        let created = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.sink.dir).ok()?;
                create()
            }
            r => r,
        };
        match created {
            Ok(f) => {
                remove_old(&self.sink.dir, (self.sink.keep_days)(), now);
                Some(f)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                OpenOptions::new().append(true).open(&path).ok()
            }
            Err(_) => None,
        }
    }
}

/// Removes the day files of `dir` older than `keep_days` before `now` (none with 0).
fn remove_old(dir: &Path, keep_days: u32, now: u64) {
    if keep_days == 0 {
        return;
    }
    let cutoff = crate::time::utc_date(now.saturating_sub(u64::from(keep_days) * 86_400_000));
    for f in files(dir) {
        if f.date < cutoff {
            let _ = std::fs::remove_file(dir.join(&f.name));
        }
    }
}

fn level_name(l: Level) -> &'static str {
    match l {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// The rank of a level name (`trace` 0 … `error` 4); a line without one is `info`.
pub(crate) fn level_rank(name: &str) -> Option<u8> {
    Some(match name {
        "trace" => 0,
        "debug" => 1,
        "info" => 2,
        "warn" | "warning" => 3,
        "error" => 4,
        _ => return None,
    })
}

/// An event's fields, sorted into the line's keys.
#[derive(Default)]
struct Fields {
    msg: String,
    tag: Option<String>,
    thread: Option<String>,
    workflow: Option<String>,
    /// The other fields, written as they come: `,"name":value` each.
    extra: Vec<u8>,
}

impl Fields {
    /// A field whose value is JSON `json` (written by `serde_json`), or the text `text` of a
    /// string.
    fn put(&mut self, field: &Field, text: Option<String>, json: impl Fn(&mut Vec<u8>)) {
        let as_text = |text: Option<String>| {
            text.unwrap_or_else(|| {
                let mut b = Vec::new();
                json(&mut b);
                String::from_utf8(b).unwrap_or_default()
            })
        };
        match field.name() {
            "message" => self.msg = as_text(text),
            "tag" => self.tag = Some(as_text(text)),
            "thread" => self.thread = Some(as_text(text)),
            "workflow" => self.workflow = Some(as_text(text)),
            name => {
                self.extra.push(b',');
                json_str(&mut self.extra, name);
                self.extra.push(b':');
                match text {
                    Some(t) => json_str(&mut self.extra, &t),
                    None => json(&mut self.extra),
                }
            }
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.put(field, Some(format!("{value:?}")), |_| {});
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Some(value.to_string()), |_| {});
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, None, |b| drop(serde_json::to_writer(b, &value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, None, |b| drop(serde_json::to_writer(b, &value)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        // As a JSON value writes it: `null` for what JSON has no number for.
        self.put(field, None, |b| {
            drop(serde_json::to_writer(b, &Value::from(value)))
        });
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, None, |b| drop(serde_json::to_writer(b, &value)));
    }
}

/// A day's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogFile {
    /// `YYYY-MM-DD.jsonl`.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// `YYYY-MM-DD`.
    pub date: String,
}

/// The `*.jsonl` files of `dir`, newest date first (none when it does not exist).
pub(crate) fn files(dir: &Path) -> Vec<LogFile> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<LogFile> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let date = name.strip_suffix(".jsonl")?.to_string();
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            Some(LogFile {
                name,
                size: meta.len(),
                date,
            })
        })
        .collect();
    out.sort_by(|a, b| b.date.cmp(&a.date));
    out
}

/// The entries of the complete lines of `text` (lines that are not JSON objects are skipped;
/// so is a last line without its newline, which a writer may still be appending).
pub(crate) fn parse_lines(text: &str) -> Vec<Map<String, Value>> {
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete
        .lines()
        .filter_map(|l| match serde_json::from_str::<Value>(l) {
            Ok(Value::Object(o)) => Some(o),
            _ => None,
        })
        .collect()
}

/// The newest `limit` entries about `thread` in the files of `dir`, oldest first (the files
/// are read newest first, and only lines that name the thread are parsed).
pub(crate) fn thread_events(dir: &Path, thread: &str, limit: usize) -> Vec<Map<String, Value>> {
    let needle = format!("\"thread\":\"{thread}\"");
    let mut out = Vec::new();
    for f in files(dir) {
        let Ok(text) = std::fs::read_to_string(dir.join(&f.name)) else {
            continue;
        };
        let mut day: Vec<Map<String, Value>> = parse_lines(
            &text
                .lines()
                .filter(|l| l.contains(&needle))
                .map(|l| format!("{l}\n"))
                .collect::<String>(),
        );
        day.sort_by(|a, b| ts(b).cmp(ts(a)));
        out.extend(day);
        if out.len() >= limit {
            break;
        }
    }
    out.truncate(limit);
    out.reverse();
    out
}

/// An entry's `ts` (empty when it has none).
pub(crate) fn ts(e: &Map<String, Value>) -> &str {
    e.get("ts").and_then(Value::as_str).unwrap_or_default()
}

/// `argv` for a log line: the value after an option named like a secret (`--api-key X`,
/// `--token=X`) and the value of `config set <key> <value>` for such a key become `***`.
pub(crate) fn masked_argv(argv: &[String]) -> Vec<String> {
    let secret_name = |s: &str| {
        let s = s.to_ascii_lowercase();
        ["key", "token", "secret", "password"]
            .iter()
            .any(|w| s.contains(w))
    };
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for (i, a) in argv.iter().enumerate() {
        if hide_next {
            out.push("***".to_string());
            hide_next = false;
            continue;
        }
        if let Some(opt) = a.strip_prefix("--") {
            match opt.split_once('=') {
                Some((name, _)) if secret_name(name) => {
                    out.push(format!("--{name}=***"));
                    continue;
                }
                None if secret_name(opt) => hide_next = true,
                _ => {}
            }
        }
        // `config set <key> <value>`.
        if i >= 2
            && argv[i - 2] == "set"
            && argv[..i - 2].iter().any(|x| x == "config")
            && secret_name(&argv[i - 1])
        {
            out.push("***".to_string());
            continue;
        }
        out.push(a.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_secrets_are_hidden() {
        let a = |v: &[&str]| masked_argv(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&["uwf", "setup", "--api-key", "sk-1", "--model", "m"]),
            ["uwf", "setup", "--api-key", "***", "--model", "m"]
        );
        assert_eq!(a(&["uwf", "x", "--token=abc"]), ["uwf", "x", "--token=***"]);
        assert_eq!(
            a(&["uwf", "config", "set", "providers.o.apiKey", "sk-2"]),
            ["uwf", "config", "set", "providers.o.apiKey", "***"]
        );
        assert_eq!(
            a(&["uwf", "config", "set", "models.m.name", "gpt"]),
            ["uwf", "config", "set", "models.m.name", "gpt"]
        );
    }

    #[test]
    fn secrets_are_masked_raw_and_escaped() {
        mask("s3cr\"et-value");
        mask("abc");
        let line = Value::String("x s3cr\"et-value y abc".into()).to_string();
        assert_eq!(masked(line), "\"x *** y abc\"");
    }

    #[test]
    fn only_complete_object_lines_parse() {
        let e = parse_lines("{\"a\":1}\nnot json\n[1]\n{\"b\":2}\n{\"c\":");
        assert_eq!(e.len(), 2);
        assert_eq!(e[1]["b"], 2);
    }
}
