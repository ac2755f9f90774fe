//! What a model answered.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The model's answer to one request, as every client returns it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmReply {
    /// The text of the reply (JSON when the model followed the schema); none when the
    /// model only called a tool.
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The model declined to answer, and said why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// `stop`, `length`, `tool_calls`, `content_filter`, or what the server said.
    pub finish_reason: Option<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The reply's id and the model that wrote it, as the server said (for traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// One function call the model made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not yet parsed or checked.
    pub arguments: String,
}

/// A reply whose text is the JSON of `value`, for doubles in tests.
pub fn reply_json(value: Json) -> LlmReply {
    LlmReply {
        content: Some(value.to_string()),
        finish_reason: Some("stop".into()),
        tokens_in: 10,
        tokens_out: 5,
        ..LlmReply::default()
    }
}
