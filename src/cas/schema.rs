//! Schema registration rules (the ocas keyword whitelist) and payload validation (draft-07
//! semantics with the `ocas_ref` format).

use super::id::is_ocas_ref;
use super::pattern::Pattern;
use super::value::Value;

/// Keywords a registered schema may use (ocas `isValidSchema`).
pub(crate) const ALLOWED_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "anyOf",
    "oneOf",
    "items",
    "format",
    "title",
    "enum",
    "const",
    "description",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "allOf",
    "if",
    "then",
    "else",
    "patternProperties",
    "prefixItems",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "default",
    "not",
    "contains",
    "propertyNames",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$comment",
];

const TYPE_NAMES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// Formats a schema may name; any other is refused (the TypeScript tool's validator throws on
/// unknown formats).
pub(crate) const KNOWN_FORMATS: &[&str] = &["ocas_ref"];

/// Why a schema cannot be registered, or a payload does not match its schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A keyword outside the whitelist.
    #[error("invalid schema: keyword \"{keyword}\" is not allowed at {path}")]
    Keyword {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the schema holding it.
        path: String,
    },
    /// A keyword with a value of the wrong shape.
    #[error("invalid schema: \"{keyword}\" at {path} {problem}")]
    Shape {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the schema holding it.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// A `format` other than `ocas_ref`.
    #[error(
        "invalid schema: unknown format \"{format}\" at {path} (only \"ocas_ref\" is supported)"
    )]
    UnknownFormat {
        /// The format.
        format: String,
        /// JSON pointer of the schema holding it.
        path: String,
    },
    /// A `patternProperties` pattern the validator's regex dialect cannot compile.
    #[error(
        "invalid schema: patternProperties pattern \"{pattern}\" at {path} cannot be compiled: {problem}"
    )]
    Pattern {
        /// The pattern.
        pattern: String,
        /// JSON pointer of the `patternProperties` holding it.
        path: String,
        /// The regex engine's message.
        problem: String,
    },
    /// The schema is not an object.
    #[error("invalid schema: expected an object at {0}")]
    NotObject(String),
    /// The schema could not be compiled.
    #[error("invalid schema: {0}")]
    Compile(String),
    /// A payload that fails its schema.
    #[error("payload does not match schema {schema}: {message}")]
    Invalid {
        /// The schema id.
        schema: String,
        /// The first violation, with its location.
        message: String,
    },
}

/// Checks `schema` against the ocas meta-schema rules.
///
/// # Errors
/// The first violation found, naming the keyword and where it is.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    check_at(schema, "#")
}

fn shape(keyword: &str, path: &str, problem: &str) -> SchemaError {
    SchemaError::Shape {
        keyword: keyword.into(),
        path: path.into(),
        problem: problem.into(),
    }
}

fn check_at(schema: &Value, path: &str) -> Result<(), SchemaError> {
    let Value::Object(m) = schema else {
        return Err(SchemaError::NotObject(path.to_string()));
    };
    for (k, v) in m {
        if !ALLOWED_KEYWORDS.contains(&k.as_str()) {
            return Err(SchemaError::Keyword {
                keyword: k.clone(),
                path: path.to_string(),
            });
        }
        let sub = |p: &str| format!("{path}/{p}");
        match k.as_str() {
            "type" => match v {
                Value::String(s) if TYPE_NAMES.contains(&s.as_str()) => {}
                Value::Array(a)
                    if !a.is_empty()
                        && a.iter()
                            .all(|t| t.as_str().is_some_and(|s| TYPE_NAMES.contains(&s))) => {}
                _ => {
                    return Err(shape(
                        k,
                        path,
                        "must be one of string, number, integer, boolean, object, array, null, or a non-empty array of them",
                    ));
                }
            },
            "properties" | "patternProperties" => {
                let Value::Object(props) = v else {
                    return Err(shape(k, path, "must be an object of schemas"));
                };
                for (name, s) in props {
                    if k == "patternProperties" {
                        // Refs under it are found with this pattern: one that cannot be
                        // compiled would leave them unfound.
                        Pattern::compile(name).map_err(|problem| SchemaError::Pattern {
                            pattern: name.to_string(),
                            path: sub(k),
                            problem,
                        })?;
                    }
                    check_at(s, &format!("{}/{}", sub(k), escape_pointer(name)))?;
                }
            }
            "required" => require(
                v.as_array()
                    .is_some_and(|a| a.iter().all(|x| x.as_str().is_some())),
                k,
                path,
                "must be an array of strings",
            )?,
            "additionalProperties" => match v {
                Value::Bool(_) => {}
                Value::Object(_) => check_at(v, &sub(k))?,
                _ => return Err(shape(k, path, "must be a boolean or a schema")),
            },
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                let Some(a) = v.as_array().filter(|a| !a.is_empty()) else {
                    return Err(shape(k, path, "must be a non-empty array of schemas"));
                };
                for (i, s) in a.iter().enumerate() {
                    check_at(s, &format!("{}/{i}", sub(k)))?;
                }
            }
            "items" | "if" | "then" | "else" | "not" | "contains" | "propertyNames" => {
                check_at(v, &sub(k))?;
            }
            "format" => {
                let Some(f) = v.as_str() else {
                    return Err(shape(k, path, "must be a string"));
                };
                if !KNOWN_FORMATS.contains(&f) {
                    return Err(SchemaError::UnknownFormat {
                        format: f.to_string(),
                        path: path.to_string(),
                    });
                }
            }
            "title" | "description" | "pattern" | "$comment" => {
                require(v.as_str().is_some(), k, path, "must be a string")?;
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "minLength"
            | "maxLength" | "minItems" | "maxItems" | "multipleOf" | "minProperties"
            | "maxProperties" => require(v.as_f64().is_some(), k, path, "must be a number")?,
            "uniqueItems" | "readOnly" | "writeOnly" | "deprecated" => {
                require(matches!(v, Value::Bool(_)), k, path, "must be a boolean")?;
            }
            "enum" => require(
                v.as_array().is_some_and(|a| !a.is_empty()),
                k,
                path,
                "must be a non-empty array",
            )?,
            "examples" => require(v.as_array().is_some(), k, path, "must be an array")?,
            _ => {} // const, default: any value
        }
    }
    Ok(())
}

