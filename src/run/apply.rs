//! What a node's step does to a thread's state: its writes and then its `set`
//! expressions, each through its field's reducer, all or none ([`apply`]); an input's
//! or a person's fields written the same way ([`write_fields`]); and the node's route,
//! picked on the state that results ([`route`]). Nothing here records or emits.

use super::cursor::{Live, Routed};
use super::kinds::cx::jinja_error;
use super::message_ids::{MessageIds, WrittenAt};
use super::scope::{ScopeRef, to_json};
use super::state::Undo;
use crate::graph::{ExprId, FieldId, Graph, Next, Node};
use crate::store::Write;
use crate::value::view_of;
use minijinja::Value;
use serde_json::Value as Json;
use std::sync::Arc;

/// Writes each field of an input (or a person's update) through its reducer; its
/// messages without ids are given ids of where they were written (`at`).
pub(super) fn write_fields(
    graph: &Arc<Graph>,
    live: &mut Live,
    fields: serde_json::Map<String, Json>,
    at: WrittenAt,
) -> Result<Vec<Write>, String> {
    let mut writes = Vec::with_capacity(fields.len());
    let thread = live.thread.clone();
    let mut ids = MessageIds::new(&thread, at);
    for (name, value) in fields {
        let id = graph.field_id(&name).ok_or_else(|| {
            let hint = crate::suggestion::help_for(&name, graph.fields.iter().map(|f| &*f.name))
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            format!("`{name}` is not a state field{hint}")
        })?;
        let value = ids.give(graph, id, Arc::new(value));
        live.state
            .write(graph, id, value.clone())
            .map_err(|e| e.to_string())?;
        writes.push(Write {
            field: graph.field(id).name.clone(),
            value,
        });
    }
    Ok(writes)
}

/// The writes of a node that did not complete (its attempts' audit records): each
/// as far as its field takes it, the rest dropped.
pub(super) fn write_what_stands(
    graph: &Arc<Graph>,
    live: &mut Live,
    writes: Vec<(FieldId, Arc<Json>)>,
) -> Vec<Write> {
    let thread = live.thread.clone();
    let mut ids = MessageIds::new(&thread, step_of(live));
    writes
        .into_iter()
        .map(|(field, value)| (field, ids.give(graph, field, value)))
        .filter(|(field, value)| live.state.write(graph, *field, value.clone()).is_ok())
        .map(|(field, value)| Write {
            field: graph.field(field).name.clone(),
            value,
        })
        .collect()
}

/// Applies a node kind's writes and then the node's `set`, in order, returning the
/// records. A refused write leaves the state as it was before the node: the writes
/// before it are taken back. `max_steps` is `run.max_steps` as `set` sees it.
pub(super) fn apply(
    graph: &Arc<Graph>,
    live: &mut Live,
    node: &Node,
    result: Arc<Json>,
    writes: Vec<(FieldId, Arc<Json>)>,
    max_steps: Option<u64>,
) -> Result<Vec<Write>, String> {
    // The list is the live thread's, kept from step to step: a step allocates none.
    let mut undo = std::mem::take(&mut live.undo);
    let applied = apply_noting(graph, live, node, result, writes, max_steps, &mut undo);
    if applied.is_err() {
        live.state.undo(&mut undo);
    }
    undo.clear();
    live.undo = undo;
    applied
}

fn apply_noting(
    graph: &Arc<Graph>,
    live: &mut Live,
    node: &Node,
    result: Arc<Json>,
    writes: Vec<(FieldId, Arc<Json>)>,
    max_steps: Option<u64>,
    undo: &mut Vec<Undo>,
) -> Result<Vec<Write>, String> {
    let mut applied = Vec::with_capacity(writes.len() + node.set.len());
    let thread = live.thread.clone();
    let mut ids = MessageIds::new(&thread, step_of(live));
    for (field, value) in writes {
        let value = ids.give(graph, field, value);
        live.state
            .write_undoable(graph, field, value.clone(), undo)
            .map_err(|e| e.to_string())?;
        applied.push(Write {
            field: graph.field(field).name.clone(),
            value,
        });
    }
    if node.set.is_empty() {
        return Ok(applied);
    }
    let result = view_of(result);
    let run = live.run_info(max_steps);
    for (field, expr) in &node.set {
        let scope = ScopeRef {
            graph,
            values: &live.state.values,
            run: &run,
            result: Some(&result),
            item: None,
        };
        let v = scope.eval(*expr).map_err(|e| {
            format!(
                "`set` of `{}`: {}",
                graph.field(*field).name,
                jinja_error(&e)
            )
        })?;
        let value = ids.give(graph, *field, Arc::new(to_json(&v)?));
        drop(v);
        live.state
            .write_undoable(graph, *field, value.clone(), undo)
            .map_err(|e| e.to_string())?;
        applied.push(Write {
            field: graph.field(*field).name.clone(),
            value,
        });
    }
    Ok(applied)
}

/// Where the node being applied writes: the checkpoint it will make, its run and step.
fn step_of(live: &Live) -> WrittenAt {
    WrittenAt {
        seq: live.seq,
        step: Some((live.run, live.step)),
    }
}

/// Picks the next node from the node's edges, on the current state, with the name
/// of the case that chose it. None for a finalize node.
pub(super) fn route(
    graph: &Arc<Graph>,
    live: &Live,
    node: &Node,
    max_steps: Option<u64>,
) -> Result<Option<Routed>, String> {
    // `run` made once for all the route's expressions, and only for a route
    // that has any.
    let run = std::cell::OnceCell::new();
    let eval = |id: ExprId| {
        let scope = ScopeRef {
            graph,
            values: &live.state.values,
            run: run.get_or_init(|| live.run_info(max_steps)),
            result: None,
            item: None,
        };
        scope
            .eval(id)
            .map_err(|e| format!("route `{}`: {}", graph.expr_source(id), jinja_error(&e)))
    };
    match &node.next {
        Next::Finish => Ok(None),
        // The branches are started by `commit`; their join is where the run goes on.
        Next::Fork { join, .. } => Ok(Some((crate::graph::Target::Node(*join), None))),
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
                    graph.expr_source(*on)
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
