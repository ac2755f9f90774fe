//! `llm_structured`: renders the prompt, asks the model for JSON fitting the node's
//! schema, validates it, retries with the errors fed back, then falls back.
//!
//! The model is reached through [`LlmClient`], so tests plug scripted doubles and the
//! OpenAI-compatible client plugs in the same way.

use super::Step;
use crate::graph::LlmBody;
use crate::run::event::Event;
use crate::run::runner::NodeCx;
use crate::run::scope::from_json;
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::Instant;

/// One request to a chat model.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    pub node: Arc<str>,
    pub model: String,
    pub system: Option<String>,
    /// The chat history, shared with the state (not copied).
    pub history: Option<Arc<Json>>,
    pub prompt: String,
    /// Earlier replies of this node that failed validation, with the errors, so the
    /// model can correct itself.
    pub corrections: Vec<(String, String)>,
    pub schema: Option<Arc<Json>>,
    pub temperature: Option<f64>,
    pub stream: bool,
}

/// The model's answer.
#[derive(Debug, Clone, Default)]
pub struct LlmReply {
    /// The reply text (JSON when the model followed the schema).
    pub content: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct LlmError {
    pub message: String,
}

#[async_trait::async_trait]
pub trait LlmClient: Send + Sync {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmReply, LlmError>;
}

/// The client used when none was configured: every call fails with a clear message.
pub struct NoLlm;

#[async_trait::async_trait]
impl LlmClient for NoLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmReply, LlmError> {
        Err(LlmError {
            message: format!(
                "node `{}` needs an LLM client, and none is configured",
                request.node
            ),
        })
    }
}

pub(crate) async fn run(cx: &NodeCx<'_>, body: &LlmBody) -> Step {
    let render = |name: &str| cx.render(name);
    let prompt = match render(&body.prompt) {
        Ok(p) => p,
        Err(e) => {
            return Step::Fail {
                message: format!("prompt: {e}"),
                tokens: 0,
            };
        }
    };
    let system = match body.system.as_deref().map(render).transpose() {
        Ok(s) => s,
        Err(e) => {
            return Step::Fail {
                message: format!("system prompt: {e}"),
                tokens: 0,
            };
        }
    };
    let Some(model) = body.model.clone().or_else(|| cx.graph.llm.model.clone()) else {
        return Step::Fail {
            message: "no model: set `model` on the node or in `[llm]`".into(),
            tokens: 0,
        };
    };
    let mut request = LlmRequest {
        node: cx.node.name.clone(),
        model,
        system,
        history: body.history.map(|h| cx.state.values[h.0 as usize].clone()),
        prompt,
        corrections: Vec::new(),
        schema: body.schema.clone(),
        temperature: body.temperature.or(cx.graph.llm.temperature),
        stream: body.stream,
    };
    let mut tokens = 0;
    let mut last_text: Option<String> = None;
    let mut last_error = String::new();
    for attempt in 1..=body.retries + 1 {
        let start = Instant::now();
        let reply = cx.llm.complete(&request).await;
        let latency_ms = start.elapsed().as_millis() as u64;
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                last_error = e.message;
                break;
            }
        };
        tokens += reply.tokens_in + reply.tokens_out;
        cx.emit(|| Event::LlmInvocation {
            node: cx.node.name.clone(),
            model: request.model.clone(),
            tokens_in: reply.tokens_in,
            tokens_out: reply.tokens_out,
            cache_hit: false,
            latency_ms,
            attempt,
        });
        match parse(body, &reply.content) {
            Ok(value) => {
                drop(request);
                return Step::Done {
                    result: value.clone(),
                    writes: vec![(body.output, value)],
                    route: None,
                    finish: None,
                    tokens,
                };
            }
            Err(problem) => {
                last_error = problem.clone();
                request.corrections.push((reply.content.clone(), problem));
                last_text = Some(reply.content);
            }
        }
    }
    drop(request);
    if let Some(fallback) = body.fallback {
        let result = last_text.map_or(Json::Null, Json::String);
        return match cx.eval_with(fallback, Some(from_json(result))) {
            Ok(v) => Step::Done {
                result: v.clone(),
                writes: vec![(body.output, v)],
                route: None,
                finish: None,
                tokens,
            },
            Err(e) => Step::Fail {
                message: format!("fallback: {e}"),
                tokens,
            },
        };
    }
    Step::Fail {
        message: last_error,
        tokens,
    }
}

/// Parses a reply and validates it against the node's schema.
fn parse(body: &LlmBody, text: &str) -> Result<Json, String> {
    let value: Json =
        serde_json::from_str(text.trim()).map_err(|e| format!("the reply is not JSON: {e}"))?;
    if let Some(v) = &body.validator {
        let errors: Vec<String> = v.iter_errors(&value).map(|e| e.to_string()).collect();
        if !errors.is_empty() {
            return Err(format!(
                "the reply does not fit the schema: {}",
                errors.join("; ")
            ));
        }
    }
    Ok(value)
}

/// A reply whose text is the JSON of `value`, for doubles.
pub fn reply_json(value: Json) -> LlmReply {
    LlmReply {
        content: value.to_string(),
        tokens_in: 10,
        tokens_out: 5,
    }
}
