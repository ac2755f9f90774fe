//! The built-in node kinds, one file each: a `run` function from the context a node
//! receives ([`cx::NodeCx`]) and its compiled body to a [`Step`]. The runner matches on
//! the node's body to pick the kind (`Runner::run_kind`); no kind imports the runner.

pub(crate) mod chat;
pub(crate) mod cx;
pub(crate) mod finalize;
pub(crate) mod interrupt;
pub(crate) mod llm;
pub(crate) mod mcp;
pub(crate) mod policy;
pub(crate) mod tool_calls;

use crate::graph::{FieldId, Target};
use serde_json::Value as Json;
use std::sync::Arc;

/// What a node's work produced.
pub(crate) enum Step {
    /// The node did its work: its result (seen as `result` by `set`) and the writes of
    /// its kind, in order.
    Done {
        result: Arc<Json>,
        writes: Vec<(FieldId, Arc<Json>)>,
        /// A kind that picks its own successor (a pseudo tool), and the case that names
        /// the route (the pseudo tool's name), as its `route_taken` event tells it.
        route: Option<(Target, String)>,
        /// A finalize node: the outcome and response.
        finish: Option<(String, Option<String>)>,
        tokens: u64,
    },
    /// A `fail` node: the run fails with this outcome and message, whatever the
    /// node's `on_error` (the graph failed it on purpose).
    FailRun { outcome: String, message: String },
    /// The node pauses the run for a person.
    Pause { payload: Json },
    /// A stop was asked while the node waited to try again: it did not complete. The
    /// run stops before it (a resume runs it again); `writes` (the audit records of
    /// its attempts) stand.
    Abandoned {
        tokens: u64,
        writes: Vec<(FieldId, Arc<Json>)>,
    },
    /// The node failed; `on_error` decides what happens. `writes` must stand all the
    /// same (the audit records of an `mcp_call`'s attempts): they go through the
    /// reducers, and `set` does not run.
    Fail {
        message: String,
        tokens: u64,
        writes: Vec<(FieldId, Arc<Json>)>,
    },
}

impl Step {
    /// A failure that used no tokens and wrote nothing.
    pub(crate) fn fail(message: String) -> Self {
        Step::Fail {
            message,
            tokens: 0,
            writes: Vec::new(),
        }
    }

    /// The result and the writes share their values: a tool's 2 KB answer that is both
    /// is held once.
    pub(crate) fn done(result: Arc<Json>, writes: Vec<(FieldId, Arc<Json>)>) -> Self {
        Step::Done {
            result,
            writes,
            route: None,
            finish: None,
            tokens: 0,
        }
    }
}
