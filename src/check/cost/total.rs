//! The worst case of a whole run, measure by measure: the costliest way through the
//! graph, where a route takes one of its ways, a fork all of its branches, and a loop
//! goes round as often as its bound lets it; and, where the graph has `max_steps`,
//! that many steps of its costliest node, whichever bound is tighter.

use super::loops::Loops;
use super::{Amount, Costs};
use crate::spec::{EdgeKind, GraphSpec};
use std::collections::HashMap;

/// A measure's worst case, the way through the graph that reaches it, and the loop
/// that weighs most in it (for a budget it breaks).
pub(super) struct Worst {
    pub amount: Amount,
    pub path: String,
    pub heaviest: Option<usize>,
    /// The bound is `max_steps`' rather than the graph's shape.
    pub by_steps: bool,
}

pub(super) fn worst(spec: &GraphSpec, loops: &Loops, units: &[Costs], m: usize) -> Worst {
    let mut walk = Walk {
        spec,
        loops,
        units,
        m,
        memo: HashMap::new(),
    };
    let by_name = |name: &str| spec.nodes.iter().position(|n| n.name.get_ref() == name);
    let mut path = Vec::new();
    let mut amount = Amount::ZERO;
    if let Some(entry) = spec.graph.entry.as_ref().and_then(|e| by_name(e.get_ref())) {
        let (a, p) = walk.from(loops.comp_of[entry]);
        amount = a;
        path = p;
    }
    if spec.has_limits()
        && let Some(target) = spec
            .graph
            .on_limit
            .as_ref()
            .and_then(|t| by_name(t.get_ref()))
    {
        let (a, p) = walk.from(loops.comp_of[target]);
        amount = amount.plus(&a);
        if let Some(last) = path.last_mut() {
            last.push(';');
        }
        path.push("at a limit:".into());
        path.extend(p);
    }
    let heaviest = loops
        .comps
        .iter()
        .enumerate()
        .filter(|(_, c)| c.cyclic)
        .map(|(i, c)| (i, walk.own(i).value().unwrap_or(f64::INFINITY), c))
        .filter(|(_, w, _)| *w > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, ..)| i);
    let structural = Worst {
        amount,
        path: path.join(" "),
        heaviest,
        by_steps: false,
    };
    match by_steps(spec, units, m) {
        Some((steps, costliest, each)) => {
            let at_steps = each.times(&Amount::At(steps as f64));
            if at_steps.value().is_some()
                && !at_steps.is_more_than(&structural.amount)
                && at_steps != structural.amount
            {
                Worst {
                    amount: at_steps,
                    path: format!(
                        "{steps} steps (`max_steps` and what may follow it), each at most a run of `{}`",
                        spec.nodes[costliest].name.get_ref()
                    ),
                    heaviest: None,
                    by_steps: true,
                }
            } else {
                structural
            }
        }
        None => structural,
    }
}

/// The most node runs `max_steps` allows, with the costliest node and its cost.
fn by_steps(spec: &GraphSpec, units: &[Costs], m: usize) -> Option<(u64, usize, Amount)> {
    let max_steps = *spec.graph.max_steps.as_ref()?.get_ref();
    // A superstep may pass the limit by its other branches; `on_limit` then has as many
    // steps as the graph has nodes to end the run.
    let branches = spec
        .nodes
        .iter()
        .map(|n| {
            let cases = n.route.as_ref().map_or(0, |r| {
                r.case_forks.iter().map(|(_, t)| t.len()).max().unwrap_or(0)
            });
            n.fork.len().max(cases)
        })
        .max()
        .unwrap_or(0)
        .max(1) as u64;
    let grace = if spec.graph.on_limit.is_some() {
        spec.nodes.len() as u64
    } else {
        0
    };
    let steps = max_steps + (branches - 1) + grace;
    let (costliest, each) = units
        .iter()
        .enumerate()
        .map(|(i, u)| (i, u[m].clone()))
        .reduce(|a, b| if b.1.is_more_than(&a.1) { b } else { a })?;
    Some((steps, costliest, each))
}

struct Walk<'a> {
    spec: &'a GraphSpec,
    loops: &'a Loops,
    units: &'a [Costs],
    m: usize,
    memo: HashMap<usize, (Amount, Vec<String>)>,
}

