//! Hosting graphs for many clients at once: the library side of `switchyard serve`.
//!
//! A [`Host`] holds the served graphs ([`graphs::Graphs`]: each graph's current
//! version, every older version a thread still stands on, reloaded when their files
//! change), one store, and the runs. A run waits for its thread's turn (one run at a
//! time per thread, in the order they came), then for a free slot (a cap on runs at
//! once), then drives a [`Runner`]; its events go to a `RunLog` that any number of
//! readers follow from any point. A thread's MCP servers belong to the thread
//! (`tools::ToolPool`): they stay up while it is paused, until an idle timeout or a
//! cap stops them, so a browser keeps its page across a confirmation.
//!
//! Nothing here knows HTTP: `serve/` turns requests into these calls and their results
//! into responses, the way the command line turns flags into them.

mod assistants;
mod bulk;
mod cluster;
mod course;
mod crons;
mod drive;
mod error;
mod graphs;
mod handle;
mod items;
mod llm;
mod log;
mod queue;
mod request;
mod runs;
mod schemas;
mod threads;
mod tools;

// The face the command line sees: a host, its options, its graphs and notices.
pub use error::HostError;
pub use graphs::{Graphs, Problems, Served};
pub use llm::LlmSource;

// What the server (`serve/`) uses besides.
pub(crate) use assistants::{
    AssistantPatch, AssistantView, Bound, CONFIG_AND_CONTEXT, Configuration, NewAssistant,
    both_given, check_values, constants_of, file_metadata,
};
pub(crate) use bulk::CancelMany;
pub(crate) use crons::{
    CronFilter, CronPatch, CronSort, NewCron, check_schedule, metadata as cron_metadata,
    payload_after as cron_payload, text as cron_text,
};
pub(crate) use handle::RunHandle;

pub(crate) use log::{LogEntry, RunLog};
pub(crate) use request::{CancelAction, Command, Multitask, RunRequest};
pub(crate) use threads::{StateView, ThreadFilter, ThreadStatus, ThreadView, contains};

use crate::run::Runner;
use crate::store::{RunRecord, Store};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedSender;

/// How a host runs its graphs.
pub struct HostOptions {
    pub store: Arc<dyn Store>,
    /// How the long-term store's items are embedded for semantic search, if they are.
    pub index: Option<crate::store::Index>,
    /// Where tools' binary results (screenshots) go.
    pub blob_dir: PathBuf,
    pub llm: LlmSource,
    /// Runs driven at once; more wait as `pending`.
    pub max_runs: usize,
    /// A paused thread's MCP servers stop after this long unused.
    pub mcp_idle: Duration,
    /// Live MCP server sessions allowed at once; past it, the servers of the thread
    /// unused longest stop (they start again when the thread goes on).
    pub max_mcp_servers: usize,
    /// How long a finished run's events stay for readers that join late.
    pub log_retention: Duration,
    /// Threads that finished or failed longer ago than this are deleted.
    pub thread_ttl: Option<Duration>,
    /// With a store several processes share (Postgres): how long a claimed run stays
    /// this process's without a heartbeat, before another process takes it over.
    pub run_lease: Duration,
    /// Model calls' events carry their messages and reply (the web page shows them).
    pub llm_content: bool,
    /// Every run's events also go here, to be exported as traces.
    pub tracer: Option<crate::telemetry::Tracer>,
    /// Refuses what LangGraph's server lets through (see [`RunRules`]).
    pub runs: RunRules,
}

/// What a run request may do to a thread that is not where it expects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunRules {
    /// As LangGraph's server: a second run on a busy thread waits its turn (the
    /// `enqueue` default), an input to a thread paused at an interrupt starts a new
    /// run and drops the interrupt, and an answer to a finished or failed thread, or a
    /// run without input on a thread paused at an interrupt or ended, runs nothing.
    #[default]
    LangGraph,
    /// Each of those is refused (409) and changes nothing, and `reject` is the default
    /// multitask strategy: a client that sends a request again after losing its
    /// answer (a load balancer's retry) cannot start a thread over or run it twice.
    Strict,
}

