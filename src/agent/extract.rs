//! The model half of two-layer extraction: the extract request of the TypeScript tool (its
//! `extract.ts`), reading the reply, and the corrective request that carries the validation
//! errors.

use crate::cas::Value;
use crate::llm::{ChatRequest, Message};

/// The system prompt of the extract request, before the schema.
const EXTRACT_SYSTEM: &str = "Extract structured data from the agent output. Reply with a single JSON object only, no markdown or prose. The JSON must validate against this JSON Schema:\n";

/// The extract request for `raw` against `schema`: a system message with the schema as
/// `JSON.stringify(schema, null, 2)`, the raw output as the user message, and
/// `response_format: {type: json_object}`.
pub fn extract_request(model: &str, schema: &Value, raw: &str) -> ChatRequest {
    ChatRequest {
        model: model.to_string(),
        messages: vec![
            Message::new(
                "system",
                format!("{EXTRACT_SYSTEM}{}", schema.to_json_pretty()),
            ),
            Message::new("user", raw),
        ],
        json_object: true,
        temperature: None,
    }
}

/// `req` followed by the model's `reply` and a user message naming why it was refused.
pub fn corrective_request(req: &ChatRequest, reply: &str, errors: &str) -> ChatRequest {
    let mut req = req.clone();
    req.messages.push(Message::new("assistant", reply));
    req.messages.push(Message::new(
        "user",
        format!(
            "That JSON does not validate against the schema: {errors}\nReply with the corrected JSON object only."
        ),
    ));
    req
}

/// The JSON object in a reply: a surrounding ```` ```json ```` fence is removed first.
///
/// # Errors
/// The reply is not JSON, or not an object.
pub fn parse_reply(content: &str) -> Result<Value, String> {
    let text = strip_fence(content.trim());
    match Value::from_json_str(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("the reply is JSON but not an object".into()),
        Err(e) => Err(format!("the reply is not JSON ({e})")),
    }
}

fn strip_fence(s: &str) -> &str {
    let Some(rest) = s.strip_prefix("```") else {
        return s;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    let rest = rest.trim_start();
    rest.strip_suffix("```").unwrap_or(rest).trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_of_the_typescript_tool() {
        let schema = Value::from_json_str(r#"{"type":"object","required":["a"]}"#).unwrap();
        let r = extract_request("m", &schema, "raw text");
        assert_eq!(
            r.body().to_json(),
            r#"{"model":"m","messages":[{"role":"system","content":"Extract structured data from the agent output. Reply with a single JSON object only, no markdown or prose. The JSON must validate against this JSON Schema:\n{\n  \"type\": \"object\",\n  \"required\": [\n    \"a\"\n  ]\n}"},{"role":"user","content":"raw text"}],"response_format":{"type":"json_object"}}"#
        );
        let c = corrective_request(&r, "{}", "missing a");
        assert_eq!(c.messages.len(), 4);
        assert_eq!(c.messages[2].role, "assistant");
        assert!(c.messages[3].content.contains("missing a"));
    }

    #[test]
    fn fences_and_bad_replies() {
        assert_eq!(
            parse_reply("```json\n{\"a\":1}\n```").unwrap().to_json(),
            r#"{"a":1}"#
        );
        assert_eq!(parse_reply(" {\"a\":1} ").unwrap().to_json(), r#"{"a":1}"#);
        assert_eq!(parse_reply("```\n{}\n```").unwrap().to_json(), "{}");
        assert!(parse_reply("[1]").unwrap_err().contains("not an object"));
        assert!(parse_reply("sure! here").unwrap_err().contains("not JSON"));
    }
}
