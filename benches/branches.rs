//! Branching history: a thread with 1,000 branches against a linear thread of the same
//! length (4,000 checkpoints each) and the same state at its head (2,000 messages), in
//! memory and in SQLite. Both are 1,000 chat turns (3,000 checkpoints); then the
//! branched one regenerates 1,000 answers, each from another turn's input (a branch
//! each, 1 checkpoint), and the linear one takes 1,000 empty updates. Measured on both:
//! reading the state a resume
//! starts from, a new turn (a whole run), and listing the history (the 10 newest
//! checkpoints with their states, as a client's first page, and all of them). The
//! target: the branched thread within 10 % of the linear one (`cargo bench --bench
//! branches`).

use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard::run::{Go, Runner};
use switchyard::store::{MemoryStore, SqliteStore, Store};

fn turn(i: usize) -> serde_json::Value {
    json!({ "messages": [{ "role": "user", "content": format!("turn {i}") }] })
}

/// The medians of `n` timings of `f(0)` (the linear thread) and `f(1)` (the branched
/// one), taken in turn, so that the machine's load weighs on both alike.
fn paired(n: usize, mut f: impl FnMut(usize)) -> [Duration; 2] {
    let mut times = [Vec::with_capacity(n), Vec::with_capacity(n)];
    for _ in 0..n {
        for (k, t) in times.iter_mut().enumerate() {
            let start = Instant::now();
            f(k);
            t.push(start.elapsed());
        }
    }
    times.map(|mut t| {
        t.sort();
        t[n / 2]
    })
}

fn main() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let graph = Arc::new(
        switchyard::load_graph(&root.join("benches/graphs/chat_turns.toml"))
            .expect("chat_turns.toml"),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    for store in ["memory", "sqlite"] {
        let mut built = Vec::new();
        for shape in ["linear", "branched"] {
            let cp: Arc<dyn Store> = match store {
                "memory" => Arc::new(MemoryStore::new()),
                _ => Arc::new(
                    SqliteStore::open(&dir.path().join(format!("{shape}.db"))).expect("sqlite"),
                ),
            };
            let runner = Runner::new(graph.clone(), cp);
            for i in 0..1_000 {
                rt.block_on(runner.run("t", Go::Start(turn(i))))
                    .expect("turn");
            }
            if shape == "linear" {
                for _ in 0..1_000 {
                    rt.block_on(runner.threads().update("t", json!({}), None))
                        .expect("update");
                }
            }
            if shape == "branched" {
                // Each turn is 3 checkpoints, its input's the second: regenerating the
                // answer of turn k goes on from checkpoint 3k + 1.
                for k in 0..1_000u64 {
                    let go = Go::From {
                        at: 3 * k + 1,
                        go: Box::new(Go::resume(None)),
                    };
                    rt.block_on(runner.run("t", go)).expect("regenerate");
                }
            }
            let records = rt
                .block_on(runner.threads().history("t"))
                .expect("history")
                .len();
            assert_eq!(records, 4_000, "{shape}");
            built.push(runner);
        }
        let resume = paired(51, |k| {
            rt.block_on(built[k].threads().state("t", None))
                .expect("state");
        });
        let mut i = 0;
        let run = paired(21, |k| {
            i += 1;
            rt.block_on(built[k].run("t", Go::Start(turn(100_000 + i))))
                .expect("turn");
        });
        let page = paired(11, |k| {
            let states = rt
                .block_on(built[k].threads().states("t", None, 10))
                .expect("states");
            assert_eq!(states.len(), 10);
        });
        let all = paired(5, |k| {
            rt.block_on(built[k].threads().states("t", None, usize::MAX))
                .expect("states");
        });
        for (k, shape) in ["linear", "branched"].into_iter().enumerate() {
            println!(
                "{store:<6} {shape:<8} (4000 checkpoints): resume state {:>8.1} us, a turn {:>8.1} us, history 10 {:>7.2} ms, history all {:>7.2} ms",
                resume[k].as_secs_f64() * 1e6,
                run[k].as_secs_f64() * 1e6,
                page[k].as_secs_f64() * 1e3,
                all[k].as_secs_f64() * 1e3,
            );
        }
        let ratio = |m: [Duration; 2]| m[1].as_secs_f64() / m[0].as_secs_f64();
        println!(
            "{store:<6} branched / linear: resume state {:.2}, a turn {:.2}, history 10 {:.2}, history all {:.2} (target: at most 1.10)",
            ratio(resume),
            ratio(run),
            ratio(page),
            ratio(all)
        );
    }
}
