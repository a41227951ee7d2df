//! The flat `name → string` YAML maps of the storage root (`threads.yaml`, `workflows.yaml`,
//! `registry.yaml`), written exactly as the npm `yaml` 2.x package's
//! `stringify(obj, {indent: 2})` writes them, and read under the YAML 1.2 core schema.
//!
//! The writer is a port of the scalar rules of `yaml` 2.9 (`stringifyString.js`,
//! `foldFlowLines.js`, `stringifyPair.js`) restricted to a block map of strings: plain scalars
//! where they read back as the same string, otherwise single- or double-quoted (or a block
//! scalar for a multi-line value), lines folded at 80 columns. Lengths are counted in UTF-16
//! code units, as JavaScript counts them. `tests/fixtures/interchange/yaml_quoting.json` holds
//! the reference outputs of the real package.

use crate::cas::Value;
use crate::cas::value::{array_index, js_entries, write_js_number};
use indexmap::IndexMap;
use regex::Regex;
use std::sync::OnceLock;

const LINE_WIDTH: usize = 80;
const MIN_CONTENT_WIDTH: usize = 20;
const DOUBLE_QUOTED_MIN_MULTI_LINE_LENGTH: usize = 40;
/// `indentStep`: a key is stringified one step in from its map, a sequence item two columns.
const INDENT_STEP: usize = 2;

/// Why a YAML map file could not be read at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum YamlError {
    /// The text is not YAML.
    #[error("invalid YAML in {path}: {message}")]
    Syntax {
        /// The file (or a label for in-memory text).
        path: String,
        /// The parser's message.
        message: String,
    },
    /// The document is YAML but not a mapping (nor empty).
    #[error("{path} is not a YAML mapping (found {found})")]
    NotAMap {
        /// The file (or a label).
        path: String,
        /// What the top-level value is.
        found: &'static str,
    },
}

/// An entry of a YAML map that was left out because the key or the value is not a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedEntry {
    /// The key, rendered as YAML text.
    pub key: String,
    /// The value, rendered as YAML text.
    pub value: String,
    /// Why it was left out.
    pub reason: &'static str,
}

impl std::fmt::Display for SkippedEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "entry {}: {} skipped: {}",
            self.key, self.value, self.reason
        )
    }
}

/// A YAML map read back: the string entries in file order and the entries left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringMap {
    /// `name → string` in file order.
    pub entries: IndexMap<String, String>,
    /// Entries whose key or value is not a string (the TypeScript tool drops them silently).
    pub skipped: Vec<SkippedEntry>,
}

