//! Why an MCP call failed, and whether trying again may help.

use crate::tool::ToolError;
use std::path::PathBuf;
use std::time::Duration;

/// One way an argument does not fit a tool's `inputSchema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentProblem {
    /// JSON pointer into the arguments (`""` for the whole object, `/message`, ...).
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ArgumentProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "at `{path}`: {}", self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server asked for a person's input (an elicitation) the call could not go on
    /// without: `{message, requested_schema}`.
    #[error("server `{server}` asked for input during `{tool}`: {}", asked["message"].as_str().unwrap_or("(no message)"))]
    InputRequired {
        server: String,
        tool: String,
        asked: serde_json::Value,
    },
    #[error("cannot start server `{server}`: {message}")]
    Spawn { server: String, message: String },
    #[error("server `{server}` failed the MCP handshake: {message}")]
    Handshake { server: String, message: String },
    #[error("server `{server}` did not finish the MCP handshake within {}", secs(*.timeout))]
    HandshakeTimeout { server: String, timeout: Duration },
    #[error("cannot reach server `{server}` at `{url}`: {message}")]
    Connect {
        server: String,
        url: String,
        message: String,
    },
    /// The server exited or its connection dropped; it is restarted on next use.
    #[error("server `{server}` is gone: {message}")]
    Gone { server: String, message: String },
    #[error(
        "server `{server}` died {} time{}, more than the {restarts} restart{} allowed; it is not started again",
        restarts + 1,
        if *restarts == 0 { "" } else { "s" },
        if *restarts == 1 { "" } else { "s" }
    )]
    RestartsExhausted { server: String, restarts: u32 },
    #[error("`{tool}` on server `{server}` did not answer within {}", secs(*.timeout))]
    Timeout {
        server: String,
        tool: String,
        timeout: Duration,
    },
    #[error("server `{server}` has no tool `{tool}`{help}")]
    UnknownTool {
        server: String,
        tool: String,
        /// `; did you mean ...` or `; it offers ...`, or empty.
        help: String,
    },
    #[error(
        "the arguments of `{tool}` do not fit its inputSchema: {}",
        problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    InvalidArguments {
        server: String,
        tool: String,
        problems: Vec<ArgumentProblem>,
    },
    /// The tool's `structuredContent` does not fit the `outputSchema` it declared.
    #[error(
        "the result of `{tool}` does not fit its outputSchema: {}",
        problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    InvalidResult {
        server: String,
        tool: String,
        problems: Vec<ArgumentProblem>,
    },
    #[error(
        "the inputSchema of `{tool}` on server `{server}` is not a valid JSON Schema: {message}"
    )]
    BadSchema {
        server: String,
        tool: String,
        message: String,
    },
    /// The server answered with a JSON-RPC error (unknown tool, invalid params, ...).
    #[error("server `{server}` refused {what}: {message}")]
    Refused {
        server: String,
        what: String,
        message: String,
    },
    /// Not sent: the claim it was to be made under could not be counted on any more
    /// (`ToolRequest::send_by` had passed).
    #[error(
        "`{tool}` on server `{server}` was not called: the thread's claim was last confirmed longer ago than its lease (this process was stopped or slowed)"
    )]
    Unsent { server: String, tool: String },
    #[error("server `{server}` sent a reply Switchyard cannot use: {message}")]
    BadReply { server: String, message: String },
    /// A tool's `input_required` result (SEP-2322) asked for something Switchyard
    /// cannot give: sampling the graph does not allow, a model call that failed, a
    /// second question in one call.
    #[error(
        "server `{server}` asked during `{tool}` for {what}, which Switchyard cannot answer: {message}"
    )]
    CannotAnswer {
        server: String,
        tool: String,
        what: String,
        message: String,
    },
    #[error("cannot store a blob in `{}`: {source}", dir.display())]
    Blob {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl McpError {
    /// Worth another attempt under the node's `retry`: the server may answer next time
    /// (a timeout, a dropped connection, a server that died and is restarted).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            McpError::HandshakeTimeout { .. }
                | McpError::Connect { .. }
                | McpError::Gone { .. }
                | McpError::Timeout { .. }
        )
    }
}

impl From<McpError> for ToolError {
    fn from(e: McpError) -> Self {
        ToolError {
            transient: e.is_transient(),
            message: e.to_string(),
            unsent: matches!(e, McpError::Unsent { .. }),
            asked: match e {
                McpError::InputRequired { asked, .. } => Some(asked),
                _ => None,
            },
        }
    }
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}
