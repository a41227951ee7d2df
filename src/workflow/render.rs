//! Drawing a workflow graph as Mermaid or Graphviz dot text.

use super::model::{ANY_STATUS, END, START, Workflow};
use indexmap::IndexSet;
use std::collections::HashMap;
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

/// An edge to draw: from, label, to.
type Edge<'a> = (&'a str, Option<String>, &'a str);

/// The nodes to draw (`$START`, the graph's nodes, the roles, `$END` when an edge reaches it)
/// and every edge as `(from, label, to)`. Status-map edges are labelled with their status (none
/// for `_`), transition-list edges with their position and condition name (`else` for the
/// fallback).
fn parts<S>(wf: &Workflow<S>) -> (IndexSet<&str>, Vec<Edge<'_>>) {
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
    let mut pos_by_node: HashMap<&str, usize> = Default::default();
    let edges = edges
        .into_iter()
        .map(|(from, label, to)| {
            let label = if transitions {
                let i = pos_by_node.entry(from).or_default();
                *i += 1;
                Some(match label {
                    Some(c) => format!("{i}. {c}"),
                    None => format!("{i}. else"),
                })
            } else {
                label.filter(|l| *l != ANY_STATUS).map(str::to_string)
            };
            (from, label, to)
        })
        .collect();
    (nodes, edges)
}

/// Draws the graph of `wf`. Status-map edges are labelled with their status (none for `_`),
/// transition-list edges with their condition name (`else` for the fallback) and position.
pub fn render_graph<S>(wf: &Workflow<S>, format: GraphFormat) -> String {
    let (nodes, labelled) = parts(wf);
    let edges: Vec<(&str, (), &str)> = labelled.iter().map(|(f, _, t)| (*f, (), *t)).collect();
    let labels: Vec<Option<String>> = labelled.iter().map(|(_, l, _)| l.clone()).collect();
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

/// Height of a node box in [`render_svg`].
const NODE_H: f64 = 34.0;
/// Vertical distance between two ranks' boxes.
const RANK_GAP: f64 = 62.0;
/// Horizontal distance between two boxes of a rank.
const NODE_GAP: f64 = 36.0;
/// Margin around the drawing.
const MARGIN: f64 = 20.0;

/// Edges merged by their ends, in first-seen order, with their labels.
type Merged<'a> = indexmap::IndexMap<(&'a str, &'a str), Vec<String>>;

/// Where [`render_svg`] puts the nodes, and the drawing's size.
struct Layout<'a> {
    /// Each node's rank, from 0 at the top.
    rank: HashMap<&'a str, usize>,
    /// Each node's box: left, top, width.
    boxes: HashMap<&'a str, (f64, f64, f64)>,
    /// The drawing's width.
    width: f64,
    /// The drawing's height.
    height: f64,
}

/// Draws the graph of `wf` as an SVG element, top to bottom: nodes in ranks by their distance
/// from `$START`, `$END` last; an edge to the next rank goes straight down, one that skips
/// ranks bends out to the left, any other (back, same rank, loop) to the right. The node named `current` (a role, or `$END`) gets the class `current`. Labels as
/// [`render_graph`] writes them; edges between the same two nodes share one line.
pub(crate) fn render_svg<S>(wf: &Workflow<S>, current: Option<&str>) -> String {
    let (nodes, labelled) = parts(wf);
    let edges = merge_edges(&labelled);
    let layout = layout(&nodes, &edges);
    let (width, height) = (layout.width, layout.height);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="workflow graph of {}">"#,
        xml_text(&wf.name)
    );
    out.push_str(r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>"#);
    let (mut bend, mut skip) = (0, 0);
    for ((from, to), labels) in &edges {
        let label = labels.join(", ");
        let (path, lx, ly, anchor) = edge_path(&layout, from, to, &mut bend, &mut skip);
        let _ = write!(
            out,
            r#"<g class="edge" data-from="{}" data-to="{}"><path d="{path}" marker-end="url(#arrow)"/>"#,
            xml_text(from),
            xml_text(to)
        );
        if !label.is_empty() {
            let _ = write!(
                out,
                r#"<text x="{lx:.1}" y="{ly:.1}" text-anchor="{anchor}">{}</text>"#,
                xml_text(&label)
            );
        }
        out.push_str("</g>");
    }
    for n in &nodes {
        write_node(&mut out, n, layout.boxes[n], current);
    }
    out.push_str("</svg>");
    out
}