/// Something the host did that whoever runs it may want to log.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "notice", rename_all = "snake_case")]
pub enum Notice {
    GraphLoaded {
        graph: String,
        path: String,
        hash: String,
    },
    /// A graph file does not validate; `serving` is the hash of the version that
    /// still serves new threads, if any.
    GraphInvalid {
        graph: String,
        path: String,
        errors: usize,
        rendered: String,
        serving: Option<String>,
    },
    GraphRemoved {
        graph: String,
        path: String,
    },
    RunRecovered {
        run: String,
        thread: String,
        how: &'static str,
    },
    RunFinished {
        run: String,
        thread: String,
        status: &'static str,
        error: Option<String>,
    },
    /// Deleted: it ended longer ago than the thread TTL.
    ThreadExpired {
        thread: String,
    },
    /// An occurrence of a cron made its run.
    CronFired {
        cron: String,
        /// The occurrence (Unix milliseconds): each is fired once by one process.
        at_ms: u64,
        run: String,
        thread: String,
    },
    /// An occurrence of a cron could not make its run (the cron goes on to its next),
    /// or the crons could not be read (no cron named).
    CronFailed {
        cron: Option<String>,
        error: String,
    },
}

/// The graphs, store and runs of one server process.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    graphs: Graphs,
    store: Arc<dyn Store>,
    index: Option<crate::store::Index>,
    llm: LlmSource,
    tools: tools::ToolPool,
    slots: Arc<tokio::sync::Semaphore>,
    /// Threads with runs in flight here: the one running and those waiting, in order.
    queue: queue::RunQueue,
    /// Runs in flight, and finished ones for `log_retention`.
    runs: Mutex<HashMap<String, Arc<RunHandle>>>,
    log_retention: Duration,
    thread_ttl: Option<Duration>,
    llm_content: bool,
    tracer: Option<crate::telemetry::Tracer>,
    rules: RunRules,
    closing: AtomicBool,
    notices: Mutex<Option<UnboundedSender<Notice>>>,
    /// Marks what this process hands out that the next one cannot honour (event ids).
    epoch: String,
    /// Runs shared with other processes through the store (`cluster.rs`).
    cluster: Option<cluster::Cluster>,
}

impl Host {
    pub fn new(graphs: Graphs, options: HostOptions) -> Host {
        let tools =
            tools::ToolPool::new(options.blob_dir, options.mcp_idle, options.max_mcp_servers);
        let epoch = format!("{:x}", now_ms());
        let cluster = options
            .store
            .shares_runs()
            .then(|| cluster::Cluster::new(options.run_lease, &epoch));
        Host {
            inner: Arc::new(Inner {
                graphs,
                store: options.store,
                index: options.index,
                llm: options.llm,
                tools,
                slots: Arc::new(tokio::sync::Semaphore::new(options.max_runs.max(1))),
                queue: queue::RunQueue::default(),
                runs: Mutex::new(HashMap::new()),
                log_retention: options.log_retention,
                thread_ttl: options.thread_ttl,
                llm_content: options.llm_content,
                tracer: options.tracer,
                rules: options.runs,
                closing: AtomicBool::new(false),
                notices: Mutex::new(None),
                epoch,
                cluster,
            }),
        }
    }

    /// Sends what the host does (graphs loaded, runs finished) to `tx`.
    pub fn set_notices(&self, tx: UnboundedSender<Notice>) {
        self.inner.graphs.set_notices(tx.clone());
        *lock(&self.inner.notices) = Some(tx);
    }

    /// Sends no more notices: the channel ends once what was sent is read.
    pub fn close_notices(&self) {
        self.inner.graphs.close_notices();
        *lock(&self.inner.notices) = None;
    }

    /// This process's mark, different from any earlier process's on the same store.
    pub(crate) fn epoch(&self) -> &str {
        &self.inner.epoch
    }

    /// What run requests may do (see [`RunRules`]).
    pub fn run_rules(&self) -> RunRules {
        self.inner.rules
    }

