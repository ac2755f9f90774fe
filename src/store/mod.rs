//! Stores: where threads live. A store plays seven roles, each a trait that its callers
//! take alone ([`Checkpoints`] for runs, [`Catalog`] and [`RunQueue`] for a server,
//! [`LlmCache`] for llm nodes, [`Items`] for the long-term store that threads share,
//! [`Crons`] for the runs a server makes on a schedule, [`Assistants`] for the
//! configured graphs a server's API makes;
//! [`Store`] is all of them), with a store in memory, one in
//! a SQLite file and one in a Postgres database, all passing the same test suite
//! (`tests/store.rs`).
//!
//! A thread's history is one checkpoint record per node execution. A record holds what
//! changed (the writes of that step), not the whole state, so the cost of a step does
//! not grow with the length of the history. The state at any record is the replay of
//! the writes up to it, through the same reducers.
//!
//! Beside the checkpoints a store keeps the LLM cache and, for `switchyard serve`, the
//! catalog of threads (metadata, creation time) and runs (status, the request that made
//! them), so a restarted server knows what it was doing.

mod assistants;
mod catalog;
mod crons;
mod frozen;
mod index;
mod items;
mod memory;
mod none;
mod postgres;
mod retention;
mod rows;
mod sqlite;
pub(crate) mod stored;

pub use assistants::{Assistant, Assistants};
pub use catalog::{RunRecord, RunStatus, ThreadRecord};
pub use crons::{Cron, Crons, Take};
pub use index::{Embed, Fields, Index, check_paths as check_index_paths};
pub use items::{Item, ItemError, Items, Listing, Namespace, Page, Put, Search, ops as item_ops};
pub use memory::MemoryStore;
pub use none::NoStore;
pub use postgres::PostgresStore;
pub use retention::delete_ended;
pub use sqlite::{Durability, SqliteOptions, SqliteStore};
pub use stored::Stored;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::sync::Arc;

/// Where a thread stands after a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    Interrupted,
    Stopped,
    Finished,
    Failed,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Interrupted => "interrupted",
            Status::Stopped => "stopped",
            Status::Finished => "finished",
            Status::Failed => "failed",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Status::Running,
            "interrupted" => Status::Interrupted,
            "stopped" => Status::Stopped,
            "finished" => Status::Finished,
            "failed" => Status::Failed,
            _ => return None,
        })
    }
}

/// One field write, as the reducer applied it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Write {
    pub field: Arc<str>,
    pub value: Arc<Json>,
}

/// An interrupt waiting for its answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub node: Arc<str>,
    pub payload: Json,
    /// The payload's `reference`, which a resume must match when it carries one.
    pub reference: Option<String>,
    /// Unix milliseconds after which the interrupt takes its `on_timeout` route.
    pub deadline_ms: Option<u64>,
    /// The node's fingerprint when it paused; see `Node::fingerprint`.
    pub fingerprint: String,
    /// Pauses for a breakpoint rather than an interrupt node.
    #[serde(default)]
    pub breakpoint: Option<String>,
    /// The checkpoint that paused: it names the interrupt however many records (a
    /// person's updates) come after it before the answer.
    #[serde(default)]
    pub at_seq: Option<u64>,
    /// Interrupts of other parallel branches that asked in the same superstep: each
    /// may be answered first, by its own `reference`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<Pending>,
}

/// What wrote a checkpoint record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The input of a run: its first record.
    Input,
    /// A node, or the run's end, stop or pause.
    #[default]
    Loop,
    /// A person's write to the state between runs (`Threads::update`).
    Update,
    /// The first record of a pruned thread (`Threads::prune`): its writes are the
    /// whole state at that record, which replaces the state rather than going through
    /// the reducers. The records before it are gone.
    Base,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Input => "input",
            Source::Loop => "loop",
            Source::Update => "update",
            Source::Base => "base",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "input" => Source::Input,
            "loop" => Source::Loop,
            "update" => Source::Update,
            "base" => Source::Base,
            _ => return None,
        })
    }
}