/// Reads a flat YAML map, keeping the entries whose key and value are both strings under the
/// YAML 1.2 core schema.
///
/// An empty (or comment-only) document and a `null` document are an empty map, as a missing
/// file is for the TypeScript tool. Entries with a non-string key or value are returned in
/// [`StringMap::skipped`] rather than dropped silently. `label` names the source in errors.
///
/// `yaml_serde` resolves a few plain scalars as numbers that the core schema reads as strings
/// (`0b101`, `+0x1F`, `-0o7`); those are recognised from their source text and kept as strings
/// when every entry of the file is a scalar (otherwise they are reported as numbers).
/// libyaml (YAML 1.1) also treats U+0085, U+2028 and U+2029 as line breaks and refuses raw
/// DEL and C1 controls, which the npm package writes as ordinary characters; they are passed
/// through private-use stand-ins and restored.
///
/// # Errors
/// [`YamlError::Syntax`] when the text is not YAML, [`YamlError::NotAMap`] when the document
/// is a scalar or a sequence.
pub fn read_string_map(text: &str, label: &str) -> Result<StringMap, YamlError> {
    use yaml_serde::Value as Y;
    let shielded = shield(text);
    let text = shielded.as_deref().unwrap_or(text);
    let restore = |s: String| if shielded.is_some() { unshield(&s) } else { s };
    let doc: Y = yaml_serde::from_str(text).map_err(|e| YamlError::Syntax {
        path: label.to_string(),
        message: e.to_string(),
    })?;
    let map = match doc {
        Y::Null => return Ok(StringMap::default()),
        Y::Mapping(m) => m,
        other => {
            return Err(YamlError::NotAMap {
                path: label.to_string(),
                found: kind(&other),
            });
        }
    };
    // The source text of every scalar, when all keys and values are scalars: needed only to
    // tell a core-schema string from a `yaml_serde` number.
    let raw: Option<Vec<(String, String)>> = map
        .iter()
        .any(|(k, v)| matches!(k, Y::Number(_)) || matches!(v, Y::Number(_)))
        .then(|| yaml_serde::from_str::<RawPairs>(text).ok().map(|r| r.0))
        .flatten()
        .filter(|r| r.len() == map.len());
    let as_core_string = |v: &Y, raw: Option<&String>| -> Option<String> {
        match (v, raw) {
            (Y::String(s), _) => Some(s.clone()),
            (Y::Number(_), Some(r)) if !core_non_string(r) => Some(r.clone()),
            _ => None,
        }
    };
    let mut out = StringMap::default();
    for (n, (k, v)) in map.into_iter().enumerate() {
        let (rk, rv) = match &raw {
            Some(r) => (Some(&r[n].0), Some(&r[n].1)),
            None => (None, None),
        };
        match (as_core_string(&k, rk), as_core_string(&v, rv)) {
            (Some(k), Some(v)) => {
                out.entries.insert(restore(k), restore(v));
            }
            (Some(ks), None) => out.skipped.push(SkippedEntry {
                key: render(&Y::String(restore(ks))),
                value: render(&v),
                reason: match kind(&v) {
                    "null" => "the value is null",
                    "a boolean" => "the value is a boolean",
                    "a number" => "the value is a number",
                    "a sequence" => "the value is a sequence",
                    "a mapping" => "the value is a mapping",
                    _ => "the value is not a string",
                },
            }),
            (None, _) => out.skipped.push(SkippedEntry {
                key: render(&k),
                value: render(&v),
                reason: match kind(&k) {
                    "a number" => "the key is a number",
                    "a boolean" => "the key is a boolean",
                    "null" => "the key is null",
                    _ => "the key is not a string",
                },
            }),
        }
    }
    Ok(out)
}

/// Characters that YAML 1.2 reads as ordinary text but libyaml does not.
fn needs_shield(c: char) -> bool {
    matches!(c as u32, 0x7f..=0x9f | 0x2028 | 0x2029)
}

const SHIELD_BASE: u32 = 0x10_ff00;

/// `text` with [`needs_shield`] characters replaced by stand-ins in plane 16, or `None` when
/// there is nothing to replace (or the text already uses the stand-ins).
fn shield(text: &str) -> Option<String> {
    if !text.chars().any(needs_shield) || text.chars().any(|c| c as u32 >= SHIELD_BASE) {
        return None;
    }
    Some(
        text.chars()
            .map(|c| {
                if needs_shield(c) {
                    char::from_u32(SHIELD_BASE + (c as u32 & 0xff)).expect("plane 16 is valid")
                } else {
                    c
                }
            })
            .collect(),
    )
}

fn unshield(s: &str) -> String {
    s.chars()
        .map(|c| match (c as u32).checked_sub(SHIELD_BASE) {
            Some(0x28) => '\u{2028}',
            Some(0x29) => '\u{2029}',
            Some(low @ 0x7f..=0x9f) => char::from_u32(low).expect("a C1 code point"),
            _ => c,
        })
        .collect()
}

/// A mapping of scalars read as their source text, in document order.
struct RawPairs(Vec<(String, String)>);

impl<'de> serde::Deserialize<'de> for RawPairs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawPairs;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a mapping of scalars")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<RawPairs, A::Error> {
                let mut v = Vec::new();
                while let Some(e) = m.next_entry::<String, String>()? {
                    v.push(e);
                }
                Ok(RawPairs(v))
            }
        }
        d.deserialize_map(V)
    }
}

fn kind(v: &yaml_serde::Value) -> &'static str {
    use yaml_serde::Value as Y;
    match v {
        Y::Null => "null",
        Y::Bool(_) => "a boolean",
        Y::Number(_) => "a number",
        Y::String(_) => "a string",
        Y::Sequence(_) => "a sequence",
        Y::Mapping(_) => "a mapping",
        Y::Tagged(_) => "a tagged value",
    }
}

/// One-line YAML text of a value, for reports.
fn render(v: &yaml_serde::Value) -> String {
    let s = yaml_serde::to_string(v).unwrap_or_else(|_| "<unprintable>".to_string());
    let s = s.trim_end();
    if s.contains('\n') {
        format!("{:?}", s)
    } else {
        s.to_string()
    }
}

