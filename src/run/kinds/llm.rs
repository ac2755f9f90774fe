//! `llm_structured`: renders the prompt, asks the model for JSON fitting the node's
//! schema (or for one call of the tools it offers), judges the reply, asks again with
//! the problems fed back, then falls back.
//!
//! One execution of the node:
//!
//! 1. Render the system and user prompts; build the messages (system, history, user).
//! 2. Build the [`Offer`]: the schema as a strict `response_format`, and with `tools`
//!    the server's tools (from `tools/list`, narrowed to `only`) plus the graph's
//!    pseudo tools as function tools.
//! 3. With `cache`, look the key up in the run's store; a hit is the output, and no
//!    request is made.
//! 4. Up to `retries + 1` times: send the request (transport failures are retried per
//!    the node's `retry`, honouring `Retry-After`, each try within `timeout`), judge
//!    the reply; a valid one is written (and cached), an invalid one goes back to the
//!    model as a correction in the next request.
//! 5. When every try failed: the `fallback` value, else the node fails (`on_error`).
//!
//! The model is reached through [`LlmClient`], so tests plug scripted doubles and the
//! OpenAI-compatible client, recordings and replays plug in the same way.

use super::Step;
use super::cx::NodeCx;
use crate::graph::{LlmBody, Retry};
use crate::llm::offer::{Offer, PseudoSpec, Verdict};
use crate::llm::tap::FieldTap;
use crate::run::event::Event;
use crate::run::kinds::mcp::backoff;
use crate::value::from_json;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::llm::{LlmError, LlmReply, LlmRequest};

/// Transport retries of a node without `retry`: a model endpoint is worth a second
/// and third try by default (rate limits, restarts), unlike a tool with side effects.
fn default_retry() -> Retry {
    Retry {
        attempts: 3,
        backoff: Duration::from_millis(500),
        max_backoff: Duration::from_secs(10),
        jitter: true,
    }
}

/// A `Retry-After` longer than this ends the retries: the run should not sit idle for
/// longer than this on one request.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

pub(crate) async fn run(cx: &NodeCx<'_>, body: &LlmBody) -> Step {
    let fail = Step::fail;
    let (mut request, offer) = match request(cx, body).await {
        Ok(r) => r,
        Err(message) => return fail(message),
    };
    let cache = match &body.cache {
        Some((expr, ttl)) => match cache_key(cx, body, *expr, &request) {
            Ok(key) => Some((key, *ttl)),
            Err(message) => return fail(message),
        },
        None => None,
    };
    if let Some((key, _)) = &cache {
        let start = Instant::now();
        match cx.cache.cache_get(key, now_ms()).await {
            Ok(Some(hit)) => {
                if let Some(step) = from_cache(cx, body, &request.model, hit, start) {
                    return step;
                }
            }
            Ok(None) => {}
            Err(e) => return fail(format!("cache: {e}")),
        }
    }
    let mut tokens = 0;
    let mut last_text: Option<String> = None;
    let mut last_error = String::new();
    for attempt in 1..=body.retries.saturating_add(1) {
        let start = Instant::now();
        let reply = match send(cx, &request, body.stream_field.as_deref()).await {
            Ok(r) => r,
            Err((LlmError::Stopped, _)) => {
                return Step::Abandoned {
                    tokens,
                    writes: Vec::new(),
                };
            }
            Err((e, tries)) => {
                let message = if tries > 1 {
                    format!("{e} (after {tries} attempts)")
                } else {
                    e.to_string()
                };
                // Only a model that answered badly or could not be reached falls back; a
                // request that cannot be made (or replayed) is a mistake to see.
                let model_failure = matches!(
                    e,
                    LlmError::Status { .. }
                        | LlmError::Timeout(_)
                        | LlmError::Connection(_)
                        | LlmError::Protocol(_)
                        | LlmError::Stream(_)
                );
                if model_failure && body.fallback.is_some() {
                    last_error = message;
                    break;
                }
                return Step::Fail {
                    message,
                    tokens,
                    writes: Vec::new(),
                };
            }
        };
        tokens = tokens.saturating_add(reply.tokens_in.saturating_add(reply.tokens_out));
        invoked(cx, &request, &reply, attempt, start);
        match offer.judge(&reply) {
            Ok(verdict) => {
                if let Some((key, ttl)) = &cache {
                    let value = json!({
                        "output": verdict.output,
                        "pseudo": verdict.pseudo.map(|i| body.pseudo_tools[i].name.clone()),
                    });
                    let expires =
                        now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
                    if let Err(e) = cx.cache.cache_put(key, &value, expires).await {
                        return Step::Fail {
                            message: format!("cache: {e}"),
                            tokens,
                            writes: Vec::new(),
                        };
                    }
                }
                return done(body, verdict, tokens);
            }
            Err(problem) => {
                request.messages.extend(correction(&reply, &problem));
                last_error = problem;
                last_text = reply.content.or(reply.refusal);
            }
        }
    }
    if let Some(fallback) = body.fallback {
        // Seed 001's telemetry: a decision taken by the fallback is visible as such.
        cx.emit(|| Event::LlmFallback {
            node: cx.node.name.clone(),
            reason: last_error.clone(),
        });
        let result = last_text.map_or(Json::Null, Json::String);
        return match cx.eval_with(fallback, Some(from_json(result))) {
            Ok(v) => Step::Done {
                result: Arc::new(v.clone()),
                writes: vec![(body.output, Arc::new(v))],
                route: None,
                finish: None,
                tokens,
            },
            Err(e) => Step::Fail {
                message: format!("fallback: {e}"),
                tokens,
                writes: Vec::new(),
            },
        };
    }
    let replies = body.retries.saturating_add(1);
    Step::Fail {
        writes: Vec::new(),
        message: format!(
            "{last_error} (after {replies} {})",
            if replies == 1 { "reply" } else { "replies" }
        ),
        tokens,
    }
}

