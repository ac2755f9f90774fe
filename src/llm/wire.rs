//! Chat-completion answers as servers send them, read leniently.
//!
//! Requests use async-openai's types as they are. Answers are read into these types
//! instead (async-openai's "bring your own types"), because OpenAI-compatible servers
//! differ in what they leave out: a missing `created` or `object`, a `finish_reason`
//! outside OpenAI's list, arguments sent as an object. Every field is optional here and
//! the node kind judges what is missing.

use super::{LlmError, LlmReply, ToolCall};
use serde::Deserialize;
use serde_json::Value as Json;

/// A whole (not streamed) chat completion.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Completion {
    choices: Option<Vec<Choice>>,
    usage: Option<Usage>,
    id: Option<String>,
    model: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    message: Option<Message>,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Message {
    content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireToolCall {
    /// Only in streamed deltas: which call a fragment belongs to.
    index: Option<u32>,
    id: Option<String>,
    function: Option<Function>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Function {
    name: Option<String>,
    /// JSON text as OpenAI sends it; some servers send the object itself.
    arguments: Option<Json>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Usage {
    // Read as any JSON: some servers count in floats (`12.0`), and a count that is
    // not a number must not cost the reply.
    prompt_tokens: Option<Json>,
    completion_tokens: Option<Json>,
}

/// A token count as the server wrote it: a whole or float number, else 0.
fn count(v: Option<&Json>) -> u64 {
    match v {
        Some(Json::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| f as u64)
            })
            .unwrap_or(0),
        _ => 0,
    }
}

impl Function {
    fn arguments_text(&self) -> String {
        match &self.arguments {
            None | Some(Json::Null) => String::new(),
            Some(Json::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    }
}

impl Completion {
    pub(crate) fn into_reply(self) -> Result<LlmReply, LlmError> {
        let choice = self
            .choices
            .and_then(|c| c.into_iter().next())
            .ok_or_else(|| LlmError::Protocol("the answer has no choices".into()))?;
        let message = choice.message.unwrap_or_default();
        let tool_calls = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let f = c.function.unwrap_or_default();
                ToolCall {
                    id: c.id.filter(|s| !s.is_empty()).unwrap_or_else(|| call_id(i)),
                    name: f.name.clone().unwrap_or_default(),
                    arguments: f.arguments_text(),
                }
            })
            .collect();
        let (tokens_in, tokens_out) = tokens(self.usage.as_ref());
        Ok(LlmReply {
            content: message.content.filter(|c| !c.is_empty()),
            tool_calls,
            refusal: message.refusal.filter(|r| !r.is_empty()),
            finish_reason: choice.finish_reason,
            tokens_in,
            tokens_out,
            id: self.id.filter(|i| !i.is_empty()),
            model: self.model.filter(|m| !m.is_empty()),
        })
    }
}

fn tokens(usage: Option<&Usage>) -> (u64, u64) {
    usage.map_or((0, 0), |u| {
        (
            count(u.prompt_tokens.as_ref()),
            count(u.completion_tokens.as_ref()),
        )
    })
}

/// The id given to a call the server sent without one, so a correction can refer to it.
fn call_id(i: usize) -> String {
    format!("call_{i}")
}

/// One streamed chunk.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Chunk {
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<Usage>,
    id: Option<String>,
    model: Option<String>,
    /// A server that fails mid-stream sends `{ "error": { "message" } }` as an event.
    error: Option<Json>,
}