/// The edges of `labelled` merged by their ends, in first-seen order.
fn merge_edges<'a>(labelled: &[Edge<'a>]) -> Merged<'a> {
    let mut edges: Merged<'a> = Default::default();
    for (from, label, to) in labelled {
        let e = edges.entry((*from, *to)).or_default();
        if let Some(l) = label {
            e.push(l.clone());
        }
    }
    edges
}

/// Each node's rank: breadth-first distance from `$START`; unreached nodes after, `$END` last.
fn ranks<'a>(nodes: &IndexSet<&'a str>, edges: &Merged<'a>) -> HashMap<&'a str, usize> {
    let mut rank: HashMap<&str, usize> = Default::default();
    rank.insert(START, 0);
    let mut queue = std::collections::VecDeque::from([START]);
    while let Some(n) = queue.pop_front() {
        let r = rank[n];
        for (from, to) in edges.keys() {
            if *from == n && *to != END && !rank.contains_key(to) {
                rank.insert(*to, r + 1);
                queue.push_back(*to);
            }
        }
    }
    let reached = rank.values().copied().max().unwrap_or(0);
    let mut last = reached;
    for n in nodes {
        if *n != END && !rank.contains_key(n) {
            rank.insert(*n, reached + 1);
            last = reached + 1;
        }
    }
    if nodes.contains(END) {
        rank.insert(END, last + 1);
    }
    rank
}

/// A node's text in the drawing.
fn svg_label(n: &str) -> String {
    match n {
        START => "start".to_string(),
        END => "end".to_string(),
        r => r.to_string(),
    }
}

/// The width of a node's box.
fn box_width(n: &str) -> f64 {
    (svg_label(n).chars().count() as f64 * 7.4 + 24.0).max(64.0)
}

/// The nodes' ranks and boxes: each rank a centred row, with room on either side for the
/// edges that bend out.
fn layout<'a>(nodes: &IndexSet<&'a str>, edges: &Merged<'a>) -> Layout<'a> {
    let rank = ranks(nodes, edges);
    let ranks = rank.values().copied().max().unwrap_or(0) + 1;
    let rows: Vec<Vec<&str>> = (0..ranks)
        .map(|r| nodes.iter().copied().filter(|n| rank[n] == r).collect())
        .collect();
    let row_width = |row: &Vec<&str>| {
        row.iter().map(|n| box_width(n)).sum::<f64>()
            + NODE_GAP * row.len().saturating_sub(1) as f64
    };
    let inner = rows.iter().map(row_width).fold(0.0, f64::max);
    let longest_label = edges
        .values()
        .map(|l| l.join(", ").chars().count())
        .max()
        .unwrap_or(0) as f64;
    let room = |n: usize| {
        if n > 0 {
            40.0 + 14.0 * n as f64 + longest_label * 6.6
        } else {
            0.0
        }
    };
    let right = room(edges.keys().filter(|(f, t)| rank[f] >= rank[t]).count());
    let left = room(edges.keys().filter(|(f, t)| rank[t] > rank[f] + 1).count());
    let width = left + inner + 2.0 * MARGIN + right;
    let height = ranks as f64 * (NODE_H + RANK_GAP) - RANK_GAP + 2.0 * MARGIN;
    let mut boxes: HashMap<&str, (f64, f64, f64)> = Default::default();
    for (r, row) in rows.iter().enumerate() {
        let mut x = left + MARGIN + (inner - row_width(row)) / 2.0;
        let y = MARGIN + r as f64 * (NODE_H + RANK_GAP);
        for n in row {
            let w = box_width(n);
            boxes.insert(*n, (x, y, w));
            x += w + NODE_GAP;
        }
    }
    Layout {
        rank,
        boxes,
        width,
        height,
    }
}

