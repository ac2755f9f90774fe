//! Runs: created, queued per thread, cancelled, recovered after a restart.
//!
//! Each thread with runs in flight has a queue and one task (its worker) that takes
//! the runs in order: at most one run per thread at a time, as a thread's checkpoints
//! are one line. How a worker drives a run is in `drive.rs`.

use super::request::{CancelAction, Multitask, RunRequest};
use super::{Host, HostError, Notice, RunLog, fresh_record, lock, new_id, now_ms};
use crate::graph::Graph;
use crate::run::{Go, StopHandle};
use crate::store::{Checkpoint, RunRecord, RunStatus, Status, ThreadRecord};
use serde_json::{Value as Json, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A run the host knows now: in flight, or finished within the log retention time.
pub struct RunHandle {
    pub id: String,
    pub thread: String,
    pub assistant: String,
    pub request: RunRequest,
    pub(super) record: Mutex<RunRecord>,
    pub(super) stop: StopHandle,
    pub(super) cancel: watch::Sender<Option<CancelAction>>,
    /// Stopped because the host shuts down: it goes back to pending for the next
    /// process.
    pub(super) shutting_down: AtomicBool,
    pub log: RunLog,
    pub(super) end: watch::Sender<Option<RunEnd>>,
    /// Shared runs (`cluster.rs`): driven by this process (else its log and end are
    /// mirrored from the store), taken over from a process that died (it resumes from
    /// the thread's last checkpoint), its lease lost to another process (its end is
    /// not this process's to record).
    pub(super) driven_here: AtomicBool,
    pub(super) resumed: AtomicBool,
    pub(super) lost: AtomicBool,
    /// Held while the mirror copies events in, so that it stops cleanly when this
    /// process starts driving the run.
    pub(super) mirroring: tokio::sync::Mutex<()>,
    /// Events logged here and not yet in the store (a shared run's), written together.
    pub(super) unsaved: Mutex<Vec<String>>,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEnd {
    pub status: RunStatus,
    pub error: Option<String>,
    /// Rolled back: the run and what it wrote are gone.
    pub deleted: bool,
}

impl RunHandle {
    pub(super) fn new(record: RunRecord, request: RunRequest) -> Arc<RunHandle> {
        Arc::new(RunHandle {
            id: record.id.clone(),
            thread: record.thread.clone(),
            assistant: record.assistant.clone(),
            request,
            record: Mutex::new(record),
            stop: StopHandle::default(),
            cancel: watch::channel(None).0,
            shutting_down: AtomicBool::new(false),
            log: RunLog::default(),
            end: watch::channel(None).0,
            driven_here: AtomicBool::new(false),
            resumed: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            mirroring: tokio::sync::Mutex::new(()),
            unsaved: Mutex::new(Vec::new()),
        })
    }

    /// Goes on after its process stopped: resumed, not started again.
    pub(super) fn resumes(&self) -> bool {
        self.request.resumed_after_restart || self.resumed.load(Ordering::SeqCst)
    }

    /// The run's record as it stands.
    pub fn record(&self) -> RunRecord {
        lock(&self.record).clone()
    }

    /// How it ended, once it has.
    pub fn end(&self) -> Option<RunEnd> {
        self.end.borrow().clone()
    }

    /// Waits for the end.
    pub async fn finished(&self) -> RunEnd {
        let mut rx = self.end.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(end) => end.clone().expect("waited for some"),
            // The sender lives in the handle, which outlives this borrow.
            Err(_) => RunEnd {
                status: RunStatus::Error,
                error: Some("the run was dropped".into()),
                deleted: false,
            },
        }
    }

    pub(super) fn cancel_action(&self) -> Option<CancelAction> {
        *self.cancel.borrow()
    }

    pub(super) fn request_cancel(&self, action: CancelAction) {
        // A rollback asked after an interrupt still rolls back.
        self.cancel.send_modify(|a| {
            if *a != Some(CancelAction::Rollback) {
                *a = Some(action);
            }
        });
        self.stop.stop();
    }

    pub(super) fn shutdown_stop(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.stop.stop();
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut RunRecord)) -> RunRecord {
        let mut r = lock(&self.record);
        f(&mut r);
        r.updated_ms = now_ms();
        r.clone()
    }
}

/// What becomes of a run a process left in flight; see [`Host::recovery`].
pub(super) enum Recovery {
    /// Ended or failed, as recorded now.
    Done,
    /// To be driven: resumed or started, as `request.resumed_after_restart` says.
    Go {
        record: Box<RunRecord>,
        request: Box<RunRequest>,
        how: &'static str,
    },
}