/// One checkpoint record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub thread: Arc<str>,
    /// Position in the thread's history, from 0: the order records were written in,
    /// whatever branch they are on.
    pub seq: u64,
    /// The record this one follows (its state is that record's with these writes): the
    /// one before it, or an earlier one where a run or an update forked the thread
    /// there. None for a thread's first record (and a pruned thread's base).
    #[serde(default)]
    pub parent: Option<u64>,
    /// Which run of the thread wrote it (each `start` begins a new run).
    pub run: u64,
    /// Node executions so far in this run.
    pub step: u64,
    /// The node that ran (none for the record of a run's input).
    pub node: Option<Arc<str>>,
    /// The node to run next, if the run goes on.
    pub next: Option<Arc<str>>,
    pub writes: Vec<Write>,
    pub status: Status,
    pub pending: Option<Box<Pending>>,
    pub outcome: Option<String>,
    /// The graph file that wrote it (absolute), so `state` and `history` need no file.
    pub graph: Arc<str>,
    pub graph_hash: Arc<str>,
    /// A limit was reached and the run is on its way through `on_limit`.
    #[serde(default)]
    pub limited: bool,
    /// `run.error` after this step: the failure an `on_error` edge is handling.
    #[serde(default)]
    pub error: Option<Box<Json>>,
    /// Tokens used and wall time spent in this run so far, so budgets hold across pauses.
    pub tokens: u64,
    /// Model replies, tool calls and dollars of this run so far, for `[budget]`.
    #[serde(default, skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
    pub elapsed_ms: u64,
    /// Unix milliseconds when the record was written.
    pub at_ms: u64,
    #[serde(default)]
    pub source: Source,
}

/// What a run has used of its `[budget]` besides tokens: kept in each record, so that
/// budgets hold across pauses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub model_calls: u64,
    #[serde(default)]
    pub tool_calls: u64,
    #[serde(default)]
    pub usd: f64,
}

