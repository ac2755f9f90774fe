//! A layered layout of a graph's topology, so that the server can draw a graph without
//! Graphviz: vertices go into rows by their longest path from START (edges that go
//! back, the loops, are left out of the ranking and drawn curving beside the rows),
//! each row ordered to keep edges short (a few barycentre sweeps), then spaced out.
//! Plain and deterministic: the same file always gets the same picture.

/// What is laid out: `count` marks (the first is where the graph starts, `end` the one
/// that goes on the last row) and the edges between them, in the order written.
pub(crate) struct Shape<'a> {
    pub count: usize,
    pub start: usize,
    pub end: usize,
    pub edges: &'a [(usize, usize)],
    /// The height of each edge's label (0 for none): rows are spaced so that the label
    /// of an edge fits between the rows its last stretch joins.
    pub label_heights: &'a [f64],
}

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

/// The places of the marks, by index, for boxes of the given sizes.
pub(crate) fn layout(shape: &Shape<'_>, sizes: &[(f64, f64)]) -> Layout {
    let n = shape.count;
    let back = back_edges(shape);
    let forward: Vec<(usize, usize, usize)> = shape
        .edges
        .iter()
        .enumerate()
        .filter(|(i, (from, to))| !back.contains(i) && from != to)
        .map(|(i, (from, to))| (i, *from, *to))
        .collect();
    let mut out_of: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (_, from, to) in &forward {
        out_of[*from].push(*to);
    }

    // Ranks: the longest path from a source over the forward edges, in topological order.
    let mut indegree = vec![0usize; n];
    for (_, _, to) in &forward {
        indegree[*to] += 1;
    }
    let mut rank = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|v| indegree[*v] == 0).collect();
    // START first, then by index: a stable order.
    ready.sort_by_key(|v| (*v != shape.start, *v));
    ready.reverse();
    while let Some(v) = ready.pop() {
        let mut next: Vec<usize> = Vec::new();
        for t in &out_of[v] {
            rank[*t] = rank[*t].max(rank[v] + 1);
            indegree[*t] -= 1;
            if indegree[*t] == 0 {
                next.push(*t);
            }
        }
        next.sort_by_key(|v| std::cmp::Reverse(*v));
        ready.extend(next);
    }
    // END on the last row.
    let deepest = (0..n)
        .filter(|i| *i != shape.end)
        .map(|i| rank[i])
        .max()
        .unwrap_or(0);
    rank[shape.end] = rank[shape.end].max(deepest);

    // Vertices to order: the real ones, then a stand-in per row an edge passes through.
    let mut row_of: Vec<usize> = rank.clone();
    let mut width_of: Vec<f64> = sizes.iter().map(|s| s.0).collect();
    let mut links: Vec<(usize, usize)> = Vec::new();
    let mut chains: Vec<(usize, Vec<usize>)> = Vec::new();
    for (id, from, to) in forward.iter().copied() {
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
            chains.push((id, chain));
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
    // The gap above each row: wider where a tall label goes in.
    let mut gap_above = vec![GAP_Y; rows];
    for (id, _, to) in &forward {
        let r = rank[*to];
        gap_above[r] = gap_above[r].max(shape.label_heights[*id] + 28.0);
    }
    let mut y = 0.0;
    for (r, row) in order.iter().enumerate() {
        if r > 0 {
            y += gap_above[r];
        }
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
        y += height;
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

/// A mark on the depth-first walk: its outgoing edges (id, target) and the next one.
type Walk = (usize, Vec<(usize, usize)>, usize);

/// The edges (by index) that close a loop: found by a depth-first walk from START
/// (then from any mark it did not reach), an edge to a mark still on the walk's path
/// goes back. The walk takes each mark's edges in the order they were written, so
/// which edge of a loop is drawn going back follows the file.
fn back_edges(shape: &Shape<'_>) -> std::collections::HashSet<usize> {
    let n = shape.count;
    let mut out_of: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (id, (from, to)) in shape.edges.iter().enumerate() {
        out_of[*from].push((id, *to));
    }
    // 0 unseen, 1 on the path, 2 done.
    let mut state = vec![0u8; n];
    let mut back = std::collections::HashSet::new();
    let roots = std::iter::once(shape.start).chain(0..n);
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        // An explicit stack of (mark, its outgoing edges in order, next to look at).
        let mut stack: Vec<Walk> = Vec::new();
        state[root] = 1;
        stack.push((root, out_of[root].clone(), 0));
        while let Some((_, edges, next)) = stack.last_mut() {
            if *next == edges.len() {
                let (v, _, _) = stack.pop().expect("not empty");
                state[v] = 2;
                continue;
            }
            let (id, to) = edges[*next];
            *next += 1;
            match state[to] {
                0 => {
                    state[to] = 1;
                    stack.push((to, out_of[to].clone(), 0));
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
