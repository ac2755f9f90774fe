//! Why a request to a model got no usable reply.

use std::time::Duration;

/// A request that got no reply. Replies that came but do not fit the node's schema are
/// not errors here: the node kind judges them and asks again.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The server answered with an HTTP error status.
    #[error("the server answered {status}: {message}")]
    Status {
        status: u16,
        message: String,
        /// The server's `Retry-After` (or `retry-after-ms`), when it sent one.
        retry_after: Option<Duration>,
    },
    #[error("no reply within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("the connection to the server failed: {0}")]
    Connection(String),
    /// The server answered 2xx with something that is not a chat completion.
    #[error("the server's answer is not a chat completion: {0}")]
    Protocol(String),
    /// A streamed answer that the server ended with an error event of its own.
    #[error("the server reported an error in the stream: {0}")]
    Stream(String),
    /// The request could not be built (for example a history message of an unknown role).
    #[error("the request cannot be sent: {0}")]
    Request(String),
    /// A replayed run asked for something the recording does not hold.
    #[error("replay: {0}")]
    Replay(String),
    /// A test case (`switchyard test`) scripts no reply for this request.
    #[error("{0}")]
    Scripted(String),
    /// A recording could not be written.
    #[error("recording: {0}")]
    Record(String),
    #[error("node `{node}` needs an LLM client, and none is configured")]
    NotConfigured { node: String },
    /// The run was asked to stop while the node tried (or waited to try again).
    #[error("stopped before the reply")]
    Stopped,
}

impl LlmError {
    /// Worth asking again after a pause: rate limits, server errors, timeouts and
    /// dropped connections.
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => {
                *status == 408 || *status == 429 || (500..600).contains(status)
            }
            LlmError::Timeout(_) | LlmError::Connection(_) => true,
            _ => false,
        }
    }

    /// How long the server asked us to wait before the next request.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Why an LLM client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(
        "the API key in `{var}` cannot be sent in an HTTP header (it holds a control character)"
    )]
    BadKey { var: String },
    #[error("the endpoint `{url}` in `{var}` is not an http(s) URL")]
    BadUrl { var: String, url: String },
    #[error("`{var}` is set but empty; set it to the endpoint's URL, or unset it for OpenAI's")]
    EmptyUrl { var: String },
    #[error("cannot set up the HTTP client: {0}")]
    Http(String),
    #[error("a run can record or replay its LLM calls, not both")]
    RecordAndReplay,
    #[error("cannot create the recording `{path}`")]
    CreateRecording {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the recording `{path}`")]
    ReadRecording {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("line {line} of the recording `{path}` is not a recorded exchange: {message}")]
    RecordingLine {
        path: String,
        line: usize,
        message: String,
    },
}
