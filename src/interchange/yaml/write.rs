//! Block maps and sequences as the npm `yaml` package's `stringify` writes them.

use super::scalar::{Ctx, INDENT_STEP, NL, SP, U, spaces, stringify_string, u};
use crate::cas::Value;
use crate::cas::value::{array_index, js_entries, write_js_number};
use indexmap::IndexMap;

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
