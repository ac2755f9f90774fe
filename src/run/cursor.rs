//! Where a run stands as the runner drives it: the thread's cursor ([`Live`]), what a
//! node's work came to ([`Work`]), where the loop goes next ([`Flow`], [`Routed`]) and,
//! inside parallel branches, where each branch is ([`Frontier`]). Plain data: the
//! loop and what acts on a step (runner, step, apply, recorder, plan, parallel) read
//! and move it; it imports only the data it holds (the state, a kind's step, `run`).

use super::kinds::Step;
use super::outcome::Outcome;
use super::scope::RunInfo;
use super::state::{State, Undo};
use crate::graph::{Graph, NodeId, Target};
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A thread being driven.
#[derive(Clone)]
pub(super) struct Live {
    pub(super) thread: Arc<str>,
    /// The number of the next record.
    pub(super) seq: u64,
    /// The record the next record follows: the one before it, or where the run forked
    /// the thread.
    pub(super) parent: Option<u64>,
    pub(super) run: u64,
    pub(super) step: u64,
    pub(super) state: State,
    pub(super) tokens: u64,
    /// Model replies, tool calls and dollars of this run (for `[budget]`): shared by
    /// the nodes that run at once.
    pub(super) meter: Arc<super::meter::Meter>,
    /// Wall time of this run before the current segment (earlier segments were paused).
    pub(super) elapsed_before: Duration,
    pub(super) started: Instant,
    /// The wall clock (Unix milliseconds) at an instant: a record's time comes from the
    /// clock read for its elapsed time, one read per step instead of two. Read again
    /// every 64 records, so a clock step or a suspended machine is caught up soon.
    pub(super) wall: (Instant, u64),
    /// A limit was reached and the run is on its way to `on_limit`.
    pub(super) limited: bool,
    /// `run.error` as expressions see it: set when a failure takes `on_error`, seen by
    /// the node the run goes to, cleared when that node completes.
    pub(super) error: Arc<Json>,
    /// The node whose `before` breakpoint was just answered: it runs without pausing again.
    pub(super) past_breakpoint: Option<NodeId>,
    /// The answer to what a node's MCP server asked (elicitation), for that node's run
    /// again on resume.
    pub(super) answer: Option<(NodeId, Arc<Json>)>,
    /// How to take back the writes of the node being applied (see `apply`).
    pub(super) undo: Vec<Undo>,
    /// Inside parallel branches: where each branch is, and where they meet.
    pub(super) frontier: Option<Frontier>,
    /// The branch whose node is being completed, inside parallel branches.
    pub(super) branch: Option<usize>,
}

impl Live {
    pub(super) fn elapsed(&self) -> Duration {
        self.elapsed_before + self.started.elapsed()
    }

    /// `run` as expressions see it, with the run's step limit.
    #[inline]
    pub(super) fn run_info(&self, max_steps: Option<u64>) -> RunInfo {
        RunInfo {
            thread: self.thread.clone(),
            run: self.run,
            step: self.step,
            max_steps,
            tokens: self.tokens,
            elapsed_before: self.elapsed_before,
            started: self.started,
            error: self.error.clone(),
        }
    }

    /// Inside parallel branches: the branch being completed goes on to `to`, or waits
    /// at the join.
    #[inline]
    pub(super) fn advance(&mut self, to: Target) {
        if let (Some(f), Some(i)) = (&mut self.frontier, self.branch) {
            f.cursors[i] = match to {
                Target::Node(n) if n != f.join => Some(n),
                _ => None,
            };
        }
    }

    /// Starts parallel branches at `branches`, to meet at `join`.
    pub(super) fn start_branches(&mut self, branches: &[Target], join: NodeId) {
        self.frontier = Some(Frontier {
            cursors: branches
                .iter()
                .map(|t| match t {
                    Target::Node(n) => Some(*n),
                    Target::End => None,
                })
                .collect(),
            join,
        });
    }
}

/// What a node's own work came to, before anything is written.
pub(super) enum Work {
    /// Its `only_if` was false: it does nothing and follows its edges.
    Skipped,
    Step(Step),
}

/// Where a node's edges lead, and the name of the case that chose it.
pub(super) type Routed = (Target, Option<String>);

/// Where the loop goes after a step.
pub(super) enum Flow {
    Next(Target),
    Return(Outcome),
    /// The node forked: the branches are in the thread's frontier.
    Fork,
}

/// Where each parallel branch is (none: it reached the join), and where they meet.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Frontier {
    pub(super) cursors: Vec<Option<NodeId>>,
    pub(super) join: NodeId,
}

impl Frontier {
    /// As a record's `next`: the branches' next nodes, then `;` and the join.
    pub(super) fn text(&self, graph: &Graph) -> Arc<str> {
        let at: Vec<&str> = self
            .cursors
            .iter()
            .flatten()
            .map(|n| &*graph.node(*n).name)
            .collect();
        Arc::from(format!("{};{}", at.join(","), graph.node(self.join).name))
    }

    /// A record's `next` that names branches, read back; none for a single node.
    pub(super) fn parse(text: &str, graph: &Graph) -> Option<Result<Frontier, String>> {
        let (at, join) = text.split_once(';')?;
        let node = |n: &str| graph.node_id(n).ok_or_else(|| n.to_string());
        Some((|| {
            Ok(Frontier {
                cursors: at
                    .split(',')
                    .filter(|n| !n.is_empty())
                    .map(|n| node(n).map(Some))
                    .collect::<Result<_, _>>()?,
                join: node(join)?,
            })
        })())
    }

    pub(super) fn done(&self) -> bool {
        self.cursors.iter().all(Option::is_none)
    }
}

/// The wall clock in Unix milliseconds.
pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
