//! Render: DOT, Mermaid and SVG drawings of a graph, from the file alone. All read the same
//! `Topology` the checker analyses, so what is drawn is what is checked: no edge is
//! guessed or simulated. Nodes are shaped and coloured by kind, route edges carry their
//! case names (`default` for a route's default), edges are drawn and coloured by kind
//! (error, timeout, pseudo tool, limit, finish), parallel edges drawn alike are one
//! arrow, branches that run together leave a fork bar and meet at a join bar, START and
//! END stand out, interrupt nodes stand out, and unreachable nodes
//! and unknown targets are flagged.

mod details;
mod dot;
mod json;
mod labels;
mod layout;
mod mermaid;
mod picture;
mod svg;

pub use details::details;
pub use dot::dot;
pub use json::json;
pub use mermaid::mermaid;
pub(crate) use svg::escape as xml_escape;
pub use svg::svg;

use crate::spec::{EdgeKind, GraphSpec, KindSpec, NodeKind, NodeSpec};
use crate::topology::{LinkKind, Topology};

/// Output formats of `switchyard render`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Dot,
    Mermaid,
    /// Laid out here: no Graphviz needed.
    Svg,
}

/// Renders a graph in the given format.
pub fn render(spec: &GraphSpec, format: Format) -> String {
    match format {
        Format::Dot => dot(spec),
        Format::Mermaid => mermaid(spec),
        Format::Svg => svg(spec),
    }
}

/// Colours per kind: (fill, stroke). Shared so both formats agree.
fn colours(kind: NodeKind) -> (&'static str, &'static str) {
    match kind {
        NodeKind::LlmStructured | NodeKind::LlmChat => ("#dbeafe", "#1d4ed8"),
        NodeKind::McpCall => ("#dcfce7", "#15803d"),
        NodeKind::Policy => ("#ffedd5", "#c2410c"),
        NodeKind::Interrupt => ("#fee2e2", "#b91c1c"),
        NodeKind::Finalize => ("#e5e7eb", "#374151"),
        NodeKind::Set => ("#f5f3ff", "#6d28d9"),
        NodeKind::Fail => ("#fecaca", "#991b1b"),
        NodeKind::Graph => ("#ecfeff", "#0e7490"),
    }
}

/// The lines of a node's label: its name, its kind, and notes worth seeing.
fn label_lines(node: &NodeSpec, reachable: bool) -> Vec<String> {
    let mut lines = vec![node.name.get_ref().clone()];
    let kind = if node.kind_unknown {
        "unknown kind".to_string()
    } else {
        node.kind.get_ref().name().to_string()
    };
    let detail = match &node.body {
        KindSpec::Mcp(m) if m.side_effects => format!("{kind}, side effects"),
        KindSpec::Finalize(f) => match &f.outcome {
            Some(o) => format!("{kind}: {}", o.get_ref()),
            None => kind,
        },
        KindSpec::Fail(f) => format!(
            "{kind}: {}",
            f.outcome.as_ref().map_or("failed", |o| o.get_ref())
        ),
        _ => kind,
    };
    lines.push(detail);
    if let Some(map) = &node.map {
        let over = map.over.as_ref().map_or("?", |o| o.get_ref());
        lines.push(match &map.concurrency {
            Some(c) if *c.get_ref() > 1 => format!("map over {over}, {} at a time", c.get_ref()),
            _ => format!("map over {over}"),
        });
    }
    if let Some(b) = &node.breakpoint {
        lines.push(format!(
            "breakpoint {}",
            if *b.get_ref() == crate::spec::Breakpoint::Before {
                "before"
            } else {
                "after"
            }
        ));
    }
    if !reachable {
        lines.push("(unreachable)".into());
    }
    lines
}

/// How an edge is drawn.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stroke {
    Solid,
    Dashed,
    Dotted,
}

fn stroke(kind: LinkKind) -> (Stroke, Option<&'static str>) {
    match kind {
        LinkKind::Edge(EdgeKind::Error) => (Stroke::Dashed, Some("#b91c1c")),
        LinkKind::Edge(EdgeKind::Timeout) => (Stroke::Dashed, Some("#a16207")),
        LinkKind::Edge(EdgeKind::PseudoTool) => (Stroke::Dashed, Some("#1d4ed8")),
        LinkKind::Limit => (Stroke::Dashed, Some("#b91c1c")),
        LinkKind::Finish => (Stroke::Dotted, Some("#6b7280")),
        _ => (Stroke::Solid, None),
    }
}

/// Reachability of each vertex, by vertex index.
fn reachability(topo: &Topology) -> Vec<bool> {
    topo.reachable()
}

/// The child graphs of a graph's `kind = "graph"` nodes, read from their files: each
/// with the node that runs it, for drawing as a cluster. A child that cannot be read
/// or loaded is left out (`validate` reports it).
pub(crate) fn children(spec: &crate::spec::GraphSpec) -> Vec<(&str, crate::spec::GraphSpec)> {
    spec.nodes
        .iter()
        .filter_map(|n| match &n.body {
            KindSpec::Graph(g) => {
                let path = spec.resolve(g.graph.as_ref()?.get_ref());
                let mut sources = crate::source::Sources::new();
                let child = crate::load::load_file(&path, &mut sources).ok()?.spec?;
                Some((n.name.get_ref().as_str(), child))
            }
            _ => None,
        })
        .collect()
}

/// A child graph's edges between its own nodes (an edge to `END` or to no node is
/// left out of its cluster): from, to, label.
pub(crate) fn child_edges(child: &crate::spec::GraphSpec) -> Vec<(&str, &str, Option<String>)> {
    child
        .nodes
        .iter()
        .flat_map(|n| {
            n.edges().into_iter().filter_map(move |e| {
                let to = e.target.get_ref().as_str();
                (to != crate::spec::END && child.node(to).is_some())
                    .then(|| (n.name.get_ref().as_str(), to, e.label))
            })
        })
        .collect()
}
