//! The workflow model: roles, conditions and the graph in either routing form.
//!
//! A [`Workflow`] is generic over how a role's output schema is held: [`WorkflowDef`] holds it
//! inline (as read from YAML), [`StoredWorkflow`] holds the id of the schema node (as read from a
//! stored Workflow payload).

use super::WorkflowError;
use crate::cas::value::Map;
use crate::cas::{NodeId, Value};
use indexmap::IndexMap;

/// The pseudo-node every thread starts from.
pub const START: &str = "$START";
/// The pseudo-role that ends a thread.
pub const END: &str = "$END";
/// The status of a single-exit edge.
pub(crate) const ANY_STATUS: &str = "_";

/// A workflow as read from YAML: output schemas inline.
pub type WorkflowDef = Workflow<Value>;
/// A workflow as stored: output schemas by id.
pub type StoredWorkflow = Workflow<NodeId>;

/// A workflow definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow<S> {
    /// The workflow name (the registry key).
    pub name: String,
    /// What the workflow does.
    pub description: String,
    /// Roles by name, in definition order.
    pub roles: IndexMap<String, Role<S>>,
    /// Named JSONata conditions (transition-list graphs only).
    pub conditions: IndexMap<String, Condition>,
    /// The routing graph.
    pub graph: Graph,
}

/// One role.
#[derive(Debug, Clone, PartialEq)]
pub struct Role<S> {
    /// What the role does.
    pub description: String,
    /// How the role is briefed.
    pub brief: Brief,
    /// The JSON Schema of the role's output (inline or by id).
    pub schema: S,
}

/// The two ways of briefing a role.
#[derive(Debug, Clone, PartialEq)]
pub enum Brief {
    /// `goal`, `capabilities`, `procedure`, `output` with a `frontmatter` (or `meta`) schema:
    /// the form the TypeScript tool stores.
    Charter {
        /// The role's goal.
        goal: String,
        /// What the role may do.
        capabilities: Vec<String>,
        /// How to do it.
        procedure: String,
        /// What to deliver.
        output: String,
    },
    /// A `systemPrompt` with an `outputSchema`.
    SystemPrompt(String),
}

impl Brief {
    /// Adds the brief's fields to `m` under their YAML names (`goal`, `capabilities`,
    /// `procedure`, `output`, or `systemPrompt`).
    pub(crate) fn insert_into(&self, m: &mut Map) {
        match self {
            Brief::Charter {
                goal,
                capabilities,
                procedure,
                output,
            } => {
                m.insert("goal".into(), Value::str(goal));
                m.insert(
                    "capabilities".into(),
                    Value::Array(capabilities.iter().map(Value::str).collect()),
                );
                m.insert("procedure".into(), Value::str(procedure));
                m.insert("output".into(), Value::str(output));
            }
            Brief::SystemPrompt(p) => {
                m.insert("systemPrompt".into(), Value::str(p));
            }
        }
    }
}

/// A named JSONata condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// What the condition means.
    pub description: String,
    /// The JSONata expression.
    pub expression: String,
}

/// The routing graph, in one of two forms.
#[derive(Debug, Clone, PartialEq)]
pub enum Graph {
    /// `graph[node][status] = target`.
    StatusMap(IndexMap<String, IndexMap<String, Target>>),
    /// `graph[node] = [{role, condition}]`, first match wins.
    Transitions(IndexMap<String, Vec<Transition>>),
}

/// A status-map edge target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The next role, or `$END`.
    pub role: String,
    /// Mustache template of the edge prompt.
    pub prompt: String,
    /// Mustache template of the working directory, if any.
    pub location: Option<String>,
}

/// A transition-list edge.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The next role, or `$END`.
    pub role: String,
    /// The condition name; `None` always matches.
    pub condition: Option<String>,
}

