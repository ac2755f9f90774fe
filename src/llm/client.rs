//! The one trait every way of reaching a model implements.

use super::{LlmError, LlmReply, LlmRequest};

/// Receives text deltas of a streamed reply as they arrive.
pub type DeltaSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// Sends one request and returns the model's reply. One call is one request: retries
/// (transport and validation) are the node kind's, so they work the same for every
/// client and a recording holds only what was answered.
#[async_trait::async_trait]
pub trait LlmClient: Send + Sync {
    /// `deltas` receives the reply's text as it streams in, when `request.stream` is
    /// set and the client streams; the returned reply holds the whole text either way.
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError>;

    /// The endpoint's base URL, its query left out (for traces); none for a client
    /// that reaches no server (a replay, a double).
    fn endpoint(&self) -> Option<String> {
        None
    }
}

/// The client used when none was configured: every call fails with a clear message.
pub struct NoLlm;

#[async_trait::async_trait]
impl LlmClient for NoLlm {
    async fn complete(&self, request: &LlmRequest, _: DeltaSink<'_>) -> Result<LlmReply, LlmError> {
        Err(LlmError::NotConfigured {
            node: request.node.to_string(),
        })
    }
}