fn require(ok: bool, keyword: &str, path: &str, problem: &str) -> Result<(), SchemaError> {
    if ok {
        Ok(())
    } else {
        Err(shape(keyword, path, problem))
    }
}

pub(crate) fn escape_pointer(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// A compiled payload validator for one schema.
pub struct Validator {
    inner: jsonschema::Validator,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Validator")
    }
}

impl Validator {
    /// Compiles `schema` with draft-07 semantics and the `ocas_ref` format.
    ///
    /// # Errors
    /// [`SchemaError::Compile`] when the schema is not a valid draft-07 schema.
    pub fn new(schema: &Value) -> Result<Validator, SchemaError> {
        let inner = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .with_format("ocas_ref", is_ocas_ref)
            .should_validate_formats(true)
            .should_ignore_unknown_formats(false)
            .build(&schema.to_serde_json())
            .map_err(|e| SchemaError::Compile(e.to_string()))?;
        Ok(Validator { inner })
    }

    /// Checks `payload`; `schema_id` names the schema in the error.
    ///
    /// # Errors
    /// [`SchemaError::Invalid`] with the first violation and its location.
    pub fn validate(&self, payload: &Value, schema_id: &str) -> Result<(), SchemaError> {
        let inst = payload.to_serde_json();
        match self.inner.iter_errors(&inst).next() {
            None => Ok(()),
            Some(e) => {
                let loc = e.instance_path().to_string();
                let loc = if loc.is_empty() { "/".to_string() } else { loc };
                Err(SchemaError::Invalid {
                    schema: schema_id.to_string(),
                    message: format!("at {loc}: {e}"),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(s: &str) -> Value {
        Value::from_json_str(s).unwrap()
    }

    #[test]
    fn whitelist() {
        assert!(
            check_schema(&j(
                r#"{"type":"object","properties":{"a":{"type":"string","format":"ocas_ref"}}}"#
            ))
            .is_ok()
        );
        let e =
            check_schema(&j(r#"{"type":"object","properties":{"a":{"$ref":"x"}}}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid schema: keyword \"$ref\" is not allowed at #/properties/a"
        );
        assert!(matches!(
            check_schema(&j(r#"{"format":"date-time"}"#)),
            Err(SchemaError::UnknownFormat { .. })
        ));
        assert!(matches!(
            check_schema(&j(r#"{"enum":[]}"#)),
            Err(SchemaError::Shape { .. })
        ));
        assert!(matches!(
            check_schema(&j(r#"{"type":"text"}"#)),
            Err(SchemaError::Shape { .. })
        ));
    }

    #[test]
    fn validates_draft7_with_ocas_ref() {
        let v = Validator::new(&j(r#"{"type":"object","properties":{"r":{"type":"string","format":"ocas_ref"},"n":{"type":"integer"}},"required":["r"]}"#)).unwrap();
        assert!(
            v.validate(&j(r#"{"r":"7VQ43ZSJTEWA7","n":1.0}"#), "X")
                .is_ok()
        );
        assert!(v.validate(&j(r#"{"r":"7vq43zsjtewa7"}"#), "X").is_err());
        assert!(v.validate(&j(r#"{"n":1}"#), "X").is_err());
    }
}
