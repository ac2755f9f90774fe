//! What a node's step leaves behind once its kind has done its work: its writes and
//! `set` applied (all or none), its route taken, a failure handled by `on_error`, a
//! pause at an interrupt, the end of a run; each with its checkpoint record and the
//! events that tell of it.

use super::apply::{apply, route, write_what_stands};
use super::cursor::{Flow, Live, Routed, Work, now_ms};
use super::event::Event;
use super::kinds::Step;
use super::outcome::{Outcome, RunError};
use super::recorder::Entry;
use super::runner::Runner;
use crate::graph::{Body, Next, Node, NodeId, Target};
use crate::spec::Breakpoint;
use crate::store::{Pending, Write};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::Instant;

impl Runner {
    /// Applies a node's work: its writes and `set`, its route, its record.
    pub(super) async fn finish_work(
        &self,
        live: &mut Live,
        id: NodeId,
        work: Work,
        start: Option<Instant>,
    ) -> Result<Flow, RunError> {
        let node = self.graph.node(id);
        match work {
            Work::Skipped => match route(&self.graph, live, node, self.max_steps()) {
                Ok(next) => {
                    self.commit(live, node, Vec::new(), next, None, start, true)
                        .await
                }
                Err(message) => self.fail(live, node, message).await,
            },
            Work::Step(step) => self.complete(live, id, step, start).await,
        }
    }

    /// Applies a node's step: writes, `set`, routing, the checkpoint, events.
    pub(super) async fn complete(
        &self,
        live: &mut Live,
        id: NodeId,
        step: Step,
        start: Option<Instant>,
    ) -> Result<Flow, RunError> {
        let node = self.graph.node(id);
        match step {
            Step::Abandoned { writes, tokens } => {
                live.tokens = live.tokens.saturating_add(tokens);
                // The node did not complete: what it recorded of its attempts stands,
                // and the run stops before it, to run it again on a resume.
                let applied = write_what_stands(&self.graph, live, writes);
                self.stop.take();
                live.step = live.step.saturating_sub(1);
                self.recorder
                    .record(
                        live,
                        Entry::stopped(Some(Target::Node(id)), applied),
                        &self.events,
                    )
                    .await?;
                self.events.emit(|| Event::Stopped {
                    next: Some(node.name.clone()),
                    step: live.step,
                });
                self.emit_finished(live, "stopped", None, None);
                Ok(Flow::Return(Outcome::Stopped {
                    next: Some(node.name.to_string()),
                    steps: live.step,
                }))
            }
            Step::Pause { payload } => Ok(Flow::Return(
                self.pause(live, node, payload, None, Target::Node(id))
                    .await?,
            )),
            Step::FailRun { outcome, message } => {
                // Its `set` first (what the graph wants kept of the failure), then the
                // run ends as failed, with the node's outcome.
                let applied = match apply(
                    &self.graph,
                    live,
                    node,
                    Arc::new(Json::Null),
                    Vec::new(),
                    self.max_steps(),
                ) {
                    Ok(applied) => applied,
                    Err(message) => return self.fail(live, node, message).await,
                };
                self.events.emit(|| Event::NodeFailed {
                    node: node.name.clone(),
                    message: message.clone(),
                    handled: false,
                });
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
                let id = self.graph.node_id(&node.name).map(Target::Node);
                self.recorder
                    .record(
                        live,
                        Entry::failed(node, id, applied, Some(outcome.clone())),
                        &self.events,
                    )
                    .await?;
                self.emit_finished(live, "failed", Some(outcome.clone()), None);
                Err(RunError::Failed {
                    node: node.name.to_string(),
                    outcome,
                    message,
                })
            }
            Step::Fail {
                message,
                tokens,
                writes,
            } => {
                live.tokens = live.tokens.saturating_add(tokens);
                // What the node wrote before it failed (audit records) stands, as far
                // as the fields take it.
                let applied = write_what_stands(&self.graph, live, writes);
                self.fail_with(live, node, message, applied).await
            }
            Step::Done {
                result,
                writes,
                route: routed,
                finish,
                tokens,
            } => {
                live.tokens = live.tokens.saturating_add(tokens);
                match apply(&self.graph, live, node, result, writes, self.max_steps()) {
                    Ok(applied) => {
                        let next = match (&finish, routed) {
                            (Some(_), _) => None,
                            (None, Some((t, case))) => Some((t, Some(case))),
                            (None, None) => {
                                match route(&self.graph, live, node, self.max_steps()) {
                                    Ok(t) => t,
                                    // The writes stand: they were valid, only the route failed.
                                    Err(message) => {
                                        return self.fail_with(live, node, message, applied).await;
                                    }
                                }
                            }
                        };
                        self.commit(live, node, applied, next, finish, start, false)
                            .await
                    }
                    // `apply` left the state as it was before the node.
                    Err(message) => self.fail(live, node, message).await,
                }
            }
        }
    }

