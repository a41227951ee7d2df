//! The prompt an agent is given for a step, assembled as the TypeScript tool's agents do:
//! the output-format instruction and the role's brief (the system part), then the task, what
//! happened since the role's last turn, and the moderator's instruction (the user part).

use super::instruction::output_format_instruction;
use crate::cas::Value;
use crate::workflow::{Brief, History, Role};

/// The most characters of step outputs a continuation carries.
const CONTINUATION_QUOTA: usize = 32_000;

/// An assembled prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The instruction and the role's brief.
    pub system: String,
    /// The task, the steps since the role's last turn and the edge prompt.
    pub user: String,
}

impl Prompt {
    /// The whole prompt as one text, for agents that take a single prompt.
    pub fn text(&self) -> String {
        format!("{}\n\n{}", self.system, self.user)
    }
}

/// Assembles the prompt of `role_name` for the next step of `history`. With `resumed` (the
/// agent continues its own earlier session of this role) the steps are given by role and
/// output only, as the session already holds the rest.
pub fn assemble<S>(
    history: &History,
    role_name: &str,
    role: &Role<S>,
    schema: &Value,
    edge_prompt: Option<&str>,
    resumed: bool,
) -> Prompt {
    let mut system = output_format_instruction(schema);
    system.push_str("\n\n");
    system.push_str(&brief_text(role_name, role));
    let task = history
        .start
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut user = format!("## Task\n{task}");
    let edge = edge_prompt.filter(|e| !e.trim().is_empty());
    let last_turn = history.steps.iter().rposition(|s| s.role == role_name);
    let first = last_turn.is_none();
    let since = last_turn.map_or(0, |i| i + 1);
    if first && history.steps.is_empty() {
        if let Some(e) = edge {
            user.push_str(&format!("\n\n## Current Instruction\n\n{e}"));
        }
    } else {
        user.push_str("\n\n## What Happened Since Your Last Turn\n");
        let mut budget = CONTINUATION_QUOTA;
        for (i, s) in history.steps.iter().enumerate().skip(since) {
            let mut out = s.output.to_json();
            if resumed || out.len() > budget {
                out = cut(&out, if resumed { 200 } else { budget });
            }
            budget = budget.saturating_sub(out.len());
            user.push_str(&format!(
                "\n### Step {}: {}\nOutput: {out}\nAgent: {}\n",
                i + 1,
                s.role,
                s.agent
            ));
        }
        if since >= history.steps.len() {
            user.push_str("\n(no steps since)\n");
        }
        if let Some(e) = edge {
            user.push_str(&format!("\n## Moderator Instruction\n\n{e}"));
        }
    }
    Prompt { system, user }
}

fn brief_text<S>(name: &str, role: &Role<S>) -> String {
    match &role.brief {
        Brief::SystemPrompt(p) => format!("# Role: {name}\n\n{}\n\n{p}", role.description),
        Brief::Charter {
            goal,
            capabilities,
            procedure,
            output,
        } => {
            let mut s = format!("# Role: {name}\n\n{}\n\n## Goal\n{goal}", role.description);
            if !capabilities.is_empty() {
                s.push_str("\n\n## Capabilities\n");
                for c in capabilities {
                    s.push_str(&format!("- {c}\n"));
                }
                s.pop();
            }
            if !procedure.is_empty() {
                s.push_str(&format!("\n\n## Procedure\n{procedure}"));
            }
            if !output.is_empty() {
                s.push_str(&format!("\n\n## Output\n{output}"));
            }
            s
        }
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::StepView;

    fn history(roles: &[&str]) -> History {
        History {
            start: Value::from_json_str(r#"{"workflow":"W","prompt":"Fix it","cwd":"/"}"#).unwrap(),
            steps: roles
                .iter()
                .map(|r| StepView {
                    role: r.to_string(),
                    output: Value::from_json_str(r#"{"status":"done"}"#).unwrap(),
                    detail: "D".into(),
                    agent: "a".into(),
                })
                .collect(),
        }
    }

    fn role() -> Role<()> {
        Role {
            description: "Plans".into(),
            brief: Brief::Charter {
                goal: "Plan".into(),
                capabilities: vec!["read".into()],
                procedure: "Think".into(),
                output: "A plan".into(),
            },
            schema: (),
        }
    }

    #[test]
    fn first_visit_of_a_new_thread() {
        let schema = Value::from_json_str(r#"{"type":"object"}"#).unwrap();
        let p = assemble(
            &history(&[]),
            "planner",
            &role(),
            &schema,
            Some("Go"),
            false,
        );
        assert!(p.system.starts_with("## Deliverable Format"));
        assert!(p.system.contains("# Role: planner\n\nPlans\n\n## Goal\nPlan\n\n## Capabilities\n- read\n\n## Procedure\nThink\n\n## Output\nA plan"));
        assert_eq!(p.user, "## Task\nFix it\n\n## Current Instruction\n\nGo");
    }

    #[test]
    fn steps_since_the_last_turn() {
        let schema = Value::from_json_str(r#"{"type":"object"}"#).unwrap();
        let h = history(&["planner", "dev", "reviewer"]);
        let p = assemble(&h, "planner", &role(), &schema, Some("Again"), false);
        assert!(!p.user.contains("Step 1: planner"));
        assert!(
            p.user
                .contains("### Step 2: dev\nOutput: {\"status\":\"done\"}\nAgent: a\n")
        );
        assert!(p.user.contains("### Step 3: reviewer"));
        assert!(p.user.ends_with("## Moderator Instruction\n\nAgain"));
        let p = assemble(&h, "other", &role(), &schema, None, false);
        assert!(p.user.contains("Step 1: planner"));
        assert!(!p.user.contains("Moderator Instruction"));
    }
}
