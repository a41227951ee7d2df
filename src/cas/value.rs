//! The JSON data model of payloads, with JavaScript number semantics.
//!
//! Every number is an `f64`, as in JavaScript: JSON and YAML numbers are read as the nearest
//! double, and printed the way `JSON.stringify` prints them. Objects keep their key order
//! (canonical CBOR order once a node has been stored).

use indexmap::IndexMap;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::fmt;

/// An object: keys in insertion order. Make one with `Map::default()` or
/// `Map::with_capacity_and_hasher(n, Default::default())`.
pub type Map = IndexMap<String, Value, foldhash::fast::RandomState>;

/// A JSON value with JavaScript number semantics.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// `null`
    #[default]
    Null,
    /// `true` / `false`
    Bool(bool),
    /// Any number, as a double.
    Number(f64),
    /// A UTF-8 string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object.
    Object(Map),
}

/// Largest integer that canonical CBOR writes as an integer: 2^53 - 1.
pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Why a JSON text could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JsonError(String);

impl Value {
    /// Parses JSON text with `JSON.parse` semantics (numbers become the nearest double).
    ///
    /// # Errors
    /// Returns the parser's message when the text is not JSON.
    pub fn from_json_str(s: &str) -> Result<Value, JsonError> {
        let mut de = serde_json::Deserializer::from_str(s);
        let v = Value::deserialize(&mut de).map_err(|e| JsonError(e.to_string()))?;
        de.end().map_err(|e| JsonError(e.to_string()))?;
        Ok(v)
    }

    /// Compact JSON exactly as `JSON.stringify(value)` writes it.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        write_json(self, &mut out);
        out
    }

    /// Indented JSON exactly as `JSON.stringify(value, null, 2)` writes it.
    pub fn to_json_pretty(&self) -> String {
        let mut out = String::new();
        write_json_pretty(self, 0, &mut out);
        out
    }

    /// The value of `key` if this is an object holding it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.get(key),
            _ => None,
        }
    }

    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The object inside, if this is an object.
    pub(crate) fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The array inside, if this is an array.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The number inside, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// Shorthand for a string value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// Converts to a `serde_json::Value` (for schema validation and interop).
    pub(crate) fn to_serde_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(n) => number_to_serde(*n),
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(a) => {
                serde_json::Value::Array(a.iter().map(Value::to_serde_json).collect())
            }
            Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_serde_json()))
                    .collect(),
            ),
        }
    }

    /// Converts from a `serde_json::Value`, applying the f64 rule to numbers.
    pub(crate) fn from_serde_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(a) => {
                Value::Array(a.iter().map(Value::from_serde_json).collect())
            }
            serde_json::Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), Value::from_serde_json(v)))
                    .collect(),
            ),
        }
    }
}

/// Whether `n` is written as an integer (CBOR major 0/1, JSON without fraction).
#[inline]
pub(crate) fn is_safe_integer(n: f64) -> bool {
    n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER
}

fn number_to_serde(n: f64) -> serde_json::Value {
    if is_safe_integer(n) {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// Appends `n` as JavaScript's `Number.prototype.toString` writes it (`JSON.stringify` writes
/// `null` for NaN and the infinities).
pub(crate) fn write_js_number(n: f64, out: &mut String) {
    if !n.is_finite() {
        out.push_str("null");
    } else if is_safe_integer(n) {
        // -0 prints as 0.
        out.push_str(&(n as i64).to_string());
    } else {
        let mut b = ryu_js::Buffer::new();
        out.push_str(b.format_finite(n));
    }
}

/// Appends `s` as a JSON string literal, escaped as `JSON.stringify` escapes it.
pub(crate) fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match esc {
            Some(e) => out.push_str(e),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 15) as usize] as char);
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_js_number(*n, out),
        Value::String(s) => write_json_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in js_entries(m).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                write_json(x, out);
            }
            out.push('}');
        }
    }
}

fn write_json_pretty(v: &Value, depth: usize, out: &mut String) {
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    match v {
        Value::Array(a) if !a.is_empty() => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_json_pretty(x, depth + 1, out);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(m) if !m.is_empty() => {
            out.push('{');
            for (i, (k, x)) in js_entries(m).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_json_string(k, out);
                out.push_str(": ");
                write_json_pretty(x, depth + 1, out);
            }
            newline(out, depth);
            out.push('}');
        }
        _ => write_json(v, out),
    }
}

