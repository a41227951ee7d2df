//! Workflows: loading with includes, shape and semantic errors, materialisation ids, the
//! moderator's routing over scripted outputs, and graph drawing.

use std::path::{Path, PathBuf};
use uwf::agent::{self, Script};
use uwf::cas::schema::Validator;
use uwf::cas::{Value, bootstrap, refplan};
use uwf::workflow::{
    self, Decision, GraphFormat, History, Jsonata, ModeratorError, StepView, StoredWorkflow,
    WorkflowDef, WorkflowError,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/workflows")
        .join(name)
}

fn load(name: &str) -> Result<WorkflowDef, WorkflowError> {
    workflow::load_file(&fixture(name), &Jsonata::default())
}

fn j(s: &str) -> Value {
    Value::from_json_str(s).unwrap()
}

// ---- ids of the TypeScript tool ----

#[test]
fn debate_gets_the_typescript_ids() {
    let m = workflow::materialize(&load("debate.yaml").unwrap()).unwrap();
    assert_eq!(m.workflow_type.to_string(), "AZF3FA1TN3D4A");
    assert_eq!(m.workflow_id.to_string(), "DDY7SM1N7BV4G");
    let ids: Vec<String> = m.schemas.iter().map(|s| s.id.to_string()).collect();
    assert_eq!(ids, ["CC1TJZFP1CW44", "9X16DR9CPBZS0"]);
    assert_eq!(
        m.schemas[0].payload.get("title"),
        Some(&Value::str("debate.against"))
    );
    // The payload validates against the TypeScript tool's Workflow schema and reads back.
    let ts = bootstrap::by_name("uwf/Workflow").unwrap();
    Validator::new(&ts.payload)
        .unwrap()
        .validate(&m.workflow, "AZF3FA1TN3D4A")
        .unwrap();
    assert_eq!(StoredWorkflow::from_payload(&m.workflow).unwrap(), m.stored);
    let mut found = Vec::new();
    refplan::collect_refs(&ts.payload, &m.workflow, &mut found).unwrap();
    assert_eq!(found, ["CC1TJZFP1CW44", "9X16DR9CPBZS0"]);
}

#[test]
fn review_loop_gets_the_registered_id() {
    // The id the TypeScript tool registered in the ts-root-small fixture (workflows.yaml).
    let m = workflow::materialize(&load("review-loop.yaml").unwrap()).unwrap();
    assert_eq!(m.workflow_type.to_string(), "AZF3FA1TN3D4A");
    assert_eq!(m.workflow_id.to_string(), "AZAY8RX9BJ358");
    // An explicit title is kept.
    assert_eq!(
        m.schemas[1].payload.get("title"),
        Some(&Value::str("Reviewer verdict ✓"))
    );
}

#[test]
fn location_is_always_stored() {
    let m = workflow::materialize(&load("debate.yaml").unwrap()).unwrap();
    let start = m.workflow.get("graph").unwrap().get("$START").unwrap();
    assert_eq!(
        start.get("_").unwrap().to_json(),
        r#"{"role":"against","prompt":"Present your opening argument against the proposition.","location":null}"#
    );
}

// ---- the extended form ----

