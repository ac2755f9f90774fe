//! What a client asks of a run. It is saved with the run (its `kwargs`), so a run a
//! previous process left waiting starts the same way after a restart.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// A request to run a graph on a thread.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunRequest {
    /// State fields to write before the run starts from the entry. None, with no
    /// command, goes on from where a stopped thread stands (or starts with no input).
    #[serde(default)]
    pub input: Option<Json>,
    #[serde(default)]
    pub command: Option<Command>,
    /// The checkpoint the run goes from (its thread's latest, without): an earlier one
    /// forks the thread there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<u64>,
    /// Node executions allowed in this run, instead of the graph's `max_steps`.
    #[serde(default)]
    pub max_steps: Option<u64>,
    #[serde(default)]
    pub multitask_strategy: Multitask,
    /// Kept as given: `configurable` and the rest of a LangGraph config.
    #[serde(default)]
    pub config: Json,
    /// The values of the graph's `[configurable]` constants that the run's assistant
    /// and its own `config.configurable` or `context` give, checked: a run that starts
    /// takes them (`Runner::with_configuration`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub configured: serde_json::Map<String, Json>,
    /// The assistant the run was asked of, when it is not its graph's own (one made
    /// through the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_id: Option<String>,
    /// The run's `context`, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Json>,
    /// The stream modes asked for, as given; the host records everything a mode
    /// needs whatever they are.
    #[serde(default)]
    pub stream_mode: Vec<String>,
    /// Keep the run's events for readers that join later (the host keeps them anyway
    /// for its retention time; the flag is recorded for the client's sake).
    #[serde(default)]
    pub stream_resumable: bool,
    /// A stateless run's thread: deleted when the run ends, unless `keep`.
    #[serde(default)]
    pub temporary: bool,
    #[serde(default)]
    pub on_completion_keep: bool,
    /// The run had begun when its process stopped: it goes on from its thread's last
    /// checkpoint rather than starting again.
    #[serde(default)]
    pub resumed_after_restart: bool,
}

impl RunRequest {
    /// A stateless run whose thread goes when it ends, and that writes no update
    /// first: it runs without checkpoints (see `Host::drive`).
    pub(crate) fn keeps_no_checkpoints(&self) -> bool {
        self.temporary
            && !self.on_completion_keep
            && self.command.as_ref().is_none_or(|c| c.update.is_none())
    }
}

/// Why a stateless run that a server stopped (or lost) before it ended did not go on.
pub(super) const STATELESS_STOPPED: &str = "the server stopped before this stateless run ended; a stateless run keeps no checkpoints to go on from, so it was not resumed: start it again";

/// LangGraph's `Command`: an answer to the pending interrupt, and fields to write
/// before going on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Command {
    /// The answer (`Some(Json::Null)` lets a breakpoint or a stop go on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Json>,
    /// State fields written through their reducers before the run goes on, as a
    /// person's update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<Json>,
    /// Where the run goes (a node, or `__end__`) instead of the entry, or instead of
    /// where the answered interrupt's edges send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goto: Option<String>,
}

/// What a new run does when its thread already has one in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Multitask {
    /// Refuse the new run.
    #[default]
    Reject,
    /// Run it after the others.
    Enqueue,
    /// Stop the others at their next node boundary (keeping what they did), then run.
    Interrupt,
    /// Stop the others and remove what they wrote, then run.
    Rollback,
}

impl Multitask {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Multitask::Reject => "reject",
            Multitask::Enqueue => "enqueue",
            Multitask::Interrupt => "interrupt",
            Multitask::Rollback => "rollback",
        }
    }

    /// What the runs in the way are asked to do: stop (`interrupt`), or stop and take
    /// back what they wrote (`rollback`); none for the other strategies.
    pub(crate) fn cancel_action(self) -> Option<CancelAction> {
        match self {
            Multitask::Interrupt => Some(CancelAction::Interrupt),
            Multitask::Rollback => Some(CancelAction::Rollback),
            Multitask::Reject | Multitask::Enqueue => None,
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "reject" => Multitask::Reject,
            "enqueue" => Multitask::Enqueue,
            "interrupt" => Multitask::Interrupt,
            "rollback" => Multitask::Rollback,
            _ => return None,
        })
    }
}

/// How a cancelled run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CancelAction {
    /// Stop at the next node boundary; what it did stands (status `interrupted`).
    Interrupt,
    /// Stop, then remove the run and the checkpoints it wrote.
    Rollback,
}
