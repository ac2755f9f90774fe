use crate::run::RunError;
use crate::store::StoreError;

/// Why the host refused or failed a request. Each kind says what a client did or can
/// do: the server gives each its own HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No such graph, thread, run or checkpoint.
    #[error("{0}")]
    NotFound(String),
    /// The request cannot be taken as things stand (a busy thread, a thread paused at
    /// an interrupt, an id that exists); it may be taken later or in another form.
    #[error("{0}")]
    Conflict(String),
    /// The request is well formed and wrong: an input field that is not declared, a
    /// value of the wrong type, an answer that does not fit the resume schema.
    #[error("{0}")]
    Invalid(String),
    /// The request contradicts itself as LangGraph's server refuses it with 400 (a
    /// configuration given both as `config.configurable` and as `context`).
    #[error("{0}")]
    BadRequest(String),
    /// The request is not one this host takes (an option it does not support).
    #[error("{0}")]
    Unsupported(String),
    /// The host is shutting down.
    #[error("{0}")]
    Unavailable(String),
    /// A service the request needs answered with an error (the embeddings endpoint).
    #[error("{0}")]
    Upstream(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The model client a graph's runs need cannot be made (a missing key, a
    /// recording that cannot be opened).
    #[error(transparent)]
    Llm(#[from] crate::llm::SetupError),
}

impl From<RunError> for HostError {
    fn from(e: RunError) -> Self {
        let message = e.to_string();
        match e {
            RunError::Store(
                StoreError::Claimed { .. }
                | StoreError::ClaimLost { .. }
                | StoreError::Conflict { .. },
            ) => HostError::Conflict(message),
            RunError::Store(s) => HostError::Store(s),
            RunError::UnknownThread(_) | RunError::NoSuchCheckpoint { .. } => {
                HostError::NotFound(message)
            }
            RunError::NotPaused { .. }
            | RunError::Paused { .. }
            | RunError::GraphChanged { .. }
            | RunError::NodeGone { .. }
            | RunError::Fork(_)
            | RunError::ThreadExists(_)
            | RunError::CannotExpire { .. } => HostError::Conflict(message),
            RunError::UnexpectedPayload { .. }
            | RunError::MissingPayload { .. }
            | RunError::InvalidPayload { .. }
            | RunError::WrongReference { .. }
            | RunError::AnswerRefused { .. }
            | RunError::Input(_)
            | RunError::Configuration(_)
            | RunError::Goto(_)
            | RunError::Update(_) => HostError::Invalid(message),
            RunError::Node { .. } | RunError::Failed { .. } => HostError::Conflict(message),
        }
    }
}
