//! The moderator: given a workflow and a thread's history, which role runs next.
//!
//! One engine for both graph forms:
//! - status maps look up `graph[lastRole][status]`, the status coming from the last output's
//!   `$status`, else `status`, else `_`; the target's `prompt` and `location` are mustache
//!   templates rendered over the last output;
//! - transition lists take the first transition of `graph[lastRole]` whose condition holds (a
//!   `null` condition always holds), evaluating JSONata over `{start, steps}`.

use super::condition::ConditionEvaluator;
use super::model::{ANY_STATUS, Condition, END, Graph, START, Workflow};
use super::mustache::{self, TemplateError};
use crate::cas::Value;
use crate::cas::value::Map;
use indexmap::IndexMap;

/// One completed step as the moderator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    /// The role that ran.
    pub role: String,
    /// The output node's payload (expanded, not its id).
    pub output: Value,
    /// The detail node's id.
    pub detail: String,
    /// The agent that ran it.
    pub agent: String,
}

/// A thread's history: the StartNode payload and the steps, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    /// The StartNode payload (`{workflow, prompt, cwd}`).
    pub start: Value,
    /// Completed steps, oldest first.
    pub steps: Vec<StepView>,
}

impl History {
    /// The JSONata context `{start, steps: [{role, output, detail, agent}]}`.
    pub(crate) fn context(&self) -> Value {
        let steps = self
            .steps
            .iter()
            .map(|s| {
                let mut m = Map::default();
                m.insert("role".into(), Value::str(&s.role));
                m.insert("output".into(), s.output.clone());
                m.insert("detail".into(), Value::str(&s.detail));
                m.insert("agent".into(), Value::str(&s.agent));
                Value::Object(m)
            })
            .collect();
        let mut m = Map::default();
        m.insert("start".into(), self.start.clone());
        m.insert("steps".into(), Value::Array(steps));
        Value::Object(m)
    }

    /// The role of the last step, or `$START`.
    pub(crate) fn last_role(&self) -> &str {
        self.steps.last().map_or(START, |s| s.role.as_str())
    }
}

/// What the moderator decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The next role, or `$END`.
    pub role: String,
    /// The rendered edge prompt (status maps only).
    pub prompt: Option<String>,
    /// The rendered working directory, if the edge has one.
    pub location: Option<String>,
}

impl Decision {
    /// True when the thread is finished.
    pub fn is_end(&self) -> bool {
        self.role == END
    }
}

/// Why the moderator could not decide.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModeratorError {
    /// The graph has no entry for the last role.
    #[error("no transitions defined for role \"{0}\"")]
    NoTransitions(String),
    /// The status map has no edge for the status.
    #[error("no transition for role \"{role}\" with status \"{status}\"")]
    NoTransitionForStatus {
        /// The last role.
        role: String,
        /// The status of its output.
        status: String,
    },
    /// The rendered edge prompt is blank (the TypeScript tool's text).
    #[error(
        "edge prompt resolved to empty string for role \"{role}\" (template: \"{template}\"). Check that upstream output includes required variables."
    )]
    EmptyPrompt {
        /// The target role.
        role: String,
        /// The prompt template.
        template: String,
    },
    /// A prompt or location template that does not parse.
    #[error("edge template \"{template}\" for role \"{role}\": {source}")]
    Template {
        /// The target role.
        role: String,
        /// The template.
        template: String,
        /// The parse error.
        source: TemplateError,
    },
    /// A transition names a condition that does not exist.
    #[error("unknown condition \"{0}\"")]
    UnknownCondition(String),
    /// A condition failed to evaluate; the JSONata message is passed through.
    #[error("condition \"{name}\" failed: {message}")]
    Condition {
        /// The condition name.
        name: String,
        /// The evaluator's message.
        message: String,
    },
    /// No transition of the last role matched.
    #[error("no transition matched for role \"{0}\"")]
    NoMatch(String),
}

