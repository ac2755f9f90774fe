//! The interpreter's five workloads (issue 11), with in-process doubles for the model
//! and the tools so they measure the interpreter alone (`cargo bench --bench
//! interpreter`; one workload: `cargo bench --bench interpreter -- b`):
//!
//! - (a) `benches/graphs/chain.toml`: ten `set` nodes, a new thread per run.
//! - (b) `benches/graphs/agent_loop.toml`: seed 000's loop, 50 loops, 302 steps a run,
//!   in memory and in SQLite; SQLite bytes per run.
//! - (c) the same with a confirmation every 5th loop, answered at once: what a pause
//!   and its resume add, and the resume calls at the first and the tenth pause.
//! - (d) 10,000 threads paused at their first interrupt: memory per thread (RSS), SQLite
//!   bytes per thread, and resuming one of them to its first node.
//! - (e) one thread of 1,000 loops: the last 100 loops against the first 100.
//!
//! `callgrind <workload> <n>` runs only `n` units of one workload, for
//! `benches/callgrind.sh`, which counts instructions per step.

mod doubles;
mod workloads;

use doubles::us;
use std::time::Duration;
use workloads::Bench;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let bench = Bench {
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_time()
            // The Postgres store (g) is tokio-postgres: it needs the IO driver.
            .enable_io()
            .build()
            .expect("runtime"),
        dir: std::env::temp_dir().join(format!("switchyard-bench-{}", std::process::id())),
        leak: args.first().map(String::as_str) == Some("callgrind"),
    };
    std::fs::create_dir_all(&bench.dir).expect("bench dir");
    if args.first().map(String::as_str) == Some("d-memory-apart") {
        let (bytes, resume, cold) = bench.paused(10_000, "memory");
        println!("{bytes} {} {}", resume.as_nanos(), cold.as_nanos());
        return;
    }
    if args.first().map(String::as_str) == Some("callgrind") {
        callgrind(&bench, &args[1..]);
        let _ = std::fs::remove_dir_all(&bench.dir);
        return;
    }
    let only = args.first().cloned();
    let run = |w: &str| only.as_deref().is_none_or(|o| o == w);

    if run("a") {
        bench.chain(1_000);
        println!(
            "(a) chain, memory:                 {:>7.2} us per step   (target <= 1)",
            bench.chain(10_000)
        );
    }
    if run("b") {
        bench.agent_loop(20, "memory");
        let (mem, _) = bench.agent_loop(300, "memory");
        println!("(b) agent loop, memory:            {mem:>7.2} us per step   (target <= 3)");
        let (sql, bytes) = bench.agent_loop(30, "sqlite");
        println!("(b) agent loop, SQLite:            {sql:>7.2} us per step   (target <= 25)");
        println!(
            "(b) agent loop, SQLite bytes:      {:>7.1} KB per run     (target <= 100)",
            bytes.unwrap_or(0) as f64 / 1024.0
        );
        let (none, _) = bench.agent_loop(300, "none");
        println!("(b) agent loop, --store none:      {none:>7.2} us per step");
        let (full, _) = bench.agent_loop(10, "sqlite-full");
        println!(
            "(b) agent loop, SQLite full:       {full:>7.2} us per step   (durability = full)"
        );
        let (lz4, bytes) = bench.agent_loop(30, "sqlite-lz4");
        println!(
            "(b) agent loop, SQLite compressed: {lz4:>7.2} us per step, {:>7.1} KB per run",
            bytes.unwrap_or(0) as f64 / 1024.0
        );
    }
    if run("c") {
        for (store, runs) in [("memory", 300), ("sqlite", 30)] {
            bench.round_trips(runs / 10, store, None);
            let (trip, first, tenth) = bench.round_trips(runs, store, None);
            println!(
                "(c) pause + resume, {store:<6}: {:>7.1} us per pause (target <= 20 in memory); resume to the first node: {:>7.1} us at the 1st pause, {:>7.1} us at the 10th (target: the same)",
                us(trip),
                us(first),
                us(tenth),
            );
        }
        for (store, reopened) in [("memory", false), ("sqlite", false), ("sqlite", true)] {
            let short = bench.resume_after(32, 20, store, reopened);
            let long = bench.resume_after(6_000, 20, store, reopened);
            let how = if reopened { ", store opened anew" } else { "" };
            println!(
                "(c) resume to the first node, {store:<6}{how}: {:>7.1} us after 32 records, {:>7.1} us after 6,000 (target: the same)",
                us(short),
                us(long),
            );
        }
    }
    if run("d") {
        for (store, target) in [("memory", 8), ("sqlite", 10)] {
            let (bytes, resume, cold) = if store == "memory" {
                paused_in_memory_apart()
            } else {
                bench.paused(10_000, store)
            };
            println!(
                "(d) 10,000 paused threads, {store:<6}: {:>7.1} KB per thread (target <= {target}); resume to the first node {:>7.1} us (target <= 50), {:>7.1} us with the graph file loaded just before",
                bytes / 1024.0,
                us(resume),
                us(cold)
            );
        }
    }
    if run("e") {
        for store in ["memory", "sqlite"] {
            let (first, last) = bench.long_thread(1_000, store);
            println!(
                "(e) 1,000 loops, {store:<6}: median loop of the first 100 {:>7.1} us, of the last 100 {:>7.1} us, ratio {:.2}   (target <= 1.1)",
                us(first),
                us(last),
                last.as_secs_f64() / first.as_secs_f64()
            );
        }
    }
    if run("g") {
        bench.agent_loop(3, "postgres");
        let (pg, _) = bench.agent_loop(10, "postgres");
        println!(
            "(g) agent loop, Postgres:          {pg:>7.2} us per durable step (synchronous_commit on, Unix socket; target <= 1000)"
        );
    }
    if run("f") {
        bench.fanout(20);
        println!(
            "(f) fan-out, memory:               {:>7.2} us per branch (100 parallel set branches; target <= 5)",
            bench.fanout(300)
        );
    }
    if std::env::var_os("SWITCHYARD_BENCH_KEEP").is_some() {
        eprintln!("stores kept in {}", bench.dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&bench.dir);
    }
}

