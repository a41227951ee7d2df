//! `uwf skill …`: reference texts for people and agents, embedded in the binary and printed as
//! markdown.

use super::CliResult;
use super::output::write_stdout;

/// The texts: name, one-line summary, markdown.
const SKILLS: [(&str, &str, &str); 5] = [
    (
        "user",
        "running workflows and threads with uwf",
        include_str!("skills/user.md"),
    ),
    (
        "author",
        "writing workflow YAML: roles, graphs, !include, conditions, schemas",
        include_str!("skills/author.md"),
    ),
    (
        "developer",
        "writing an agent in any language: the protocol and the agent kit",
        include_str!("skills/developer.md"),
    ),
    (
        "adapter",
        "wrapping a coding-agent CLI as an agent",
        include_str!("skills/adapter.md"),
    ),
    (
        "bootstrap",
        "first steps on a new machine",
        include_str!("skills/bootstrap.md"),
    ),
];

/// Which text `uwf skill` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum Skill {
    /// Running workflows and threads.
    User,
    /// Writing workflow YAML.
    Author,
    /// Writing an agent.
    Developer,
    /// Wrapping a coding-agent CLI as an agent.
    Adapter,
    /// First steps on a new machine.
    Bootstrap,
    /// The names, one line each.
    List,
}

/// `uwf skill NAME`.
pub(crate) fn run(skill: Skill) -> CliResult {
    let text = match skill {
        Skill::List => {
            let width = SKILLS.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
            SKILLS
                .iter()
                .map(|(n, s, _)| format!("{n:width$}  {s}\n"))
                .collect::<String>()
        }
        s => {
            let name = clap::ValueEnum::to_possible_value(&s)
                .map(|v| v.get_name().to_string())
                .unwrap_or_default();
            SKILLS
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, _, t)| (*t).to_string())
                .unwrap_or_default()
        }
    };
    write_stdout(text.as_bytes())
}
