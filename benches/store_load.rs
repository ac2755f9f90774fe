//! Whether a store holds the server up (`cargo bench --bench store_load`; one store:
//! `-- memory`, `-- sqlite` or `-- postgres`). For each store, `switchyard serve` (the
//! release binary, a child process) runs the 3-node graph
//! (`tests/fixtures/serve/three.toml`) for 8 and then 64 clients at once, each on a
//! thread of its own (`POST /threads/{id}/runs/wait` again and again: every run writes
//! its checkpoints and catalog rows); meanwhile one more client asks `GET /ok` every
//! 5 ms, which touches no store: its latency is what a store that blocks the runtime's
//! threads shows (a health check, a page, a stream of another run, all wait behind it).
//!
//! The load generator is this process (reqwest on a runtime of two threads, over
//! loopback), not Python: it spends ~30 us of CPU a request, well under what the server
//! spends on a run. Postgres is a throwaway cluster (`tests/servers/postgres.sh`:
//! fsync and synchronous_commit on, a Unix socket).

#[path = "shared/serve.rs"]
mod serve;

use serde_json::json;
use std::time::{Duration, Instant};

/// How long each measurement runs.
const SECONDS: u64 = 5;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        if wanted("memory") {
            measure("memory", "memory").await;
        }
        if wanted("sqlite") {
            let store = format!("sqlite:{}", dir.path().join("load.db").display());
            measure("sqlite", &store).await;
        }
        if wanted("postgres") {
            measure(
                "postgres",
                &serve::postgres_database(&serve::postgres_cluster(), "load"),
            )
            .await;
        }
    });
}

async fn measure(name: &str, store: &str) {
    let (url, _child) = serve::start([
        "tests/fixtures/serve/three.toml",
        "--store",
        store,
        "--max-runs",
        "128",
    ])
    .await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(128)
        .build()
        .unwrap();
    for clients in [8, 64] {
        let until = Instant::now() + Duration::from_secs(SECONDS);
        let mut tasks = Vec::new();
        for i in 0..clients {
            let (c, base) = (c.clone(), url.clone());
            let thread = format!("{name}-{clients}-{i}");
            tasks.push(tokio::spawn(async move {
                let made = c
                    .post(format!("{base}/threads"))
                    .json(&json!({ "thread_id": thread }))
                    .send()
                    .await
                    .unwrap();
                assert!(made.status().is_success(), "{}", made.text().await.unwrap());
                let url = format!("{base}/threads/{thread}/runs/wait");
                let body = json!({ "assistant_id": "three", "input": { "input": "x" } });
                let mut runs = 0u64;
                while Instant::now() < until {
                    let r = c.post(&url).json(&body).send().await.unwrap();
                    let status = r.status();
                    let text = r.text().await.unwrap();
                    assert!(status.is_success(), "{status}: {text}");
                    runs += 1;
                }
                runs
            }));
        }
        // The health check, beside the runs.
        let probe = {
            let (c, ok) = (c.clone(), format!("{url}/ok"));
            tokio::spawn(async move {
                let mut took = Vec::new();
                let mut tick = tokio::time::interval(Duration::from_millis(5));
                while Instant::now() < until {
                    tick.tick().await;
                    let start = Instant::now();
                    let r = c.get(&ok).send().await.unwrap();
                    r.bytes().await.unwrap();
                    took.push(start.elapsed());
                }
                took.sort();
                took
            })
        };
        let mut runs = 0;
        for t in tasks {
            runs += t.await.unwrap();
        }
        let took = probe.await.unwrap();
        let at = |p: f64| took[((took.len() - 1) as f64 * p).round() as usize];
        println!(
            "{name:<8} {clients:>2} clients: {:>6.0} runs/s   GET /ok p50 {:>7.2} ms, p99 {:>7.2} ms ({} probes)",
            runs as f64 / SECONDS as f64,
            at(0.5).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3,
            took.len()
        );
    }
}