    pub(super) async fn fail(
        &self,
        live: &mut Live,
        node: &Node,
        message: String,
    ) -> Result<Flow, RunError> {
        self.fail_with(live, node, message, Vec::new()).await
    }

    /// A failure whose `writes` (already applied to the state) are recorded with it.
    pub(super) async fn fail_with(
        &self,
        live: &mut Live,
        node: &Node,
        message: String,
        writes: Vec<Write>,
    ) -> Result<Flow, RunError> {
        let handled = node.on_error.is_some();
        self.events.emit(|| Event::NodeFailed {
            node: node.name.clone(),
            message: message.clone(),
            handled,
        });
        match node.on_error {
            Some(to) => {
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
                self.take_edge(live, node, to, writes, "error").await?;
                Ok(Flow::Next(to))
            }
            None => {
                // The record says why the run failed, for whoever reads it later.
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
                let id = self.graph.node_id(&node.name).map(Target::Node);
                self.recorder
                    .record(live, Entry::failed(node, id, writes, None), &self.events)
                    .await?;
                self.emit_finished(live, "failed", None, None);
                Err(RunError::Node {
                    node: node.name.to_string(),
                    message,
                })
            }
        }
    }

    /// Records `node`'s step and goes along its `on_error` or `on_timeout` edge
    /// (`case`) to `to`.
    pub(super) async fn take_edge(
        &self,
        live: &mut Live,
        node: &Node,
        to: Target,
        writes: Vec<Write>,
        case: &str,
    ) -> Result<(), RunError> {
        // Inside parallel branches: this branch goes on along the edge.
        live.advance(to);
        self.recorder
            .record(
                live,
                Entry::running(Some(node), Some(to), writes),
                &self.events,
            )
            .await?;
        self.events.emit(|| Event::RouteTaken {
            from: node.name.clone(),
            to: Arc::from(self.graph.target_name(to)),
            case: Some(case.into()),
        });
        Ok(())
    }

    /// Saves an interrupted record and returns the payload. `next` is where a resume
    /// goes on: the interrupt node itself (its answer completes it), the node of a
    /// `before` breakpoint, or the successor of a node with an `after` breakpoint.
    pub(super) async fn pause(
        &self,
        live: &mut Live,
        node: &Node,
        payload: Json,
        breakpoint: Option<&str>,
        next: Target,
    ) -> Result<Outcome, RunError> {
        self.pause_with(live, node, payload, breakpoint, next, Vec::new())
            .await
    }

    /// [`Runner::pause`], listing the interrupts of other branches that asked in the
    /// same superstep (`others`) with this one.
    pub(super) async fn pause_with(
        &self,
        live: &mut Live,
        node: &Node,
        payload: Json,
        breakpoint: Option<&str>,
        next: Target,
        others: Vec<Pending>,
    ) -> Result<Outcome, RunError> {
        let mut pending = pending(live, node, &payload, breakpoint);
        for other in &others {
            self.events.emit(|| Event::Interrupted {
                node: other.node.clone(),
                payload: other.payload.clone(),
            });
        }
        pending.others = others;
        self.recorder
            .record(live, Entry::interrupted(node, next, pending), &self.events)
            .await?;
        self.events.emit(|| Event::Interrupted {
            node: node.name.clone(),
            payload: payload.clone(),
        });
        self.emit_finished(live, "interrupted", None, None);
        Ok(Outcome::Interrupted {
            node: node.name.to_string(),
            payload,
        })
    }

