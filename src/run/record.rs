//! What a step leaves behind: its checkpoint record (and the thread's snapshot now
//! and then), the pause at an interrupt, the commit of a node's writes and route, the
//! end of a run, and the events that tell of them.

use super::event::Event;
use super::runner::{Flow, Live, Outcome, Routed, RunError, Runner, now_ms};
use crate::graph::{Body, Node, Target};
use crate::spec::Breakpoint;
use crate::store::{Checkpoint, Pending, Source, Status, Write};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Records between two snapshots of a thread that is running.
const SNAPSHOT_EVERY: u64 = 1024;

impl Runner {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &self,
        live: &mut Live,
        node: Option<&Node>,
        next: Option<Target>,
        writes: Vec<Write>,
        status: Status,
        pending: Option<Pending>,
        outcome: Option<String>,
    ) -> Result<(), RunError> {
        let saved_events = self.saved.is_some() && self.events.is_some();
        if !self.keep_records && !saved_events {
            live.seq += 1;
            return Ok(());
        }
        // The one record no node wrote that leaves a run going is its input's.
        let source = if node.is_none() && status == Status::Running {
            Source::Input
        } else {
            Source::Loop
        };
        let now = Instant::now();
        if live.seq.is_multiple_of(64) {
            live.wall = (now, now_ms());
        }
        let since = now.saturating_duration_since(live.started);
        let record = Checkpoint {
            thread: live.thread.clone(),
            seq: live.seq,
            run: live.run,
            step: live.step,
            node: node.map(|n| n.name.clone()),
            // Inside parallel branches, every branch's next node and the join.
            next: match &live.frontier {
                Some(f) if !f.done() && status != Status::Finished && status != Status::Failed => {
                    Some(f.text(&self.graph))
                }
                _ => next.map(|t| match t {
                    Target::Node(n) => self.graph.node(n).name.clone(),
                    Target::End => Arc::from(crate::spec::END),
                }),
            },
            writes,
            status,
            pending: pending.map(Box::new),
            outcome,
            graph: self.graph_path.clone(),
            graph_hash: self.graph_hash.clone(),
            limited: live.limited,
            error: (!live.error.is_null()).then(|| Box::new((*live.error).clone())),
            tokens: live.tokens,
            elapsed_ms: (live.elapsed_before + since).as_millis() as u64,
            at_ms: (live.wall.1)
                .saturating_add(now.saturating_duration_since(live.wall.0).as_millis() as u64),
            source,
        };
        let saved = match (self.saved, &self.events) {
            (Some(values), Some(_)) => Some((
                Arc::new(record.clone()),
                (values && self.first_saved.swap(false, Ordering::SeqCst))
                    .then(|| Arc::new(live.state.to_json(&self.graph))),
            )),
            _ => None,
        };
        if self.keep_records {
            self.store.append(record)?;
        }
        live.seq += 1;
        // A paused, stopped or ended thread keeps its whole state, so that resuming it
        // reads no history; a long run keeps one every so often, for a process killed
        // mid-run.
        if self.keep_records
            && (status != Status::Running || live.seq.is_multiple_of(SNAPSHOT_EVERY))
        {
            self.snapshot(live, live.seq - 1)?;
        }
        if let Some((record, values)) = saved {
            self.emit(|| Event::Saved { record, values });
        }
        Ok(())
    }

    /// Records `node`'s step and goes along its `on_error` or `on_timeout` edge
    /// (`case`) to `to`.
    pub(super) fn take_edge(
        &self,
        live: &mut Live,
        node: &Node,
        to: Target,
        writes: Vec<Write>,
        case: &str,
    ) -> Result<(), RunError> {
        // Inside parallel branches: this branch goes on along the edge.
        self.advance(live, to);
        self.record(
            live,
            Some(node),
            Some(to),
            writes,
            Status::Running,
            None,
            None,
        )?;
        self.emit(|| Event::RouteTaken {
            from: node.name.clone(),
            to: Arc::from(self.graph.target_name(to)),
            case: Some(case.into()),
        });
        Ok(())
    }

    /// Saves an interrupted record and returns the payload. `next` is where a resume
    /// goes on: the interrupt node itself (its answer completes it), the node of a
    /// `before` breakpoint, or the successor of a node with an `after` breakpoint.
    pub(super) fn pause(
        &self,
        live: &mut Live,
        node: &Node,
        payload: Json,
        breakpoint: Option<&str>,
        next: Target,
    ) -> Result<Outcome, RunError> {
        self.pause_with(live, node, payload, breakpoint, next, Vec::new())
    }

    /// What a pause at `node` waits for.
    pub(super) fn pending(
        &self,
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

    /// [`Runner::pause`], listing the interrupts of other branches that asked in the
    /// same superstep (`others`) with this one.
    pub(super) fn pause_with(
        &self,
        live: &mut Live,
        node: &Node,
        payload: Json,
        breakpoint: Option<&str>,
        next: Target,
        others: Vec<Pending>,
    ) -> Result<Outcome, RunError> {
        let mut pending = self.pending(live, node, &payload, breakpoint);
        for other in &others {
            self.emit(|| Event::Interrupted {
                node: other.node.clone(),
                payload: other.payload.clone(),
            });
        }
        pending.others = others;
        self.record(
            live,
            Some(node),
            Some(next),
            Vec::new(),
            Status::Interrupted,
            Some(pending),
            None,
        )?;
        self.emit(|| Event::Interrupted {
            node: node.name.clone(),
            payload: payload.clone(),
        });
        self.emit_finished(live, "interrupted", None, None);
        Ok(Outcome::Interrupted {
            node: node.name.to_string(),
            payload,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit(
        &self,
        live: &mut Live,
        node: &Node,
        writes: Vec<Write>,
        next: Option<Routed>,
        finish: Option<(String, Option<String>)>,
        start: Option<Instant>,
        skipped: bool,
    ) -> Result<Flow, RunError> {
        self.emit(|| Event::NodeFinished {
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
                .map(Flow::Return);
        }
        let (next, case) = next.unwrap_or((Target::End, None));
        // A route case that names several nodes forks like `next = [...]`.
        let routed_fork = match (&node.next, &case) {
            (crate::graph::Next::Switch { forks, .. }, Some(c)) => forks
                .iter()
                .find(|(k, ..)| k == c)
                .map(|(_, b, j)| (b.as_slice(), *j)),
            _ => None,
        };
        let fork = match &node.next {
            crate::graph::Next::Fork { branches, join } => Some((branches.as_slice(), *join)),
            _ => routed_fork,
        };
        if let Some((branches, join)) = fork {
            self.start_branches(live, branches, join);
            self.record(live, Some(node), None, writes, Status::Running, None, None)?;
            for b in branches {
                self.emit(|| Event::RouteTaken {
                    from: node.name.clone(),
                    to: Arc::from(self.graph.target_name(*b)),
                    case: case.clone(),
                });
            }
            return Ok(Flow::Fork);
        }
        // Inside parallel branches: this branch goes on to `next`, or waits at the join.
        self.advance(live, next);
        self.record(
            live,
            Some(node),
            Some(next),
            writes,
            Status::Running,
            None,
            None,
        )?;
        if node.breakpoint == Some(Breakpoint::After) {
            return Ok(Flow::Return(self.pause(
                live,
                node,
                json!({ "breakpoint": "after", "node": &*node.name }),
                Some("after"),
                next,
            )?));
        }
        self.emit(|| Event::RouteTaken {
            from: node.name.clone(),
            to: Arc::from(self.graph.target_name(next)),
            case,
        });
        Ok(Flow::Next(next))
    }

    pub(super) fn finish(
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
        self.record(
            live,
            node,
            None,
            writes,
            Status::Finished,
            None,
            Some(outcome.clone()),
        )?;
        self.emit_finished(live, "finished", Some(outcome.clone()), response.clone());
        Ok(Outcome::Finished {
            outcome,
            response,
            steps: live.step,
        })
    }

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
        if self.shutdown_tools && self.events.is_some() {
            // Sent once the servers are shut down (`Runner::start`, `resume`).
            *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(finished());
        } else {
            self.emit(finished);
        }
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