    pub fn graphs(&self) -> &Graphs {
        &self.inner.graphs
    }
    /// Starts the background work: the graph watcher (every `watch`, if any), the
    /// reaper of idle MCP servers and, with a thread TTL, the sweeper of threads that
    /// ended longer ago. Call once, inside the runtime.
    pub fn spawn_background(&self, watch: Option<Duration>) {
        if let Some(every) = watch {
            let graphs = self.inner.graphs.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let g = graphs.clone();
                    // Reading and checking files blocks; keep it off the runtime's threads.
                    let _ = tokio::task::spawn_blocking(move || g.reload()).await;
                }
            });
        }
        self.inner.tools.spawn_reaper();
        if let Some(c) = self.cluster() {
            c.spawn_dispatcher(self);
        }
        if let Some(ttl) = self.inner.thread_ttl {
            let host = self.clone();
            // Often enough that a thread outlives its TTL by a fraction of it at most.
            let every = (ttl / 4).clamp(Duration::from_millis(50), Duration::from_secs(600));
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    if let Ok(threads) = host.expire_threads(ttl).await {
                        for thread in threads {
                            host.notice(Notice::ThreadExpired { thread });
                        }
                    }
                }
            });
        }
    }

    /// Deletes the threads that ended longer than `ttl` ago and have no run waiting.
    async fn expire_threads(&self, ttl: Duration) -> Result<Vec<String>, HostError> {
        let before = now_ms().saturating_sub(ttl.as_millis() as u64);
        Ok(
            crate::store::delete_ended(&*self.inner.store, before, |thread| {
                Box::pin(async move { !self.in_flight(&thread).await.is_empty() })
            })
            .await?,
        )
    }

    /// A runner for `graph` on this host's store, with nothing else attached.
    fn runner(&self, graph: Arc<crate::graph::Graph>) -> Runner {
        Runner::new(graph, self.inner.store.clone()).with_cache(self.inner.store.clone())
    }

    /// `graph`'s view of the threads in this host's store.
    fn threads(&self, graph: Arc<crate::graph::Graph>) -> crate::run::Threads {
        crate::run::Threads::new(graph, self.inner.store.clone())
    }

    pub(crate) fn notice(&self, n: Notice) {
        if let Some(tx) = &*lock(&self.inner.notices) {
            let _ = tx.send(n);
        }
    }

    /// This process as one of several sharing the store's runs, when it is one.
    fn cluster(&self) -> Option<&cluster::Cluster> {
        self.inner.cluster.as_ref()
    }

    /// Refuses new runs, asks every running one to stop at its next node boundary
    /// (each saves a checkpoint and goes back to `pending`, for the next process to
    /// resume), waits for them, and stops every MCP server.
    pub async fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        let mut running: Vec<Arc<RunHandle>> = self.inner.queue.running();
        if let Some(c) = self.cluster() {
            let driving = lock(&c.driving).clone();
            let runs = lock(&self.inner.runs);
            running.extend(driving.iter().filter_map(|id| runs.get(id).cloned()));
        }
        for run in &running {
            run.shutdown_stop();
        }
        for run in &running {
            run.finished().await;
        }
        self.inner.tools.shutdown_all().await;
    }

    /// Whether the host is shutting down (long reads end then).
    pub(crate) fn is_closing(&self) -> bool {
        self.inner.closing.load(Ordering::SeqCst)
    }

    fn closing(&self) -> Result<(), HostError> {
        if self.inner.closing.load(Ordering::SeqCst) {
            return Err(HostError::Unavailable(
                "the server is shutting down; try again when it is back".into(),
            ));
        }
        Ok(())
    }

    /// Whether a thread has runs in flight, and their ids (the running one first).
    pub(crate) async fn in_flight(&self, thread: &str) -> Vec<String> {
        match self.cluster() {
            Some(c) => c.in_flight(self, thread).await,
            None => self.inner.queue.in_flight(thread),
        }
    }

    /// Runs that a previous process left in flight: each is queued again. One that had
    /// started goes on from its thread's last checkpoint; one whose graph is no longer
    /// served, or whose thread's checkpoint no longer fits the graph, fails with the
    /// reason.
    pub async fn recover(&self) -> Result<usize, HostError> {
        if self.cluster().is_some() {
            // Claimed from the store like any other waiting run, and taken over when
            // their lease runs out; other processes may be driving them now.
            return Ok(0);
        }
        let runs = self.inner.store.runs_in_flight().await?;
        let n = runs.len();
        for record in runs {
            self.requeue(record).await?;
        }
        Ok(n)
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock leaves whole values; keep serving them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A new id for a run or a thread: a UUIDv7, time-ordered.
pub(crate) fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A run record as created, before it is saved.
fn fresh_record(
    id: String,
    thread: &str,
    assistant: &str,
    request: &RunRequest,
    metadata: serde_json::Value,
) -> RunRecord {
    let now = now_ms();
    RunRecord {
        id,
        thread: thread.to_string(),
        assistant: assistant.to_string(),
        status: crate::store::RunStatus::Pending,
        created_ms: now,
        updated_ms: now,
        metadata,
        kwargs: serde_json::to_value(request).unwrap_or_default(),
        multitask_strategy: request.multitask_strategy.name().to_string(),
        error: None,
        first_seq: None,
    }
}
