//! The frontmatter fast path: an agent's raw output starting with a YAML block becomes the
//! role's output without any LLM call.
//!
//! Rules (the TypeScript tool's): the output starts at byte 0 with `---` followed by a line end
//! or the end of the text; the block closes at the first `\n---`; the body is what follows, with
//! leading newlines removed. The candidate takes, for every top-level property of the role's
//! schema (merged over `anyOf`/`oneOf` variants), the value of a full YAML parse of the block;
//! the key `status` is first coerced to one of `done|needs_input|in_progress|failed`. Absent
//! fields are left out; a schema without properties gives `{status}`. The candidate must then
//! validate against the schema. Callers usually trim leading whitespace first, as the
//! TypeScript agent runtime does.

use super::fields::field_names;
use crate::cas::Value;
use crate::cas::schema::{SchemaError, Validator};
use crate::cas::value::Map;

const FENCE: &str = "---";
const VALID_STATUS: [&str; 4] = ["done", "needs_input", "in_progress", "failed"];

/// The frontmatter block and the body of a raw output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    /// The YAML text between the fences; `None` when the output has no frontmatter block.
    pub yaml: Option<&'a str>,
    /// The body (the whole output when there is no block).
    pub body: &'a str,
}

/// Splits `raw` into its frontmatter block and body.
pub(crate) fn split(raw: &str) -> Split<'_> {
    let none = Split {
        yaml: None,
        body: raw,
    };
    let Some(rest) = raw.strip_prefix(FENCE) else {
        return none;
    };
    if !rest.is_empty() && !rest.starts_with('\n') && !rest.starts_with('\r') {
        return none;
    }
    let after_open = rest.strip_prefix('\n').unwrap_or(rest);
    match after_open.find("\n---") {
        Some(i) => Split {
            yaml: Some(&after_open[..i]),
            body: after_open[i + 1 + FENCE.len()..].trim_start_matches('\n'),
        },
        None => match after_open.strip_prefix(FENCE) {
            Some(after_close) => Split {
                yaml: Some(""),
                body: after_close.trim_start_matches('\n'),
            },
            None => none,
        },
    }
}

/// A scalar of the minimal line-based reader the TypeScript tool uses for its standard keys.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    List(Vec<String>),
}

impl Scalar {
    /// JavaScript's `String(value)`.
    fn js(&self) -> String {
        match self {
            Scalar::Null => "null".into(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Num(n) => crate::cas::value::js_number_string(*n),
            Scalar::Str(s) => s.clone(),
            Scalar::List(l) => l.join(","),
        }
    }
}

/// JavaScript's `Number(s)` for a trimmed, non-empty string.
fn js_number(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return Some(0.0);
    }
    let (sign, body) = match t.strip_prefix('-') {
        Some(b) => (-1.0, b),
        None => (1.0, t.strip_prefix('+').unwrap_or(t)),
    };
    if body == "Infinity" {
        return Some(sign * f64::INFINITY);
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            return u64::from_str_radix(digits, radix).ok().map(|v| v as f64);
        }
    }
    if !body
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    t.parse::<f64>().ok()
}

fn scalar(raw: &str) -> Scalar {
    let t = raw.trim();
    if t.len() >= 2
        && ((t.starts_with('"') && t.ends_with('"')) || (t.starts_with('\'') && t.ends_with('\'')))
    {
        return Scalar::Str(t[1..t.len() - 1].to_string());
    }
    match t.to_lowercase().as_str() {
        "true" => return Scalar::Bool(true),
        "false" => return Scalar::Bool(false),
        "null" | "~" | "" => return Scalar::Null,
        _ => {}
    }
    match js_number(t) {
        Some(n) if !n.is_nan() => Scalar::Num(n),
        _ => Scalar::Str(t.to_string()),
    }
}

/// The flat key/value reading of the TypeScript tool's minimal parser.
fn minimal_fields(yaml: &str) -> Vec<(String, Scalar)> {
    let lines: Vec<&str> = yaml.split('\n').collect();
    let mut out: Vec<(String, Scalar)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            i += 1;
            continue;
        }
        let Some(colon) = line.find(':') else {
            i += 1;
            continue;
        };
        let key = line[..colon].trim().to_string();
        let rest = line[colon + 1..].trim();
        let value = if rest.is_empty() {
            let mut items = Vec::new();
            i += 1;
            while i < lines.len() {
                let Some(item) = lines[i].trim_start().strip_prefix("- ") else {
                    break;
                };
                items.push(item.trim().to_string());
                i += 1;
            }
            Scalar::List(items)
        } else if rest.starts_with('[') && rest.ends_with(']') && rest.len() >= 2 {
            i += 1;
            Scalar::List(
                rest[1..rest.len() - 1]
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            )
        } else {
            i += 1;
            scalar(rest)
        };
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => out.push((key, value)),
        }
    }
    out
}