/// The status of an output for status-map routing: `$status` if it is a string, else `status`
/// if it is a string, else `_`.
pub(crate) fn output_status(output: &Value) -> &str {
    for key in ["$status", "status"] {
        if let Some(Value::String(s)) = output.get(key) {
            return s;
        }
    }
    ANY_STATUS
}

/// Decides the next role of a thread with `history`.
///
/// # Errors
/// [`ModeratorError`] with the TypeScript tool's messages.
pub fn next<S>(
    workflow: &Workflow<S>,
    history: &History,
    evaluator: &dyn ConditionEvaluator,
) -> Result<Decision, ModeratorError> {
    next_in_graph(&workflow.graph, &workflow.conditions, history, evaluator)
}

/// [`next`] over a graph and its conditions.
///
/// # Errors
/// As [`next`].
pub(crate) fn next_in_graph(
    graph: &Graph,
    conditions: &IndexMap<String, Condition>,
    history: &History,
    evaluator: &dyn ConditionEvaluator,
) -> Result<Decision, ModeratorError> {
    let last_role = history.last_role();
    match graph {
        Graph::StatusMap(g) => {
            let start_output;
            let empty = Value::Object(Map::default());
            let (status, view) = match history.steps.last() {
                None => {
                    let mut m = Map::default();
                    m.insert("$status".into(), Value::str(ANY_STATUS));
                    start_output = Value::Object(m);
                    (ANY_STATUS, &start_output)
                }
                Some(s) => {
                    let view = if matches!(s.output, Value::Object(_)) {
                        &s.output
                    } else {
                        &empty
                    };
                    (output_status(view), view)
                }
            };
            let edges = g
                .get(last_role)
                .ok_or_else(|| ModeratorError::NoTransitions(last_role.to_string()))?;
            let target =
                edges
                    .get(status)
                    .ok_or_else(|| ModeratorError::NoTransitionForStatus {
                        role: last_role.to_string(),
                        status: status.to_string(),
                    })?;
            let render = |tpl: &str| {
                mustache::render(tpl, view).map_err(|source| ModeratorError::Template {
                    role: target.role.clone(),
                    template: tpl.to_string(),
                    source,
                })
            };
            let prompt = render(&target.prompt)?;
            if prompt.trim().is_empty() {
                return Err(ModeratorError::EmptyPrompt {
                    role: target.role.clone(),
                    template: target.prompt.clone(),
                });
            }
            let location = target.location.as_deref().map(render).transpose()?;
            Ok(Decision {
                role: target.role.clone(),
                prompt: Some(prompt),
                location,
            })
        }
        Graph::Transitions(g) => {
            let list = g
                .get(last_role)
                .ok_or_else(|| ModeratorError::NoTransitions(last_role.to_string()))?;
            let mut context = None;
            for t in list {
                let matched = match &t.condition {
                    None => true,
                    Some(name) => {
                        let c = conditions
                            .get(name)
                            .ok_or_else(|| ModeratorError::UnknownCondition(name.clone()))?;
                        let ctx = context.get_or_insert_with(|| history.context());
                        evaluator.test(&c.expression, ctx).map_err(|message| {
                            ModeratorError::Condition {
                                name: name.clone(),
                                message,
                            }
                        })?
                    }
                };
                if matched {
                    return Ok(Decision {
                        role: t.role.clone(),
                        prompt: None,
                        location: None,
                    });
                }
            }
            Err(ModeratorError::NoMatch(last_role.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_precedence() {
        let v = Value::from_json_str(r#"{"$status":"a","status":"b"}"#).unwrap();
        assert_eq!(output_status(&v), "a");
        let v = Value::from_json_str(r#"{"$status":1,"status":"b"}"#).unwrap();
        assert_eq!(output_status(&v), "b");
        let v = Value::from_json_str(r#"{"status":null}"#).unwrap();
        assert_eq!(output_status(&v), "_");
        assert_eq!(output_status(&Value::str("x")), "_");
    }
}