/// The first request of this execution, and what replies may be.
pub(super) async fn request(
    cx: &NodeCx<'_>,
    body: &LlmBody,
) -> Result<(LlmRequest, Offer), String> {
    let prompt = body
        .prompt
        .as_deref()
        .map(|p| cx.render(p))
        .transpose()
        .map_err(|e| format!("prompt: {e}"))?;
    let system = body
        .system
        .as_deref()
        .map(|s| cx.render(s))
        .transpose()
        .map_err(|e| format!("system prompt: {e}"))?;
    let model = body
        .model
        .clone()
        .or_else(|| cx.graph.llm.model.clone())
        .ok_or("no model: set `model` on the node or in `[llm]`")?;
    let model = cx.model(model)?;
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(json!({ "role": "system", "content": system }));
    }
    if let Some(h) = body.history {
        messages
            .extend(answer_every_call(history(cx.state.get(h)).map_err(
                |e| format!("history `{}`: {e}", cx.graph.field(h).name),
            )?));
    }
    if let Some(prompt) = prompt {
        messages.push(json!({ "role": "user", "content": prompt }));
    }
    let tools = match &body.tools {
        Some((server, only)) => {
            let server = &cx.graph.servers[*server];
            let mut tools = cx
                .tools
                .list_tools(server)
                .await
                .map_err(|e| format!("listing the tools of `{}`: {e}", server.name))?;
            if !only.is_empty() {
                if let Some(missing) = only.iter().find(|n| !tools.iter().any(|t| &t.name == *n)) {
                    return Err(format!(
                        "server `{}` has no tool `{missing}` (named in `tools.only`)",
                        server.name
                    ));
                }
                tools.retain(|t| only.contains(&t.name));
            }
            tools
        }
        None => Vec::new(),
    };
    let pseudo: Vec<PseudoSpec<'_>> = body
        .pseudo_tools
        .iter()
        .map(|p| PseudoSpec {
            name: &p.name,
            description: &p.description,
            schema: p.schema.as_deref(),
        })
        .collect();
    let schema = body.schema.clone().zip(body.validator.clone());
    let parallel = body.parallel_tool_calls == Some(true);
    let offer = Offer::new(schema, tools, &pseudo)?.parallel(parallel);
    let request = LlmRequest {
        node: cx.node.name.clone(),
        model,
        messages,
        schema: offer.schema().cloned(),
        tools: offer.specs(),
        tool_choice: offer.tool_choice(),
        temperature: body.temperature.or(cx.graph.llm.temperature),
        stream: body.stream,
        strict: body.strict,
        parallel_tool_calls: body.parallel_tool_calls,
        sampling: body.sampling.clone(),
    };
    Ok((request, offer))
}

