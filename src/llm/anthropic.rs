//! [`AnthropicClient`]: Anthropic's own Messages API (`POST /v1/messages`), for
//! `[llm] provider = "anthropic"`. Its OpenAI-compatible endpoint ignores
//! `response_format`; here a node's schema becomes a tool the model is made to call
//! (as Anthropic's SDKs do structured output), whose input is the reply.
//!
//! The node's request is the same [`LlmRequest`] every client takes (chat messages in
//! OpenAI's shape); this client translates it: system messages into `system`, tool
//! calls into `tool_use` blocks and tool messages into `tool_result` blocks of a user
//! turn, images and PDFs into `image` and `document` blocks; and the answer back, a
//! streamed one from its server-sent events.

use super::http::retry_after;
use super::openai::{endpoint_from_env, error_chain, excerpt, schema_name};
use super::redact::Redactor;
use super::{
    DeltaSink, LlmClient, LlmError, LlmReply, LlmRequest, SetupError, ToolCall, ToolChoice,
};
use futures_util::StreamExt;
use serde_json::{Map, Value as Json, json};
use std::fmt;

/// The endpoint every request goes to when the environment names none.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The API version every request names (Anthropic's current one).
const VERSION: &str = "2023-06-01";
/// The reply's token limit when the node sets none: Anthropic requires one, and every
/// current model can write this many.
const DEFAULT_MAX_TOKENS: u32 = 4096;

