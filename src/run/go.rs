//! [`Go`]: what a run does on its thread, the one way to say start or resume (the
//! command line, a server's run, a subgraph's child all say it so).

use serde_json::Value as Json;

#[derive(Clone, Debug, PartialEq)]
pub enum Go {
    /// A new run from the entry node: the input's fields are written through their
    /// reducers onto the thread's state (a new thread's defaults).
    Start(Json),
    /// [`Go::Start`] on a thread that may be paused: its pending interrupt is dropped
    /// and the run starts from the entry node, as LangGraph's server does with a new
    /// input to a thread waiting at an interrupt. (`Start` refuses a paused thread, so
    /// that an answer is not lost by mistake.)
    Restart(Json),
    /// Go on from where the thread is paused: with the answer to its interrupt, or
    /// none after a stop, a crash or at a breakpoint. `force` goes on even when the
    /// graph file changed where the thread stands.
    Resume { payload: Option<Json>, force: bool },
    /// A new run (its input written, a paused thread's interrupt dropped) that starts
    /// at `node` (a node's name, or `__end__`) rather than the entry: LangGraph's
    /// `command.goto`.
    StartAt { input: Json, node: String },
    /// [`Go::Resume`], the run then going to `node` (or `__end__`) rather than where
    /// the answered node's edges send it: `command` with `resume` and `goto`.
    ResumeTo { payload: Option<Json>, node: String },
    /// Go on from a thread waiting at an interrupt as though the wait for its answer had
    /// run out, whatever the clock says: the interrupt's `on_timeout` route, as a resume
    /// after its deadline takes (a scripted timeout of `switchyard test`).
    Expire,
    /// Nothing to do: the run ends at once, writing nothing, its outcome where the
    /// thread stands (as LangGraph's server takes a resume of an ended thread, or a
    /// run without input on a paused or ended one). The thread must have a checkpoint.
    Stay,
    /// `go` from the thread's checkpoint `at` rather than its latest: from an earlier
    /// one, the run forks the thread there (its records follow `at`, a new branch,
    /// the earlier ones stay as they were), as LangGraph's server runs from a
    /// `checkpoint_id`. `go` is decided from that checkpoint (a continue of a mid-run
    /// one regenerates what came after it); it is not itself a `From`.
    From { at: u64, go: Box<Go> },
}

impl Go {
    /// A resume with `payload` (none: after a stop or at a breakpoint), not forced.
    pub fn resume(payload: Option<Json>) -> Self {
        Go::Resume {
            payload,
            force: false,
        }
    }
}
