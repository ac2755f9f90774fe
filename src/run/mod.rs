//! Run: the async interpreter, its state, checkpoints and events.
//!
//! [`Runner`] holds a graph, its store and its clients, and runs the loop
//! (`runner.rs`); a run begins as [`Go`] says (`plan.rs` decides what it will do,
//! writing nothing, then executes it). Each node's kind (`kinds/`) turns the state into
//! a step, which `apply.rs` writes through the reducers and routes, and `step.rs`
//! records (`recorder.rs`) and tells of ([`Event`]s, through `emitter.rs`). Where the
//! run stands is plain data in `cursor.rs`. [`Threads`] reads a graph's threads back:
//! their state at any checkpoint, history, forks and a person's updates.

mod apply;
mod cursor;
mod emitter;
mod event;
mod go;
mod kinds;
mod map;
mod message_ids;
pub(crate) mod meter;
mod outcome;
mod parallel;
mod plan;
mod recorder;
mod runner;
pub(crate) mod scope;
pub(crate) mod slot;
mod state;
mod step;
mod stop;
mod store_tools;
mod subgraph;
mod text_fits;
mod threads;

pub use event::Event;
pub use go::Go;
pub(crate) use message_ids::is_ai;
pub use message_ids::{interrupt_id, reply_id};
pub use outcome::{Outcome, RunError};
pub use runner::Runner;
pub use state::{State, WriteError};
pub use stop::StopHandle;
pub use store_tools::{StoreTools, store_tools};
pub use threads::Threads;