/// Writes a flat `name → string` map as `stringify(obj, {indent: 2})` does.
///
/// Entries keep their order, except that keys which are JavaScript array indices (`"0"`,
/// `"42"`, up to 2^32−2, no leading zero) come first in numeric order, as they do in a JS
/// object. A repeated key keeps its first position and its last value. An empty map is `{}\n`.
pub fn write_string_map<'a, I>(entries: I) -> String
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut map: IndexMap<&str, &str> = IndexMap::new();
    for (k, v) in entries {
        map.insert(k, v);
    }
    if map.is_empty() {
        return "{}\n".to_string();
    }
    let mut indexed: Vec<(u32, &str, &str)> = Vec::new();
    let mut named: Vec<(&str, &str)> = Vec::new();
    for (k, v) in map {
        match array_index(k) {
            Some(n) => indexed.push((n, k, v)),
            None => named.push((k, v)),
        }
    }
    indexed.sort_unstable_by_key(|e| e.0);
    let mut out = String::new();
    for (k, v) in indexed.into_iter().map(|e| (e.1, e.2)).chain(named) {
        out.push_str(&String::from_utf16_lossy(&pair(k, v)));
        out.push('\n');
    }
    out
}

/// `yaml.stringify(value)` of the npm `yaml` 2.x package (default options): block maps and
/// sequences, a sequence indented under its key, empty collections as `{}`/`[]`, keys in
/// JavaScript's property order, strings by the same scalar rules as the map files, numbers as
/// `JSON.stringify` writes them (`-0` stays `-0`). Ends with a newline.
pub fn stringify_value(v: &Value) -> String {
    let ctx = Ctx {
        implicit_key: false,
        indent_at_start: None,
        indent: 0,
    };
    let mut out = String::from_utf16_lossy(&node(v, ctx));
    out.push('\n');
    out
}

/// A number as `stringifyNumber` writes it.
fn yaml_number(n: f64) -> String {
    if n.is_nan() {
        ".nan".into()
    } else if n.is_infinite() {
        if n < 0.0 { "-.inf" } else { ".inf" }.into()
    } else if n == 0.0 && n.is_sign_negative() {
        "-0".into()
    } else {
        let mut s = String::new();
        write_js_number(n, &mut s);
        s
    }
}

fn node(v: &Value, ctx: Ctx) -> U {
    match v {
        Value::Null => u("null"),
        Value::Bool(b) => u(if *b { "true" } else { "false" }),
        Value::Number(n) => u(&yaml_number(*n)),
        Value::String(s) => stringify_string(s, ctx),
        Value::Array(items) if items.is_empty() => u("[]"),
        Value::Object(m) if m.is_empty() => u("{}"),
        Value::Array(items) => {
            let item_ctx = Ctx {
                indent: ctx.indent + INDENT_STEP,
                ..ctx
            };
            let lines = items.iter().map(|x| {
                let mut l = u("- ");
                l.extend(node(x, item_ctx));
                l
            });
            join_lines(lines, ctx.indent)
        }
        Value::Object(m) => {
            let lines = js_entries(m).into_iter().map(|(k, x)| map_pair(k, x, ctx));
            join_lines(lines, ctx.indent)
        }
    }
}

/// Lines of a block collection, each after the first on a new line at `indent`.
fn join_lines(lines: impl Iterator<Item = U>, indent: usize) -> U {
    let mut out = U::new();
    for (i, l) in lines.enumerate() {
        if i > 0 {
            out.push(NL);
            if !l.is_empty() {
                out.extend(spaces(indent));
            }
        }
        out.extend(l);
    }
    out
}

/// `key: value` of a map at `map_ctx.indent` (`stringifyPair`).
fn map_pair(key: &str, value: &Value, map_ctx: Ctx) -> U {
    let indent = map_ctx.indent + INDENT_STEP;
    let k = stringify_string(
        key,
        Ctx {
            implicit_key: true,
            indent_at_start: map_ctx.indent_at_start,
            indent,
        },
    );
    let explicit = k.len() > 1024;
    let mut s: U;
    if explicit {
        s = u("? ");
        s.extend(&k);
        s.push(NL);
        s.extend(spaces(map_ctx.indent));
        s.push(b':' as u16);
    } else {
        s = k;
        s.push(b':' as u16);
    }
    let collection = matches!(value, Value::Array(_) | Value::Object(_));
    let value_ctx = Ctx {
        implicit_key: false,
        indent_at_start: if !explicit && !collection {
            Some(s.len() + 1)
        } else {
            map_ctx.indent_at_start
        },
        indent,
    };
    let v = node(value, value_ctx);
    let empty = match value {
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    };
    if !explicit && collection {
        if v.contains(&NL) || !empty {
            s.push(NL);
            s.extend(spaces(indent));
        } else {
            s.push(SP);
        }
    } else if !(v.is_empty() || v[0] == NL) {
        s.push(SP);
    }
    s.extend(v);
    s
}

