//! Runs shared by several server processes on one store (Postgres): any process
//! takes a request, and the run waits in the store until a process claims it with a
//! lease, which its heartbeat renews. A process that dies stops renewing, and another
//! takes the run over from the thread's last checkpoint. Whoever does not drive a run
//! follows it: a mirror copies its events and its end from the store into a local
//! handle, so a stream, a join or a cancel works through any process.
//!
//! The store enforces what must hold across processes: one running run per thread (an
//! index), a claim per thread (an advisory lock), the order of a thread's runs.

use super::course::decide_from;
use super::handle::{RunEnd, RunHandle};
use super::queue::refused_busy;
use super::request::{CancelAction, Multitask, RunRequest};
use super::runs::Recovery;
use super::{Host, HostError, Notice, fresh_record, lock, new_id, now_ms};
use crate::run::Event;
use crate::store::{Checked, Refusal};
use crate::store::{RunRecord, RunStatus};
use serde_json::Value as Json;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a shared run's events wait to be written together (see
/// [`Cluster::save_events_soon`]).
const COALESCE_EVENTS: Duration = Duration::from_millis(10);

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

/// The cluster's part in a host's work: these take the host they serve (its store,
/// runs, slots and notices), whose cluster `self` is. Tasks they start hold a clone of
/// the host and reach the cluster through it.
impl Cluster {
    /// [`Host::create_run`] when runs are shared: what is in flight on the thread is
    /// read from the store, the run is saved as pending for any process to claim, and
    /// the handle returned follows it. Its input or answer is checked here when the
    /// thread is idle; whichever process claims it decides its course then (the
    /// thread may have moved while the run waited in the store).
    pub(super) async fn create_run(
        &self,
        host: &Host,
        assistant: &str,
        thread_id: String,
        request: RunRequest,
        metadata: Json,
        graph: Arc<crate::graph::Graph>,
    ) -> Result<Arc<RunHandle>, HostError> {
        let store = &host.inner.store;
        // Checked, then written under the thread's lock if the thread did not move
        // meanwhile; a run of another process that went through in between (the same
        // answer sent to two servers at once) makes this one checked again, against
        // the thread as that run left it.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut checked = None;
            let in_flight: Vec<RunRecord> = store.runs_in_flight_of(&thread_id).await?;
            if in_flight.is_empty() && request.command.as_ref().is_none_or(|c| c.update.is_none()) {
                let latest = store.latest(&thread_id).await?;
                let seen = latest.as_ref().map(|l| l.seq);
                let refused = match decide_from(
                    &**store,
                    &request,
                    request.checkpoint,
                    latest.as_ref(),
                    &thread_id,
                    host.inner.rules,
                )
                .await
                {
                    Ok(go) => host
                        .runner(graph.clone())
                        .with_configuration(request.configured.clone())
                        .check(&thread_id, go)
                        .await
                        .err()
                        .map(HostError::from),
                    Err(e) => Some(e),
                };
                if let Some(e) = refused {
                    // Read while another process's run went through (its runs and its
                    // latest checkpoint apart, the thread mid-run): looked at again.
                    let moved = store.latest(&thread_id).await?.map(|l| l.seq) != seen
                        || !store.runs_in_flight_of(&thread_id).await?.is_empty();
                    if moved && attempts < 5 {
                        continue;
                    }
                    return Err(e);
                }
                checked = Some(Checked(seen));
            }
            if !in_flight.is_empty() {
                match request.multitask_strategy {
                    Multitask::Reject => {
                        return Err(refused_busy(
                            &thread_id,
                            in_flight.iter().map(|r| r.id.as_str()),
                        ));
                    }
                    Multitask::Enqueue | Multitask::Interrupt | Multitask::Rollback => {
                        // Enqueue asks nothing of them; interrupt and rollback stop them.
                        if let Some(action) = request.multitask_strategy.cancel_action() {
                            for r in &in_flight {
                                self.cancel(host, r, action).await?;
                            }
                        }
                    }
                }
            }
            let thread_record = host
                .thread_record(&thread_id, assistant, request.assistant_id.as_deref())
                .await?;
            let record = fresh_record(new_id(), &thread_id, assistant, &request, metadata.clone());
            store.put_thread(&thread_record).await?;
            // The handle first: this process's dispatcher may claim the run as soon as it
            // is stored, and must drive the handle the caller follows, not one of its own.
            let reject = request.multitask_strategy == Multitask::Reject;
            let run = RunHandle::new(record.clone(), request.clone());
            lock(&host.inner.runs).insert(run.id.clone(), run.clone());
            // With a slot free here, the run is claimed as it is written when its
            // thread is idle, and driven here: no other process has to hear of it,
            // claim it, and have this one follow it through the store. With `reject`,
            // the check above may be stale (another process may have taken a run for
            // the thread since): the store checks again as it writes.
            let slot = host.inner.slots.clone().try_acquire_owned().ok();
            let lease_until = now_ms() + self.lease.as_millis() as u64;
            let here = slot.as_ref().map(|_| (self.worker.as_str(), lease_until));
            let put = store.put_run_here(&record, checked, reject, here).await;
            match (put, slot) {
                // Claimed here (only ever with `here`, so with the slot).
                (Ok(Ok(true)), Some(slot)) => {
                    let mut record = record;
                    record.status = RunStatus::Running;
                    self.dispatch(host, record, false, slot).await;
                    return Ok(run);
                }
                (Ok(Ok(_)), _) => {}
                (Ok(Err(Refusal::Busy(busy))), _) => {
                    lock(&host.inner.runs).remove(&run.id);
                    return Err(refused_busy(&thread_id, busy.iter().map(String::as_str)));
                }
                (Ok(Err(Refusal::Moved)), _) => {
                    lock(&host.inner.runs).remove(&run.id);
                    if attempts < 5 {
                        continue;
                    }
                    return Err(HostError::Conflict(format!(
                        "thread `{thread_id}` kept moving while the run was checked against it; send the request again"
                    )));
                }
                (Err(e), _) => {
                    lock(&host.inner.runs).remove(&run.id);
                    return Err(e.into());
                }
            }
            spawn_mirror(host, run.clone());
            self.wake.notify_one();
            return Ok(run);
        }
    }

    /// The ids of a thread's runs in flight, whichever process drives them (the store
    /// knows), the running one first.
    pub(super) async fn in_flight(&self, host: &Host, thread: &str) -> Vec<String> {
        let mut runs: Vec<RunRecord> = host
            .inner
            .store
            .runs_in_flight_of(thread)
            .await
            .unwrap_or_default();
        runs.sort_by_key(|r| r.status != RunStatus::Running);
        runs.into_iter().map(|r| r.id).collect()
    }

    /// Asks for a shared run's cancel: a pending one ends at once (a rollback removes
    /// it and what it wrote), a running one through its process's heartbeat.
    pub(super) async fn cancel(
        &self,
        host: &Host,
        record: &RunRecord,
        action: CancelAction,
    ) -> Result<(), HostError> {
        let name = match action {
            CancelAction::Rollback => "rollback",
            CancelAction::Interrupt => "interrupt",
        };
        if let Some(h) = lock(&host.inner.runs).get(&record.id) {
            h.request_cancel(action);
        }
        let store = &host.inner.store;
        let was_pending = store.cancel_run(&record.id, name).await?;
        if was_pending && action == CancelAction::Rollback {
            if let Some(seq) = record.first_seq {
                store.truncate(&record.thread, seq).await?;
            }
            store.delete_run(&record.id).await?;
        }
        Ok(())
    }

    /// The handle of a shared run this process has none of yet: one that follows it.
    pub(super) async fn follow(&self, host: &Host, run: &str) -> Option<Arc<RunHandle>> {
        let record = host.inner.store.get_run(run).await.ok()??;
        let request: RunRequest = serde_json::from_value(record.kwargs.clone()).unwrap_or_default();
        let handle = {
            let mut runs = lock(&host.inner.runs);
            if let Some(h) = runs.get(run) {
                return Some(h.clone());
            }
            let h = RunHandle::new(record, request);
            runs.insert(h.id.clone(), h.clone());
            h
        };
        spawn_mirror(host, handle.clone());
        Some(handle)
    }

    /// A driven run's event in its log, and kept for the store, where the processes
    /// following the run read it: [`Cluster::save_events`] writes them.
    pub(super) fn log_event(&self, run: &RunHandle, event: Event) {
        // Under the lock, so that the events kept are in the log's order.
        let mut unsaved = lock(&run.unsaved);
        unsaved.push(serde_json::to_string(&event).unwrap_or_default());
        run.log.push(event);
    }

    /// Writes the events logged since the last call, in one statement: a burst of
    /// events (a node's end, the state, the next node's start) costs one round trip.
    /// Returns once every event logged before the call is in the store (or kept for
    /// the next write, when the store failed).
    pub(super) async fn save_events(&self, host: &Host, run: &RunHandle) {
        // One writer at a time, each taking what the one before left: in order.
        let _saving = run.saving.lock().await;
        let (first, batch) = {
            let mut unsaved = lock(&run.unsaved);
            let batch = std::mem::take(&mut *unsaved);
            (run.log.len() - batch.len() as u64, batch)
        };
        if batch.is_empty() {
            return;
        }
        if host
            .inner
            .store
            .append_events(&run.id, first, &batch)
            .await
            .is_err()
        {
            // Kept for the next write: followers wait at a gap rather than skip it.
            let mut unsaved = lock(&run.unsaved);
            let later = std::mem::take(&mut *unsaved);
            *unsaved = batch;
            unsaved.extend(later);
        }
    }

    /// [`Cluster::save_events`] on a task of its own, so that the run goes on while its
    /// events are written: one writer per run at a time, which writes, when it is done,
    /// whatever was logged meanwhile in one more statement. (Awaited in the run's
    /// loop, each write held the run up for a round trip, and a run's few events a
    /// node cost a statement each.)
    pub(super) fn save_events_soon(&self, host: &Host, run: &Arc<RunHandle>) {
        if run.writer.swap(true, Ordering::SeqCst) {
            return;
        }
        let (host, run) = (host.clone(), run.clone());
        tokio::spawn(async move {
            // A moment for the events that follow (the next node's start, its end, the
            // state) to join the write: followers elsewhere look every `MIRROR_EVERY`
            // (40 ms), so they do not see the difference, and a run writes a statement
            // or two instead of one per burst. The run's end writes what is left at
            // once.
            tokio::time::sleep(COALESCE_EVENTS).await;
            while let Some(c) = host.cluster() {
                c.save_events(&host, &run).await;
                run.writer.store(false, Ordering::SeqCst);
                // Logged after the write took its batch and before the flag fell: this
                // task goes on with it, unless another has started.
                if lock(&run.unsaved).is_empty() || run.writer.swap(true, Ordering::SeqCst) {
                    break;
                }
            }
        });
    }

    /// Whether the run is still this process's to record (its lease renewed now), as
    /// it ends; when another process took it over, the record is that one's to write.
    pub(super) async fn still_ours(
        &self,
        host: &Host,
        run: &RunHandle,
    ) -> Result<bool, crate::store::StoreError> {
        let until = now_ms() + self.lease.as_millis() as u64;
        let held = host
            .inner
            .store
            .renew_leases(&self.worker, std::slice::from_ref(&run.id), until)
            .await?;
        if held.is_empty() {
            run.lost.store(true, Ordering::SeqCst);
            return Ok(false);
        }
        Ok(true)
    }

    /// A claimed run this process will not drive, as it shuts down: back to pending
    /// for the next process (marked to go on, if it had begun).
    pub(super) async fn put_back(&self, host: &Host, run: &RunHandle) {
        let mut request = run.request.clone();
        request.resumed_after_restart = run.resumes();
        let r = run.update(|r| {
            r.status = RunStatus::Pending;
            r.kwargs = serde_json::to_value(&request).unwrap_or_default();
        });
        let _ = host.save_run(run, &r).await;
    }

    /// Another process drives the run's thread (it took the run over while this one
    /// waited for the thread): the run is that process's to record.
    pub(super) fn lost_thread(&self, run: &RunHandle) {
        run.lost.store(true, Ordering::SeqCst);
    }

    /// Claims the runs waiting in the store, as slots allow, and drives each; renews
    /// the leases of the runs it drives and passes on the cancels asked of them.
    pub(super) fn spawn_dispatcher(&self, host: &Host) {
        let lease = self.lease;
        let host_of_heartbeat = host.clone();
        let host = host.clone();
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
                let claimed = host
                    .inner
                    .store
                    .claim_run(&c.worker, &graphs, now, now + lease.as_millis() as u64)
                    .await;
                match claimed {
                    Ok(Some((record, taken_over))) => {
                        c.dispatch(&host, record, taken_over, slot).await
                    }
                    Ok(None) => {
                        let waited = host.inner.store.wait_for_runs(Duration::from_millis(500));
                        tokio::select! {
                            _ = waited => {}
                            _ = c.wake.notified() => {}
                        }
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        });
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(lease / 4);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Some(c) = host_of_heartbeat.cluster() {
                    c.heartbeat(&host_of_heartbeat).await;
                }
            }
        });
    }

    /// Renews this process's leases; a run whose lease another process took is
    /// stopped here, and a cancel asked through another process is passed on.
    async fn heartbeat(&self, host: &Host) {
        let driving: Vec<String> = lock(&self.driving).iter().cloned().collect();
        if driving.is_empty() {
            return;
        }
        let until = now_ms() + self.lease.as_millis() as u64;
        let Ok(held) = host
            .inner
            .store
            .renew_leases(&self.worker, &driving, until)
            .await
        else {
            return;
        };
        let runs = lock(&host.inner.runs);
        for id in &driving {
            let Some(run) = runs.get(id) else { continue };
            match held.iter().find(|(h, _)| h == id) {
                None => {
                    // Taken over by another process (which found this one's claim of
                    // the thread gone): not ours to go on with. A run that ended or
                    // went back to waiting meanwhile is not renewed either, and is
                    // still ours to close.
                    if run.record().status != RunStatus::Running
                        || host.inner.closing.load(Ordering::SeqCst)
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
        host: &Host,
        record: RunRecord,
        taken_over: bool,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) {
        let id = record.id.clone();
        if lock(&self.driving).contains(&id) {
            // Its own lease ran out (a starved heartbeat) and the claim gave it back:
            // it is driving it already, and the claim renewed the lease.
            return;
        }
        let (record, request, how) = if taken_over {
            // Its process died; another may still hold the thread (it only lost its
            // lease): give the run back and look again later.
            match host.inner.store.claim(&record.thread).await {
                Ok(claim) => claim.release().await,
                Err(_) => {
                    let _ = host.inner.store.release_run(&id, &self.worker).await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return;
                }
            }
            match host.recovery(record).await {
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
            let mut runs = lock(&host.inner.runs);
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
            if let Ok(events) = host.inner.store.events(&run.id, run.log.len()).await {
                for text in events {
                    if let Ok(e) = serde_json::from_str::<Event>(&text) {
                        run.log.push(e);
                    }
                }
            }
        }
        if let Some(how) = how {
            host.notice(Notice::RunRecovered {
                run: run.id.clone(),
                thread: run.thread.clone(),
                how,
            });
        }
        lock(&self.driving).insert(id.clone());
        let host = host.clone();
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
                spawn_mirror(&host, run);
                return;
            }
            host.close_run(&run, end).await;
        });
    }
}

