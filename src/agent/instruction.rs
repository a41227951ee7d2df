//! The output-format instruction an agent gets: how to write the YAML frontmatter that the
//! fast path reads, derived from the role's output schema (the TypeScript tool's text).

use super::fields::{SchemaField, schema_fields};
use crate::cas::Value;
use crate::workflow::mustache::js_string;

/// A property schema with a nullable union unwrapped (`anyOf: [X, {type: null}]` → `X`).
fn resolve(prop: &Value) -> &Value {
    if matches!(prop.get("enum"), Some(Value::Array(e)) if !e.is_empty()) {
        return prop;
    }
    let variants = match (prop.get("anyOf"), prop.get("oneOf")) {
        (Some(Value::Array(v)), _) => v,
        (_, Some(Value::Array(v))) => v,
        _ => return prop,
    };
    let non_null: Vec<&Value> = variants
        .iter()
        .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
        .collect();
    if non_null.len() == 1 {
        non_null[0]
    } else {
        prop
    }
}

fn comment(parts: &[String]) -> String {
    let parts: Vec<&str> = parts
        .iter()
        .map(String::as_str)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("  # {}", parts.join(" | "))
    }
}

fn example_line(f: &SchemaField) -> String {
    let r = resolve(&f.schema);
    let mut parts = Vec::new();
    if f.required {
        parts.push("required".to_string());
    }
    if let Some(Value::Array(e)) = r.get("enum")
        && !e.is_empty()
    {
        parts.extend(e.iter().map(js_string));
        return format!("{}: {}{}", f.name, js_string(&e[0]), comment(&parts));
    }
    let ty = r.get("type").and_then(Value::as_str);
    let value = match ty {
        Some("boolean") => {
            parts.push("true".into());
            parts.push("false".into());
            "true"
        }
        Some("string") => "<string>",
        Some("number" | "integer") => "<number>",
        Some("array") => "\n  - <item>",
        Some("object") => "<object>",
        _ => "<value>",
    };
    if ty == Some("array") {
        return format!("{}:{value}{}", f.name, comment(&parts));
    }
    format!("{}: {value}{}", f.name, comment(&parts))
}

fn example_block(fields: &[SchemaField]) -> String {
    if fields.is_empty() {
        return "---\n\n... your markdown work here ...".into();
    }
    let lines: Vec<String> = fields.iter().map(example_line).collect();
    format!(
        "---\n{}\n---\n\n... your markdown work here ...",
        lines.join("\n")
    )
}

