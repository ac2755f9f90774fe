//! Route coverage: the nodes and routes a graph declares (read from the spec, as the
//! checker and the drawings read them) against those its cases' runs took.

use super::check::Route;
use super::run::Actual;
use crate::spec::GraphSpec;
use std::collections::HashSet;

/// What a graph's cases exercised, and what they never did.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    pub nodes: usize,
    pub routes: usize,
    pub missed_nodes: Vec<String>,
    pub missed_routes: Vec<Route>,
}

impl Coverage {
    pub(crate) fn of(spec: &GraphSpec, runs: &[&Actual]) -> Coverage {
        let ran: HashSet<&str> = runs
            .iter()
            .flat_map(|a| a.path.iter().map(String::as_str))
            .collect();
        let taken: HashSet<&Route> = runs.iter().flat_map(|a| a.routes.iter()).collect();
        let declared = declared_routes(spec);
        let missed_nodes = spec
            .nodes
            .iter()
            .map(|n| n.name.get_ref())
            .filter(|n| !ran.contains(n.as_str()))
            .cloned()
            .collect();
        let missed_routes = declared
            .iter()
            .filter(|r| {
                // A declared edge without a case (`next`) is taken whatever case
                // the route that took it names.
                !taken.iter().any(|t| {
                    t.from == r.from && t.to == r.to && (r.case.is_none() || t.case == r.case)
                })
            })
            .cloned()
            .collect();
        Coverage {
            nodes: spec.nodes.len(),
            routes: declared.len(),
            missed_nodes,
            missed_routes,
        }
    }

    /// `nodes 9 of 10, routes 10 of 12`, then what was never taken.
    pub fn render(&self) -> String {
        let mut s = format!(
            "  nodes  {} of {}",
            self.nodes - self.missed_nodes.len(),
            self.nodes
        );
        if !self.missed_nodes.is_empty() {
            s.push_str(&format!("; never ran: {}", self.missed_nodes.join(", ")));
        }
        s.push_str(&format!(
            "\n  routes {} of {}",
            self.routes - self.missed_routes.len(),
            self.routes
        ));
        if !self.missed_routes.is_empty() {
            s.push_str("; never taken:");
            for r in &self.missed_routes {
                s.push_str(&format!("\n    {r}"));
            }
        }
        s
    }
}

/// Every route the graph declares: each node's edges (a finalize node's, never taken,
/// left out), with the case that names each.
fn declared_routes(spec: &GraphSpec) -> Vec<Route> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for node in &spec.nodes {
        if node.kind.get_ref().ends_run() {
            continue;
        }
        for e in node.edges() {
            let to = e.target.get_ref();
            let r = Route {
                from: node.name.get_ref().clone(),
                to: to.clone(),
                case: e.label,
            };
            if seen.insert(r.clone()) {
                out.push(r);
            }
        }
    }
    out
}
