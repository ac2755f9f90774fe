use super::labels::{self, Placer, Rect};
use super::layout::{Place, Shape, layout};
use super::picture::{Mark, Picture};
use super::{Stroke, colours, label_lines, reachability, stroke};
use crate::spec::GraphSpec;
use crate::topology::Vertex;
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
/// A fork or join bar: this wide a branch, this thick.
const BAR_WIDTH: f64 = 56.0;
const BAR_HEIGHT: f64 = 6.0;

/// The graph as an SVG picture, laid out here (no Graphviz): nodes coloured and shaped
/// by kind, route labels, loops curving beside the rows, a bar where parallel branches
/// fork and one where they join. Each node is a `<g>` with `data-node` (its name, or
/// `__start__` / `__end__`), each bar one with `data-bar` (`__fork__<node>`,
/// `__join__<node>`), and each edge one with `data-from` and `data-to` (a node's or a
/// bar's), so a page can highlight where a run is and the path it took.
pub fn svg(spec: &GraphSpec) -> String {
    let picture = Picture::build(spec);
    let topo = &picture.topo;
    let reachable = reachability(topo);
    let labels: Vec<Vec<String>> = picture
        .marks
        .iter()
        .map(|mark| match mark {
            Mark::Vertex(ix) => match &topo.graph[*ix] {
                Vertex::Start => vec!["START".to_string()],
                Vertex::End => vec!["END".to_string()],
                Vertex::Limit => vec!["limit".to_string()],
                Vertex::Missing(n) => vec![n.clone(), "(unknown node)".to_string()],
                Vertex::Node(i) => label_lines(&spec.nodes[*i], reachable[ix.index()]),
            },
            Mark::Fork { .. } | Mark::Join { .. } => Vec::new(),
        })
        .collect();
    let sizes: Vec<(f64, f64)> = picture
        .marks
        .iter()
        .zip(&labels)
        .map(|(mark, lines)| match mark {
            Mark::Fork { branches, .. } | Mark::Join { branches, .. } => {
                (BAR_WIDTH * *branches as f64, BAR_HEIGHT)
            }
            Mark::Vertex(_) => {
                let chars = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
                (
                    (chars as f64 * CHAR_WIDTH + 2.0 * PADDING_X).max(64.0),
                    lines.len() as f64 * LINE_HEIGHT + 2.0 * PADDING_Y,
                )
            }
        })
        .collect();
    let ends: Vec<(usize, usize)> = picture.edges.iter().map(|e| (e.from, e.to)).collect();
    let label_heights: Vec<f64> = picture
        .edges
        .iter()
        .map(|e| e.label().map_or(0.0, |l| labels::size(&labels::wrap(&l)).1))
        .collect();
    let laid = layout(
        &Shape {
            count: picture.marks.len(),
            start: topo.start.index(),
            end: topo.end.index(),
            edges: &ends,
            label_heights: &label_heights,
        },
        &sizes,
    );
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

    let id = |mark: usize| picture.id(spec, mark);
    // Labels keep clear of every box and of each other.
    let mut placer = Placer::new(
        places
            .iter()
            .map(|p| Rect::centred(p.x, p.y, p.width + 4.0, p.height + 4.0))
            .collect(),
    );
    // Edges first, so boxes lie over their ends: each edge's group (its path), its
    // label's lines and size, and where the label may go.
    type Edge = (String, Vec<String>, (f64, f64), Vec<(f64, f64)>);
    let mut edges: Vec<Edge> = Vec::new();
    let back = &laid.back;
    // Loops taken so far on the left and on the right, and how far out the next goes.
    let mut lanes = (0usize, 0usize);
    let lane = |k: usize| 16.0 + (k as f64 * 9.0).min(LOOP_ROOM - 20.0);
    for (i, edge) in picture.edges.iter().enumerate() {
        let (a, b) = (places[edge.from], places[edge.to]);
        let goes_back = back.contains(&i);
        let is_loop = edge.from != edge.to && (goes_back || b.y <= a.y);
        let lines = edge.label().map(|l| labels::wrap(&l)).unwrap_or_default();
        let (w, h) = labels::size(&lines);
        let (path, candidates) = if edge.from == edge.to {
            let (x, y) = (a.x + a.width / 2.0, a.y);
            let beside = x + 34.0 + w / 2.0;
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
                [0.0, -1.0, 1.0, -2.0, 2.0]
                    .iter()
                    .map(|k| (beside, y + k * (h + 2.0)))
                    .collect::<Vec<_>>(),
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
            // Inside its curve, toward the boxes, from the middle out; then outside.
            let mid = (y1 + y2) / 2.0;
            let reach = ((y1 - y2).abs() / 2.0 - h / 2.0).max(0.0);
            let steps = [0.0, -0.5, 0.5, -1.0, 1.0];
            let inside = out_x - side * (4.0 + w / 2.0);
            let outside = out_x + side * (4.0 + w / 2.0);
            (
                format!(
                    "M {x1:.1} {y1:.1} C {out_x:.1} {y1:.1}, {out_x:.1} {y2:.1}, {x2:.1} {y2:.1}"
                ),
                [inside, outside]
                    .iter()
                    .flat_map(|x| steps.iter().map(move |k| (*x, mid + k * reach)))
                    .collect(),
            )
        } else {
            let mut points = vec![(a.x, a.y + a.height / 2.0)];
            if let Some(bends) = laid.bends.get(&i) {
                points.extend(bends.iter().map(|(x, y)| (x + shift, y + MARGIN)));
            }
            points.push((b.x, b.y - b.height / 2.0));
            // Edges leave a fork bar, and reach a join bar, at the point along it
            // nearest their other end, so that they fan out from it as in UML.
            let along = |bar: &Place, x: f64| {
                x.clamp(bar.x - bar.width / 2.0 + 6.0, bar.x + bar.width / 2.0 - 6.0)
            };
            let last = points.len() - 1;
            if picture.is_bar(edge.from) {
                points[0].0 = along(&a, points[1].0);
            }
            if picture.is_bar(edge.to) {
                points[last].0 = along(&b, points[last - 1].0);
            }
            let mut d = format!("M {:.1} {:.1}", points[0].0, points[0].1);
            let mut curves = Vec::new();
            for w in points.windows(2) {
                let ((x1, y1), (x2, y2)) = (w[0], w[1]);
                let mid = (y1 + y2) / 2.0;
                let _ = write!(d, " C {x1:.1} {mid:.1}, {x2:.1} {mid:.1}, {x2:.1} {y2:.1}");
                curves.push([(x1, y1), (x1, mid), (x2, mid), (x2, y2)]);
            }
            // Along the last stretch first, then the ones before it.
            let candidates = curves
                .iter()
                .rev()
                .flat_map(|c| labels::along(*c, w))
                .collect();
            (d, candidates)
        };
        let (s, colour) = stroke(edge.kind);
        let dash = match s {
            Stroke::Solid => "",
            Stroke::Dashed => r#" stroke-dasharray="6 4""#,
            Stroke::Dotted => r#" stroke-dasharray="2 3""#,
        };
        let mut group = String::new();
        let _ = write!(
            group,
            r#"<g class="edge" data-from="{}" data-to="{}"><path d="{path}" fill="none" stroke="{}" stroke-width="1.4"{dash} marker-end="url(#arrow)"/>"#,
            escape(&id(edge.from)),
            escape(&id(edge.to)),
            colour.unwrap_or("#4b5563"),
        );
        edges.push((group, lines, (w, h), candidates));
    }
    // Labels with the fewest places to go (a short edge's) take theirs first.
    let mut order: Vec<usize> = (0..edges.len()).collect();
    order.sort_by_key(|i| edges[*i].3.len());
    let mut at = vec![(0.0, 0.0); edges.len()];
    for i in order {
        let (_, lines, size, candidates) = &edges[i];
        if !lines.is_empty() {
            at[i] = placer.place(candidates, *size);
        }
    }
    let mut edges_out = String::new();
    for ((group, lines, _, _), (x, y)) in edges.iter().zip(at) {
        edges_out.push_str(group);
        if !lines.is_empty() {
            let _ = write!(
                edges_out,
                r##"<text x="{x:.1}" y="{y:.1}" text-anchor="middle" dominant-baseline="middle" fill="#374151" stroke="white" stroke-width="4" paint-order="stroke">"##,
            );
            if let [line] = lines.as_slice() {
                edges_out.push_str(&escape(line));
            } else {
                let first = y - (lines.len() as f64 - 1.0) * labels::LINE_HEIGHT / 2.0;
                for (k, line) in lines.iter().enumerate() {
                    let _ = write!(
                        edges_out,
                        r#"<tspan x="{x:.1}" y="{:.1}">{}</tspan>"#,
                        first + k as f64 * labels::LINE_HEIGHT,
                        escape(line)
                    );
                }
            }
            edges_out.push_str("</text>");
        }
        edges_out.push_str("</g>\n");
    }
    // The drawing holds every label too (one beside a loop may lie past the boxes).
    let width = placer
        .boxes()
        .iter()
        .map(|r| r.x1 + MARGIN)
        .fold(width, f64::max);
    let height = placer
        .boxes()
        .iter()
        .map(|r| r.y1 + MARGIN)
        .fold(height, f64::max);

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
    out.push_str(&edges_out);

    for (mark, what) in picture.marks.iter().enumerate() {
        let p = places[mark];
        let (x, y) = (p.x - p.width / 2.0, p.y - p.height / 2.0);
        let ix = match what {
            Mark::Vertex(ix) => *ix,
            Mark::Fork { .. } | Mark::Join { .. } => {
                let class = if matches!(what, Mark::Fork { .. }) {
                    "fork"
                } else {
                    "join"
                };
                let _ = writeln!(
                    out,
                    r##"<g class="bar {class}" data-bar="{}"><rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" rx="2" fill="#111827"/></g>"##,
                    escape(&id(mark)),
                    p.width,
                    p.height,
                );
                continue;
            }
        };
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
            escape(&id(mark)),
            p.width,
            p.height,
        );
        let lines = &labels[mark];
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
