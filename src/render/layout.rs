//! A layered layout of a graph's topology, so that the server can draw a graph without
//! Graphviz: vertices go into rows by their longest path from START (edges that go
//! back, the loops, are left out of the ranking and drawn curving beside the rows),
//! each row ordered to keep edges short (a few barycentre sweeps), then spaced out.
//! Plain and deterministic: the same file always gets the same picture.

use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;

use crate::topology::Topology;

/// Where a vertex goes: the centre of its box, and the box's size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Place {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// Gaps between boxes in a row, and between rows.
const GAP_X: f64 = 36.0;
const GAP_Y: f64 = 64.0;
/// Barycentre sweeps (down and up); a handful settles the graphs people write.
const SWEEPS: usize = 4;

/// A laid-out drawing: the place of each vertex (by index), and for each forward edge
/// that spans several rows (by edge index), the points it passes on its way down (it
/// goes through the rows between as a thin stand-in, so it does not cut through boxes).
pub(crate) struct Layout {
    pub places: Vec<Place>,
    pub bends: std::collections::HashMap<usize, Vec<(f64, f64)>>,
    /// The edges (by index) that close a loop, drawn at the side.
    pub back: std::collections::HashSet<usize>,
}

/// How wide the stand-in of an edge passing through a row is.
const PASSING_WIDTH: f64 = 12.0;

/// The places of the topology's vertices, by index, for boxes of the given sizes.
pub(crate) fn layout(topo: &Topology, sizes: &[(f64, f64)]) -> Layout {
    let n = topo.graph.node_count();
    let back = back_edges(topo);
    let forward = |e: &petgraph::graph::EdgeReference<'_, crate::topology::Link>| {
        !back.contains(&e.id().index()) && e.source() != e.target()
    };

    // Ranks: the longest path from a source over the forward edges, in topological order.
    let mut indegree = vec![0usize; n];
    for e in topo.graph.edge_references().filter(forward) {
        indegree[e.target().index()] += 1;
    }
    let mut rank = vec![0usize; n];
    let mut ready: Vec<NodeIndex> = topo
        .graph
        .node_indices()
        .filter(|ix| indegree[ix.index()] == 0)
        .collect();
    // START first, then by index: a stable order.
    ready.sort_by_key(|ix| (*ix != topo.start, ix.index()));
    ready.reverse();
    while let Some(ix) = ready.pop() {
        let mut next: Vec<NodeIndex> = Vec::new();
        for e in topo.graph.edges_directed(ix, Direction::Outgoing) {
            if !forward(&e) {
                continue;
            }
            let t = e.target();
            rank[t.index()] = rank[t.index()].max(rank[ix.index()] + 1);
            indegree[t.index()] -= 1;
            if indegree[t.index()] == 0 {
                next.push(t);
            }
        }
        next.sort_by_key(|ix| std::cmp::Reverse(ix.index()));
        ready.extend(next);
    }
    // END on the last row.
    let deepest = (0..n)
        .filter(|i| *i != topo.end.index())
        .map(|i| rank[i])
        .max()
        .unwrap_or(0);
    rank[topo.end.index()] = rank[topo.end.index()].max(deepest);

    // Vertices to order: the real ones, then a stand-in per row an edge passes through.
    let mut row_of: Vec<usize> = rank.clone();
    let mut width_of: Vec<f64> = sizes.iter().map(|s| s.0).collect();
    let mut links: Vec<(usize, usize)> = Vec::new();
    let mut chains: Vec<(usize, Vec<usize>)> = Vec::new();
    for e in topo.graph.edge_references().filter(forward) {
        let (from, to) = (e.source().index(), e.target().index());
        let mut last = from;
        let mut chain = Vec::new();
        for r in rank[from] + 1..rank[to] {
            let d = row_of.len();
            row_of.push(r);
            width_of.push(PASSING_WIDTH);
            links.push((last, d));
            chain.push(d);
            last = d;
        }
        links.push((last, to));
        if !chain.is_empty() {
            chains.push((e.id().index(), chain));
        }
    }
    let m = row_of.len();
    let rows = row_of.iter().copied().max().unwrap_or(0) + 1;
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); rows];
    for (v, r) in row_of.iter().enumerate() {
        order[*r].push(v);
    }
    let mut above: Vec<Vec<usize>> = vec![Vec::new(); m];
    let mut below: Vec<Vec<usize>> = vec![Vec::new(); m];
    for (a, b) in &links {
        below[*a].push(*b);
        above[*b].push(*a);
    }

    // Orders within rows: each vertex at the mean position of its neighbours in the row
    // above (sweeping down) or below (sweeping up).
    let mut pos = vec![0f64; m];
    let set_positions = |order: &Vec<Vec<usize>>, pos: &mut Vec<f64>| {
        for row in order {
            for (i, v) in row.iter().enumerate() {
                pos[*v] = i as f64;
            }
        }
    };
    set_positions(&order, &mut pos);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let rows_in_turn: Vec<usize> = if down {
            (1..rows).collect()
        } else {
            (0..rows.saturating_sub(1)).rev().collect()
        };
        for r in rows_in_turn {
            let near_of = if down { &above } else { &below };
            let mut keyed: Vec<(f64, usize, usize)> = order[r]
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let near = &near_of[*v];
                    let key = if near.is_empty() {
                        pos[*v]
                    } else {
                        near.iter().map(|u| pos[*u]).sum::<f64>() / near.len() as f64
                    };
                    (key, i, *v)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            order[r] = keyed.into_iter().map(|(_, _, v)| v).collect();
            // Only this row moved.
            for (i, v) in order[r].iter().enumerate() {
                pos[*v] = i as f64;
            }
        }
    }

    // Coordinates: each row centred on the widest, rows one under another.
    let row_width = |row: &Vec<usize>| -> f64 {
        row.iter().map(|v| width_of[*v]).sum::<f64>() + GAP_X * row.len().saturating_sub(1) as f64
    };
    let widest = order.iter().map(row_width).fold(0.0, f64::max);
    let mut at = vec![(0.0, 0.0); m];
    let mut places = vec![
        Place {
            x: 0.0,
            y: 0.0,
            width: 0.0,
            height: 0.0,
        };
        n
    ];
    let mut y = 0.0;
    for row in &order {
        let height = row
            .iter()
            .filter(|v| **v < n)
            .map(|v| sizes[*v].1)
            .fold(0.0, f64::max);
        let mut x = (widest - row_width(row)) / 2.0;
        for v in row {
            let w = width_of[*v];
            at[*v] = (x + w / 2.0, y + height / 2.0);
            if *v < n {
                places[*v] = Place {
                    x: x + w / 2.0,
                    y: y + height / 2.0,
                    width: w,
                    height: sizes[*v].1,
                };
            }
            x += w + GAP_X;
        }
        y += height + GAP_Y;
    }
    let bends = chains
        .into_iter()
        .map(|(e, chain)| (e, chain.into_iter().map(|d| at[d]).collect()))
        .collect();
    Layout {
        places,
        bends,
        back,
    }
}