#[test]
fn transition_lists_use_the_extended_schema() {
    let def = load("solve-issue.yaml").unwrap();
    assert!(!def.is_ts_compatible());
    let m = workflow::materialize(&def).unwrap();
    let ext = workflow::extended_schema();
    assert_eq!(m.workflow_type, ext.id);
    assert_eq!(m.schemas[0], *ext);
    assert_eq!(m.schemas.len(), 4);
    uwf::cas::schema::check_schema(&ext.payload).unwrap();
    Validator::new(&ext.payload)
        .unwrap()
        .validate(&m.workflow, &ext.id.to_string())
        .unwrap();
    // Role schemas are references the CAS walk follows.
    let mut found = Vec::new();
    refplan::collect_refs(&ext.payload, &m.workflow, &mut found).unwrap();
    let role_ids: Vec<String> = m.schemas[1..].iter().map(|s| s.id.to_string()).collect();
    assert_eq!(found, role_ids);
    assert_eq!(
        m.workflow
            .get("conditions")
            .unwrap()
            .get("notApproved")
            .unwrap()
            .to_json(),
        r#"{"description":"Reviewer rejected the implementation","expression":"steps[-1].output.approved = false"}"#
    );
    assert_eq!(
        m.workflow
            .get("roles")
            .unwrap()
            .get("planner")
            .unwrap()
            .get("outputSchema"),
        Some(&Value::str(role_ids[0].clone()))
    );
    assert_eq!(StoredWorkflow::from_payload(&m.workflow).unwrap(), m.stored);
    // Same input, same id.
    assert_eq!(
        workflow::materialize(&def).unwrap().workflow_id,
        m.workflow_id
    );
}

#[test]
fn system_prompt_roles_in_a_status_map_use_the_extended_schema() {
    let yaml = "name: sp\ndescription: d\nroles:\n  a:\n    description: A\n    systemPrompt: You are A.\n    outputSchema: {type: object, properties: {x: {type: string}}}\ngraph:\n  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: 'done {{x}}'}}\n";
    let def = workflow::parse_str(yaml, None).unwrap();
    workflow::validate(&def, &Jsonata::default()).unwrap();
    let m = workflow::materialize(&def).unwrap();
    assert_eq!(m.workflow_type, workflow::extended_schema().id);
    assert_eq!(m.workflow.get("conditions").unwrap().to_json(), "{}");
    Validator::new(&workflow::extended_schema().payload)
        .unwrap()
        .validate(&m.workflow, "ext")
        .unwrap();
}

#[test]
fn meta_is_an_alias_of_frontmatter() {
    let base = std::fs::read_to_string(fixture("debate.yaml")).unwrap();
    let with_meta = base.replace("    frontmatter:", "    meta:");
    let def = workflow::parse_str(&with_meta, None).unwrap();
    assert_eq!(
        workflow::materialize(&def).unwrap().workflow_id.to_string(),
        "DDY7SM1N7BV4G"
    );
}

// ---- includes ----

#[test]
fn includes_text_json_and_nested_yaml() {
    let def = load("with-include/with-include.yaml").unwrap();
    assert_eq!(def.description, "A workflow assembled from included files");
    let writer = &def.roles["writer"];
    match &writer.brief {
        workflow::Brief::Charter { goal, .. } => assert_eq!(goal, "# Goal\n\nWrite clearly.\n"),
        other => panic!("unexpected brief {other:?}"),
    }
    assert_eq!(
        writer.schema.get("required").unwrap().to_json(),
        r#"["text"]"#
    );
    match &def.roles["reviewer"].brief {
        workflow::Brief::Charter { goal, .. } => assert_eq!(goal, "Judge fairly."),
        other => panic!("unexpected brief {other:?}"),
    }
}

fn load_err(name: &str) -> String {
    load(name).unwrap_err().to_string()
}

#[test]
fn include_escaping_its_directory_is_blocked() {
    for name in [
        "invalid/escape/escape.yaml",
        "invalid/absolute.yaml",
        "invalid/nested/nested.yaml",
    ] {
        let e = load_err(name);
        assert!(e.starts_with("invalid YAML: "), "{name}: {e}");
        assert!(e.contains("path traversal blocked"), "{name}: {e}");
    }
    assert!(load_err("invalid/nested/nested.yaml").contains("!include \"../nested.yaml\""));
}

#[test]
fn missing_include_is_an_error() {
    let e = load_err("invalid/missing-include.yaml");
    assert!(e.starts_with("invalid YAML: "), "{e}");
    assert!(e.contains("!include \"nope.md\": file not found"), "{e}");
}

