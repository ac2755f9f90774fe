//! [`ReplayClient`]: answers a run from a recording, with no network.

use super::{DeltaSink, Exchange, LlmClient, LlmError, LlmReply, LlmRequest, SetupError};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Answers from a recording ([`super::RecordingClient`]). Each node's exchanges are
/// taken in the order they were recorded: the n-th request of node `plan` gets the
/// reply to the n-th recorded request of `plan`, if model, messages and schema hash
/// are equal (see [`Exchange::mismatch`]); otherwise the request fails with an error
/// naming the node. A streamed request gets the recorded deltas again.
pub struct ReplayClient {
    by_node: HashMap<String, Vec<Exchange>>,
    next: Mutex<HashMap<String, usize>>,
}

impl ReplayClient {
    pub fn open(path: &Path) -> Result<Self, SetupError> {
        let text = std::fs::read_to_string(path).map_err(|source| SetupError::ReadRecording {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|(line, message)| SetupError::RecordingLine {
            path: path.display().to_string(),
            line,
            message,
        })
    }

    /// Reads recording text; an error is the line number and what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut by_node: HashMap<String, Vec<Exchange>> = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let exchange: Exchange =
                serde_json::from_str(line).map_err(|e| (i + 1, e.to_string()))?;
            by_node
                .entry(exchange.node.clone())
                .or_default()
                .push(exchange);
        }
        Ok(ReplayClient {
            by_node,
            next: Mutex::new(HashMap::new()),
        })
    }
}

#[async_trait::async_trait]
impl LlmClient for ReplayClient {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        let node = &*request.node;
        let recorded = self.by_node.get(node).map_or(&[][..], Vec::as_slice);
        let exchange = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let n = next.entry(node.to_string()).or_insert(0);
            let Some(exchange) = recorded.get(*n) else {
                return Err(LlmError::Replay(format!(
                    "node `{node}` made request {}, and the recording holds {} of it",
                    *n + 1,
                    recorded.len()
                )));
            };
            if let Some(why) = exchange.mismatch(request) {
                return Err(LlmError::Replay(format!(
                    "request {} of node `{node}` does not match the recording: {why}",
                    *n + 1
                )));
            }
            *n += 1;
            exchange
        };
        if request.stream {
            if exchange.deltas.is_empty() {
                if let Some(text) = &exchange.reply.content {
                    deltas(text);
                }
            } else {
                for d in &exchange.deltas {
                    deltas(d);
                }
            }
        }
        Ok(exchange.reply.clone())
    }
}
