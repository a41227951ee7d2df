//! Reading a workflow: YAML text or a file, its shape, its name and its semantics.

use super::condition::ConditionEvaluator;
use super::error::WorkflowError;
use super::model::{self, WorkflowDef};
use super::yaml;
use std::path::Path;

/// Parses workflow YAML text; `base_dir` resolves `!include` (refused when `None`).
///
/// Checks the shape only; call [`validate()`] for the semantic checks.
///
/// # Errors
/// [`WorkflowError::Yaml`], [`WorkflowError::Include`] or [`WorkflowError::Shape`].
pub fn parse_str(text: &str, base_dir: Option<&Path>) -> Result<WorkflowDef, WorkflowError> {
    let doc = yaml::parse_str(text, base_dir, "<input>")?;
    WorkflowDef::from_yaml_value(&doc)
}

/// Reads a workflow file: YAML with includes, shape, name against the file name, semantics.
///
/// # Errors
/// Any [`WorkflowError`]; semantic problems come together in [`WorkflowError::Invalid`].
pub fn load_file(
    path: &Path,
    evaluator: &dyn ConditionEvaluator,
) -> Result<WorkflowDef, WorkflowError> {
    let doc = yaml::load_file(path)?;
    let def = WorkflowDef::from_yaml_value(&doc)?;
    model::check_name(path, &def.name)?;
    validate(&def, evaluator)?;
    Ok(def)
}

/// Runs the semantic checks of `validate::semantic_errors`.
///
/// # Errors
/// [`WorkflowError::Invalid`] with every problem found.
pub fn validate(
    def: &WorkflowDef,
    evaluator: &dyn ConditionEvaluator,
) -> Result<(), WorkflowError> {
    let errors = super::validate::semantic_errors(def, evaluator);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(WorkflowError::Invalid(errors))
    }
}