#[test]
fn bad_input_files() {
    let e = load_err("invalid/bad-yaml.yaml");
    assert!(e.starts_with("invalid YAML: "), "{e}");
    assert!(e.contains("bad-yaml.yaml"), "{e}");
    let e = load_err("invalid/not-a-workflow.yaml");
    assert_eq!(e, "invalid workflow YAML: the document must be a mapping");
    let e = load_err("invalid/name-mismatch.yaml");
    assert_eq!(
        e,
        "workflow name mismatch: file \"name-mismatch.yaml\" implies name \"name-mismatch\" but YAML declares name \"something-else\""
    );
    let e = load_err("invalid/does-not-exist.yaml");
    assert!(e.starts_with("file not found: "), "{e}");
    assert!(e.ends_with("does-not-exist.yaml"), "{e}");
    let e = load_err("invalid/unknown-role.yaml");
    assert_eq!(
        e,
        "workflow validation failed:\n  - edge worker→_: unknown target role \"ghost\""
    );
}

// ---- semantic validation ----

/// Semantic errors of a status-map workflow built from `roles` and `graph` YAML.
fn errors(roles: &str, graph: &str) -> Vec<String> {
    let yaml = format!("name: t\ndescription: d\nroles:\n{roles}\ngraph:\n{graph}\n");
    let def = workflow::parse_str(&yaml, None).unwrap();
    match workflow::validate(&def, &Jsonata::default()) {
        Ok(()) => Vec::new(),
        Err(WorkflowError::Invalid(e)) => e,
        Err(other) => panic!("unexpected error {other}"),
    }
}

fn role(name: &str, frontmatter: &str) -> String {
    format!(
        "  {name}:\n    description: d\n    goal: g\n    capabilities: []\n    procedure: p\n    output: o\n    frontmatter: {frontmatter}\n"
    )
}

const SINGLE: &str = "{type: object, properties: {summary: {type: string}}}";
const MULTI: &str =
    "{type: object, properties: {$status: {enum: [approved, rejected]}, note: {type: string}}}";

