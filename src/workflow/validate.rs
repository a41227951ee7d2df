//! Semantic validation: every problem of a workflow's graph and roles, collected together.
//!
//! The status-map checks and their messages are the TypeScript tool's; the transition-list form
//! gets the same structural checks plus unknown conditions and JSONata syntax.

use super::condition::ConditionEvaluator;
use super::model::{ANY_STATUS, END, Graph, START, Target, WorkflowDef};
use crate::cas::Value;
use crate::cas::schema::check_schema;
use indexmap::{IndexMap, IndexSet};
use std::collections::VecDeque;

/// Every semantic problem of `wf`, in a stable order; empty when the workflow is valid.
///
/// `evaluator` checks the syntax of JSONata conditions.
pub(crate) fn semantic_errors(wf: &WorkflowDef, evaluator: &dyn ConditionEvaluator) -> Vec<String> {
    let mut errors = Vec::new();
    let roles: IndexSet<&str> = wf.roles.keys().map(String::as_str).collect();
    let nodes: IndexSet<&str> = wf.graph.nodes().into_iter().collect();

    role_reference_errors(&roles, &nodes, &mut errors);
    graph_errors(wf, &roles, &nodes, &mut errors);

    // Conditions.
    for (name, c) in &wf.conditions {
        if let Err(e) = evaluator.check(&c.expression) {
            errors.push(format!(
                "condition \"{name}\" is not a valid JSONata expression: {e}"
            ));
        }
    }

    // Role schemas and their exits.
    for (name, role) in &wf.roles {
        if let Err(e) = check_schema(&role.schema) {
            errors.push(format!("role \"{name}\" output schema: {e}"));
        }
    }
    if let Graph::StatusMap(g) = &wf.graph {
        for (name, role) in &wf.roles {
            if is_reserved(name) {
                continue;
            }
            let Some(entry) = g.get(name) else { continue };
            check_role_consistency(name, &role.schema, entry, &mut errors);
        }
    }
    errors
}

/// The problems of the role names: reserved ones, unknown ones in the graph, unused ones.
fn role_reference_errors(roles: &IndexSet<&str>, nodes: &IndexSet<&str>, errors: &mut Vec<String>) {
    for r in roles {
        if is_reserved(r) {
            errors.push(format!("reserved name \"{r}\" must not appear in roles"));
        }
    }
    for n in nodes {
        if !is_reserved(n) && !roles.contains(n) {
            errors.push(format!("graph references unknown role \"{n}\""));
        }
    }
    for r in roles {
        if !is_reserved(r) && !nodes.contains(r) {
            errors.push(format!(
                "role \"{r}\" is defined but not referenced in graph"
            ));
        }
    }
}

/// The problems of the graph: its `$START` and `$END`, unknown targets and conditions of
/// edges, roles it does not reach.
fn graph_errors(
    wf: &WorkflowDef,
    roles: &IndexSet<&str>,
    nodes: &IndexSet<&str>,
    errors: &mut Vec<String>,
) {
    match &wf.graph {
        Graph::StatusMap(g) => match g.get(START) {
            None => errors.push(format!("{START} must be defined in graph")),
            Some(edges) => {
                if edges.len() != 1 || !edges.contains_key(ANY_STATUS) {
                    errors.push(format!(
                        "{START} must have exactly one edge with status \"{ANY_STATUS}\""
                    ));
                }
            }
        },
        Graph::Transitions(g) => match g.get(START) {
            None => errors.push(format!("{START} must be defined in graph")),
            Some(list) if list.is_empty() => {
                errors.push(format!("{START} must have at least one transition"));
            }
            Some(_) => {}
        },
    }
    if nodes.contains(END) {
        errors.push(format!("{END} must not have outgoing edges"));
    }
    match &wf.graph {
        Graph::StatusMap(g) => {
            for (node, edges) in g {
                for (status, t) in edges {
                    if t.role != END && !roles.contains(t.role.as_str()) {
                        errors.push(format!(
                            "edge {node}→{status}: unknown target role \"{}\"",
                            t.role
                        ));
                    }
                }
            }
        }
        Graph::Transitions(g) => {
            for (node, list) in g {
                for (i, t) in list.iter().enumerate() {
                    if t.role != END && !roles.contains(t.role.as_str()) {
                        errors.push(format!(
                            "edge {node}[{i}]: unknown target role \"{}\"",
                            t.role
                        ));
                    }
                    if let Some(c) = &t.condition
                        && !wf.conditions.contains_key(c)
                    {
                        errors.push(format!("edge {node}[{i}]: unknown condition \"{c}\""));
                    }
                }
            }
        }
    }
    let reachable = reachable_roles(&wf.graph);
    for r in roles {
        if !is_reserved(r) && !reachable.contains(*r) {
            errors.push(format!("role \"{r}\" is not reachable from {START}"));
        }
    }
}

fn is_reserved(name: &str) -> bool {
    name == START || name == END
}

fn reachable_roles(graph: &Graph) -> IndexSet<String> {
    let edges: IndexMap<&str, Vec<&str>> = match graph {
        Graph::StatusMap(g) => g
            .iter()
            .map(|(n, ts)| (n.as_str(), ts.values().map(|t| t.role.as_str()).collect()))
            .collect(),
        Graph::Transitions(g) => g
            .iter()
            .map(|(n, ts)| (n.as_str(), ts.iter().map(|t| t.role.as_str()).collect()))
            .collect(),
    };
    let mut seen = IndexSet::new();
    let mut queue = VecDeque::new();
    queue.push_back(START);
    while let Some(cur) = queue.pop_front() {
        for &next in edges.get(cur).map(Vec::as_slice).unwrap_or_default() {
            if next != END && seen.insert(next.to_string()) {
                queue.push_back(next);
            }
        }
    }
    seen
}

