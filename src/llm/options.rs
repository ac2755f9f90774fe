//! [`LlmOptions`] and [`llm_client`]: the client a run uses, from the graph and the
//! command line.

use super::{
    DeltaSink, LlmClient, LlmError, LlmReply, LlmRequest, NoLlm, OpenAiClient, RecordingClient,
    ReplayClient, SetupError,
};
use crate::graph::{Body, Graph};
use std::path::PathBuf;
use std::sync::Arc;

/// How a run reaches its model: `switchyard run --record FILE | --replay FILE | --stream`.
#[derive(Debug, Clone, Default)]
pub struct LlmOptions {
    /// Save every answered request and its reply to this file (JSON lines).
    pub record: Option<PathBuf>,
    /// Answer every request from this recording, with no network.
    pub replay: Option<PathBuf>,
    /// Stream every LLM node's reply as `TextDelta` events, not only the nodes with
    /// `stream = true`.
    pub stream: bool,
}

/// The LLM client for runs of `graph`:
///
/// - with `replay`: a [`ReplayClient`] of that file (no network, no key needed);
/// - otherwise an [`OpenAiClient`] (an [`super::AnthropicClient`] for `provider =
///   "anthropic"`) for the endpoint in the environment variables the graph's `[llm]`
///   names (`base_url_env`, `api_key_env`), wrapped in a
///   [`RecordingClient`] with `record`;
/// - a graph without `llm_structured` nodes gets [`NoLlm`] (unless recording or
///   replaying), so its runs need no endpoint;
/// - with `stream`, every request streams.
pub fn llm_client(graph: &Graph, options: &LlmOptions) -> Result<Arc<dyn LlmClient>, SetupError> {
    let client: Arc<dyn LlmClient> = match (&options.replay, &options.record) {
        (Some(_), Some(_)) => return Err(SetupError::RecordAndReplay),
        (Some(path), None) => Arc::new(ReplayClient::open(path)?),
        (None, record) => {
            // A server that may ask for completions (MCP sampling) is answered by it too.
            let uses_llm = graph.nodes.iter().any(|n| matches!(n.body, Body::Llm(_)))
                || graph.servers.iter().any(|s| s.sampling);
            let inner: Arc<dyn LlmClient> = if (uses_llm || record.is_some())
                && graph.llm.provider == crate::spec::Provider::Anthropic
            {
                Arc::new(super::AnthropicClient::from_env(
                    &graph.llm.base_url_env,
                    &graph.llm.api_key_env,
                )?)
            } else if uses_llm || record.is_some() {
                Arc::new(OpenAiClient::from_env(
                    &graph.llm.base_url_env,
                    &graph.llm.api_key_env,
                    graph.llm.provider,
                )?)
            } else {
                Arc::new(NoLlm)
            };
            match record {
                Some(path) => Arc::new(RecordingClient::create(path, inner).map_err(|source| {
                    SetupError::CreateRecording {
                        path: path.display().to_string(),
                        source,
                    }
                })?),
                None => inner,
            }
        }
    };
    Ok(if options.stream {
        Arc::new(StreamAll(client))
    } else {
        client
    })
}

/// Turns streaming on for every request (`--stream`).
struct StreamAll(Arc<dyn LlmClient>);

#[async_trait::async_trait]
impl LlmClient for StreamAll {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        if request.stream {
            return self.0.complete(request, deltas).await;
        }
        let request = LlmRequest {
            stream: true,
            ..request.clone()
        };
        self.0.complete(&request, deltas).await
    }

    fn endpoint(&self) -> Option<String> {
        self.0.endpoint()
    }
}
