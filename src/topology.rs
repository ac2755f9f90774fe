//! The graph's edges as a petgraph digraph, built from the spec alone: the checker's
//! flow analysis and the renderers both read it, so what is drawn is what is checked.

use crate::spec::{END, EdgeKind, GraphSpec};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Vertex {
    Start,
    End,
    /// Where the run goes when a limit is reached (`[graph] on_limit`).
    Limit,
    /// Index into `GraphSpec::nodes`.
    Node(usize),
    /// A target that names no node; drawn so the mistake is visible.
    Missing(String),
}

#[derive(Clone, Debug)]
pub(crate) struct Link {
    pub label: Option<String>,
    pub kind: LinkKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkKind {
    Edge(EdgeKind),
    /// START -> entry.
    Entry,
    /// finalize -> END: a finalize node ends the run.
    Finish,
    /// START -> limit -> on_limit target.
    Limit,
}

pub(crate) struct Topology {
    pub graph: DiGraph<Vertex, Link>,
    pub start: NodeIndex,
    pub end: NodeIndex,
    pub limit: Option<NodeIndex>,
    /// Vertex of each spec node, by the node's position in `GraphSpec::nodes`.
    pub nodes: Vec<NodeIndex>,
    by_name: HashMap<String, NodeIndex>,
}

impl Topology {
    pub(crate) fn build(spec: &GraphSpec) -> Self {
        let mut graph = DiGraph::new();
        let start = graph.add_node(Vertex::Start);
        let end = graph.add_node(Vertex::End);
        let mut by_name = HashMap::new();
        let nodes: Vec<NodeIndex> = spec
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let ix = graph.add_node(Vertex::Node(i));
                by_name.entry(n.name.get_ref().clone()).or_insert(ix);
                ix
            })
            .collect();
        let mut topo = Topology {
            graph,
            start,
            end,
            limit: None,
            nodes,
            by_name,
        };
        if let Some(entry) = &spec.graph.entry {
            let to = topo.target(entry.get_ref());
            topo.graph.add_edge(
                start,
                to,
                Link {
                    label: None,
                    kind: LinkKind::Entry,
                },
            );
        }
        if let Some(target) = &spec.graph.on_limit
            && spec.has_limits()
        {
            let limit = topo.graph.add_node(Vertex::Limit);
            topo.limit = Some(limit);
            topo.graph.add_edge(
                start,
                limit,
                Link {
                    label: None,
                    kind: LinkKind::Limit,
                },
            );
            let to = topo.target(target.get_ref());
            topo.graph.add_edge(
                limit,
                to,
                Link {
                    label: Some("limit".into()),
                    kind: LinkKind::Limit,
                },
            );
        }
        for (i, node) in spec.nodes.iter().enumerate() {
            let from = topo.nodes[i];
            let finalize = node.kind.get_ref().ends_run() && !node.kind_unknown;
            // A finalize node ends the run: edges written on one are never taken (the
            // checker reports them), so they are not part of the flow.
            for edge in node.edges().into_iter().filter(|_| !finalize) {
                let to = topo.target(edge.target.get_ref());
                topo.graph.add_edge(
                    from,
                    to,
                    Link {
                        label: edge.label,
                        kind: LinkKind::Edge(edge.kind),
                    },
                );
            }
            if finalize {
                topo.graph.add_edge(
                    from,
                    end,
                    Link {
                        label: None,
                        kind: LinkKind::Finish,
                    },
                );
            }
        }
        topo
    }

    /// The vertex a target name refers to, adding a `Missing` vertex for unknown names.
    fn target(&mut self, name: &str) -> NodeIndex {
        if name == END {
            return self.end;
        }
        if let Some(ix) = self.by_name.get(name) {
            return *ix;
        }
        let ix = self.graph.add_node(Vertex::Missing(name.to_string()));
        self.by_name.insert(name.to_string(), ix);
        ix
    }

    pub(crate) fn vertex(&self, name: &str) -> Option<NodeIndex> {
        if name == END {
            Some(self.end)
        } else {
            self.by_name.get(name).copied()
        }
    }

    /// The spec node index of a vertex, if it is a node.
    pub(crate) fn node_of(&self, ix: NodeIndex) -> Option<usize> {
        match self.graph[ix] {
            Vertex::Node(i) => Some(i),
            _ => None,
        }
    }

    /// Name of a vertex for messages: node names, `START`, `END`.
    pub(crate) fn name<'a>(&'a self, spec: &'a GraphSpec, ix: NodeIndex) -> &'a str {
        match &self.graph[ix] {
            Vertex::Start => "START",
            Vertex::End => END,
            Vertex::Limit => "limit",
            Vertex::Node(i) => spec.nodes[*i].name.get_ref(),
            Vertex::Missing(n) => n,
        }
    }

    /// The vertex's id as the LangGraph API names it: `__start__`, `__end__`,
    /// `__limit__`, or the node's name.
    pub(crate) fn wire_id<'a>(&'a self, spec: &'a GraphSpec, ix: NodeIndex) -> &'a str {
        match &self.graph[ix] {
            Vertex::Start => "__start__",
            Vertex::End => "__end__",
            Vertex::Limit => "__limit__",
            Vertex::Node(i) => spec.nodes[*i].name.get_ref(),
            Vertex::Missing(n) => n,
        }
    }

    /// Spec nodes reachable from START.
    pub(crate) fn reachable(&self) -> Vec<bool> {
        let mut seen = vec![false; self.graph.node_count()];
        let mut bfs = petgraph::visit::Bfs::new(&self.graph, self.start);
        while let Some(ix) = bfs.next(&self.graph) {
            seen[ix.index()] = true;
        }
        seen
    }
}
