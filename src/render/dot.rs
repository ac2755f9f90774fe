use super::picture::{Mark, Picture};
use super::{Stroke, colours, label_lines, reachability, stroke};
use crate::spec::{GraphSpec, NodeKind};
use crate::topology::Vertex;
use std::fmt::Write;

/// The graph as Graphviz DOT.
pub fn dot(spec: &GraphSpec) -> String {
    let picture = Picture::build(spec);
    let topo = &picture.topo;
    let reachable = reachability(topo);
    let name = spec
        .graph
        .name
        .as_ref()
        .map_or("graph", |n| n.get_ref().as_str());
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(name));
    let _ = writeln!(
        out,
        "  graph [label={}, labelloc=t, fontname=\"Helvetica\", rankdir=TB];",
        quote(name)
    );
    out.push_str("  node [fontname=\"Helvetica\", fontsize=11];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
    for (mark, what) in picture.marks.iter().enumerate() {
        let id = mark_id(&picture, spec, mark);
        let ix = match what {
            Mark::Vertex(ix) => *ix,
            // A black bar as wide as its branches, as UML draws a fork or a join.
            Mark::Fork { branches, .. } | Mark::Join { branches, .. } => {
                let _ = writeln!(
                    out,
                    "  {id} [label=\"\", shape=box, style=filled, fillcolor=\"#111827\", color=\"#111827\", width={:.1}, height=0.06, fixedsize=true];",
                    0.9 * *branches as f64
                );
                continue;
            }
        };
        let attrs = match &topo.graph[ix] {
            Vertex::Start => "label=\"START\", shape=circle, style=filled, fillcolor=\"#111827\", fontcolor=white, width=0.6".to_string(),
            Vertex::End => "label=\"END\", shape=doublecircle, style=filled, fillcolor=\"#111827\", fontcolor=white, width=0.5".to_string(),
            Vertex::Limit => "label=\"limit\", shape=cds, style=filled, fillcolor=\"#fee2e2\", color=\"#b91c1c\"".to_string(),
            Vertex::Missing(n) => format!(
                "label={}, shape=box, style=\"dashed\", color=\"#dc2626\", fontcolor=\"#dc2626\"",
                quote(&format!("{n}\n(unknown node)"))
            ),
            Vertex::Node(i) => {
                let node = &spec.nodes[*i];
                let ok = reachable[ix.index()];
                let kind = *node.kind.get_ref();
                let (fill, line) = colours(kind);
                let shape = match kind {
                    _ if node.kind_unknown => "box",
                    NodeKind::LlmStructured | NodeKind::LlmChat => "box",
                    NodeKind::McpCall => "component",
                    NodeKind::Policy => "diamond",
                    NodeKind::Interrupt => "octagon",
                    NodeKind::Finalize => "box",
                    NodeKind::Set => "note",
                    NodeKind::Fail => "box",
                    NodeKind::Graph => "box3d",
                };
                let mut style = vec!["filled"];
                if matches!(
                    kind,
                    NodeKind::LlmStructured | NodeKind::LlmChat | NodeKind::Finalize | NodeKind::Fail
                ) {
                    style.insert(0, "rounded");
                }
                if kind == NodeKind::Interrupt {
                    style.push("bold");
                }
                if !ok {
                    style.push("dashed");
                }
                let mut attrs = format!(
                    "label={}, shape={shape}, style=\"{}\", fillcolor=\"{fill}\", color=\"{}\"",
                    quote(&label_lines(node, ok).join("\n")),
                    style.join(","),
                    if ok { line } else { "#dc2626" },
                );
                if kind.ends_run() {
                    attrs.push_str(", peripheries=2");
                }
                if kind == NodeKind::Interrupt {
                    attrs.push_str(", penwidth=2");
                }
                if !node.description.is_empty() {
                    let _ = write!(attrs, ", tooltip={}", quote(&node.description));
                }
                attrs
            }
        };
        let _ = writeln!(out, "  {id} [{attrs}];");
    }
    for edge in &picture.edges {
        let mut attrs = Vec::new();
        if let Some(label) = edge.label() {
            attrs.push(format!("label={}", quote(&label)));
        }
        let (s, colour) = stroke(edge.kind);
        match s {
            Stroke::Dashed => attrs.push("style=dashed".into()),
            Stroke::Dotted => attrs.push("style=dotted".into()),
            Stroke::Solid => {}
        }
        if let Some(c) = colour {
            attrs.push(format!("color=\"{c}\", fontcolor=\"{c}\""));
        }
        let from = mark_id(&picture, spec, edge.from);
        let to = mark_id(&picture, spec, edge.to);
        if attrs.is_empty() {
            let _ = writeln!(out, "  {from} -> {to};");
        } else {
            let _ = writeln!(out, "  {from} -> {to} [{}];", attrs.join(", "));
        }
    }
    // Each subgraph's nodes in a cluster, entered from the node that runs it.
    for (node, child) in super::children(spec) {
        let child_name = child
            .graph
            .name
            .as_ref()
            .map_or("graph", |n| n.get_ref().as_str());
        let _ = writeln!(out, "  subgraph {} {{", quote(&format!("cluster_{node}")));
        let _ = writeln!(
            out,
            "    label={}; style=\"dashed,rounded\"; color=\"#0e7490\"; fontcolor=\"#0e7490\";",
            quote(child_name)
        );
        for n in &child.nodes {
            let (fill, line) = colours(*n.kind.get_ref());
            let _ = writeln!(
                out,
                "    {} [label={}, shape=box, style=\"rounded,filled\", fillcolor=\"{fill}\", color=\"{line}\"];",
                quote(&format!("{node}/{}", n.name.get_ref())),
                quote(&label_lines(n, true).join("\n"))
            );
        }
        for (from, to, label) in super::child_edges(&child) {
            let from = quote(&format!("{node}/{from}"));
            let to = quote(&format!("{node}/{to}"));
            match label {
                Some(l) => {
                    let _ = writeln!(out, "    {from} -> {to} [label={}];", quote(&l));
                }
                None => {
                    let _ = writeln!(out, "    {from} -> {to};");
                }
            }
        }
        out.push_str("  }\n");
        if let Some(entry) = &child.graph.entry {
            let _ = writeln!(
                out,
                "  {} -> {} [style=dotted, color=\"#0e7490\"];",
                quote(node),
                quote(&format!("{node}/{}", entry.get_ref()))
            );
        }
    }
    out.push_str("}\n");
    out
}

fn mark_id(picture: &Picture, spec: &GraphSpec, mark: usize) -> String {
    match &picture.marks[mark] {
        // Apart from the nodes: a missing target may share a node's name.
        Mark::Vertex(ix) => match &picture.topo.graph[*ix] {
            Vertex::Missing(n) => quote(&format!("__missing__{n}")),
            _ => quote(picture.topo.wire_id(spec, *ix)),
        },
        _ => quote(&picture.id(spec, mark)),
    }
}

/// A DOT double-quoted string: backslashes and quotes escaped, newlines as `\n`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