impl Usage {
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }

    /// As a store keeps it: JSON, none when nothing was used.
    pub(crate) fn column(&self) -> Option<String> {
        (!self.is_zero()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    /// Read back from [`Usage::column`]; text that is not one makes the record corrupt.
    pub(crate) fn from_column(thread: &str, text: Option<&str>) -> Result<Usage, StoreError> {
        match text {
            None => Ok(Usage::default()),
            Some(t) => {
                serde_json::from_str(t).map_err(|e| rows::corrupt(thread, format!("`usage`: {e}")))
            }
        }
    }
}

impl Checkpoint {
    /// The record of a run that a limit ended at once (no `on_limit` route took it, or
    /// that route ran out of its grace steps).
    pub fn ended_by_limit(&self) -> bool {
        self.status == Status::Finished
            && self.limited
            && self.node.is_none()
            && self.outcome.as_deref() == Some("limit")
    }
}

/// A thread's whole state after one of its records, so that its latest state is read
/// from the snapshot and the records after it rather than replayed from its first
/// record: resuming a thread costs the same however long its history is. Its values are
/// parsed (`Arc<Json>`), or, as a resume reads them, [`Stored`].
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot<V = Arc<Json>> {
    pub thread: Arc<str>,
    /// The record whose state this is.
    pub seq: u64,
    /// The graph that made it (file and hash): a thread read through another graph
    /// (an edited file) replays its writes instead, through that graph's reducers.
    pub graph: Arc<str>,
    pub graph_hash: Arc<str>,
    /// Every field's value, in declaration order.
    pub values: Vec<(Arc<str>, V)>,
}

impl<V> Snapshot<V> {
    /// The snapshot with `f` made of each value.
    fn map_values<W>(self, f: impl Fn(V) -> W) -> Snapshot<W> {
        Snapshot {
            thread: self.thread,
            seq: self.seq,
            graph: self.graph,
            graph_hash: self.graph_hash,
            values: self.values.into_iter().map(|(n, v)| (n, f(v))).collect(),
        }
    }
}

impl Snapshot<Stored> {
    /// The snapshot with every value parsed.
    pub fn parsed(self) -> Snapshot {
        self.map_values(|v| v.parse())
    }
}

impl Snapshot {
    /// The snapshot as a resume reads it, every value parsed already.
    pub fn stored(self) -> Snapshot<Stored> {
        self.map_values(Stored::Json)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    // Not `#[from]`: that would make the SQLite error the source too, and the
    // command would print it twice ("caused by: ...").
    #[error("checkpoint store: {0}")]
    Sqlite(rusqlite::Error),
    #[error(
        "checkpoint store `{path}` cannot be written (a read-only file, directory or mount); `state` and `history` can read it"
    )]
    ReadOnly { path: std::path::PathBuf },
    #[error("checkpoint store: cannot create `{path}`")]
    Create {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "checkpoint store `{path}` has layout version {found}, and this Switchyard reads version {expected}; use another store path"
    )]
    Version {
        path: std::path::PathBuf,
        found: i64,
        expected: i64,
    },
    #[error(
        "thread `{thread}` is being run by another process (its checkpoint {seq} was just written); wait for it, or stop it first"
    )]
    Conflict { thread: String, seq: u64 },
    #[error(
        "thread `{thread}` is being run by process {pid}; wait for it to pause or finish, or stop it (Ctrl-C) first"
    )]
    Claimed { thread: String, pid: u32 },
    /// This process's claim of a thread lapsed (it was stopped, or cut off from the
    /// database, for longer than the claim's lease) and another process took the
    /// thread over: this one must make no further tool call and write nothing.
    #[error(
        "thread `{thread}` was taken over by another process: this process's claim of it lapsed (it was stopped or cut off from the database for longer than the claim's lease), so it stops here without calling a tool or writing a checkpoint"
    )]
    ClaimLost { thread: String },
    #[error("checkpoint store: cannot lock `{path}` to claim a thread")]
    Lock {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("checkpoint store {url}: {message}")]
    Postgres { url: String, message: String },
    #[error(
        "checkpoint store {url} has layout version {found}, and this Switchyard reads version {expected}; use another database"
    )]
    PostgresVersion {
        url: String,
        found: i64,
        expected: i64,
    },
    #[error(
        "the schema `switchyard` of {url} is not a Switchyard store (it holds the tables {}); it is left as it is: give --store another database",
        tables.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
    )]
    PostgresForeign { url: String, tables: Vec<String> },
    #[error("checkpoint store: a record of thread `{thread}` is corrupt: {message}")]
    Corrupt { thread: String, message: String },
    #[error("checkpoint store: the catalog entry of {what} is corrupt: {message}")]
    CorruptCatalog { what: String, message: String },
    /// The long-term store's items asked of a store that keeps nothing.
    #[error(
        "the store `none` keeps no items: use `--store memory`, `sqlite:PATH` or `postgres://...` to keep them"
    )]
    NoItems,
    /// Crons asked of a store that keeps nothing.
    #[error(
        "the store `none` keeps no crons: use `--store memory`, `sqlite:PATH` or `postgres://...` to keep them"
    )]
    NoCrons,
    /// Assistants made through the API, asked of a store that keeps nothing.
    #[error(
        "the store `none` keeps no assistants but the graph files': use `--store memory`, `sqlite:PATH` or `postgres://...` to make others"
    )]
    NoAssistants,
    #[error(
        "`{path}` is not a Switchyard store{}; it is left as it is: give --store another file",
        if tables.is_empty() { String::new() } else { format!(" (it holds the tables {})", tables.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")) }
    )]
    Foreign {
        path: std::path::PathBuf,
        tables: Vec<String>,
    },
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sqlite(e)
    }
}

impl StoreError {
    /// The store cannot be written where it is; it may still be read.
    fn is_read_only(&self) -> bool {
        match self {
            StoreError::ReadOnly { .. } => true,
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => matches!(
                f.code,
                rusqlite::ErrorCode::ReadOnly
                    | rusqlite::ErrorCode::CannotOpen
                    | rusqlite::ErrorCode::PermissionDenied
            ),
            StoreError::Create { source, .. } => {
                source.kind() == std::io::ErrorKind::PermissionDenied
            }
            _ => false,
        }
    }
}