fn field<'a>(fields: &'a [(String, Scalar)], key: &str) -> Option<&'a Scalar> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .filter(|v| **v != Scalar::Null)
}

/// `status` coerced to one of the four standard values, if it is one of them.
fn coerce_status(fields: &[(String, Scalar)]) -> Option<&'static str> {
    let s = field(fields, "status")?.js().trim().to_lowercase();
    VALID_STATUS.iter().copied().find(|v| *v == s)
}

/// The checks the TypeScript tool applies to the standard keys before the fast path.
fn standard_key_errors(fields: &[(String, Scalar)]) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(c) = field(fields, "confidence") {
        let n = match c {
            Scalar::Num(n) => Some(*n),
            other => js_number(&other.js()),
        };
        if let Some(n) = n.filter(|n| !n.is_nan())
            && !(0.0..=1.0).contains(&n)
        {
            errors.push(format!(
                "confidence {} is out of range; must be between 0.0 and 1.0 inclusive",
                crate::cas::value::js_number_string(n)
            ));
        }
    }
    if let Some(n) = field(fields, "next") {
        let s = n.js();
        let s = s.trim();
        if !s.is_empty() && s.chars().any(char::is_whitespace) {
            errors.push(format!("next \"{s}\" must not contain whitespace"));
        }
    }
    errors
}

/// A fast-path result: the role's output and the body.
#[derive(Debug, Clone, PartialEq)]
pub struct FastPath<'a> {
    /// The output payload, valid against the role's schema.
    pub output: Value,
    /// The markdown after the frontmatter block.
    pub body: &'a str,
}

/// Why the fast path did not apply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FastPathError {
    /// The output does not start with a `---` block.
    #[error(
        "output does not begin with a YAML frontmatter block (\"---\" at the very start, closed by a \"---\" line)"
    )]
    NoFrontmatter,
    /// The standard keys (`confidence`, `next`) have invalid values.
    #[error("invalid frontmatter: {}", .0.join("; "))]
    Standard(Vec<String>),
    /// The candidate does not match the role's schema.
    #[error("frontmatter does not match the role's output schema: {}{message}", missing_text(.missing))]
    Mismatch {
        /// Required fields that are absent.
        missing: Vec<String>,
        /// The validator's first complaint.
        message: String,
        /// The candidate that was built.
        candidate: Value,
    },
    /// The role's schema cannot be compiled.
    #[error("role output schema cannot be used: {0}")]
    Schema(SchemaError),
}

fn missing_text(missing: &[String]) -> String {
    if missing.is_empty() {
        String::new()
    } else {
        format!("missing fields: {}; ", missing.join(", "))
    }
}

/// Builds the candidate output of `yaml` for `schema` (no validation).
/// The mapping of a block whose every line is `key: value` from its first column, with a key
/// of ASCII letters, digits, `_`, `-` and `$` (not starting with a digit or `-`) and a value
/// that YAML can only read as a plain string: it starts with a letter, holds only letters,
/// digits, spaces and `_.,/()-`, ends with no space, and is no boolean or null word. That is
/// what a full parse of such a block gives, without one; `None` for any other block (empty
/// lines aside), which the full parse reads.
fn plain_map(yaml: &str) -> Option<Map> {
    const WORDS: [&str; 9] = ["true", "false", "null", "yes", "no", "on", "off", "y", "n"];
    let word = |t: &str| WORDS.contains(&t.to_ascii_lowercase().as_str());
    let mut out = Map::default();
    for line in yaml.split('\n') {
        if line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once(": ")?;
        let (kb, vb) = (k.as_bytes(), v.as_bytes());
        let key_ok = kb
            .first()
            .is_some_and(|b| b.is_ascii_alphabetic() || b"_$".contains(b))
            && kb
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"_-$".contains(b));
        let value_ok = vb.first().is_some_and(u8::is_ascii_alphabetic)
            && vb.last() != Some(&b' ')
            && vb
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b" _.,/()-".contains(b));
        if !key_ok || !value_ok || word(k) || word(v) {
            return None;
        }
        if out.insert(k.to_string(), Value::str(v)).is_some() {
            return None;
        }
    }
    // An empty block parses as null, not as a mapping.
    (!out.is_empty()).then_some(out)
}

pub(crate) fn candidate(yaml: &str, schema: &Value) -> Value {
    let minimal = minimal_fields(yaml);
    let raw = plain_map(yaml)
        .or_else(
            || match crate::workflow::yaml::parse_str(yaml, None, "frontmatter") {
                Ok(Value::Object(m)) => Some(m),
                _ => None,
            },
        )
        .unwrap_or_default();
    let coerced = coerce_status(&minimal).map(Value::str);
    let fields = field_names(schema);
    let mut out = Map::default();
    if fields.is_empty() {
        out.insert("status".into(), coerced.unwrap_or(Value::Null));
        return Value::Object(out);
    }
    for name in fields {
        let value = if name == "status" {
            Some(
                coerced
                    .clone()
                    .or_else(|| raw.get("status").cloned())
                    .unwrap_or(Value::Null),
            )
        } else {
            raw.get(name).cloned()
        };
        if let Some(v) = value {
            out.insert(name.to_string(), v);
        }
    }
    Value::Object(out)
}

