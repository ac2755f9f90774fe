//! Runs shared by several server processes on one store (Postgres): any process
//! takes a request, and the run waits in the store until a process claims it with a
//! lease, which its heartbeat renews. A process that dies stops renewing, and another
//! takes the run over from the thread's last checkpoint. Whoever does not drive a run
//! follows it: a mirror copies its events and its end from the store into a local
//! handle, so a stream, a join or a cancel works through any process.
//!
//! The store enforces what must hold across processes: one running run per thread (an
//! index), a claim per thread (an advisory lock), the order of a thread's runs.

use super::request::{CancelAction, Multitask, RunRequest};
use super::runs::{Recovery, RunEnd, RunHandle, decide};
use super::{Host, HostError, Notice, fresh_record, lock, new_id, now_ms};
use crate::run::Event;
use crate::store::{RunRecord, RunStatus};
use serde_json::Value as Json;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a mirror looks for a run's new events and end.
const MIRROR_EVERY: Duration = Duration::from_millis(40);

/// This process as one of several sharing the store's runs.
pub(super) struct Cluster {
    /// This process's name in the runs it claims: host, pid and start.
    pub(super) worker: String,
    /// How long a claim lasts without a heartbeat.
    pub(super) lease: Duration,
    /// The runs this process drives, whose leases its heartbeat renews.
    pub(super) driving: Mutex<HashSet<String>>,
    /// Wakes the dispatcher when a run of this process ends (the thread's next run may
    /// be claimed).
    pub(super) wake: tokio::sync::Notify,
}

impl Cluster {
    pub(super) fn new(lease: Duration, epoch: &str) -> Self {
        Cluster {
            worker: format!(
                "{}:{}:{epoch}",
                std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into()),
                std::process::id()
            ),
            lease,
            driving: Mutex::new(HashSet::new()),
            wake: tokio::sync::Notify::new(),
        }
    }
}

impl Host {
    pub(super) fn cluster(&self) -> Option<&Cluster> {
        self.inner.cluster.as_ref()
    }

    /// [`Host::create_run`] when runs are shared: what is in flight on the thread is
    /// read from the store, the run is saved as pending for any process to claim, and
    /// the handle returned follows it.
    pub(super) fn create_shared_run(
        &self,
        assistant: &str,
        thread_id: String,
        request: RunRequest,
        metadata: Json,
        graph: Arc<crate::graph::Graph>,
    ) -> Result<Arc<RunHandle>, HostError> {
        let store = &self.inner.store;
        let in_flight: Vec<RunRecord> = store
            .runs(&thread_id)?
            .into_iter()
            .filter(|r| r.status.in_flight())
            .collect();
        if in_flight.is_empty() && request.command.as_ref().is_none_or(|c| c.update.is_none()) {
            let latest = store.latest(&thread_id)?;
            let go = decide(&request, latest.as_ref(), &thread_id)?;
            self.runner(graph).check(&thread_id, go)?;
        }
        if !in_flight.is_empty() {
            match request.multitask_strategy {
                Multitask::Reject => {
                    return Err(super::runs::refused_busy(
                        &thread_id,
                        in_flight.iter().map(|r| r.id.as_str()),
                    ));
                }
                Multitask::Enqueue | Multitask::Interrupt | Multitask::Rollback => {
                    // Enqueue asks nothing of them; interrupt and rollback stop them.
                    if let Some(action) = request.multitask_strategy.cancel_action() {
                        for r in &in_flight {
                            self.cancel_shared(r, action)?;
                        }
                    }
                }
            }
        }
        let thread_record = self.thread_record(&thread_id, assistant)?;
        let record = fresh_record(new_id(), &thread_id, assistant, &request, metadata);
        store.put_thread(&thread_record)?;
        // The handle first: this process's dispatcher may claim the run as soon as it
        // is stored, and must drive the handle the caller follows, not one of its own.
        let reject = request.multitask_strategy == Multitask::Reject;
        let run = RunHandle::new(record.clone(), request);
        lock(&self.inner.runs).insert(run.id.clone(), run.clone());
        // With `reject`, the check above may be stale (another process may have taken
        // a run for the thread since): the store checks again as it writes.
        let put = if reject {
            store.put_run_unless_busy(&record)
        } else {
            store.put_run(&record).map(Ok)
        };
        match put {
            Ok(Ok(())) => {}
            Ok(Err(busy)) => {
                lock(&self.inner.runs).remove(&run.id);
                return Err(super::runs::refused_busy(
                    &thread_id,
                    busy.iter().map(String::as_str),
                ));
            }
            Err(e) => {
                lock(&self.inner.runs).remove(&run.id);
                return Err(e.into());
            }
        }
        self.spawn_mirror(run.clone());
        if let Some(c) = self.cluster() {
            c.wake.notify_one();
        }
        Ok(run)
    }

