use super::picture::{Mark, Picture};
use super::{Stroke, colours, label_lines, reachability, stroke};
use crate::spec::{GraphSpec, NodeKind};
use crate::topology::{Topology, Vertex};
use std::fmt::Write;

/// The graph as a Mermaid flowchart.
pub fn mermaid(spec: &GraphSpec) -> String {
    let picture = Picture::build(spec);
    let topo = &picture.topo;
    let reachable = reachability(topo);
    let mut out = String::new();
    if let Some(name) = &spec.graph.name {
        let _ = writeln!(out, "---\ntitle: {}\n---", name.get_ref());
    }
    out.push_str("flowchart TD\n");
    let mut classes: Vec<(String, &str)> = Vec::new();
    for (mark, what) in picture.marks.iter().enumerate() {
        let id = mark_id(&picture, spec, mark);
        let ix = match what {
            Mark::Vertex(ix) => *ix,
            // Mermaid's own fork and join bars (Mermaid 11.3 and later), solid as in
            // UML (its theme draws them pale).
            Mark::Fork { .. } | Mark::Join { .. } => {
                let shape = if matches!(what, Mark::Fork { .. }) {
                    "fork"
                } else {
                    "join"
                };
                let _ = writeln!(out, "  {id}@{{ shape: {shape}, label: \" \" }}");
                classes.push((id, "bar"));
                continue;
            }
        };
        let shape = match &topo.graph[ix] {
            Vertex::Start => {
                classes.push((id.clone(), "terminal"));
                "((\"START\"))".to_string()
            }
            Vertex::End => {
                classes.push((id.clone(), "terminal"));
                "(((\"END\")))".to_string()
            }
            Vertex::Limit => ">\"limit\"]".to_string(),
            Vertex::Missing(n) => {
                classes.push((id.clone(), "missing"));
                format!("[\"{}\"]", text(&format!("{n}\n(unknown node)")))
            }
            Vertex::Node(i) => {
                let node = &spec.nodes[*i];
                let ok = reachable[ix.index()];
                let kind = *node.kind.get_ref();
                let label = text(&label_lines(node, ok).join("\n"));
                classes.push((id.clone(), class_of(kind)));
                if !ok {
                    classes.push((id.clone(), "unreachable"));
                }
                match kind {
                    _ if node.kind_unknown => format!("[\"{label}\"]"),
                    NodeKind::LlmStructured | NodeKind::LlmChat => format!("(\"{label}\")"),
                    NodeKind::McpCall => format!("[[\"{label}\"]]"),
                    NodeKind::Policy => format!("{{\"{label}\"}}"),
                    NodeKind::Interrupt => format!("{{{{\"{label}\"}}}}"),
                    NodeKind::Finalize => format!("([\"{label}\"])"),
                    NodeKind::Set => format!("[/\"{label}\"/]"),
                    NodeKind::Fail => format!("([\"{label}\"])"),
                    NodeKind::Graph => format!(">\"{label}\"]"),
                }
            }
        };
        let _ = writeln!(out, "  {id}{shape}");
    }
    // Mermaid styles a link by its position in the file: the coloured ones are noted.
    let mut link_styles: Vec<(usize, &str)> = Vec::new();
    for (i, edge) in picture.edges.iter().enumerate() {
        let (s, colour) = stroke(edge.kind);
        let arrow = match s {
            Stroke::Solid => "-->",
            Stroke::Dashed => "-.->",
            Stroke::Dotted => "-.-",
        };
        if let Some(c) = colour {
            link_styles.push((i, c));
        }
        let from = mark_id(&picture, spec, edge.from);
        let to = mark_id(&picture, spec, edge.to);
        match edge.label() {
            Some(label) => {
                let _ = writeln!(out, "  {from} {arrow}|\"{}\"| {to}", text(&label));
            }
            None => {
                let _ = writeln!(out, "  {from} {arrow} {to}");
            }
        }
    }
    for (i, c) in link_styles {
        let _ = writeln!(out, "  linkStyle {i} stroke:{c},color:{c}");
    }
    for kind in NodeKind::NAMES {
        let k = NodeKind::parse(kind).expect("listed kind");
        // Both model kinds are drawn alike: one class.
        if k == NodeKind::LlmChat {
            continue;
        }
        let (fill, line) = colours(k);
        let extra = if k == NodeKind::Interrupt {
            ",stroke-width:3px"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  classDef {} fill:{fill},stroke:{line}{extra}",
            class_of(k)
        );
    }
    // Each subgraph's nodes in a `subgraph` block, entered from the node that runs it.
    for (node, child) in super::children(spec) {
        let child_name = child
            .graph
            .name
            .as_ref()
            .map_or("graph", |n| n.get_ref().as_str());
        let prefix = format!("n_{}__", id_text(node));
        let _ = writeln!(
            out,
            "  subgraph c_{}[\"{}\"]",
            id_text(node),
            text(child_name)
        );
        for n in &child.nodes {
            let _ = writeln!(
                out,
                "    {prefix}{}[\"{}\"]",
                id_text(n.name.get_ref()),
                text(&label_lines(n, true).join("\n"))
            );
            classes.push((
                format!("{prefix}{}", id_text(n.name.get_ref())),
                class_of(*n.kind.get_ref()),
            ));
        }
        for (from, to, label) in super::child_edges(&child) {
            let from = format!("{prefix}{}", id_text(from));
            let to = format!("{prefix}{}", id_text(to));
            match label {
                Some(l) => {
                    let _ = writeln!(out, "    {from} -->|\"{}\"| {to}", text(&l));
                }
                None => {
                    let _ = writeln!(out, "    {from} --> {to}");
                }
            }
        }
        out.push_str("  end\n");
        if let Some(entry) = &child.graph.entry {
            let _ = writeln!(
                out,
                "  n_{} -.-> {prefix}{}",
                id_text(node),
                id_text(entry.get_ref())
            );
        }
    }
    out.push_str("  classDef terminal fill:#111827,stroke:#111827,color:#fff\n");
    out.push_str("  classDef bar fill:#111827,stroke:#111827\n");
    out.push_str("  classDef unreachable stroke:#dc2626,stroke-dasharray:5 5\n");
    out.push_str(
        "  classDef missing fill:#fff,stroke:#dc2626,color:#dc2626,stroke-dasharray:5 5\n",
    );
    for (id, class) in classes {
        let _ = writeln!(out, "  class {id} {class}");
    }
    out
}

