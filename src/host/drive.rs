//! A run driven: a thread's worker takes its runs in turn, each waits for a slot, then
//! a [`Runner`] drives it with its events going to the run's log; how it ended is
//! recorded, told and, for a stateless run, its thread removed.

use super::course::{decide_from, standing_at};
use super::handle::{RunEnd, RunHandle};
use super::request::{CancelAction, STATELESS_STOPPED};
use super::{Host, HostError, Notice, lock};
use crate::run::{Go, Outcome, RunError, Runner};
use crate::store::RunStatus;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Why a run that a limit ended, with no `on_limit` route, is an error.
pub(super) const LIMIT_ERROR: &str = "the run reached its step limit (`max_steps`, `config.recursion_limit`) or another limit of the graph without finishing, and the graph has no `on_limit` route";

impl Host {
    /// The worker of a thread's queue: takes its runs in turn, each in a task of its
    /// own (a panic in a run fails that run, not the queue), and removes the queue once
    /// it is empty.
    pub(super) fn spawn_worker(&self, thread: String) {
        let host = self.clone();
        tokio::spawn(async move {
            while let Some(run) = host.inner.queue.next(&thread) {
                let end = host.execute_apart(&run, None).await;
                // The thread is free before anyone hears that the run ended, so a
                // client that starts the next run on hearing it is not refused.
                let last = host.inner.queue.finished(&thread);
                host.close_run(&run, end).await;
                if last {
                    return;
                }
            }
        });
    }