    /// Asks for a shared run's cancel: a pending one ends at once (a rollback removes
    /// it and what it wrote), a running one through its process's heartbeat.
    pub(super) fn cancel_shared(
        &self,
        record: &RunRecord,
        action: CancelAction,
    ) -> Result<(), HostError> {
        let name = match action {
            CancelAction::Rollback => "rollback",
            CancelAction::Interrupt => "interrupt",
        };
        if let Some(h) = lock(&self.inner.runs).get(&record.id) {
            h.request_cancel(action);
        }
        let was_pending = self.inner.store.cancel_run(&record.id, name)?;
        if was_pending && action == CancelAction::Rollback {
            if let Some(seq) = record.first_seq {
                self.inner.store.truncate(&record.thread, seq)?;
            }
            self.inner.store.delete_run(&record.id)?;
        }
        Ok(())
    }

    /// The handle of a shared run this process has none of yet: one that follows it.
    pub(super) fn follow(&self, run: &str) -> Option<Arc<RunHandle>> {
        let record = self.inner.store.get_run(run).ok()??;
        let request: RunRequest = serde_json::from_value(record.kwargs.clone()).unwrap_or_default();
        let handle = {
            let mut runs = lock(&self.inner.runs);
            if let Some(h) = runs.get(run) {
                return Some(h.clone());
            }
            let h = RunHandle::new(record, request);
            runs.insert(h.id.clone(), h.clone());
            h
        };
        self.spawn_mirror(handle.clone());
        Some(handle)
    }

    /// Copies a run's events and end from the store into its handle, until the run
    /// ends or this process starts driving it.
    fn spawn_mirror(&self, run: Arc<RunHandle>) {
        let host = self.clone();
        tokio::spawn(async move {
            loop {
                {
                    let _copying = run.mirroring.lock().await;
                    if run.driven_here.load(Ordering::SeqCst) {
                        return;
                    }
                    let store = &host.inner.store;
                    // The end first: events written before it are all there after.
                    let record = store.get_run(&run.id);
                    if let Ok(events) = store.events(&run.id, run.log.len()) {
                        for text in events {
                            match serde_json::from_str::<Event>(&text) {
                                Ok(e) => {
                                    run.log.push(e);
                                }
                                Err(_) => break,
                            }
                        }
                    }
                    match record {
                        Ok(None) => {
                            host.end_mirror(&run, RunStatus::Interrupted, None, true);
                            return;
                        }
                        Ok(Some(r)) => {
                            let (status, error) = (r.status, r.error.clone());
                            *lock(&run.record) = r;
                            if !status.in_flight() {
                                host.end_mirror(&run, status, error, false);
                                return;
                            }
                        }
                        Err(_) => {}
                    }
                }
                tokio::time::sleep(MIRROR_EVERY).await;
            }
        });
    }