/// Copies a run's events and end from the store into its handle, until the run ends
/// or this process starts driving it.
fn spawn_mirror(host: &Host, run: Arc<RunHandle>) {
    let host = host.clone();
    tokio::spawn(async move {
        loop {
            {
                let _copying = run.mirroring.lock().await;
                if run.driven_here.load(Ordering::SeqCst) {
                    return;
                }
                let store = &host.inner.store;
                // The end first: events written before it are all there after.
                let record = store.get_run(&run.id).await;
                if let Ok(events) = store.events(&run.id, run.log.len()).await {
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
                        end_mirror(&host, &run, RunStatus::Interrupted, None, true);
                        return;
                    }
                    Ok(Some(r)) => {
                        let (status, error) = (r.status, r.error.clone());
                        *lock(&run.record) = r;
                        if !status.in_flight() {
                            end_mirror(&host, &run, status, error, false);
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

/// A followed run ended: its end is set, its log closed, and the handle goes after the
/// log retention time, as a driven run's does.
fn end_mirror(
    host: &Host,
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
    let host = host.clone();
    let id = run.id.clone();
    let retention = if deleted {
        Duration::ZERO
    } else {
        host.inner.log_retention
    };
    tokio::spawn(async move {
        tokio::time::sleep(retention).await;
        lock(&host.inner.runs).remove(&id);
    });
}