    /// Waits for a slot and drives the run in a task of its own: a panic in it fails
    /// that run (see [`Host::panicked`]), not its caller.
    pub(super) async fn execute_apart(
        &self,
        run: &Arc<RunHandle>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> RunEnd {
        let task = {
            let (host, run) = (self.clone(), run.clone());
            tokio::spawn(async move { host.execute(&run, slot).await })
        };
        match task.await {
            Ok(end) => end,
            Err(e) => self.panicked(run, &e.to_string()).await,
        }
    }

    /// A run whose task panicked: it failed, its MCP servers go (their state is not
    /// known), and the thread goes on with its next run.
    pub(super) async fn panicked(&self, run: &Arc<RunHandle>, why: &str) -> RunEnd {
        let message = format!("the run stopped unexpectedly ({why}); this is a bug in Switchyard");
        let r = run.update(|r| {
            r.status = RunStatus::Error;
            r.error = Some(message.clone());
        });
        let _ = self.save_run(run, &r).await;
        self.inner.tools.stop_now(&run.thread).await;
        RunEnd {
            status: RunStatus::Error,
            error: Some(message),
            deleted: false,
        }
    }

    /// Saves a run's record, unless another process took the run over (its lease
    /// ran out): then the record is that process's to write.
    pub(super) async fn save_run(
        &self,
        run: &RunHandle,
        r: &crate::store::RunRecord,
    ) -> Result<(), crate::store::StoreError> {
        if run.lost.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(c) = self.cluster()
            && r.status != RunStatus::Running
            && run.driven_here.load(Ordering::SeqCst)
            && !c.still_ours(self, run).await?
        {
            return Ok(());
        }
        self.inner.store.put_run(r).await
    }

    /// Ends a run that never started (cancelled while waiting).
    pub(super) async fn end_unstarted(&self, run: &Arc<RunHandle>) -> RunEnd {
        match run.cancel_action() {
            Some(CancelAction::Rollback) => {
                // A run a previous process had begun rolls back what it wrote then.
                if let Some(seq) = run.record().first_seq {
                    let _ = self.inner.store.truncate(&run.thread, seq).await;
                }
                let _ = self.inner.store.delete_run(&run.id).await;
                RunEnd {
                    status: RunStatus::Interrupted,
                    error: None,
                    deleted: true,
                }
            }
            _ => {
                let r = run.update(|r| r.status = RunStatus::Interrupted);
                let _ = self.save_run(run, &r).await;
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
    pub(super) async fn close_run(&self, run: &Arc<RunHandle>, end: RunEnd) {
        if let Some(t) = &self.inner.tracer {
            // Its trace is sent even when the run ended without its last event.
            t.end(&run.id);
        }
        let temporary =
            run.request.temporary && !run.request.on_completion_keep && !end.status.in_flight();
        if temporary {
            let _ = self.inner.store.delete_thread(&run.thread).await;
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
    pub(super) async fn execute(
        &self,
        run: &Arc<RunHandle>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> RunEnd {
        // A slot (given, when the run was claimed with one), unless the run is
        // cancelled while it waits.
        let mut cancel = run.cancel.subscribe();
        let permit = match slot {
            Some(p) => Some(p),
            None => tokio::select! {
                p = self.inner.slots.clone().acquire_owned() => p.ok(),
                _ = cancel.wait_for(Option::is_some) => None,
            },
        };
        if permit.is_none() || run.cancel_action().is_some() {
            return self.end_unstarted(run).await;
        }
        if self.inner.closing.load(Ordering::SeqCst) {
            // Left pending for the next process (a claimed shared run was marked
            // running: it is put back).
            if let Some(c) = self.cluster() {
                c.put_back(self, run).await;
            }
            return RunEnd {
                status: RunStatus::Pending,
                error: None,
                deleted: false,
            };
        }
        let end = match self.drive(run).await {
            Ok(end) => end,
            Err(e) => {
                let message = e.to_string();
                let r = run.update(|r| {
                    r.status = RunStatus::Error;
                    r.error = Some(message.clone());
                });
                let _ = self.save_run(run, &r).await;
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

    /// A driven run's event: to the tracer and into its log (and, with runs shared,
    /// kept for the store). Whether it says a limit ended the run, no `on_limit`
    /// route taking it.
    fn record_event(&self, run: &RunHandle, event: crate::run::Event) -> bool {
        let limit_ended = matches!(event, crate::run::Event::LimitReached { to: None, .. });
        if let Some(t) = &self.inner.tracer {
            t.observe(&run.id, &event);
        }
        match self.cluster() {
            Some(c) => c.log_event(run, event),
            None => {
                run.log.push(event);
            }
        }
        limit_ended
    }

    /// Drives the run; an error is a failure before the runner could start.
    pub(super) async fn drive(&self, run: &Arc<RunHandle>) -> Result<RunEnd, HostError> {
        let store = &self.inner.store;
        let latest = store.latest(&run.thread).await?;
        // Decided when the run was created, while the thread still stands there and the
        // graphs served are as they were; else now (its graph) and once its update is
        // written (what it does).
        let course = lock(&run.course).take().filter(|c| {
            c.at == latest.as_ref().map(|l| l.seq) && c.generation == self.inner.graphs.generation()
        });
        let graph = match &course {
            Some(c) => c.graph.clone(),
            None => {
                let from = (!run.resumes()).then_some(run.request.checkpoint).flatten();
                let standing = standing_at(&**store, &run.thread, from, latest.clone()).await?;
                self.graph_of_run(&run.assistant, &run.thread, standing.as_ref())
                    .await?
            }
        };
        // Where the run's records begin: kept from a previous process that began it, so a
        // rollback removes all of them.
        let record = run.update(|r| {
            r.status = RunStatus::Running;
            r.first_seq
                .get_or_insert(latest.as_ref().map_or(0, |l| l.seq + 1));
        });
        let first_seq = record.first_seq.unwrap_or(0);
        self.save_run(run, &record).await?;
        let llm = self.inner.llm.client(&graph)?;
        let tools = self.inner.tools.checkout(&run.thread, &graph).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tools.set_events(Some(tx.clone()));
        // The servers the graph lets ask for completions get the run's model.
        tools.set_sampler(Some(crate::mcp::Sampler {
            llm: llm.clone(),
            model: graph.llm.model.clone(),
        }));
        // A stateless run's thread goes when the run ends, so its checkpoints would be
        // written only to be deleted: it runs on a store that keeps none (but shares
        // the server's LLM cache), and its events carry what streams and `wait` show.
        // One that writes an update first keeps its records: the update is one.
        let stateless = run.request.keeps_no_checkpoints();
        let runner = if stateless {
            // Its llm nodes still share the server's cache.
            Runner::new(graph, Arc::new(crate::store::NoStore)).with_cache(store.clone())
        } else {
            self.runner(graph)
        };
        let runner = runner
            .with_llm(llm)
            .with_items(store.clone(), self.inner.index.clone())
            .with_tools(tools.clone())
            .with_tools_kept()
            .with_max_steps(run.request.max_steps)
            .with_configuration(run.request.configured.clone())
            .with_stop(run.stop.clone())
            .with_saved_events(true)
            .with_llm_content(self.inner.llm_content)
            .with_events(tx);
        let work = async {
            let runner = &runner;
            // The checkpoint the run goes from: after an update there, the update's.
            let mut from = run.request.checkpoint;
            // A run going on after a restart wrote its update already.
            if !run.resumes()
                && let Some(update) = run.request.command.as_ref().and_then(|c| c.update.clone())
            {
                runner
                    .threads()
                    .update_at(&run.thread, from.take(), update, None)
                    .await?;
            }
            let go = if run.resumes() {
                Go::resume(None)
            } else {
                let latest = store.latest(&run.thread).await?;
                match course {
                    // Nothing wrote to the thread since it was decided.
                    Some(c) if c.at == latest.as_ref().map(|l| l.seq) => c.go,
                    _ => decide_from(
                        &**store,
                        &run.request,
                        from,
                        latest.as_ref(),
                        &run.thread,
                        self.inner.rules,
                    )
                    .await
                    .map_err(|e| RunError::Input(e.to_string()))?,
                }
            };
            runner.run(&run.thread, go).await
        };
        // Whether a limit ended the run with no route to take (its event says so).
        let mut limit_ended = false;
        let outcome = {
            tokio::pin!(work);
            loop {
                tokio::select! {
                    biased;
                    Some(e) = rx.recv() => {
                        limit_ended |= self.record_event(run, e);
                        while let Ok(e) = rx.try_recv() {
                            limit_ended |= self.record_event(run, e);
                        }
                        if let Some(c) = self.cluster() {
                            c.save_events_soon(self, run);
                        }
                    }
                    out = &mut work => break out,
                }
            }
        };
        // The runner holds a sender: drained after it goes, the channel ends.
        drop(runner);
        tools.set_events(None);
        while let Ok(e) = rx.try_recv() {
            limit_ended |= self.record_event(run, e);
        }
        if let Some(c) = self.cluster() {
            c.save_events(self, run).await;
        }
        if let (
            Some(c),
            Err(RunError::Store(
                crate::store::StoreError::Claimed { .. }
                | crate::store::StoreError::ClaimLost { .. },
            )),
        ) = (self.cluster(), &outcome)
        {
            c.lost_thread(run);
        }
        let (status, error) = match &outcome {
            // A limit that no `on_limit` route takes ends the run as LangGraph's
            // recursion limit does: an error.
            Ok(Outcome::Finished { .. }) if limit_ended => {
                (RunStatus::Error, Some(LIMIT_ERROR.to_string()))
            }
            // A run that paused at an interrupt did what it was asked, as LangGraph
            // says (the thread is the one that is interrupted); a stopped one did not.
            Ok(Outcome::Finished { .. }) | Ok(Outcome::Interrupted { .. }) => {
                (RunStatus::Success, None)
            }
            Ok(Outcome::Stopped { .. }) => (RunStatus::Interrupted, None),
            Err(e) => (RunStatus::Error, Some(e.to_string())),
        };
        // The thread's servers stay while it may go on (paused or stopped).
        let finished = matches!(outcome, Ok(Outcome::Finished { .. }) | Err(_));
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
            self.save_run(run, &r).await?;
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
            self.save_run(run, &r).await?;
            return Ok(RunEnd {
                status: RunStatus::Pending,
                error: None,
                deleted: false,
            });
        }
        if run.cancel_action() == Some(CancelAction::Rollback) {
            store.truncate(&run.thread, first_seq).await?;
            store.delete_run(&run.id).await?;
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
        self.save_run(run, &r).await?;
        Ok(RunEnd {
            status,
            error,
            deleted: false,
        })
    }
}
