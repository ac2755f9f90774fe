//! The worst case of a whole run, measure by measure: the costliest way through the
//! graph, where a route takes one of its ways, a fork all of its branches, and a loop
//! goes round as often as its bound lets it; and, where the graph has `max_steps`,
//! that many steps of its costliest node, whichever bound is tighter.

use super::loops::Loops;
use super::{Amount, Costs};
use crate::spec::{EdgeKind, GraphSpec};
use std::collections::HashMap;
use std::rc::Rc;

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
        memo: vec![None; loops.comps.len()],
    };
    // Components come downstream first: each one's ways on are worked out before it,
    // so no walk goes deeper than a step (a chain of any length, no recursion).
    for comp in 0..loops.comps.len() {
        walk.from(comp);
    }
    let mut path: Path = None;
    let mut amount = Amount::ZERO;
    if let Some(entry) = spec
        .graph
        .entry
        .as_ref()
        .and_then(|e| spec.node_index(e.get_ref()))
    {
        (amount, path) = walk.from(loops.comp_of[entry]);
    }
    let mut shown = render(&path);
    if spec.has_limits()
        && let Some(target) = spec
            .graph
            .on_limit
            .as_ref()
            .and_then(|t| spec.node_index(t.get_ref()))
    {
        let (a, p) = walk.from(loops.comp_of[target]);
        amount = amount.plus(&a);
        if let Some(last) = shown.last_mut() {
            last.push(';');
        }
        shown.push("at a limit:".into());
        shown.extend(render(&p));
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
        path: shown.join(" "),
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

/// A way through the graph, shared by the ways that go on from it: each component's
/// is made once, in front of the one it goes on to.
type Path = Option<Rc<Link>>;

#[derive(Debug)]
struct Link {
    words: Vec<String>,
    next: Path,
}

fn link(words: Vec<String>, next: Path) -> Path {
    Some(Rc::new(Link { words, next }))
}

/// Names joined with commas, a long list by its ends.
pub(super) fn listed(names: &[&str]) -> String {
    if names.len() <= 12 {
        return names.join(", ");
    }
    format!(
        "{}, ... {} more ..., {}",
        names[..8].join(", "),
        names.len() - 10,
        names[names.len() - 2..].join(", ")
    )
}

/// A long list is let go link by link: dropped whole, each link would drop the next
/// inside its own drop, as deep as the graph is long.
impl Drop for Link {
    fn drop(&mut self) {
        let mut next = self.next.take();
        while let Some(rc) = next {
            match Rc::try_unwrap(rc) {
                Ok(mut l) => next = l.next.take(),
                Err(_) => break,
            }
        }
    }
}

/// The way's words, a long one shortened in its middle (a chain of 80,000 nodes is
/// read by its ends).
fn render(path: &Path) -> Vec<String> {
    const HEAD: usize = 20;
    const TAIL: usize = 6;
    let mut out = Vec::new();
    let mut at = path.as_deref();
    while let Some(l) = at {
        out.extend(l.words.iter().cloned());
        at = l.next.as_deref();
    }
    if out.len() <= HEAD + TAIL + 2 {
        return out;
    }
    let hidden = out[HEAD..out.len() - TAIL]
        .iter()
        .filter(|w| *w != "->")
        .count();
    let mut short: Vec<String> = out[..HEAD].to_vec();
    short.push(format!("... {hidden} more ..."));
    short.extend(out[out.len() - TAIL..].iter().cloned());
    short
}

struct Walk<'a> {
    spec: &'a GraphSpec,
    loops: &'a Loops,
    units: &'a [Costs],
    m: usize,
    memo: Vec<Option<(Amount, Path)>>,
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
        Some(self.loops.comp_of[self.spec.node_index(name)?])
    }

    /// The costliest way from component `comp` to the run's end.
    fn from(&mut self, comp: usize) -> (Amount, Path) {
        if let Some(done) = &self.memo[comp] {
            return done.clone();
        }
        let c = &self.loops.comps[comp];
        let result = if c.cyclic {
            let members = c.members.clone();
            let mut best: Option<(Amount, Path)> = None;
            for &i in &members {
                for next in self.ways(i, Some(comp)) {
                    if best.as_ref().is_none_or(|b| next.0.is_more_than(&b.0)) {
                        best = Some(next);
                    }
                }
            }
            let (after, rest) = best.unwrap_or((Amount::ZERO, None));
            let names: Vec<&str> = members.iter().map(|&i| self.name(i)).collect();
            let times = match &c.times {
                Amount::At(n) => format!("{n}"),
                Amount::Unbounded(_) => "?".into(),
            };
            let mut words = vec![format!("({}) x {times}", listed(&names))];
            if rest.is_some() {
                words.push("->".into());
            }
            (self.own(comp).plus(&after), link(words, rest))
        } else {
            let i = c.members[0];
            self.node(i)
        };
        self.memo[comp] = Some(result.clone());
        result
    }

    /// A node outside any loop: its cost and the costliest of its ways on.
    fn node(&mut self, i: usize) -> (Amount, Path) {
        let own = self.units[i][self.m].clone();
        let (after, rest) = self
            .ways(i, None)
            .into_iter()
            .reduce(|a, b| if b.0.is_more_than(&a.0) { b } else { a })
            .unwrap_or((Amount::ZERO, None));
        let mut words = vec![self.name(i).to_string()];
        if rest.is_some() {
            words.push("->".into());
        }
        (own.plus(&after), link(words, rest))
    }

    /// Each way a run may go on from node `i` (leaving component `inside`, when
    /// given), with what it costs from there: a fork's branches together (a `next`
    /// list, or a route case that names several nodes), any other edge on its own.
    fn ways(&mut self, i: usize, inside: Option<usize>) -> Vec<(Amount, Path)> {
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
                None => ways.push((Amount::ZERO, None)),
            }
        }
        ways
    }

    /// Parallel branches from `starts`: every branch's nodes, then on from the join.
    fn region(&mut self, starts: &[crate::spec::Sp<String>]) -> (Amount, Path) {
        let Ok(region) = crate::region::region_of(self.spec, starts) else {
            return (
                Amount::unbounded("parallel branches that do not meet"),
                None,
            );
        };
        let mut sum = Amount::ZERO;
        let mut shown = Vec::new();
        for branch in &region.branches {
            let mut names = Vec::new();
            for name in branch {
                let Some(i) = self.spec.node_index(name) else {
                    continue;
                };
                sum = sum.plus(&self.units[i][self.m].times(self.loops.times(i)));
                names.push(*name);
            }
            shown.push(names.join(", "));
        }
        let (after, rest) = match self.comp_named(region.join) {
            Some(c) => self.from(c),
            None => (Amount::ZERO, None),
        };
        let mut words = vec![format!("[{}]", shown.join(" | "))];
        if rest.is_some() {
            words.push("->".into());
        }
        (sum.plus(&after), link(words, rest))
    }
}
