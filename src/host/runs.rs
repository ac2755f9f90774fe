//! Runs: created, queued per thread (`queue.rs`), read, cancelled, deleted, recovered
//! after a restart. How a thread's worker drives its runs is in `drive.rs`; runs that
//! several processes share go through the cluster (`cluster.rs`).

use super::course::{Course, decide_from, standing_at};
use super::handle::RunHandle;
use super::request::{CancelAction, RunRequest, STATELESS_STOPPED};
use super::{Host, HostError, Notice, fresh_record, lock, new_id, now_ms};
use crate::store::{RunRecord, RunStatus, Status, ThreadRecord};
use serde_json::{Value as Json, json};
use std::sync::Arc;

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
    pub(crate) async fn create_run(
        &self,
        assistant: &str,
        thread: Option<&str>,
        mut request: RunRequest,
        metadata: Json,
        create_thread: bool,
    ) -> Result<Arc<RunHandle>, HostError> {
        self.closing()?;
        // Read before the graph is looked up: a reload after it makes the course
        // decided here stale (see `Course`).
        let generation = self.inner.graphs.generation();
        let graph = self.current_graph(assistant)?;
        request.temporary = thread.is_none();
        let thread_id = thread.map_or_else(new_id, str::to_string);
        super::threads::check_id(&thread_id)?;
        let store = &self.inner.store;
        let record = store.get_thread(&thread_id).await?;
        let latest = store.latest(&thread_id).await?;
        if record.is_none() && latest.is_none() && !(create_thread || request.temporary) {
            return Err(HostError::NotFound(format!(
                "thread `{thread_id}` not found; create it first, or pass if_not_exists=\"create\""
            )));
        }
        // The version of the checkpoint the run goes from (a fork goes on as it stood).
        let standing =
            standing_at(&**store, &thread_id, request.checkpoint, latest.clone()).await?;
        let graph = self
            .graph_for_thread(assistant, &graph, &thread_id, standing.as_ref())
            .await?;
        if let Some(c) = self.cluster() {
            return c
                .create_run(self, assistant, thread_id, request, metadata, graph)
                .await;
        }
        // Decided and checked now when the run would start now (a refusal changes
        // nothing); behind other runs, or after an update, the state it will find is
        // not known yet.
        let mut course = if self.inner.queue.in_flight(&thread_id).is_empty()
            && request.command.as_ref().is_none_or(|c| c.update.is_none())
        {
            let go = decide_from(
                &**store,
                &request,
                request.checkpoint,
                latest.as_ref(),
                &thread_id,
                self.inner.rules,
            )
            .await?;
            self.runner(graph.clone())
                .with_configuration(request.configured.clone())
                .check(&thread_id, go.clone())
                .await?;
            Some(Course {
                graph,
                go,
                at: latest.as_ref().map(|l| l.seq),
                generation,
            })
        } else {
            None
        };
        let admitted = self
            .inner
            .queue
            .admit(
                &thread_id,
                request.multitask_strategy,
                |waiting| {
                    Box::pin(async move {
                        let end = self.end_unstarted(&waiting).await;
                        self.close_run(&waiting, end).await;
                    })
                },
                |first| {
                    let thread_id = &thread_id;
                    Box::pin(async move {
                        // Read again in the thread's turn: a metadata patch since the first
                        // read stands.
                        let thread_record = self
                            .thread_record(thread_id, assistant, request.assistant_id.as_deref())
                            .await?;
                        let run = RunHandle::new(
                            fresh_record(new_id(), thread_id, assistant, &request, metadata),
                            request,
                        );
                        store.put_thread(&thread_record).await?;
                        store.put_run(&run.record()).await?;
                        // A course decided before another run got in ahead is stale: its turn
                        // decides. Set before the run is queued, so its worker finds it.
                        if first {
                            *lock(&run.course) = course.take();
                        }
                        Ok(run)
                    })
                },
            )
            .await?;
        let run = admitted.run;
        lock(&self.inner.runs).insert(run.id.clone(), run.clone());
        if admitted.spawn_worker {
            self.spawn_worker(thread_id);
        }
        Ok(run)
    }

    /// A thread's catalog entry as a run on it makes it: created now if new, its
    /// metadata naming the graph (and the assistant, a made one's id when the run
    /// names one) unless it does already.
    pub(super) async fn thread_record(
        &self,
        thread_id: &str,
        graph: &str,
        assistant_id: Option<&str>,
    ) -> Result<ThreadRecord, HostError> {
        let record = self.inner.store.get_thread(thread_id).await?;
        let mut thread_meta = record
            .as_ref()
            .map_or_else(|| json!({}), |t| t.metadata.clone());
        if let Json::Object(m) = &mut thread_meta {
            m.entry("graph_id").or_insert_with(|| json!(graph));
            m.entry("assistant_id")
                .or_insert_with(|| json!(assistant_id.unwrap_or(graph)));
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
    pub(crate) async fn run(
        &self,
        thread: Option<&str>,
        run: &str,
    ) -> Result<RunRecord, HostError> {
        // A shared run another process drives is read from the store (see `runs`).
        let shared = self.cluster().is_some();
        let live = lock(&self.inner.runs)
            .get(run)
            .filter(|h| !shared || h.driven_here.load(std::sync::atomic::Ordering::SeqCst))
            .cloned();
        let record = match live {
            Some(h) => Some(h.record()),
            None => self.inner.store.get_run(run).await?,
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
    pub(crate) async fn handle(&self, run: &str) -> Option<Arc<RunHandle>> {
        let live = lock(&self.inner.runs).get(run).cloned();
        match live {
            Some(h) => Some(h),
            None => self.cluster()?.follow(self, run).await,
        }
    }

    /// The runs of a thread, newest first.
    pub(crate) async fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, HostError> {
        self.thread(thread).await?;
        let mut runs = self.inner.store.runs(thread).await?;
        // The live records are newer than the stored ones while the runs are going;
        // not a shared run another process drives, which this one follows from the
        // store every few milliseconds: the store is ahead of its copy.
        let shared = self.cluster().is_some();
        let live = lock(&self.inner.runs);
        for r in &mut runs {
            if let Some(h) = live.get(&r.id)
                && (!shared || h.driven_here.load(std::sync::atomic::Ordering::SeqCst))
            {
                *r = h.record();
            }
        }
        drop(live);
        runs.reverse();
        Ok(runs)
    }

    /// Cancels a run in flight: a waiting one ends at once, a running one at its next
    /// node boundary. With `Rollback` the run and what it wrote are removed.
    pub(crate) async fn cancel(
        &self,
        thread: &str,
        run: &str,
        action: CancelAction,
    ) -> Result<Arc<RunHandle>, HostError> {
        let record = self.run(Some(thread), run).await?;
        if let Some(c) = self.cluster()
            && record.status.in_flight()
        {
            c.cancel(self, &record, action).await?;
            if let Some(h) = self.handle(run).await {
                return Ok(h);
            }
        }
        let handle = self.handle(run).await.filter(|_| record.status.in_flight());
        let Some(handle) = handle else {
            return Err(HostError::Conflict(format!(
                "run `{run}` is {}; only a pending or running run can be cancelled",
                record.status.name()
            )));
        };
        let waiting = self.inner.queue.remove_waiting(thread, run);
        handle.request_cancel(action);
        if waiting {
            let end = self.end_unstarted(&handle).await;
            self.close_run(&handle, end).await;
        }
        Ok(handle)
    }

    /// Deletes a finished run's record (its checkpoints stay: later runs stand on
    /// them).
    pub(crate) async fn delete_run(&self, thread: &str, run: &str) -> Result<(), HostError> {
        let record = self.run(Some(thread), run).await?;
        if record.status.in_flight() {
            return Err(HostError::Conflict(format!(
                "run `{run}` is {}; cancel it first",
                record.status.name()
            )));
        }
        self.inner.store.delete_run(run).await?;
        lock(&self.inner.runs).remove(run);
        Ok(())
    }

    /// Queues again a run a previous process left in flight.
    pub(super) async fn requeue(&self, record: RunRecord) -> Result<(), HostError> {
        let Recovery::Go {
            mut record,
            request,
            how,
        } = self.recovery(record).await?
        else {
            return Ok(());
        };
        let request = *request;
        record.status = RunStatus::Pending;
        record.kwargs = serde_json::to_value(&request).unwrap_or_default();
        self.inner.store.put_run(&record).await?;
        let run = RunHandle::new(*record, request);
        let spawn = self.inner.queue.requeue(run.clone());
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
    pub(super) async fn recovery(&self, mut record: RunRecord) -> Result<Recovery, HostError> {
        let mut request: RunRequest =
            serde_json::from_value(record.kwargs.clone()).unwrap_or_default();
        let fail = |mut record: RunRecord, why: String| async move {
            record.status = RunStatus::Error;
            record.error = Some(why);
            record.updated_ms = now_ms();
            self.inner.store.put_run(&record).await?;
            Ok::<_, HostError>(Recovery::Done)
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
            return fail(record, why).await;
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
            self.inner.store.delete_thread(&record.thread).await?;
            return Ok(Recovery::Done);
        }
        let mut how = "queued";
        let latest = self.inner.store.latest(&record.thread).await?;
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
                    Status::Finished if l.ended_by_limit() => Some(RunStatus::Error),
                    Status::Interrupted | Status::Finished => Some(RunStatus::Success),
                    Status::Failed => Some(RunStatus::Error),
                    Status::Running | Status::Stopped => None,
                });
            if let Some(status) = ended {
                // The run ended and its process died before it said so.
                record.status = status;
                record.updated_ms = now_ms();
                self.inner.store.put_run(&record).await?;
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
}
