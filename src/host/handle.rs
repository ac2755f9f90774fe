//! [`RunHandle`]: a run the host knows now (in flight, or finished within the log
//! retention time): its request, its record as it stands, its log, the stop and cancel
//! asked of it, and how it ended ([`RunEnd`]).

use super::course::Course;
use super::request::{CancelAction, RunRequest};
use super::{RunLog, lock, now_ms};
use crate::run::StopHandle;
use crate::store::{RunRecord, RunStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A run the host knows now: in flight, or finished within the log retention time.
pub(crate) struct RunHandle {
    pub id: String,
    pub thread: String,
    pub assistant: String,
    pub request: RunRequest,
    pub(super) record: Mutex<RunRecord>,
    /// The record as the handle was made with it: for a new run, as created (pending),
    /// which is what the request that created it answers, however far its worker got
    /// meanwhile.
    pub created: RunRecord,
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
    /// Held while events are written, so that they go in in order.
    pub(super) saving: tokio::sync::Mutex<()>,
    /// A task is writing the events (see `Cluster::save_events_soon`).
    pub(super) writer: AtomicBool,
    /// What the run will do, decided when it was created on an idle thread (and its
    /// input or answer checked then), for the drive to take rather than decide again.
    pub(super) course: Mutex<Option<Course>>,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunEnd {
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
            created: record.clone(),
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
            saving: tokio::sync::Mutex::new(()),
            writer: AtomicBool::new(false),
            course: Mutex::new(None),
        })
    }

    /// Goes on after its process stopped: resumed, not started again.
    pub(super) fn resumes(&self) -> bool {
        self.request.resumed_after_restart || self.resumed.load(Ordering::SeqCst)
    }

    /// The run's record as it stands.
    pub(crate) fn record(&self) -> RunRecord {
        lock(&self.record).clone()
    }

    /// How it ended, once it has.
    pub(crate) fn end(&self) -> Option<RunEnd> {
        self.end.borrow().clone()
    }

    /// Waits for the end.
    pub(crate) async fn finished(&self) -> RunEnd {
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
