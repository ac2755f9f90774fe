//! `kind = "graph"`: a node that runs another graph file to its end on a thread of its
//! own, `<thread>/<node>`, in the same store: the child's checkpoints are that thread's
//! history, its events come wrapped in `subgraph` events naming the node. An interrupt
//! inside the child pauses the parent at the node; the parent's resume answers the
//! child. A stop asked of the parent stops the child too, and the node runs again on
//! resume, which resumes the child where it stood.

use super::event::Event;
use super::go::Go;
use super::kinds::Step;
use super::kinds::cx::NodeCx;
use super::outcome::{Outcome, RunError};
use super::runner::Runner;
use crate::graph::GraphBody;
use crate::store::Status;
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use tokio::sync::mpsc::unbounded_channel;

/// A child run, behind a trait object (see `follow`).
#[async_trait::async_trait]
trait ChildRun: Send + Sync {
    async fn go(&self, thread: &str, go: Go) -> Result<Outcome, RunError>;
}

#[async_trait::async_trait]
impl ChildRun for Runner {
    async fn go(&self, thread: &str, go: Go) -> Result<Outcome, RunError> {
        self.run(thread, go).await
    }
}

impl Runner {
    /// The child's thread of node `node` of parent thread `thread`.
    pub(super) fn child_thread(thread: &str, node: &str) -> String {
        format!("{thread}/{node}")
    }

    /// A runner for the child graph: this run's store, clients and stop, and the
    /// values of this run's configuration that the child's `[configurable]` names too
    /// (one configuration for the run and the graphs it calls).
    fn child_runner(&self, body: &GraphBody) -> Runner {
        self.child_runner_counting(body, None)
    }

    /// [`Self::child_runner`] whose model replies and tool calls also count towards
    /// this run's `[budget]` (`meter`).
    fn child_runner_counting(
        &self,
        body: &GraphBody,
        meter: Option<&Arc<super::meter::Meter>>,
    ) -> Runner {
        let (llm, tools) = match meter {
            Some(m) => {
                super::meter::metered(&self.llm, &self.tools, m, &self.graph.limits.budget.prices)
            }
            None => (self.llm.clone(), self.tools.clone()),
        };
        let configuration = self
            .configuration
            .iter()
            .filter(|(k, _)| {
                body.child
                    .field_id(k)
                    .is_some_and(|id| body.child.field(id).configurable.is_some())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Runner::new(body.child.clone(), self.recorder.threads.store().clone())
            .with_configuration(configuration)
            .with_llm(llm)
            .with_tools(tools)
            .with_tools_kept()
            .with_stop(self.stop.clone())
            .with_cache(self.cache.clone())
    }

    /// Runs the child (or goes on with it, when a stop left it stopped) and turns how
    /// it ended into the node's step.
    pub(super) async fn run_subgraph(&self, cx: &NodeCx<'_>, body: &GraphBody) -> Step {
        let mut input = Map::new();
        for (field, tpl) in &body.input {
            match cx.value(tpl) {
                Ok(v) => {
                    input.insert(field.clone(), v);
                }
                Err(e) => return Step::fail(format!("input `{field}`: {e}")),
            }
        }
        let thread = Self::child_thread(&cx.run.thread, &cx.node.name);
        let child = self.child_runner_counting(body, cx.meter);
        let stopped = matches!(child.threads().latest(&thread).await, Ok(last) if last.status == Status::Stopped);
        // A child left paused (its parent's interrupt was dropped by a new input)
        // starts over with the parent.
        let go = if stopped {
            Go::resume(None)
        } else {
            Go::Restart(Json::Object(input))
        };
        let out = self
            .follow(child, &thread, &cx.node.name, cx.events, go)
            .await;
        self.child_step(body, &thread, out).await
    }

    /// Answers an interrupt the child paused at, and turns how it ended into the
    /// node's step.
    pub(super) async fn resume_subgraph(
        &self,
        body: &GraphBody,
        thread: &str,
        node: &Arc<str>,
        payload: Json,
    ) -> Step {
        let child_thread = Self::child_thread(thread, node);
        let out = self
            .follow(
                self.child_runner(body),
                &child_thread,
                node,
                self.events.sender(),
                Go::resume(Some(payload)),
            )
            .await;
        self.child_step(body, &child_thread, out).await
    }

    /// Checks an answer for the child as its resume would, writing nothing.
    pub(super) async fn check_subgraph_answer(
        &self,
        body: &GraphBody,
        thread: &str,
        node: &str,
        payload: Option<Json>,
    ) -> Result<(), RunError> {
        // Boxed: checking a child may check its own child, and so on.
        let child = self.child_runner(body);
        Box::pin(child.check(&Self::child_thread(thread, node), Go::resume(payload))).await
    }

    /// Drives `child` on `thread` as `go` says, passing its events on as they come,
    /// wrapped in `subgraph` events that name `node`.
    async fn follow(
        &self,
        child: Runner,
        thread: &str,
        node: &Arc<str>,
        events: &Option<tokio::sync::mpsc::UnboundedSender<Event>>,
        go: Go,
    ) -> Result<Outcome, RunError> {
        let (child_tx, mut rx) = unbounded_channel();
        let child = match events {
            Some(_) => child.with_events(child_tx),
            None => child,
        };
        // Through a trait object: a graph's run can run a graph, and the recursion
        // needs a future of known size and a declared `Send`.
        let mut run = (&child as &dyn ChildRun).go(thread, go);
        let Some(tx) = events else {
            return run.await;
        };
        let forward = |e: Event| {
            let _ = tx.send(Event::Subgraph {
                node: node.clone(),
                inner: Box::new(e),
            });
        };
        let out = loop {
            tokio::select! {
                biased;
                out = &mut run => break out,
                Some(e) = rx.recv() => forward(e),
            }
        };
        while let Ok(e) = rx.try_recv() {
            forward(e);
        }
        out
    }

    async fn child_step(
        &self,
        body: &GraphBody,
        thread: &str,
        out: Result<Outcome, RunError>,
    ) -> Step {
        match out {
            Ok(Outcome::Finished { .. }) => {
                let state = match self.child_runner(body).threads().state(thread, None).await {
                    Ok((state, _)) => state,
                    Err(e) => return Step::fail(format!("the subgraph's state: {e}")),
                };
                let writes = body
                    .output
                    .iter()
                    .map(|(field, from)| {
                        (
                            *field,
                            Arc::new(state.get(from).cloned().unwrap_or(Json::Null)),
                        )
                    })
                    .collect();
                // The child's tokens count towards this run's `max_tokens` and budget.
                let tokens = match self.child_runner(body).threads().latest(thread).await {
                    Ok(last) => last.tokens,
                    Err(_) => 0,
                };
                Step::Done {
                    result: Arc::new(state),
                    writes,
                    route: None,
                    finish: None,
                    tokens,
                }
            }
            // The parent pauses at this node with the child's question.
            Ok(Outcome::Interrupted { payload, .. }) => Step::Pause { payload },
            // A stop: the node did not complete; a resume runs it again, which resumes
            // the child.
            Ok(Outcome::Stopped { .. }) => Step::Abandoned {
                tokens: 0,
                writes: Vec::new(),
            },
            Err(e) => Step::fail(format!("the subgraph failed: {e}")),
        }
    }
}
