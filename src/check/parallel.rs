//! `next = ["a", "b"]`: the branches run together and meet at a join node. They must
//! meet (no branch may end the run or leave for elsewhere), not share a node, and two
//! branches may not both write a `replace` field: which write stands would depend on
//! nothing a reader of the graph can see.

use super::{Cx, DiagExt};
use crate::region::{RegionError, region_of};
use crate::spec::{NodeSpec, Reducer};

pub(super) fn check(cx: &mut Cx<'_>) {
    let spec = cx.spec;
    // Where branches start: a `next = [...]`, or a route case that names several nodes.
    let sites = spec.nodes.iter().flat_map(|n| {
        let own = (!n.fork.is_empty()).then_some((n, n.fork.as_slice(), false));
        let routed = n.route.iter().flat_map(move |r| {
            r.case_forks
                .iter()
                .map(move |(_, t)| (n, t.as_slice(), true))
        });
        own.into_iter().chain(routed)
    });
    for (fork, starts, routed) in sites {
        let f = fork.name.get_ref();
        if starts.is_empty() {
            continue;
        }
        let span = starts[0].span().start..starts[starts.len() - 1].span().end;
        if starts.len() < 2 {
            cx.error("fork", span, format!("`{f}` forks into one branch"))
                .with_label("a fork needs two branches or more")
                .with_help("write `next = \"<node>\"` for one");
            continue;
        }
        if starts.iter().any(|b| b.get_ref() == crate::spec::END) {
            cx.error("fork", span, format!("a branch of `{f}` is `END`"))
                .with_label("every branch must reach the join")
                .with_help("name nodes only; the run ends after the join");
            continue;
        }
        // A fork node's own pause or pseudo-tool route would skip its branches.
        let why = if fork.breakpoint.is_some() {
            Some("a breakpoint on a fork node is not supported yet")
        } else if matches!(&fork.body, crate::spec::KindSpec::Llm(l) if !l.pseudo_tools.is_empty())
        {
            Some("a pseudo tool would route past the branches")
        } else {
            None
        };
        if let Some(why) = why {
            cx.error("fork", span, format!("`{f}` cannot fork"))
                .with_label(why)
                .with_help("fork from a node of its own, after this one");
            continue;
        }
        // Unknown branch nodes are reported by the name checks, a fork beside another
        // way on by the edge checks.
        if starts.iter().any(|b| spec.node(b.get_ref()).is_none())
            || (!routed && (fork.next.is_some() || fork.route.is_some()))
        {
            continue;
        }
        let region = match region_of(spec, starts) {
            Ok(r) => r,
            Err(e) => {
                let (message, label, help) = match e {
                    RegionError::NoJoin => (
                        format!("the branches of `{f}` never meet"),
                        "no node is reached by every branch".to_string(),
                        "lead every branch to one node, where the run goes on when all are done"
                            .to_string(),
                    ),
                    RegionError::Shared { node } => (
                        format!("node `{node}` belongs to two branches of `{f}`"),
                        format!("`{node}` is reached from two branches before they meet"),
                        "give each branch its own nodes up to the join".to_string(),
                    ),
                    RegionError::Leaves { node, to } => (
                        format!("node `{node}` leaves the branches of `{f}` for `{to}`"),
                        "a branch may only lead on to its own nodes or the join".to_string(),
                        "let the branches meet first, and go on from the join".to_string(),
                    ),
                    RegionError::Kind { node, why } => (
                        format!("node `{node}` cannot be inside a branch of `{f}`"),
                        why.to_string(),
                        "move it after the join".to_string(),
                    ),
                };
                cx.error("fork", span, message)
                    .with_label(label)
                    .with_help(help);
                continue;
            }
        };
        // Two branches writing one replace field: the later in declaration order would
        // win, which nothing in the file shows.
        let writes = |names: &std::collections::BTreeSet<&str>| -> Vec<(String, String)> {
            let mut out = Vec::new();
            for n in names {
                let Some(node) = spec.node(n) else { continue };
                for field in written(node) {
                    if spec
                        .field(&field)
                        .is_some_and(|f| f.reducer() == Reducer::Replace)
                    {
                        out.push((field, n.to_string()));
                    }
                }
            }
            out
        };
        let per_branch: Vec<_> = region.branches.iter().map(writes).collect();
        'pairs: for i in 0..per_branch.len() {
            for j in i + 1..per_branch.len() {
                for (field, a) in &per_branch[i] {
                    if let Some((_, b)) = per_branch[j].iter().find(|(g, _)| g == field) {
                        cx.error(
                            "parallel-write",
                            span.clone(),
                            format!(
                                "`{a}` and `{b}` may run together and both write `{field}`"
                            ),
                        )
                        .with_label(format!(
                            "branches of `{f}`: which write of `{field}` stands would depend on their order"
                        ))
                        .with_help(format!(
                            "give `{field}` a reducer that combines writes (`append`, `merge`, `add`), or let one branch write another field"
                        ));
                        break 'pairs;
                    }
                }
            }
        }
    }
}

/// The fields a node writes: its kind's outputs and its `set`.
fn written(node: &NodeSpec) -> Vec<String> {
    node.output_fields()
        .into_iter()
        .map(|f| f.get_ref().clone())
        .chain(node.set.iter().map(|(f, _)| f.get_ref().clone()))
        .collect()
}