pub struct AnthropicClient {
    http: reqwest::Client,
    base_url: String,
    key: String,
    redactor: Redactor,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl AnthropicClient {
    /// A client for `base_url` (`https://api.anthropic.com`, or a proxy's), with
    /// `api_key` sent as `x-api-key` (none sent when empty). `key_var` names where the
    /// key came from, for error messages.
    pub fn new(base_url: &str, api_key: &str, key_var: &str) -> Result<Self, SetupError> {
        if reqwest::header::HeaderValue::from_str(api_key).is_err() {
            return Err(SetupError::BadKey {
                var: key_var.into(),
            });
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(crate::tool::USER_AGENT)
            .build()
            .map_err(|e| SetupError::Http(e.to_string()))?;
        Ok(AnthropicClient {
            http,
            base_url: base_url.trim().trim_end_matches('/').to_string(),
            key: api_key.to_string(),
            redactor: Redactor::new(api_key),
        })
    }

    /// A client for the endpoint named by `base_url_var` (Anthropic's when unset) and
    /// the key in `key_var`.
    pub fn from_env(base_url_var: &str, key_var: &str) -> Result<Self, SetupError> {
        let base_url = endpoint_from_env(base_url_var, ANTHROPIC_BASE_URL)?;
        let key = std::env::var(key_var).unwrap_or_default();
        Self::new(&base_url, &key, key_var)
    }

    /// The endpoint's `/v1/messages` (a base URL that already ends in `/v1` is taken
    /// as it is).
    fn url(&self) -> String {
        if self.base_url.ends_with("/v1") {
            format!("{}/messages", self.base_url)
        } else {
            format!("{}/v1/messages", self.base_url)
        }
    }

    async fn send(&self, body: &Json) -> Result<reqwest::Response, LlmError> {
        let r = |s: &str| self.redactor.apply(s);
        let mut request = self
            .http
            .post(self.url())
            .header("anthropic-version", VERSION)
            .header("content-type", "application/json")
            .body(body.to_string());
        if !self.key.is_empty() {
            let mut value = reqwest::header::HeaderValue::from_str(&self.key)
                .map_err(|_| LlmError::Request("the API key is not a header value".into()))?;
            value.set_sensitive(true);
            request = request.header("x-api-key", value);
        }
        let response = request
            .send()
            .await
            .map_err(|e| LlmError::Connection(r(&error_chain(&e))))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let body = response.bytes().await.unwrap_or_default();
        let body = r(&String::from_utf8_lossy(&body));
        Err(LlmError::Status {
            status: status.as_u16(),
            message: r(&failure_message(&body)),
            retry_after,
        })
    }
}

#[async_trait::async_trait]
impl LlmClient for AnthropicClient {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        let (body, output_tool) = body(request)?;
        let response = self.send(&body).await?;
        let r = |s: &str| self.redactor.apply(s);
        if !request.stream {
            let bytes = response
                .bytes()
                .await
                .map_err(|e| LlmError::Connection(r(&error_chain(&e))))?;
            let message: Json = serde_json::from_slice(&bytes).map_err(|e| {
                LlmError::Protocol(r(&format!(
                    "{e} in `{}`",
                    excerpt(&String::from_utf8_lossy(&bytes))
                )))
            })?;
            return reply(&message, output_tool.as_deref());
        }
        let mut stream = response.bytes_stream();
        let mut events = Events::default();
        let mut message = Streamed::new(output_tool);
        while let Some(bytes) = stream.next().await {
            let bytes = bytes.map_err(|e| LlmError::Connection(r(&error_chain(&e))))?;
            for data in events.push(&bytes) {
                let event: Json = serde_json::from_str(&data)
                    .map_err(|e| LlmError::Protocol(r(&format!("{e} in `{}`", excerpt(&data)))))?;
                if let Some(text) = message.push(&event).map_err(|m| LlmError::Stream(r(&m)))? {
                    deltas(&text);
                }
            }
        }
        message.finish()
    }

    fn endpoint(&self) -> Option<String> {
        Some(self.base_url.clone())
    }
}

/// The Messages API request for `request`, and the name of the tool that carries a
/// schema'd reply (when the node has a schema).
fn body(request: &LlmRequest) -> Result<(Json, Option<String>), LlmError> {
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<(String, Vec<Json>)> = Vec::new();
    for (i, m) in request.messages.iter().enumerate() {
        let bad = |why: &str| LlmError::Request(format!("message {}: {why}", i + 1));
        let role = m["role"].as_str().ok_or_else(|| bad("no role"))?;
        let (role, blocks) = match role {
            "system" | "developer" => {
                system.push(text_of(&m["content"]));
                continue;
            }
            "user" => ("user", content_blocks(&m["content"]).map_err(|e| bad(&e))?),
            "assistant" => {
                let mut blocks = content_blocks(&m["content"]).map_err(|e| bad(&e))?;
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        // Arguments that were not JSON (a reply being corrected) go
                        // back as an empty input: the correction says what was wrong.
                        "input": serde_json::from_str::<Json>(arguments)
                            .ok()
                            .filter(Json::is_object)
                            .unwrap_or_else(|| json!({})),
                    }));
                }
                ("assistant", blocks)
            }
            "tool" => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m["tool_call_id"],
                    "content": text_of(&m["content"]),
                })],
            ),
            other => return Err(bad(&format!("a message of role `{other}`"))),
        };
        // Anthropic's turns alternate: what follows a turn of the same role joins it.
        match turns.last_mut() {
            Some((last, b)) if last == role => b.extend(blocks),
            _ => turns.push((role.to_string(), blocks)),
        }
    }
    let messages: Vec<Json> = turns
        .into_iter()
        .filter(|(_, blocks)| !blocks.is_empty())
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect();

    let mut tools: Vec<Json> = request
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "input_schema": t.parameters,
            })
        })
        .collect();
    // The schema as a tool the model must call: its input is the reply.
    let output_tool = request.schema.as_ref().map(|schema| {
        let mut name = schema_name(&request.node);
        while request.tools.iter().any(|t| t.name == name) {
            name.push('_');
        }
        tools.push(json!({
            "name": name,
            "description": "Give your answer: call this with it, shaped as the input schema says.",
            "input_schema": **schema,
        }));
        name
    });
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "max_tokens".into(),
        json!(request.sampling.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), json!(messages));
    if !tools.is_empty() {
        let mut choice = match (&output_tool, request.tool_choice) {
            // Only the schema's tool: that one.
            (Some(name), _) if request.tools.is_empty() => json!({ "type": "tool", "name": name }),
            // The schema's or another: some tool, always.
            (Some(_), _) | (None, ToolChoice::Required) => json!({ "type": "any" }),
            (None, ToolChoice::Auto) => json!({ "type": "auto" }),
        };
        if request.parallel_tool_calls == Some(false) {
            choice["disable_parallel_tool_use"] = json!(true);
        }
        body.insert("tool_choice".into(), choice);
        body.insert("tools".into(), json!(tools));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = request.sampling.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if !request.sampling.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(request.sampling.stop));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    Ok((Json::Object(body), output_tool))
}