impl Chunk {
    /// The server's message when this event reports an error instead of a delta.
    pub(crate) fn error_message(&self) -> Option<String> {
        let e = self.error.as_ref().filter(|e| !e.is_null())?;
        Some(match e.get("message").and_then(Json::as_str) {
            Some(m) => m.to_string(),
            None => e.to_string(),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ChunkChoice {
    index: Option<u32>,
    delta: Option<Message>,
    finish_reason: Option<String>,
}

/// Puts a streamed reply back together: text and refusal deltas are appended, tool-call
/// fragments are joined by their `index`, usage comes with the last chunk (when the
/// server sends it).
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    content: String,
    refusal: String,
    calls: Vec<(u32, ToolCall)>,
    finish_reason: Option<String>,
    usage: (u64, u64),
    id: Option<String>,
    model: Option<String>,
}

impl Assembler {
    /// Takes a chunk in; returns the new text, if any, for the delta events.
    pub(crate) fn push(&mut self, chunk: Chunk) -> Option<String> {
        if let Some(u) = &chunk.usage {
            self.usage = tokens(Some(u));
        }
        if self.id.is_none() {
            self.id = chunk.id.filter(|i| !i.is_empty());
        }
        if self.model.is_none() {
            self.model = chunk.model.filter(|m| !m.is_empty());
        }
        let mut text = String::new();
        // Only the first choice is read: requests never ask for more than one.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(r) = choice.finish_reason {
                self.finish_reason = Some(r);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(c) = delta.content {
                text.push_str(&c);
            }
            if let Some(r) = delta.refusal {
                self.refusal.push_str(&r);
            }
            for fragment in delta.tool_calls.unwrap_or_default() {
                let index = fragment.index.unwrap_or(0);
                let at = match self.calls.iter().position(|(i, _)| *i == index) {
                    Some(at) => at,
                    None => {
                        self.calls.push((index, ToolCall::default()));
                        self.calls.len() - 1
                    }
                };
                let call = &mut self.calls[at].1;
                if let Some(id) = fragment.id.filter(|s| !s.is_empty()) {
                    call.id = id;
                }
                if let Some(f) = fragment.function {
                    if let Some(n) = &f.name {
                        call.name.push_str(n);
                    }
                    call.arguments.push_str(&f.arguments_text());
                }
            }
        }
        self.content.push_str(&text);
        (!text.is_empty()).then_some(text)
    }

    /// The whole reply. A stream that ended before any choice said why it finished
    /// broke off (a dropped connection): worth another try.
    pub(crate) fn finish(self) -> Result<LlmReply, LlmError> {
        if self.finish_reason.is_none() {
            return Err(LlmError::Connection(
                "the stream ended before the reply was complete".into(),
            ));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|(i, _)| *i);
        Ok(LlmReply {
            content: (!self.content.is_empty()).then_some(self.content),
            tool_calls: calls
                .into_iter()
                .enumerate()
                .map(|(i, (_, mut c))| {
                    if c.id.is_empty() {
                        c.id = call_id(i);
                    }
                    c
                })
                .collect(),
            refusal: (!self.refusal.is_empty()).then_some(self.refusal),
            finish_reason: self.finish_reason,
            id: self.id,
            model: self.model,
            tokens_in: self.usage.0,
            tokens_out: self.usage.1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn completion(v: Json) -> Result<LlmReply, LlmError> {
        serde_json::from_value::<Completion>(v)
            .unwrap()
            .into_reply()
    }

    #[test]
    fn a_sparse_completion_is_read() {
        let r = completion(json!({
            "choices": [{ "message": { "content": "{\"a\":1}" }, "finish_reason": "eos" }]
        }))
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("{\"a\":1}"));
        assert_eq!(r.finish_reason.as_deref(), Some("eos"));
        assert_eq!((r.tokens_in, r.tokens_out), (0, 0));
    }

    #[test]
    fn arguments_sent_as_an_object_become_text() {
        let r = completion(json!({
            "choices": [{ "message": { "content": null, "tool_calls": [
                { "function": { "name": "f", "arguments": { "x": 1 } } }
            ] }, "finish_reason": "tool_calls" }],
            "usage": { "prompt_tokens": 7, "completion_tokens": 3 }
        }))
        .unwrap();
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "call_0".into(),
                name: "f".into(),
                arguments: "{\"x\":1}".into()
            }]
        );
        assert_eq!((r.tokens_in, r.tokens_out), (7, 3));
    }

    #[test]
    fn no_choices_is_a_protocol_error() {
        assert!(matches!(
            completion(json!({ "choices": [] })),
            Err(LlmError::Protocol(_))
        ));
        assert!(matches!(
            completion(json!({ "choices": null })),
            Err(LlmError::Protocol(_))
        ));
    }

    #[test]
    fn streamed_fragments_are_joined() {
        let mut a = Assembler::default();
        let chunks = [
            json!({ "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "He" } }] }),
            json!({ "choices": [{ "index": 0, "delta": { "content": "llo" } }] }),
            json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "id": "c1", "function": { "name": "look", "arguments": "{\"q\":" } }] } }] }),
            json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "function": { "arguments": "2}" } }] }, "finish_reason": "tool_calls" }] }),
            json!({ "choices": [], "usage": { "prompt_tokens": 4, "completion_tokens": 6 } }),
        ];
        let deltas: Vec<Option<String>> = chunks
            .into_iter()
            .map(|c| a.push(serde_json::from_value(c).unwrap()))
            .collect();
        assert_eq!(
            deltas,
            vec![Some("He".into()), Some("llo".into()), None, None, None]
        );
        let r = a.finish().unwrap();
        assert_eq!(r.content.as_deref(), Some("Hello"));
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "c1".into(),
                name: "look".into(),
                arguments: "{\"q\":2}".into()
            }]
        );
        assert_eq!((r.tokens_in, r.tokens_out), (4, 6));
    }

    #[test]
    fn a_stream_without_a_finish_reason_broke_off() {
        let mut a = Assembler::default();
        a.push(
            serde_json::from_value(json!({ "choices": [{ "delta": { "content": "{" } }] }))
                .unwrap(),
        );
        assert!(matches!(a.finish(), Err(LlmError::Connection(_))));
    }
}
