use super::layout::{Place, layout};
use super::{Stroke, colours, label_lines, reachability, stroke};
use crate::spec::GraphSpec;
use crate::topology::{Topology, Vertex};
use petgraph::visit::EdgeRef;
use std::fmt::Write;

/// Text metrics: the drawing is laid out before any browser measures it, so widths are
/// estimated from the characters (generous, for a proportional sans-serif font).
const CHAR_WIDTH: f64 = 7.4;
const LINE_HEIGHT: f64 = 16.0;
const PADDING_X: f64 = 14.0;
const PADDING_Y: f64 = 10.0;
/// Room around the drawing, and beside it for loops that curve out to the right.
const MARGIN: f64 = 16.0;
const LOOP_ROOM: f64 = 70.0;

/// The graph as an SVG picture, laid out here (no Graphviz): nodes coloured and shaped
/// by kind, route labels, loops curving beside the rows. Each node is a `<g>` with
/// `data-node` (its name, or `__start__` / `__end__`), and each edge one with
/// `data-from` and `data-to`, so a page can highlight where a run is and the path it
/// took.
pub fn svg(spec: &GraphSpec) -> String {
    let topo = Topology::build(spec);
    let reachable = reachability(&topo);
    let labels: Vec<Vec<String>> = topo
        .graph
        .node_indices()
        .map(|ix| match &topo.graph[ix] {
            Vertex::Start => vec!["START".to_string()],
            Vertex::End => vec!["END".to_string()],
            Vertex::Limit => vec!["limit".to_string()],
            Vertex::Missing(n) => vec![n.clone(), "(unknown node)".to_string()],
            Vertex::Node(i) => label_lines(&spec.nodes[*i], reachable[ix.index()]),
        })
        .collect();
    let sizes: Vec<(f64, f64)> = labels
        .iter()
        .map(|lines| {
            let chars = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
            (
                (chars as f64 * CHAR_WIDTH + 2.0 * PADDING_X).max(64.0),
                lines.len() as f64 * LINE_HEIGHT + 2.0 * PADDING_Y,
            )
        })
        .collect();
    let laid = layout(&topo, &sizes);
    // Loops curve around the left or right of everything: room on both sides.
    let shift = MARGIN + LOOP_ROOM;
    let places: Vec<Place> = laid
        .places
        .iter()
        .map(|p| Place {
            x: p.x + shift,
            y: p.y + MARGIN,
            ..*p
        })
        .collect();
    let left = places
        .iter()
        .map(|p| p.x - p.width / 2.0)
        .fold(f64::INFINITY, f64::min);
    let right = places
        .iter()
        .map(|p| p.x + p.width / 2.0)
        .fold(0.0, f64::max);
    let width = right + shift;
    let height = places
        .iter()
        .map(|p| p.y + p.height / 2.0)
        .fold(0.0, f64::max)
        + MARGIN;

    let mut out = String::new();
    let title = spec
        .graph
        .name
        .as_ref()
        .map_or(String::new(), |n| n.get_ref().clone());
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="graph" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" role="img" aria-label="graph {}" font-family="sans-serif" font-size="12">"##,
        escape(&title)
    );
    out.push_str(
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="context-stroke"/></marker></defs>
"##,
    );

    let id = |ix: petgraph::graph::NodeIndex| topo.wire_id(spec, ix);
    // Edges first, so boxes lie over their ends.
    let back = &laid.back;
    // Loops taken so far on the left and on the right, and how far out the next goes.
    let mut lanes = (0usize, 0usize);
    let lane = |k: usize| 16.0 + (k as f64 * 9.0).min(LOOP_ROOM - 20.0);
    for edge in super::drawn_edges(&topo) {
        let (a, b) = (places[edge.from.index()], places[edge.to.index()]);
        let first = topo
            .graph
            .edges_connecting(edge.from, edge.to)
            .map(|e| e.id().index())
            .min();
        let goes_back = topo
            .graph
            .edges_connecting(edge.from, edge.to)
            .any(|e| back.contains(&e.id().index()));
        let is_loop = edge.from != edge.to && (goes_back || b.y <= a.y);
        let (path, label_at) = if edge.from == edge.to {
            let (x, y) = (a.x + a.width / 2.0, a.y);
            (
                format!(
                    "M {:.1} {:.1} C {:.1} {:.1}, {:.1} {:.1}, {:.1} {:.1}",
                    x,
                    y - 6.0,
                    x + 40.0,
                    y - 24.0,
                    x + 40.0,
                    y + 24.0,
                    x,
                    y + 6.0
                ),
                (x + 34.0, y),
            )
        } else if is_loop {
            // A loop: out of the nearer side, around everything, into the same side.
            // Each loop in a lane of its own, so that they do not lie on one another.
            let middle = (left + right) / 2.0;
            let (side, out_x) = if a.x.min(b.x) < middle && a.x.max(b.x) <= middle {
                lanes.0 += 1;
                (-1.0, left - lane(lanes.0))
            } else {
                lanes.1 += 1;
                (1.0, right + lane(lanes.1))
            };
            let (x1, y1) = (a.x + side * a.width / 2.0, a.y);
            let (x2, y2) = (b.x + side * b.width / 2.0, b.y);
            (
                format!(
                    "M {x1:.1} {y1:.1} C {out_x:.1} {y1:.1}, {out_x:.1} {y2:.1}, {x2:.1} {y2:.1}"
                ),
                (out_x - side * 4.0, (y1 + y2) / 2.0),
            )
        } else {
            let mut points = vec![(a.x, a.y + a.height / 2.0)];
            if let Some(bends) = first.and_then(|e| laid.bends.get(&e)) {
                points.extend(bends.iter().map(|(x, y)| (x + shift, y + MARGIN)));
            }
            points.push((b.x, b.y - b.height / 2.0));
            let mut d = format!("M {:.1} {:.1}", points[0].0, points[0].1);
            for w in points.windows(2) {
                let ((x1, y1), (x2, y2)) = (w[0], w[1]);
                let mid = (y1 + y2) / 2.0;
                let _ = write!(d, " C {x1:.1} {mid:.1}, {x2:.1} {mid:.1}, {x2:.1} {y2:.1}");
            }
            // The label on the last stretch, nearer its target: edges fanning out of
            // one node are farther apart there.
            let ((x1, y1), (x2, y2)) = (points[points.len() - 2], points[points.len() - 1]);
            (d, (0.25 * x1 + 0.75 * x2, 0.4 * y1 + 0.6 * y2))
        };
        let (s, colour) = stroke(edge.kind);
        let dash = match s {
            Stroke::Solid => "",
            Stroke::Dashed => r#" stroke-dasharray="6 4""#,
            Stroke::Dotted => r#" stroke-dasharray="2 3""#,
        };
        let _ = write!(
            out,
            r#"<g class="edge" data-from="{}" data-to="{}"><path d="{path}" fill="none" stroke="{}" stroke-width="1.4"{dash} marker-end="url(#arrow)"/>"#,
            escape(id(edge.from)),
            escape(id(edge.to)),
            colour.unwrap_or("#4b5563"),
        );
        if let Some(label) = edge.label() {
            // A loop's label lies inside its curve, toward the boxes.
            let anchor = if !is_loop {
                "middle"
            } else if label_at.0 < left {
                "start"
            } else {
                "end"
            };
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}" dominant-baseline="middle" fill="#374151" stroke="white" stroke-width="4" paint-order="stroke">{}</text>"##,
                label_at.0,
                label_at.1,
                escape(&label)
            );
        }
        out.push_str("</g>\n");
    }

    for ix in topo.graph.node_indices() {
        let p = places[ix.index()];
        let (x, y) = (p.x - p.width / 2.0, p.y - p.height / 2.0);
        let (class, fill, line, radius, extra) = match &topo.graph[ix] {
            Vertex::Start | Vertex::End => ("terminal", "#111827", "#111827", p.height / 2.0, ""),
            Vertex::Limit => ("limit", "#fff7ed", "#b91c1c", 4.0, ""),
            Vertex::Missing(_) => (
                "missing",
                "#ffffff",
                "#b91c1c",
                4.0,
                r#" stroke-dasharray="4 3""#,
            ),
            Vertex::Node(i) => {
                let node = &spec.nodes[*i];
                let (fill, line) = colours(*node.kind.get_ref());
                let radius = match node.kind.get_ref() {
                    crate::spec::NodeKind::LlmStructured => 12.0,
                    crate::spec::NodeKind::Finalize | crate::spec::NodeKind::Fail => p.height / 2.0,
                    _ => 4.0,
                };
                let extra = if reachable[ix.index()] {
                    ""
                } else {
                    r#" stroke-dasharray="4 3""#
                };
                (node.kind.get_ref().name(), fill, line, radius, extra)
            }
        };
        let interrupt = matches!(&topo.graph[ix], Vertex::Node(i)
            if *spec.nodes[*i].kind.get_ref() == crate::spec::NodeKind::Interrupt);
        let width = if interrupt { 2.6 } else { 1.4 };
        let _ = write!(
            out,
            r#"<g class="node kind-{class}" data-node="{}" tabindex="0"><rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" rx="{radius:.1}" fill="{fill}" stroke="{line}" stroke-width="{width}"{extra}/>"#,
            escape(id(ix)),
            p.width,
            p.height,
        );
        let lines = &labels[ix.index()];
        let text_colour = if class == "terminal" {
            "white"
        } else {
            "#111827"
        };
        let first = p.y - (lines.len() as f64 - 1.0) * LINE_HEIGHT / 2.0;
        for (i, line) in lines.iter().enumerate() {
            let weight = if i == 0 { r#" font-weight="bold""# } else { "" };
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" dominant-baseline="middle" fill="{text_colour}"{weight}>{}</text>"#,
                p.x,
                first + i as f64 * LINE_HEIGHT,
                escape(line)
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out
}

/// Text for an XML or HTML document, in content or a double-quoted attribute. Control
/// characters XML does not allow (a name in a graph that does not validate) are dropped,
/// so the drawing still parses.
pub(crate) fn escape(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'))
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