/// The path of the edge `from` → `to` and where its label goes (x, y, text anchor); `bend` and
/// `skip` count the edges so far that bend out to the right and to the left.
fn edge_path(
    layout: &Layout<'_>,
    from: &str,
    to: &str,
    bend: &mut u32,
    skip: &mut u32,
) -> (String, f64, f64, &'static str) {
    let (fx, fy, fw) = layout.boxes[from];
    let (tx, ty, tw) = layout.boxes[to];
    let rank = &layout.rank;
    if from == to {
        let (x, y) = (fx + fw, fy + NODE_H / 2.0);
        (
            format!(
                "M{x:.1},{:.1} C{:.1},{:.1} {:.1},{:.1} {x:.1},{:.1}",
                y - 8.0,
                x + 42.0,
                y - 30.0,
                x + 42.0,
                y + 30.0,
                y + 8.0
            ),
            x + 40.0,
            y + 4.0,
            "start",
        )
    } else if rank[to] > rank[from] + 1 {
        *skip += 1;
        let (x1, y1) = (fx, fy + NODE_H / 2.0 + 5.0);
        let (x2, y2) = (tx, ty + NODE_H / 2.0 - 5.0);
        let c = x1.min(x2) - 26.0 - 14.0 * f64::from(*skip);
        (
            format!("M{x1:.1},{y1:.1} C{c:.1},{y1:.1} {c:.1},{y2:.1} {x2:.1},{y2:.1}"),
            0.125 * (x1 + x2) + 0.75 * c - 4.0,
            (y1 + y2) / 2.0 + 4.0,
            "end",
        )
    } else if rank[from] < rank[to] {
        let (x1, y1) = (fx + fw / 2.0, fy + NODE_H);
        let (x2, y2) = (tx + tw / 2.0, ty);
        let dy = (y2 - y1) / 2.0;
        (
            format!(
                "M{x1:.1},{y1:.1} C{x1:.1},{:.1} {x2:.1},{:.1} {x2:.1},{y2:.1}",
                y1 + dy,
                y2 - dy
            ),
            (x1 + x2) / 2.0 + 4.0,
            (y1 + y2) / 2.0 + 4.0,
            "start",
        )
    } else {
        *bend += 1;
        let (x1, y1) = (fx + fw, fy + NODE_H / 2.0 + 5.0);
        let (x2, y2) = (tx + tw, ty + NODE_H / 2.0 - 5.0);
        let c = x1.max(x2) + 26.0 + 14.0 * f64::from(*bend);
        (
            format!("M{x1:.1},{y1:.1} C{c:.1},{y1:.1} {c:.1},{y2:.1} {x2:.1},{y2:.1}"),
            0.125 * (x1 + x2) + 0.75 * c + 4.0,
            (y1 + y2) / 2.0 + 4.0,
            "start",
        )
    }
}

/// Writes the node `n` in its box `(x, y, w)`; `current` names the node to mark.
fn write_node(out: &mut String, n: &str, (x, y, w): (f64, f64, f64), current: Option<&str>) {
    let kind = if n == START || n == END {
        "terminal"
    } else {
        "role"
    };
    let cur = if current == Some(n) { " current" } else { "" };
    let rx = if kind == "terminal" {
        NODE_H / 2.0
    } else {
        6.0
    };
    let _ = write!(
        out,
        r#"<g class="node {kind}{cur}" data-node="{}"><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{NODE_H}" rx="{rx}"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></g>"#,
        xml_text(n),
        x + w / 2.0,
        y + NODE_H / 2.0 + 4.5,
        xml_text(&svg_label(n))
    );
}

/// `s` escaped for XML text and attribute values.
pub(crate) fn xml_text(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
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
    fn svg_ranks_nodes_and_marks_the_current_role() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/solve-issue.yaml");
        let wf = crate::workflow::load_file(&path, &crate::workflow::Jsonata::default())
            .expect("the example loads");
        let svg = render_svg(&wf, Some("reviewer"));
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"), "{svg}");
        for n in ["$START", "planner", "developer", "reviewer", "$END"] {
            assert_eq!(
                svg.matches(&format!(r#"data-node="{n}""#)).count(),
                1,
                "{n}: {svg}"
            );
        }
        assert!(
            svg.contains(r#"<g class="node role current" data-node="reviewer">"#),
            "{svg}"
        );
        assert_eq!(svg.matches(" current\"").count(), 1, "{svg}");
        // The rejected review goes back up, bending out to the right.
        assert!(
            svg.contains(r#"data-from="reviewer" data-to="developer""#),
            "{svg}"
        );
        assert!(svg.contains(">1. notApproved</text>"), "{svg}");
        assert_eq!(xml_text("a<&\">"), "a&lt;&amp;&quot;&gt;");
    }

    #[test]
    fn dot_quotes() {
        assert_eq!(dot_str("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