impl Host {
    /// Creates a run of graph `assistant` on `thread` (a new temporary thread when
    /// none), queued behind the thread's runs in flight as `request.multitask_strategy`
    /// says. When the run would start at once, its input or answer is checked now,
    /// and a refusal changes nothing.
    pub fn create_run(
        &self,
        assistant: &str,
        thread: Option<&str>,
        mut request: RunRequest,
        metadata: Json,
        create_thread: bool,
    ) -> Result<Arc<RunHandle>, HostError> {
        self.closing()?;
        let graph = self.current_graph(assistant)?;
        request.temporary = thread.is_none();
        let thread_id = thread.map_or_else(new_id, str::to_string);
        super::threads::check_id(&thread_id)?;
        let store = &self.inner.store;
        let record = store.get_thread(&thread_id)?;
        let latest = store.latest(&thread_id)?;
        if record.is_none() && latest.is_none() && !(create_thread || request.temporary) {
            return Err(HostError::NotFound(format!(
                "thread `{thread_id}` not found; create it first, or pass if_not_exists=\"create\""
            )));
        }
        let graph = self.graph_for_thread(assistant, &graph, &thread_id, latest.as_ref())?;
        if self.cluster().is_some() {
            return self.create_shared_run(assistant, thread_id, request, metadata, graph);
        }
        let busy = !self.in_flight(&thread_id).is_empty();
        // Checked now when the run would start now; behind other runs the state it
        // will find is not known yet.
        if !busy && request.command.as_ref().is_none_or(|c| c.update.is_none()) {
            let go = decide(&request, latest.as_ref(), &thread_id)?;
            self.runner(graph.clone()).check(&thread_id, go)?;
        }
        let mut queues = lock(&self.inner.queues);
        let queue = queues.entry(thread_id.clone()).or_default();
        let busy = queue.running.is_some() || !queue.waiting.is_empty();
        if busy {
            match request.multitask_strategy {
                Multitask::Reject => {
                    return Err(refused_busy(
                        &thread_id,
                        queue
                            .running
                            .iter()
                            .chain(&queue.waiting)
                            .map(|r| r.id.as_str()),
                    ));
                }
                Multitask::Enqueue | Multitask::Interrupt | Multitask::Rollback => {
                    // Enqueue asks nothing of them; interrupt and rollback stop them.
                    if let Some(action) = request.multitask_strategy.cancel_action() {
                        let waiting: Vec<_> = queue.waiting.drain(..).collect();
                        if let Some(r) = &queue.running {
                            r.request_cancel(action);
                        }
                        for r in waiting {
                            r.request_cancel(action);
                            let end = self.end_unstarted(&r);
                            self.close_run(&r, end);
                        }
                    }
                }
            }
        }
        // Read again under the lock: a metadata patch since the first read stands.
        let thread_record = self.thread_record(&thread_id, assistant)?;
        let run = RunHandle::new(
            fresh_record(new_id(), &thread_id, assistant, &request, metadata),
            request,
        );
        let saved = store
            .put_thread(&thread_record)
            .and_then(|()| store.put_run(&run.record()));
        if let Err(e) = saved {
            if !queue.worker && queue.running.is_none() && queue.waiting.is_empty() {
                queues.remove(&thread_id);
            }
            return Err(e.into());
        }
        queue.waiting.push_back(run.clone());
        let spawn = !std::mem::replace(&mut queue.worker, true);
        drop(queues);
        lock(&self.inner.runs).insert(run.id.clone(), run.clone());
        if spawn {
            self.spawn_worker(thread_id);
        }
        Ok(run)
    }

    /// A thread's catalog entry as a run on it makes it: created now if new, its
    /// metadata naming the graph unless it does already.
    pub(super) fn thread_record(
        &self,
        thread_id: &str,
        assistant: &str,
    ) -> Result<ThreadRecord, HostError> {
        let record = self.inner.store.get_thread(thread_id)?;
        let mut thread_meta = record
            .as_ref()
            .map_or_else(|| json!({}), |t| t.metadata.clone());
        if let Json::Object(m) = &mut thread_meta {
            m.entry("graph_id").or_insert_with(|| json!(assistant));
            m.entry("assistant_id").or_insert_with(|| json!(assistant));
        }
        let now = now_ms();
        Ok(ThreadRecord {
            id: thread_id.to_string(),
            created_ms: record.as_ref().map_or(now, |t| t.created_ms),
            updated_ms: now,
            metadata: thread_meta,
        })
    }

    /// The run `run` of `thread`: the live handle's record, or the stored one.
    pub fn run(&self, thread: Option<&str>, run: &str) -> Result<RunRecord, HostError> {
        let live = lock(&self.inner.runs).get(run).cloned();
        let record = match live {
            Some(h) => Some(h.record()),
            None => self.inner.store.get_run(run)?,
        };
        match record {
            Some(r) if thread.is_none_or(|t| t == r.thread) => Ok(r),
            _ => Err(HostError::NotFound(match thread {
                Some(t) => format!("run `{run}` of thread `{t}` not found"),
                None => format!("run `{run}` not found"),
            })),
        }
    }

