//! A node's step once its kind has done its work: its writes and `set` applied through
//! the reducers (all or none), its route picked, a failure handled by `on_error`.

use super::event::Event;
use super::kinds::Step;
use super::kinds::cx::jinja_error;
use super::runner::{Live, Outcome, RunError, Runner};
use super::scope::{ScopeRef, to_json, view_of};
use crate::graph::{ExprId, Next, Node, NodeId, Target};
use crate::store::{Status, Write};
use minijinja::Value;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::Instant;

impl Runner {
    /// Applies a node's step: writes, `set`, routing, the checkpoint, events.
    pub(super) fn complete(
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
                let applied = self.write_what_stands(live, writes);
                self.stop.take();
                live.step = live.step.saturating_sub(1);
                self.record(
                    live,
                    None,
                    Some(Target::Node(id)),
                    applied,
                    Status::Stopped,
                    None,
                    None,
                )?;
                self.emit(|| Event::Stopped {
                    next: Some(node.name.clone()),
                    step: live.step,
                });
                self.emit_finished(live, "stopped", None, None);
                Ok(Flow::Return(Outcome::Stopped {
                    next: Some(node.name.to_string()),
                    steps: live.step,
                }))
            }
            Step::Pause { payload } => Ok(Flow::Return(self.pause(
                live,
                node,
                payload,
                None,
                Target::Node(id),
            )?)),
            Step::FailRun { outcome, message } => {
                // Its `set` first (what the graph wants kept of the failure), then the
                // run ends as failed, with the node's outcome.
                let applied = match self.apply(live, node, Arc::new(Json::Null), Vec::new()) {
                    Ok(applied) => applied,
                    Err(message) => return self.fail(live, node, message),
                };
                self.emit(|| Event::NodeFailed {
                    node: node.name.clone(),
                    message: message.clone(),
                    handled: false,
                });
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
                let id = self.graph.node_id(&node.name).map(Target::Node);
                self.record(
                    live,
                    Some(node),
                    id,
                    applied,
                    Status::Failed,
                    None,
                    Some(outcome.clone()),
                )?;
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
                let applied = self.write_what_stands(live, writes);
                self.fail_with(live, node, message, applied)
            }
            Step::Done {
                result,
                writes,
                route,
                finish,
                tokens,
            } => {
                live.tokens = live.tokens.saturating_add(tokens);
                match self.apply(live, node, result, writes) {
                    Ok(applied) => {
                        let next = match (&finish, route) {
                            (Some(_), _) => None,
                            (None, Some(t)) => Some((t, None)),
                            (None, None) => match self.route(live, node) {
                                Ok(t) => t,
                                // The writes stand: they were valid, only the route failed.
                                Err(message) => {
                                    return self.fail_with(live, node, message, applied);
                                }
                            },
                        };
                        self.commit(live, node, applied, next, finish, start, false)
                    }
                    // `apply` left the state as it was before the node.
                    Err(message) => self.fail(live, node, message),
                }
            }
        }
    }

    pub(super) fn fail(
        &self,
        live: &mut Live,
        node: &Node,
        message: String,
    ) -> Result<Flow, RunError> {
        self.fail_with(live, node, message, Vec::new())
    }

    /// A failure whose `writes` (already applied to the state) are recorded with it.
    pub(super) fn fail_with(
        &self,
        live: &mut Live,
        node: &Node,
        message: String,
        writes: Vec<Write>,
    ) -> Result<Flow, RunError> {
        let handled = node.on_error.is_some();
        self.emit(|| Event::NodeFailed {
            node: node.name.clone(),
            message: message.clone(),
            handled,
        });
        match node.on_error {
            Some(to) => {
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
                self.take_edge(live, node, to, writes, "error")?;
                Ok(Flow::Next(to))
            }
            None => {
                // The record says why the run failed, for whoever reads it later.
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
                let id = self.graph.node_id(&node.name).map(Target::Node);
                self.record(live, Some(node), id, writes, Status::Failed, None, None)?;
                self.emit_finished(live, "failed", None, None);
                Err(RunError::Node {
                    node: node.name.to_string(),
                    message,
                })
            }
        }
    }

    /// The writes of a node that did not complete (its attempts' audit records): each
    /// as far as its field takes it, the rest dropped.
    fn write_what_stands(
        &self,
        live: &mut Live,
        writes: Vec<(crate::graph::FieldId, Arc<Json>)>,
    ) -> Vec<Write> {
        writes
            .into_iter()
            .filter(|(field, value)| live.state.write(&self.graph, *field, value.clone()).is_ok())
            .map(|(field, value)| Write {
                field: self.graph.field(field).name.clone(),
                value,
            })
            .collect()
    }

    /// Applies the kind's writes and then `set`, in order, returning the records.
    pub(super) fn apply(
        &self,
        live: &mut Live,
        node: &Node,
        result: Arc<Json>,
        writes: Vec<(crate::graph::FieldId, Arc<Json>)>,
    ) -> Result<Vec<Write>, String> {
        // A refused write leaves the state as it was before the node: the writes
        // before it are taken back.
        // The list is the live thread's, kept from step to step: a step allocates none.
        let mut undo = std::mem::take(&mut live.undo);
        let applied = self.apply_noting(live, node, result, writes, &mut undo);
        if applied.is_err() {
            live.state.undo(&mut undo);
        }
        undo.clear();
        live.undo = undo;
        applied
    }

    pub(super) fn apply_noting(
        &self,
        live: &mut Live,
        node: &Node,
        result: Arc<Json>,
        writes: Vec<(crate::graph::FieldId, Arc<Json>)>,
        undo: &mut Vec<super::state::Undo>,
    ) -> Result<Vec<Write>, String> {
        let mut applied = Vec::with_capacity(writes.len() + node.set.len());
        for (field, value) in writes {
            live.state
                .write_undoable(&self.graph, field, value.clone(), undo)
                .map_err(|e| e.to_string())?;
            applied.push(Write {
                field: self.graph.field(field).name.clone(),
                value,
            });
        }
        if node.set.is_empty() {
            return Ok(applied);
        }
        let result = view_of(result);
        let run = self.run_info(live);
        for (field, expr) in &node.set {
            let scope = ScopeRef {
                graph: &self.graph,
                values: &live.state.values,
                run: &run,
                result: Some(&result),
                item: None,
            };
            let v = scope.eval(*expr).map_err(|e| {
                format!(
                    "`set` of `{}`: {}",
                    self.graph.field(*field).name,
                    jinja_error(&e)
                )
            })?;
            let value = Arc::new(to_json(&v)?);
            drop(v);
            live.state
                .write_undoable(&self.graph, *field, value.clone(), undo)
                .map_err(|e| e.to_string())?;
            applied.push(Write {
                field: self.graph.field(*field).name.clone(),
                value,
            });
        }
        Ok(applied)
    }

    /// Picks the next node from the node's edges, on the current state, with the name
    /// of the case that chose it. None for a finalize node.
    pub(super) fn route(&self, live: &Live, node: &Node) -> Result<Option<Routed>, String> {
        // `run` made once for all the route's expressions, and only for a route
        // that has any.
        let run = std::cell::OnceCell::new();
        let eval = |id: ExprId| {
            let scope = ScopeRef {
                graph: &self.graph,
                values: &live.state.values,
                run: run.get_or_init(|| self.run_info(live)),
                result: None,
                item: None,
            };
            scope.eval(id).map_err(|e| {
                format!(
                    "route `{}`: {}",
                    self.graph.expr_source(id),
                    jinja_error(&e)
                )
            })
        };
        match &node.next {
            Next::Finish => Ok(None),
            // The branches are started by `commit`; their join is where the run goes on.
            Next::Fork { join, .. } => Ok(Some((Target::Node(*join), None))),
            Next::Goto(t) => Ok(Some((*t, None))),
            Next::Switch {
                on, cases, default, ..
            } => {
                let v = eval(*on)?;
                let key = case_key(&v);
                match cases
                    .iter()
                    .find(|(c, _)| *c == key)
                    .map(|(c, t)| (*t, Some(c.clone())))
                    .or(default.map(|t| (t, Some("default".to_string()))))
                {
                    Some(r) => Ok(Some(r)),
                    None => Err(format!(
                        "route on `{}` got `{key}`, which no case names, and the route has no default",
                        self.graph.expr_source(*on)
                    )),
                }
            }
            Next::When { cases, default } => {
                for c in cases {
                    if eval(c.cond)?.is_true() {
                        return Ok(Some((c.to, Some(c.label.clone()))));
                    }
                }
                default
                    .map(|t| Some((t, Some("default".to_string()))))
                    .ok_or_else(|| "no `when` case holds and the route has no default".to_string())
            }
        }
    }
}

/// Where a node's edges lead, and the name of the case that chose it.
pub(super) type Routed = (Target, Option<String>);

pub(super) enum Flow {
    Next(Target),
    Return(Outcome),
    /// The node forked: the branches are in the thread's frontier.
    Fork,
}

/// The case name a switch value selects: strings as they are, others as JSON.
fn case_key(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    if v.is_none() || v.is_undefined() {
        return "none".into();
    }
    match to_json(v) {
        Ok(j) => j.to_string(),
        Err(_) => v.to_string(),
    }
}
