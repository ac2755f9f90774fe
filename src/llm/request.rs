//! What a node asks a model.

use crate::spec::Sampling;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::sync::Arc;

/// One request to a chat model, complete: every client sends exactly this, and a
/// recording matches on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The node that asks; only for messages and record/replay, never sent.
    pub node: Arc<str>,
    pub model: String,
    /// Chat messages in the OpenAI format: the system prompt, the history, the user
    /// prompt, then one correction exchange for each earlier reply that was not valid.
    pub messages: Vec<Json>,
    /// JSON Schema a text reply must fit, sent as a strict `response_format`.
    pub schema: Option<Arc<Json>>,
    /// Function tools offered to the model.
    pub tools: Vec<ToolSpec>,
    /// With tools: whether the model must call one (`Required`) or may answer in text.
    pub tool_choice: ToolChoice,
    pub temperature: Option<f64>,
    /// Ask for the reply as a stream of deltas.
    pub stream: bool,
    /// Send the schema as a strict `response_format` (the default); false for an
    /// endpoint that refuses strict schemas or a schema strict mode cannot take.
    #[serde(default = "strict_default", skip_serializing_if = "is_strict")]
    pub strict: bool,
    /// With tools: sent as `parallel_tool_calls` when the node sets it, else left out
    /// (OpenAI's reasoning models refuse the parameter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// What the node asks of the sampling, each only when set.
    #[serde(flatten, default)]
    pub sampling: Sampling,
}

fn strict_default() -> bool {
    true
}

fn is_strict(strict: &bool) -> bool {
    *strict
}

/// A function tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an MCP tool's `inputSchema`).
    pub parameters: Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
}

impl LlmRequest {
    /// A plain chat request: `messages` to `model`, no schema, no tools, nothing of the
    /// sampling set, not streamed. Fields are then set as a node needs them
    /// (`LlmRequest { tools, ..LlmRequest::new(..) }`).
    pub fn new(node: impl Into<Arc<str>>, model: impl Into<String>, messages: Vec<Json>) -> Self {
        LlmRequest {
            node: node.into(),
            model: model.into(),
            messages,
            schema: None,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            temperature: None,
            stream: false,
            strict: true,
            parallel_tool_calls: None,
            sampling: Sampling::default(),
        }
    }

    /// SHA-256 (hex) of what shapes the reply besides the messages: the response schema,
    /// the tools and the tool choice.
    pub fn schema_hash(&self) -> String {
        let shape = serde_json::json!({
            "schema": self.schema.as_deref(),
            "tools": self.tools,
            "tool_choice": if self.tools.is_empty() { None } else { Some(self.tool_choice) },
        });
        super::sha256_hex(shape.to_string().as_bytes())
    }
}
