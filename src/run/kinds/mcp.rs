//! `mcp_call`: renders tool names and arguments from state, calls the tools in order
//! and writes their results. Tools are reached through the tool port
//! ([`crate::tool::ToolClient`]), so tests plug scripted doubles and the MCP client
//! plugs in the same way.

use super::Step;
use super::cx::NodeCx;
use crate::graph::{McpBody, ToolName};
use crate::run::event::Event;
use crate::tool::{ToolError, ToolReply, ToolRequest};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) async fn run(cx: &NodeCx<'_>, body: &McpBody) -> Step {
    let mut writes = Vec::new();
    // Audit records stand even when the node fails: the trail keeps every attempt.
    let mut audits = Vec::new();
    let mut results = Vec::new();
    for (call_index, call) in body.calls.iter().enumerate() {
        let tool = match &call.tool {
            ToolName::Fixed(t) => t.clone(),
            ToolName::Template(t) => match cx.render(t) {
                Ok(t) => t.trim().to_string(),
                Err(e) => {
                    return Step::Fail {
                        tokens: 0,
                        message: format!("tool name: {e}"),
                        writes: audits,
                    };
                }
            },
        };
        let arguments = match &call.args {
            Some(tpl) => match cx.value(tpl) {
                Ok(a) => a,
                Err(e) => {
                    return Step::Fail {
                        tokens: 0,
                        message: format!("arguments of `{tool}`: {e}"),
                        writes: audits,
                    };
                }
            },
            None => json!({}),
        };
        // `THREAD/RUN/STEP/CALL[/ITEM]`, made for every call: pieces pushed, not
        // formatted.
        let mut idempotency_key = String::with_capacity(cx.run.thread.len() + 24);
        idempotency_key.push_str(&cx.run.thread);
        for n in [cx.run.run, cx.run.step, call_index as u64]
            .into_iter()
            .chain(cx.item_index.map(|i| i as u64))
        {
            idempotency_key.push('/');
            idempotency_key.push_str(itoa::Buffer::new().format(n));
        }
        let reply = match self::call(
            cx,
            body,
            &tool,
            arguments,
            idempotency_key,
            None,
            &mut audits,
        )
        .await
        {
            Ok(reply) => reply,
            Err(()) => {
                return Step::Abandoned {
                    tokens: 0,
                    writes: audits,
                };
            }
        };
        match reply {
            Ok(r) if r.is_error => {
                return Step::Fail {
                    tokens: 0,
                    message: format!("`{tool}` reported an error: {}", summary(&r.content)),
                    writes: audits,
                };
            }
            Ok(r) => {
                let content = Arc::new(r.content);
                if let Some(out) = call.output {
                    writes.push((out, content.clone()));
                }
                results.push(content);
            }
            Err(e) => return not_made(cx, body, &tool, e, audits),
        }
    }
    writes.extend(audits);
    let result = if body.multi {
        Arc::new(Json::Array(
            results.into_iter().map(Arc::unwrap_or_clone).collect(),
        ))
    } else {
        results.pop().unwrap_or_else(|| Arc::new(Json::Null))
    };
    Step::done(result, writes)
}

/// The step of a call that could not be made: a pause when the server asks a person
/// (the answer comes back to it when the node runs again on resume), else a failure
/// naming the tool. `audits` stand either way.
pub(super) fn not_made(
    cx: &NodeCx<'_>,
    body: &McpBody,
    tool: &str,
    e: ToolError,
    audits: Vec<(crate::graph::FieldId, Arc<Json>)>,
) -> Step {
    if let Some(asked) = e.asked {
        let server = &cx.graph.servers[body.server];
        let mut payload = json!({ "kind": "elicitation", "server": server.name, "tool": tool });
        if let (Json::Object(p), Json::Object(a)) = (&mut payload, asked) {
            p.extend(a);
        }
        return Step::Pause { payload };
    }
    // The MCP client's messages name the tool already; other clients' may not.
    let message = if e.message.contains(&format!("`{tool}`")) {
        e.message
    } else {
        format!("`{tool}`: {e}")
    };
    Step::Fail {
        tokens: 0,
        message,
        writes: audits,
    }
}

