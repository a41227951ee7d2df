//! Materialisation: a parsed workflow becomes the nodes to store.
//!
//! Each role's output schema becomes a schema node (typed by the meta-schema), with the title
//! `<workflow>.<role>` added when it has none, and the workflow payload references those nodes by
//! id. A workflow the TypeScript tool can express is stored exactly as that tool stores it (type
//! `AZF3FA1TN3D4A`), so the same YAML gets the same id in both tools; any other workflow is stored
//! under the extended schema of [`extended_schema`].

use super::WorkflowError;
use super::model::{Role, StoredWorkflow, Workflow, WorkflowDef};
use super::nodes::WORKFLOW;
use crate::cas::schema::check_schema;
use crate::cas::{NodeId, Value, bootstrap, cbor, hash};
use indexmap::IndexMap;
use std::sync::OnceLock;

/// A schema node to put: typed by the meta-schema.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaNode {
    /// Its id (`hash(meta, payload)`).
    pub id: NodeId,
    /// The JSON Schema.
    pub payload: Value,
}

impl SchemaNode {
    /// A schema node for `payload`, its id computed.
    pub(crate) fn new(payload: Value) -> SchemaNode {
        let id = hash::node_id(bootstrap::META, &cbor::encode(&payload));
        SchemaNode { id, payload }
    }
}

/// The nodes a workflow turns into.
#[derive(Debug, Clone, PartialEq)]
pub struct Materialized {
    /// Schema nodes to put first (typed by the meta-schema): the extended Workflow schema when
    /// [`workflow_type`](Self::workflow_type) is that schema, then each role's output schema, in
    /// role order, without repeats.
    pub schemas: Vec<SchemaNode>,
    /// The type of the workflow node: `AZF3FA1TN3D4A` or the extended schema's id.
    pub workflow_type: NodeId,
    /// The workflow node's payload.
    pub workflow: Value,
    /// The workflow node's id.
    pub workflow_id: NodeId,
    /// The workflow with schema ids, as a moderator reads it back.
    pub stored: StoredWorkflow,
}

/// The extended Workflow schema (title `uwf/WorkflowExt`): transition-list graphs with named
/// JSONata `conditions`, and `systemPrompt`/`outputSchema` roles next to the TypeScript tool's
/// role form. Schema references are `ocas_ref` strings under `anyOf`, so refs and walks of the
/// TypeScript tool's CAS library follow them.
pub fn extended_schema() -> &'static SchemaNode {
    static S: OnceLock<SchemaNode> = OnceLock::new();
    S.get_or_init(|| {
        let payload = Value::from_json_str(include_str!("workflow_ext.schema.json"))
            .expect("workflow_ext.schema.json is valid JSON");
        SchemaNode::new(payload)
    })
}

/// A role's schema as stored: the inline schema with `title: "<wf>.<role>"` when it has none.
pub(crate) fn titled_schema(workflow: &str, role: &str, schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Value::Object(m) = &mut s
        && !m.contains_key("title")
    {
        m.insert("title".into(), Value::str(format!("{workflow}.{role}")));
    }
    s
}

/// Turns a parsed workflow into the nodes to store.
///
/// The caller should have validated it ([`super::validate()`]); this checks only what storing
/// needs: that every role schema passes the ocas meta-schema rules.
///
/// # Errors
/// [`WorkflowError::Schema`] naming the role whose schema cannot be registered.
pub fn materialize(def: &WorkflowDef) -> Result<Materialized, WorkflowError> {
    let mut schemas: Vec<SchemaNode> = Vec::new();
    let mut roles = IndexMap::new();
    for (name, role) in &def.roles {
        let payload = titled_schema(&def.name, name, &role.schema);
        check_schema(&payload).map_err(|source| WorkflowError::Schema {
            role: name.clone(),
            source,
        })?;
        let node = SchemaNode::new(payload);
        let id = node.id;
        if !schemas.iter().any(|s| s.id == id) {
            schemas.push(node);
        }
        roles.insert(
            name.clone(),
            Role {
                description: role.description.clone(),
                brief: role.brief.clone(),
                schema: id,
            },
        );
    }
    let stored = Workflow {
        name: def.name.clone(),
        description: def.description.clone(),
        roles,
        conditions: def.conditions.clone(),
        graph: def.graph.clone(),
    };
    let workflow = stored.to_payload();
    let workflow_type = if stored.is_ts_compatible() {
        WORKFLOW
    } else {
        let ext = extended_schema().clone();
        let id = ext.id;
        schemas.insert(0, ext);
        id
    };
    let workflow_id = hash::node_id(workflow_type, &cbor::encode(&workflow));
    Ok(Materialized {
        schemas,
        workflow_type,
        workflow,
        workflow_id,
        stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::schema::Validator;
    use crate::workflow::nodes::WORKFLOW_EXT;

    #[test]
    fn extended_schema_is_registrable() {
        let s = extended_schema();
        assert_eq!(s.id, WORKFLOW_EXT);
        check_schema(&s.payload).unwrap();
        Validator::new(&s.payload).unwrap();
        assert_ne!(s.id, WORKFLOW);
        assert_eq!(WORKFLOW.to_string(), "AZF3FA1TN3D4A");
    }

    #[test]
    fn title_added_only_when_absent() {
        let s = Value::from_json_str(r#"{"type":"object"}"#).unwrap();
        assert_eq!(
            titled_schema("wf", "r", &s).to_json(),
            r#"{"type":"object","title":"wf.r"}"#
        );
        let s = Value::from_json_str(r#"{"type":"object","title":"T"}"#).unwrap();
        assert_eq!(titled_schema("wf", "r", &s).to_json(), s.to_json());
    }
}
