//! The tool port: how a run reaches tools, whatever serves them. [`ToolClient`] lists a
//! server's tools and calls them; the MCP client (`crate::mcp`) is the real one, tests
//! plug scripted doubles. Beside the model port (`crate::llm`), below the runner: the
//! runner, the model's offer of tools and the MCP client all speak these types.

pub(crate) mod elicitation;

use crate::graph::Server;
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::Duration;

/// What Switchyard calls itself to the servers it talks to (models, MCP servers, trace
/// collectors): `switchyard/<version>`, so their logs and rate limits can tell it apart.
pub const USER_AGENT: &str = concat!("switchyard/", env!("CARGO_PKG_VERSION"));

/// One tool call.
#[derive(Debug, Clone)]
pub struct ToolRequest {
    pub server: Server,
    /// The node that makes the call, which its progress events name.
    pub node: Option<std::sync::Arc<str>>,
    pub tool: String,
    pub arguments: Json,
    pub timeout: Option<Duration>,
    /// The same for every attempt of this call, and again when a crashed or
    /// abandoned run runs the node again: `THREAD/RUN/STEP/CALL` (`/ITEM` in a mapped
    /// node). Sent in the call's `_meta` as `switchyard/idempotencyKey`, so a tool with
    /// side effects can do them once.
    pub idempotency_key: String,
    /// The answer to an elicitation the server made when this call was last made (the
    /// run paused for it): given to the server when it asks again.
    pub answer: Option<Arc<Json>>,
    /// The claim of the thread this call is made under (see
    /// `crate::store::Fence`): its fencing token, sent in the call's `_meta` as
    /// `switchyard/fencingToken` so that a tool can refuse a holder that was taken
    /// over, and the instant until which it surely holds. A call not yet sent by then
    /// is not sent ([`ToolError::unsent`]): the process was stopped or slowed past
    /// its lease, and the claim must be asked again.
    pub fencing_token: Option<i64>,
    pub send_by: Option<std::time::Instant>,
}

impl ToolRequest {
    /// A call with no timeout of its own (the client's default) and no answer to give.
    pub fn new(
        server: Server,
        tool: impl Into<String>,
        arguments: Json,
        idempotency_key: impl Into<String>,
    ) -> Self {
        ToolRequest {
            server,
            node: None,
            tool: tool.into(),
            arguments,
            timeout: None,
            idempotency_key: idempotency_key.into(),
            answer: None,
            fencing_token: None,
            send_by: None,
        }
    }
}

/// A tool's result: the content to write, and whether the tool reported an error.
#[derive(Debug, Clone, Default)]
pub struct ToolReply {
    pub content: Json,
    pub is_error: bool,
    /// The result's text parts, joined: what a model reads of it (a tool message's
    /// content). None when it has no text part.
    pub text: Option<String>,
    /// `content` is the result's `structuredContent` (else its parts' values).
    pub structured: bool,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub message: String,
    /// Worth retrying (a timeout, a dropped connection), under the node's `retry`.
    pub transient: bool,
    /// The server asked for input the call cannot go on without (an elicitation:
    /// `{message, requested_schema}`): the run pauses for a person's answer, and the
    /// node runs again with it.
    pub asked: Option<Json>,
    /// The call was not sent: its `send_by` had passed. Nothing reached the tool, so
    /// it may be made again once the thread's claim is known to hold.
    pub unsent: bool,
}

/// A tool a server offers, as its `tools/list` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// The tool's `inputSchema`: arguments are checked against it before every call.
    pub input_schema: Json,
    /// The tool's `outputSchema`, when it declares one: its `structuredContent` is
    /// checked against it, and `validate --online` types the node's output with it.
    pub output_schema: Option<Json>,
}

#[async_trait::async_trait]
pub trait ToolClient: Send + Sync {
    /// The tools `server` offers (started on first use).
    async fn list_tools(&self, server: &Server) -> Result<Vec<ToolInfo>, ToolError>;
    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError>;
    /// Ends every server session: the run finished or paused.
    async fn shutdown(&self) {}
}

/// The client used when none was configured: every call fails with a clear message.
pub struct NoTools;

#[async_trait::async_trait]
impl ToolClient for NoTools {
    async fn list_tools(&self, server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        Err(ToolError {
            message: format!(
                "listing the tools of `{}` needs a tool client, and none is configured",
                server.name
            ),
            transient: false,
            asked: None,
            unsent: false,
        })
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        Err(ToolError {
            message: format!(
                "calling `{}` on `{}` needs a tool client, and none is configured",
                request.tool, request.server.name
            ),
            transient: false,
            asked: None,
            unsent: false,
        })
    }
}