/// The variables of mustache tags in a prompt (`\{\{\{?([^}]+)\}\}\}?`).
pub(crate) fn mustache_vars(prompt: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = prompt.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'{' && b[i + 1] == b'{' {
            let mut start = i + 2;
            if start < b.len() && b[start] == b'{' {
                start += 1;
            }
            let mut end = start;
            while end < b.len() && b[end] != b'}' {
                end += 1;
            }
            if end > start && end + 1 < b.len() && b[end + 1] == b'}' {
                out.push(&prompt[start..end]);
                i = end + 2;
                if i < b.len() && b[i] == b'}' {
                    i += 1;
                }
                continue;
            }
        }
        i += 1;
    }
    out
}

fn properties(schema: &Value) -> IndexSet<&str> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn status_const(variant: &Value) -> Option<&str> {
    variant
        .get("properties")?
        .get("$status")?
        .get("const")?
        .as_str()
}

fn enum_statuses(schema: &Value) -> Option<Vec<&str>> {
    let e = schema.get("properties")?.get("$status")?.get("enum")?;
    let Value::Array(items) = e else { return None };
    Some(
        items
            .iter()
            .filter_map(Value::as_str)
            .filter(|s| *s != ANY_STATUS)
            .collect(),
    )
}

fn check_role_consistency(
    name: &str,
    schema: &Value,
    entry: &IndexMap<String, Target>,
    errors: &mut Vec<String>,
) {
    let keys: IndexSet<&str> = entry.keys().map(String::as_str).collect();
    if let Some(Value::Array(variants)) = schema.get("oneOf") {
        let statuses: Vec<&str> = variants.iter().filter_map(status_const).collect();
        if statuses.len() != variants.len() {
            let missing = variants
                .iter()
                .any(|v| v.get("properties").and_then(|p| p.get("$status")).is_none());
            if missing {
                errors.push(format!(
                    "role \"{name}\": oneOf variants must have \"$status\" as const discriminant"
                ));
            } else {
                errors.push(format!(
                    "role \"{name}\": oneOf variant $status must be a const value"
                ));
            }
        }
        check_multi_exit(name, &keys, &statuses, errors);
        for (status, t) in entry {
            let Some(variant) = variants
                .iter()
                .find(|v| status_const(v) == Some(status.as_str()))
            else {
                continue;
            };
            let props = properties(variant);
            for v in mustache_vars(&t.prompt) {
                if v != "$status" && !props.contains(v) {
                    errors.push(format!(
                        "prompt variable \"{v}\" not found in role \"{name}\" variant \"{status}\""
                    ));
                }
            }
        }
    } else if let Some(statuses) = enum_statuses(schema).filter(|s| s.len() > 1) {
        check_multi_exit(name, &keys, &statuses, errors);
        let props = properties(schema);
        for (status, t) in entry {
            for v in mustache_vars(&t.prompt) {
                if v != "$status" && !props.contains(v) {
                    errors.push(format!(
                        "prompt variable \"{v}\" in graph[{name}][{status}] not found in role \"{name}\" frontmatter"
                    ));
                }
            }
        }
    } else {
        if keys.len() > 1 || (keys.len() == 1 && !keys.contains(ANY_STATUS)) {
            if keys.contains(ANY_STATUS) {
                errors.push(format!(
                    "role \"{name}\" is single-exit but has status keys other than \"_\""
                ));
            } else {
                errors.push(format!(
                    "role \"{name}\" is single-exit but graph has no \"_\" key"
                ));
            }
        }
        let Some(t) = entry.get(ANY_STATUS) else {
            return;
        };
        let props = properties(schema);
        for v in mustache_vars(&t.prompt) {
            if v != "$status" && !props.contains(v) {
                errors.push(format!(
                    "prompt variable \"{v}\" not found in role \"{name}\" frontmatter"
                ));
            }
        }
    }
}

fn check_multi_exit(
    name: &str,
    keys: &IndexSet<&str>,
    statuses: &[&str],
    errors: &mut Vec<String>,
) {
    if keys.contains(ANY_STATUS) {
        errors.push(format!(
            "role \"{name}\" is multi-exit but graph uses \"_\""
        ));
        return;
    }
    let extra: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| !statuses.contains(k))
        .collect();
    let mut missing: Vec<&str> = Vec::new();
    for s in statuses {
        if !keys.contains(s) && !missing.contains(s) {
            missing.push(s);
        }
    }
    if !extra.is_empty() {
        errors.push(format!(
            "role \"{name}\" graph has extra status keys: {}",
            extra.join(", ")
        ));
    }
    if !missing.is_empty() {
        errors.push(format!(
            "role \"{name}\" graph is missing status keys: {}",
            missing.join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mustache_vars_like_the_regex() {
        assert_eq!(
            mustache_vars("a {{{x}}} b {{y}} {{ z }}"),
            vec!["x", "y", " z "]
        );
        assert_eq!(
            mustache_vars("{{#list}}{{.}}{{/list}}"),
            vec!["#list", ".", "/list"]
        );
        assert_eq!(mustache_vars("{{a.b}} {{}} {{unclosed"), vec!["a.b"]);
        assert!(mustache_vars("no tags { here }").is_empty());
    }
}
