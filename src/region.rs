//! Parallel regions: a node with `next = ["a", "b"]` starts branches that run as
//! supersteps and meet at a join node, the first node every branch reaches. The
//! checker reports a region that is not one; compile records each fork's join.

use crate::spec::{END, GraphSpec, KindSpec, NodeKind, NodeSpec};
use std::collections::{BTreeSet, HashMap, VecDeque};

/// A fork's branches and where they meet.
#[derive(Debug)]
pub(crate) struct Region<'s> {
    pub join: &'s str,
    /// The nodes of each branch, from its first up to (not including) the join.
    pub branches: Vec<BTreeSet<&'s str>>,
}

/// Why branches do not form a region.
#[derive(Debug, PartialEq)]
pub(crate) enum RegionError {
    /// No node is reached by every branch (one of them ends the run instead).
    NoJoin,
    /// A node of one branch is also reached by another before the join.
    Shared { node: String },
    /// A branch's node leads past the region (to END or a node not before the join).
    Leaves { node: String, to: String },
    /// A branch's node of a kind that pauses or ends the run, or a fork of its own.
    Kind { node: String, why: &'static str },
}

/// The nodes `name` leads to, END left out.
fn successors<'s>(spec: &'s GraphSpec, name: &str) -> Vec<&'s str> {
    let Some(node) = spec.node(name) else {
        return Vec::new();
    };
    let mut out: Vec<&str> = node
        .edges()
        .into_iter()
        .map(|e| e.target.get_ref().as_str())
        .chain(node.on_error.iter().map(|t| t.get_ref().as_str()))
        .chain(match &node.body {
            KindSpec::Interrupt(i) => i.on_timeout.iter().map(|t| t.get_ref().as_str()).collect(),
            _ => Vec::new(),
        })
        // A target that is no node is reported by the name checks.
        .filter(|t| *t != END && spec.node(t).is_some())
        .collect();
    out.dedup();
    out
}

/// Breadth-first distances from `start`, not going on from `stop`.
fn distances<'s>(
    spec: &'s GraphSpec,
    start: &'s str,
    stop: Option<&str>,
) -> HashMap<&'s str, usize> {
    let mut seen = HashMap::from([(start, 0)]);
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        if Some(n) == stop {
            continue;
        }
        let d = seen[n];
        for s in successors(spec, n) {
            if !seen.contains_key(s) {
                seen.insert(s, d + 1);
                queue.push_back(s);
            }
        }
    }
    seen
}

/// The region `fork` starts, or why its branches do not make one.
pub(crate) fn region<'s>(
    spec: &'s GraphSpec,
    fork: &'s NodeSpec,
) -> Result<Region<'s>, RegionError> {
    region_of(spec, &fork.fork)
}

/// The region branches starting at `starts` make (a `next = [...]`, or a route case
/// that names several nodes).
pub(crate) fn region_of<'s>(
    spec: &'s GraphSpec,
    starts: &'s [crate::spec::Sp<String>],
) -> Result<Region<'s>, RegionError> {
    let starts: Vec<&str> = starts.iter().map(|s| s.get_ref().as_str()).collect();
    let reach: Vec<HashMap<&str, usize>> =
        starts.iter().map(|s| distances(spec, s, None)).collect();
    // The join: reached by every branch, nearest to the first (then the nearest to
    // the others, then by name, so the choice does not depend on hashing).
    let join = reach[0]
        .keys()
        .filter(|n| reach.iter().all(|r| r.contains_key(*n)) && !starts.contains(n))
        .min_by_key(|n| {
            (
                reach.iter().map(|r| r[*n]).max(),
                reach.iter().map(|r| r[*n]).sum::<usize>(),
                **n,
            )
        })
        .copied()
        .ok_or(RegionError::NoJoin)?;
    let mut branches: Vec<BTreeSet<&str>> = Vec::new();
    let mut owner: HashMap<&str, usize> = HashMap::new();
    for (i, start) in starts.iter().enumerate() {
        let nodes: BTreeSet<&str> = distances(spec, start, Some(join))
            .into_keys()
            .filter(|n| *n != join)
            .collect();
        for n in &nodes {
            if owner.insert(n, i).is_some() {
                return Err(RegionError::Shared {
                    node: n.to_string(),
                });
            }
            let node = spec.node(n).expect("reached nodes exist");
            let why = match node.kind.get_ref() {
                NodeKind::Finalize | NodeKind::Fail => {
                    Some("it ends the run, and the branches must meet")
                }
                _ if node.breakpoint.is_some() => {
                    Some("a breakpoint inside a branch is not supported yet")
                }
                _ if !node.fork.is_empty() => {
                    Some("branches inside branches are not supported yet")
                }
                // `run.error` is one per run: a branch's failure would be seen (and
                // cleared) by the other branches' nodes.
                _ if node.on_error.is_some() => {
                    Some("`on_error` inside a branch is not supported yet")
                }
                _ => None,
            };
            if let Some(why) = why {
                return Err(RegionError::Kind {
                    node: n.to_string(),
                    why,
                });
            }
            let leaves_to_end = node.edges().iter().any(|e| e.target.get_ref() == END)
                || node.on_error.as_ref().is_some_and(|t| t.get_ref() == END);
            if leaves_to_end {
                return Err(RegionError::Leaves {
                    node: n.to_string(),
                    to: END.to_string(),
                });
            }
        }
        branches.push(nodes);
    }
    // No edge from inside a branch to a node outside the region but the join.
    for nodes in &branches {
        for n in nodes {
            for s in successors(spec, n) {
                if s != join && !nodes.contains(s) {
                    return Err(RegionError::Leaves {
                        node: n.to_string(),
                        to: s.to_string(),
                    });
                }
            }
        }
    }
    Ok(Region { join, branches })
}