/// `Some(n)` when `k` is the canonical decimal form of a JavaScript array index
/// (`0 ..= 2^32−2`, no leading zero, no sign).
pub(crate) fn array_index(k: &str) -> Option<u32> {
    if k.is_empty() || k.len() > 10 || !k.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if k.len() > 1 && k.starts_with('0') {
        return None;
    }
    let n: u64 = k.parse().ok()?;
    (n < u64::from(u32::MAX)).then_some(n as u32)
}

/// The entries of `m` in a JavaScript object's property order: array-index keys (`"42"`)
/// first in ascending numeric order, then the other keys in insertion order.
pub(crate) fn js_entries(m: &Map) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    if entries.iter().any(|(k, _)| array_index(k).is_some()) {
        // A stable sort keeps the insertion order of the other keys.
        entries.sort_by_key(|(k, _)| array_index(k).map_or((1, 0), |n| (0, n)));
    }
    entries
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) if is_safe_integer(*n) => s.serialize_i64(*n as i64),
            Value::Number(n) => s.serialize_f64(*n),
            Value::String(x) => s.serialize_str(x),
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for x in a {
                    seq.serialize_element(x)?;
                }
                seq.end()
            }
            Value::Object(m) => {
                // A JavaScript object's property order, as `to_json` writes it.
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, x) in js_entries(m) {
                    map.serialize_entry(k, x)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v as f64))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(Value::Number(v as f64))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(Value::Number(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Number(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(x) = seq.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::with_capacity_and_hasher(
            map.size_hint().unwrap_or(0).min(4096),
            Default::default(),
        );
        while let Some(k) = map.next_key::<KeyString>()? {
            let v: Value = map.next_value()?;
            // JSON.parse: a repeated key keeps its first position and takes the last value.
            m.insert(k.0, v);
        }
        Ok(Value::Object(m))
    }
}

/// A map key; YAML keys that are numbers or booleans become their string form, as in JavaScript.
struct KeyString(String);

impl<'de> Deserialize<'de> for KeyString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KeyString, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map key")
            }
            fn visit_str<E>(self, v: &str) -> Result<KeyString, E> {
                Ok(KeyString(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<KeyString, E> {
                Ok(KeyString(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<KeyString, E> {
                Ok(KeyString(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<KeyString, E> {
                Ok(KeyString(js_number_string(v as f64)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<KeyString, E> {
                Ok(KeyString(js_number_string(v as f64)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<KeyString, E> {
                Ok(KeyString(js_number_string(v)))
            }
            fn visit_unit<E>(self) -> Result<KeyString, E> {
                Ok(KeyString("null".to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<KeyString, A::Error> {
                Err(de::Error::custom("a sequence cannot be a map key"))
            }
            fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<KeyString, A::Error> {
                Err(de::Error::custom("a mapping cannot be a map key"))
            }
        }
        d.deserialize_any(V)
    }
}

/// `String(n)` in JavaScript.
pub(crate) fn js_number_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let mut s = String::new();
    write_js_number(n, &mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_javascript() {
        let v =
            Value::from_json_str("[1.0,-0,1e21,0.1,9007199254740993,1e-400,5e-324,1.5]").unwrap();
        assert_eq!(v.to_json(), "[1,0,1e+21,0.1,9007199254740992,0,5e-324,1.5]");
    }

    #[test]
    fn pretty_json_as_javascript_indents_it() {
        let v = Value::from_json_str(r#"{"b":[1,{"c":null}],"2":{},"a":[],"s":"x\"y"}"#).unwrap();
        assert_eq!(
            v.to_json_pretty(),
            "{\n  \"2\": {},\n  \"b\": [\n    1,\n    {\n      \"c\": null\n    }\n  ],\n  \"a\": [],\n  \"s\": \"x\\\"y\"\n}"
        );
        assert_eq!(Value::Number(1.5).to_json_pretty(), "1.5");
    }

    #[test]
    fn integer_like_keys_come_first_as_in_javascript() {
        let v =
            Value::from_json_str(r#"{"b":1,"42":2,"a":3,"7":4,"07":5,"4294967295":6}"#).unwrap();
        assert_eq!(
            v.to_json(),
            r#"{"7":4,"42":2,"b":1,"a":3,"07":5,"4294967295":6}"#
        );
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        let v = Value::str("a\"\\\n\u{1}\u{7f}\u{2028}é");
        assert_eq!(v.to_json(), "\"a\\\"\\\\\\n\\u0001\u{7f}\u{2028}é\"");
    }

    #[test]
    fn duplicate_keys_keep_last_value() {
        let v = Value::from_json_str(r#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(v.to_json(), r#"{"a":3,"b":2}"#);
    }
}