    /// The live handle of a run in flight or recently finished; with runs shared by
    /// several processes, one that follows a run another process drives.
    pub fn handle(&self, run: &str) -> Option<Arc<RunHandle>> {
        let live = lock(&self.inner.runs).get(run).cloned();
        match live {
            Some(h) => Some(h),
            None if self.cluster().is_some() => self.follow(run),
            None => None,
        }
    }

    /// The runs of a thread, newest first.
    pub fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, HostError> {
        self.thread(thread)?;
        let mut runs = self.inner.store.runs(thread)?;
        // The live records are newer than the stored ones while the runs are going.
        let live = lock(&self.inner.runs);
        for r in &mut runs {
            if let Some(h) = live.get(&r.id) {
                *r = h.record();
            }
        }
        drop(live);
        runs.reverse();
        Ok(runs)
    }

    /// Cancels a run in flight: a waiting one ends at once, a running one at its next
    /// node boundary. With `Rollback` the run and what it wrote are removed.
    pub fn cancel(
        &self,
        thread: &str,
        run: &str,
        action: CancelAction,
    ) -> Result<Arc<RunHandle>, HostError> {
        let record = self.run(Some(thread), run)?;
        if self.cluster().is_some() && record.status.in_flight() {
            self.cancel_shared(&record, action)?;
            if let Some(h) = self.handle(run) {
                return Ok(h);
            }
        }
        let handle = self.handle(run).filter(|_| record.status.in_flight());
        let Some(handle) = handle else {
            return Err(HostError::Conflict(format!(
                "run `{run}` is {}; only a pending or running run can be cancelled",
                record.status.name()
            )));
        };
        let waiting = {
            let mut queues = lock(&self.inner.queues);
            match queues.get_mut(thread) {
                Some(q) => {
                    let before = q.waiting.len();
                    q.waiting.retain(|r| r.id != run);
                    q.waiting.len() != before
                }
                None => false,
            }
        };
        handle.request_cancel(action);
        if waiting {
            let end = self.end_unstarted(&handle);
            self.close_run(&handle, end);
        }
        Ok(handle)
    }

    /// Deletes a finished run's record (its checkpoints stay: later runs stand on
    /// them).
    pub fn delete_run(&self, thread: &str, run: &str) -> Result<(), HostError> {
        let record = self.run(Some(thread), run)?;
        if record.status.in_flight() {
            return Err(HostError::Conflict(format!(
                "run `{run}` is {}; cancel it first",
                record.status.name()
            )));
        }
        self.inner.store.delete_run(run)?;
        lock(&self.inner.runs).remove(run);
        Ok(())
    }

    /// Queues again a run a previous process left in flight.
    pub(super) fn requeue(&self, record: RunRecord) -> Result<(), HostError> {
        let Recovery::Go {
            mut record,
            request,
            how,
        } = self.recovery(record)?
        else {
            return Ok(());
        };
        let request = *request;
        record.status = RunStatus::Pending;
        record.kwargs = serde_json::to_value(&request).unwrap_or_default();
        self.inner.store.put_run(&record)?;
        let run = RunHandle::new(*record, request);
        let spawn = {
            let mut queues = lock(&self.inner.queues);
            let q = queues.entry(run.thread.clone()).or_default();
            q.waiting.push_back(run.clone());
            !std::mem::replace(&mut q.worker, true)
        };
        lock(&self.inner.runs).insert(run.id.clone(), run.clone());
        self.notice(Notice::RunRecovered {
            run: run.id.clone(),
            thread: run.thread.clone(),
            how,
        });
        if spawn {
            self.spawn_worker(run.thread.clone());
        }
        Ok(())
    }

