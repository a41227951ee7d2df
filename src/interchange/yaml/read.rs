//! Reading a flat `name → string` map under the YAML 1.2 core schema, reporting the entries
//! it skips.

use super::scalar::core_non_string;
use indexmap::IndexMap;

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
