//! Interpreter throughput: time per step of `tests/fixtures/run/count.toml` (three
//! `set` nodes per count, a checkpoint after each), in memory and in SQLite, for short
//! and long runs. Checkpoints store each step's writes, not the state, so the time per
//! step should not grow with the length of the run. Then `page.toml`, which rewrites
//! a 64 KiB field on every step, in memory: the cost of a big `replace` write
//! (`cargo bench --bench run`).

use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use switchyard::run::{Outcome, Runner};
use switchyard::store::{MemoryStore, SqliteStore, Store};

fn main() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let graph = Arc::new(
        switchyard::load_graph(&root.join("tests/fixtures/run/count.toml")).expect("count.toml"),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir().join(format!("switchyard-bench-{}", std::process::id()));
    for goal in [1_000u64, 10_000] {
        for store in ["memory", "sqlite"] {
            let db = dir.join(format!("{store}-{goal}.db"));
            let _ = std::fs::remove_file(&db);
            let cp: Arc<dyn Store> = match store {
                "memory" => Arc::new(MemoryStore::new()),
                _ => Arc::new(SqliteStore::open(&db).expect("sqlite store")),
            };
            let runner = Runner::new(graph.clone(), cp);
            let start = Instant::now();
            let out = rt
                .block_on(runner.start("bench", json!({ "goal": goal })))
                .expect("run");
            let elapsed = start.elapsed();
            let Outcome::Finished { steps, .. } = out else {
                panic!("{out:?}")
            };
            println!(
                "count to {goal:>6} ({steps:>6} steps), {store:<6}: {:>8.1} ms, {:>6.2} us per step",
                elapsed.as_secs_f64() * 1000.0,
                elapsed.as_secs_f64() * 1e6 / steps as f64
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);

    let page = Arc::new(
        switchyard::load_graph(&root.join("tests/fixtures/run/page.toml")).expect("page.toml"),
    );
    let runner = Runner::new(page, Arc::new(MemoryStore::new()));
    let text = "x".repeat(64 * 1024);
    let start = Instant::now();
    let out = rt
        .block_on(runner.start("bench", json!({ "goal": 2_000, "page": text })))
        .expect("run");
    let elapsed = start.elapsed();
    let Outcome::Finished { steps, .. } = out else {
        panic!("{out:?}")
    };
    println!(
        "rewrite a 64 KiB field ({steps} steps), memory: {:>8.1} ms, {:>6.2} us per step",
        elapsed.as_secs_f64() * 1000.0,
        elapsed.as_secs_f64() * 1e6 / steps as f64
    );
}
