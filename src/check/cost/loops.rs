//! How many times each node may run in one run: once, or, inside a cycle, as many
//! times as the cycle's counter guard lets it go round.
//!
//! A cycle's bound comes from a counter guard the checker already requires of a loop
//! without `max_steps`: a route of the cycle leaves it on `x >= K` (or stays in it only
//! on `x < K`), every write of `x` inside the cycle steps it up by a literal, nothing
//! else sets it but literals, and every cycle passes both the guard and a step. Then
//! the guard runs at most `ceil((K - start) / step) + 1` times, and every node of the
//! cycle at most as often (with the guard left out the cycle has no cycle left, so
//! each node runs at most once between two guards).

use super::Amount;
use crate::spec::{FieldType, GraphSpec, Reducer};
use crate::topology::Topology;
use petgraph::graph::NodeIndex;
use std::collections::HashSet;

/// A strongly connected component of the graph's nodes.
pub(super) struct Component {
    /// Indices into `GraphSpec::nodes`, in file order.
    pub members: Vec<usize>,
    pub cyclic: bool,
    /// How many times each member may run: 1 outside a cycle.
    pub times: Amount,
    /// What bounds the cycle (`tool_steps >= MAX_TOOL_STEPS`), for the report.
    pub guard: Option<String>,
}

pub(super) struct Loops {
    pub comp_of: Vec<usize>,
    pub comps: Vec<Component>,
}

impl Loops {
    pub(super) fn build(spec: &GraphSpec, topo: &Topology) -> Self {
        let mut comp_of = vec![usize::MAX; spec.nodes.len()];
        let mut comps = Vec::new();
        for scc in petgraph::algo::kosaraju_scc(&topo.graph) {
            let mut members: Vec<usize> = scc.iter().filter_map(|ix| topo.node_of(*ix)).collect();
            if members.is_empty() {
                continue;
            }
            members.sort_unstable();
            let cyclic = scc.len() > 1 || topo.graph.contains_edge(scc[0], scc[0]);
            let (times, guard) = if cyclic {
                let set: HashSet<usize> = members.iter().copied().collect();
                match counter_bound(spec, topo, &set) {
                    Ok((n, guard)) => (Amount::At(n), Some(guard)),
                    Err(why) => (
                        Amount::unbounded(format!(
                            "the loop at `{}` has no bound a count can use: {why}",
                            spec.nodes[members[0]].name.get_ref()
                        )),
                        None,
                    ),
                }
            } else {
                (Amount::At(1.0), None)
            };
            for &m in &members {
                comp_of[m] = comps.len();
            }
            comps.push(Component {
                members,
                cyclic,
                times,
                guard,
            });
        }
        Loops { comp_of, comps }
    }

    /// How many times node `i` may run.
    pub(super) fn times(&self, i: usize) -> &Amount {
        &self.comps[self.comp_of[i]].times
    }
}

/// `x >= K`, `x > K`, `K <= x`, `K < x` (the counter reaching its bound), or their
/// negations: the counter, the bound as written, whether the condition holds when the
/// counter is high (`true`) or low, and where it flips: at `K + plus`.
struct Compare<'a> {
    counter: &'a str,
    bound: &'a str,
    high: bool,
    plus: f64,
}

fn compare(cond: &str) -> Option<Compare<'_>> {
    for (op, high_when_left, plus_left) in [
        (">=", true, 0.0),
        ("<=", false, 1.0),
        (">", true, 1.0),
        ("<", false, 0.0),
    ] {
        let Some(at) = cond.find(op) else { continue };
        let (left, right) = (cond[..at].trim(), cond[at + op.len()..].trim());
        if !is_word(left) || !is_word(right) {
            return None;
        }
        // `x >= K` holds when x is high; `K >= x` when x is low.
        return Some(if left.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            Compare {
                counter: right,
                bound: left,
                high: !high_when_left,
                // `K < x` flips at K + 1, `K >= x` (x <= K) too; `K <= x`, `K > x` at K.
                plus: if op == "<" || op == ">=" { 1.0 } else { 0.0 },
            }
        } else {
            Compare {
                counter: left,
                bound: right,
                high: high_when_left,
                plus: plus_left,
            }
        });
    }
    None
}

