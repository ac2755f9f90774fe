//! Parallel branches (`next = ["a", "b"]`): the branches run as supersteps until every
//! one reaches the join. In a superstep each branch's node does its work on the state
//! as the superstep found it, all at once; then their steps are applied one after the
//! other in declaration order, each through the reducers with its `set` and route, each
//! its own record. Timing decides nothing: the state, the history and the events are
//! the same whichever node finished first. Every record inside the branches names
//! every branch's next node and the join (`a2,b1;join`), so a stop or a crash resumes
//! the branches where they stood.

use super::cursor::{Flow, Live, Work};
use super::event::Event;
use super::kinds::Step;
use super::outcome::RunError;
use super::runner::Runner;
use super::step::pending;
use crate::graph::{NodeId, Target};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::unbounded_channel;

impl Runner {
    /// Runs the branches of `live.frontier` to the join: `Flow::Next(join)` when all are
    /// there, or how the run ended or paused on the way.
    pub(super) async fn run_branches(&self, live: &mut Live) -> Result<Flow, RunError> {
        loop {
            let Some(frontier) = live.frontier.clone() else {
                return Err(RunError::Node {
                    node: "?".into(),
                    message: "parallel branches without a frontier".into(),
                });
            };
            if frontier.done() {
                live.frontier = None;
                return Ok(Flow::Next(Target::Node(frontier.join)));
            }
            if self.stop.take() {
                // The record names every branch's next node: a resume goes on there.
                let next = frontier.text(&self.graph);
                return Ok(Flow::Return(self.stopped(live, None, next).await?));
            }
            if !live.limited
                && let Some(limit) = self.limit_reached(live)
            {
                // The branches are left where they are, for `on_limit`.
                live.limited = true;
                live.frontier = None;
                let to = self.graph.limits.on_limit;
                self.events.emit(|| Event::LimitReached {
                    limit: limit.into(),
                    to: to.map(|t| Arc::from(self.graph.target_name(t))),
                });
                return match to {
                    Some(t @ Target::Node(_)) => Ok(Flow::Next(t)),
                    _ => self
                        .finish(live, None, "limit".into(), None)
                        .await
                        .map(Flow::Return),
                };
            }
            let active: Vec<(usize, NodeId)> = frontier
                .cursors
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.map(|n| (i, n)))
                .collect();
            // As `drive` does between nodes: whoever follows the events (and a Ctrl-C
            // handler) gets to run between supersteps.
            if self.events.is_on() {
                tokio::task::yield_now().await;
            } else {
                tokio::task::coop::consume_budget().await;
            }
            // Each node counts as a step, numbered in declaration order.
            let base = live.step;
            let start = self.events.is_on().then(Instant::now);
            let works = {
                let live: &Live = live;
                let runs = active.iter().enumerate().map(|(k, &(_, id))| {
                    let mut run = live.run_info(self.max_steps());
                    run.step = base + k as u64 + 1;
                    // Each node's events wait in a channel of their own, passed on in
                    // declaration order.
                    let (tx, rx) = if self.events.is_on() {
                        let (tx, rx) = unbounded_channel();
                        (Some(tx), Some(rx))
                    } else {
                        (None, None)
                    };
                    async move { (self.work(live, id, run, &tx).await, rx) }
                });
                futures_util::future::join_all(runs).await
            };
            // A resumed elicitation's answer went to its branch's node.
            live.answer = None;
            // An interrupt waits until the other branches' steps are applied: their work
            // is done, and a pause must not make them do it again. The first in
            // declaration order pauses the run; the others ask again, one at a time,
            // in the supersteps after it is answered.
            let mut pauses = Vec::new();
            let count = active.len() as u64;
            for (k, ((i, id), (work, rx))) in active.into_iter().zip(works).enumerate() {
                if let (Some(tx), Some(mut rx)) = (self.events.sender(), rx) {
                    while let Ok(e) = rx.try_recv() {
                        let _ = tx.send(e);
                    }
                }
                if let Work::Step(Step::Pause { payload }) = work {
                    pauses.push((i, id, payload));
                    continue;
                }
                live.step = base + k as u64 + 1;
                live.branch = Some(i);
                let flow = self.finish_work(live, id, work, start).await;
                live.branch = None;
                match flow {
                    Ok(Flow::Next(_)) => {}
                    Ok(Flow::Return(outcome)) => {
                        live.frontier = None;
                        return Ok(Flow::Return(outcome));
                    }
                    // The checker refuses forks inside branches; a graph edited since
                    // the thread stopped (`--force`) can still name one.
                    Ok(Flow::Fork) => {
                        live.frontier = None;
                        return Err(RunError::GraphChanged {
                            thread: live.thread.to_string(),
                            why: format!(
                                "`{}` inside parallel branches now forks",
                                self.graph.node(id).name
                            ),
                        });
                    }
                    Err(e) => {
                        live.frontier = None;
                        return Err(e);
                    }
                }
            }
            if !pauses.is_empty() {
                // The run pauses at the interrupts, every one listed (the first in
                // declaration order, the others with it); their branches stay there,
                // the others where their steps took them (the record names them all).
                live.step = base + count;
                let mut pauses = pauses.into_iter();
                let (i, id, payload) = pauses.next().expect("not empty");
                let others = pauses
                    .map(|(_, id, payload)| pending(live, self.graph.node(id), &payload, None))
                    .collect();
                live.branch = Some(i);
                let node = self.graph.node(id);
                let paused = self
                    .pause_with(live, node, payload, None, Target::Node(id), others)
                    .await;
                live.branch = None;
                return paused.map(Flow::Return);
            }
        }
    }
}
