//! A session's requests that are not `tools/call` as rmcp sends it: a call sent so that
//! its progress token is known while it is in flight, and resources and prompts read
//! as a tool is called.

use super::Session;
use crate::mcp::error::McpError;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, ServiceError};
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::Duration;

/// Why a tool call failed: as rmcp says it, or as Switchyard does.
pub(super) enum CallError {
    Service(ServiceError),
    Mcp(McpError),
}

impl From<ServiceError> for CallError {
    fn from(e: ServiceError) -> Self {
        CallError::Service(e)
    }
}

/// How many `input_required` rounds a tool call goes through before it is given up
/// (rmcp's own cap): a server that keeps asking does not hold a node for ever.
const MRTR_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

impl Session {
    /// A `resources/read` of `uri` (`what` = `resources/read`) or a `prompts/get` of
    /// `name` with `arguments` (`prompts/get`): the result as the server sent it.
    pub(crate) async fn read(
        &self,
        what: &str,
        arguments: &Json,
        timeout: Duration,
    ) -> Result<Json, McpError> {
        let text = |k: &str| arguments.get(k).and_then(Json::as_str).map(str::to_string);
        let bad = |message: String| McpError::BadReply {
            server: self.server.clone(),
            message,
        };
        let asked = async {
            match what {
                "resources/read" => {
                    let uri = text("uri").ok_or_else(|| McpError::InvalidArguments {
                        server: self.server.clone(),
                        tool: what.to_string(),
                        problems: vec![crate::mcp::error::ArgumentProblem {
                            path: "/uri".into(),
                            message: "`resources/read` needs `uri`, a string".into(),
                        }],
                    })?;
                    // Through the service, not the peer: it answers an `input_required`
                    // result's requests through the handler and asks again (SEP-2322).
                    let read = self
                        .service
                        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
                        .await
                        .map_err(|e| self.service_error(e, &format!("`{what}`"), Some(timeout)))?;
                    serde_json::to_value(read).map_err(|e| bad(e.to_string()))
                }
                _ => {
                    let name = text("name").ok_or_else(|| McpError::InvalidArguments {
                        server: self.server.clone(),
                        tool: what.to_string(),
                        problems: vec![crate::mcp::error::ArgumentProblem {
                            path: "/name".into(),
                            message: "`prompts/get` needs `name`, a string".into(),
                        }],
                    })?;
                    let mut params = rmcp::model::GetPromptRequestParams::new(name);
                    if let Some(Json::Object(a)) = arguments.get("arguments") {
                        // Prompt arguments are strings: other values as their JSON.
                        let a = a
                            .iter()
                            .map(|(k, v)| {
                                let v = match v {
                                    Json::String(s) => s.clone(),
                                    other => other.to_string(),
                                };
                                (k.clone(), Json::String(v))
                            })
                            .collect();
                        params = params.with_arguments(a);
                    }
                    let got =
                        self.service.get_prompt(params).await.map_err(|e| {
                            self.service_error(e, &format!("`{what}`"), Some(timeout))
                        })?;
                    serde_json::to_value(got).map_err(|e| bad(e.to_string()))
                }
            }
        };
        tokio::time::timeout(timeout, asked)
            .await
            .map_err(|_| McpError::Timeout {
                server: self.server.clone(),
                tool: what.to_string(),
                timeout,
            })?
    }

    /// Sends a `tools/call` and waits for its result, as rmcp's `call_tool` does, but
    /// keeps the progress token rmcp gave it while it is in flight, so that the
    /// server's progress notifications name the node and the tool. A call given up
    /// (a timeout, a stop) is cancelled at the server, as rmcp cancels its own.
    ///
    /// A result that asks for input first (SEP-2322, the 2026-07-28 protocol: an
    /// `input_required` result with requests and maybe a `requestState`) is answered
    /// as the same requests sent on their own would be (an elicitation with the run's
    /// answer, sampling by the graph's model, the roots), and the call is sent again,
    /// a new request, with the answers and the state echoed as it came, up to
    /// [`MRTR_ROUNDS`] times. An elicitation no answer meets leaves the call there:
    /// the run pauses for a person, as for an elicitation sent on its own. A run
    /// resumes with one answer, and the call starts again from its first round, so a
    /// call that asks a second question is refused rather than asked round after round.
    pub(super) async fn send_call(
        &self,
        request: &crate::tool::ToolRequest,
        mut params: CallToolRequestParams,
    ) -> Result<rmcp::model::CallToolResult, CallError> {
        use rmcp::model::ServerResult;
        let (mut questions, mut state_rounds) = (0, 0u32);
        for _ in 0..MRTR_ROUNDS {
            match self.send_call_once(request, params.clone()).await? {
                ServerResult::CallToolResult(result) => return Ok(result),
                // A result with nothing in it (a server that answers `{}`) is an empty one.
                ServerResult::EmptyResult(_) => {
                    return Ok(rmcp::model::CallToolResult::default());
                }
                ServerResult::InputRequiredResult(asked) => {
                    let requests = asked.input_requests.unwrap_or_default();
                    if requests.is_empty() {
                        // Neither requests nor state: nothing to send again with.
                        if asked.request_state.is_none() {
                            return Err(ServiceError::UnexpectedResponse.into());
                        }
                        // Only state (the server is not ready): asked again after a
                        // pause growing to 250 ms, as rmcp's own loop does.
                        let millis = (50u64 << state_rounds.min(3)).min(250);
                        state_rounds += 1;
                        tokio::time::sleep(Duration::from_millis(millis)).await;
                    } else {
                        state_rounds = 0;
                    }
                    questions += requests
                        .values()
                        .filter(|r| matches!(r, rmcp::model::InputRequest::Elicitation(_)))
                        .count();
                    if questions > 1 {
                        return Err(CallError::Mcp(McpError::CannotAnswer {
                            server: self.server.clone(),
                            tool: request.tool.clone(),
                            what: "a second person's answer".into(),
                            message: "a run answers one question a call (the call starts again from its first round when the run resumes)".into(),
                        }));
                    }
                    let answers = self.answer_input_requests(request, requests).await?;
                    let unanswered = self
                        .asking
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .asked
                        .is_some();
                    if unanswered {
                        // The caller sees the question and pauses the run.
                        return Ok(rmcp::model::CallToolResult::default());
                    }
                    params.input_responses = (!answers.is_empty()).then_some(answers);
                    params.request_state = asked.request_state;
                }
                _ => return Err(ServiceError::UnexpectedResponse.into()),
            }
        }
        Err(ServiceError::InputRequiredRoundsExceeded {
            max_rounds: MRTR_ROUNDS,
        }
        .into())
    }