/// What a run needs of a store: a thread's checkpoint records, its snapshots and its
/// claim. The runner and [`crate::run::Threads`] take this role alone.
///
/// Every role's calls are async: a store that waits for a disk or a database does so
/// off the runtime's threads (SQLite on blocking threads, Postgres on its
/// connections' own), so a slow commit never stalls the other runs and requests.
#[async_trait]
pub trait Checkpoints: Send + Sync {
    /// Whether records appended are kept. A store that keeps none ([`NoStore`]) spares
    /// the runner building them.
    fn keeps_records(&self) -> bool {
        true
    }
    /// Appends a record; `seq` numbers of a thread are consecutive from 0.
    async fn append(&self, record: Checkpoint) -> Result<(), StoreError>;
    /// Appends records together: all of them or none (a fork or a copy of a thread).
    async fn append_all(&self, records: Vec<Checkpoint>) -> Result<(), StoreError> {
        for r in records {
            self.append(r).await?;
        }
        Ok(())
    }
    /// Every record of a thread, in order; empty when the thread is unknown. A gap in
    /// the numbering is a corrupt thread.
    async fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError>;
    /// The last record of a thread.
    async fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self.load(thread).await?.pop())
    }
    /// The records of a thread from `seq` on, in order.
    async fn load_from(&self, thread: &str, seq: u64) -> Result<Vec<Checkpoint>, StoreError> {
        let mut records = self.load(thread).await?;
        records.retain(|r| r.seq >= seq);
        Ok(records)
    }
    /// Keeps `snapshot` as the thread's latest, replacing the one before. A store
    /// without snapshots keeps none, and threads are replayed from their first record.
    async fn put_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        let _ = snapshot;
        Ok(())
    }
    /// The thread's latest snapshot, if it has one whose record still exists.
    async fn snapshot(&self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        let _ = thread;
        Ok(None)
    }
    /// The thread's latest snapshot and its records from the snapshot's on, read
    /// together (one read transaction where the store has them): what a resume needs.
    /// Without a snapshot, no records. Large values may be left as text (see
    /// [`Stored`]).
    async fn resume_point(
        &self,
        thread: &str,
    ) -> Result<(Option<Snapshot<Stored>>, Vec<Checkpoint>), StoreError> {
        let Some(snapshot) = self.snapshot(thread).await? else {
            return Ok((None, Vec::new()));
        };
        let records = self.load_from(thread, snapshot.seq).await?;
        Ok((Some(snapshot.stored()), records))
    }
    /// Marks `thread` as driven by this caller until the returned [`Claim`] is dropped
    /// or released, and refuses while another process drives it, so that a node is
    /// never run by two processes at once (a tool called twice). A store only one
    /// process can open needs no claims.
    async fn claim(&self, thread: &str) -> Result<Claim, StoreError> {
        let _ = thread;
        Ok(Claim::none())
    }
    /// Checks, before a call with effects outside the thread (a tool's), that this
    /// process still holds `thread`'s claim, and extends it for the call: a claim that
    /// lapses (a lease a stopped process did not renew) is
    /// [`StoreError::ClaimLost`] once another process took it, and the call is not
    /// made. A store whose claims cannot lapse while their holder lives has nothing to
    /// check; nor has a thread this process did not claim.
    async fn fence(&self, thread: &str) -> Result<Fence, StoreError> {
        let _ = thread;
        Ok(Fence::default())
    }
    /// Removes the records of `thread` from `seq` on (a rolled-back run's), keeping
    /// those before it, and a snapshot of a removed record.
    async fn truncate(&self, thread: &str, seq: u64) -> Result<(), StoreError>;
    /// Makes `base` (source [`Source::Base`], the thread's latest record holding the
    /// whole state there) the thread's only record: the records before it and its
    /// snapshot go, all or nothing. A thread whose latest record is no longer
    /// `base.seq` (it moved on meanwhile) is a conflict and stays as it was. Returns
    /// how many records went.
    async fn prune(&self, base: Checkpoint) -> Result<u64, StoreError>;
}

/// What a server keeps of its threads and runs, so that a restarted server knows what
/// it was doing: the host's role.
#[async_trait]
pub trait Catalog: Send + Sync {
    /// Creates or replaces a thread's catalog entry.
    async fn put_thread(&self, thread: &ThreadRecord) -> Result<(), StoreError>;
    async fn get_thread(&self, thread: &str) -> Result<Option<ThreadRecord>, StoreError>;
    /// Every thread of the catalog, oldest first.
    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError>;
    /// Removes everything of a thread: its records, its catalog entry, its runs and its
    /// crons.
    async fn delete_thread(&self, thread: &str) -> Result<(), StoreError>;
    /// The threads whose latest record finished or failed before `before_ms` (Unix
    /// milliseconds), for retention.
    async fn ended_before(&self, before_ms: u64) -> Result<Vec<String>, StoreError>;
    /// The threads whose latest record a graph version (`graph_hash`) wrote and that
    /// have not ended (paused, stopped, or cut off mid-run), by name: what an edit of
    /// that version may leave behind.
    async fn waiting_on(&self, graph_hash: &str) -> Result<Vec<String>, StoreError>;