/// A vertex on the depth-first walk: its outgoing edges (id, target) and the next one.
type Walk = (NodeIndex, Vec<(usize, NodeIndex)>, usize);

/// The edges (by index) that close a loop: found by a depth-first walk from START
/// (then from any vertex it did not reach), an edge to a vertex still on the walk's
/// path goes back. The walk takes each vertex's edges in the order they were written
/// (petgraph's own walk takes them newest first), so which edge of a loop is drawn
/// going back follows the file.
fn back_edges(topo: &Topology) -> std::collections::HashSet<usize> {
    let n = topo.graph.node_count();
    // 0 unseen, 1 on the path, 2 done.
    let mut state = vec![0u8; n];
    let mut back = std::collections::HashSet::new();
    let roots = std::iter::once(topo.start).chain(topo.graph.node_indices());
    for root in roots {
        if state[root.index()] != 0 {
            continue;
        }
        // An explicit stack of (vertex, its outgoing edges in order, next to look at).
        let mut stack: Vec<Walk> = Vec::new();
        let edges_of = |ix: NodeIndex| -> Vec<(usize, NodeIndex)> {
            let mut v: Vec<(usize, NodeIndex)> = topo
                .graph
                .edges_directed(ix, Direction::Outgoing)
                .map(|e| (e.id().index(), e.target()))
                .collect();
            v.sort();
            v
        };
        state[root.index()] = 1;
        stack.push((root, edges_of(root), 0));
        while let Some((_, edges, next)) = stack.last_mut() {
            if *next == edges.len() {
                let (ix, _, _) = stack.pop().expect("not empty");
                state[ix.index()] = 2;
                continue;
            }
            let (id, to) = edges[*next];
            *next += 1;
            match state[to.index()] {
                0 => {
                    state[to.index()] = 1;
                    stack.push((to, edges_of(to), 0));
                }
                1 => {
                    back.insert(id);
                }
                _ => {}
            }
        }
    }
    back
}