/// `messages` with every tool call answered: a call left without its tool message (the
/// run was stopped or failed before the call was made, or a new input dropped the
/// approval it waited for) gets one saying so, as the chat API refuses a call that has
/// no answer.
fn answer_every_call(messages: Vec<Json>) -> Vec<Json> {
    let mut out = Vec::with_capacity(messages.len());
    let mut open: Vec<String> = Vec::new();
    let close = |open: &mut Vec<String>, out: &mut Vec<Json>| {
        for id in open.drain(..) {
            out.push(
                json!({ "role": "tool", "content": "This call was not made.", "tool_call_id": id }),
            );
        }
    };
    for m in messages {
        let role = m.get("role").and_then(Json::as_str);
        if role == Some("tool") {
            if let Some(id) = m.get("tool_call_id").and_then(Json::as_str) {
                open.retain(|o| o != id);
            }
        } else {
            close(&mut open, &mut out);
            if role == Some("assistant") {
                open = m
                    .get("tool_calls")
                    .and_then(Json::as_array)
                    .map(|c| {
                        c.iter()
                            .filter_map(|c| c.get("id").and_then(Json::as_str).map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
            }
        }
        out.push(m);
    }
    close(&mut open, &mut out);
    out
}

/// The history field as chat messages: Switchyard's message `id`s stay in the state,
/// and LangChain's content blocks (an image, a file) go as the chat API's parts.
fn history(value: &Json) -> Result<Vec<Json>, String> {
    match value {
        Json::Null => Ok(Vec::new()),
        Json::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, m)| match m {
                Json::Object(o) => {
                    let mut o = o.clone();
                    // What LangChain keeps beside a message is not the chat API's.
                    for key in [
                        "id",
                        "type",
                        "response_metadata",
                        "usage_metadata",
                        "additional_kwargs",
                        "invalid_tool_calls",
                        "tool_call_chunks",
                        "example",
                    ] {
                        o.remove(key);
                    }
                    // LangChain's empty keys, which the chat API refuses or ignores.
                    if o.get("name").is_some_and(Json::is_null) {
                        o.remove("name");
                    }
                    match o.get("tool_calls").and_then(Json::as_array) {
                        Some(c) if c.is_empty() => {
                            o.remove("tool_calls");
                        }
                        // LangChain's calls (`{name, args, id}`) as the chat API's.
                        Some(c) => {
                            let calls: Vec<Json> = c
                                .iter()
                                .map(|c| match c.get("function") {
                                    Some(_) => c.clone(),
                                    None => json!({
                                        "id": c["id"],
                                        "type": "function",
                                        "function": {
                                            "name": c["name"],
                                            "arguments": c.get("args").map_or_else(|| "{}".to_string(), Json::to_string),
                                        },
                                    }),
                                })
                                .collect();
                            o.insert("tool_calls".into(), Json::Array(calls));
                        }
                        None => {}
                    }
                    // A tool message is its content and the call it answers.
                    if o.get("role").and_then(Json::as_str) == Some("tool") {
                        o.remove("name");
                        o.remove("status");
                        o.remove("artifact");
                    }
                    if let Some(content) = o.get_mut("content")
                        && content.is_array()
                    {
                        *content = crate::llm::content::content_parts(content)
                            .map_err(|e| format!("message {}: {e}", i + 1))?;
                    }
                    Ok(Json::Object(o))
                }
                _ => Err(format!("message {} is not an object", i + 1)),
            })
            .collect(),
        _ => Err("not a list of messages".into()),
    }
}

/// Sends the request, retrying transport failures per the node's `retry`: exponential
/// backoff with jitter, or the server's `Retry-After` when it asks for longer. Each
/// try has the node's `timeout` (else `[llm] timeout`). A failure comes with the
/// number of tries made.
/// With `tap`, only that top-level string property of the streamed JSON is told as
/// text deltas.
pub(super) async fn send(
    cx: &NodeCx<'_>,
    request: &LlmRequest,
    key: Option<&str>,
) -> Result<LlmReply, (LlmError, u32)> {
    let policy = cx.node.retry.clone().unwrap_or_else(default_retry);
    let timeout = cx.node.timeout.unwrap_or(cx.graph.llm.timeout);
    let tap = key.map(|key| std::sync::Mutex::new(FieldTap::new(key)));
    // Whether this attempt has streamed text a reader may have shown.
    let streamed = std::sync::atomic::AtomicBool::new(false);
    let sink = |text: &str| {
        let text = match &tap {
            Some(t) => t.lock().unwrap_or_else(|p| p.into_inner()).push(text),
            None => text.to_string(),
        };
        if !text.is_empty() {
            streamed.store(true, std::sync::atomic::Ordering::Relaxed);
            cx.emit(|| Event::TextDelta {
                node: cx.node.name.clone(),
                text,
            })
        }
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        // Each try's JSON is read from its start.
        if let (Some(t), Some(key)) = (&tap, key) {
            *t.lock().unwrap_or_else(|p| p.into_inner()) = FieldTap::new(key);
        }
        // A request is abandoned when the run is asked to stop: it has no effect
        // but its cost, and the node runs again on the resume.
        let result = tokio::select! {
            r = tokio::time::timeout(timeout, cx.llm.complete(request, &sink)) => match r {
                Ok(r) => r,
                Err(_) => Err(LlmError::Timeout(timeout)),
            },
            () = cx.stop.asked() => return Err((LlmError::Stopped, attempt)),
        };
        match result {
            Ok(reply) => return Ok(reply),
            Err(e) if e.is_transient() && attempt < policy.attempts.max(1) => {
                let asked = e.retry_after().unwrap_or_default();
                if asked > MAX_RETRY_AFTER {
                    return Err((e, attempt));
                }
                let wait = backoff(&policy, attempt).max(asked);
                let discard = streamed.swap(false, std::sync::atomic::Ordering::Relaxed);
                cx.emit(|| Event::LlmRetry {
                    node: cx.node.name.clone(),
                    attempt,
                    error: e.to_string(),
                    wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    discard,
                });
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = cx.stop.asked() => return Err((LlmError::Stopped, attempt)),
                }
            }
            Err(e) => return Err((e, attempt)),
        }
    }
}

