//! The well-known schemas: the self-hashed meta-schema, the 7 primitive schemas, the
//! `@ocas/output/*` schemas and uwf's own schemas, with the ids the TypeScript tool gives.
//! Every store starts with them, save the schemas of the claude-code and hermes adapters,
//! which are written when first needed, as that tool's adapters write them.

use super::cbor;
use super::hash;
use super::id::NodeId;
use super::value::Value;
use std::sync::OnceLock;

/// The meta-schema id `CTS5P6RD8HMCS`.
pub const META: NodeId = NodeId::from_crockford("CTS5P6RD8HMCS");

/// Ids of well-known schemas, checked against the bootstrap table by a test.
pub mod ids {
    /// `{type:"string"}`: text nodes.
    pub const TEXT: &str = "7VQ43ZSJTEWA7";
    /// uwf Workflow (7a0c).
    pub const WORKFLOW: &str = "AZF3FA1TN3D4A";
    /// uwf StartNode (7a0c).
    pub const START_NODE: &str = "44P8EP6N3NXZ5";
    /// uwf StepNode (7a0c).
    pub const STEP_NODE: &str = "108DB063KRQWW";
}

/// One well-known schema node.
#[derive(Debug, Clone)]
pub struct BuiltinSchema {
    /// Alias, e.g. `@ocas/string` or `uwf/StepNode`.
    pub name: String,
    /// Its id.
    pub id: NodeId,
    /// The schema.
    pub payload: Value,
    /// Its canonical CBOR.
    pub cbor: Vec<u8>,
    /// Whether it is written when first needed rather than when a store is made.
    pub on_first_use: bool,
}

/// The schemas of the claude-code and hermes adapters (detail, turn, raw output): a store gets
/// them when an agent first writes such a node, or from an import.
const ON_FIRST_USE: [&str; 6] = [
    "uwf/claude-code-detail",
    "uwf/claude-code-turn",
    "uwf/claude-code-raw-output",
    "uwf/hermes-turn",
    "uwf/hermes-detail",
    "uwf/hermes-raw-output",
];

/// All built-in schema nodes, the meta-schema first, in the order bootstrap writes them (those
/// [`BuiltinSchema::on_first_use`] aside).
pub fn builtins() -> &'static [BuiltinSchema] {
    static B: OnceLock<Vec<BuiltinSchema>> = OnceLock::new();
    B.get_or_init(|| {
        let all = Value::from_json_str(include_str!("bootstrap.json"))
            .expect("bootstrap.json is valid JSON");
        let Value::Array(items) = all else {
            unreachable!("bootstrap.json is an array")
        };
        items
            .into_iter()
            .map(|e| {
                let name = e
                    .get("name")
                    .and_then(Value::as_str)
                    .expect("name")
                    .to_string();
                let payload = e.get("payload").expect("payload").clone();
                let cbor = cbor::encode(&payload);
                let id = if name == "@ocas/schema" {
                    hash::self_id(&cbor)
                } else {
                    hash::node_id(META, &cbor)
                };
                BuiltinSchema {
                    on_first_use: ON_FIRST_USE.contains(&name.as_str()),
                    name,
                    id,
                    payload,
                    cbor,
                }
            })
            .collect()
    })
}

/// The built-in schema called `name`.
pub fn by_name(name: &str) -> Option<&'static BuiltinSchema> {
    builtins().iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_ids_match_the_reference() {
        let all = Value::from_json_str(include_str!("bootstrap.json")).unwrap();
        let Value::Array(items) = all else { panic!() };
        for (b, e) in builtins().iter().zip(items.iter()) {
            assert_eq!(
                b.id.to_string(),
                e.get("hash").unwrap().as_str().unwrap(),
                "{}",
                b.name
            );
        }
        assert_eq!(builtins()[0].id, META);
        assert_eq!(builtins().iter().filter(|b| b.on_first_use).count(), 6);
        assert_eq!(META.to_string(), "CTS5P6RD8HMCS");
        assert_eq!(builtins()[0].cbor.len(), 1602);
        assert_eq!(by_name("@ocas/string").unwrap().id.to_string(), ids::TEXT);
        assert_eq!(
            by_name("uwf/StepNode").unwrap().id.to_string(),
            ids::STEP_NODE
        );
    }
}
