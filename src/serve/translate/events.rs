//! The `events` stream mode's parts: LangChain's `astream_events` v2 envelope, as
//! LangGraph's server sends it, for the run, its nodes and their model and tool calls.

use super::Translator;
use crate::run::Event;
use serde_json::{Value as Json, json};

impl Translator {
    /// The run of the running node's model call, as `events` name it: a node that
    /// calls its model again (a tool loop) makes another.
    pub(super) fn model_run_id(&self) -> String {
        format!("{}:model:{}", self.task_id(), self.model_calls + 1)
    }

    /// The run's metadata, as LangGraph gives a task and an event.
    pub(super) fn run_meta(&self) -> Json {
        json!({
            "created_by": "system",
            "graph_id": self.assistant,
            "assistant_id": self.assistant,
            "run_attempt": 1,
            "thread_id": self.thread,
            "run_id": self.run_id,
        })
    }

    /// An `astream_events` v2 event: the run's own (`run_id` the run's: no parent) or
    /// a node's (a child of the run) or a node's model or tool call (a child of the
    /// node), with LangGraph's metadata.
    pub(super) fn lc_event(&self, event: &str, name: &str, id: &str, data: Json) -> Json {
        let mut metadata = self.run_meta();
        let (tags, parents) = if id == self.run_id {
            (json!([]), json!([]))
        } else if let Some(node) = &self.node {
            metadata["langgraph_step"] = json!(self.step);
            metadata["langgraph_node"] = json!(node);
            metadata["langgraph_triggers"] = json!([format!("branch:to:{node}")]);
            metadata["langgraph_path"] = json!(["__pregel_pull", node]);
            metadata["langgraph_checkpoint_ns"] = json!("");
            if id == self.task_id() {
                (
                    json!([format!("graph:step:{}", self.step)]),
                    json!([self.run_id]),
                )
            } else {
                metadata["checkpoint_ns"] = json!("");
                (json!(["seq:step:1"]), json!([self.run_id, self.task_id()]))
            }
        } else {
            (json!([]), json!([self.run_id]))
        };
        json!({
            "event": event,
            "name": name,
            "run_id": id,
            "tags": tags,
            "metadata": metadata,
            "parent_ids": parents,
            "data": data,
        })
    }
}

/// Whether `e` has an `astream_events` name of its own (the others are sent as
/// custom events).
pub(super) fn lc_named(e: &Event) -> bool {
    matches!(
        e,
        Event::RunStarted { .. }
            | Event::NodeStarted { .. }
            | Event::TextDelta { .. }
            | Event::LlmInvocation { .. }
            | Event::ToolCall { .. }
            | Event::RunFinished { .. }
            // Its end is the node's `on_chain_end`, sent with its checkpoint.
            | Event::NodeFinished { .. }
    )
}

/// A model's reply as the LangChain AI message `on_chat_model_end` carries: its text,
/// its tool calls, what it used.
pub(super) fn ai_message(
    reply: Option<&Json>,
    id: &str,
    model: &str,
    (tokens_in, tokens_out): (u64, u64),
) -> Json {
    let reply = reply.cloned().unwrap_or(Json::Null);
    let content = match &reply["content"] {
        Json::Null => Json::String(String::new()),
        other => other.clone(),
    };
    let calls: Vec<Json> = reply["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({ "name": c["name"], "args": c["arguments"], "id": c.get("id"), "type": "tool_call" }))
        .collect();
    json!({
        "content": content,
        "additional_kwargs": {},
        "response_metadata": { "model_name": model },
        "type": "ai",
        "name": null,
        "id": id,
        "tool_calls": calls,
        "invalid_tool_calls": [],
        "usage_metadata": {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": tokens_in.saturating_add(tokens_out),
        },
    })
}
