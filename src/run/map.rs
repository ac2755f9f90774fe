//! A mapped node (`map = { over = ... }`): its kind's work once per item of a list, at
//! most `concurrency` items at a time, folded into one step. The node's `output` gets
//! the list of the items' results in item order (never in the order they finished),
//! `set` then runs once with that list as `result`, and the run goes on along the
//! node's edges as after any step. What else an item's work writes (an `mcp_call`'s
//! audit records) is kept, item after item, and so are its events: a later item's
//! events wait until the items before it are done.

use super::kinds::Step;
use super::kinds::cx::NodeCx;
use super::runner::Runner;
use super::state::describe;
use crate::graph::{Body, FieldId, MapPlan, Node};
use futures_util::StreamExt;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use tokio::sync::mpsc::unbounded_channel;

impl Runner {
    pub(super) async fn run_mapped(&self, cx: &NodeCx<'_>, map: &MapPlan) -> Step {
        let items = match cx.eval_with(map.over, None) {
            Ok(Json::Array(items)) => items,
            Ok(other) => {
                return Step::fail(format!("map: `over` gave {}, not a list", describe(&other)));
            }
            Err(e) => return Step::fail(format!("map: `over`: {e}")),
        };
        let count = items.len();
        let runs = items.into_iter().enumerate().map(|(index, item)| {
            // Each item's events wait in a channel of their own and are passed on in
            // item order, as its step is: what a run reports does not depend on
            // which item finished first.
            let (events, held) = match cx.events {
                Some(_) => {
                    let (tx, rx) = unbounded_channel();
                    (Some(tx), Some(rx))
                }
                None => (None, None),
            };
            let item = Some((map.var.clone(), Arc::new(item)));
            async move {
                let cx = NodeCx {
                    stop: cx.stop,
                    graph: cx.graph,
                    state: cx.state,
                    node: cx.node,
                    run: cx.run.clone(),
                    llm: cx.llm,
                    tools: cx.tools,
                    meter: cx.meter,
                    cache: cx.cache,
                    claims: cx.claims,
                    events: &events,
                    llm_content: cx.llm_content,
                    // A mapped node cannot pause for a server's question (its items run
                    // at once): none of them is given an answer.
                    answer: None,
                    item,
                    item_index: Some(index),
                };
                (self.run_kind(&cx).await, held)
            }
        });
        let mut done = futures_util::stream::iter(runs).buffered(map.concurrency.max(1));
        let mut steps = Vec::with_capacity(count);
        while let Some((step, held)) = done.next().await {
            if let (Some(tx), Some(mut rx)) = (cx.events, held) {
                while let Ok(e) = rx.try_recv() {
                    let _ = tx.send(e);
                }
            }
            steps.push(step);
        }
        fold(cx.node, map, count, steps)
    }
}

/// The field a node's kind writes its result to, which a map gives the list instead.
fn output_of(node: &Node) -> Option<FieldId> {
    match &node.body {
        Body::Llm(l) => Some(l.output),
        Body::Mcp(m) => m.calls.first().and_then(|c| c.output),
        _ => None,
    }
}

/// The items' steps as the node's one step.
fn fold(node: &Node, map: &MapPlan, count: usize, steps: Vec<Step>) -> Step {
    let output = output_of(node);
    let mut results = Vec::with_capacity(count);
    let mut kept = Vec::new();
    let mut total = 0u64;
    let keep = |writes: Vec<(FieldId, Arc<Json>)>, kept: &mut Vec<_>| {
        kept.extend(writes.into_iter().filter(|(f, _)| Some(*f) != output));
    };
    for (i, step) in steps.into_iter().enumerate() {
        match step {
            Step::Done {
                result,
                writes,
                tokens,
                ..
            } => {
                total = total.saturating_add(tokens);
                keep(writes, &mut kept);
                results.push((*result).clone());
            }
            Step::Fail {
                message,
                tokens,
                writes,
            } => {
                total = total.saturating_add(tokens);
                keep(writes, &mut kept);
                if map.collect_errors {
                    results.push(json!({ "error": message }));
                } else {
                    return Step::Fail {
                        message: format!("item {} of {count}: {message}", i + 1),
                        tokens: total,
                        writes: kept,
                    };
                }
            }
            Step::Abandoned { tokens, writes } => {
                total = total.saturating_add(tokens);
                keep(writes, &mut kept);
                return Step::Abandoned {
                    tokens: total,
                    writes: kept,
                };
            }
            // The checker allows a map only on kinds that neither pause nor end a run; an
            // MCP server that asks a person for input (an elicitation) pauses a node.
            Step::Pause { .. } | Step::FailRun { .. } => {
                return Step::Fail {
                    message: format!(
                        "item {} of {count}: a mapped node cannot pause or end the run{}",
                        i + 1,
                        if matches!(step, Step::Pause { .. }) {
                            " (its server asked for a person's input)"
                        } else {
                            ""
                        }
                    ),
                    tokens: total,
                    writes: kept,
                };
            }
        }
    }
    let list = Arc::new(Json::Array(results));
    if let Some(field) = output {
        kept.push((field, list.clone()));
    }
    Step::Done {
        result: list,
        writes: kept,
        route: None,
        finish: None,
        tokens: total,
    }
}
