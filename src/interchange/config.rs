//! `config.yaml` for an export: the same document with every secret value replaced by a
//! placeholder, so the exported root opens in the TypeScript tool (whose `thread exec`
//! refuses a root without a config) without carrying keys along. `.env` is never exported.

use crate::cas::Value;
use crate::cas::value::Map;

/// What a secret value becomes (the TypeScript tool's `config list` mask).
pub(crate) const PLACEHOLDER: &str = "***MASKED***";

/// Whether a key names a secret: it contains `key`, `token`, `secret` or `password`, in any
/// case (`apiKey`, `api_key`, `accessToken`, `clientSecret`, …). Erring towards masking is
/// safe: a masked value is refilled by hand, a leaked one cannot be taken back.
pub(crate) fn is_secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    ["key", "token", "secret", "password", "passwd"]
        .iter()
        .any(|w| k.contains(w))
}

/// `doc` with every value under a secret key masked: strings, numbers and booleans become
/// [`PLACEHOLDER`], maps and lists keep their shape, nulls stay null.
pub(crate) fn redact(doc: &Value) -> Value {
    walk(doc, false)
}

fn walk(v: &Value, secret: bool) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(k.clone(), walk(x, secret || is_secret_key(k)));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, secret)).collect()),
        Value::Null => Value::Null,
        _ if secret => Value::str(PLACEHOLDER),
        x => x.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_and_the_shape_is_kept() {
        let doc = Value::from_json_str(
            r#"{"providers":{"openai":{"baseUrl":"https://x","apiKey":"sk-1"}},
                "agents":{"a":{"command":"uwf-a","args":["--x"]}},
                "credentials":{"token":["t1",{"n":2}],"Password":7,"none":null},
                "defaultAgent":"a"}"#,
        )
        .unwrap();
        let r = redact(&doc).to_json();
        assert_eq!(
            r,
            r#"{"providers":{"openai":{"baseUrl":"https://x","apiKey":"***MASKED***"}},"agents":{"a":{"command":"uwf-a","args":["--x"]}},"credentials":{"token":["***MASKED***",{"n":"***MASKED***"}],"Password":"***MASKED***","none":null},"defaultAgent":"a"}"#
        );
    }
}