    /// A followed run ended: its end is set, its log closed, and the handle goes after
    /// the log retention time, as a driven run's does.
    fn end_mirror(
        &self,
        run: &Arc<RunHandle>,
        status: RunStatus,
        error: Option<String>,
        deleted: bool,
    ) {
        run.end.send_replace(Some(RunEnd {
            status,
            error,
            deleted,
        }));
        run.log.close();
        let host = self.clone();
        let id = run.id.clone();
        let retention = if deleted {
            Duration::ZERO
        } else {
            self.inner.log_retention
        };
        tokio::spawn(async move {
            tokio::time::sleep(retention).await;
            lock(&host.inner.runs).remove(&id);
        });
    }

    /// A driven run's event: in its log, and, for processes following it, kept to be
    /// written to the store by [`Host::save_events`].
    pub(super) fn record_event(&self, run: &RunHandle, event: Event) {
        if let Some(t) = &self.inner.tracer {
            t.observe(&run.id, &event);
        }
        if self.cluster().is_some() {
            // Under the lock, so that the events kept are in the log's order.
            let mut unsaved = lock(&run.unsaved);
            unsaved.push(serde_json::to_string(&event).unwrap_or_default());
            run.log.push(event);
        } else {
            run.log.push(event);
        }
    }

    /// Writes the events recorded since the last call, in one statement: a burst of
    /// events (a node's end, the state, the next node's start) costs one round trip.
    pub(super) fn save_events(&self, run: &RunHandle) {
        let batch = std::mem::take(&mut *lock(&run.unsaved));
        if batch.is_empty() {
            return;
        }
        let first = run.log.len() - batch.len() as u64;
        if self
            .inner
            .store
            .append_events(&run.id, first, &batch)
            .is_err()
        {
            // Kept for the next write: followers wait at a gap rather than skip it.
            let mut unsaved = lock(&run.unsaved);
            let later = std::mem::take(&mut *unsaved);
            *unsaved = batch;
            unsaved.extend(later);
        }
    }

    /// Claims the runs waiting in the store, as slots allow, and drives each; renews
    /// the leases of the runs it drives and passes on the cancels asked of them.
    pub(super) fn spawn_dispatcher(&self) {
        let Some(cluster) = self.cluster() else {
            return;
        };
        let lease = cluster.lease;
        let host = self.clone();
        tokio::spawn(async move {
            loop {
                if host.inner.closing.load(Ordering::SeqCst) {
                    return;
                }
                // A slot first: a run is claimed only when it can be driven now.
                let Ok(slot) = host.inner.slots.clone().acquire_owned().await else {
                    return;
                };
                let Some(c) = host.cluster() else { return };
                let now = now_ms();
                // Only runs of graphs this process serves: others wait for a process
                // that does.
                let graphs: Vec<String> = host
                    .inner
                    .graphs
                    .list()
                    .into_iter()
                    .filter(|s| s.current.is_some())
                    .map(|s| s.id)
                    .collect();
                let claimed = host.inner.store.claim_run(
                    &c.worker,
                    &graphs,
                    now,
                    now + lease.as_millis() as u64,
                );
                match claimed {
                    Ok(Some((record, taken_over))) => host.dispatch(record, taken_over, slot).await,
                    Ok(None) => {
                        let store = host.inner.store.clone();
                        let waited = tokio::task::spawn_blocking(move || {
                            store.wait_for_runs(Duration::from_millis(500))
                        });
                        tokio::select! {
                            _ = waited => {}
                            _ = c.wake.notified() => {}
                        }
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        });
        let host = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(lease / 4);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                host.heartbeat();
            }
        });
    }