/// Required fields of `schema` that `candidate` lacks (for a union, those of the closest variant).
fn missing_required(schema: &Value, candidate: &Value) -> Vec<String> {
    let missing_of = |s: &Value| -> Vec<String> {
        match s.get("required") {
            Some(Value::Array(r)) => r
                .iter()
                .filter_map(Value::as_str)
                .filter(|k| candidate.get(k).is_none())
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut best = missing_of(schema);
    let variants = match (schema.get("oneOf"), schema.get("anyOf")) {
        (Some(Value::Array(v)), _) | (_, Some(Value::Array(v))) => v.as_slice(),
        _ => &[],
    };
    if let Some(closest) = variants.iter().map(missing_of).min_by_key(Vec::len) {
        for m in closest {
            if !best.contains(&m) {
                best.push(m);
            }
        }
    }
    best
}

/// Runs the fast path on `raw` for a role with output schema `schema` (id `schema_id`).
///
/// # Errors
/// [`FastPathError`] saying why the output cannot be taken as is: no block, bad standard keys,
/// or missing/invalid fields.
pub fn fast_path<'a>(
    raw: &'a str,
    schema: &Value,
    schema_id: &str,
) -> Result<FastPath<'a>, FastPathError> {
    let validator = Validator::new(schema).map_err(FastPathError::Schema)?;
    fast_path_with(raw, schema, schema_id, &validator)
}

