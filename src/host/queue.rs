//! [`RunQueue`]: the runs in flight on each thread in this process, the one running and
//! those waiting, in order: at most one run per thread at a time, as a thread's
//! checkpoints are one line. A thread's queue has one worker task (`drive.rs`) that
//! takes its runs in turn and leaves when none is left.

use super::HostError;
use super::handle::RunHandle;
use super::lock;
use super::request::Multitask;
use futures_util::future::BoxFuture;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

pub(super) struct RunQueue {
    queues: Mutex<HashMap<String, ThreadQueue>>,
    /// One admission at a time per thread (threads spread over the gates by name):
    /// held across the store writes that save a run, so that runs are queued in the
    /// order they were saved, without holding `queues` while the store works.
    gates: Box<[tokio::sync::Mutex<()>]>,
}

/// How many admission gates threads share.
const GATES: usize = 64;

impl Default for RunQueue {
    fn default() -> Self {
        RunQueue {
            queues: Mutex::default(),
            gates: (0..GATES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }
}

#[derive(Default)]
struct ThreadQueue {
    running: Option<Arc<RunHandle>>,
    waiting: VecDeque<Arc<RunHandle>>,
    /// A worker task owns this queue: it takes the waiting runs in turn and removes
    /// the queue when none is left. Exactly one per queue.
    worker: bool,
}

impl ThreadQueue {
    fn busy(&self) -> bool {
        self.running.is_some() || !self.waiting.is_empty()
    }
}

/// A run let into a thread's queue.
pub(super) struct Admitted {
    pub(super) run: Arc<RunHandle>,
    /// The thread had no worker: the caller starts one.
    pub(super) spawn_worker: bool,
}

impl RunQueue {
    /// Lets a run into `thread`'s queue, behind the runs in flight as `strategy` says:
    /// refused beside them (`reject`: [`refused_busy`]), after them (`enqueue`), or
    /// after asking them to stop (`interrupt`, `rollback`: `cancel_waiting` ends each
    /// waiting one, which never starts). `make` builds and saves the run, told whether
    /// it is first (no run in flight on the thread). One admission of a thread at a
    /// time, so runs are queued in the order they were saved, and a run that could not
    /// be saved is not queued (the runs the strategy stopped stay stopped).
    pub(super) async fn admit<'c>(
        &self,
        thread: &str,
        strategy: Multitask,
        cancel_waiting: impl Fn(Arc<RunHandle>) -> BoxFuture<'c, ()>,
        make: impl FnOnce(bool) -> BoxFuture<'c, Result<Arc<RunHandle>, HostError>>,
    ) -> Result<Admitted, HostError> {
        let gate = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            thread.hash(&mut h);
            &self.gates[h.finish() as usize % self.gates.len()]
        };
        let _turn = gate.lock().await;
        let (first, stopped) = {
            let mut queues = lock(&self.queues);
            match queues.get_mut(thread) {
                Some(queue) if queue.busy() => match strategy {
                    Multitask::Reject => {
                        let ids = queue.running.iter().chain(&queue.waiting);
                        return Err(refused_busy(thread, ids.map(|r| r.id.as_str())));
                    }
                    // Enqueue asks nothing of them; interrupt and rollback stop them.
                    Multitask::Enqueue | Multitask::Interrupt | Multitask::Rollback => {
                        let mut stopped = Vec::new();
                        if let Some(action) = strategy.cancel_action() {
                            stopped = queue.waiting.drain(..).collect();
                            if let Some(r) = &queue.running {
                                r.request_cancel(action);
                            }
                            for r in &stopped {
                                r.request_cancel(action);
                            }
                        }
                        (false, stopped)
                    }
                },
                _ => (true, Vec::new()),
            }
        };
        for r in stopped {
            cancel_waiting(r).await;
        }
        let run = make(first).await?;
        // The queue may have gone meanwhile (its last run ended, and its worker with
        // it): made again, with a new worker.
        let mut queues = lock(&self.queues);
        let queue = queues.entry(thread.to_string()).or_default();
        queue.waiting.push_back(run.clone());
        let spawn_worker = !std::mem::replace(&mut queue.worker, true);
        Ok(Admitted { run, spawn_worker })
    }

    /// Queues a run again (one a previous process left in flight); whether the thread
    /// needs a worker.
    pub(super) fn requeue(&self, run: Arc<RunHandle>) -> bool {
        let mut queues = lock(&self.queues);
        let q = queues.entry(run.thread.clone()).or_default();
        q.waiting.push_back(run);
        !std::mem::replace(&mut q.worker, true)
    }

    /// The worker's next run of `thread`, now its running one; none when the queue is
    /// empty, which then goes (and the worker with it).
    pub(super) fn next(&self, thread: &str) -> Option<Arc<RunHandle>> {
        let mut queues = lock(&self.queues);
        let q = queues.get_mut(thread)?;
        match q.waiting.pop_front() {
            Some(r) => {
                q.running = Some(r.clone());
                Some(r)
            }
            None => {
                queues.remove(thread);
                None
            }
        }
    }

    /// The thread's running run ended: the thread is free for its next run. True when
    /// none waits (the queue is gone, and its worker stops).
    pub(super) fn finished(&self, thread: &str) -> bool {
        let mut queues = lock(&self.queues);
        match queues.get_mut(thread) {
            Some(q) if q.waiting.is_empty() => {
                queues.remove(thread);
                true
            }
            Some(q) => {
                q.running = None;
                false
            }
            None => true,
        }
    }

    /// Takes a waiting run out of its thread's queue; false when it is not waiting
    /// (it runs, or it ended).
    pub(super) fn remove_waiting(&self, thread: &str, run: &str) -> bool {
        let mut queues = lock(&self.queues);
        match queues.get_mut(thread) {
            Some(q) => {
                let before = q.waiting.len();
                q.waiting.retain(|r| r.id != run);
                q.waiting.len() != before
            }
            None => false,
        }
    }

    /// The ids of a thread's runs in flight, the running one first.
    pub(super) fn in_flight(&self, thread: &str) -> Vec<String> {
        lock(&self.queues)
            .get(thread)
            .map(|q| {
                q.running
                    .iter()
                    .chain(q.waiting.iter())
                    .map(|r| r.id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every thread's running run.
    pub(super) fn running(&self) -> Vec<Arc<RunHandle>> {
        lock(&self.queues)
            .values()
            .filter_map(|q| q.running.clone())
            .collect()
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
