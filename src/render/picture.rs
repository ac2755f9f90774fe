//! What the three drawings draw: the topology's vertices and, where parallel branches
//! start, a fork bar, and where they meet, a join bar (as UML and Mermaid draw them), so
//! that branches that run together do not look like a route that takes one of them.
//! Edges between the same two marks drawn alike are one arrow whose label lists their
//! cases (`allow / confirm`), so labels do not lie on top of each other.

use super::stroke;
use crate::region::region_of;
use crate::spec::{EdgeKind, GraphSpec, Sp};
use crate::topology::{LinkKind, Topology};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::collections::{BTreeSet, HashMap};

/// A thing drawn: a vertex of the topology, or a bar.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Mark {
    Vertex(NodeIndex),
    /// Where the branches of `node` (of its route's case `case`) start: drawn as a bar.
    Fork {
        node: String,
        case: Option<String>,
        branches: usize,
    },
    /// Where they meet, before their join node.
    Join {
        node: String,
        case: Option<String>,
        branches: usize,
    },
}

/// An edge as drawn, between marks (by index into `Picture::marks`).
pub(super) struct Drawn {
    pub from: usize,
    pub to: usize,
    pub kind: LinkKind,
    pub labels: Vec<String>,
}

impl Drawn {
    pub(super) fn label(&self) -> Option<String> {
        (!self.labels.is_empty()).then(|| self.labels.join(" / "))
    }
}

pub(super) struct Picture {
    pub topo: Topology,
    /// The topology's vertices first (mark `i` is vertex `i`), then the bars.
    pub marks: Vec<Mark>,
    pub edges: Vec<Drawn>,
}

/// Where branches start and meet: the fork's vertex, its case, its branches' first
/// nodes, the join's vertex and every node of the branches.
struct Site {
    fork: NodeIndex,
    case: Option<String>,
    starts: BTreeSet<NodeIndex>,
    join: NodeIndex,
    members: BTreeSet<NodeIndex>,
}

impl Picture {
    pub(super) fn build(spec: &GraphSpec) -> Self {
        let topo = Topology::build(spec);
        let mut marks: Vec<Mark> = topo.graph.node_indices().map(Mark::Vertex).collect();
        // The bar each edge that passes one goes through, by the edge's index.
        let mut through: HashMap<usize, usize> = HashMap::new();
        for site in sites(spec, &topo) {
            let name = topo.name(spec, site.fork).to_string();
            let branches = site.starts.len();
            let fork_bar = marks.len();
            marks.push(Mark::Fork {
                node: name.clone(),
                case: site.case.clone(),
                branches,
            });
            let join_bar = marks.len();
            marks.push(Mark::Join {
                node: name,
                case: site.case.clone(),
                branches,
            });
            for e in topo.graph.edge_references() {
                let (from, to) = (e.source(), e.target());
                let link = e.weight();
                let branch = matches!(link.kind, LinkKind::Edge(EdgeKind::Branch | EdgeKind::Case));
                if from == site.fork
                    && branch
                    && site.starts.contains(&to)
                    && link.label == site.case
                {
                    through.insert(e.id().index(), fork_bar);
                } else if to == site.join && site.members.contains(&from) {
                    through.insert(e.id().index(), join_bar);
                }
            }
        }
        let mut edges: Vec<Drawn> = Vec::new();
        let mut add = |from: usize, to: usize, kind: LinkKind, label: Option<String>| {
            let same = edges
                .iter_mut()
                .find(|d| d.from == from && d.to == to && stroke(d.kind) == stroke(kind));
            match same {
                Some(d) => d.labels.extend(label.filter(|l| !d.labels.contains(l))),
                None => edges.push(Drawn {
                    from,
                    to,
                    kind,
                    labels: label.into_iter().collect(),
                }),
            }
        };
        let plain = LinkKind::Edge(EdgeKind::Next);
        for e in topo.graph.edge_references() {
            let link = e.weight();
            // START -> limit is how the checker sees that a limit can fire anywhere;
            // drawn it would only be noise.
            if link.kind == LinkKind::Limit && e.source() == topo.start {
                continue;
            }
            let (from, to) = (e.source().index(), e.target().index());
            match through.get(&e.id().index()) {
                // Into the fork bar with the case's name, out of it to each branch.
                Some(&bar) if matches!(marks[bar], Mark::Fork { .. }) => {
                    add(from, bar, plain, link.label.clone());
                    add(bar, to, plain, None);
                }
                // Into the join bar as written, out of it once to the join node.
                Some(&bar) => {
                    add(from, bar, link.kind, link.label.clone());
                    add(bar, to, plain, None);
                }
                None => add(from, to, link.kind, link.label.clone()),
            }
        }
        Picture { topo, marks, edges }
    }

    /// A mark's id as the page and the drawings name it: the vertex's wire id
    /// (`__start__`, a node's name), or `__fork__<node>` / `__join__<node>`, with
    /// `.<case>` for a route case's branches.
    pub(super) fn id<'a>(&'a self, spec: &'a GraphSpec, mark: usize) -> std::borrow::Cow<'a, str> {
        match &self.marks[mark] {
            Mark::Vertex(ix) => self.topo.wire_id(spec, *ix).into(),
            Mark::Fork { node, case, .. } => bar_id("fork", node, case).into(),
            Mark::Join { node, case, .. } => bar_id("join", node, case).into(),
        }
    }
}

impl Picture {
    pub(super) fn is_bar(&self, mark: usize) -> bool {
        !matches!(self.marks[mark], Mark::Vertex(_))
    }
}

fn bar_id(what: &str, node: &str, case: &Option<String>) -> String {
    match case {
        Some(c) => format!("__{what}__{node}.{c}"),
        None => format!("__{what}__{node}"),
    }
}

/// Every fork whose branches make a region (the checker reports those that do not;
/// they are drawn with plain edges).
fn sites(spec: &GraphSpec, topo: &Topology) -> Vec<Site> {
    let mut out = Vec::new();
    for (i, node) in spec.nodes.iter().enumerate() {
        // A finalize node's edges are not part of the flow (nor of the topology).
        if node.kind.get_ref().ends_run() && !node.kind_unknown {
            continue;
        }
        let own = (!node.fork.is_empty()).then_some((None, node.fork.as_slice()));
        let cases = node.route.iter().flat_map(|r| {
            r.case_forks
                .iter()
                .map(|(case, targets)| (Some(case.get_ref().clone()), targets.as_slice()))
        });
        for (case, starts) in own.into_iter().chain(cases) {
            if let Some(site) = site(spec, topo, topo.nodes[i], case, starts) {
                out.push(site);
            }
        }
    }
    out
}

fn site(
    spec: &GraphSpec,
    topo: &Topology,
    fork: NodeIndex,
    case: Option<String>,
    starts: &[Sp<String>],
) -> Option<Site> {
    if starts.len() < 2 {
        return None;
    }
    let region = region_of(spec, starts).ok()?;
    let vertex = |name: &str| topo.vertex(name);
    let starts: BTreeSet<NodeIndex> = starts
        .iter()
        .map(|s| vertex(s.get_ref()))
        .collect::<Option<_>>()?;
    let members = region
        .branches
        .iter()
        .flatten()
        .map(|n| vertex(n))
        .collect::<Option<_>>()?;
    Some(Site {
        fork,
        case,
        starts,
        join: vertex(region.join)?,
        members,
    })
}
