//! Run: the async interpreter, its state, checkpoints and events.

pub mod answer;
pub(crate) mod elicitation;
pub mod event;
pub mod kinds;
mod map;
mod outcome;
mod parallel;
mod record;
mod resume;
mod runner;
pub(crate) mod scope;
pub(crate) mod slot;
pub mod state;
mod step;
mod stop;
mod subgraph;
mod text_fits;
mod thread;

pub use crate::store::{
    Checkpoint, Checkpointer, Claim, MemoryStore, NoStore, SqliteStore, Status,
};
pub use event::Event;
pub use kinds::llm::{LlmClient, LlmError, LlmReply, LlmRequest};
pub use kinds::mcp::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};
pub use runner::{Outcome, RunError, Runner, StopHandle};
pub use state::State;
