//! MCP sampling: a server that the graph lets (`[servers.x] sampling = true`) asks for a
//! completion (`sampling/createMessage`), and the graph's own model answers it, through
//! the run's LLM client (so a recording, a replay and the key stay what the run uses).

use crate::llm::{LlmClient, LlmRequest, ToolChoice};
use serde_json::{Value as Json, json};
use std::sync::{Arc, Mutex};

/// The model that answers a server's sampling requests: the run's client, and the
/// graph's model (`[llm] model`; none: the server's first model hint).
#[derive(Clone)]
pub struct Sampler {
    pub llm: Arc<dyn LlmClient>,
    pub model: Option<String>,
}

/// The sampler of whichever run uses the client now, shared by its servers' sessions.
#[derive(Clone, Default)]
pub(crate) struct SamplerSlot(Arc<Mutex<Option<Sampler>>>);

impl SamplerSlot {
    pub(crate) fn set(&self, sampler: Option<Sampler>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = sampler;
    }

    fn get(&self) -> Option<Sampler> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The answer to a `sampling/createMessage` of `server` (its params as JSON): the
    /// result as JSON, or why there is none.
    pub(crate) async fn answer(&self, server: &str, params: Json) -> Result<Json, String> {
        let sampler = self
            .get()
            .ok_or("no model answers sampling requests in this run")?;
        let request = request(server, &params, sampler.model.as_deref())?;
        let reply = sampler
            .llm
            .complete(&request, &|_| {})
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({
            "role": "assistant",
            "content": { "type": "text", "text": reply.content.unwrap_or_default() },
            "model": reply.model.unwrap_or(request.model),
            "stopReason": match reply.finish_reason.as_deref() {
                Some("length") => "maxTokens",
                Some("stop") | None => "endTurn",
                Some(other) => other,
            },
        }))
    }
}

/// A sampling request as the chat request the graph's model is sent: the system prompt,
/// the messages (text, and images as data URLs), the token limit, the temperature and
/// the stop sequences the server asked for.
fn request(server: &str, params: &Json, model: Option<&str>) -> Result<LlmRequest, String> {
    let model = model
        .map(str::to_string)
        .or_else(|| {
            params
                .pointer("/modelPreferences/hints/0/name")
                .and_then(Json::as_str)
                .map(str::to_string)
        })
        .ok_or("the graph names no model (`[llm] model`) to answer sampling requests")?;
    let mut messages = Vec::new();
    if let Some(system) = params.get("systemPrompt").and_then(Json::as_str) {
        messages.push(json!({ "role": "system", "content": system }));
    }
    for m in params
        .get("messages")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Json::as_str).unwrap_or("user");
        // One content block, or a list of them (newer protocol versions).
        let blocks: Vec<&Json> = match m.get("content") {
            Some(Json::Array(list)) => list.iter().collect(),
            Some(one) => vec![one],
            None => Vec::new(),
        };
        let parts: Vec<Json> = blocks
            .into_iter()
            .filter_map(|b| match b.get("type").and_then(Json::as_str) {
                Some("text") => Some(json!({ "type": "text", "text": b.get("text")? })),
                Some("image") => Some(json!({
                    "type": "image_url",
                    "image_url": { "url": format!(
                        "data:{};base64,{}",
                        b.get("mimeType")?.as_str()?,
                        b.get("data")?.as_str()?
                    ) },
                })),
                _ => None,
            })
            .collect();
        let content = match parts.as_slice() {
            [one] if one["type"] == "text" => one["text"].clone(),
            _ => Json::Array(parts),
        };
        messages.push(json!({ "role": role, "content": content }));
    }
    Ok(LlmRequest {
        node: format!("sampling:{server}").into(),
        model,
        messages,
        schema: None,
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        temperature: params.get("temperature").and_then(Json::as_f64),
        stream: false,
        strict: true,
        parallel_tool_calls: None,
        sampling: crate::spec::Sampling {
            max_tokens: params
                .get("maxTokens")
                .and_then(Json::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            stop: params
                .get("stopSequences")
                .and_then(Json::as_array)
                .map(|s| {
                    s.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            ..Default::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampling_request_becomes_a_chat_request() {
        let r = request(
            "s",
            &json!({
                "systemPrompt": "Be brief.",
                "messages": [
                    { "role": "user", "content": { "type": "text", "text": "Hi" } },
                    { "role": "user", "content": [
                        { "type": "text", "text": "This:" },
                        { "type": "image", "mimeType": "image/png", "data": "iVBOR" },
                    ] },
                ],
                "maxTokens": 100,
                "temperature": 0.5,
                "stopSequences": ["END"],
                "modelPreferences": { "hints": [{ "name": "claude-3" }] },
            }),
            Some("gpt-4o"),
        )
        .unwrap();
        assert_eq!(r.model, "gpt-4o");
        assert_eq!(
            r.messages,
            [
                json!({ "role": "system", "content": "Be brief." }),
                json!({ "role": "user", "content": "Hi" }),
                json!({ "role": "user", "content": [
                    { "type": "text", "text": "This:" },
                    { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBOR" } },
                ] }),
            ]
        );
        assert_eq!(
            (r.sampling.max_tokens, r.sampling.stop, r.temperature),
            (Some(100), vec!["END".to_string()], Some(0.5))
        );
        // No model of the graph's: the server's first hint.
        let r = request(
            "s",
            &json!({ "modelPreferences": { "hints": [{ "name": "claude-3" }] } }),
            None,
        )
        .unwrap();
        assert_eq!(r.model, "claude-3");
        assert!(request("s", &json!({}), None).is_err());
    }
}