/// Calls `tool` of the node's server with `arguments`, again per the node's `retry`
/// while the failure is transient, telling each attempt (a `tool_call` event, an audit
/// record in `audits`). `Err` when a stop came during a wait between attempts.
pub(super) async fn call(
    cx: &NodeCx<'_>,
    body: &McpBody,
    tool: &str,
    arguments: Json,
    idempotency_key: String,
    call_id: Option<&str>,
    audits: &mut Vec<(crate::graph::FieldId, Arc<Json>)>,
) -> Result<Result<ToolReply, ToolError>, ()> {
    let server = &cx.graph.servers[body.server];
    let mut request = ToolRequest {
        node: Some(cx.node.name.clone()),
        timeout: cx.node.timeout,
        answer: cx.answer.clone(),
        ..ToolRequest::new(server.clone(), tool.to_string(), arguments, idempotency_key)
    };
    let retry = cx.node.retry.clone();
    let attempts = retry.as_ref().map_or(1, |r| r.attempts.max(1));
    let mut attempt = 0;
    loop {
        attempt += 1;
        // Asked right before each call (each item of a mapped node, each of a list of
        // calls, each retry): the nearer the question to the call, the smaller the
        // moment in which a process stopped past its lease could still make the call
        // once it wakes. Refused, the node fails, and its step's checkpoint is refused
        // too (the claim's token is not the thread's any more): the run ends there.
        // The answer says until when the claim holds: a call the tool client could not
        // send by then was not sent, and is made once the claim is confirmed again.
        let start = Instant::now();
        let mut unsent = 0;
        let reply = loop {
            match cx.claims.fence(&cx.run.thread).await {
                Ok(fence) => (request.fencing_token, request.send_by) = (fence.token, fence.until),
                Err(e) => {
                    return Ok(Err(ToolError {
                        message: e.to_string(),
                        transient: false,
                        asked: None,
                        unsent: false,
                    }));
                }
            }
            match cx.tools.call(&request).await {
                // Late again and again (a server that takes longer than a lease to
                // start, each time): the node fails saying so.
                Err(e) if e.unsent && unsent < 2 => unsent += 1,
                other => break other,
            }
        };
        let duration_ms = start.elapsed().as_millis() as u64;
        cx.emit(|| Event::ToolCall {
            node: cx.node.name.clone(),
            server: server.name.clone(),
            tool: tool.to_string(),
            arguments: request.arguments.clone(),
            duration_ms,
            attempt,
            is_error: !matches!(&reply, Ok(r) if !r.is_error),
            result: cx.llm_content.then(|| match &reply {
                Ok(r) => r.content.clone(),
                Err(e) => json!({ "error": e.message }),
            }),
            call_id: call_id.map_or_else(|| request.idempotency_key.clone(), str::to_string),
        });
        if let Some(audit) = body.audit {
            let record = json!({
                "tool": tool,
                "arguments": request.arguments,
                "result": match &reply { Ok(r) => r.content.clone(), Err(e) => json!({ "error": e.message }) },
                "is_error": !matches!(&reply, Ok(r) if !r.is_error),
                "duration_ms": duration_ms,
                "attempt": attempt,
            });
            audits.push((audit, Arc::new(record)));
        }
        match reply {
            Err(e) if e.transient && attempt < attempts => {
                // The call that ran is done (a tool may have acted); a stop asked
                // meanwhile, or during the wait, runs no other try.
                let r = retry.as_ref().expect("attempts > 1 means a retry policy");
                let stopped = cx.stop.is_asked()
                    || tokio::select! {
                        () = tokio::time::sleep(backoff(r, attempt)) => false,
                        () = cx.stop.asked() => true,
                    };
                if stopped {
                    return Err(());
                }
            }
            other => return Ok(other),
        }
    }
}

/// Exponential backoff for attempt `n` (1-based), capped, with optional jitter.
pub(crate) fn backoff(r: &crate::graph::Retry, n: u32) -> Duration {
    let base = r
        .backoff
        .saturating_mul(1u32 << (n - 1).min(16))
        .min(r.max_backoff);
    if !r.jitter {
        return base;
    }
    // Jitter from the clock's nanoseconds: enough to spread retries, no RNG needed.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base.mul_f64(0.5 + f64::from(nanos % 1000) / 2000.0)
}

fn summary(v: &Json) -> String {
    let text = match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.len() > 200 {
        format!(
            "{}...",
            &text[..text.char_indices().nth(197).map_or(text.len(), |(i, _)| i)]
        )
    } else {
        text
    }
}