    /// Creates or replaces a run.
    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    /// Creates a run unless its thread has a run pending or running (a `reject`
    /// multitask strategy: [`Refusal::Busy`]), or, when the run was `checked` against
    /// the thread's latest checkpoint then, unless the thread moved past it since
    /// ([`Refusal::Moved`]: another process's run went through meanwhile, and the run
    /// must be checked again); nothing is written then. A store several processes share
    /// makes the checks and the write one step. A store one process uses ignores
    /// `checked`: that process's own queue orders its runs.
    async fn put_run_unless_busy(
        &self,
        run: &RunRecord,
        checked: Option<Checked>,
    ) -> Result<Result<(), Refusal>, StoreError> {
        let _ = checked;
        let busy: Vec<String> = self
            .runs(&run.thread)
            .await?
            .into_iter()
            .filter(|r| r.status.in_flight())
            .map(|r| r.id)
            .collect();
        if !busy.is_empty() {
            return Ok(Err(Refusal::Busy(busy)));
        }
        self.put_run(run).await.map(Ok)
    }
    /// Writes a new run as [`Catalog::put_run_unless_busy`] does when `reject` (else it
    /// queues it behind the thread's runs in flight), and with `here` (a worker and its
    /// lease) claims it for that worker in the same step when its thread is idle, so
    /// that the process that took the request drives the run itself rather than wait
    /// for whichever process claims it: whether it did. A store whose runs are not
    /// shared ([`RunQueue::shares_runs`]) claims nothing.
    async fn put_run_here(
        &self,
        run: &RunRecord,
        checked: Option<Checked>,
        reject: bool,
        here: Option<(&str, u64)>,
    ) -> Result<Result<bool, Refusal>, StoreError> {
        let _ = here;
        if reject {
            return Ok(self
                .put_run_unless_busy(run, checked)
                .await?
                .map(|()| false));
        }
        self.put_run(run).await.map(|()| Ok(false))
    }
    async fn get_run(&self, run: &str) -> Result<Option<RunRecord>, StoreError>;
    /// The runs of a thread, oldest first.
    async fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError>;
    /// The runs of a thread that are pending or running, oldest first: what a new
    /// run's multitask strategy looks at (a thread's history of runs may be long).
    async fn runs_in_flight_of(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        let mut runs = self.runs(thread).await?;
        runs.retain(|r| r.status.in_flight());
        Ok(runs)
    }
    async fn delete_run(&self, run: &str) -> Result<(), StoreError>;
    /// Runs that were pending or running, oldest first: after a restart, the work a
    /// previous process left unfinished.
    async fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError>;
}

/// The thread's latest checkpoint when a new run was checked against it (none: the
/// thread had none): see [`Catalog::put_run_unless_busy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked(pub Option<u64>);

/// Why [`Catalog::put_run_unless_busy`] wrote nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The thread has runs pending or running: their ids.
    Busy(Vec<String>),
    /// The thread moved past the checkpoint the run was checked against.
    Moved,
}