impl Walk<'_> {
    /// What a component's nodes cost on one visit of it.
    fn own(&self, comp: usize) -> Amount {
        let c = &self.loops.comps[comp];
        let sum = c
            .members
            .iter()
            .fold(Amount::ZERO, |acc, &i| acc.plus(&self.units[i][self.m]));
        sum.times(&c.times)
    }

    fn name(&self, i: usize) -> &str {
        self.spec.nodes[i].name.get_ref()
    }

    fn comp_named(&self, name: &str) -> Option<usize> {
        let i = self
            .spec
            .nodes
            .iter()
            .position(|n| n.name.get_ref() == name)?;
        Some(self.loops.comp_of[i])
    }

    /// The costliest way from component `comp` to the run's end.
    fn from(&mut self, comp: usize) -> (Amount, Vec<String>) {
        if let Some(done) = self.memo.get(&comp) {
            return done.clone();
        }
        let c = &self.loops.comps[comp];
        let result = if c.cyclic {
            let members = c.members.clone();
            let mut best = (Amount::ZERO, Vec::new());
            for &i in &members {
                for next in self.ways(i, Some(comp)) {
                    if next.0.is_more_than(&best.0) || best.1.is_empty() {
                        best = next;
                    }
                }
            }
            let names: Vec<&str> = members.iter().map(|&i| self.name(i)).collect();
            let times = match &c.times {
                Amount::At(n) => format!("{n}"),
                Amount::Unbounded(_) => "?".into(),
            };
            let mut path = vec![format!("({}) x {times}", names.join(", "))];
            if !best.1.is_empty() {
                path.push("->".into());
            }
            path.extend(best.1);
            (self.own(comp).plus(&best.0), path)
        } else {
            let i = c.members[0];
            self.node(i)
        };
        self.memo.insert(comp, result.clone());
        result
    }

    /// A node outside any loop: its cost and the costliest of its ways on.
    fn node(&mut self, i: usize) -> (Amount, Vec<String>) {
        let own = self.units[i][self.m].clone();
        let best = self
            .ways(i, None)
            .into_iter()
            .reduce(|a, b| if b.0.is_more_than(&a.0) { b } else { a })
            .unwrap_or((Amount::ZERO, Vec::new()));
        let mut path = vec![self.name(i).to_string()];
        if !best.1.is_empty() {
            path.push("->".into());
        }
        path.extend(best.1);
        (own.plus(&best.0), path)
    }

    /// Each way a run may go on from node `i` (leaving component `inside`, when
    /// given), with what it costs from there: a fork's branches together (a `next`
    /// list, or a route case that names several nodes), any other edge on its own.
    fn ways(&mut self, i: usize, inside: Option<usize>) -> Vec<(Amount, Vec<String>)> {
        let node = &self.spec.nodes[i];
        if node.kind.get_ref().ends_run() && !node.kind_unknown {
            return Vec::new();
        }
        let forks: HashMap<&str, &Vec<crate::spec::Sp<String>>> = node
            .route
            .as_ref()
            .map(|r| {
                r.case_forks
                    .iter()
                    .map(|(c, t)| (c.get_ref().as_str(), t))
                    .collect()
            })
            .unwrap_or_default();
        let leaves =
            |w: &Self, target: &str| w.comp_named(target).is_none_or(|c| Some(c) != inside);
        let mut ways = Vec::new();
        if !node.fork.is_empty() && node.fork.iter().any(|t| leaves(self, t.get_ref())) {
            ways.push(self.region(&node.fork));
        }
        for e in node.edges() {
            if matches!(e.kind, EdgeKind::Branch) {
                continue;
            }
            let fork_case = e
                .label
                .as_deref()
                .and_then(|l| forks.get(l))
                .filter(|_| e.kind == EdgeKind::Case);
            if let Some(targets) = fork_case {
                if targets.iter().any(|t| leaves(self, t.get_ref())) {
                    ways.push(self.region(targets));
                }
                continue;
            }
            if !leaves(self, e.target.get_ref()) {
                continue;
            }
            match self.comp_named(e.target.get_ref()) {
                Some(to) => ways.push(self.from(to)),
                None => ways.push((Amount::ZERO, Vec::new())),
            }
        }
        ways
    }

    /// Parallel branches from `starts`: every branch's nodes, then on from the join.
    fn region(&mut self, starts: &[crate::spec::Sp<String>]) -> (Amount, Vec<String>) {
        let Ok(region) = crate::region::region_of(self.spec, starts) else {
            return (
                Amount::unbounded("parallel branches that do not meet"),
                Vec::new(),
            );
        };
        let mut sum = Amount::ZERO;
        let mut shown = Vec::new();
        for branch in &region.branches {
            let mut names = Vec::new();
            for name in branch {
                let Some(i) = self
                    .spec
                    .nodes
                    .iter()
                    .position(|n| n.name.get_ref() == *name)
                else {
                    continue;
                };
                sum = sum.plus(&self.units[i][self.m].times(self.loops.times(i)));
                names.push(*name);
            }
            shown.push(names.join(", "));
        }
        let join = region.join.to_string();
        let after = match self.comp_named(&join) {
            Some(c) => self.from(c),
            None => (Amount::ZERO, Vec::new()),
        };
        let mut path = vec![format!("[{}]", shown.join(" | ")), "->".into()];
        path.extend(after.1);
        (sum.plus(&after.0), path)
    }
}
