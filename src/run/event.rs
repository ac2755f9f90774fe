//! Typed events of a run. The CLI prints them for people or as NDJSON (`--json`); the
//! library hands them out through an unbounded channel ([`super::Runner::events`]).

use crate::store::Checkpoint;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::sync::Arc;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        thread: Arc<str>,
        graph: String,
        run: u64,
        resumed: bool,
    },
    NodeStarted {
        node: Arc<str>,
        step: u64,
    },
    NodeFinished {
        node: Arc<str>,
        step: u64,
        duration_us: u64,
        writes: Vec<Arc<str>>,
        skipped: bool,
    },
    RouteTaken {
        from: Arc<str>,
        to: Arc<str>,
        case: Option<String>,
    },
    Interrupted {
        node: Arc<str>,
        payload: Json,
    },
    Resumed {
        node: Arc<str>,
        timed_out: bool,
    },
    LimitReached {
        limit: std::borrow::Cow<'static, str>,
        to: Option<Arc<str>>,
    },
    LlmInvocation {
        node: Arc<str>,
        model: String,
        tokens_in: u64,
        tokens_out: u64,
        cache_hit: bool,
        latency_ms: u64,
        attempt: u32,
        /// The messages sent, prompts rendered (only when the runner was asked for
        /// content: [`super::Runner::with_llm_content`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        messages: Option<Vec<Json>>,
        /// The model's answer: its text, or the tools it called (with content only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<Json>,
        // For traces, in the process only (not written: each run's event log and every
        // `--json` line would carry them for no reader of theirs).
        /// Which server the endpoint is (`[llm] provider`: `openai`, `anthropic`, ...).
        #[serde(skip)]
        provider: Option<String>,
        /// The endpoint's base URL (its query left out: it may hold a key).
        #[serde(skip)]
        endpoint: Option<String>,
        /// The reply's id and the model that wrote it, as the server said.
        #[serde(skip)]
        response_id: Option<String>,
        #[serde(skip)]
        response_model: Option<String>,
        /// Why the reply ended: `stop`, `length`, `tool_calls`, `content_filter`.
        #[serde(skip)]
        finish_reason: Option<String>,
    },
    /// A request to the model failed on its way (a connection dropped, a stream cut
    /// off, a 429 or a 5xx) and is sent again after `wait_ms`. With `discard`, the
    /// failed attempt had streamed text (`TextDelta`s) that is now void: a reader that
    /// showed it takes it back, and the next attempt's text starts the reply anew.
    LlmRetry {
        node: Arc<str>,
        /// The attempt that failed; the next is this one plus one.
        attempt: u32,
        error: String,
        wait_ms: u64,
        discard: bool,
    },
    /// Every try of an LLM node failed and its `fallback` gave the output.
    LlmFallback {
        node: Arc<str>,
        /// Why the last try failed.
        reason: String,
    },
    ToolCall {
        node: Arc<str>,
        server: String,
        tool: String,
        arguments: Json,
        duration_ms: u64,
        attempt: u32,
        is_error: bool,
        /// What the tool answered, as the node reads it, or `{"error": ...}` (only with
        /// content: [`super::Runner::with_llm_content`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Json>,
        /// The call's id: the model's for a call it asked for, else the call's
        /// idempotency key (`THREAD/RUN/STEP/CALL`). For traces, in the process only.
        #[serde(skip)]
        call_id: String,
    },
    TextDelta {
        node: Arc<str>,
        text: String,
    },
    /// An MCP server finished its handshake; `restart` is 0 for the first start and
    /// counts the restarts after it died.
    ServerStarted {
        server: String,
        pid: Option<u32>,
        restart: u32,
        /// How long the start and the handshake took. For traces, in the process only.
        #[serde(skip)]
        duration_ms: u64,
    },
    /// A server's progress notification for a call it is working on: the node that
    /// made the call and its tool (none for a notification no call in flight sent).
    ToolProgress {
        server: String,
        node: Option<Arc<str>>,
        tool: Option<String>,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// An MCP server wants a person to sign in (OAuth): `url` opened in a browser, the
    /// run goes on once the authorization server sends the browser back to Switchyard.
    SignIn {
        server: String,
        url: String,
    },
    /// An MCP server exited or its connection dropped while the run needed it.
    ServerDied {
        server: String,
        message: String,
    },
    /// An MCP server was shut down because the run ended or paused.
    ServerStopped {
        server: String,
    },
    /// One line a stdio server wrote to its stderr (never shown on the terminal as is).
    ServerStderr {
        server: String,
        line: String,
    },
    NodeFailed {
        node: Arc<str>,
        message: String,
        handled: bool,
    },
    Stopped {
        next: Option<Arc<str>>,
        step: u64,
    },
    /// A checkpoint was saved: the record, and the whole state after it when asked for
    /// (only with [`super::Runner::with_saved_events`]; the command line asks for none).
    Saved {
        record: Arc<Checkpoint>,
        values: Option<Arc<Json>>,
    },
    /// Where the thread stands as a run that goes on from a pause begins (an answer, a
    /// stop, a breakpoint): its whole state, before the run writes anything, as
    /// LangGraph's `values` stream shows it first. Only with
    /// [`super::Runner::with_saved_events`], like `Saved`.
    Standing {
        values: Arc<Json>,
        /// The graph version the run uses (its records' `graph_hash`).
        graph_hash: Arc<str>,
    },
    /// An event of a subgraph node's child run.
    Subgraph {
        node: Arc<str>,
        inner: Box<Event>,
    },
    RunFinished {
        status: std::borrow::Cow<'static, str>,
        outcome: Option<String>,
        /// A finalize node's rendered response.
        response: Option<String>,
        steps: u64,
        tokens: u64,
        duration_ms: u64,
    },
}