impl Graph {
    /// The node names (`$START` and roles) in definition order.
    pub(crate) fn nodes(&self) -> Vec<&str> {
        match self {
            Graph::StatusMap(m) => m.keys().map(String::as_str).collect(),
            Graph::Transitions(m) => m.keys().map(String::as_str).collect(),
        }
    }

    /// Every edge as `(from, label, to)`: the status for status maps, the condition name (or
    /// `None` for the fallback) for transition lists.
    pub(crate) fn edges(&self) -> Vec<(&str, Option<&str>, &str)> {
        match self {
            Graph::StatusMap(m) => m
                .iter()
                .flat_map(|(from, ts)| {
                    ts.iter()
                        .map(move |(s, t)| (from.as_str(), Some(s.as_str()), t.role.as_str()))
                })
                .collect(),
            Graph::Transitions(m) => m
                .iter()
                .flat_map(|(from, ts)| {
                    ts.iter()
                        .map(move |t| (from.as_str(), t.condition.as_deref(), t.role.as_str()))
                })
                .collect(),
        }
    }
}

impl<S> Workflow<S> {
    /// True when the TypeScript tool can express this workflow: a status-map graph, no
    /// conditions, and every role in the `goal`/`capabilities`/… form. Such a workflow is stored
    /// with the TypeScript tool's Workflow schema, so both tools give it the same id.
    pub fn is_ts_compatible(&self) -> bool {
        matches!(self.graph, Graph::StatusMap(_))
            && self.conditions.is_empty()
            && self
                .roles
                .values()
                .all(|r| matches!(r.brief, Brief::Charter { .. }))
    }
}

fn shape(msg: impl Into<String>) -> WorkflowError {
    WorkflowError::Shape(msg.into())
}

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map, WorkflowError> {
    v.as_object()
        .ok_or_else(|| shape(format!("{what} must be a mapping")))
}

fn req_str(m: &Map, key: &str, what: &str) -> Result<String, WorkflowError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(shape(format!("{what}.{key} must be a string"))),
        None => Err(shape(format!("{what} is missing \"{key}\""))),
    }
}

fn opt_str(m: &Map, key: &str, what: &str) -> Result<Option<String>, WorkflowError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(shape(format!("{what}.{key} must be a string or null"))),
    }
}

impl WorkflowDef {
    /// Checks the shape of a parsed YAML document and builds the workflow.
    ///
    /// # Errors
    /// [`WorkflowError::Shape`] naming the first field that is missing or of the wrong type.
    pub(crate) fn from_yaml_value(doc: &Value) -> Result<WorkflowDef, WorkflowError> {
        let top = obj(doc, "the document")?;
        let name = req_str(top, "name", "the workflow")?;
        let description = req_str(top, "description", "the workflow")?;
        let roles_v = top
            .get("roles")
            .ok_or_else(|| shape("the workflow is missing \"roles\""))?;
        let mut roles = IndexMap::new();
        for (rname, rv) in obj(roles_v, "roles")? {
            roles.insert(rname.clone(), parse_role_def(rname, rv)?);
        }
        let conditions = parse_conditions(top.get("conditions"))?;
        let graph = parse_graph(
            top.get("graph")
                .ok_or_else(|| shape("the workflow is missing \"graph\""))?,
        )?;
        if !conditions.is_empty() && matches!(graph, Graph::StatusMap(_)) {
            return Err(shape(
                "conditions are only used by transition-list graphs (graph[node] = [{role, condition}])",
            ));
        }
        Ok(Workflow {
            name,
            description,
            roles,
            conditions,
            graph,
        })
    }
}

