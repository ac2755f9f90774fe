//! Runs: created, queued per thread, driven, cancelled, recovered after a restart.
//!
//! Each thread with runs in flight has a queue and one task (its worker) that takes
//! the runs in order: at most one run per thread at a time, as a thread's checkpoints
//! are one line. A run then waits for one of the host's slots (the cap on runs at
//! once) and drives a [`Runner`] whose events go to the run's [`RunLog`].

use super::request::{CancelAction, Multitask, RunRequest};
use super::{Host, HostError, Notice, RunLog, fresh_record, lock, new_id, now_ms};
use crate::graph::Graph;
use crate::run::{Outcome, RunError, Runner, StopHandle};
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
    record: Mutex<RunRecord>,
    stop: StopHandle,
    cancel: watch::Sender<Option<CancelAction>>,
    /// Stopped because the host shuts down: it goes back to pending for the next
    /// process.
    shutting_down: AtomicBool,
    pub log: RunLog,
    end: watch::Sender<Option<RunEnd>>,
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
    fn new(record: RunRecord, request: RunRequest) -> Arc<RunHandle> {
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
        })
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

    fn cancel_action(&self) -> Option<CancelAction> {
        *self.cancel.borrow()
    }

    fn request_cancel(&self, action: CancelAction) {
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

    fn update(&self, f: impl FnOnce(&mut RunRecord)) -> RunRecord {
        let mut r = lock(&self.record);
        f(&mut r);
        r.updated_ms = now_ms();
        r.clone()
    }
}

