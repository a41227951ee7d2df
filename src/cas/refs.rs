//! References: strings at schema positions with `format: "ocas_ref"` (interop §A.8, with
//! `oneOf` followed as well).

use super::value::Value;

/// Appends, in schema order, every string of `value` at an `ocas_ref` position of `schema`.
pub fn collect_refs<'v>(schema: &Value, value: &'v Value, out: &mut Vec<&'v str>) {
    let Value::Object(s) = schema else { return };
    if s.get("format").and_then(Value::as_str) == Some("ocas_ref")
        && let Value::String(r) = value
    {
        out.push(r);
        return;
    }
    let mut branched = false;
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(bs)) = s.get(key) {
            for b in bs {
                collect_refs(b, value, out);
            }
            branched = true;
        }
    }
    if branched {
        return;
    }
    if let Some(Value::Array(bs)) = s.get("allOf") {
        for b in bs {
            collect_refs(b, value, out);
        }
    }
    for key in ["if", "then", "else"] {
        if let Some(b) = s.get(key) {
            collect_refs(b, value, out);
        }
    }
    match value {
        Value::Array(items) if s.get("type").and_then(Value::as_str) == Some("array") => {
            let mut start = 0;
            if let Some(Value::Array(prefix)) = s.get("prefixItems") {
                for (p, v) in prefix.iter().zip(items.iter()) {
                    collect_refs(p, v, out);
                }
                start = prefix.len().min(items.len());
            }
            if let Some(it) = s.get("items") {
                for v in &items[start..] {
                    collect_refs(it, v, out);
                }
            }
            if let Some(c) = s.get("contains") {
                for v in items {
                    collect_refs(c, v, out);
                }
            }
            return;
        }
        Value::Object(obj) => {
            if let Some(Value::Object(props)) = s.get("properties") {
                for (k, ps) in props {
                    if let Some(v) = obj.get(k) {
                        collect_refs(ps, v, out);
                    }
                }
            }
            if let Some(ap @ Value::Object(_)) = s.get("additionalProperties") {
                for v in obj.values() {
                    collect_refs(ap, v, out);
                }
            }
            if let Some(Value::Object(pp)) = s.get("patternProperties") {
                for (pat, ps) in pp {
                    let Ok(re) = regex::Regex::new(pat) else {
                        continue;
                    };
                    for (k, v) in obj {
                        if re.is_match(k) {
                            collect_refs(ps, v, out);
                        }
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(n) = s.get("not") {
        collect_refs(n, value, out);
    }
}

/// Whether `schema` can hold any reference at all (lets callers skip payload traversal).
pub fn schema_has_refs(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("format").and_then(Value::as_str) == Some("ocas_ref")
                || m.iter().any(|(k, v)| {
                    !matches!(k.as_str(), "const" | "default" | "enum" | "examples")
                        && schema_has_refs(v)
                })
        }
        Value::Array(a) => a.iter().any(schema_has_refs),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_node_refs_follow_schema_order() {
        let schema = super::super::bootstrap::by_name("uwf/StepNode")
            .unwrap()
            .payload
            .clone();
        let payload = Value::from_json_str(r#"{"start":"2B77HPWKR4V3V","prev":null,"role":"a","output":"95ST8MZ0QTKP9","detail":"AAAAAAAAAAAAA","agent":"x","startedAtMs":1,"completedAtMs":2,"cwd":"/","assembledPrompt":"BBBBBBBBBBBBB"}"#).unwrap();
        let mut out = Vec::new();
        collect_refs(&schema, &payload, &mut out);
        assert_eq!(
            out,
            [
                "2B77HPWKR4V3V",
                "95ST8MZ0QTKP9",
                "AAAAAAAAAAAAA",
                "BBBBBBBBBBBBB"
            ]
        );
        assert!(schema_has_refs(&schema));
    }

    #[test]
    fn one_of_is_followed() {
        let schema = Value::from_json_str(
            r#"{"oneOf":[{"type":"string","format":"ocas_ref"},{"type":"null"}]}"#,
        )
        .unwrap();
        let v = Value::str("7VQ43ZSJTEWA7");
        let mut out = Vec::new();
        collect_refs(&schema, &v, &mut out);
        assert_eq!(out, ["7VQ43ZSJTEWA7"]);
    }
}
