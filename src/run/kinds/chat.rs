//! `llm_chat`: the model answers the conversation in a `messages` field with plain
//! text, streamed as it comes when `stream = true`, and the answer joins the field as
//! an AI message: its text, the model and finish reason (`response_metadata`) and the
//! tokens (`usage_metadata`), as LangChain's chat models write them. Its id is the one
//! its streamed text carried (see `run::message_ids`).
//!
//! One execution: render the system prompt (and the prompt, when the node has one,
//! sent last and not kept); send the system prompt, the conversation and the prompt;
//! transport failures are retried as for `llm_structured` (`retry`, `timeout`); a
//! reply with no text is asked again, up to `retries` times, then the node fails.

use super::Step;
use super::cx::NodeCx;
use super::llm::{invoked, request, send};
use crate::graph::LlmBody;
use crate::llm::{LlmError, LlmReply, ToolChoice};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::Instant;

pub(crate) async fn run(cx: &NodeCx<'_>, body: &LlmBody) -> Step {
    let (mut request, offer) = match request(cx, body).await {
        Ok(made) => made,
        Err(message) => return Step::fail(message),
    };
    // With tools, the model may call any number of them (one, with
    // `parallel_tool_calls = false`), or answer.
    let offer = offer.parallel(body.parallel_tool_calls != Some(false));
    request.tool_choice = ToolChoice::Auto;
    let mut tokens = 0u64;
    let mut problem = String::new();
    for attempt in 1..=body.retries.saturating_add(1) {
        let start = Instant::now();
        let reply = match send(cx, &request, None).await {
            Ok(r) => r,
            Err((LlmError::Stopped, _)) => {
                return Step::Abandoned {
                    tokens,
                    writes: Vec::new(),
                };
            }
            Err((e, tries)) => {
                return Step::Fail {
                    message: if tries > 1 {
                        format!("{e} (after {tries} attempts)")
                    } else {
                        e.to_string()
                    },
                    tokens,
                    writes: Vec::new(),
                };
            }
        };
        tokens = tokens.saturating_add(reply.tokens_in.saturating_add(reply.tokens_out));
        invoked(cx, &request, &reply, attempt, start);
        if !reply.tool_calls.is_empty() {
            // Each call's arguments checked against its tool's schema before anything
            // is called; a refused call is asked again, saying why.
            match offer.judge(&reply) {
                Ok(verdict) => {
                    let message = ai_message(
                        reply.content.as_deref().unwrap_or(""),
                        &request.model,
                        &reply,
                        called(&reply, &verdict.output),
                    );
                    return answered(body, message, tokens);
                }
                Err(why) => {
                    problem = why.clone();
                    request.messages.extend([
                        json!({ "role": "assistant", "content": reply.content.clone().unwrap_or_default() }),
                        json!({ "role": "user", "content": format!("Your tool call was refused: {why}. Call again, or answer in plain text.") }),
                    ]);
                    continue;
                }
            }
        }
        match reply.content.as_deref().filter(|t| !t.trim().is_empty()) {
            Some(text) => {
                let message = ai_message(text, &request.model, &reply, Vec::new());
                return answered(body, message, tokens);
            }
            None => {
                problem = match &reply.refusal {
                    Some(r) => format!("the model refused: {r}"),
                    None => "the model's reply has no text".into(),
                };
                request.messages.extend([
                    json!({ "role": "assistant", "content": reply.content.clone().unwrap_or_default() }),
                    json!({ "role": "user", "content": "Your reply was empty. Answer the conversation in plain text." }),
                ]);
            }
        }
    }
    let replies = body.retries.saturating_add(1);
    Step::Fail {
        message: format!(
            "{problem} (after {replies} {})",
            if replies == 1 { "reply" } else { "replies" }
        ),
        tokens,
        writes: Vec::new(),
    }
}

/// The node's step: the AI message joins its conversation, and is its result.
fn answered(body: &LlmBody, message: Json, tokens: u64) -> Step {
    let message = Arc::new(message);
    Step::Done {
        result: message.clone(),
        writes: vec![(body.output, message)],
        route: None,
        finish: None,
        tokens,
    }
}

/// The reply as the AI message LangChain's chat models write (its keys as a front end
/// made for LangGraph reads them).
fn ai_message(text: &str, model: &str, reply: &LlmReply, tool_calls: Vec<Json>) -> Json {
    json!({
        "role": "assistant",
        "content": text,
        "additional_kwargs": {},
        "name": null,
        "tool_calls": tool_calls,
        "invalid_tool_calls": [],
        "response_metadata": {
            "model_name": model,
            "finish_reason": reply.finish_reason,
        },
        "usage_metadata": {
            "input_tokens": reply.tokens_in,
            "output_tokens": reply.tokens_out,
            "total_tokens": reply.tokens_in.saturating_add(reply.tokens_out),
        },
    })
}

/// The reply's tool calls as LangChain writes them (`{name, args, id, type}`), their
/// arguments as judged (`{calls: [{tool, arguments}]}`, in the reply's order).
fn called(reply: &LlmReply, judged: &Json) -> Vec<Json> {
    // Several calls judged together, or one alone (`{tool, arguments}`).
    let judged = match judged["calls"].as_array() {
        Some(calls) => calls.as_slice(),
        None => std::slice::from_ref(judged),
    };
    reply
        .tool_calls
        .iter()
        .zip(judged)
        .map(|(c, j)| {
            json!({
                "name": c.name,
                "args": j["arguments"],
                "id": c.id,
                "type": "tool_call",
            })
        })
        .collect()
}