fn is_word(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The value a bound names: an integer, or an int constant (a configurable one's `max`).
fn bound_value(spec: &GraphSpec, bound: &str) -> Result<f64, String> {
    if let Ok(n) = bound.parse::<i64>() {
        return Ok(n as f64);
    }
    let Some(field) = spec.field(bound).filter(|f| f.constant) else {
        return Err(format!("`{bound}` is not a constant"));
    };
    if let Some(b) = &field.configurable {
        return b
            .max
            .as_ref()
            .map(|m| *m.get_ref())
            .ok_or_else(|| format!("the configurable `{bound}` has no `max`"));
    }
    field
        .default
        .as_ref()
        .and_then(|d| d.get_ref().as_f64())
        .ok_or_else(|| format!("`{bound}` is not a number"))
}

/// The most times a guard of the cycle `set` may run, and the guard as written.
fn counter_bound(
    spec: &GraphSpec,
    topo: &Topology,
    set: &HashSet<usize>,
) -> Result<(f64, String), String> {
    let mut best: Option<(f64, String)> = None;
    let mut last_why = "no route of it leaves on a counter (`attempts >= 3`)".to_string();
    // In file order, so that the reason given for no bound is always the same one.
    let mut members: Vec<usize> = set.iter().copied().collect();
    members.sort_unstable();
    for g in members {
        let node = &spec.nodes[g];
        let Some(route) = &node.route else { continue };
        if route.on.is_some() {
            continue;
        }
        let inside = |t: &str| spec.node_index(t).is_some_and(|i| set.contains(&i));
        // The guard's node may stay in the cycle only through its route.
        let other_in = node
            .next
            .iter()
            .chain(node.fork.iter())
            .chain(node.on_error.iter())
            .any(|t| inside(t.get_ref()))
            || node.edges().iter().any(|e| {
                matches!(
                    e.kind,
                    crate::spec::EdgeKind::PseudoTool | crate::spec::EdgeKind::Timeout
                ) && inside(e.target.get_ref())
            });
        if other_in {
            continue;
        }
        for (k, w) in route.when.iter().enumerate() {
            let Some(c) = compare(w.cond.get_ref()) else {
                continue;
            };
            let exits = !inside(w.to.get_ref());
            // Leaving when high, every earlier case leaving too; or staying only when
            // low, every other way out.
            let guards = if exits {
                c.high && route.when[..k].iter().all(|e| !inside(e.to.get_ref()))
            } else {
                !c.high
                    && route
                        .when
                        .iter()
                        .enumerate()
                        .all(|(j, e)| j == k || !inside(e.to.get_ref()))
                    && route.default.as_ref().is_none_or(|d| !inside(d.get_ref()))
            };
            if !guards {
                continue;
            }
            match counted(spec, topo, set, g, c.counter, c.bound, c.plus) {
                Ok(n) => {
                    if best.as_ref().is_none_or(|(b, _)| n < *b) {
                        best = Some((n, w.cond.get_ref().trim().to_string()));
                    }
                }
                Err(why) => last_why = why,
            }
        }
    }
    best.ok_or(last_why)
}

/// The bound a counter guard at node `guard` gives the cycle `set`.
fn counted(
    spec: &GraphSpec,
    topo: &Topology,
    set: &HashSet<usize>,
    guard: usize,
    counter: &str,
    bound: &str,
    plus: f64,
) -> Result<f64, String> {
    let field = spec
        .field(counter)
        .filter(|f| matches!(f.ty.get_ref(), FieldType::Int))
        .ok_or_else(|| format!("`{counter}` is not an int field"))?;
    if field.constant {
        return Err(format!("`{counter}` is a constant"));
    }
    let input = spec
        .graph
        .input
        .as_ref()
        .is_none_or(|i| i.get_ref().iter().any(|n| n.get_ref() == counter));
    if input {
        return Err(format!(
            "`{counter}` may be set by a run's input (list the inputs in `[graph] input` without it)"
        ));
    }
    let limit = bound_value(spec, bound)? + plus;
    let adds = field.reducer() == Reducer::Add;
    let mut start = field
        .default
        .as_ref()
        .and_then(|d| d.get_ref().as_f64())
        .unwrap_or(0.0);
    let mut step = f64::INFINITY;
    let mut steppers = HashSet::new();
    for (i, node) in spec.nodes.iter().enumerate() {
        if node.output_fields().iter().any(|f| f.get_ref() == counter) {
            return Err(format!(
                "node `{}` writes `{counter}` a value not known before the run",
                node.name.get_ref()
            ));
        }
        for (f, e) in &node.set {
            if f.get_ref() != counter {
                continue;
            }
            let e = e.get_ref().trim();
            let literal = e.parse::<i64>().ok().map(|n| n as f64);
            if set.contains(&i) {
                // A node skipped by `only_if` does not write its `set`.
                if node.only_if.is_some() {
                    return Err(format!(
                        "node `{}` steps `{counter}` but may be skipped (`only_if`)",
                        node.name.get_ref()
                    ));
                }
                let by = if adds { literal } else { increment(e, counter) };
                match by {
                    Some(by) if by >= 1.0 => {
                        step = step.min(by);
                        steppers.insert(i);
                    }
                    _ => {
                        return Err(format!(
                            "node `{}` sets `{counter}` to `{e}`, not one more than it was",
                            node.name.get_ref()
                        ));
                    }
                }
            } else if adds {
                // Outside the cycle an add can only raise it (a literal below 0 lowers).
                match literal {
                    Some(n) if n >= 0.0 => {}
                    _ => {
                        return Err(format!(
                            "node `{}` adds `{e}` to `{counter}`",
                            node.name.get_ref()
                        ));
                    }
                }
            } else {
                match literal {
                    Some(n) => start = start.min(n),
                    None => {
                        return Err(format!(
                            "node `{}` sets `{counter}` to `{e}`, not a number",
                            node.name.get_ref()
                        ));
                    }
                }
            }
        }
    }
    if steppers.is_empty() {
        return Err(format!("nothing in the loop steps `{counter}` up"));
    }
    let without = |left_out: &HashSet<usize>| acyclic(topo, set, left_out);
    if !without(&HashSet::from([guard])) {
        return Err(format!(
            "a cycle of the loop does not pass `{}`, where `{counter}` is checked",
            spec.nodes[guard].name.get_ref()
        ));
    }
    if !steps_every_cycle(topo, set, &steppers) {
        return Err(format!("a cycle of the loop does not step `{counter}` up"));
    }
    Ok(((limit - start) / step).ceil().max(0.0) + 1.0)
}

/// `x + c` or `c + x`: `c`.
fn increment(e: &str, counter: &str) -> Option<f64> {
    let (a, b) = e.split_once('+')?;
    let (a, b) = (a.trim(), b.trim());
    let n = if a == counter {
        b
    } else if b == counter {
        a
    } else {
        return None;
    };
    n.parse::<i64>().ok().map(|n| n as f64)
}

/// Whether every cycle of `set` takes a way out of a node of `steppers` that comes
/// after its `set` was written: a failure (`on_error`) or a timeout leaves a node
/// without its writes, so those ways do not step.
fn steps_every_cycle(topo: &Topology, set: &HashSet<usize>, steppers: &HashSet<usize>) -> bool {
    use crate::spec::EdgeKind;
    use crate::topology::LinkKind;
    use petgraph::visit::EdgeRef;
    let keep = |ix: NodeIndex| topo.node_of(ix).is_some_and(|i| set.contains(&i));
    let nodes = petgraph::visit::NodeFiltered::from_fn(&topo.graph, keep);
    let unstepped = petgraph::visit::EdgeFiltered::from_fn(&nodes, |e| {
        let from_stepper = topo
            .node_of(e.source())
            .is_some_and(|i| steppers.contains(&i));
        !from_stepper
            || matches!(
                e.weight().kind,
                LinkKind::Edge(EdgeKind::Error | EdgeKind::Timeout)
            )
    });
    !petgraph::algo::is_cyclic_directed(&unstepped)
}

/// Whether the nodes of `set` without `left_out` make no cycle.
fn acyclic(topo: &Topology, set: &HashSet<usize>, left_out: &HashSet<usize>) -> bool {
    let keep = |ix: NodeIndex| {
        topo.node_of(ix)
            .is_some_and(|i| set.contains(&i) && !left_out.contains(&i))
    };
    let graph = petgraph::visit::NodeFiltered::from_fn(&topo.graph, keep);
    !petgraph::algo::is_cyclic_directed(&graph)
}
