//! Reaching a chat model: the [`LlmClient`] trait, what goes in ([`LlmRequest`]) and
//! comes out ([`LlmReply`], [`LlmError`]), and the clients.
//!
//! The `llm_structured` node kind (`run::kinds::llm`) builds a complete request
//! (messages, schema, tools), sends it through a client, and judges the reply itself:
//! validation, retries with corrections, transport retries with backoff, the cache and
//! the fallback are the node's, so every client behaves the same under them.
//!
//! - [`OpenAiClient`]: any OpenAI-compatible endpoint, through async-openai, one HTTP
//!   request per call, the key kept out of every error.
//! - [`AnthropicClient`]: Anthropic's Messages API (`provider = "anthropic"`), a
//!   schema'd reply through a tool the model must call.
//! - [`RecordingClient`] wraps a client and saves each answered request as an
//!   [`Exchange`] (JSON lines); [`ReplayClient`] answers from such a file.
//! - [`llm_client`] picks and wires them from a graph and [`LlmOptions`] (the CLI's
//!   `--record`, `--replay` and `--stream`).

mod anthropic;
mod client;
pub(crate) mod content;
mod embed;
mod error;
mod exchange;
mod http;
pub(crate) mod offer;
mod openai;
mod options;
mod provider;
mod record;
mod redact;
mod replay;
mod reply;
mod request;
pub(crate) mod tap;
mod wire;

pub use anthropic::{ANTHROPIC_BASE_URL, AnthropicClient};
pub use client::{DeltaSink, LlmClient, NoLlm};
pub use embed::Embeddings;
pub use error::{LlmError, SetupError};
pub use exchange::Exchange;
pub use openai::{DEFAULT_BASE_URL, OpenAiClient};
pub use options::{LlmOptions, llm_client};
pub use record::RecordingClient;
pub use replay::ReplayClient;
pub use reply::{LlmReply, ToolCall, reply_json};
pub use request::{LlmRequest, ToolChoice, ToolSpec};

use sha2::{Digest, Sha256};

/// SHA-256 of `data`, in lower-case hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}
