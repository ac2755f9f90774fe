//! One line of a recording: a request and the reply it got.

use super::{LlmReply, LlmRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// A request/reply pair as a recording file keeps it, one JSON object per line. The
/// request is kept as what a replay matches on: node, model, messages and the hash of
/// the schema and tools ([`LlmRequest::schema_hash`]). Only answered requests are
/// recorded: transport failures and their retries are not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub node: String,
    pub model: String,
    pub schema_hash: String,
    pub messages: Vec<Json>,
    pub reply: LlmReply,
    /// The text deltas of a streamed reply, in order; empty when it was not streamed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deltas: Vec<String>,
}

impl Exchange {
    pub fn new(request: &LlmRequest, reply: LlmReply, deltas: Vec<String>) -> Self {
        Exchange {
            node: request.node.to_string(),
            model: request.model.clone(),
            schema_hash: request.schema_hash(),
            messages: request.messages.clone(),
            reply,
            deltas,
        }
    }

    /// Why `request` is not the request this exchange answered, if it is not.
    pub fn mismatch(&self, request: &LlmRequest) -> Option<String> {
        if self.model != request.model {
            return Some(format!(
                "the model is `{}`, the recording's is `{}`",
                request.model, self.model
            ));
        }
        if self.schema_hash != request.schema_hash() {
            return Some("the output schema or the offered tools differ".into());
        }
        for (i, (got, want)) in request.messages.iter().zip(&self.messages).enumerate() {
            if got != want {
                return Some(format!(
                    "message {} differs: the request has {}, the recording {}",
                    i + 1,
                    excerpt(got),
                    excerpt(want)
                ));
            }
        }
        if request.messages.len() != self.messages.len() {
            return Some(format!(
                "the request has {} messages, the recording {}",
                request.messages.len(),
                self.messages.len()
            ));
        }
        None
    }
}

fn excerpt(v: &Json) -> String {
    let text = v.to_string();
    match text.char_indices().nth(120) {
        Some((i, _)) => format!("`{}...`", &text[..i]),
        None => format!("`{text}`"),
    }
}
