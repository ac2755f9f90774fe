//! A run's [`Course`]: the graph version it uses and what it does on its thread
//! ([`Go`]). A run created on an idle thread has it decided then (its input or answer
//! checked, and a refusal changes nothing), and its drive takes it as long as nothing
//! changed since (the thread's latest checkpoint, the graphs served); any other run's
//! is decided when its turn comes.

use super::request::RunRequest;
use super::{Host, HostError, RunRules};
use crate::graph::Graph;
use crate::run::Go;
use crate::store::{Checkpoint, Checkpoints, Status};
use serde_json::{Value as Json, json};
use std::sync::Arc;

/// Which graph a run uses and what it does.
pub(super) struct Course {
    pub(super) graph: Arc<Graph>,
    pub(super) go: Go,
    /// The thread's latest checkpoint when it was decided: the course holds while the
    /// thread still stands there (nothing wrote to it since).
    pub(super) at: Option<u64>,
    /// The served graphs' generation, read before the graph was looked up: the course
    /// holds while no graph was loaded, changed or removed since.
    pub(super) generation: u64,
}

impl Host {
    /// The current version of a served graph.
    pub(super) fn current_graph(&self, assistant: &str) -> Result<Arc<Graph>, HostError> {
        let Some(served) = self.inner.graphs.get(assistant) else {
            return Err(HostError::NotFound(format!(
                "no graph `{assistant}`; this server serves {}",
                self.inner.graphs.names()
            )));
        };
        served.current.ok_or_else(|| {
            HostError::Conflict(format!(
                "graph `{assistant}` does not validate:\n{}",
                served.problems.map(|p| p.rendered).unwrap_or_default()
            ))
        })
    }

    /// The version a run of `assistant` uses on a thread: the one the thread stands on
    /// while it has not ended, else `current`; a thread whose latest record an older
    /// version wrote moves to `current` when nothing where it stands changed (the
    /// check `switchyard diff --store` reports: its nodes are there, a pending
    /// interrupt's node unedited, its values fit their fields). A thread of another
    /// graph is refused.
    pub(super) async fn graph_for_thread(
        &self,
        assistant: &str,
        current: &Arc<Graph>,
        thread: &str,
        latest: Option<&Checkpoint>,
    ) -> Result<Arc<Graph>, HostError> {
        let Some(latest) = latest else {
            return Ok(current.clone());
        };
        let version = self.inner.graphs.version(&latest.graph_hash);
        let owner = version
            .as_ref()
            .map(|g| g.name.clone())
            .or_else(|| self.inner.graphs.by_path(&latest.graph).map(|s| s.id));
        if let Some(owner) = owner.filter(|o| o != assistant) {
            return Err(HostError::Conflict(format!(
                "thread `{thread}` belongs to graph `{owner}`; run it with that graph, or use another thread"
            )));
        }
        let ended = matches!(latest.status, Status::Finished | Status::Failed);
        Ok(match version {
            Some(v)
                if !ended
                    && v.hash != current.hash
                    && self.moves(current, thread, latest).await? =>
            {
                current.clone()
            }
            Some(v) if !ended => v,
            _ => current.clone(),
        })
    }

    /// Whether a thread standing at its latest record `at` can go on on `current`. A
    /// run from an earlier checkpoint (a fork) stays on the version that wrote it.
    async fn moves(
        &self,
        current: &Arc<Graph>,
        thread: &str,
        at: &Checkpoint,
    ) -> Result<bool, HostError> {
        let latest = self.inner.store.latest(thread).await?;
        if latest.as_ref().map(|l| l.seq) != Some(at.seq) {
            return Ok(false);
        }
        Ok(self
            .threads(current.clone())
            .movable(thread)
            .await?
            .is_none())
    }

    /// The version of `assistant` a run on `thread`, standing at `latest`, uses.
    pub(super) async fn graph_of_run(
        &self,
        assistant: &str,
        thread: &str,
        latest: Option<&Checkpoint>,
    ) -> Result<Arc<Graph>, HostError> {
        let current = self.current_graph(assistant)?;
        self.graph_for_thread(assistant, &current, thread, latest)
            .await
    }
}

/// What a request does on a thread that stands at `latest`, going from its checkpoint
/// `from` when that is not the latest: decided as though the thread stood there, the
/// run forks the thread at it ([`Go::From`]).
pub(super) async fn decide_from(
    store: &dyn Checkpoints,
    request: &RunRequest,
    from: Option<u64>,
    latest: Option<&Checkpoint>,
    thread: &str,
    rules: RunRules,
) -> Result<Go, HostError> {
    match from {
        Some(seq) if latest.map(|l| l.seq) != Some(seq) => {
            let record = fork_point(store, thread, seq).await?;
            let go = decide(request, Some(&record), thread, rules)?;
            Ok(Go::From {
                at: seq,
                go: Box::new(go),
            })
        }
        _ => decide(request, latest, thread, rules),
    }
}

/// A thread's checkpoint `seq`, which a run or an update forks from.
async fn fork_point(
    store: &dyn Checkpoints,
    thread: &str,
    seq: u64,
) -> Result<Checkpoint, HostError> {
    store
        .load_from(thread, seq)
        .await?
        .into_iter()
        .next()
        .filter(|r| r.seq == seq)
        .ok_or_else(|| HostError::NotFound(format!("thread `{thread}` has no checkpoint {seq}")))
}

