//! [`NodeCx`]: what a node kind receives to do its work. It lives with the kinds, so
//! the runner imports the kinds and no kind imports the runner.

use crate::graph::{ExprId, Graph, Node, ValueTpl};
use crate::llm::LlmClient;
use crate::run::event::Event;
use crate::run::scope::{RunInfo, Scope, ScopeRef, to_json};
use crate::run::state::State;
use crate::store::{Checkpoints, LlmCache};
use crate::tool::ToolClient;
use minijinja::Value;
use serde_json::Value as Json;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// What a node's work sees: the graph, the state, its node, the clients.
pub(crate) struct NodeCx<'a> {
    /// The run's stop: a node that waits to try again gives up when it is asked.
    pub(crate) stop: &'a crate::run::StopHandle,
    pub(crate) graph: &'a Arc<Graph>,
    pub(crate) state: &'a State,
    pub(crate) node: &'a Node,
    pub(crate) run: RunInfo,
    pub(crate) llm: &'a dyn LlmClient,
    pub(crate) tools: &'a dyn ToolClient,
    /// What the run has used of its `[budget]`, when its graph has one: a subgraph's
    /// calls count towards it too.
    pub(crate) meter: Option<&'a Arc<crate::run::meter::Meter>>,
    /// Where an llm node's `cache` keeps answers.
    pub(crate) cache: &'a dyn LlmCache,
    /// The run's store, asked before each tool call whether the thread is still this
    /// process's (see [`Checkpoints::fence`]).
    pub(crate) claims: &'a dyn Checkpoints,
    pub(crate) events: &'a Option<UnboundedSender<Event>>,
    /// LLM events carry the messages and the reply.
    pub(crate) llm_content: bool,
    /// The answer to what the node's MCP server asked when the node last ran (an
    /// elicitation), given on resume.
    pub(crate) answer: Option<Arc<Json>>,
    /// A mapped node's item, by the name the map gives it: what this run of the kind
    /// works on.
    pub(crate) item: Option<(Arc<str>, Arc<Json>)>,
    /// The item's position in a mapped node's list.
    pub(crate) item_index: Option<usize>,
}

impl NodeCx<'_> {
    fn scope<'s>(&'s self, result: Option<&'s Value>) -> ScopeRef<'s> {
        ScopeRef {
            graph: self.graph,
            values: &self.state.values,
            run: &self.run,
            result,
            item: self.item.as_ref().map(|(n, v)| (&**n, v)),
        }
    }

    /// Evaluates a condition (`only_if`, a policy rule's `when`) as minijinja sees it,
    /// without copying what it reads into JSON.
    pub(crate) fn eval(&self, id: ExprId) -> Result<Value, String> {
        self.scope(None).eval(id).map_err(|e| jinja_error(&e))
    }

    /// Evaluates to JSON, with `result` bound.
    pub(crate) fn eval_with(&self, id: ExprId, result: Option<Value>) -> Result<Json, String> {
        let v = self
            .scope(result.as_ref())
            .eval(id)
            .map_err(|e| jinja_error(&e))?;
        to_json(&v)
    }

    /// A model named as `{{ NAME }}`: the value of the string constant `NAME` (a
    /// `[configurable]` one lets a run choose its model); any other name as written.
    pub(crate) fn model(&self, model: String) -> Result<String, String> {
        let Some(name) = crate::spec::model_ref(&model) else {
            return Ok(model);
        };
        let id = self
            .graph
            .field_id(name)
            .ok_or_else(|| format!("model `{model}` names no constant `{name}`"))?;
        match self.state.get(id) {
            serde_json::Value::String(m) if !m.is_empty() => Ok(m.clone()),
            other => Err(format!(
                "model `{model}`: `{name}` is {other}, not a model's name"
            )),
        }
    }

    pub(crate) fn render(&self, name: &str) -> Result<String, String> {
        let text = self
            .graph
            .render_in(name, &self.scope(None), || {
                Scope {
                    graph: self.graph.clone(),
                    values: self.state.values.clone(),
                    run: self.run.clone(),
                    result: None,
                    item: self.item.clone(),
                }
                .into_value()
            })
            .map_err(|e| jinja_error(&e))?;
        if text.len() > crate::run::state::MAX_VALUE_BYTES {
            return Err(format!(
                "the template `{name}` rendered {} bytes; at most {} MiB are taken",
                text.len(),
                crate::run::state::MAX_VALUE_BYTES >> 20
            ));
        }
        Ok(text)
    }

    pub(crate) fn value(&self, tpl: &ValueTpl) -> Result<Json, String> {
        Ok(match tpl {
            ValueTpl::Expr(e) => self.eval_with(*e, None)?,
            ValueTpl::Literal(l) => l.clone(),
            ValueTpl::Array(items) => Json::Array(
                items
                    .iter()
                    .map(|i| self.value(i))
                    .collect::<Result<_, _>>()?,
            ),
            ValueTpl::Object(entries) => Json::Object(
                entries
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.value(v)?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }

    pub(crate) fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(tx) = self.events {
            let _ = tx.send(make());
        }
    }
}

pub(crate) fn jinja_error(e: &minijinja::Error) -> String {
    if e.kind() == minijinja::ErrorKind::OutOfFuel {
        return format!(
            "it did more work than one evaluation may ({} instructions); a loop this long belongs in a tool",
            crate::jinja::MAX_FUEL
        );
    }
    match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    }
}
