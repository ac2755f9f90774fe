//! A mapped node (`map = { over = ... }`): its kind's work once per item of a list, at
//! most `concurrency` items at a time, folded into one step. The node's `output` gets
//! the list of the items' results in item order (never in the order they finished),
//! `set` then runs once with that list as `result`, and the run goes on along the
//! node's edges as after any step. What else an item's work writes (an `mcp_call`'s
//! audit records) is kept, item after item.

use super::kinds::Step;
use super::kinds::cx::NodeCx;
use super::runner::Runner;
use super::state::describe;
use crate::graph::{Body, FieldId, MapPlan, Node};
use futures_util::StreamExt;
use serde_json::{Value as Json, json};
use std::sync::Arc;

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
        let runs = items.into_iter().map(|item| {
            let cx = NodeCx {
                stop: cx.stop,
                graph: cx.graph,
                state: cx.state,
                node: cx.node,
                run: cx.run.clone(),
                llm: cx.llm,
                tools: cx.tools,
                store: cx.store,
                events: cx.events,
                item: Some((map.var.clone(), Arc::new(item))),
            };
            async move { self.run_kind(&cx).await }
        });
        let steps: Vec<Step> = futures_util::stream::iter(runs)
            .buffered(map.concurrency.max(1))
            .collect()
            .await;
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
            // The checker allows a map only on kinds that neither pause nor end a run.
            Step::Pause { .. } | Step::FailRun { .. } => {
                return Step::Fail {
                    message: format!(
                        "item {} of {count}: a mapped node cannot pause or end the run",
                        i + 1
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