fn class_of(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::LlmStructured | NodeKind::LlmChat => "llm",
        NodeKind::McpCall => "mcp",
        NodeKind::Policy => "policy",
        NodeKind::Interrupt => "interrupt",
        NodeKind::Finalize => "finalize",
        NodeKind::Set => "set",
        NodeKind::Fail => "fail",
        // Not `graph`: a keyword of Mermaid's flowchart grammar, which Mermaid 11 refuses
        // as a class name (`classDef graph ...`), so the whole drawing failed to parse.
        NodeKind::Graph => "child_graph",
    }
}

/// Mermaid ids may not be keywords (`end`), so every id is prefixed.
fn mark_id(picture: &Picture, spec: &GraphSpec, mark: usize) -> String {
    match &picture.marks[mark] {
        Mark::Vertex(ix) => vertex_id(&picture.topo, spec, *ix),
        Mark::Fork { node, case, .. } => bar_id("fork", node, case),
        Mark::Join { node, case, .. } => bar_id("join", node, case),
    }
}

fn bar_id(what: &str, node: &str, case: &Option<String>) -> String {
    match case {
        Some(c) => format!("{what}_{}__{}", id_text(node), id_text(c)),
        None => format!("{what}_{}", id_text(node)),
    }
}

fn vertex_id(topo: &Topology, spec: &GraphSpec, ix: petgraph::graph::NodeIndex) -> String {
    match &topo.graph[ix] {
        Vertex::Start => "start_".into(),
        Vertex::End => "end_".into(),
        Vertex::Limit => "limit_".into(),
        Vertex::Missing(n) => format!("missing_{}", id_text(n)),
        Vertex::Node(i) => format!("n_{}", id_text(spec.nodes[*i].name.get_ref())),
    }
}

/// A name as id characters: identifiers as they are, anything else (in a graph that
/// does not validate) spelled out, so `a b`, `a-b` and `a.b` stay distinct ids.
fn id_text(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            out.push_str(&format!("_x{:x}_", u32::from(c)));
        }
    }
    out
}

/// Text inside a quoted Mermaid label: quotes as entities, newlines as `<br/>`.
fn text(s: &str) -> String {
    s.replace('"', "#quot;")
        .replace('\n', "<br/>")
        .replace('|', "#124;")
}
