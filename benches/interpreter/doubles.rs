//! The model and the browser as in-process doubles, and what the workloads share:
//! graphs, stores, sizes, callgrind's marks.

use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard::graph::{Graph, Server};
use switchyard::llm::DeltaSink;
use switchyard::llm::reply_json;
use switchyard::llm::{LlmClient, LlmError, LlmReply, LlmRequest};
use switchyard::run::{Outcome, Runner};
use switchyard::store::SqliteOptions;
use switchyard::store::{SqliteStore, Store};
use switchyard::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};

#[path = "../shared/page.rs"]
mod page;
#[path = "../shared/serve.rs"]
mod serve;
use page::{observation, plan};

/// Answers every plan with the same action.
pub(crate) struct Planner;

#[async_trait::async_trait]
impl LlmClient for Planner {
    async fn complete(
        &self,
        _request: &LlmRequest,
        _deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        Ok(reply_json(plan()))
    }
}

/// A browser that returns the same snapshot every time and notes when it was asked.
pub(crate) struct Browser {
    snapshot: Json,
    /// Snapshots made before a run and handed out by it: where a run's time is taken,
    /// building a tool's answer is the tool's work, not the interpreter's (a real
    /// server builds it in its own process).
    made: Mutex<Vec<Json>>,
    /// When each snapshot was taken, and when each action ran, if kept.
    pub(crate) snapshots: Mutex<Vec<Instant>>,
    pub(crate) actions: Mutex<Vec<Instant>>,
    keep_times: bool,
    /// Its next action is to be marked for callgrind ([`mark_action`]).
    pub(crate) mark_next: std::sync::atomic::AtomicBool,
}

impl Browser {
    /// Makes the snapshots of `n` calls ahead.
    pub(crate) fn make(&self, n: usize) {
        let mut made = self.made.lock().unwrap();
        made.clear();
        made.extend((0..n).map(|_| self.snapshot.clone()));
    }

    pub(crate) fn new(keep_times: bool) -> Arc<Self> {
        Arc::new(Browser {
            snapshot: observation(),
            made: Mutex::new(Vec::new()),
            snapshots: Mutex::new(Vec::new()),
            actions: Mutex::new(Vec::new()),
            keep_times,
            mark_next: std::sync::atomic::AtomicBool::new(keep_times),
        })
    }
}

#[async_trait::async_trait]
impl ToolClient for Browser {
    async fn list_tools(&self, _server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        Ok(Vec::new())
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        let snapshot = request.tool == "browser_snapshot";
        if !snapshot
            && self.keep_times
            && self
                .mark_next
                .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            mark_action();
        }
        if self.keep_times {
            let list = if snapshot {
                &self.snapshots
            } else {
                &self.actions
            };
            list.lock().unwrap().push(Instant::now());
        }
        Ok(ToolReply {
            content: if snapshot {
                let made = self.made.lock().unwrap().pop();
                made.unwrap_or_else(|| self.snapshot.clone())
            } else {
                json!({ "ok": true })
            },
            is_error: false,
            ..Default::default()
        })
    }
}

pub(crate) fn graph(name: &str) -> Arc<Graph> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("benches/graphs").join(format!("{name}.toml"));
    Arc::new(switchyard::load_graph(&path).unwrap_or_else(|e| panic!("{name}: {e}")))
}

pub(crate) fn agent(store: Arc<dyn Store>, browser: Arc<Browser>) -> Runner {
    Runner::new(graph("agent_loop"), store)
        .with_llm(Arc::new(Planner))
        .with_tools(browser)
}

/// A fresh SQLite store in `dir`.
pub(crate) fn sqlite(dir: &Path, name: &str) -> (Arc<dyn Store>, PathBuf) {
    sqlite_with(dir, name, SqliteOptions::default())
}

pub(crate) fn sqlite_with(
    dir: &Path,
    name: &str,
    options: SqliteOptions,
) -> (Arc<dyn Store>, PathBuf) {
    let db = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    (
        Arc::new(SqliteStore::open_with(&db, options).expect("sqlite store")),
        db,
    )
}

/// The size of a SQLite file with its WAL folded in.
pub(crate) fn db_bytes(db: &Path) -> u64 {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    let pages: u64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("pages");
    let size: u64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page size");
    pages * size
}

/// Resident memory of this process, in bytes.
pub(crate) fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

pub(crate) fn steps_of(out: &Outcome) -> u64 {
    match out {
        Outcome::Finished { steps, .. } => *steps,
        other => panic!("{other:?}"),
    }
}

pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The runs of (c) without and with confirmations, apart for callgrind's
/// `--toggle-collect` (`benches/callgrind.sh c-memory`).
#[inline(never)]
pub(crate) fn count_plain<T>(f: impl FnOnce() -> T) -> T {
    f()
}

#[inline(never)]
pub(crate) fn count_confirming<T>(f: impl FnOnce() -> T) -> T {
    f()
}

/// Called as a timed resume begins, and as an action's tool is called: under
/// callgrind, `--zero-before` and `--dump-before` these count a resume's instructions
/// to its first node (`benches/callgrind.sh d-sqlite`).
#[inline(never)]
pub(crate) fn mark_resume() {
    // Bodies that differ: two identical functions may be folded into one symbol.
    std::hint::black_box(1u8);
}

#[inline(never)]
fn mark_action() {
    std::hint::black_box(2u8);
}

/// A new database on a throwaway Postgres cluster (`tests/servers/postgres.sh`, its
/// defaults: fsync and synchronous_commit on, a Unix socket), started on first use and
/// removed when the bench ends.
pub(crate) fn postgres_database() -> String {
    static CLUSTER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let admin = CLUSTER.get_or_init(serve::postgres_cluster);
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!(
        "bench{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    serve::postgres_database(admin, &name)
}
