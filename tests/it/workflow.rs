//! Workflows: loading, validation, materialisation ids, moderator paths.

use std::path::{Path, PathBuf};
use uwf::workflow::{self, Jsonata, WorkflowError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/workflows")
        .join(name)
}

fn load(name: &str) -> Result<workflow::WorkflowDef, WorkflowError> {
    workflow::load_file(&fixture(name), &Jsonata::default())
}

#[test]
fn debate_gets_the_typescript_ids() {
    let m = workflow::materialize(&load("debate.yaml").unwrap()).unwrap();
    assert_eq!(m.workflow_type.to_string(), "AZF3FA1TN3D4A");
    assert_eq!(m.workflow_id.to_string(), "DDY7SM1N7BV4G");
    let ids: Vec<String> = m.schemas.iter().map(|s| s.id.to_string()).collect();
    assert_eq!(ids, ["CC1TJZFP1CW44", "9X16DR9CPBZS0"]);
}

#[test]
fn review_loop_gets_the_registered_id() {
    // The id the TypeScript tool registered in the ts-root-small fixture (workflows.yaml).
    let m = workflow::materialize(&load("review-loop.yaml").unwrap()).unwrap();
    assert_eq!(m.workflow_type.to_string(), "AZF3FA1TN3D4A");
    assert_eq!(m.workflow_id.to_string(), "AZAY8RX9BJ358");
}