    /// What becomes of a run a process left in flight (stopped, or died): it fails when
    /// its graph is no longer served, or when it was a stateless run that had begun; it
    /// is recorded as ended when its thread shows it ended; else it goes on, resumed
    /// from the thread's last checkpoint if it had begun, started if not.
    pub(super) fn recovery(&self, mut record: RunRecord) -> Result<Recovery, HostError> {
        let mut request: RunRequest =
            serde_json::from_value(record.kwargs.clone()).unwrap_or_default();
        let fail = |record: &mut RunRecord, why: String| -> Result<Recovery, HostError> {
            record.status = RunStatus::Error;
            record.error = Some(why);
            record.updated_ms = now_ms();
            self.inner.store.put_run(record)?;
            Ok(Recovery::Done)
        };
        if self.current_graph(&record.assistant).is_err() {
            let why = format!(
                "the server restarted and no longer serves graph `{}`",
                record.assistant
            );
            self.notice(Notice::RunRecovered {
                run: record.id.clone(),
                thread: record.thread.clone(),
                how: "failed",
            });
            return fail(&mut record, why);
        }
        // A stateless run keeps no checkpoints: one that had begun cannot go on, and
        // starting it again could repeat what it did (a tool's side effect). It fails,
        // and its thread goes, as it would have when the run ended.
        if request.keeps_no_checkpoints() && record.first_seq.is_some() {
            self.notice(Notice::RunRecovered {
                run: record.id.clone(),
                thread: record.thread.clone(),
                how: "failed",
            });
            self.notice(Notice::RunFinished {
                run: record.id.clone(),
                thread: record.thread.clone(),
                status: "error",
                error: Some(super::drive::STATELESS_STOPPED.to_string()),
            });
            self.inner.store.delete_thread(&record.thread)?;
            return Ok(Recovery::Done);
        }
        let mut how = "queued";
        let latest = self.inner.store.latest(&record.thread)?;
        // Marked running, and died before its first record: it never began.
        if record
            .first_seq
            .is_some_and(|f| latest.as_ref().is_none_or(|l| l.seq < f))
        {
            record.first_seq = None;
            request.resumed_after_restart = false;
        }
        if record.first_seq.is_some() {
            let ended = latest
                .as_ref()
                .filter(|l| l.seq >= record.first_seq.unwrap_or(0))
                .and_then(|l| match l.status {
                    Status::Interrupted => Some(RunStatus::Interrupted),
                    Status::Finished => Some(RunStatus::Success),
                    Status::Failed => Some(RunStatus::Error),
                    Status::Running | Status::Stopped => None,
                });
            if let Some(status) = ended {
                // The run ended and its process died before it said so.
                record.status = status;
                record.updated_ms = now_ms();
                self.inner.store.put_run(&record)?;
                self.notice(Notice::RunRecovered {
                    run: record.id.clone(),
                    thread: record.thread.clone(),
                    how: "ended",
                });
                return Ok(Recovery::Done);
            }
            request.resumed_after_restart = true;
            how = "resumed";
        }
        Ok(Recovery::Go {
            record: Box::new(record),
            request: Box::new(request),
            how,
        })
    }

    /// The current version of a served graph.
    pub(super) fn current_graph(&self, assistant: &str) -> Result<Arc<Graph>, HostError> {
        let Some(served) = self.inner.graphs.get(assistant) else {
            let ids: Vec<String> = self
                .inner
                .graphs
                .list()
                .into_iter()
                .map(|s| format!("`{}`", s.id))
                .collect();
            return Err(HostError::NotFound(format!(
                "no graph `{assistant}`; this server serves {}",
                if ids.is_empty() {
                    "none".to_string()
                } else {
                    ids.join(", ")
                }
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
    /// while it has not ended, else `current`. A thread of another graph is refused.
    pub(super) fn graph_for_thread(
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
            Some(v) if !ended => v,
            _ => current.clone(),
        })
    }
}

/// The refusal of a run on a thread with runs in flight (`multitask_strategy` reject).
pub(super) fn refused_busy<'a>(thread: &str, runs: impl Iterator<Item = &'a str>) -> HostError {
    let ids: Vec<String> = runs.map(|id| format!("`{id}`")).collect();
    HostError::Conflict(format!(
        "thread `{thread}` is already running a task (run {}); wait for it to finish, or choose another multitask_strategy (enqueue, interrupt, rollback)",
        ids.join(", ")
    ))
}

/// What a request does on a thread that stands at `latest`.
pub(super) fn decide(
    request: &RunRequest,
    latest: Option<&Checkpoint>,
    thread: &str,
) -> Result<Go, HostError> {
    if let Some(resume) = request.command.as_ref().and_then(|c| c.resume.clone()) {
        return Ok(Go::resume((!resume.is_null()).then_some(resume)));
    }
    match &request.input {
        Some(Json::Null) | None => match latest.map(|l| l.status) {
            Some(Status::Stopped | Status::Running) => Ok(Go::resume(None)),
            // A breakpoint takes no answer: a run with no input lets it go on, as in
            // LangGraph.
            Some(Status::Interrupted)
                if latest
                    .and_then(|l| l.pending.as_ref())
                    .is_some_and(|p| p.breakpoint.is_some()) =>
            {
                Ok(Go::resume(None))
            }
            Some(Status::Interrupted) => Err(HostError::Conflict(format!(
                "thread `{thread}` is paused at `{}`; answer it with `command: {{\"resume\": ...}}`",
                latest
                    .and_then(|l| l.pending.as_ref())
                    .map_or("?", |p| &*p.node)
            ))),
            _ => Ok(Go::Start(json!({}))),
        },
        Some(input) => Ok(Go::Start(input.clone())),
    }
}
