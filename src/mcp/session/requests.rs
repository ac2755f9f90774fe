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
        let peer = self.service.peer();
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
                    let read = peer
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
                    let got = peer
                        .get_prompt(params)
                        .await
                        .map_err(|e| self.service_error(e, &format!("`{what}`"), Some(timeout)))?;
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
    pub(super) async fn send_call(
        &self,
        request: &crate::tool::ToolRequest,
        params: CallToolRequestParams,
    ) -> Result<rmcp::model::CallToolResult, ServiceError> {
        use rmcp::model::{
            CallToolRequest, CancelledNotificationParam, ClientRequest, ServerResult,
        };
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
        match result? {
            ServerResult::CallToolResult(result) => Ok(result),
            // A result with nothing in it (a server that answers `{}`) is an empty one.
            ServerResult::EmptyResult(_) => Ok(rmcp::model::CallToolResult::default()),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }
}