/// Where a run going from checkpoint `from` (none: the latest) finds the thread: the
/// record whose graph version it uses and whose pause it answers.
pub(super) async fn standing_at(
    store: &dyn Checkpoints,
    thread: &str,
    from: Option<u64>,
    latest: Option<Checkpoint>,
) -> Result<Option<Checkpoint>, HostError> {
    match from {
        Some(seq) if latest.as_ref().map(|l| l.seq) != Some(seq) => {
            fork_point(store, thread, seq).await.map(Some)
        }
        _ => Ok(latest),
    }
}

/// What a request does on a thread that stands at `latest`.
pub(super) fn decide(
    request: &RunRequest,
    latest: Option<&Checkpoint>,
    thread: &str,
    rules: RunRules,
) -> Result<Go, HostError> {
    let goto = request.command.as_ref().and_then(|c| c.goto.clone());
    if let Some(node) = goto {
        return decide_goto(request, latest, thread, rules, node);
    }
    let strict = rules == RunRules::Strict;
    let ended = latest.is_some_and(|l| matches!(l.status, Status::Finished | Status::Failed));
    if let Some(resume) = request.command.as_ref().and_then(|c| c.resume.clone()) {
        // Nothing waits for the answer: LangGraph's server takes it and runs nothing
        // (the strict rules let the runner refuse it).
        if ended && !strict {
            return Ok(Go::Stay);
        }
        return Ok(Go::resume((!resume.is_null()).then_some(resume)));
    }
    let pending = latest.and_then(|l| l.pending.as_ref());
    match &request.input {
        Some(Json::Null) | None => match latest.map(|l| l.status) {
            Some(Status::Stopped | Status::Running) => Ok(Go::resume(None)),
            // A breakpoint takes no answer: a run with no input lets it go on, as in
            // LangGraph.
            Some(Status::Interrupted) if pending.is_some_and(|p| p.breakpoint.is_some()) => {
                Ok(Go::resume(None))
            }
            Some(Status::Interrupted) if strict => Err(HostError::Conflict(format!(
                "thread `{thread}` is paused at `{}`; answer it with `command: {{\"resume\": ...}}`",
                pending.map_or("?", |p| &*p.node)
            ))),
            // Nothing to answer with, nothing to go on with: the run stands where the
            // thread is, as on LangGraph's server (an input or a resume moves it).
            Some(Status::Interrupted | Status::Finished | Status::Failed) if !strict => {
                Ok(Go::Stay)
            }
            _ => Ok(Go::Start(json!({}))),
        },
        // The strict rules let the runner refuse an input to a paused thread.
        Some(input) if strict => Ok(Go::Start(input.clone())),
        // An input to a thread paused at an interrupt starts a new run, dropping the
        // interrupt, as LangGraph's server does.
        Some(input) => Ok(Go::Restart(input.clone())),
    }
}

/// [`decide`] for a request with `command.goto`: an answer goes there after it is
/// taken; otherwise a new run starts there. A thread paused at an interrupt that gets
/// neither an answer nor an input stays as it is, as on LangGraph's server (refused
/// under [`RunRules::Strict`]).
fn decide_goto(
    request: &RunRequest,
    latest: Option<&Checkpoint>,
    thread: &str,
    rules: RunRules,
    node: String,
) -> Result<Go, HostError> {
    let ended = latest.is_some_and(|l| matches!(l.status, Status::Finished | Status::Failed));
    if let Some(resume) = request.command.as_ref().and_then(|c| c.resume.clone()) {
        if ended && rules == RunRules::LangGraph {
            return Ok(Go::Stay);
        }
        return Ok(Go::ResumeTo {
            payload: (!resume.is_null()).then_some(resume),
            node,
        });
    }
    let input = request.input.clone().filter(|i| !i.is_null());
    let pending = latest.and_then(|l| l.pending.as_ref());
    // A breakpoint takes no answer: a goto without input lets it go on, elsewhere.
    if input.is_none() && pending.is_some_and(|p| p.breakpoint.is_some()) {
        return Ok(Go::ResumeTo {
            payload: None,
            node,
        });
    }
    let paused = latest.is_some_and(|l| l.status == Status::Interrupted);
    match input {
        None if paused && rules == RunRules::Strict => Err(HostError::Conflict(format!(
            "thread `{thread}` is paused at `{}`; answer it with `command: {{\"resume\": ..., \"goto\": ...}}`",
            latest
                .and_then(|l| l.pending.as_ref())
                .map_or("?", |p| &*p.node)
        ))),
        None if paused => Ok(Go::Stay),
        Some(_) if paused && rules == RunRules::Strict => Err(HostError::Conflict(format!(
            "thread `{thread}` is paused at `{}`; resume it instead of starting a new run",
            latest
                .and_then(|l| l.pending.as_ref())
                .map_or("?", |p| &*p.node)
        ))),
        input => Ok(Go::StartAt {
            input: input.unwrap_or_else(|| json!({})),
            node,
        }),
    }
}