/// What a run does when it gets its turn.
enum Mode {
    Start(Json),
    Resume(Option<Json>),
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
        let busy = !self.in_flight(&thread_id).is_empty();
        // Checked now when the run would start now; behind other runs the state it
        // will find is not known yet.
        if !busy && request.command.as_ref().is_none_or(|c| c.update.is_none()) {
            let runner = self.runner(graph.clone());
            match decide(&request, latest.as_ref(), &thread_id)? {
                Mode::Start(input) => runner.check_start(&thread_id, input)?,
                Mode::Resume(payload) => runner.check_resume(&thread_id, payload, false)?,
            }
        }
        let mut queues = lock(&self.inner.queues);
        let queue = queues.entry(thread_id.clone()).or_default();
        let busy = queue.running.is_some() || !queue.waiting.is_empty();
        if busy {
            match request.multitask_strategy {
                Multitask::Reject => {
                    let ids: Vec<String> = queue
                        .running
                        .iter()
                        .chain(&queue.waiting)
                        .map(|r| format!("`{}`", r.id))
                        .collect();
                    return Err(HostError::Conflict(format!(
                        "thread `{thread_id}` is already running a task (run {}); wait for it to finish, or choose another multitask_strategy (enqueue, interrupt, rollback)",
                        ids.join(", ")
                    )));
                }
                Multitask::Enqueue => {}
                Multitask::Interrupt | Multitask::Rollback => {
                    let action = if request.multitask_strategy == Multitask::Rollback {
                        CancelAction::Rollback
                    } else {
                        CancelAction::Interrupt
                    };
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
        // Read again under the lock: a metadata patch since the first read stands.
        let record = store.get_thread(&thread_id)?;
        let mut thread_meta = record
            .as_ref()
            .map_or_else(|| json!({}), |t| t.metadata.clone());
        if let Json::Object(m) = &mut thread_meta {
            m.entry("graph_id").or_insert_with(|| json!(assistant));
            m.entry("assistant_id").or_insert_with(|| json!(assistant));
        }
        let now = now_ms();
        let thread_record = ThreadRecord {
            id: thread_id.clone(),
            created_ms: record.as_ref().map_or(now, |t| t.created_ms),
            updated_ms: now,
            metadata: thread_meta,
        };
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

    /// The run `run` of `thread`: the live handle's record, or the stored one.
    pub fn run(&self, thread: Option<&str>, run: &str) -> Result<RunRecord, HostError> {
        let record = match self.handle(run) {
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

    /// The live handle of a run in flight or recently finished.
    pub fn handle(&self, run: &str) -> Option<Arc<RunHandle>> {
        lock(&self.inner.runs).get(run).cloned()
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
    pub(super) fn requeue(&self, mut record: RunRecord) -> Result<(), HostError> {
        let mut request: RunRequest =
            serde_json::from_value(record.kwargs.clone()).unwrap_or_default();
        let fail = |record: &mut RunRecord, why: String| -> Result<(), HostError> {
            record.status = RunStatus::Error;
            record.error = Some(why);
            record.updated_ms = now_ms();
            self.inner.store.put_run(record)?;
            Ok(())
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
                error: Some(STATELESS_STOPPED.to_string()),
            });
            self.inner.store.delete_thread(&record.thread)?;
            return Ok(());
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
                return Ok(());
            }
            request.resumed_after_restart = true;
            how = "resumed";
        }
        record.status = RunStatus::Pending;
        record.kwargs = serde_json::to_value(&request).unwrap_or_default();
        self.inner.store.put_run(&record)?;
        let run = RunHandle::new(record, request);
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
    fn graph_for_thread(
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

    /// The worker of a thread's queue: takes its runs in turn, each in a task of its
    /// own (a panic in a run fails that run, not the queue), and removes the queue once
    /// it is empty.
    fn spawn_worker(&self, thread: String) {
        let host = self.clone();
        tokio::spawn(async move {
            loop {
                let run = {
                    let mut queues = lock(&host.inner.queues);
                    let Some(q) = queues.get_mut(&thread) else {
                        return;
                    };
                    match q.waiting.pop_front() {
                        Some(r) => {
                            q.running = Some(r.clone());
                            r
                        }
                        None => {
                            queues.remove(&thread);
                            return;
                        }
                    }
                };
                let task = {
                    let (host, run) = (host.clone(), run.clone());
                    tokio::spawn(async move { host.execute(&run).await })
                };
                let end = match task.await {
                    Ok(end) => end,
                    Err(e) => host.panicked(&run, &e.to_string()).await,
                };
                // The thread is free before anyone hears that the run ended, so a
                // client that starts the next run on hearing it is not refused.
                let last = {
                    let mut queues = lock(&host.inner.queues);
                    match queues.get_mut(&thread) {
                        Some(q) if q.waiting.is_empty() => {
                            queues.remove(&thread);
                            true
                        }
                        Some(q) => {
                            q.running = None;
                            false
                        }
                        None => true,
                    }
                };
                host.close_run(&run, end);
                if last {
                    return;
                }
            }
        });
    }

    /// A run whose task panicked: it failed, its MCP servers go (their state is not
    /// known), and the thread goes on with its next run.
    async fn panicked(&self, run: &Arc<RunHandle>, why: &str) -> RunEnd {
        let message = format!("the run stopped unexpectedly ({why}); this is a bug in Switchyard");
        let r = run.update(|r| {
            r.status = RunStatus::Error;
            r.error = Some(message.clone());
        });
        let _ = self.inner.store.put_run(&r);
        self.inner.tools.stop_now(&run.thread).await;
        RunEnd {
            status: RunStatus::Error,
            error: Some(message),
            deleted: false,
        }
    }

    /// Ends a run that never started (cancelled while waiting).
    fn end_unstarted(&self, run: &Arc<RunHandle>) -> RunEnd {
        match run.cancel_action() {
            Some(CancelAction::Rollback) => {
                // A run a previous process had begun rolls back what it wrote then.
                if let Some(seq) = run.record().first_seq {
                    let _ = self.inner.store.truncate(&run.thread, seq);
                }
                let _ = self.inner.store.delete_run(&run.id);
                RunEnd {
                    status: RunStatus::Interrupted,
                    error: None,
                    deleted: true,
                }
            }
            _ => {
                let r = run.update(|r| r.status = RunStatus::Interrupted);
                let _ = self.inner.store.put_run(&r);
                RunEnd {
                    status: RunStatus::Interrupted,
                    error: None,
                    deleted: false,
                }
            }
        }
    }

    /// Tells everyone a run ended: its end first, then its log closes (a reader that
    /// sees the log closed finds the end set), and a stateless run's thread goes.
    fn close_run(&self, run: &Arc<RunHandle>, end: RunEnd) {
        let temporary =
            run.request.temporary && !run.request.on_completion_keep && !end.status.in_flight();
        if temporary {
            let _ = self.inner.store.delete_thread(&run.thread);
            let tools = self.inner.tools.clone();
            let thread = run.thread.clone();
            tokio::spawn(async move { tools.stop_thread(&thread).await });
        }
        self.notice(Notice::RunFinished {
            run: run.id.clone(),
            thread: run.thread.clone(),
            status: if end.deleted {
                "rolled_back"
            } else {
                end.status.name()
            },
            error: end.error.clone(),
        });
        let deleted = end.deleted;
        run.end.send_replace(Some(end));
        run.log.close();
        if deleted {
            // Rolled back: the run is gone, for readers too.
            lock(&self.inner.runs).remove(&run.id);
            return;
        }
        // The log stays for readers that join late, then goes.
        let host = self.clone();
        let id = run.id.clone();
        let retention = self.inner.log_retention;
        tokio::spawn(async move {
            tokio::time::sleep(retention).await;
            lock(&host.inner.runs).remove(&id);
        });
    }

    /// Waits for a slot and drives the run; how it ended.
    async fn execute(&self, run: &Arc<RunHandle>) -> RunEnd {
        // A slot, unless the run is cancelled while it waits.
        let mut cancel = run.cancel.subscribe();
        let permit = tokio::select! {
            p = self.inner.slots.clone().acquire_owned() => p.ok(),
            _ = cancel.wait_for(Option::is_some) => None,
        };
        if permit.is_none() || run.cancel_action().is_some() {
            return self.end_unstarted(run);
        }
        if self.inner.closing.load(Ordering::SeqCst) {
            // Left pending for the next process.
            return RunEnd {
                status: RunStatus::Pending,
                error: None,
                deleted: false,
            };
        }
        let end = match self.drive(run).await {
            Ok(end) => end,
            Err(message) => {
                let r = run.update(|r| {
                    r.status = RunStatus::Error;
                    r.error = Some(message.clone());
                });
                let _ = self.inner.store.put_run(&r);
                RunEnd {
                    status: RunStatus::Error,
                    error: Some(message),
                    deleted: false,
                }
            }
        };
        drop(permit);
        end
    }

    /// Drives the run; an error is a failure before the runner could start.
    async fn drive(&self, run: &Arc<RunHandle>) -> Result<RunEnd, String> {
        let store = &self.inner.store;
        let latest = store.latest(&run.thread).map_err(|e| e.to_string())?;
        let current = self
            .current_graph(&run.assistant)
            .map_err(|e| e.to_string())?;
        let graph = self
            .graph_for_thread(&run.assistant, &current, &run.thread, latest.as_ref())
            .map_err(|e| e.to_string())?;
        // Where the run's records begin: kept from a previous process that began it, so a
        // rollback removes all of them.
        let record = run.update(|r| {
            r.status = RunStatus::Running;
            r.first_seq
                .get_or_insert(latest.as_ref().map_or(0, |l| l.seq + 1));
        });
        let first_seq = record.first_seq.unwrap_or(0);
        store.put_run(&record).map_err(|e| e.to_string())?;
        let llm = self.inner.llm.client(&graph).map_err(|e| e.to_string())?;
        let tools = self.inner.tools.checkout(&run.thread, &graph).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tools.set_events(Some(tx.clone()));
        // A stateless run's thread goes when the run ends, so its checkpoints would be
        // written only to be deleted: it runs on a store that keeps none (but shares
        // the server's LLM cache), and its events carry what streams and `wait` show.
        // One that writes an update first keeps its records: the update is one.
        let stateless = run.request.keeps_no_checkpoints();
        let runner = if stateless {
            Runner::new(
                graph,
                Arc::new(crate::store::NoStore::with_cache_of(store.clone())),
            )
        } else {
            self.runner(graph)
        };
        let runner = runner
            .with_llm(llm)
            .with_tools(tools.clone())
            .with_tools_kept()
            .with_max_steps(run.request.max_steps)
            .with_stop(run.stop.clone())
            .with_saved_events(true)
            .with_events(tx);
        let work = async {
            let runner = &runner;
            // A run going on after a restart wrote its update already.
            if !run.request.resumed_after_restart
                && let Some(update) = run.request.command.as_ref().and_then(|c| c.update.clone())
            {
                runner.update(&run.thread, update, None)?;
            }
            let latest = store.latest(&run.thread)?;
            let mode = if run.request.resumed_after_restart {
                Mode::Resume(None)
            } else {
                decide(&run.request, latest.as_ref(), &run.thread)
                    .map_err(|e| RunError::Input(e.to_string()))?
            };
            match mode {
                Mode::Start(input) => runner.start(&run.thread, input).await,
                Mode::Resume(payload) => runner.resume(&run.thread, payload, false).await,
            }
        };
        let outcome = {
            tokio::pin!(work);
            loop {
                tokio::select! {
                    biased;
                    Some(e) = rx.recv() => run.log.push(e),
                    out = &mut work => break out,
                }
            }
        };
        // The runner holds a sender: drained after it goes, the channel ends.
        drop(runner);
        tools.set_events(None);
        while let Ok(e) = rx.try_recv() {
            run.log.push(e);
        }
        let (status, error) = match &outcome {
            Ok(Outcome::Finished { .. }) => (RunStatus::Success, None),
            Ok(Outcome::Interrupted { .. }) | Ok(Outcome::Stopped { .. }) => {
                (RunStatus::Interrupted, None)
            }
            Err(e) => (RunStatus::Error, Some(e.to_string())),
        };
        let finished = matches!(status, RunStatus::Success | RunStatus::Error);
        self.inner.tools.checkin(&run.thread, finished).await;
        if run.shutting_down.load(Ordering::SeqCst)
            && matches!(outcome, Ok(Outcome::Stopped { .. }))
            && stateless
        {
            // Nothing to go on from, and starting it again could repeat what it did.
            let error = STATELESS_STOPPED.to_string();
            let r = run.update(|r| {
                r.status = RunStatus::Error;
                r.error = Some(error.clone());
            });
            store.put_run(&r).map_err(|e| e.to_string())?;
            return Ok(RunEnd {
                status: RunStatus::Error,
                error: Some(error),
                deleted: false,
            });
        }
        if run.shutting_down.load(Ordering::SeqCst)
            && matches!(outcome, Ok(Outcome::Stopped { .. }))
        {
            // Stopped by the shutdown: the next process goes on with it.
            let mut request = run.request.clone();
            request.resumed_after_restart = true;
            let r = run.update(|r| {
                r.status = RunStatus::Pending;
                r.kwargs = serde_json::to_value(&request).unwrap_or_default();
            });
            store.put_run(&r).map_err(|e| e.to_string())?;
            return Ok(RunEnd {
                status: RunStatus::Pending,
                error: None,
                deleted: false,
            });
        }
        if run.cancel_action() == Some(CancelAction::Rollback) {
            store
                .truncate(&run.thread, first_seq)
                .and_then(|()| store.delete_run(&run.id))
                .map_err(|e| e.to_string())?;
            return Ok(RunEnd {
                status: RunStatus::Interrupted,
                error: None,
                deleted: true,
            });
        }
        let r = run.update(|r| {
            r.status = status;
            r.error = error.clone();
        });
        store.put_run(&r).map_err(|e| e.to_string())?;
        Ok(RunEnd {
            status,
            error,
            deleted: false,
        })
    }
}

/// Why a stateless run that a server stopped (or lost) before it ended did not go on.
const STATELESS_STOPPED: &str = "the server stopped before this stateless run ended; a stateless run keeps no checkpoints to go on from, so it was not resumed: start it again";

/// What a request does on a thread that stands at `latest`.
fn decide(
    request: &RunRequest,
    latest: Option<&Checkpoint>,
    thread: &str,
) -> Result<Mode, HostError> {
    if let Some(resume) = request.command.as_ref().and_then(|c| c.resume.clone()) {
        return Ok(Mode::Resume((!resume.is_null()).then_some(resume)));
    }
    match &request.input {
        Some(Json::Null) | None => match latest.map(|l| l.status) {
            Some(Status::Stopped | Status::Running) => Ok(Mode::Resume(None)),
            // A breakpoint takes no answer: a run with no input lets it go on, as in
            // LangGraph.
            Some(Status::Interrupted)
                if latest
                    .and_then(|l| l.pending.as_ref())
                    .is_some_and(|p| p.breakpoint.is_some()) =>
            {
                Ok(Mode::Resume(None))
            }
            Some(Status::Interrupted) => Err(HostError::Conflict(format!(
                "thread `{thread}` is paused at `{}`; answer it with `command: {{\"resume\": ...}}`",
                latest
                    .and_then(|l| l.pending.as_ref())
                    .map_or("?", |p| &*p.node)
            ))),
            _ => Ok(Mode::Start(json!({}))),
        },
        Some(input) => Ok(Mode::Start(input.clone())),
    }
}