/// Runs shared by several server processes (see `host/cluster.rs`): the host's other
/// role. A store only one process uses at a time keeps the defaults, and each process
/// drives its own runs.
#[async_trait]
pub trait RunQueue: Send + Sync {
    /// Whether several processes share the server's runs through this store: runs wait
    /// in it, any process claims them with a lease, and their events are kept in it so
    /// that any process can stream them.
    fn shares_runs(&self) -> bool {
        false
    }
    /// Claims for `worker`, until `lease_until_ms`, the oldest pending run of one of
    /// `graphs` whose thread has no run running and no older run pending, or else a
    /// running run whose lease ran out before `now_ms` (its worker is gone): the run,
    /// and whether it was taken over that way.
    async fn claim_run(
        &self,
        worker: &str,
        graphs: &[String],
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<Option<(RunRecord, bool)>, StoreError> {
        let _ = (worker, graphs, now_ms, lease_until_ms);
        Ok(None)
    }
    /// Extends `worker`'s leases of `runs` to `until_ms`: the runs it still holds, each
    /// with the cancel (`interrupt` or `rollback`) asked of it, if any.
    async fn renew_leases(
        &self,
        worker: &str,
        runs: &[String],
        until_ms: u64,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let _ = (worker, until_ms);
        Ok(runs.iter().map(|r| (r.clone(), None)).collect())
    }
    /// Gives back a run `worker` claimed, for a process to take later.
    async fn release_run(&self, run: &str, worker: &str) -> Result<(), StoreError> {
        let _ = (run, worker);
        Ok(())
    }
    /// Asks whoever drives `run` to cancel it (`interrupt` or `rollback`); a pending
    /// run is marked interrupted at once instead, and then this returns true.
    async fn cancel_run(&self, run: &str, action: &str) -> Result<bool, StoreError> {
        let _ = (run, action);
        Ok(false)
    }
    /// Keeps a run's events (JSON), numbered from `first`.
    async fn append_events(
        &self,
        run: &str,
        first: u64,
        events: &[String],
    ) -> Result<(), StoreError> {
        let _ = (run, first, events);
        Ok(())
    }
    /// A run's events from number `from` on.
    async fn events(&self, run: &str, from: u64) -> Result<Vec<String>, StoreError> {
        let _ = (run, from);
        Ok(Vec::new())
    }
    /// Waits up to `timeout` for word that a run was queued.
    async fn wait_for_runs(&self, timeout: std::time::Duration) {
        tokio::time::sleep(timeout).await;
    }
}

/// An llm node's cache (its `cache` key): kept beside the checkpoints so it lasts as
/// long as they do.
#[async_trait]
pub trait LlmCache: Send + Sync {
    /// The value cached under `key`, unless it expired before `now_ms` (Unix
    /// milliseconds).
    async fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError>;
    /// Caches `value` under `key` until `expires_ms`, replacing what was there.
    async fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError>;
}

/// A whole store, every role: what `--store` opens and a server holds. Each caller
/// takes the narrowest role it needs (`Arc<dyn Store>` coerces to any of them).
pub trait Store: Checkpoints + Catalog + RunQueue + LlmCache + Items + Crons + Assistants {}

impl<T: Checkpoints + Catalog + RunQueue + LlmCache + Items + Crons + Assistants + ?Sized> Store
    for T
{
}

/// What [`Checkpoints::fence`] found: the claim a tool call is made under, and for how
/// long it surely holds. The default: no claim that can lapse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fence {
    /// The claim's fencing token, higher for every later claim of any thread: a tool
    /// that keeps the highest it saw for a thread can refuse a call from a holder
    /// that was taken over, which no check made before the call can rule out.
    pub token: Option<i64>,
    /// The instant (this process's clock) until which the claim holds whatever
    /// happens: its lease, counted from before the database renewed it. A call not
    /// sent by then is not sent, and the claim is asked again.
    pub until: Option<std::time::Instant>,
}

/// A thread driven by this caller; releasing it (the run ended, paused, failed or was
/// cancelled) lets others drive the thread. Dropping it releases it too, without
/// waiting for a store that takes time to.
pub struct Claim {
    held: Option<Box<dyn Held>>,
}

/// What a claim holds: dropped or released with it.
#[async_trait]
pub(crate) trait Held: Send + Sync {
    /// Gives the thread up, returning once other callers can claim it.
    async fn release(self: Box<Self>) {}
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.held.is_some() {
            "Claim(held)"
        } else {
            "Claim(none)"
        })
    }
}

impl Claim {
    pub fn none() -> Self {
        Claim { held: None }
    }

    pub(crate) fn holding(what: impl Held + 'static) -> Self {
        Claim {
            held: Some(Box::new(what)),
        }
    }

    /// Gives the thread up and waits until another caller could claim it.
    pub async fn release(mut self) {
        if let Some(held) = self.held.take() {
            held.release().await;
        }
    }
}