fn parse_role_def(rname: &str, rv: &Value) -> Result<Role<Value>, WorkflowError> {
    let what = format!("role \"{rname}\"");
    let m = obj(rv, &what)?;
    let description = req_str(m, "description", &what)?;
    if m.contains_key("systemPrompt") {
        let system = req_str(m, "systemPrompt", &what)?;
        let schema = m
            .get("outputSchema")
            .ok_or_else(|| shape(format!("{what} is missing \"outputSchema\"")))?;
        obj(schema, &format!("{what}.outputSchema"))?;
        return Ok(Role {
            description,
            brief: Brief::SystemPrompt(system),
            schema: schema.clone(),
        });
    }
    let goal = req_str(m, "goal", &what)?;
    let capabilities = match m.get("capabilities") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|c| {
                c.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| shape(format!("{what}.capabilities must be a list of strings")))
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => {
            return Err(shape(format!(
                "{what}.capabilities must be a list of strings"
            )));
        }
        None => return Err(shape(format!("{what} is missing \"capabilities\""))),
    };
    let procedure = req_str(m, "procedure", &what)?;
    let output = req_str(m, "output", &what)?;
    let schema = match (m.get("frontmatter"), m.get("meta")) {
        (Some(_), Some(_)) => {
            return Err(shape(format!(
                "{what} has both \"frontmatter\" and \"meta\"; keep one"
            )));
        }
        (Some(s), None) | (None, Some(s)) => s,
        (None, None) => {
            return Err(shape(format!(
                "{what} is missing \"frontmatter\" (or \"meta\"), or \"systemPrompt\" with \"outputSchema\""
            )));
        }
    };
    let sm = obj(schema, &format!("{what}.frontmatter"))?;
    let typed = matches!(sm.get("type"), Some(Value::String(_)));
    let union = matches!(sm.get("oneOf"), Some(Value::Array(_)));
    if !typed && !union {
        return Err(shape(format!(
            "{what}.frontmatter must have a string \"type\" or a \"oneOf\" list"
        )));
    }
    Ok(Role {
        description,
        brief: Brief::Charter {
            goal,
            capabilities,
            procedure,
            output,
        },
        schema: schema.clone(),
    })
}

fn parse_conditions(v: Option<&Value>) -> Result<IndexMap<String, Condition>, WorkflowError> {
    let mut out = IndexMap::new();
    let Some(v) = v else { return Ok(out) };
    if matches!(v, Value::Null) {
        return Ok(out);
    }
    for (name, cv) in obj(v, "conditions")? {
        let what = format!("condition \"{name}\"");
        let m = obj(cv, &what)?;
        out.insert(
            name.clone(),
            Condition {
                description: opt_str(m, "description", &what)?.unwrap_or_default(),
                expression: req_str(m, "expression", &what)?,
            },
        );
    }
    Ok(out)
}

fn parse_graph(v: &Value) -> Result<Graph, WorkflowError> {
    let m = obj(v, "graph")?;
    let lists = m.values().filter(|x| matches!(x, Value::Array(_))).count();
    if lists > 0 && lists < m.len() {
        return Err(shape(
            "graph mixes transition lists and status maps; use one form for every node",
        ));
    }
    if lists > 0 {
        let mut out = IndexMap::new();
        for (node, ts) in m {
            let Value::Array(items) = ts else {
                unreachable!("every node is a list")
            };
            let mut list = Vec::with_capacity(items.len());
            for (i, t) in items.iter().enumerate() {
                let what = format!("graph[\"{node}\"][{i}]");
                let tm = obj(t, &what)?;
                list.push(Transition {
                    role: req_str(tm, "role", &what)?,
                    condition: opt_str(tm, "condition", &what)?,
                });
            }
            out.insert(node.clone(), list);
        }
        return Ok(Graph::Transitions(out));
    }
    let mut out = IndexMap::new();
    for (node, sm) in m {
        let nm = obj(sm, &format!("graph[\"{node}\"]"))?;
        let mut targets = IndexMap::new();
        for (status, t) in nm {
            let what = format!("graph[\"{node}\"][\"{status}\"]");
            let tm = obj(t, &what)?;
            let prompt = req_str(tm, "prompt", &what)?;
            if prompt.trim().is_empty() {
                return Err(shape(format!("{what}.prompt must not be empty")));
            }
            targets.insert(
                status.clone(),
                Target {
                    role: req_str(tm, "role", &what)?,
                    prompt,
                    location: opt_str(tm, "location", &what)?,
                },
            );
        }
        out.insert(node.clone(), targets);
    }
    Ok(Graph::StatusMap(out))
}