type U = Vec<u16>;

fn u(s: &str) -> U {
    s.encode_utf16().collect()
}

const NL: u16 = b'\n' as u16;
const SP: u16 = b' ' as u16;
const TAB: u16 = b'\t' as u16;

#[derive(Clone, Copy)]
struct Ctx {
    implicit_key: bool,
    indent_at_start: Option<usize>,
    /// `ctx.indent`, in spaces.
    indent: usize,
}

fn spaces(n: usize) -> U {
    vec![SP; n]
}

/// One `key: value` entry of the root map (`stringifyPair` with a scalar value).
fn pair(key: &str, value: &str) -> U {
    let key_ctx = Ctx {
        implicit_key: true,
        indent_at_start: None,
        indent: INDENT_STEP,
    };
    let k = stringify_string(key, key_ctx);
    let explicit = k.len() > 1024;
    let mut s: U;
    if explicit {
        s = u("? ");
        s.extend(&k);
        s.extend(u("\n:"));
    } else {
        s = k;
        s.push(b':' as u16);
    }
    let value_ctx = Ctx {
        implicit_key: false,
        indent_at_start: if explicit { None } else { Some(s.len() + 1) },
        indent: INDENT_STEP,
    };
    let v = stringify_string(value, value_ctx);
    if !(v.is_empty() || v[0] == NL) {
        s.push(SP);
    }
    s.extend(v);
    s
}

fn stringify_string(value: &str, ctx: Ctx) -> U {
    // Control characters force double quotes (unpaired surrogates cannot occur in a `str`).
    let forced = value
        .chars()
        .any(|c| matches!(c as u32, 0x00..=0x08 | 0x0b..=0x1f | 0x7f..=0x9f));
    if forced {
        double_quoted(value, ctx)
    } else {
        plain(value, ctx)
    }
}

/// Whether a plain scalar would read back as something else than this string
/// (the core schema's non-string tags, plus the block-map syntax checks of `plainString`).
fn plain_forbidden(v: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r#"^[\n\t ,\[\]{}#&*!|>'"%@`]|^[?-]$|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]$"#,
        )
        .expect("valid regex")
    });
    re.is_match(v)
}

fn core_non_string(v: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(concat!(
            r"^(?:~|[Nn]ull|NULL)?$",
            r"|^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$",
            r"|^0o[0-7]+$",
            r"|^[-+]?[0-9]+$",
            r"|^0x[0-9a-fA-F]+$",
            r"|^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$",
            r"|^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$",
            r"|^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$",
        ))
        .expect("valid regex")
    });
    re.is_match(v)
}

/// JavaScript line terminators, where `^` matches under the `m` flag and `.` stops.
fn is_js_line_terminator(c: u16) -> bool {
    matches!(c, 0x0a | 0x0d | 0x2028 | 0x2029)
}

/// `/^(%|---|\.\.\.)/m`.
fn contains_document_marker(v: &[u16]) -> bool {
    let at = |i: usize| {
        let rest = &v[i..];
        rest.first() == Some(&(b'%' as u16))
            || rest.starts_with(&u("---"))
            || rest.starts_with(&u("..."))
    };
    (0..v.len()).any(|i| (i == 0 || is_js_line_terminator(v[i - 1])) && at(i))
}

