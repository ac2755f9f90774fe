//! Requests about many runs or threads at once: `POST /runs/cancel` and
//! `POST /threads/prune`, each a loop over what one run's or one thread's request does.

use super::course::decide_from;
use super::{CancelAction, Host, HostError, RunRequest, new_id};
use crate::store::RunStatus;

/// Which runs a cancel of many is for.
pub(crate) enum CancelMany {
    /// These runs of this thread (those not in flight left alone).
    Runs { thread: String, runs: Vec<String> },
    /// Every run in flight with this status, whatever its thread: pending, running or
    /// either (`None`).
    Status(Option<RunStatus>),
}

impl Host {
    /// Asks each run chosen that is in flight to stop (as a cancel of one run does),
    /// without waiting for them to end; how many were asked. None in flight: 404.
    pub(crate) async fn cancel_many(
        &self,
        which: CancelMany,
        action: CancelAction,
    ) -> Result<usize, HostError> {
        let (targets, none) = match which {
            CancelMany::Runs { thread, runs } => (
                runs.into_iter()
                    .map(|r| (thread.clone(), r))
                    .collect::<Vec<_>>(),
                "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and the runs haven't been deleted or completed.",
            ),
            CancelMany::Status(status) => {
                let mut chosen = Vec::new();
                for stored in self.inner.store.runs_in_flight().await? {
                    // As it is now: the live record is ahead of the stored one.
                    let Ok(now) = self.run(Some(&stored.thread), &stored.id).await else {
                        continue;
                    };
                    if now.status.in_flight() && status.is_none_or(|s| now.status == s) {
                        chosen.push((now.thread, now.id));
                    }
                }
                (chosen, "No runs found to cancel.")
            }
        };
        let mut asked = 0;
        for (thread, run) in targets {
            match self.cancel(&thread, &run, action).await {
                Ok(_) => asked += 1,
                // Not found, or not in flight (ended meanwhile): not this request's.
                Err(HostError::NotFound(_) | HostError::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if asked == 0 {
            return Err(HostError::NotFound(none.into()));
        }
        Ok(asked)
    }

    /// Deletes each thread (`keep_latest`: prunes its history to its latest checkpoint,
    /// which keeps its state), after cancelling its runs in flight and waiting for them
    /// to end; how many threads there were (those that do not exist are skipped).
    pub(crate) async fn prune_threads(
        &self,
        ids: &[String],
        keep_latest: bool,
    ) -> Result<usize, HostError> {
        let mut pruned = 0;
        for id in ids {
            match self.thread(id).await {
                Ok(_) => {}
                Err(HostError::NotFound(_)) => continue,
                Err(e) => return Err(e),
            }
            // A run made meanwhile (between the cancels and the delete) is cancelled
            // too, a few times at most.
            let mut attempts = 0;
            loop {
                attempts += 1;
                self.stop_all(id).await;
                let done = if keep_latest {
                    match self.inner.store.latest(id).await? {
                        Some(latest) => {
                            let graph = self.graph_of(&latest)?;
                            self.threads(graph)
                                .prune(id)
                                .await
                                .map(drop)
                                .map_err(HostError::from)
                        }
                        None => Ok(()),
                    }
                } else {
                    self.delete_thread(id).await
                };
                match done {
                    Err(HostError::Conflict(_)) if attempts < 3 => {}
                    other => break other?,
                }
            }
            pruned += 1;
        }
        Ok(pruned)
    }
}

impl Host {
    /// Cancels every run of `thread` in flight, all of them before waiting for any (a
    /// waiting run would otherwise start when the one before it ends), and waits for
    /// them to end.
    async fn stop_all(&self, thread: &str) {
        let mut stopping = Vec::new();
        for run in self.in_flight(thread).await {
            if let Ok(h) = self.cancel(thread, &run, CancelAction::Interrupt).await {
                stopping.push(h);
            }
        }
        for h in stopping {
            h.finished().await;
        }
    }

    /// Checks a stateless run of `assistant` as its creation would (the graph served,
    /// the input or command against its state), without creating it: a batch of runs
    /// is checked whole before any of them is made.
    pub(crate) async fn check_stateless_run(
        &self,
        assistant: &str,
        request: &RunRequest,
    ) -> Result<(), HostError> {
        let graph = self.current_graph(assistant)?;
        let thread = new_id();
        let go = decide_from(
            &*self.inner.store,
            request,
            request.checkpoint,
            None,
            &thread,
            self.inner.rules,
        )
        .await?;
        self.runner(graph)
            .with_configuration(request.configured.clone())
            .check(&thread, go)
            .await?;
        Ok(())
    }
}