    /// Records a node's step that completed and sends the run on: along its route,
    /// into its branches, to a pause at its `after` breakpoint, or to the run's end
    /// (`finish`, a finalize node's outcome and response).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn commit(
        &self,
        live: &mut Live,
        node: &Node,
        writes: Vec<Write>,
        next: Option<Routed>,
        finish: Option<(String, Option<String>)>,
        start: Option<Instant>,
        skipped: bool,
    ) -> Result<Flow, RunError> {
        self.events.emit(|| Event::NodeFinished {
            node: node.name.clone(),
            step: live.step,
            duration_us: start.map_or(0, |s| s.elapsed().as_micros() as u64),
            writes: writes.iter().map(|w| w.field.clone()).collect(),
            skipped,
        });
        if !live.error.is_null() {
            live.error = Arc::new(Json::Null);
        }
        if let Some((outcome, response)) = finish {
            return self
                .finish(live, Some((node, writes)), outcome, response)
                .await
                .map(Flow::Return);
        }
        let (next, case) = next.unwrap_or((Target::End, None));
        // A route case that names several nodes forks like `next = [...]`.
        let routed_fork = match (&node.next, &case) {
            (Next::Switch { forks, .. }, Some(c)) => forks
                .iter()
                .find(|(k, ..)| k == c)
                .map(|(_, b, j)| (b.as_slice(), *j)),
            _ => None,
        };
        let fork = match &node.next {
            Next::Fork { branches, join } => Some((branches.as_slice(), *join)),
            _ => routed_fork,
        };
        if let Some((branches, join)) = fork {
            live.start_branches(branches, join);
            self.recorder
                .record(live, Entry::running(Some(node), None, writes), &self.events)
                .await?;
            for b in branches {
                self.events.emit(|| Event::RouteTaken {
                    from: node.name.clone(),
                    to: Arc::from(self.graph.target_name(*b)),
                    case: case.clone(),
                });
            }
            return Ok(Flow::Fork);
        }
        // The run's end: the node's record is the run's last, as LangGraph's last
        // checkpoint is the last step's (a turn of a chat writes no record more),
        // unless a breakpoint after the node pauses first.
        if next == Target::End
            && live.frontier.is_none()
            && node.breakpoint != Some(Breakpoint::After)
        {
            self.events.emit(|| Event::RouteTaken {
                from: node.name.clone(),
                to: Arc::from(self.graph.target_name(next)),
                case,
            });
            let outcome = if live.limited { "limit" } else { "end" };
            return self
                .finish(live, Some((node, writes)), outcome.into(), None)
                .await
                .map(Flow::Return);
        }
        // Inside parallel branches: this branch goes on to `next`, or waits at the join.
        live.advance(next);
        self.recorder
            .record(
                live,
                Entry::running(Some(node), Some(next), writes),
                &self.events,
            )
            .await?;
        if node.breakpoint == Some(Breakpoint::After) {
            return Ok(Flow::Return(
                self.pause(
                    live,
                    node,
                    json!({ "breakpoint": "after", "node": &*node.name }),
                    Some("after"),
                    next,
                )
                .await?,
            ));
        }
        self.events.emit(|| Event::RouteTaken {
            from: node.name.clone(),
            to: Arc::from(self.graph.target_name(next)),
            case,
        });
        Ok(Flow::Next(next))
    }

    /// Ends the run: its last record (with the finalize node's writes, if one ended
    /// it) and its last event.
    pub(super) async fn finish(
        &self,
        live: &mut Live,
        last: Option<(&Node, Vec<Write>)>,
        outcome: String,
        response: Option<String>,
    ) -> Result<Outcome, RunError> {
        let (node, writes) = match last {
            Some((n, w)) => (Some(n), w),
            None => (None, Vec::new()),
        };
        self.recorder
            .record(
                live,
                Entry::finished(node, writes, outcome.clone()),
                &self.events,
            )
            .await?;
        self.emit_finished(live, "finished", Some(outcome.clone()), response.clone());
        Ok(Outcome::Finished {
            outcome,
            response,
            steps: live.step,
        })
    }

    /// Stops the run at a node boundary: a record that says where it goes on (`next`,
    /// or every branch's next node when the frontier is set), events, the outcome.
    pub(super) async fn stopped(
        &self,
        live: &mut Live,
        next: Option<Target>,
        name: Arc<str>,
    ) -> Result<Outcome, RunError> {
        self.recorder
            .record(live, Entry::stopped(next, Vec::new()), &self.events)
            .await?;
        self.events.emit(|| Event::Stopped {
            next: Some(name.clone()),
            step: live.step,
        });
        self.emit_finished(live, "stopped", None, None);
        Ok(Outcome::Stopped {
            next: Some(name.to_string()),
            steps: live.step,
        })
    }

    /// The run's last event; held until its servers are shut down when the run shuts
    /// them down (`Runner::run` sends it then).
    pub(super) fn emit_finished(
        &self,
        live: &Live,
        status: &'static str,
        outcome: Option<String>,
        response: Option<String>,
    ) {
        let finished = || Event::RunFinished {
            status: status.into(),
            outcome,
            response,
            steps: live.step,
            tokens: live.tokens,
            duration_ms: live.elapsed().as_millis() as u64,
        };
        if self.shutdown_tools && self.events.is_on() {
            self.events.hold(finished());
        } else {
            self.events.emit(finished);
        }
    }
}

/// What a pause at `node` waits for.
pub(super) fn pending(
    live: &Live,
    node: &Node,
    payload: &Json,
    breakpoint: Option<&str>,
) -> Pending {
    let deadline_ms = match &node.body {
        Body::Interrupt(i) if breakpoint.is_none() => i
            .timeout
            .map(|t| now_ms().saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))),
        _ => None,
    };
    Pending {
        node: node.name.clone(),
        reference: payload.get("reference").map(reference_text),
        payload: payload.clone(),
        deadline_ms,
        fingerprint: node.fingerprint.clone(),
        breakpoint: breakpoint.map(String::from),
        at_seq: Some(live.seq),
        others: Vec::new(),
    }
}

/// A `reference` as pending interrupts keep it: a string as it is, anything else as
/// JSON text.
pub(super) fn reference_text(r: &Json) -> String {
    match r {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}