#[test]
fn semantic_errors_each_covered() {
    let check = |roles: String, graph: &str, want: &[&str]| {
        let got = errors(&roles, graph);
        assert_eq!(got, want, "roles:\n{roles}graph:\n{graph}");
    };
    check(
        role("$START", SINGLE) + &role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: done}}",
        &["reserved name \"$START\" must not appear in roles"],
    );
    check(
        role("a", SINGLE),
        "  a: {_: {role: $END, prompt: done}}",
        &[
            "$START must be defined in graph",
            "role \"a\" is not reachable from $START",
        ],
    );
    check(
        role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}, x: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: done}}",
        &["$START must have exactly one edge with status \"_\""],
    );
    check(
        role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: done}}\n  $END: {_: {role: a, prompt: again}}",
        &["$END must not have outgoing edges"],
    );
    check(
        role("a", SINGLE) + &role("isolated", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: done}}\n  isolated: {_: {role: $END, prompt: done}}",
        &["role \"isolated\" is not reachable from $START"],
    );
    check(
        role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: ghost, prompt: done}}",
        &["edge a→_: unknown target role \"ghost\""],
    );
    check(
        role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: done}}\n  b: {_: {role: $END, prompt: done}}",
        &["graph references unknown role \"b\""],
    );
    check(
        role("a", SINGLE) + &role("b", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: b, prompt: done}}",
        &["role \"b\" is defined but not referenced in graph"],
    );
    check(
        role("reviewer", MULTI),
        "  $START: {_: {role: reviewer, prompt: go}}\n  reviewer: {_: {role: $END, prompt: done}}",
        &["role \"reviewer\" is multi-exit but graph uses \"_\""],
    );
    check(
        role("reviewer", MULTI),
        "  $START: {_: {role: reviewer, prompt: go}}\n  reviewer: {approved: {role: $END, prompt: ok}, timeout: {role: $END, prompt: late}}",
        &[
            "role \"reviewer\" graph has extra status keys: timeout",
            "role \"reviewer\" graph is missing status keys: rejected",
        ],
    );
    check(
        role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {done: {role: $END, prompt: done}}",
        &["role \"a\" is single-exit but graph has no \"_\" key"],
    );
    check(
        role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: done}, x: {role: $END, prompt: done}}",
        &["role \"a\" is single-exit but has status keys other than \"_\""],
    );
    // Mustache variables must be frontmatter properties; $status is always allowed.
    check(
        role("a", SINGLE),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: '{{{summary}}} {{$status}} {{missing}}'}}",
        &["prompt variable \"missing\" not found in role \"a\" frontmatter"],
    );
    check(
        role("r", MULTI),
        "  $START: {_: {role: r, prompt: go}}\n  r: {approved: {role: $END, prompt: '{{note}}'}, rejected: {role: $END, prompt: '{{why}}'}}",
        &["prompt variable \"why\" in graph[r][rejected] not found in role \"r\" frontmatter"],
    );
    // A single-value enum is single-exit.
    check(
        role("a", "{type: object, properties: {$status: {enum: [done]}}}"),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: '{{$status}}'}}",
        &[],
    );
    // oneOf variants.
    let one_of = "{oneOf: [{type: object, properties: {$status: {const: ok}, a: {type: string}}}, {type: object, properties: {$status: {const: no}, b: {type: string}}}]}";
    check(
        role("r", one_of),
        "  $START: {_: {role: r, prompt: go}}\n  r: {ok: {role: $END, prompt: '{{a}}'}, no: {role: $END, prompt: '{{a}}'}}",
        &["prompt variable \"a\" not found in role \"r\" variant \"no\""],
    );
    check(
        role(
            "r",
            "{oneOf: [{type: object, properties: {$status: {const: ok}}}, {type: object, properties: {x: {type: string}}}]}",
        ),
        "  $START: {_: {role: r, prompt: go}}\n  r: {ok: {role: $END, prompt: done}}",
        &["role \"r\": oneOf variants must have \"$status\" as const discriminant"],
    );
    // Schemas the store would refuse.
    check(
        role("a", "{type: object, properties: {x: {$ref: '#/y'}}}"),
        "  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: done}}",
        &[
            "role \"a\" output schema: invalid schema: keyword \"$ref\" is not allowed at #/properties/x",
        ],
    );
}

#[test]
fn semantic_errors_are_reported_together() {
    let got = errors(
        &(role("$END", SINGLE) + &role("reviewer", MULTI) + &role("isolated", SINGLE)),
        "  $START: {_: {role: reviewer, prompt: go}}\n  reviewer: {approved: {role: ghost, prompt: ok}}\n  isolated: {_: {role: $END, prompt: x}}",
    );
    assert_eq!(
        got,
        [
            "reserved name \"$END\" must not appear in roles",
            "edge reviewer→approved: unknown target role \"ghost\"",
            "role \"isolated\" is not reachable from $START",
            "role \"reviewer\" graph is missing status keys: rejected",
        ]
    );
    let yaml = format!(
        "name: t\ndescription: d\nroles:\n{}graph:\n  a: {{_: {{role: $END, prompt: x}}}}\n",
        role("a", SINGLE)
    );
    let e = workflow::validate(
        &workflow::parse_str(&yaml, None).unwrap(),
        &Jsonata::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "workflow validation failed:\n  - $START must be defined in graph\n  - role \"a\" is not reachable from $START"
    );
}

