//! `require_policy = true`: every path from the entry to a side-effecting `mcp_call`
//! passes through a policy node. The policy nodes must together dominate each such
//! node; a breadth-first search from START that may not enter a policy node finds the
//! offending path when they do not.

use super::{Cx, DiagExt};
use crate::spec::{KindSpec, NodeKind};
use crate::topology::Topology;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::collections::VecDeque;

pub(super) fn check(cx: &mut Cx<'_>, topo: &Topology) {
    let spec = cx.spec;
    if !spec.graph.require_policy {
        return;
    }
    let is_policy = |ix: NodeIndex| {
        topo.node_of(ix)
            .is_some_and(|i| *spec.nodes[i].kind.get_ref() == NodeKind::Policy)
    };
    let mut parent: Vec<Option<NodeIndex>> = vec![None; topo.graph.node_count()];
    let mut seen = vec![false; topo.graph.node_count()];
    let mut queue = VecDeque::from([topo.start]);
    seen[topo.start.index()] = true;
    while let Some(at) = queue.pop_front() {
        for edge in topo.graph.edges(at) {
            let to = edge.target();
            if !seen[to.index()] && !is_policy(to) {
                seen[to.index()] = true;
                parent[to.index()] = Some(at);
                queue.push_back(to);
            }
        }
    }
    for (i, node) in spec.nodes.iter().enumerate() {
        let KindSpec::Mcp(m) = &node.body else {
            continue;
        };
        let ix = topo.nodes[i];
        if !m.side_effects || !seen[ix.index()] {
            continue;
        }
        let mut path = vec![ix];
        while let Some(p) = parent[path.last().expect("non-empty").index()] {
            path.push(p);
        }
        path.reverse();
        let names: Vec<&str> = path.iter().map(|ix| topo.name(spec, *ix)).collect();
        cx.error(
            "unguarded-side-effect",
            node.name.span(),
            format!(
                "side-effecting `{}` can be reached without passing a policy node",
                node.name.get_ref()
            ),
        )
        .with_label(format!("reached by `{}`", names.join(" -> ")))
        .with_help(
            "route every path to this node through a `policy` node, or drop `require_policy`",
        );
    }
}
