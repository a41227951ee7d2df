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
use tracing::level_filters::LevelFilter;
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
/// The least severe events the file holds.
const FILE_LEVEL: LevelFilter = LevelFilter::INFO;
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

/// Whether an environment variable named `name` holds a secret: its name contains `KEY`,
/// `TOKEN`, `SECRET` or `PASSWORD`, in any case.
pub(crate) fn secret_name(name: &[u8]) -> bool {
    // One pass: each word is tried only where its first letter stands.
    (0..name.len()).any(|i| {
        let word: &[u8] = match name[i].to_ascii_uppercase() {
            b'K' => b"KEY",
            b'T' => b"TOKEN",
            b'S' => b"SECRET",
            b'P' => b"PASSWORD",
            _ => return false,
        };
        name[i..]
            .get(..word.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(word))
    })
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
        let Some(targets) = stderr else {
            // The file alone needs no span registry (uwf makes no spans).
            let _ = tracing::subscriber::set_global_default(FileOnly);
            return;
        };
        let file = FileLayer.with_filter(FILE_LEVEL);
        let human = tracing_subscriber::fmt::layer()
            .with_writer(|| MaskedStderr)
            .with_target(false)
            .with_filter(targets);
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
        file_line(event);
    }
}

/// The subscriber of a process that logs to its file only: [`FileLayer`]'s lines for the
/// events at info and above; a span is given one id and recorded nowhere.
struct FileOnly;

impl Subscriber for FileOnly {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        FILE_LEVEL >= *metadata.level()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(FILE_LEVEL)
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &Event<'_>) {
        file_line(event);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// Appends `event`'s line to the day's file (nothing once [`close`]d or with no sink).
fn file_line(event: &Event<'_>) {
    // The line is made outside the lock, in buffers the thread keeps from line to line;
    // only its append is under the lock.
    let Some((pid, clock)) = OPEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|o| (o.sink.pid.clone(), o.sink.clock.clone()))
    else {
        return;
    };
    let now = clock();
    let append = |s: &mut Scratch| {
        s.make_line(event, &pid, now);
        let masked = masked_bytes(&s.line);
        if let Some(open) = OPEN.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            open.write(now, masked.as_deref().unwrap_or(&s.line));
        }
    };
    // An event recorded while the thread's buffers are in use or dropped (at its end) gets
    // buffers of its own.
    let kept = SCRATCH.try_with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut s) => {
            append(&mut s);
            // A thread keeps no more than a usual line's buffers.
            if s.line.capacity() > SCRATCH_BYTES {
                *s = Scratch::default();
            }
            true
        }
        Err(_) => false,
    });
    if kept != Ok(true) {
        append(&mut Scratch::default());
    }
}

/// The buffers a thread makes its lines in.
#[derive(Default)]
struct Scratch {
    fields: Fields,
    line: Vec<u8>,
    ts: String,
}

impl Scratch {
    /// Makes `event`'s line in `self.line`.
    fn make_line(&mut self, event: &Event<'_>, pid: &str, now: u64) {
        let Scratch {
            fields: f,
            line,
            ts,
        } = self;
        f.clear();
        event.record(f);
        line.clear();
        line.extend_from_slice(b"{\"ts\":\"");
        ts.clear();
        crate::time::push_iso(now, ts);
        line.extend_from_slice(ts.as_bytes());
        line.extend_from_slice(b"\",\"pid\":");
        json_str(line, pid);
        line.extend_from_slice(b",\"tag\":");
        line.extend_from_slice(f.tag.or_empty());
        line.extend_from_slice(b",\"level\":\"");
        line.extend_from_slice(level_name(*event.metadata().level()).as_bytes());
        line.extend_from_slice(b"\",\"msg\":");
        line.extend_from_slice(f.msg.or_empty());
        for (k, v) in [
            (&b",\"thread\":"[..], &f.thread),
            (b",\"workflow\":", &f.workflow),
        ] {
            if !v.0.is_empty() {
                line.extend_from_slice(k);
                line.extend_from_slice(&v.0);
            }
        }
        line.extend_from_slice(&f.extra);
        line.extend_from_slice(b"}\n");
    }
}

