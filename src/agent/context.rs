//! What an agent is given for one step (`uwf agent context`), assembled from values the store
//! has already read.

use super::instruction::output_format_instruction;
use crate::cas::Value;
use crate::cas::value::Map;
use crate::workflow::{History, Role};

/// The agent context as JSON:
/// `{start, steps: [{role, output, detail, agent}], role: {name, description, goal,
/// capabilities, procedure, output | systemPrompt, outputSchema}, outputFormat, edgePrompt}`.
///
/// `schema` is the role's output schema (the payload of its schema node); `edge_prompt` is the
/// moderator's rendered prompt (`None` for transition-list graphs).
pub(crate) fn agent_context<S>(
    history: &History,
    role_name: &str,
    role: &Role<S>,
    schema: &Value,
    edge_prompt: Option<&str>,
) -> Value {
    let ctx = history.context();
    let mut r = Map::default();
    r.insert("name".into(), Value::str(role_name));
    r.insert("description".into(), Value::str(&role.description));
    role.brief.insert_into(&mut r);
    r.insert("outputSchema".into(), schema.clone());
    let mut out = Map::default();
    out.insert(
        "start".into(),
        ctx.get("start").cloned().unwrap_or_default(),
    );
    out.insert(
        "steps".into(),
        ctx.get("steps").cloned().unwrap_or_default(),
    );
    out.insert("role".into(), Value::Object(r));
    out.insert(
        "outputFormat".into(),
        Value::str(output_format_instruction(schema)),
    );
    out.insert(
        "edgePrompt".into(),
        edge_prompt.map_or(Value::Null, Value::str),
    );
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::Brief;
    use crate::workflow::StepView;

    #[test]
    fn assembles_everything() {
        let schema = Value::from_json_str(
            r#"{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}"#,
        )
        .unwrap();
        let role = Role {
            description: "Reviews".into(),
            brief: Brief::SystemPrompt("You review.".into()),
            schema: (),
        };
        let history = History {
            start: Value::from_json_str(r#"{"workflow":"W","prompt":"p","cwd":"/"}"#).unwrap(),
            steps: vec![StepView {
                role: "dev".into(),
                output: Value::from_json_str(r#"{"summary":"s"}"#).unwrap(),
                detail: "D".into(),
                agent: "a".into(),
            }],
        };
        let c = agent_context(&history, "reviewer", &role, &schema, Some("Review it"));
        assert_eq!(
            c.get("steps").unwrap().to_json(),
            r#"[{"role":"dev","output":{"summary":"s"},"detail":"D","agent":"a"}]"#
        );
        assert_eq!(
            c.get("role").unwrap().get("systemPrompt"),
            Some(&Value::str("You review."))
        );
        assert_eq!(c.get("edgePrompt"), Some(&Value::str("Review it")));
        let fmt = c.get("outputFormat").unwrap().as_str().unwrap();
        assert!(fmt.contains("approved: true  # required | true | false"));
    }
}