impl StoredWorkflow {
    /// The payload to store: exactly the TypeScript tool's shape when
    /// [`is_ts_compatible`](Workflow::is_ts_compatible), else the extended shape (see
    /// [`extended_schema`](super::extended_schema)).
    pub(crate) fn to_payload(&self) -> Value {
        let ts = self.is_ts_compatible();
        let mut top = Map::default();
        top.insert("name".into(), Value::str(&self.name));
        top.insert("description".into(), Value::str(&self.description));
        let mut roles = Map::default();
        for (name, r) in &self.roles {
            let mut m = Map::default();
            m.insert("description".into(), Value::str(&r.description));
            r.brief.insert_into(&mut m);
            match &r.brief {
                Brief::Charter { .. } => {
                    m.insert("frontmatter".into(), Value::str(r.schema.to_wire()));
                }
                Brief::SystemPrompt(_) => {
                    m.insert("outputSchema".into(), Value::str(r.schema.to_wire()));
                }
            }
            roles.insert(name.clone(), Value::Object(m));
        }
        top.insert("roles".into(), Value::Object(roles));
        if !ts {
            let mut conds = Map::default();
            for (name, c) in &self.conditions {
                let mut m = Map::default();
                m.insert("description".into(), Value::str(&c.description));
                m.insert("expression".into(), Value::str(&c.expression));
                conds.insert(name.clone(), Value::Object(m));
            }
            top.insert("conditions".into(), Value::Object(conds));
        }
        let mut graph = Map::default();
        match &self.graph {
            Graph::StatusMap(g) => {
                for (node, ts) in g {
                    let mut sm = Map::default();
                    for (status, t) in ts {
                        let mut m = Map::default();
                        m.insert("role".into(), Value::str(&t.role));
                        m.insert("prompt".into(), Value::str(&t.prompt));
                        m.insert(
                            "location".into(),
                            t.location.as_ref().map_or(Value::Null, Value::str),
                        );
                        sm.insert(status.clone(), Value::Object(m));
                    }
                    graph.insert(node.clone(), Value::Object(sm));
                }
            }
            Graph::Transitions(g) => {
                for (node, ts) in g {
                    let list = ts
                        .iter()
                        .map(|t| {
                            let mut m = Map::default();
                            m.insert("role".into(), Value::str(&t.role));
                            m.insert(
                                "condition".into(),
                                t.condition.as_ref().map_or(Value::Null, Value::str),
                            );
                            Value::Object(m)
                        })
                        .collect();
                    graph.insert(node.clone(), Value::Array(list));
                }
            }
        }
        top.insert("graph".into(), Value::Object(graph));
        Value::Object(top)
    }