fn field_list(fields: &[SchemaField]) -> String {
    if fields.is_empty() {
        return "  (schema fields will be extracted automatically)".into();
    }
    fields
        .iter()
        .map(|f| {
            let suffix = if f.required { " (required)" } else { "" };
            format!("  - `{}`{suffix}", f.name)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_const(p: &Value) -> bool {
    p.get("const").is_some() || matches!(p.get("enum"), Some(Value::Array(e)) if e.len() == 1)
}

fn discriminant(variants: &[Value]) -> Option<String> {
    let mut candidates: Vec<&str> = Vec::new();
    for v in variants {
        let Some(Value::Object(props)) = v.get("properties") else {
            return None;
        };
        for (name, p) in props {
            if is_const(p) && !candidates.contains(&name.as_str()) {
                candidates.push(name);
            }
        }
    }
    candidates
        .into_iter()
        .find(|name| {
            variants.iter().all(|v| {
                v.get("properties")
                    .and_then(|p| p.get(name))
                    .is_some_and(is_const)
            })
        })
        .map(str::to_string)
}

fn const_value(p: Option<&Value>) -> String {
    let Some(p) = p else {
        return "<unknown>".into();
    };
    if let Some(c) = p.get("const") {
        return js_string(c);
    }
    match p.get("enum") {
        Some(Value::Array(e)) if e.len() == 1 => js_string(&e[0]),
        _ => "<unknown>".into(),
    }
}

const CLOSING: &str = "Focus exclusively on YOUR role's deliverable. Do not perform actions outside your role's scope.";

/// The `## Deliverable Format` instruction for a role with output schema `schema`.
///
/// A `oneOf`/`anyOf` schema whose variants share a const discriminant (e.g. `$status`) gets one
/// block per variant; any other schema gets one example block and the field list.
pub(crate) fn output_format_instruction(schema: &Value) -> String {
    let union = match (schema.get("oneOf"), schema.get("anyOf")) {
        (Some(Value::Array(v)), _) => Some(v),
        (_, Some(Value::Array(v))) => Some(v),
        _ => None,
    };
    if let Some(variants) = union
        && variants.len() > 1
        && let Some(disc) = discriminant(variants)
    {
        let blocks: Vec<String> = variants
            .iter()
            .map(|v| {
                let fields = schema_fields(v);
                let value = const_value(v.get("properties").and_then(|p| p.get(&disc)));
                format!(
                    "### When `{disc}: {value}`\n\n```\n{}\n```\n\nFields:\n{}",
                    example_block(&fields),
                    field_list(&fields)
                )
            })
            .collect();
        return format!(
            "## Deliverable Format\n\nYour response MUST begin with a YAML frontmatter block followed by your markdown work.\n\nChoose ONE of the following variants based on your outcome:\n\n{}\n\nThe frontmatter is the **primary deliverable** — the engine reads it directly.\nOutput ONLY the fields listed for your chosen variant. Do not add extra fields that are not specified in the schema.\n\n{CLOSING}",
            blocks.join("\n\n")
        );
    }
    let fields = schema_fields(schema);
    format!(
        "## Deliverable Format\n\nYour response MUST begin with a YAML frontmatter block followed by your markdown work:\n\n```\n{}\n```\n\nThe frontmatter is the **primary deliverable** — the engine reads it directly.\nYour meta output must satisfy these fields:\n\n{}\n\nOutput ONLY the fields listed above. Do not add extra fields that are not specified in the schema.\n\n{CLOSING}",
        example_block(&fields),
        field_list(&fields)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(s: &str) -> Value {
        Value::from_json_str(s).unwrap()
    }

    #[test]
    fn flat_schema() {
        let s = j(
            r#"{"type":"object","properties":{"status":{"type":"string","enum":["ready","insufficient_info"]},"plan":{"type":"string"},"approved":{"type":"boolean"},"n":{"anyOf":[{"type":"integer"},{"type":"null"}]},"tags":{"type":"array"},"x":{}},"required":["status","approved"]}"#,
        );
        let t = output_format_instruction(&s);
        assert!(t.starts_with("## Deliverable Format\n"));
        assert!(
            t.contains("status: ready  # required | ready | insufficient_info\n"),
            "{t}"
        );
        assert!(t.contains("plan: <string>\n"));
        assert!(t.contains("approved: true  # required | true | false\n"));
        assert!(t.contains("n: <number>\n"));
        assert!(t.contains("tags:\n  - <item>\n"));
        assert!(t.contains("x: <value>\n---"));
        assert!(t.contains("  - `status` (required)\n  - `plan`\n"));
        assert!(t.contains("**primary deliverable**"));
        assert!(t.ends_with(CLOSING));
    }

    #[test]
    fn no_properties() {
        let t = output_format_instruction(&j(r#"{"type":"object"}"#));
        assert!(t.contains("```\n---\n\n... your markdown work here ...\n```"));
        assert!(t.contains("(schema fields will be extracted automatically)"));
    }

    #[test]
    fn discriminated_union() {
        let s = j(
            r#"{"oneOf":[{"type":"object","properties":{"$status":{"const":"ready"},"summary":{"type":"string"}},"required":["$status","summary"]},
                         {"type":"object","properties":{"$status":{"enum":["blocked"]},"reason":{"type":"string"}},"required":["$status"]}]}"#,
        );
        let t = output_format_instruction(&s);
        assert!(t.contains("Choose ONE of the following variants"));
        assert!(t.contains("### When `$status: ready`\n\n```\n---\n$status: <value>  # required\nsummary: <string>  # required\n---"), "{t}");
        assert!(
            t.contains("$status: blocked  # required | blocked\n"),
            "{t}"
        );
        assert!(t.contains("### When `$status: blocked`"));
        assert!(t.contains("Fields:\n  - `$status` (required)\n  - `reason`"));
    }
}