#[test]
fn transition_list_errors() {
    let e = load("invalid/bad-transitions.yaml").unwrap_err();
    let WorkflowError::Invalid(errors) = e else {
        panic!("unexpected {e}")
    };
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert_eq!(errors[0], "$END must not have outgoing edges");
    assert_eq!(errors[1], "edge planner[0]: unknown target role \"ghost\"");
    assert_eq!(errors[2], "edge planner[0]: unknown condition \"nope\"");
    assert_eq!(errors[3], "role \"orphan\" is not reachable from $START");
    assert!(
        errors[4].starts_with("condition \"broken\" is not a valid JSONata expression: "),
        "{}",
        errors[4]
    );
}

// ---- the moderator ----

/// Runs a thread to `$END` (or `limit` steps), answering each role with the scripted reply of
/// its visit, extracted by the frontmatter fast path. Returns the decisions taken.
fn run(def: &WorkflowDef, script: &str, limit: usize) -> Vec<Decision> {
    let script = Script::from_yaml(script).unwrap();
    let m = workflow::materialize(def).unwrap();
    let mut history = History {
        start: j(
            r#"{"workflow":"DDY7SM1N7BV4G","prompt":"Is Rust better than Go?","cwd":"/tmp/x"}"#,
        ),
        steps: Vec::new(),
    };
    let mut decisions = Vec::new();
    for _ in 0..limit {
        let d = workflow::next(&m.stored, &history, &Jsonata::default()).unwrap();
        decisions.push(d.clone());
        if d.is_end() {
            break;
        }
        let visit = history.steps.iter().filter(|s| s.role == d.role).count();
        let raw = script.reply(&d.role, visit).unwrap().to_raw();
        let schema = &def.roles[&d.role].schema;
        let out = agent::fast_path(&raw, schema, "X").unwrap();
        history.steps.push(StepView {
            role: d.role.clone(),
            output: out.output,
            detail: "95ST8MZ0QTKP9".into(),
            agent: "uwf-scripted".into(),
        });
    }
    decisions
}

fn roles_of(decisions: &[Decision]) -> Vec<&str> {
    decisions.iter().map(|d| d.role.as_str()).collect()
}

#[test]
fn transition_list_path_loops_until_approved() {
    let script = "planner:\n  - {plan: p, steps: [a, b]}\ndeveloper:\n  - {filesChanged: [src/a.rs], summary: first}\n  - {filesChanged: [src/a.rs, src/b.rs], summary: second}\n  - {filesChanged: [], summary: third}\nreviewer:\n  - {approved: false, comments: add a test}\n  - {approved: false, comments: still failing}\n  - {approved: true, comments: ok}\n";
    let d = run(&load("solve-issue.yaml").unwrap(), script, 20);
    assert_eq!(
        roles_of(&d),
        [
            "planner",
            "developer",
            "reviewer",
            "developer",
            "reviewer",
            "developer",
            "reviewer",
            "$END"
        ]
    );
    assert!(d.iter().all(|d| d.prompt.is_none() && d.location.is_none()));
}

#[test]
fn status_map_path_with_edge_prompts() {
    let script = "against:\n  - {$status: continue, argument: Go is simpler}\n  - {$status: conceded, argument: fair}\nfor:\n  - {$status: continue, argument: 'Rust is safer & faster'}\n";
    let d = run(&load("debate.yaml").unwrap(), script, 10);
    assert_eq!(roles_of(&d), ["against", "for", "against", "$END"]);
    assert_eq!(
        d[0].prompt.as_deref(),
        Some("Present your opening argument against the proposition.")
    );
    assert_eq!(
        d[1].prompt.as_deref(),
        Some("Counter the opposing argument: Go is simpler")
    );
    // No HTML escaping.
    assert_eq!(
        d[2].prompt.as_deref(),
        Some("Counter the opposing argument: Rust is safer & faster")
    );
    assert_eq!(
        d[3].prompt.as_deref(),
        Some("The against side conceded. Debate over.")
    );
}

