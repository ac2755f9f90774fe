//! A cron tick with 10,000 crons scheduled, on each store (`cargo bench --bench crons`;
//! one store: `-- memory`, `-- sqlite` or `-- postgres`): what the scheduler of
//! `switchyard serve` does every second (`Host::take_due_crons`), timed one tick at a
//! time and reported as the median and the 99th percentile:
//!
//! - a quiet tick: none of the 10,000 is due (every server does this every second);
//! - a busy tick: 100 are due, each read, its next occurrence computed from its
//!   schedule and time zone, and taken (a conditional write each).
//!
//! Making the runs of the occurrences taken is what `POST /runs` does, measured by the
//! server benches. SQLite is a file in a temporary directory; Postgres a throwaway
//! cluster (`tests/servers/postgres.sh`: fsync and synchronous_commit on, a Unix
//! socket).

#[path = "shared/serve.rs"]
mod serve;

use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard::host::{Graphs, Host, HostOptions, LlmSource, RunRules};
use switchyard::store::{Cron, MemoryStore, PostgresStore, SqliteStore, Store};

const CRONS: usize = 10_000;
const DUE: usize = 100;
const ROUNDS: usize = 200;

fn main() {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    // As the server runs: two worker threads (SQLite's calls leave the runtime's).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    if wanted("memory") {
        rt.block_on(measure("memory", Arc::new(MemoryStore::new()), dir.path()));
    }
    if wanted("sqlite") {
        let store = SqliteStore::open(&dir.path().join("crons.db")).unwrap();
        rt.block_on(measure("sqlite", Arc::new(store), dir.path()));
    }
    if wanted("postgres") {
        let db = serve::postgres_database(&serve::postgres_cluster(), "crons");
        let store = PostgresStore::open(&db).unwrap();
        rt.block_on(measure("postgres", Arc::new(store), dir.path()));
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A cron as `POST /runs/crons` makes it, its next occurrence at `next_ms`.
fn cron(i: usize, next_ms: u64) -> Cron {
    let zones = ["America/New_York", "Europe/Berlin", "Asia/Kolkata"];
    Cron {
        id: format!("cron-{i:05}"),
        assistant: "three".into(),
        thread: None,
        body: json!({
            "schedule": "*/5 * * * *",
            "timezone": zones[i % zones.len()],
            "end_time": null,
            "end_ms": null,
            "user_id": "",
            "metadata": {"i": i},
            "on_run_completed": "delete",
            "payload": {"assistant_id": "three", "input": {"input": "x"}},
        })
        .as_object()
        .unwrap()
        .clone(),
        enabled: true,
        next_ms: Some(next_ms),
        created_ms: 1,
        updated_ms: 1,
    }
}

async fn measure(name: &str, store: Arc<dyn Store>, dir: &std::path::Path) {
    let host = Host::new(
        Graphs::load(Vec::new()),
        HostOptions {
            store: store.clone(),
            index: None,
            blob_dir: dir.join("blobs"),
            llm: LlmSource::live(None).unwrap(),
            max_runs: 8,
            mcp_idle: Duration::from_secs(60),
            max_mcp_servers: 8,
            log_retention: Duration::from_secs(60),
            thread_ttl: None,
            run_lease: Duration::from_secs(30),
            llm_content: false,
            tracer: None,
            runs: RunRules::LangGraph,
        },
    );
    let later = now_ms() + 3_600_000;
    for i in 0..CRONS {
        store.put_cron(&cron(i, later)).await.unwrap();
    }
    let mut quiet = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let taken = host.take_due_crons(now_ms(), DUE).await.unwrap();
        quiet.push(start.elapsed());
        assert!(taken.is_empty());
    }
    report(name, "quiet tick (0 of 10,000 due)", quiet);
    let mut busy = Vec::with_capacity(ROUNDS / 4);
    for round in 0..ROUNDS / 4 {
        // The same 100 made due again, outside the timing.
        let due_at = now_ms() - 1_000;
        for i in 0..DUE {
            store
                .put_cron(&cron(round * 7 % (CRONS - DUE) + i, due_at))
                .await
                .unwrap();
        }
        let start = Instant::now();
        let taken = host.take_due_crons(now_ms(), DUE).await.unwrap();
        busy.push(start.elapsed());
        assert_eq!(taken.len(), DUE);
    }
    report(name, "busy tick (100 of 10,000 due, taken)", busy);
}

fn report(store: &str, what: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!(
        "{store:<8} {what:<40} p50 {:>9.1} us   p99 {:>9.1} us",
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6
    );
}