/// The messages that tell the model what was wrong with its reply. A tool call is
/// answered the way the chat API expects: the call, then a tool message per call id.
fn correction(reply: &LlmReply, problem: &str) -> Vec<Json> {
    if reply.tool_calls.is_empty() {
        let said = reply
            .content
            .clone()
            .or_else(|| reply.refusal.clone())
            .unwrap_or_default();
        return vec![
            json!({ "role": "assistant", "content": said }),
            json!({
                "role": "user",
                "content": format!("That reply is not valid: {problem}. Reply again, with the problem fixed."),
            }),
        ];
    }
    let calls: Vec<Json> = reply
        .tool_calls
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": { "name": c.name, "arguments": c.arguments },
            })
        })
        .collect();
    let mut messages = vec![json!({
        "role": "assistant",
        "content": reply.content,
        "tool_calls": calls,
    })];
    for c in &reply.tool_calls {
        messages.push(json!({
            "role": "tool",
            "tool_call_id": c.id,
            "content": format!("Not called: {problem}. Call again, with the problem fixed."),
        }));
    }
    messages
}

/// The cache key: SHA-256 of the rendered `cache.key`, the model, the hash of the
/// prompt templates (their text, so editing a prompt file starts afresh) and the hash
/// of the output schema and offered tools.
fn cache_key(
    cx: &NodeCx<'_>,
    body: &LlmBody,
    key: crate::graph::ExprId,
    request: &LlmRequest,
) -> Result<String, String> {
    let key = match cx
        .eval_with(key, None)
        .map_err(|e| format!("cache key: {e}"))?
    {
        Json::String(s) => s,
        other => other.to_string(),
    };
    let env = cx.graph.exprs.env();
    let mut prompts = String::new();
    for name in body.prompt.iter().chain(body.system.as_ref()) {
        let source = env
            .get_template(name)
            .map_err(|e| format!("cache key: {e}"))?
            .source()
            .to_string();
        prompts.push_str(&crate::llm::sha256_hex(source.as_bytes()));
    }
    let mut parts = json!([
        key,
        request.model,
        crate::llm::sha256_hex(prompts.as_bytes()),
        request.schema_hash()
    ]);
    // A mapped node's items share its `cache.key`: each is cached under its own item.
    if let (Some((_, item)), Json::Array(parts)) = (&cx.item, &mut parts) {
        parts.push((**item).clone());
    }
    Ok(crate::llm::sha256_hex(parts.to_string().as_bytes()))
}

