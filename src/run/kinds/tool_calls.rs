//! `mcp_call` with `tool_calls = "<messages field>"`: LangGraph's `ToolNode`. The last
//! AI message of the field asks for tool calls (its `tool_calls`, as an `llm_chat` node
//! with `tools` writes them); each is made on the node's server, in order, and its
//! result joins the field as a tool message carrying the call's id. A tool that
//! reports an error answers with a tool message saying so (`status: "error"`), for the
//! model to take into account, as LangGraph's does; a call that cannot be made (the
//! server is gone) fails the node, and a stop between attempts abandons it.

use super::Step;
use super::cx::NodeCx;
use super::mcp::{call, not_made};
use crate::graph::{FieldId, McpBody};
use crate::run::is_ai;
use crate::tool::ToolReply;
use serde_json::{Value as Json, json};
use std::sync::Arc;

pub(crate) async fn run(cx: &NodeCx<'_>, body: &McpBody, field: FieldId) -> Step {
    let name = &cx.graph.field(field).name;
    let messages = cx
        .state
        .get(field)
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // The calls of the last AI message that no tool message after it answers yet.
    let last_ai = messages.iter().rposition(is_ai);
    let answered: Vec<&str> = last_ai
        .map(|i| &messages[i + 1..])
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.get("tool_call_id").and_then(Json::as_str))
        .collect();
    let asked: Option<Vec<Json>> = last_ai
        .and_then(|i| messages[i].get("tool_calls"))
        .and_then(Json::as_array)
        .map(|c| {
            c.iter()
                .filter(|c| {
                    c.get("id")
                        .and_then(Json::as_str)
                        .is_none_or(|id| !answered.contains(&id))
                })
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty());
    let Some(asked) = asked else {
        return Step::fail(format!(
            "the last AI message in `{name}` asks for no tool call not answered yet; route here only when it does (`if = \"(messages | last).tool_calls\"` on the model's node)"
        ));
    };
    let mut answers = Vec::with_capacity(asked.len());
    let mut audits = Vec::new();
    for (i, c) in asked.iter().enumerate() {
        let (Some(tool), Some(id)) = (
            c.get("name").and_then(Json::as_str),
            c.get("id").and_then(Json::as_str),
        ) else {
            return Step::Fail {
                tokens: 0,
                message: format!("tool call {} in `{name}` has no `name` or `id`", i + 1),
                writes: audits,
            };
        };
        let arguments = c.get("args").cloned().unwrap_or_else(|| json!({}));
        let key = format!("{}/{}/{}/{i}", cx.run.thread, cx.run.run, cx.run.step);
        match call(cx, body, tool, arguments, key, Some(id), &mut audits).await {
            Err(()) => {
                return Step::Abandoned {
                    tokens: 0,
                    writes: audits,
                };
            }
            Ok(Ok(reply)) => answers.push(tool_message(id, tool, &reply)),
            Ok(Err(e)) => return not_made(cx, body, tool, e, audits),
        }
    }
    let result = Arc::new(Json::Array(answers));
    let mut writes = vec![(field, result.clone())];
    writes.extend(audits);
    Step::done(result, writes)
}

/// A tool's result as the tool message LangChain's MCP adapters write: the result's
/// text as content (a result with no text, as its value's JSON), the call's id, the
/// tool's name, whether it failed, and any `structuredContent` as the artifact.
fn tool_message(id: &str, tool: &str, reply: &ToolReply) -> Json {
    let text = match (&reply.text, &reply.content) {
        (Some(text), _) => text.clone(),
        (None, Json::String(s)) => s.clone(),
        (None, other) => other.to_string(),
    };
    let mut message = json!({
        "role": "tool",
        "content": text,
        "tool_call_id": id,
        "name": tool,
        "status": if reply.is_error { "error" } else { "success" },
    });
    if reply.structured {
        message["artifact"] = json!({ "structured_content": reply.content });
    }
    message
}