#[test]
fn status_map_loop_with_locations() {
    let script = "coder:\n  - {$status: ready, summary: first try, metrics: {lines: 3}}\n  - {$status: ready, summary: second try}\nreviewer:\n  - {$status: changes_requested, score: 0.5}\n  - {$status: approved, score: 4.5}\n";
    let d = run(&load("review-loop.yaml").unwrap(), script, 10);
    assert_eq!(
        roles_of(&d),
        ["coder", "reviewer", "coder", "reviewer", "$END"]
    );
    assert_eq!(
        d[1].prompt.as_deref(),
        Some("Review this change: first try")
    );
    assert_eq!(d[1].location.as_deref(), Some("/srv/review/ready"));
    assert_eq!(
        d[2].prompt.as_deref(),
        Some("Address the review (score 0.5) and resubmit.")
    );
    assert_eq!(d[2].location.as_deref(), Some("/srv/repos/review-loop"));
    assert_eq!(d[0].location, None);
    assert_eq!(d[4].prompt.as_deref(), Some("Approved with score 4.5."));
}

fn history(steps: &[(&str, &str)]) -> History {
    History {
        start: j(r#"{"workflow":"W","prompt":"p","cwd":"/"}"#),
        steps: steps
            .iter()
            .map(|(role, out)| StepView {
                role: role.to_string(),
                output: j(out),
                detail: "D".into(),
                agent: "a".into(),
            })
            .collect(),
    }
}

#[test]
fn moderator_errors() {
    let debate = workflow::materialize(&load("debate.yaml").unwrap())
        .unwrap()
        .stored;
    let ev = Jsonata::default();
    let e = workflow::next(
        &debate,
        &history(&[("against", r#"{"$status":"maybe"}"#)]),
        &ev,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "no transition for role \"against\" with status \"maybe\""
    );
    let e = workflow::next(&debate, &history(&[("judge", "{}")]), &ev).unwrap_err();
    assert_eq!(e, ModeratorError::NoTransitions("judge".into()));
    assert_eq!(e.to_string(), "no transitions defined for role \"judge\"");
    // A non-object output routes by "_"; `status` is used when `$status` is absent.
    let e = workflow::next(&debate, &history(&[("against", "[1]")]), &ev).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no transition for role \"against\" with status \"_\""
    );
    let d = workflow::next(
        &debate,
        &history(&[("against", r#"{"status":"continue","argument":"x"}"#)]),
        &ev,
    )
    .unwrap();
    assert_eq!(d.role, "for");
    // An edge prompt that renders to nothing.
    let d = workflow::next(
        &debate,
        &history(&[("against", r#"{"$status":"continue"}"#)]),
        &ev,
    )
    .unwrap();
    assert_eq!(d.prompt.as_deref(), Some("Counter the opposing argument: "));
    let yaml = "name: e\ndescription: d\nroles:\n  a: {description: d, goal: g, capabilities: [], procedure: p, output: o, frontmatter: {type: object, properties: {x: {type: string}}}}\ngraph:\n  $START: {_: {role: a, prompt: go}}\n  a: {_: {role: $END, prompt: '{{{x}}}'}}\n";
    let wf = workflow::materialize(&workflow::parse_str(yaml, None).unwrap())
        .unwrap()
        .stored;
    let e = workflow::next(&wf, &history(&[("a", r#"{"x":"  "}"#)]), &ev).unwrap_err();
    assert_eq!(
        e.to_string(),
        "edge prompt resolved to empty string for role \"$END\" (template: \"{{{x}}}\"). Check that upstream output includes required variables."
    );

    let solve = workflow::materialize(&load("solve-issue.yaml").unwrap())
        .unwrap()
        .stored;
    let mut broken = solve.clone();
    if let workflow::Graph::Transitions(g) = &mut broken.graph {
        g.get_mut("reviewer").unwrap()[0].condition = Some("nope".into());
        g.get_mut("reviewer").unwrap().pop();
    }
    let h = history(&[("reviewer", r#"{"approved":true}"#)]);
    assert_eq!(
        workflow::next(&broken, &h, &ev).unwrap_err().to_string(),
        "unknown condition \"nope\""
    );
    let mut no_match = solve.clone();
    if let workflow::Graph::Transitions(g) = &mut no_match.graph {
        g.get_mut("reviewer").unwrap().pop();
    }
    assert_eq!(
        workflow::next(&no_match, &h, &ev).unwrap_err().to_string(),
        "no transition matched for role \"reviewer\""
    );
    let mut failing = solve.clone();
    failing
        .conditions
        .get_mut("notApproved")
        .unwrap()
        .expression = "1 + 'a'".into();
    let e = workflow::next(&failing, &h, &ev).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("condition \"notApproved\" failed: "),
        "{e}"
    );
}

#[test]
fn jsonata_sees_expanded_outputs_and_the_start() {
    let mut solve = workflow::materialize(&load("solve-issue.yaml").unwrap())
        .unwrap()
        .stored;
    solve.conditions.get_mut("notApproved").unwrap().expression =
        "$count(steps[role='developer']) < 2 and $contains(start.prompt, 'p') and steps[-2].output.summary = 'draft'".into();
    let ev = Jsonata::default();
    let h = history(&[
        ("planner", r#"{"plan":"x","steps":[]}"#),
        ("developer", r#"{"filesChanged":[],"summary":"draft"}"#),
        ("reviewer", r#"{"approved":true,"comments":""}"#),
    ]);
    assert_eq!(workflow::next(&solve, &h, &ev).unwrap().role, "developer");
    let h2 = history(&[
        ("developer", r#"{"filesChanged":[],"summary":"draft"}"#),
        ("developer", r#"{"filesChanged":[],"summary":"draft"}"#),
        ("reviewer", r#"{"approved":true,"comments":""}"#),
    ]);
    assert_eq!(workflow::next(&solve, &h2, &ev).unwrap().role, "$END");
}

// ---- graph drawing ----

#[test]
fn graphs_render() {
    let debate = load("debate.yaml").unwrap();
    let mermaid = workflow::render_graph(&debate, GraphFormat::Mermaid);
    assert!(mermaid.starts_with("flowchart TD\n"), "{mermaid}");
    assert!(mermaid.contains("    start --> r1_against\n"), "{mermaid}");
    assert!(
        mermaid.contains("    r1_against -->|\"conceded\"| end_\n"),
        "{mermaid}"
    );
    assert!(
        mermaid.contains("    r2_for -->|\"continue\"| r1_against\n"),
        "{mermaid}"
    );
    let solve = load("solve-issue.yaml").unwrap();
    let dot = workflow::render_graph(&solve, GraphFormat::Dot);
    assert!(dot.starts_with("digraph \"solve-issue\" {\n"), "{dot}");
    assert!(
        dot.contains("    \"reviewer\" -> \"developer\" [label=\"1. notApproved\"];\n"),
        "{dot}"
    );
    assert!(
        dot.contains("    \"reviewer\" -> \"$END\" [label=\"2. else\"];\n"),
        "{dot}"
    );
    assert!(dot.trim_end().ends_with('}'));
}

// ---- every invalid fixture, walked ----

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

/// Each invalid fixture whose first line is `# expect: <text>` fails to load with an error
/// containing that text (files without the line are only included by others).
#[test]
fn invalid_fixtures_fail_as_expected() {
    let mut files = Vec::new();
    yaml_files(&fixture("invalid"), &mut files);
    files.sort();
    let mut checked = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let Some(expect) = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
        else {
            continue;
        };
        match workflow::load_file(&f, &Jsonata::default()) {
            Ok(_) => panic!("{} loaded but should fail with {expect:?}", f.display()),
            Err(e) => assert!(
                e.to_string().contains(expect),
                "{}: {e:?} does not contain {expect:?}",
                f.display()
            ),
        }
        checked += 1;
    }
    assert_eq!(checked, 13);
}