    /// Reads a stored Workflow payload (the TypeScript tool's shape or the extended one).
    ///
    /// # Errors
    /// [`WorkflowError::Shape`] when the payload is not a Workflow.
    pub fn from_payload(payload: &Value) -> Result<StoredWorkflow, WorkflowError> {
        let top = obj(payload, "the workflow payload")?;
        let name = req_str(top, "name", "the workflow")?;
        let description = req_str(top, "description", "the workflow")?;
        let mut roles = IndexMap::new();
        let roles_v = top
            .get("roles")
            .ok_or_else(|| shape("the workflow is missing \"roles\""))?;
        for (rname, rv) in obj(roles_v, "roles")? {
            let what = format!("role \"{rname}\"");
            let m = obj(rv, &what)?;
            let id = |key: &str| -> Result<NodeId, WorkflowError> {
                let s = req_str(m, key, &what)?;
                NodeId::parse_strict(&s)
                    .ok_or_else(|| shape(format!("{what}.{key} is not a node id: \"{s}\"")))
            };
            let role = if m.contains_key("systemPrompt") {
                Role {
                    description: req_str(m, "description", &what)?,
                    brief: Brief::SystemPrompt(req_str(m, "systemPrompt", &what)?),
                    schema: id("outputSchema")?,
                }
            } else {
                let capabilities = match m.get("capabilities") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(|c| c.as_str().map(str::to_string))
                        .collect(),
                    _ => return Err(shape(format!("{what} is missing \"capabilities\""))),
                };
                Role {
                    description: req_str(m, "description", &what)?,
                    brief: Brief::Charter {
                        goal: req_str(m, "goal", &what)?,
                        capabilities,
                        procedure: req_str(m, "procedure", &what)?,
                        output: req_str(m, "output", &what)?,
                    },
                    schema: id("frontmatter")?,
                }
            };
            roles.insert(rname.clone(), role);
        }
        let conditions = parse_conditions(top.get("conditions"))?;
        let graph = parse_graph(
            top.get("graph")
                .ok_or_else(|| shape("the workflow is missing \"graph\""))?,
        )?;
        Ok(Workflow {
            name,
            description,
            roles,
            conditions,
            graph,
        })
    }
}

/// The workflow name a file path implies: the stem of `<name>.yaml|.yml`, or the directory name
/// for `<name>/index.yaml`.
pub(crate) fn name_from_path(path: &std::path::Path) -> String {
    let base = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = base
        .strip_suffix(".yaml")
        .or_else(|| base.strip_suffix(".yml"))
        .unwrap_or(&base);
    if stem == "index" {
        return path
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    stem.to_string()
}

/// Checks that the workflow's name matches its file name.
///
/// # Errors
/// [`WorkflowError::NameMismatch`] naming the file, the implied and the declared name.
pub(crate) fn check_name(path: &std::path::Path, declared: &str) -> Result<(), WorkflowError> {
    let expected = name_from_path(path);
    if expected == declared {
        return Ok(());
    }
    Err(WorkflowError::NameMismatch {
        file: path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        expected,
        declared: declared.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_from_paths() {
        assert_eq!(name_from_path(Path::new("/x/debate.yaml")), "debate");
        assert_eq!(name_from_path(Path::new("a/b.yml")), "b");
        assert_eq!(name_from_path(Path::new("/w/solve/index.yaml")), "solve");
        let e = check_name(Path::new("/x/debate.yaml"), "other").unwrap_err();
        assert_eq!(
            e.to_string(),
            "workflow name mismatch: file \"debate.yaml\" implies name \"debate\" but YAML declares name \"other\""
        );
    }

    fn def(yaml: &str) -> Result<WorkflowDef, WorkflowError> {
        WorkflowDef::from_yaml_value(&super::super::yaml::parse_str(yaml, None, "t").unwrap())
    }

    #[test]
    fn shape_errors_name_the_field() {
        let e = def("name: x\ndescription: d\nroles: {}\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid workflow YAML: the workflow is missing \"graph\""
        );
        let e = def("name: x\ndescription: d\nroles:\n  a: {description: d, goal: g, capabilities: [c], procedure: p, output: o, frontmatter: {properties: {}}}\ngraph: {}\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("role \"a\".frontmatter must have a string \"type\""),
            "{e}"
        );
        let e = def("name: x\ndescription: d\nroles: {}\ngraph:\n  $START: [{role: a, condition: null}]\n  a: {_: {role: $END, prompt: p}}\n").unwrap_err();
        assert!(e.to_string().contains("mixes"), "{e}");
        let e = def(
            "name: x\ndescription: d\nroles: {}\ngraph:\n  $START: {_: {role: a, prompt: '  '}}\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("prompt must not be empty"), "{e}");
    }
}
