//! The fields of a role's output schema, as the agent kit reads them.

use crate::cas::Value;

/// One top-level field of an output schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaField {
    /// The property name.
    pub name: String,
    /// Its schema (of the first variant that declares it).
    pub schema: Value,
    /// True when any variant requires it.
    pub required: bool,
}

/// The object schemas of `schema`: itself when it has `properties`, else the object schemas of
/// its `anyOf` (or else `oneOf`) variants, recursively.
fn object_schemas(schema: &Value) -> Vec<&Value> {
    if matches!(schema.get("properties"), Some(Value::Object(_))) {
        return vec![schema];
    }
    let variants = match (schema.get("anyOf"), schema.get("oneOf")) {
        (Some(Value::Array(v)), _) => v,
        (_, Some(Value::Array(v))) => v,
        _ => return Vec::new(),
    };
    variants.iter().flat_map(object_schemas).collect()
}

/// Calls `f` with each top-level property of `schema` (over its `anyOf`/`oneOf` variants, a
/// name as often as variants declare it): its name, its schema and whether that variant
/// requires it.
fn each_property<'a>(schema: &'a Value, mut f: impl FnMut(&'a String, &'a Value, bool)) {
    for obj in object_schemas(schema) {
        let required: Vec<&str> = match obj.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let Some(Value::Object(props)) = obj.get("properties") else {
            continue;
        };
        for (name, prop) in props {
            f(name, prop, required.contains(&name.as_str()));
        }
    }
}

/// The top-level fields of `schema`, merged over `anyOf`/`oneOf` variants, in first-seen order.
pub(crate) fn schema_fields(schema: &Value) -> Vec<SchemaField> {
    let mut out: Vec<SchemaField> = Vec::new();
    each_property(schema, |name, prop, req| {
        match out.iter_mut().find(|f| &f.name == name) {
            None => out.push(SchemaField {
                name: name.clone(),
                schema: prop.clone(),
                required: req,
            }),
            Some(f) => f.required |= req,
        }
    });
    out
}

/// The names of [`schema_fields`], borrowed from `schema`.
pub(crate) fn field_names(schema: &Value) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    each_property(schema, |name, _, _| {
        if !out.contains(&name.as_str()) {
            out.push(name);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_variants() {
        let s = Value::from_json_str(
            r#"{"oneOf":[{"type":"object","properties":{"$status":{"const":"ready"},"summary":{"type":"string"}},"required":["$status"]},
                         {"type":"object","properties":{"$status":{"const":"blocked"},"reason":{"type":"string"}},"required":["$status","reason"]}]}"#,
        )
        .unwrap();
        let f = schema_fields(&s);
        let names: Vec<(&str, bool)> = f.iter().map(|f| (f.name.as_str(), f.required)).collect();
        assert_eq!(
            names,
            [("$status", true), ("summary", false), ("reason", true)]
        );
        assert!(schema_fields(&Value::from_json_str(r#"{"type":"object"}"#).unwrap()).is_empty());
        // The names alone, in the same order, each once.
        assert_eq!(field_names(&s), ["$status", "summary", "reason"]);
        assert!(field_names(&Value::from_json_str(r#"{"type":"object"}"#).unwrap()).is_empty());
    }
}
