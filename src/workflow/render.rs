//! Drawing a workflow graph as Mermaid or Graphviz dot text.

use super::model::{ANY_STATUS, END, START, Workflow};
use indexmap::IndexSet;
use std::fmt::Write;

/// An output format for [`render_graph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphFormat {
    /// A Mermaid `flowchart`.
    Mermaid,
    /// A Graphviz `digraph`.
    Dot,
}

impl std::str::FromStr for GraphFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mermaid" => Ok(GraphFormat::Mermaid),
            "dot" => Ok(GraphFormat::Dot),
            other => Err(format!(
                "unknown graph format \"{other}\"; use \"mermaid\" or \"dot\""
            )),
        }
    }
}

/// Draws the graph of `wf`. Status-map edges are labelled with their status (none for `_`),
/// transition-list edges with their condition name (`else` for the fallback) and position.
pub fn render_graph<S>(wf: &Workflow<S>, format: GraphFormat) -> String {
    let mut nodes: IndexSet<&str> = IndexSet::new();
    nodes.insert(START);
    for n in wf.graph.nodes() {
        nodes.insert(n);
    }
    for r in wf.roles.keys() {
        nodes.insert(r);
    }
    let edges = wf.graph.edges();
    if edges.iter().any(|e| e.2 == END) {
        nodes.insert(END);
    }
    let transitions = matches!(wf.graph, super::model::Graph::Transitions(_));
    let mut pos_by_node: std::collections::HashMap<&str, usize> = Default::default();
    let labels: Vec<Option<String>> = edges
        .iter()
        .map(|(from, label, _)| {
            if transitions {
                let i = pos_by_node.entry(from).or_default();
                *i += 1;
                Some(match label {
                    Some(c) => format!("{i}. {c}"),
                    None => format!("{i}. else"),
                })
            } else {
                label.filter(|l| *l != ANY_STATUS).map(str::to_string)
            }
        })
        .collect();
    let mut out = String::new();
    match format {
        GraphFormat::Mermaid => {
            let id = |n: &str| -> String {
                match n {
                    START => "start".into(),
                    END => "end_".into(),
                    r => format!(
                        "r{}_{}",
                        nodes.get_index_of(r).unwrap_or(0),
                        r.chars()
                            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                            .collect::<String>()
                    ),
                }
            };
            let _ = writeln!(out, "flowchart TD");
            for n in &nodes {
                let shape = match *n {
                    START | END => format!("(({}))", mermaid_text(n)),
                    r => format!("[\"{}\"]", mermaid_text(r)),
                };
                let _ = writeln!(out, "    {}{}", id(n), shape);
            }
            for ((from, _, to), label) in edges.iter().zip(&labels) {
                match label {
                    Some(l) => {
                        let _ = writeln!(
                            out,
                            "    {} -->|\"{}\"| {}",
                            id(from),
                            mermaid_text(l),
                            id(to)
                        );
                    }
                    None => {
                        let _ = writeln!(out, "    {} --> {}", id(from), id(to));
                    }
                }
            }
        }
        GraphFormat::Dot => {
            let _ = writeln!(out, "digraph {} {{", dot_str(&wf.name));
            let _ = writeln!(out, "    rankdir=TB;");
            for n in &nodes {
                let shape = if *n == START || *n == END {
                    "circle"
                } else {
                    "box"
                };
                let _ = writeln!(out, "    {} [shape={shape}];", dot_str(n));
            }
            for ((from, _, to), label) in edges.iter().zip(&labels) {
                match label {
                    Some(l) => {
                        let _ = writeln!(
                            out,
                            "    {} -> {} [label={}];",
                            dot_str(from),
                            dot_str(to),
                            dot_str(l)
                        );
                    }
                    None => {
                        let _ = writeln!(out, "    {} -> {};", dot_str(from), dot_str(to));
                    }
                }
            }
            let _ = writeln!(out, "}}");
        }
    }
    out
}

fn mermaid_text(s: &str) -> String {
    s.replace('"', "#quot;")
}

fn dot_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names() {
        assert_eq!("dot".parse::<GraphFormat>(), Ok(GraphFormat::Dot));
        assert_eq!("mermaid".parse::<GraphFormat>(), Ok(GraphFormat::Mermaid));
        assert!(
            "svg"
                .parse::<GraphFormat>()
                .unwrap_err()
                .contains("\"svg\"")
        );
    }

    #[test]
    fn dot_quotes() {
        assert_eq!(dot_str("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