fn plain(value: &str, ctx: Ctx) -> U {
    let has_nl = value.contains('\n');
    if ctx.implicit_key && has_nl {
        return quoted(value, ctx);
    }
    if plain_forbidden(value) {
        return if ctx.implicit_key || !has_nl {
            quoted(value, ctx)
        } else {
            block(value, ctx, false)
        };
    }
    if !ctx.implicit_key && has_nl {
        return block(value, ctx, false);
    }
    let s = u(value);
    if contains_document_marker(&s) {
        if ctx.indent == 0 {
            return block(value, ctx, true);
        } else if ctx.implicit_key && ctx.indent == INDENT_STEP {
            // the keys of a root map
            return quoted(value, ctx);
        }
    }
    if core_non_string(value) {
        return quoted(value, ctx);
    }
    if ctx.implicit_key {
        s
    } else {
        fold(&s, Mode::Flow, ctx.indent_at_start, ctx.indent).0
    }
}

fn quoted(value: &str, ctx: Ctx) -> U {
    let has_double = value.contains('"');
    let has_single = value.contains('\'');
    if has_double && !has_single {
        single_quoted(value, ctx)
    } else {
        double_quoted(value, ctx)
    }
}

fn single_quoted(value: &str, ctx: Ctx) -> U {
    let v = u(value);
    let ws_around_nl = v.windows(2).any(|w| {
        (matches!(w[0], SP | TAB) && w[1] == NL) || (w[0] == NL && matches!(w[1], SP | TAB))
    });
    if (ctx.implicit_key && value.contains('\n')) || ws_around_nl {
        return double_quoted(value, ctx);
    }
    let indent = quoted_indent(value, ctx);
    let mut res: U = vec![b'\'' as u16];
    let mut i = 0;
    while i < v.len() {
        let c = v[i];
        if c == b'\'' as u16 {
            res.extend([c, c]);
            i += 1;
        } else if c == NL {
            // `/\n+/g` → `$&\n` + indent
            while i < v.len() && v[i] == NL {
                res.push(NL);
                i += 1;
            }
            res.push(NL);
            res.extend(spaces(indent));
        } else {
            res.push(c);
            i += 1;
        }
    }
    res.push(b'\'' as u16);
    if ctx.implicit_key {
        res
    } else {
        fold(&res, Mode::Flow, ctx.indent_at_start, indent).0
    }
}

/// `JSON.stringify` of a string.
fn json_string(value: &str) -> U {
    let mut s = String::with_capacity(value.len() + 2);
    s.push('"');
    for c in value.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\u{8}' => s.push_str("\\b"),
            '\u{c}' => s.push_str("\\f"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
    u(&s)
}

/// The indentation of a quoted scalar's continuation lines: `ctx.indent`, or a step at the
/// root when a line could be read as a document marker.
fn quoted_indent(value: &str, ctx: Ctx) -> usize {
    if ctx.indent == 0 && contains_document_marker(&u(value)) {
        INDENT_STEP
    } else {
        ctx.indent
    }
}

fn double_quoted(value: &str, ctx: Ctx) -> U {
    let indent = quoted_indent(value, ctx);
    let json = json_string(value);
    let at = |i: usize| json.get(i).copied();
    let bs = b'\\' as u16;
    let mut out: U = Vec::with_capacity(json.len());
    let mut start = 0usize;
    let mut i = 0usize;
    while i < json.len() {
        let mut ch = json[i];
        if ch == SP && at(i + 1) == Some(bs) && at(i + 2) == Some(b'n' as u16) {
            // a space before a newline is escaped so that folding keeps it
            out.extend(&json[start..i]);
            out.extend(u("\\ "));
            i += 1;
            start = i;
            ch = bs;
        }
        if ch == bs {
            match at(i + 1).map(|c| c as u8 as char) {
                Some('u') => {
                    out.extend(&json[start..i]);
                    let code = String::from_utf16_lossy(&json[i + 2..i + 6]);
                    match code.as_str() {
                        "0000" => out.extend(u("\\0")),
                        "0007" => out.extend(u("\\a")),
                        "000b" => out.extend(u("\\v")),
                        "001b" => out.extend(u("\\e")),
                        "0085" => out.extend(u("\\N")),
                        "00a0" => out.extend(u("\\_")),
                        "2028" => out.extend(u("\\L")),
                        "2029" => out.extend(u("\\P")),
                        c if c.starts_with("00") => {
                            out.extend(u("\\x"));
                            out.extend(u(&c[2..]));
                        }
                        _ => out.extend(&json[i..i + 6]),
                    }
                    i += 5;
                    start = i + 1;
                }
                Some('n') => {
                    if ctx.implicit_key
                        || at(i + 2) == Some(b'"' as u16)
                        || json.len() < DOUBLE_QUOTED_MIN_MULTI_LINE_LENGTH
                    {
                        i += 1;
                    } else {
                        // folding eats the first newline
                        out.extend(&json[start..i]);
                        out.extend([NL, NL]);
                        while at(i + 2) == Some(bs)
                            && at(i + 3) == Some(b'n' as u16)
                            && at(i + 4) != Some(b'"' as u16)
                        {
                            out.push(NL);
                            i += 2;
                        }
                        out.extend(spaces(indent));
                        // a space after a newline is escaped so that folding keeps it
                        if at(i + 2) == Some(SP) {
                            out.push(bs);
                        }
                        i += 1;
                        start = i + 1;
                    }
                }
                _ => i += 1,
            }
        }
        i += 1;
    }
    let s = if start > 0 {
        out.extend(&json[start..]);
        out
    } else {
        json
    };
    if ctx.implicit_key {
        s
    } else {
        fold(&s, Mode::Quoted, ctx.indent_at_start, indent).0
    }
}

/// `lineLengthOverLimit(str, 80, indent)`.
fn line_length_over_limit(s: &[u16], indent: usize) -> bool {
    let limit = LINE_WIDTH.saturating_sub(indent);
    let n = s.len();
    if n <= limit {
        return false;
    }
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        if c == NL {
            if i - start > limit {
                return true;
            }
            start = i + 1;
            if n - start <= limit {
                return false;
            }
        }
    }
    true
}

