//! Conditions of transition-list graphs: JSONata expressions behind a small trait.
//!
//! The engine only needs "does this expression parse" and "what does it give over this
//! context"; [`Jsonata`] answers both with the `jsonata-core` crate (see `docs/jsonata.md` for
//! why that crate).

use crate::cas::Value;

/// Evaluates condition expressions over a moderator context.
pub trait ConditionEvaluator {
    /// Checks that `expression` parses.
    ///
    /// # Errors
    /// The parser's message.
    fn check(&self, expression: &str) -> Result<(), String>;

    /// Evaluates `expression` over `context`; `None` is JSONata's "no result" (undefined).
    ///
    /// # Errors
    /// The evaluator's message.
    fn evaluate(&self, expression: &str, context: &Value) -> Result<Option<Value>, String>;

    /// Evaluates `expression` and applies the moderator's truthiness rule (`truthy`).
    ///
    /// # Errors
    /// As [`evaluate`](ConditionEvaluator::evaluate).
    fn test(&self, expression: &str, context: &Value) -> Result<bool, String> {
        Ok(truthy(self.evaluate(expression, context)?.as_ref()))
    }
}

/// The moderator's truthiness: no result and null are false; booleans as they are; numbers are
/// true unless 0 or NaN; strings unless empty; objects and arrays (even empty) are true.
pub(crate) fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => *n != 0.0 && !n.is_nan(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_) | Value::Object(_)) => true,
    }
}

/// JSONata through the `jsonata-core` crate, with a time limit per evaluation.
#[derive(Debug, Clone)]
pub struct Jsonata {
    /// Longest time one evaluation may take, in milliseconds.
    pub timeout_ms: u64,
}

impl Default for Jsonata {
    fn default() -> Self {
        Jsonata { timeout_ms: 5_000 }
    }
}

impl Jsonata {
    fn compile(&self, expression: &str) -> Result<jsonata_core::Expression, String> {
        let options = jsonata_core::evaluator::EvaluatorOptions {
            timeout_ms: Some(self.timeout_ms),
            ..Default::default()
        };
        jsonata_core::Expression::compile_with_options(expression, options)
            .map_err(|e| e.to_string())
    }

    fn run(
        &self,
        expression: &str,
        context: &Value,
    ) -> Result<jsonata_core::value::JValue, String> {
        let expr = self.compile(expression)?;
        let data = jsonata_core::value::JValue::from(context.to_serde_json());
        expr.evaluate(&data).map_err(|e| e.to_string())
    }
}

impl ConditionEvaluator for Jsonata {
    fn check(&self, expression: &str) -> Result<(), String> {
        self.compile(expression).map(|_| ())
    }

    fn evaluate(&self, expression: &str, context: &Value) -> Result<Option<Value>, String> {
        let v = self.run(expression, context)?;
        if v.is_undefined() {
            return Ok(None);
        }
        Ok(Some(Value::from_serde_json(&serde_json::Value::from(&v))))
    }

    fn test(&self, expression: &str, context: &Value) -> Result<bool, String> {
        let v = self.run(expression, context)?;
        if v.is_function() || v.is_regex() {
            return Ok(true);
        }
        if v.is_undefined() {
            return Ok(false);
        }
        Ok(truthy(Some(&Value::from_serde_json(
            &serde_json::Value::from(&v),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Value {
        Value::from_json_str(
            r#"{"start":{"workflow":"DDY7SM1N7BV4G","prompt":"Fix the login bug"},
                "steps":[{"role":"planner","output":{"plan":"p"},"detail":"D1","agent":"a"},
                         {"role":"reviewer","output":{"approved":false,"score":0},"detail":"D2","agent":"a"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn truthiness_rules() {
        assert!(!truthy(None));
        assert!(!truthy(Some(&Value::Null)));
        assert!(!truthy(Some(&Value::Number(0.0))));
        assert!(!truthy(Some(&Value::Number(f64::NAN))));
        assert!(truthy(Some(&Value::Number(-1.0))));
        assert!(!truthy(Some(&Value::str(""))));
        assert!(truthy(Some(&Value::str("x"))));
        assert!(truthy(Some(&Value::Array(vec![]))));
        assert!(truthy(Some(&Value::Object(Default::default()))));
    }

    #[test]
    fn evaluates_over_the_context() {
        let j = Jsonata::default();
        let c = ctx();
        assert!(j.test("steps[-1].output.approved = false", &c).unwrap());
        assert!(!j.test("steps[-1].output.score", &c).unwrap());
        assert!(!j.test("steps[-1].output.missing", &c).unwrap());
        assert!(j.test("steps[role=\"planner\"]", &c).unwrap());
        assert!(
            j.test("$count(steps) = 2 and $contains(start.prompt, 'login')", &c)
                .unwrap()
        );
        assert!(j.test("function($x){$x}", &c).unwrap());
        assert_eq!(
            j.evaluate("steps.role", &c).unwrap().unwrap().to_json(),
            r#"["planner","reviewer"]"#
        );
        assert_eq!(j.evaluate("steps[5]", &c).unwrap(), None);
    }

    #[test]
    fn errors_are_reported() {
        let j = Jsonata::default();
        assert!(j.check("steps[").is_err());
        assert!(j.check("steps[-1].output.approved = false").is_ok());
        assert!(j.evaluate("1 + 'a'", &ctx()).is_err());
    }
}
