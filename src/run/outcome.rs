//! How a run ended, and why it could not go on.

use crate::store::StoreError;
use serde_json::Value as Json;

/// How a call to [`Runner::run`](super::Runner::run) (or its shorthands `start` and `resume`) ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The run reached a finalize node or END.
    Finished {
        outcome: String,
        response: Option<String>,
        steps: u64,
    },
    /// The run is paused for a person; resume the thread with an answer.
    Interrupted { node: String, payload: Json },
    /// A stop request was honoured at a node boundary; resume the thread to go on.
    Stopped { next: Option<String>, steps: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("thread `{0}` has no checkpoints")]
    UnknownThread(String),
    #[error(
        "thread `{thread}` is {status}; only a paused (interrupted or stopped) thread can be resumed"
    )]
    NotPaused {
        thread: String,
        status: &'static str,
    },
    #[error("thread `{thread}` is paused at `{node}`; resume it instead of starting a new run")]
    Paused { thread: String, node: String },
    #[error(
        "thread `{thread}` is paused by a stop or a breakpoint, which takes no payload; resume it without one"
    )]
    UnexpectedPayload { thread: String },
    #[error("the interrupt `{node}` needs a payload to resume")]
    MissingPayload { node: String },
    /// [`Go::Expire`](super::Go::Expire) of a thread that waits at no interrupt with
    /// an `on_timeout`.
    #[error("thread `{thread}` waits at no interrupt whose wait can run out ({why})")]
    CannotExpire { thread: String, why: String },
    #[error("the payload does not fit the resume schema of `{node}`: {errors}")]
    InvalidPayload { node: String, errors: String },
    #[error(
        "the payload's reference `{got}` does not match the pending interrupt's reference `{expected}`"
    )]
    WrongReference { expected: String, got: String },
    #[error(
        "the graph file changed since thread `{thread}` paused: {why}; resume with --force to go on anyway"
    )]
    GraphChanged { thread: String, why: String },
    #[error("the input is refused: {0}")]
    Input(String),
    /// A run's configuration (values for `[configurable]` constants) that does not fit.
    #[error("the configuration is refused: {0}")]
    Configuration(String),
    /// `command.goto` names no node, or a node that would skip a required policy.
    #[error("command.goto is refused: {0}")]
    Goto(String),
    /// A run from an earlier checkpoint that cannot go from there.
    #[error("a run from an earlier checkpoint is refused: {0}")]
    Fork(String),
    /// A person's write to the state (`Threads::update`) that the fields refuse.
    #[error("the update is refused: {0}")]
    Update(String),
    #[error("node `{node}` failed: {message}")]
    Node { node: String, message: String },
    /// A `fail` node ended the run on purpose.
    #[error("the run failed at `{node}` ({outcome}): {message}")]
    Failed {
        node: String,
        outcome: String,
        message: String,
    },
    #[error(
        "the next node of thread `{thread}`, `{node}`, is no longer in the graph; fork the thread at an earlier checkpoint (`switchyard history`) and resume the fork"
    )]
    NodeGone { thread: String, node: String },
    #[error("the answer to `{node}` cannot be taken: {message}; nothing changed, answer again")]
    AnswerRefused { node: String, message: String },
    #[error("thread `{thread}` has no checkpoint {seq}")]
    NoSuchCheckpoint { thread: String, seq: u64 },
    #[error("thread `{0}` already exists")]
    ThreadExists(String),
}