/// A message's text: a string, or its text parts joined.
fn text_of(content: &Json) -> String {
    match content {
        Json::String(s) => s.clone(),
        Json::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A chat message's content as Anthropic's blocks: text, images (`image_url`, a data
/// URL or a web one) and PDFs (`file`, a data URL).
fn content_blocks(content: &Json) -> Result<Vec<Json>, String> {
    match content {
        Json::Null => Ok(Vec::new()),
        Json::String(s) if s.is_empty() => Ok(Vec::new()),
        Json::String(s) => Ok(vec![json!({ "type": "text", "text": s })]),
        Json::Array(parts) => parts.iter().map(part).collect(),
        _ => Err("content is neither text nor parts".into()),
    }
}

fn part(p: &Json) -> Result<Json, String> {
    match p["type"].as_str() {
        Some("text") => Ok(json!({ "type": "text", "text": p["text"] })),
        Some("image_url") => {
            let url = p["image_url"]["url"]
                .as_str()
                .ok_or("an image without a url")?;
            Ok(json!({ "type": "image", "source": source(url) }))
        }
        Some("file") => {
            let data = p["file"]["file_data"]
                .as_str()
                .ok_or("a file without data")?;
            Ok(json!({ "type": "document", "source": source(data) }))
        }
        other => Err(format!(
            "a content part of type `{}` (Anthropic takes text, images and PDFs)",
            other.unwrap_or("none")
        )),
    }
}

/// A data URL as a base64 source, any other as a URL source.
fn source(url: &str) -> Json {
    match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((media_type, data)) => {
            json!({ "type": "base64", "media_type": media_type, "data": data })
        }
        None => json!({ "type": "url", "url": url }),
    }
}

/// The server's own words from an error body (`{"type": "error", "error": {"type",
/// "message"}}`), else the start of the body.
fn failure_message(body: &str) -> String {
    let parsed: Option<Json> = serde_json::from_str(body).ok();
    match parsed.as_ref().and_then(|b| b["error"]["message"].as_str()) {
        Some(m) => match parsed.as_ref().and_then(|b| b["error"]["type"].as_str()) {
            Some(t) => format!("{m} ({t})"),
            None => m.to_string(),
        },
        None if body.trim().is_empty() => "(no message)".into(),
        None => excerpt(body),
    }
}

/// `stop_reason` as the chat API names it.
fn finish_reason(stop: Option<&str>, called: bool) -> Option<String> {
    Some(
        match stop? {
            "end_turn" | "stop_sequence" | "pause_turn" => "stop",
            "max_tokens" | "model_context_window_exceeded" => "length",
            "tool_use" if called => "tool_calls",
            "tool_use" => "stop",
            "refusal" => "content_filter",
            other => other,
        }
        .to_string(),
    )
}

/// A whole (not streamed) answer as the reply.
fn reply(message: &Json, output_tool: Option<&str>) -> Result<LlmReply, LlmError> {
    let blocks = message["content"].as_array().ok_or_else(|| {
        LlmError::Protocol(format!(
            "no `content` in `{}`",
            excerpt(&message.to_string())
        ))
    })?;
    let mut streamed = Streamed::new(output_tool.map(str::to_string));
    for block in blocks {
        streamed.block(block);
    }
    streamed.stop = message["stop_reason"].as_str().map(str::to_string);
    streamed.tokens_in = message["usage"]["input_tokens"].as_u64().unwrap_or(0);
    streamed.tokens_out = message["usage"]["output_tokens"].as_u64().unwrap_or(0);
    streamed.done = true;
    streamed.id = message["id"].as_str().map(str::to_string);
    streamed.model = message["model"].as_str().map(str::to_string);
    streamed.finish()
}

/// A reply assembled block by block: from a whole answer's `content`, or from a
/// stream's events.
struct Streamed {
    output_tool: Option<String>,
    /// Each block by its index: its kind (`text`, or a tool's name and id) and what
    /// it holds (text, or the tool's input as JSON text).
    blocks: Vec<(Block, String)>,
    stop: Option<String>,
    tokens_in: u64,
    tokens_out: u64,
    done: bool,
    id: Option<String>,
    model: Option<String>,
}

enum Block {
    Text,
    Tool { id: String, name: String },
    Other,
}

impl Streamed {
    fn new(output_tool: Option<String>) -> Self {
        Streamed {
            output_tool,
            blocks: Vec::new(),
            stop: None,
            tokens_in: 0,
            tokens_out: 0,
            done: false,
            id: None,
            model: None,
        }
    }

    fn block(&mut self, block: &Json) {
        let held = match block["type"].as_str() {
            Some("text") => (
                Block::Text,
                block["text"].as_str().unwrap_or("").to_string(),
            ),
            Some("tool_use") => {
                let input = &block["input"];
                (
                    Block::Tool {
                        id: block["id"].as_str().unwrap_or("").to_string(),
                        name: block["name"].as_str().unwrap_or("").to_string(),
                    },
                    // A streamed tool starts with an empty input its deltas replace.
                    if input.as_object().is_some_and(Map::is_empty) {
                        String::new()
                    } else {
                        input.to_string()
                    },
                )
            }
            _ => (Block::Other, String::new()),
        };
        self.blocks.push(held);
    }

    fn is_output(&self, block: &Block) -> bool {
        matches!((block, &self.output_tool), (Block::Tool { name, .. }, Some(o)) if name == o)
    }

    /// One event of the stream; the text it adds to the reply's, if any (a text
    /// delta, or the schema'd reply's JSON as it is written).
    fn push(&mut self, event: &Json) -> Result<Option<String>, String> {
        match event["type"].as_str() {
            Some("message_start") => {
                self.id = event["message"]["id"].as_str().map(str::to_string);
                self.model = event["message"]["model"].as_str().map(str::to_string);
                let usage = &event["message"]["usage"];
                self.tokens_in = usage["input_tokens"].as_u64().unwrap_or(0);
                self.tokens_out = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            Some("content_block_start") => self.block(&event["content_block"]),
            Some("content_block_delta") => {
                let i = event["index"].as_u64().unwrap_or(0) as usize;
                let delta = &event["delta"];
                let piece = delta["text"]
                    .as_str()
                    .or_else(|| delta["partial_json"].as_str())
                    .unwrap_or("");
                let Some((block, held)) = self.blocks.get_mut(i) else {
                    return Err(format!("a delta for block {i}, which never started"));
                };
                held.push_str(piece);
                let shown = matches!(block, Block::Text)
                    || matches!((&*block, &self.output_tool), (Block::Tool { name, .. }, Some(o)) if name == o);
                return Ok((shown && !piece.is_empty()).then(|| piece.to_string()));
            }
            Some("message_delta") => {
                if let Some(stop) = event["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop.to_string());
                }
                if let Some(out) = event["usage"]["output_tokens"].as_u64() {
                    self.tokens_out = out;
                }
                if let Some(input) = event["usage"]["input_tokens"].as_u64() {
                    self.tokens_in = input;
                }
            }
            Some("message_stop") => self.done = true,
            Some("error") => {
                let e = &event["error"];
                return Err(match e["type"].as_str() {
                    Some(t) => format!("{} ({t})", e["message"].as_str().unwrap_or("")),
                    None => e["message"].as_str().unwrap_or("").to_string(),
                });
            }
            // `ping`, and events of later API versions.
            _ => {}
        }
        Ok(None)
    }

    fn finish(self) -> Result<LlmReply, LlmError> {
        if !self.done {
            return Err(LlmError::Connection(
                "the stream ended before the reply was complete".into(),
            ));
        }
        let mut text = String::new();
        let mut output: Option<String> = None;
        let mut tool_calls = Vec::new();
        for (block, held) in &self.blocks {
            match block {
                Block::Text => text.push_str(held),
                b if self.is_output(b) => output = Some(held.clone()),
                Block::Tool { id, name } => tool_calls.push(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: if held.is_empty() {
                        "{}".into()
                    } else {
                        held.clone()
                    },
                }),
                _ => {}
            }
        }
        let refused = self.stop.as_deref() == Some("refusal");
        let called = !tool_calls.is_empty();
        // A schema'd reply is the output tool's input; text beside it is the model
        // thinking aloud, left out.
        let content = match output {
            Some(json) => Some(json),
            None if text.is_empty() || refused => None,
            None => Some(text.clone()),
        };
        Ok(LlmReply {
            content,
            tool_calls,
            refusal: refused.then(|| {
                if text.is_empty() {
                    "the model refused".to_string()
                } else {
                    text
                }
            }),
            finish_reason: finish_reason(self.stop.as_deref(), called),
            tokens_in: self.tokens_in,
            tokens_out: self.tokens_out,
            id: self.id,
            model: self.model,
        })
    }
}

/// Server-sent events cut out of the bytes as they come: the `data` of each event
/// (`event:` lines are left: every data payload names its own type). Bytes are kept
/// until their event is whole, so a character split between two chunks of the stream
/// is read whole; an event ends at a blank line, `\n` or `\r\n`.
#[derive(Default)]
struct Events {
    buffer: Vec<u8>,
}

impl Events {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self
            .buffer
            .windows(2)
            .enumerate()
            .find_map(|(i, w)| match w {
                b"\n\n" => Some(i + 2),
                b"\n\r" if self.buffer.get(i + 2) == Some(&b'\n') => Some(i + 3),
                _ => None,
            })
        {
            let event: Vec<u8> = self.buffer.drain(..end).collect();
            let event = String::from_utf8_lossy(&event);
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            let data = data.join("\n");
            // `[DONE]` is OpenAI's end, which some proxies add.
            if !data.is_empty() && data != "[DONE]" {
                out.push(data);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolSpec;
    use std::sync::Arc;

    fn request(messages: Vec<Json>) -> LlmRequest {
        LlmRequest::new("plan", "claude-sonnet-4-5", messages)
    }

    #[test]
    fn a_chat_becomes_a_messages_request() {
        let mut r = request(vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
            ]}),
            json!({"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"png\"}"}}
            ]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "a logo"}),
            json!({"role": "user", "content": "And?"}),
        ]);
        r.schema = Some(Arc::new(json!({"type": "object"})));
        r.tools = vec![ToolSpec {
            name: "lookup".into(),
            description: "Looks up".into(),
            parameters: json!({"type": "object"}),
        }];
        r.temperature = Some(0.5);
        let (body, output) = body(&r).unwrap();
        assert_eq!(output.as_deref(), Some("plan"));
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "png"}},
                    ]},
                    // The tool's result and the next user message are one user turn.
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "c1", "content": "a logo"},
                        {"type": "text", "text": "And?"},
                    ]},
                ],
                "tool_choice": {"type": "any"},
                "tools": [
                    {"name": "lookup", "description": "Looks up", "input_schema": {"type": "object"}},
                    {"name": "plan", "description": "Give your answer: call this with it, shaped as the input schema says.", "input_schema": {"type": "object"}},
                ],
                "temperature": 0.5,
            })
        );
    }

    #[test]
    fn a_streamed_schemad_reply_is_the_output_tools_input() {
        let mut s = Streamed::new(Some("plan".into()));
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "plan", "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": " 1}"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ];
        let shown: Vec<String> = events.iter().filter_map(|e| s.push(e).unwrap()).collect();
        assert_eq!(shown, ["{\"a\":", " 1}"]);
        let reply = s.finish().unwrap();
        assert_eq!(
            reply,
            LlmReply {
                content: Some("{\"a\": 1}".into()),
                finish_reason: Some("stop".into()),
                tokens_in: 12,
                tokens_out: 9,
                ..LlmReply::default()
            }
        );
    }

    #[test]
    fn server_sent_events_are_cut_at_their_blank_lines() {
        let mut e = Events::default();
        assert!(e.push(b"event: ping\ndata: {\"type\"").is_empty());
        assert_eq!(
            e.push(b": \"ping\"}\n\nevent: x\ndata: 1\n\ndata: [DONE]\n\n"),
            ["{\"type\": \"ping\"}", "1"]
        );
    }

    #[test]
    fn a_character_split_between_chunks_is_read_whole_and_crlf_ends_events() {
        let mut e = Events::default();
        let text = "data: {\"text\": \"café\"}\r\n\r\n".as_bytes();
        // The `é` is two bytes: the chunk ends between them.
        let cut = text.iter().position(|b| *b == 0xc3).unwrap() + 1;
        assert!(e.push(&text[..cut]).is_empty());
        assert_eq!(e.push(&text[cut..]), ["{\"text\": \"café\"}"]);
    }
}
