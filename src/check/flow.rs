//! Flow: every node is reachable from the entry, END is reachable from every node, and
//! every cycle has an exit and is bounded (by `max_steps` or a counter guard).
//!
//! Cycles are the strongly connected components of the topology (Kosaraju's, which
//! walks without recursion: a chain of any length does not overflow the stack). A component
//! with no edge leaving it is a trap. A component that can leave is bounded when the
//! graph has `max_steps`, or when one of its routes reads an `int` field that a node of
//! the component writes: the counter guard of seed 000's `invalid_actions >= 3`.
//! Nodes that cannot reach END outside a trap lead into one, or into a node with no
//! edge (reported by the names pass), so traps and dead ends name every cause.

use super::{Cx, DiagExt};
use crate::spec::FieldType;
use crate::topology::{Topology, Vertex};
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::{Bfs, Reversed};
use std::collections::HashSet;

pub(super) fn check(cx: &mut Cx<'_>, topo: &Topology) {
    let spec = cx.spec;
    let reachable = topo.reachable();
    let entry = spec.graph.entry.as_ref().map(|e| e.get_ref().clone());
    if let Some(entry) = entry
        .as_deref()
        .filter(|e| topo.vertex(e).is_some_and(|v| topo.node_of(v).is_some()))
    {
        for (i, node) in spec.nodes.iter().enumerate() {
            if !reachable[topo.nodes[i].index()] {
                cx.error(
                    "unreachable",
                    node.name.span(),
                    format!("node `{}` is unreachable", node.name.get_ref()),
                )
                .with_label(format!("no path from the entry `{entry}` leads here"))
                .with_help("route to it from another node, or remove it");
            }
        }
    }

    let mut reaches_end = vec![false; topo.graph.node_count()];
    let reversed = Reversed(&topo.graph);
    let mut bfs = Bfs::new(reversed, topo.end);
    while let Some(ix) = bfs.next(reversed) {
        reaches_end[ix.index()] = true;
    }
    // Unknown targets are reported by the names pass; treat them as exits here so one
    // typo does not also read as a trap.
    for ix in topo.graph.node_indices() {
        if matches!(topo.graph[ix], Vertex::Missing(_)) {
            let mut bfs = Bfs::new(reversed, ix);
            while let Some(up) = bfs.next(reversed) {
                reaches_end[up.index()] = true;
            }
        }
    }

    for scc in petgraph::algo::kosaraju_scc(&topo.graph) {
        let mut members: Vec<usize> = scc.iter().filter_map(|ix| topo.node_of(*ix)).collect();
        members.sort_unstable();
        let Some(&first) = members.first() else {
            continue;
        };
        let set: HashSet<NodeIndex> = scc.iter().copied().collect();
        let is_cycle = scc.len() > 1 || topo.graph.contains_edge(scc[0], scc[0]);
        if !is_cycle {
            continue;
        }
        let path = cycle_path(cx, topo, &set, topo.nodes[first]);
        let head = &spec.nodes[first];
        if !reaches_end[scc[0].index()] {
            cx.error(
                "trap-cycle",
                head.name.span(),
                format!("cycle `{path}` has no exit"),
            )
            .with_label("END cannot be reached from here")
            .with_help("route out of the loop, e.g. to a finalize node, when the work is done");
            continue;
        }
        if spec.graph.max_steps.is_none() && !guarded(cx, &members, topo, &set) {
            cx.error("unbounded-cycle", head.name.span(), format!("cycle `{path}` is not bounded"))
                .with_label("may run forever")
                .with_help("set `max_steps` in `[graph]`, or leave the loop on a counter the loop increments (`attempts >= 3`)");
        }
    }
}

/// A readable cycle through the component, starting and ending at `start`:
/// `a -> b -> a`. Follows edges in file order, depth first, without recursion (a loop
/// of any length); a cycle of more than a few nodes is shown by its ends.
fn cycle_path(cx: &Cx<'_>, topo: &Topology, set: &HashSet<NodeIndex>, start: NodeIndex) -> String {
    let next_of = |at: NodeIndex| -> Vec<NodeIndex> {
        let mut next: Vec<NodeIndex> = topo
            .graph
            .neighbors_directed(at, Direction::Outgoing)
            .filter(|n| set.contains(n))
            .collect();
        // petgraph lists the newest edge first; file order reads better.
        next.reverse();
        next
    };
    let mut path = vec![start];
    let mut seen = HashSet::from([start]);
    // Each node on the path with the ways from it not tried yet.
    let mut ways: Vec<std::vec::IntoIter<NodeIndex>> = vec![next_of(start).into_iter()];
    'search: while let Some(todo) = ways.last_mut() {
        for n in todo.by_ref() {
            if n == start {
                path.push(n);
                break 'search;
            }
            if seen.insert(n) {
                path.push(n);
                ways.push(next_of(n).into_iter());
                continue 'search;
            }
        }
        ways.pop();
        path.pop();
    }
    let names: Vec<&str> = path.iter().map(|ix| topo.name(cx.spec, *ix)).collect();
    if names.len() > 12 {
        let hidden = names.len() - 10;
        format!(
            "{} -> ... {hidden} more ... -> {}",
            names[..8].join(" -> "),
            names[names.len() - 2..].join(" -> ")
        )
    } else {
        names.join(" -> ")
    }
}

/// Whether a route inside the cycle reads an `int` field that the cycle writes.
fn guarded(cx: &Cx<'_>, members: &[usize], topo: &Topology, set: &HashSet<NodeIndex>) -> bool {
    let spec = cx.spec;
    let env = crate::jinja::environment();
    // A counter is an `int` field the cycle steps: written through the `add` reducer,
    // or by a `set` expression that reads the field itself (`n + 1`). A field the
    // cycle only resets (`n = 0`) guards nothing.
    let mut counters: HashSet<&str> = HashSet::new();
    for &i in members {
        let node = &spec.nodes[i];
        for (f, e) in &node.set {
            let Some(field) = spec.field(f.get_ref()) else {
                continue;
            };
            if !matches!(field.ty.get_ref().base(), FieldType::Int) {
                continue;
            }
            let steps = field.reducer() == crate::spec::Reducer::Add
                || env.compile_expression(e.get_ref()).is_ok_and(|expr| {
                    expr.undeclared_variables(false)
                        .contains(f.get_ref().as_str())
                });
            if steps {
                counters.insert(f.get_ref().as_str());
            }
        }
        for f in node.output_fields() {
            if spec.field(f.get_ref()).is_some_and(|field| {
                matches!(field.ty.get_ref().base(), FieldType::Int)
                    && field.reducer() == crate::spec::Reducer::Add
            }) {
                counters.insert(f.get_ref().as_str());
            }
        }
    }
    members.iter().any(|&i| {
        let node = &spec.nodes[i];
        let leaves = topo
            .graph
            .neighbors_directed(topo.nodes[i], Direction::Outgoing)
            .any(|n| !set.contains(&n));
        let Some(route) = node.route.as_ref().filter(|_| leaves) else {
            return false;
        };
        let exprs = route.on.iter().chain(route.when.iter().map(|w| &w.cond));
        exprs.into_iter().any(|e| {
            env.compile_expression(e.get_ref()).is_ok_and(|expr| {
                expr.undeclared_variables(false)
                    .iter()
                    .any(|v| counters.contains(v.as_str()))
            })
        })
    })
}