/// A cache hit as the node's step; none when the entry no longer fits the node (a
/// pseudo tool it names is gone), which is then a miss.
fn from_cache(
    cx: &NodeCx<'_>,
    body: &LlmBody,
    model: &str,
    hit: Json,
    start: Instant,
) -> Option<Step> {
    let pseudo = match hit.get("pseudo") {
        None | Some(Json::Null) => None,
        Some(Json::String(name)) => Some(body.pseudo_tools.iter().position(|p| &p.name == name)?),
        Some(_) => return None,
    };
    let output = hit.get("output")?.clone();
    cx.emit(|| Event::LlmInvocation {
        node: cx.node.name.clone(),
        model: model.to_string(),
        tokens_in: 0,
        tokens_out: 0,
        cache_hit: true,
        latency_ms: start.elapsed().as_millis() as u64,
        attempt: 1,
        messages: None,
        reply: cx.llm_content.then(|| output.clone()),
        provider: None,
        endpoint: None,
        response_id: None,
        response_model: None,
        finish_reason: None,
    });
    Some(done(body, Verdict { output, pseudo }, 0))
}

/// Tells of one reply to `request`: its tokens and latency, and with content asked
/// for, the messages sent and what came back.
pub(super) fn invoked(
    cx: &NodeCx<'_>,
    request: &LlmRequest,
    reply: &LlmReply,
    attempt: u32,
    start: Instant,
) {
    cx.emit(|| Event::LlmInvocation {
        node: cx.node.name.clone(),
        model: request.model.clone(),
        tokens_in: reply.tokens_in,
        tokens_out: reply.tokens_out,
        cache_hit: false,
        latency_ms: start.elapsed().as_millis() as u64,
        attempt,
        messages: cx.llm_content.then(|| request.messages.clone()),
        reply: cx.llm_content.then(|| reply_content(reply)),
        provider: Some(cx.graph.llm.provider.name().to_string()),
        endpoint: cx.llm.endpoint(),
        response_id: reply.id.clone(),
        response_model: reply.model.clone(),
        finish_reason: reply.finish_reason.clone(),
    });
}

/// What a model answered, as an event shows it: its text (or refusal), and the tools
/// it called.
fn reply_content(reply: &crate::llm::LlmReply) -> Json {
    json!({
        "content": reply.content,
        "refusal": reply.refusal,
        "tool_calls": reply
            .tool_calls
            .iter()
            .map(|c| json!({ "name": c.name, "arguments": c.arguments }))
            .collect::<Vec<_>>(),
    })
}

fn done(body: &LlmBody, verdict: Verdict, tokens: u64) -> Step {
    let route = verdict.pseudo.map(|i| {
        let p = &body.pseudo_tools[i];
        (p.to, p.name.clone())
    });
    let output = Arc::new(verdict.output);
    Step::Done {
        result: output.clone(),
        writes: vec![(body.output, output)],
        route,
        finish: None,
        tokens,
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