    /// Renews this process's leases; a run whose lease another process took is
    /// stopped here, and a cancel asked through another process is passed on.
    fn heartbeat(&self) {
        let Some(c) = self.cluster() else { return };
        let driving: Vec<String> = lock(&c.driving).iter().cloned().collect();
        if driving.is_empty() {
            return;
        }
        let until = now_ms() + c.lease.as_millis() as u64;
        let Ok(held) = self.inner.store.renew_leases(&c.worker, &driving, until) else {
            return;
        };
        let runs = lock(&self.inner.runs);
        for id in &driving {
            let Some(run) = runs.get(id) else { continue };
            match held.iter().find(|(h, _)| h == id) {
                None => {
                    // Taken over by another process (which found this one's claim of
                    // the thread gone): not ours to go on with. A run that ended or
                    // went back to waiting meanwhile is not renewed either, and is
                    // still ours to close.
                    if run.record().status != RunStatus::Running
                        || self.inner.closing.load(Ordering::SeqCst)
                    {
                        continue;
                    }
                    run.lost.store(true, Ordering::SeqCst);
                    run.stop.stop();
                }
                Some((_, Some(action))) => run.request_cancel(match action.as_str() {
                    "rollback" => CancelAction::Rollback,
                    _ => CancelAction::Interrupt,
                }),
                Some((_, None)) => {}
            }
        }
    }

    /// Drives a run this process claimed: through its handle here if it has one (a
    /// stream may be following it), else a new one.
    async fn dispatch(
        &self,
        record: RunRecord,
        taken_over: bool,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) {
        let Some(c) = self.cluster() else { return };
        let id = record.id.clone();
        if lock(&c.driving).contains(&id) {
            // Its own lease ran out (a starved heartbeat) and the claim gave it back:
            // it is driving it already, and the claim renewed the lease.
            return;
        }
        let (record, request, how) = if taken_over {
            // Its process died; another may still hold the thread (it only lost its
            // lease): give the run back and look again later.
            match self.inner.store.claim(&record.thread) {
                Ok(claim) => drop(claim),
                Err(_) => {
                    let _ = self.inner.store.release_run(&id, &c.worker);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return;
                }
            }
            match self.recovery(record) {
                Ok(Recovery::Go {
                    mut record,
                    request,
                    how,
                }) => {
                    // Saved with the run: a process after this one resumes it too.
                    record.kwargs = serde_json::to_value(&*request).unwrap_or_default();
                    (*record, *request, Some(how))
                }
                Ok(Recovery::Done) | Err(_) => return,
            }
        } else {
            let request: RunRequest =
                serde_json::from_value(record.kwargs.clone()).unwrap_or_default();
            // Stopped by a process that shut down: it goes on here.
            let how = request.resumed_after_restart.then_some("resumed");
            (record, request, how)
        };
        let run = {
            let mut runs = lock(&self.inner.runs);
            runs.entry(id.clone())
                .or_insert_with(|| RunHandle::new(record.clone(), request.clone()))
                .clone()
        };
        if request.resumed_after_restart {
            run.resumed.store(true, Ordering::SeqCst);
        }
        {
            // The mirror stops; what it had not copied yet is copied now, so the
            // events this process adds come after every earlier one.
            let _copying = run.mirroring.lock().await;
            run.driven_here.store(true, Ordering::SeqCst);
            *lock(&run.record) = record;
            if let Ok(events) = self.inner.store.events(&run.id, run.log.len()) {
                for text in events {
                    if let Ok(e) = serde_json::from_str::<Event>(&text) {
                        run.log.push(e);
                    }
                }
            }
        }
        if let Some(how) = how {
            self.notice(Notice::RunRecovered {
                run: run.id.clone(),
                thread: run.thread.clone(),
                how,
            });
        }
        lock(&c.driving).insert(id.clone());
        let host = self.clone();
        tokio::spawn(async move {
            let end = host.execute_apart(&run, Some(slot)).await;
            if let Some(c) = host.cluster() {
                lock(&c.driving).remove(&id);
                c.wake.notify_one();
            }
            if run.lost.load(Ordering::SeqCst) {
                if host.inner.closing.load(Ordering::SeqCst) {
                    // Nobody here waits to follow it: the shutdown must not either.
                    run.end.send_replace(Some(end));
                    run.log.close();
                    return;
                }
                // Another process goes on with it: this handle follows it from now.
                run.driven_here.store(false, Ordering::SeqCst);
                host.spawn_mirror(run);
                return;
            }
            host.close_run(&run, end);
        });
    }
}