/// [`fast_path`] with the schema's validator compiled beforehand (a process that checks many
/// outputs of one schema compiles it once).
///
/// # Errors
/// As [`fast_path`].
pub fn fast_path_with<'a>(
    raw: &'a str,
    schema: &Value,
    schema_id: &str,
    validator: &Validator,
) -> Result<FastPath<'a>, FastPathError> {
    let parts = split(raw);
    let Some(yaml) = parts.yaml else {
        return Err(FastPathError::NoFrontmatter);
    };
    let errors = standard_key_errors(&minimal_fields(yaml));
    if !errors.is_empty() {
        return Err(FastPathError::Standard(errors));
    }
    let output = candidate(yaml, schema);
    if let Err(e) = validator.validate(&output, schema_id) {
        let message = match e {
            SchemaError::Invalid { message, .. } => message,
            other => other.to_string(),
        };
        return Err(FastPathError::Mismatch {
            missing: missing_required(schema, &output),
            message,
            candidate: output,
        });
    }
    Ok(FastPath {
        output,
        body: parts.body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(s: &str) -> Value {
        Value::from_json_str(s).unwrap()
    }

    /// The plain reading of a block is what the full parse gives, and blocks it is not sure
    /// of are left to the full parse.
    #[test]
    fn plain_blocks_read_as_the_full_parse_reads_them() {
        let full = |y: &str| match crate::workflow::yaml::parse_str(y, None, "t") {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        };
        for y in [
            "$status: continue\nnote: step 3",
            "a: b c, d. (e) f/g-h_i\n\nx_y-z: W",
            "plan: add a login check\n",
        ] {
            assert_eq!(plain_map(y), full(y), "{y:?}");
            assert!(plain_map(y).is_some(), "{y:?}");
        }
        for y in [
            "a: yes",
            "a: True",
            "a: null",
            "a: 1",
            "a: b: c",
            "a: b # c",
            "a:b",
            " a: b",
            "a: 'b'",
            "a: b\na: c",
            "1a: b",
            "-a: b",
            "a: b ",
            "a: .inf",
            "a:\n  - b",
            "a: b\r",
            "",
        ] {
            assert_eq!(plain_map(y), None, "{y:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_plain_block_reads_as_the_full_parse(
            lines in proptest::collection::vec(
                ("[A-Za-z_$][A-Za-z0-9_$-]{0,6}", "[A-Za-z][A-Za-z0-9 _.,/()-]{0,12}"),
                0..6,
            )
        ) {
            let y: Vec<String> = lines.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            let y = y.join("\n");
            if let Some(m) = plain_map(&y) {
                let full = match crate::workflow::yaml::parse_str(&y, None, "t") {
                    Ok(Value::Object(m)) => Some(m),
                    _ => None,
                };
                proptest::prop_assert_eq!(Some(m), full);
            }
        }
    }

    #[test]
    fn split_rules() {
        let s = split("---\na: 1\n---\n\nbody\n");
        assert_eq!(s.yaml, Some("a: 1"));
        assert_eq!(s.body, "body\n");
        assert_eq!(split(" ---\na: 1\n---\n").yaml, None);
        assert_eq!(split("---a\n---\n").yaml, None);
        assert_eq!(split("---\na: 1\n").yaml, None);
        assert_eq!(
            split("---\n---\nrest"),
            Split {
                yaml: Some(""),
                body: "rest"
            }
        );
        assert_eq!(split("---\r\na: 1\n---").yaml, Some("\r\na: 1"));
        assert_eq!(split("no block").body, "no block");
    }

    #[test]
    fn status_only_schema() {
        let out = fast_path("---\nstatus: done\n---\n", &j(r#"{"type":"object"}"#), "X").unwrap();
        assert_eq!(out.output.to_json(), r#"{"status":"done"}"#);
    }

    #[test]
    fn fields_from_full_yaml() {
        let schema = j(
            r#"{"type":"object","properties":{"$status":{"enum":["ready","insufficient_info"]},"plan":{"type":"string"},"steps":{"type":"array","items":{"type":"string"}}},"required":["$status","plan"]}"#,
        );
        let raw = "---\n$status: ready\nplan: abc123\nsteps:\n  - one\n  - two\nextra: ignored\n---\n\n# Work\n";
        let out = fast_path(raw, &schema, "X").unwrap();
        assert_eq!(
            out.output.to_json(),
            r#"{"$status":"ready","plan":"abc123","steps":["one","two"]}"#
        );
        assert_eq!(out.body, "# Work\n");
    }

    #[test]
    fn status_is_coerced_or_raw() {
        let schema = j(r#"{"type":"object","properties":{"status":{"type":"string"}}}"#);
        let c = candidate("status: Done", &schema);
        assert_eq!(c.to_json(), r#"{"status":"done"}"#);
        let c = candidate("status: ready", &schema);
        assert_eq!(c.to_json(), r#"{"status":"ready"}"#);
        let c = candidate("other: 1", &schema);
        assert_eq!(c.to_json(), r#"{"status":null}"#);
    }

    #[test]
    fn reviewer_boolean() {
        let schema = j(
            r#"{"type":"object","properties":{"approved":{"type":"boolean"},"comments":{"type":"string"}},"required":["approved"]}"#,
        );
        let out = fast_path("---\napproved: true\n---\nLGTM", &schema, "X").unwrap();
        assert_eq!(out.output.to_json(), r#"{"approved":true}"#);
    }

    #[test]
    fn failures_name_the_fields() {
        let schema = j(
            r#"{"type":"object","properties":{"plan":{"type":"string"},"n":{"type":"number"}},"required":["plan","n"]}"#,
        );
        let e = fast_path("---\nn: 1\n---\n", &schema, "X").unwrap_err();
        assert!(matches!(&e, FastPathError::Mismatch { missing, .. } if missing == &["plan"]));
        assert!(e.to_string().contains("missing fields: plan"), "{e}");
        let e = fast_path("---\nplan: p\nn: many\n---\n", &schema, "X").unwrap_err();
        assert!(matches!(&e, FastPathError::Mismatch { missing, .. } if missing.is_empty()));
        assert!(e.to_string().contains("/n"), "{e}");
        assert_eq!(
            fast_path("plain text", &schema, "X").unwrap_err(),
            FastPathError::NoFrontmatter
        );
        let e = fast_path("---\nconfidence: 5\nnext: a b\n---\n", &schema, "X").unwrap_err();
        assert!(
            matches!(&e, FastPathError::Standard(v) if v.len() == 2),
            "{e}"
        );
    }

    #[test]
    fn union_schema() {
        let schema = j(
            r#"{"oneOf":[{"type":"object","properties":{"$status":{"const":"ready"},"summary":{"type":"string"}},"required":["$status","summary"]},
                         {"type":"object","properties":{"$status":{"const":"blocked"},"reason":{"type":"string"}},"required":["$status","reason"]}]}"#,
        );
        let out = fast_path(
            "---\n$status: blocked\nreason: no access\n---\n",
            &schema,
            "X",
        )
        .unwrap();
        assert_eq!(
            out.output.to_json(),
            r#"{"$status":"blocked","reason":"no access"}"#
        );
        let e = fast_path("---\n$status: ready\n---\n", &schema, "X").unwrap_err();
        assert!(
            matches!(&e, FastPathError::Mismatch { missing, .. } if missing == &["summary"]),
            "{e}"
        );
    }

    #[test]
    fn includes_in_agent_output_are_not_followed() {
        let schema = j(r#"{"type":"object","properties":{"a":{"type":"string"}}}"#);
        let c = candidate("a: !include /etc/passwd", &schema);
        assert_eq!(c.to_json(), "{}");
    }
}