/// The most bytes of a line a thread's buffers keep between lines.
const SCRATCH_BYTES: usize = 64 << 10;

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// [`masked`] of a line of bytes; `None` when no secret is registered (the line as it is).
fn masked_bytes(line: &[u8]) -> Option<Vec<u8>> {
    if SECRETS.read().unwrap_or_else(|e| e.into_inner()).is_empty() {
        return None;
    }
    Some(masked(String::from_utf8_lossy(line).into_owned()).into_bytes())
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

/// A field's value as a JSON string, quotes included; empty when the event has none.
#[derive(Default)]
struct Text(Vec<u8>);

impl Text {
    /// The JSON string, `""` when absent.
    fn or_empty(&self) -> &[u8] {
        if self.0.is_empty() { b"\"\"" } else { &self.0 }
    }
}

/// An event's fields, sorted into the line's keys, each written as JSON as it is recorded.
#[derive(Default)]
struct Fields {
    msg: Text,
    tag: Text,
    thread: Text,
    workflow: Text,
    /// The other fields, written as they come: `,"name":value` each.
    extra: Vec<u8>,
}

impl Fields {
    fn clear(&mut self) {
        for t in [
            &mut self.msg,
            &mut self.tag,
            &mut self.thread,
            &mut self.workflow,
        ] {
            t.0.clear();
        }
        self.extra.clear();
    }

    /// Where `field`'s value goes, and whether it is one of the line's string keys (whose
    /// values are always JSON strings); `,"name":` is written first for another field.
    fn slot(&mut self, field: &Field) -> (&mut Vec<u8>, bool) {
        let t = match field.name() {
            "message" => &mut self.msg,
            "tag" => &mut self.tag,
            "thread" => &mut self.thread,
            "workflow" => &mut self.workflow,
            name => {
                self.extra.push(b',');
                json_str(&mut self.extra, name);
                self.extra.push(b':');
                return (&mut self.extra, false);
            }
        };
        t.0.clear();
        (&mut t.0, true)
    }

    /// A field whose value is the JSON `json` writes (a number, a boolean, `null`): a JSON
    /// string of that text for the line's string keys.
    fn put_json(&mut self, field: &Field, json: impl Fn(&mut Vec<u8>)) {
        let (out, text) = self.slot(field);
        if text {
            out.push(b'"');
            json(out);
            out.push(b'"');
        } else {
            json(out);
        }
    }
}

/// Writes what is formatted into it to a JSON string's contents (escaped, without quotes).
struct Escaped<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let start = self.0.len();
        json_str(self.0, s);
        self.0.pop();
        self.0.remove(start);
        Ok(())
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        let (out, _) = self.slot(field);
        out.push(b'"');
        let _ = std::fmt::Write::write_fmt(&mut Escaped(out), format_args!("{value:?}"));
        out.push(b'"');
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        json_str(self.slot(field).0, value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put_json(field, |b| drop(serde_json::to_writer(b, &value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put_json(field, |b| drop(serde_json::to_writer(b, &value)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        // As a JSON value writes it: `null` for what JSON has no number for.
        self.put_json(field, |b| {
            drop(serde_json::to_writer(b, &Value::from(value)))
        });
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put_json(field, |b| drop(serde_json::to_writer(b, &value)));
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
    fn secret_names_are_found_in_any_case() {
        for name in [
            "OPENAI_API_KEY",
            "gh_token",
            "Db_Password",
            "SECRET",
            "mykeyring",
        ] {
            assert!(secret_name(name.as_bytes()), "{name}");
        }
        for name in ["PATH", "HOME", "UWF_HOME", "KE", "TOKE_N", ""] {
            assert!(!secret_name(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn secrets_are_masked_raw_and_escaped() {
        mask("s3cr\"et-value");
        mask("abc");
        let line = Value::String("x s3cr\"et-value y abc".into()).to_string();
        assert_eq!(masked(line), "\"x *** y abc\"");
    }

    /// Makes each event's line as the file layer does, into `lines`.
    struct Lines(Arc<Mutex<Vec<Value>>>);

    impl<S: Subscriber> Layer<S> for Lines {
        fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
            let mut s = Scratch::default();
            s.make_line(event, "1-2", 86_400_000);
            assert_eq!(s.line.last(), Some(&b'\n'));
            let v = serde_json::from_slice(&s.line).expect("a line is one JSON object");
            self.0.lock().unwrap().push(v);
        }
    }

    #[test]
    fn a_line_holds_every_field_as_json() {
        struct Shown(&'static str);
        impl std::fmt::Display for Shown {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sub = tracing_subscriber::registry().with(Lines(lines.clone()));
        tracing::subscriber::with_default(sub, || {
            tracing::info!(
                tag = "ABCDEFGH",
                thread = %Shown("t-\"1\""),
                workflow = 7u64,
                head = %Shown("line\nbreak\u{1}"),
                n = 3u64,
                ok = true,
                x = f64::NAN,
                note = "a \\ b",
                "moved {}", "\"here\""
            );
            tracing::warn!(flag = false, "plain");
        });
        let lines = lines.lock().unwrap();
        assert_eq!(
            lines[0],
            serde_json::json!({
                "ts": "1970-01-02T00:00:00.000Z", "pid": "1-2", "tag": "ABCDEFGH",
                "level": "info", "msg": "moved \"here\"", "thread": "t-\"1\"", "workflow": "7",
                "head": "line\nbreak\u{1}", "n": 3, "ok": true, "x": null, "note": "a \\ b"
            })
        );
        // Keys in the line's order, absent ones left out; `tag` is written even when empty.
        let keys: Vec<&str> = lines[1]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["ts", "pid", "tag", "level", "msg", "flag"]);
        assert_eq!(lines[1]["tag"], "");
        assert_eq!(lines[1]["flag"], false);
    }

    /// A field whose `Debug` logs while the file layer makes its line: the line and the next
    /// are written whole (`tracing` does not dispatch an event raised inside its subscriber).
    #[test]
    fn a_field_that_logs_while_its_line_is_made_leaves_the_lines_whole() {
        struct Loud;
        impl Debug for Loud {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                tracing::info!(tag = "INNERLOG", "inner");
                f.write_str("loud")
            }
        }
        let dir = tempfile::tempdir().unwrap();
        *OPEN.lock().unwrap() = Some(Open {
            sink: Sink {
                dir: dir.path().to_path_buf(),
                pid: "1-2".into(),
                clock: Arc::new(|| 86_400_000),
                keep_days: Box::new(|| 0),
            },
            day: 0,
            file: None,
            buf: Vec::new(),
            flushed: None,
        });
        let sub = tracing_subscriber::registry().with(FileLayer);
        tracing::subscriber::with_default(sub, || {
            tracing::info!(tag = "OUTERLOG", field = ?Loud, "outer");
            tracing::info!(tag = "AFTERLOG", "after");
        });
        close();
        let text = std::fs::read_to_string(dir.path().join("1970-01-02.jsonl")).unwrap();
        let lines = parse_lines(&text);
        let tags: Vec<&str> = lines.iter().map(|l| l["tag"].as_str().unwrap()).collect();
        assert_eq!(tags, ["OUTERLOG", "AFTERLOG"], "{text}");
        assert_eq!(lines[0]["field"], "loud");
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn only_complete_object_lines_parse() {
        let e = parse_lines("{\"a\":1}\nnot json\n[1]\n{\"b\":2}\n{\"c\":");
        assert_eq!(e.len(), 2);
        assert_eq!(e[1]["b"], 2);
    }
}
