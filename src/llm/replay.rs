//! [`ReplayClient`]: answers a run from a recording, with no network.

use super::{DeltaSink, Exchange, LlmClient, LlmError, LlmReply, LlmRequest, SetupError};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Answers from a recording ([`super::RecordingClient`]). A request of node `plan` gets
/// the reply of the first exchange of `plan`, in recorded order, that this client has
/// not used yet and whose model, messages and schema hash are equal (see
/// [`Exchange::mismatch`]). In one run that is the n-th recorded request for the n-th
/// request; a resume in a new process (whose client has used nothing) skips the
/// exchanges of the requests made before the pause, because their messages differ, so
/// one recording serves a conversation that spans several processes. When no unused
/// exchange matches, the request fails with an error naming the node and what differs
/// from the first unused one. A streamed request gets the recorded deltas again.
pub struct ReplayClient {
    by_node: HashMap<String, Vec<Exchange>>,
    /// Per node: which of its exchanges have answered a request.
    used: Mutex<HashMap<String, Vec<bool>>>,
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
            used: Mutex::new(HashMap::new()),
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
            let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            let used = used
                .entry(node.to_string())
                .or_insert_with(|| vec![false; recorded.len()]);
            let n = used.iter().filter(|u| **u).count() + 1;
            let mut unused = recorded.iter().zip(used.iter_mut()).filter(|(_, u)| !**u);
            let Some((first, first_used)) = unused.next() else {
                return Err(LlmError::Replay(format!(
                    "node `{node}` made request {n}, and the recording holds {} of it",
                    recorded.len()
                )));
            };
            match first.mismatch(request) {
                None => {
                    *first_used = true;
                    first
                }
                Some(why) => match unused.find(|(e, _)| e.mismatch(request).is_none()) {
                    Some((exchange, u)) => {
                        *u = true;
                        exchange
                    }
                    None => {
                        return Err(LlmError::Replay(format!(
                            "request {n} of node `{node}` does not match the recording: {why}"
                        )));
                    }
                },
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::reply_json;
    use serde_json::json;

    fn request(goal: &str) -> LlmRequest {
        LlmRequest::new(
            "plan",
            "m",
            vec![json!({ "role": "user", "content": goal })],
        )
    }

    fn recording(goals: &[&str]) -> String {
        goals
            .iter()
            .map(|g| {
                let e = Exchange::new(&request(g), reply_json(json!({ "goal": g })), Vec::new());
                serde_json::to_string(&e).unwrap() + "\n"
            })
            .collect()
    }

    async fn ask(client: &ReplayClient, goal: &str) -> Result<Option<String>, LlmError> {
        client
            .complete(&request(goal), &|_| {})
            .await
            .map(|r| r.content)
    }

    #[tokio::test]
    async fn a_resumed_process_skips_the_exchanges_before_the_pause() {
        let text = recording(&["before", "after"]);
        let first = ReplayClient::parse(&text).unwrap();
        assert_eq!(
            ask(&first, "before").await.unwrap().unwrap(),
            r#"{"goal":"before"}"#
        );
        // A new process (a resume) starts with nothing used.
        let second = ReplayClient::parse(&text).unwrap();
        assert_eq!(
            ask(&second, "after").await.unwrap().unwrap(),
            r#"{"goal":"after"}"#
        );
        assert_eq!(
            ask(&second, "after").await.unwrap_err().to_string(),
            "replay: request 2 of node `plan` does not match the recording: message 1 differs: \
             the request has `{\"role\":\"user\",\"content\":\"after\"}`, the recording \
             `{\"role\":\"user\",\"content\":\"before\"}`"
        );
        assert_eq!(
            ask(&second, "before").await.unwrap().unwrap(),
            r#"{"goal":"before"}"#
        );
        assert_eq!(
            ask(&second, "before").await.unwrap_err().to_string(),
            "replay: node `plan` made request 3, and the recording holds 2 of it"
        );
    }
}