/// (d) in memory, in a process of its own: memory the workloads before it freed would
/// be reused by this one, and its RSS would grow by less than it holds.
fn paused_in_memory_apart() -> (f64, Duration, Duration) {
    let out = std::process::Command::new(std::env::current_exe().expect("bench binary"))
        .arg("d-memory-apart")
        .output()
        .expect("bench child");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    let bytes: f64 = parts.next().and_then(|b| b.parse().ok()).expect("bytes");
    let mut nanos = || -> Duration {
        Duration::from_nanos(parts.next().and_then(|n| n.parse().ok()).expect("nanos"))
    };
    let (resume, cold) = (nanos(), nanos());
    (bytes, resume, cold)
}

/// Runs `n` units of one workload and nothing else, for instruction counting: `a`,
/// `f`, or a workload and its store (`b-memory`, `d-sqlite`; `c1-` and `c10-` count the
/// resume at the 1st or the 10th pause of (c)).
fn callgrind(bench: &Bench, args: &[String]) {
    let n: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(10);
    let workload = args.first().map_or("", String::as_str);
    let (kind, store) = workload.split_once('-').unwrap_or((workload, ""));
    match (kind, store) {
        ("a", "") => {
            let _ = bench.chain(n);
        }
        ("f", "") => {
            let _ = bench.fanout(n);
        }
        ("b", "memory" | "sqlite" | "none") => {
            let _ = bench.agent_loop(n, store);
        }
        ("c", "memory" | "sqlite") => {
            let _ = bench.round_trips(n, store, None);
        }
        ("c1" | "c10", "memory" | "sqlite") => {
            let pause: usize = kind[1..].parse().expect("pause");
            let _ = bench.round_trips(n, store, Some(pause - 1));
        }
        ("d", "memory" | "sqlite") => {
            let _ = bench.paused(n, store);
        }
        ("e", "memory" | "sqlite") => {
            let _ = bench.long_thread(n, store);
        }
        _ => panic!(
            "callgrind takes a, f, b-memory, b-sqlite, b-none, or c, c1, c10, d, e with -memory or -sqlite, not {workload:?}"
        ),
    }
}
