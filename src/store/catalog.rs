//! The catalog of `switchyard serve`: threads as clients created them and the runs
//! made on them. Checkpoints say what a thread holds; the catalog says who asked for
//! what, so that a thread with no run yet exists and a restarted server finds the runs
//! a previous process left unfinished.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// A thread created through the server (a thread run only from the command line has
/// checkpoints and no entry).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub id: String,
    /// Unix milliseconds.
    pub created_ms: u64,
    pub updated_ms: u64,
    /// A JSON object, as the client gave it.
    pub metadata: Json,
}

/// Where a run stands, named as the LangGraph API names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Waiting for its turn: another run of its thread, or a free slot.
    Pending,
    Running,
    /// Ended at a finalize node or END, or paused at an interrupt (the thread then
    /// is `interrupted`), as LangGraph says.
    Success,
    /// Failed, or could not start (its graph version is gone).
    Error,
    /// Hit the wall-time limit of the request.
    Timeout,
    /// Stopped by a cancel (or a shutdown).
    Interrupted,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Success => "success",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
            RunStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => RunStatus::Pending,
            "running" => RunStatus::Running,
            "success" => RunStatus::Success,
            "error" => RunStatus::Error,
            "timeout" => RunStatus::Timeout,
            "interrupted" => RunStatus::Interrupted,
            _ => return None,
        })
    }

    /// Still to do or being done.
    pub fn in_flight(self) -> bool {
        matches!(self, RunStatus::Pending | RunStatus::Running)
    }
}

/// One run: a request to run or resume a thread's graph, and how it went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub thread: String,
    /// The graph's id (its `[graph] name`).
    pub assistant: String,
    pub status: RunStatus,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// A JSON object, as the client gave it.
    pub metadata: Json,
    /// The request that made the run (input, command, config, stream modes, limits),
    /// enough to start it again after a restart.
    pub kwargs: Json,
    pub multitask_strategy: String,
    /// Why the run failed.
    pub error: Option<String>,
    /// The first checkpoint the run wrote, so a rollback removes its records and no
    /// others.
    pub first_seq: Option<u64>,
}
