//! MCP sampling: a server that the graph lets (`[servers.x] sampling = true`) asks for a
//! completion (`sampling/createMessage`), and the graph's own model answers it, through
//! the run's LLM client (so a recording, a replay and the key stay what the run uses).
//! A request may offer the model tools (`tools`, `toolChoice`): the model's calls come
//! back as `tool_use` blocks, and the server's next request carries their
//! `tool_result`s, which the model reads as the chat API's tool messages.

use crate::llm::{LlmClient, LlmRequest, ToolChoice, ToolSpec};
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
        if !reply.tool_calls.is_empty() {
            // The calls as `tool_use` blocks, after the text the model wrote beside them.
            let mut content: Vec<Json> = reply
                .content
                .iter()
                .filter(|t| !t.is_empty())
                .map(|t| json!({ "type": "text", "text": t }))
                .collect();
            for c in &reply.tool_calls {
                let input: Json = serde_json::from_str(&c.arguments)
                    .map_err(|e| format!("the model's call of `{}` is not JSON: {e}", c.name))?;
                content.push(
                    json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": input }),
                );
            }
            return Ok(json!({
                "role": "assistant",
                "content": content,
                "model": reply.model.unwrap_or(request.model),
                "stopReason": "toolUse",
            }));
        }
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

/// The text of a tool result's content blocks (its structured content when it has one),
/// as the model reads a tool's answer.
fn result_text(block: &Json) -> String {
    if let Some(s) = block.get("structuredContent").filter(|s| !s.is_null()) {
        return s.to_string();
    }
    block
        .get("content")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Json::as_str))
        .collect::<Vec<_>>()
        .join("\n")
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
        // The model's calls (`tool_use`, in an assistant message) and their results
        // (`tool_result`, in a user message) in the chat API's form: an assistant
        // message with `tool_calls`, then a `tool` message per result.
        let calls: Vec<Json> = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Json::as_str) == Some("tool_use"))
            .map(|b| {
                json!({
                    "id": b.get("id").cloned().unwrap_or(Json::Null),
                    "type": "function",
                    "function": {
                        "name": b.get("name").cloned().unwrap_or(Json::Null),
                        "arguments": b.get("input").map_or_else(|| "{}".to_string(), Json::to_string),
                    },
                })
            })
            .collect();
        for b in blocks
            .iter()
            .filter(|b| b.get("type").and_then(Json::as_str) == Some("tool_result"))
        {
            messages.push(json!({
                "role": "tool",
                "tool_call_id": b.get("toolUseId").cloned().unwrap_or(Json::Null),
                "content": result_text(b),
            }));
        }
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
        if !calls.is_empty() {
            let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            let text = (!text.is_empty()).then(|| text.join("\n"));
            messages.push(json!({ "role": "assistant", "content": text, "tool_calls": calls }));
            continue;
        }
        if parts.is_empty() {
            // A message of tool results only: they are in as tool messages.
            continue;
        }
        let content = match parts.as_slice() {
            [one] if one["type"] == "text" => one["text"].clone(),
            _ => Json::Array(parts),
        };
        messages.push(json!({ "role": role, "content": content }));
    }
    // The tools offered, unless the server says the model may call none now.
    let mode = params.pointer("/toolChoice/mode").and_then(Json::as_str);
    let tools: Vec<ToolSpec> = if mode == Some("none") {
        Vec::new()
    } else {
        params
            .get("tools")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                Some(ToolSpec {
                    name: t.get("name")?.as_str()?.to_string(),
                    description: t
                        .get("description")
                        .and_then(Json::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    parameters: t
                        .get("inputSchema")
                        .cloned()
                        .unwrap_or_else(|| json!({ "type": "object" })),
                })
            })
            .collect()
    };
    Ok(LlmRequest {
        tool_choice: if mode == Some("required") && !tools.is_empty() {
            ToolChoice::Required
        } else {
            ToolChoice::Auto
        },
        tools,
        temperature: params.get("temperature").and_then(Json::as_f64),
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
        ..LlmRequest::new(format!("sampling:{server}"), model, messages)
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

    /// The second request of a tool loop: the tools offered, the model's call as a
    /// `tool_use` and its `tool_result`, in the chat API's form.
    #[test]
    fn a_sampling_request_with_tools_and_their_results() {
        let params = json!({
            "messages": [
                { "role": "user", "content": { "type": "text", "text": "Weather in Paris?" } },
                { "role": "assistant", "content": [
                    { "type": "text", "text": "Looking." },
                    { "type": "tool_use", "id": "c1", "name": "weather", "input": { "city": "Paris" } },
                ] },
                { "role": "user", "content": [
                    { "type": "tool_result", "toolUseId": "c1", "content": [{ "type": "text", "text": "Sunny" }] },
                ] },
            ],
            "tools": [{ "name": "weather", "description": "The weather", "inputSchema": { "type": "object" } }],
            "toolChoice": { "mode": "required" },
            "maxTokens": 50,
        });
        let r = request("s", &params, Some("m")).unwrap();
        assert_eq!(
            r.messages,
            [
                json!({ "role": "user", "content": "Weather in Paris?" }),
                json!({ "role": "assistant", "content": "Looking.", "tool_calls": [
                    { "id": "c1", "type": "function", "function": { "name": "weather", "arguments": "{\"city\":\"Paris\"}" } },
                ] }),
                json!({ "role": "tool", "tool_call_id": "c1", "content": "Sunny" }),
            ]
        );
        assert_eq!(
            (r.tools.len(), r.tools[0].name.as_str(), r.tool_choice),
            (1, "weather", ToolChoice::Required)
        );
        // `none`: no tool is offered this time.
        let mut none = params.clone();
        none["toolChoice"] = json!({ "mode": "none" });
        assert!(request("s", &none, Some("m")).unwrap().tools.is_empty());
    }
}
