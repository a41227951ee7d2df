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

/// Whether the value `v` of key `k` names a variable that holds a secret instead of holding
/// one: `apiKeyEnv: OPENAI_API_KEY`, or a value that is only `${VAR}`. A restored config needs
/// it to know what to read.
pub(crate) fn names_a_variable(k: &str, v: &Value) -> bool {
    let var = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
    v.as_str().is_some_and(|s| {
        (k.ends_with("Env") && var(s))
            || s.strip_prefix("${")
                .and_then(|r| r.strip_suffix('}'))
                .is_some_and(var)
    })
}

/// `doc` with every value under a secret key masked: strings, numbers and booleans become
/// [`PLACEHOLDER`], maps and lists keep their shape, nulls stay null. A value that only names
/// a variable ([`names_a_variable`]) is kept.
pub(crate) fn redact(doc: &Value) -> Value {
    walk(doc, false)
}

fn walk(v: &Value, secret: bool) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::default();
            for (k, x) in m {
                let kept = names_a_variable(k, x);
                out.insert(k.clone(), walk(x, !kept && (secret || is_secret_key(k))));
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
            r#"{"providers":{"openai":{"baseUrl":"https://x","apiKey":"sk-1"},
                             "o":{"apiKeyEnv":"OPENAI_API_KEY","apiKey":"${O_KEY}"},
                             "p":{"apiKeyEnv":"sk-not a name","apiKey":"${O_KEY}x"}},
                "agents":{"a":{"command":"uwf-a","args":["--x"]}},
                "credentials":{"token":["t1",{"n":2}],"Password":7,"none":null},
                "defaultAgent":"a"}"#,
        )
        .unwrap();
        let r = redact(&doc).to_json();
        assert_eq!(
            r,
            r#"{"providers":{"openai":{"baseUrl":"https://x","apiKey":"***MASKED***"},"o":{"apiKeyEnv":"OPENAI_API_KEY","apiKey":"${O_KEY}"},"p":{"apiKeyEnv":"***MASKED***","apiKey":"***MASKED***"}},"agents":{"a":{"command":"uwf-a","args":["--x"]}},"credentials":{"token":["***MASKED***",{"n":"***MASKED***"}],"Password":"***MASKED***","none":null},"defaultAgent":"a"}"#
        );
    }
}
