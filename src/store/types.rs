//! What the store knows about one type, cached per store handle.

use super::error::{Result, StoreError};
use crate::cas::Value;
use crate::cas::refplan::RefPlan;
use crate::cas::schema::{SchemaError, Validator};
use std::sync::{Arc, OnceLock};

/// What the store knows about one type: its schema and what it takes to check and walk it.
pub(crate) struct TypeInfo {
    /// Shared, so that a caller keeps the schema without copying it.
    pub(crate) schema: Arc<Value>,
    validator: OnceLock<std::result::Result<Validator, SchemaError>>,
    /// Compiled once per store handle; an error (a pattern registration would have refused)
    /// fails every reference lookup of the type instead of skipping references.
    plan: std::result::Result<RefPlan, SchemaError>,
}

impl TypeInfo {
    pub(crate) fn new(schema: Value) -> TypeInfo {
        TypeInfo {
            plan: RefPlan::compile(&schema),
            schema: Arc::new(schema),
            validator: OnceLock::new(),
        }
    }

    /// The reference plan of the schema.
    ///
    /// # Errors
    /// [`StoreError::Schema`] when the schema has a pattern the plan cannot compile.
    pub(crate) fn plan(&self) -> Result<&RefPlan> {
        self.plan
            .as_ref()
            .map_err(|e| StoreError::Schema(e.clone()))
    }

    pub(crate) fn validator(&self) -> std::result::Result<&Validator, SchemaError> {
        self.validator
            .get_or_init(|| Validator::new(&self.schema))
            .as_ref()
            .map_err(Clone::clone)
    }
}
