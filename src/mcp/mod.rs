//! The MCP client behind `mcp_call`: [`McpClient`] implements [`crate::tool::ToolClient`]
//! with rmcp over stdio child processes and streamable HTTP.
//!
//! A call flows: [`McpClient`] finds or starts the server's session (restarting one
//! that died, within a budget), looks the tool up in the session's list, checks the
//! arguments against its compiled [`ToolSchema`], calls it with a timeout, and turns the
//! result into a state value (`reply.rs`), storing binary content in the [`BlobStore`].
//! A server's `${NAME}` and `${NAME:-default}` are expanded from the environment when
//! it starts (`env_vars.rs`). [`check_online`] checks a graph's fixed tool names and literal arguments against the live
//! servers (`switchyard validate --online`).

mod blob_store;
mod client;
mod env_vars;
mod error;
mod event_sink;
mod handler;
mod oauth;
mod online;
mod reply;
mod sampling;
mod session;
mod tool_schema;

pub use blob_store::{BlobStore, extension};
pub use client::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_RESTARTS, McpClient,
};
pub use error::{ArgumentProblem, McpError};
pub use online::check_online;
pub use sampling::Sampler;
pub use tool_schema::{
    ToolSchema, compile as compile_schema, example_arguments, problems as argument_problems,
};