    /// The answers to an `input_required` result's requests, by their keys, each as
    /// the client's handler answers the same request sent on its own.
    async fn answer_input_requests(
        &self,
        request: &crate::tool::ToolRequest,
        requests: rmcp::model::InputRequests,
    ) -> Result<rmcp::model::InputResponses, CallError> {
        use rmcp::Service;
        use rmcp::model::{InputRequest, ServerRequest};
        let handler = self.service.service();
        let mut answers = rmcp::model::InputResponses::new();
        for (key, asked) in requests {
            // Each as the same request sent on its own: through the handler.
            let (what, asked) = match asked {
                InputRequest::Elicitation(r) => {
                    ("a person's answer", ServerRequest::ElicitRequest(r))
                }
                InputRequest::CreateMessage(r) => (
                    "a completion (sampling)",
                    ServerRequest::CreateMessageRequest(r),
                ),
                InputRequest::ListRoots(r) => ("its roots", ServerRequest::ListRootsRequest(r)),
                other => {
                    return Err(self.cannot(
                        request,
                        "something of a kind Switchyard does not know",
                        serde_json::to_string(&other).unwrap_or_default(),
                    ));
                }
            };
            let context = rmcp::service::RequestContext::new(
                rmcp::model::NumberOrString::Number(0),
                self.service.peer().clone(),
            );
            let answer = handler.handle_request(asked, context).await.map_err(|e| {
                let why = if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND
                    && what.contains("sampling")
                {
                    "the graph does not let it ask (`sampling = true` in its `[servers.x]`)"
                        .to_string()
                } else {
                    e.message.to_string()
                };
                self.cannot(request, what, why)
            })?;
            // The result alone (`ClientResult` is untagged).
            let answer = serde_json::to_value(answer)
                .map_err(|e| self.cannot(request, what, e.to_string()))?;
            answers.insert(key, answer);
        }
        Ok(answers)
    }

    /// What a tool's `input_required` result asked that Switchyard cannot give.
    fn cannot(&self, request: &crate::tool::ToolRequest, what: &str, message: String) -> CallError {
        CallError::Mcp(McpError::CannotAnswer {
            server: self.server.clone(),
            tool: request.tool.clone(),
            what: what.to_string(),
            message,
        })
    }

    /// One `tools/call` request and its result, whatever kind.
    async fn send_call_once(
        &self,
        request: &crate::tool::ToolRequest,
        params: CallToolRequestParams,
    ) -> Result<rmcp::model::ServerResult, ServiceError> {
        use rmcp::model::{CallToolRequest, CancelledNotificationParam, ClientRequest};
        let peer = self.service.peer().clone();
        let call = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_cancellable_request(call, rmcp::service::PeerRequestOptions::no_options())
            .await?;
        // Until dropped: the call is known by its token; a call not answered is cancelled.
        struct InFlight {
            peer: rmcp::Peer<RoleClient>,
            asking: Arc<std::sync::Mutex<crate::mcp::handler::Asking>>,
            token: rmcp::model::ProgressToken,
            unanswered: Option<rmcp::model::RequestId>,
        }
        impl Drop for InFlight {
            fn drop(&mut self) {
                let mut asking = self.asking.lock().unwrap_or_else(|e| e.into_inner());
                asking.calls.remove(&self.token);
                drop(asking);
                if let Some(id) = self.unanswered.take()
                    && let Ok(runtime) = tokio::runtime::Handle::try_current()
                {
                    let peer = self.peer.clone();
                    runtime.spawn(async move {
                        let _ = peer
                            .notify_cancelled(CancelledNotificationParam::new(
                                Some(id),
                                Some("request abandoned by the caller".into()),
                            ))
                            .await;
                    });
                }
            }
        }
        self.asking
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .calls
            .insert(
                handle.progress_token.clone(),
                (request.node.clone(), request.tool.clone()),
            );
        let mut in_flight = InFlight {
            peer,
            asking: self.asking.clone(),
            token: handle.progress_token.clone(),
            unanswered: Some(handle.id.clone()),
        };
        let result = handle.await_response().await;
        in_flight.unanswered = None;
        result
    }
}
