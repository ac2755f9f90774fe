//! Run: the async interpreter, its state, checkpoints and events.

pub mod answer;
pub mod checkpoint;
pub mod event;
pub mod kinds;
mod runner;
pub(crate) mod scope;
pub mod state;

pub use checkpoint::{Checkpoint, Checkpointer, Claim, MemoryStore, SqliteStore, Status};
pub use event::Event;
pub use kinds::llm::{LlmClient, LlmError, LlmReply, LlmRequest};
pub use kinds::mcp::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};
pub use runner::{Outcome, RunError, Runner, StopHandle};
pub use state::State;