/// Appends `text` with every run of newlines followed by `indent` spaces.
fn indent_after_newline_runs(text: &[u16], out: &mut U, indent: usize) {
    let mut i = 0;
    while i < text.len() {
        if text[i] == NL {
            while i < text.len() && text[i] == NL {
                out.push(NL);
                i += 1;
            }
            out.extend(spaces(indent));
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
}

/// A multi-line value as a literal (`|`) or folded (`>`) block scalar; `force_indent` indents a
/// root scalar a step (it has a line that could be read as a document marker).
fn block(value: &str, ctx: Ctx, force_indent: bool) -> U {
    let v = u(value);
    let indent = if ctx.indent > 0 {
        ctx.indent
    } else if force_indent || contains_document_marker(&v) {
        INDENT_STEP
    } else {
        0
    };
    // `/\n[\t ]+$/`: a block cannot end in whitespace after the last line break
    {
        let trail = v.iter().rev().take_while(|&&c| c == SP || c == TAB).count();
        if trail > 0 && v.len() > trail && v[v.len() - trail - 1] == NL {
            return quoted(value, ctx);
        }
    }
    let literal = !line_length_over_limit(&v, indent);
    if v.is_empty() {
        return u(if literal { "|\n" } else { ">\n" });
    }
    // chomping from the whitespace at the end
    let mut end_start = v.len();
    while end_start > 0 && matches!(v[end_start - 1], NL | TAB | SP) {
        end_start -= 1;
    }
    let mut end: U = v[end_start..].to_vec();
    let end_nl = end.iter().position(|&c| c == NL);
    let chomp = match end_nl {
        None => "-",
        Some(p) if end_start == 0 || p != end.len() - 1 => "+",
        Some(_) => "",
    };
    let mut body: U = v[..end_start].to_vec();
    if !end.is_empty() {
        if end.last() == Some(&NL) {
            end.pop();
        }
        // `/(^|(?<!\n))\n+(?!\n|$)/g` → `$&` + indent: a run of newlines not at the end
        let mut e2 = U::new();
        let mut i = 0;
        while i < end.len() {
            if end[i] == NL {
                let s = i;
                while i < end.len() && end[i] == NL {
                    i += 1;
                }
                e2.extend(&end[s..i]);
                if i < end.len() {
                    e2.extend(spaces(indent));
                }
            } else {
                e2.push(end[i]);
                i += 1;
            }
        }
        end = e2;
    }
    // indentation indicator from the whitespace at the start
    let mut start_with_space = false;
    let mut start_end = 0;
    let mut start_nl: isize = -1;
    while start_end < body.len() {
        match body[start_end] {
            SP => start_with_space = true,
            NL => start_nl = start_end as isize,
            _ => break,
        }
        start_end += 1;
    }
    let start_len = if start_nl < start_end as isize {
        (start_nl + 1) as usize
    } else {
        start_end
    };
    let mut start: U = Vec::new();
    if start_len > 0 {
        indent_after_newline_runs(&body[..start_len], &mut start, indent);
        body.drain(..start_len);
    }
    let mut header = String::new();
    if start_with_space {
        header.push(if indent > 0 { '2' } else { '1' });
    }
    header.push_str(chomp);
    if !literal {
        let mut text = start.clone();
        text.extend(folded_value(&body, indent));
        text.extend(&end);
        let (folded, overflow) = fold(&text, Mode::Block, Some(ctx.indent), indent);
        if !overflow {
            let mut out = u(&format!(">{header}\n"));
            out.extend(spaces(indent));
            out.extend(folded);
            return out;
        }
    }
    let mut out = u(&format!("|{header}\n"));
    out.extend(spaces(indent));
    out.extend(start);
    indent_after_newline_runs(&body, &mut out, indent);
    out.extend(end);
    out
}

/// The three replacements of `blockString` that prepare a folded block body.
fn folded_value(value: &[u16], indent: usize) -> U {
    // 1. `/\n+/g` → `\n$&`
    let mut a = U::new();
    let mut i = 0;
    while i < value.len() {
        if value[i] == NL {
            a.push(NL);
            while i < value.len() && value[i] == NL {
                a.push(NL);
                i += 1;
            }
        } else {
            a.push(value[i]);
            i += 1;
        }
    }
    // 2. `/(?:^|\n)([\t ].*)(?:([\n\t ]*)\n(?![\n\t ]))?/g` → `$1$2`:
    //    more-indented lines are not folded
    let ws = |c: u16| c == SP || c == TAB;
    let ws_nl = |c: u16| c == SP || c == TAB || c == NL;
    let mut b = U::new();
    let mut i = 0;
    while i < a.len() {
        let g1 = if i == 0 && ws(a[0]) {
            Some(0)
        } else if a[i] == NL && a.get(i + 1).copied().is_some_and(ws) {
            Some(i + 1)
        } else {
            None
        };
        let Some(g1_start) = g1 else {
            b.push(a[i]);
            i += 1;
            continue;
        };
        let mut q = g1_start + 1;
        while q < a.len() && !is_js_line_terminator(a[q]) {
            q += 1;
        }
        b.extend(&a[g1_start..q]);
        let mut r = q;
        while r < a.len() && ws_nl(a[r]) {
            r += 1;
        }
        if r > q && a[r - 1] == NL {
            b.extend(&a[q..r - 1]);
            i = r;
        } else {
            i = q;
        }
    }
    // 3. `/\n+/g` → `$&` + indent
    let mut c = U::new();
    indent_after_newline_runs(&b, &mut c, indent);
    c
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Flow,
    Block,
    Quoted,
}

/// `foldFlowLines(text, "  ", mode, {indentAtStart, lineWidth: 80, minContentWidth: 20})`;
/// returns the text and whether a line overflowed.
fn fold(text: &[u16], mode: Mode, indent_at_start: Option<usize>, indent: usize) -> (U, bool) {
    let indent = &spaces(indent)[..];
    let end_step =
        (1 + MIN_CONTENT_WIDTH as isize).max(1 + LINE_WIDTH as isize - indent.len() as isize);
    if text.len() as isize <= end_step {
        return (text.to_vec(), false);
    }
    let at = |i: isize| -> Option<u16> {
        if i < 0 {
            None
        } else {
            text.get(i as usize).copied()
        }
    };
    let mut folds: Vec<isize> = Vec::new();
    let mut escaped_folds: Vec<isize> = Vec::new();
    let mut end = LINE_WIDTH as isize - indent.len() as isize;
    if let Some(ias) = indent_at_start {
        if ias as isize > LINE_WIDTH as isize - 2.max(MIN_CONTENT_WIDTH) as isize {
            folds.push(0);
        } else {
            end = LINE_WIDTH as isize - ias as isize;
        }
    }
    let mut split: Option<isize> = None;
    let mut prev: Option<u16> = None;
    let mut overflow = false;
    let mut i: isize = -1;
    let mut esc_start: isize = -1;
    let mut esc_end: isize = -1;
    if mode == Mode::Block {
        i = consume_more_indented_lines(text, i, indent.len() as isize);
        if i != -1 {
            end = i + end_step;
        }
    }
    loop {
        i += 1;
        let Some(c0) = at(i) else {
            break;
        };
        let mut ch = Some(c0);
        if mode == Mode::Quoted && ch == Some(b'\\' as u16) {
            esc_start = i;
            i += match at(i + 1) {
                Some(0x78) => 3, // x
                Some(0x75) => 5, // u
                Some(0x55) => 9, // U
                _ => 1,
            };
            esc_end = i;
        }
        if ch == Some(NL) {
            if mode == Mode::Block {
                i = consume_more_indented_lines(text, i, indent.len() as isize);
            }
            end = i + indent.len() as isize + end_step;
            split = None;
        } else {
            if ch == Some(SP) && prev.is_some_and(|p| p != SP && p != NL && p != TAB) {
                // a space between non-spaces can become a line break
                let next = at(i + 1);
                if next.is_some_and(|n| n != SP && n != NL && n != TAB) {
                    split = Some(i);
                }
            }
            if i >= end {
                if let Some(sp) = split {
                    folds.push(sp);
                    end = sp + end_step;
                    split = None;
                } else if mode == Mode::Quoted {
                    // whitespace collected at the end may stretch past the line width
                    while prev == Some(SP) || prev == Some(TAB) {
                        prev = ch;
                        i += 1;
                        ch = at(i);
                        overflow = true;
                    }
                    // account for the newline escape without breaking an escape before it
                    let j = if i > esc_end + 1 {
                        i - 2
                    } else {
                        esc_start - 1
                    };
                    if escaped_folds.contains(&j) {
                        return (text.to_vec(), overflow);
                    }
                    folds.push(j);
                    escaped_folds.push(j);
                    end = j + end_step;
                    split = None;
                } else {
                    overflow = true;
                }
            }
        }
        prev = ch;
    }
    if folds.is_empty() {
        return (text.to_vec(), overflow);
    }
    let slice = |a: isize, b: isize| &text[a.max(0) as usize..(b.max(0) as usize).min(text.len())];
    let mut res: U = slice(0, folds[0]).to_vec();
    for (k, &f) in folds.iter().enumerate() {
        let e = match folds.get(k + 1) {
            Some(&n) if n != 0 => n,
            _ => text.len() as isize,
        };
        if f == 0 {
            res = vec![NL];
            res.extend(indent);
            res.extend(slice(0, e));
        } else {
            if mode == Mode::Quoted && escaped_folds.contains(&f) {
                if let Some(c) = at(f) {
                    res.push(c);
                }
                res.push(b'\\' as u16);
            }
            res.push(NL);
            res.extend(indent);
            res.extend(slice(f + 1, e));
        }
    }
    (res, overflow)
}

/// Presumes `i + 1` starts a line; returns the index of the last newline of a more-indented
/// block (`consumeMoreIndentedLines`).
fn consume_more_indented_lines(text: &[u16], mut i: isize, indent: isize) -> isize {
    let at = |i: isize| -> Option<u16> {
        if i < 0 {
            None
        } else {
            text.get(i as usize).copied()
        }
    };
    let mut end = i;
    let mut start = i + 1;
    let mut ch = at(start);
    while ch == Some(SP) || ch == Some(TAB) {
        if i < start + indent {
            i += 1;
            ch = at(i);
        } else {
            loop {
                i += 1;
                ch = at(i);
                if ch.is_none() || ch == Some(NL) {
                    break;
                }
            }
            end = i;
            start = i + 1;
            ch = at(start);
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        let v = |j: &str| stringify_value(&Value::from_json_str(j).unwrap());
        assert_eq!(v(r#"{"b":[1],"42":{}}"#), "\"42\": {}\nb:\n  - 1\n");
        assert_eq!(
            v("[1e21,9007199254740992,18446744073709551616]"),
            "- 1e+21\n- 9007199254740992\n- 18446744073709552000\n"
        );
        assert_eq!(
            stringify_value(&Value::Array(vec![Value::Number(-0.0)])),
            "- -0\n"
        );
        assert_eq!(v(r#"[[],{"a":null}]"#), "- []\n- a: null\n");
    }

    #[test]
    fn basics() {
        assert_eq!(write_string_map([]), "{}\n");
        assert_eq!(
            write_string_map([("debate", "DDY7SM1N7BV4G"), ("x", "1234567890123")]),
            "debate: DDY7SM1N7BV4G\nx: \"1234567890123\"\n"
        );
    }
}
