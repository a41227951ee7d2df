//! The scripted agent's script: for each role, the replies it gives, used in turn.
//!
//! ```yaml
//! planner:
//!   - |
//!     ---
//!     plan: add a login check
//!     ---
//!     The plan in prose.
//! reviewer:
//!   - {approved: false, comments: add a test}   # fields: written as the frontmatter
//!   - {approved: true, comments: ok, $body: "Looks good."}
//! ```
//!
//! A reply is either the raw output text, or a mapping of output fields that is written as a
//! frontmatter block (with the optional `$body` key as the text after it). The n-th time a role
//! runs in a thread it gets its n-th reply.

use crate::cas::Value;
use crate::cas::value::Map;
use indexmap::IndexMap;

/// The key of a field reply that holds the body text instead of a field.
pub(crate) const BODY_KEY: &str = "$body";

/// One scripted reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The agent's raw output, as is.
    Raw(String),
    /// Output fields, written as a frontmatter block, and a body.
    Fields {
        /// The frontmatter fields.
        fields: Map,
        /// The text after the block.
        body: String,
    },
}

impl Reply {
    /// The raw output the scripted agent prints.
    pub fn to_raw(&self) -> String {
        match self {
            Reply::Raw(s) => s.clone(),
            Reply::Fields { fields, body } => {
                let yaml = yaml_serde::to_string(&Value::Object(fields.clone()))
                    .expect("a JSON value serialises to YAML");
                let yaml = if fields.is_empty() {
                    String::new()
                } else {
                    yaml
                };
                let mut out = format!("---\n{yaml}---\n");
                if !body.is_empty() {
                    out.push('\n');
                    out.push_str(body);
                    if !body.ends_with('\n') {
                        out.push('\n');
                    }
                }
                out
            }
        }
    }
}

/// A script: replies per role.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Script {
    /// Replies by role, in the order they are used.
    pub roles: IndexMap<String, Vec<Reply>>,
    /// Each reply's raw output, made once (a runner's steps ask for them again and again).
    raw: std::sync::OnceLock<IndexMap<String, Vec<String>>>,
}

/// Why a script cannot be read or has no reply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The script is not valid YAML.
    #[error("invalid script: {0}")]
    Yaml(String),
    /// The script does not have the expected shape.
    #[error("invalid script: {0}")]
    Shape(String),
    /// The script has no replies for a role.
    #[error("script has no replies for role \"{0}\"")]
    NoRole(String),
    /// The role has run more times than it has replies.
    #[error("script has {available} replies for role \"{role}\" but reply {wanted} was asked for")]
    Exhausted {
        /// The role.
        role: String,
        /// The reply number asked for (1-based).
        wanted: usize,
        /// How many replies the script has.
        available: usize,
    },
}

impl Script {
    /// Parses a script from YAML text.
    ///
    /// # Errors
    /// [`ScriptError::Yaml`] or [`ScriptError::Shape`] naming the bad entry.
    pub fn from_yaml(text: &str) -> Result<Script, ScriptError> {
        let doc = crate::workflow::yaml::parse_str(text, None, "script")
            .map_err(|e| ScriptError::Yaml(e.to_string()))?;
        let Value::Object(top) = doc else {
            return Err(ScriptError::Shape(
                "expected a mapping of role names to lists of replies".into(),
            ));
        };
        let mut roles = IndexMap::new();
        for (role, replies) in top {
            let Value::Array(items) = replies else {
                return Err(ScriptError::Shape(format!(
                    "role \"{role}\" must have a list of replies"
                )));
            };
            let mut list = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                list.push(match item {
                    Value::String(s) => Reply::Raw(s),
                    Value::Object(mut fields) => {
                        let body = match fields.shift_remove(BODY_KEY) {
                            None | Some(Value::Null) => String::new(),
                            Some(Value::String(b)) => b,
                            Some(_) => {
                                return Err(ScriptError::Shape(format!(
                                    "role \"{role}\" reply {}: {BODY_KEY} must be a string",
                                    i + 1
                                )));
                            }
                        };
                        Reply::Fields { fields, body }
                    }
                    _ => {
                        return Err(ScriptError::Shape(format!(
                            "role \"{role}\" reply {} must be a string or a mapping",
                            i + 1
                        )));
                    }
                });
            }
            roles.insert(role, list);
        }
        Ok(Script {
            roles,
            raw: std::sync::OnceLock::new(),
        })
    }

    /// The raw output of the reply for the `visit`-th run (0-based) of `role` in a thread
    /// ([`Reply::to_raw`] of [`Script::reply`]).
    ///
    /// # Errors
    /// As [`Script::reply`].
    pub fn raw(&self, role: &str, visit: usize) -> Result<&str, ScriptError> {
        self.reply(role, visit)?;
        let raw = self.raw.get_or_init(|| {
            self.roles
                .iter()
                .map(|(r, list)| (r.clone(), list.iter().map(Reply::to_raw).collect()))
                .collect()
        });
        Ok(&raw[role][visit])
    }

    /// The reply for the `visit`-th run (0-based) of `role` in a thread.
    ///
    /// # Errors
    /// [`ScriptError::NoRole`] or [`ScriptError::Exhausted`].
    pub fn reply(&self, role: &str, visit: usize) -> Result<&Reply, ScriptError> {
        let list = self
            .roles
            .get(role)
            .ok_or_else(|| ScriptError::NoRole(role.to_string()))?;
        list.get(visit).ok_or_else(|| ScriptError::Exhausted {
            role: role.to_string(),
            wanted: visit + 1,
            available: list.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::frontmatter;

    const SCRIPT: &str = "planner:\n  - |\n    ---\n    plan: p\n    ---\n    prose\nreviewer:\n  - {approved: false, comments: add a test}\n  - {approved: true, score: 4.5, $body: Looks good.}\n";

    #[test]
    fn replies_in_turn() {
        let s = Script::from_yaml(SCRIPT).unwrap();
        assert_eq!(
            s.reply("planner", 0).unwrap().to_raw(),
            "---\nplan: p\n---\nprose\n"
        );
        let r2 = s.reply("reviewer", 1).unwrap().to_raw();
        assert_eq!(r2, "---\napproved: true\nscore: 4.5\n---\n\nLooks good.\n");
        assert_eq!(
            s.reply("reviewer", 2).unwrap_err().to_string(),
            "script has 2 replies for role \"reviewer\" but reply 3 was asked for"
        );
        assert!(matches!(s.reply("ghost", 0), Err(ScriptError::NoRole(_))));
    }

    #[test]
    fn field_replies_pass_the_fast_path() {
        let s = Script::from_yaml(SCRIPT).unwrap();
        let schema = Value::from_json_str(
            r#"{"type":"object","properties":{"approved":{"type":"boolean"},"comments":{"type":"string"}},"required":["approved","comments"]}"#,
        )
        .unwrap();
        let raw = s.reply("reviewer", 0).unwrap().to_raw();
        let out = frontmatter::fast_path(&raw, &schema, "X").unwrap();
        assert_eq!(
            out.output.to_json(),
            r#"{"approved":false,"comments":"add a test"}"#
        );
    }

    #[test]
    fn bad_scripts() {
        assert!(matches!(
            Script::from_yaml("- a"),
            Err(ScriptError::Shape(_))
        ));
        assert!(matches!(
            Script::from_yaml("r: x"),
            Err(ScriptError::Shape(_))
        ));
        assert!(matches!(
            Script::from_yaml("r: [1]"),
            Err(ScriptError::Shape(_))
        ));
        assert!(matches!(
            Script::from_yaml("r: [\"a"),
            Err(ScriptError::Yaml(_))
        ));
    }
}
