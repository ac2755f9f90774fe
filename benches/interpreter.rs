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

use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard::graph::{Graph, Server};
use switchyard::llm::DeltaSink;
use switchyard::run::kinds::llm::reply_json;
use switchyard::run::{
    Checkpointer, LlmClient, LlmError, LlmReply, LlmRequest, MemoryStore, NoStore, Outcome, Runner,
    SqliteStore, ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest,
};
use switchyard::store::{Durability, PostgresStore, SqliteOptions};

/// The planner's answer: ~100 bytes of JSON.
fn plan() -> Json {
    json!({ "id": "e42", "kind": "click", "target": "Opening hours link", "reason": "the page lists them" })
}

/// A page snapshot: ~2 KB, 16 elements.
fn observation() -> Json {
    let elements: Vec<Json> = (0..16)
        .map(|i| {
            json!({
                "ref": format!("e{i}"),
                "role": if i % 3 == 0 { "link" } else { "button" },
                "name": format!("Element number {i} of the library page"),
                "enabled": true,
            })
        })
        .collect();
    json!({
        "url": "https://library.example.org/visit",
        "title": "Visit the City Library",
        "elements": elements,
    })
}

/// Answers every plan with the same action.
struct Planner;

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
struct Browser {
    snapshot: Json,
    /// Snapshots made before a run and handed out by it: where a run's time is taken,
    /// building a tool's answer is the tool's work, not the interpreter's (a real
    /// server builds it in its own process).
    made: Mutex<Vec<Json>>,
    /// When each snapshot was taken, and when each action ran, if kept.
    snapshots: Mutex<Vec<Instant>>,
    actions: Mutex<Vec<Instant>>,
    keep_times: bool,
    /// Its first action was marked for callgrind ([`mark_action`]).
    marked: std::sync::atomic::AtomicBool,
}

impl Browser {
    /// Makes the snapshots of `n` calls ahead.
    fn make(&self, n: usize) {
        let mut made = self.made.lock().unwrap();
        made.clear();
        made.extend((0..n).map(|_| self.snapshot.clone()));
    }

    fn new(keep_times: bool) -> Arc<Self> {
        Arc::new(Browser {
            snapshot: observation(),
            made: Mutex::new(Vec::new()),
            snapshots: Mutex::new(Vec::new()),
            actions: Mutex::new(Vec::new()),
            keep_times,
            marked: std::sync::atomic::AtomicBool::new(false),
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
            && !self.marked.swap(true, std::sync::atomic::Ordering::Relaxed)
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
        })
    }
}

fn graph(name: &str) -> Arc<Graph> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("benches/graphs").join(format!("{name}.toml"));
    Arc::new(switchyard::load_graph(&path).unwrap_or_else(|e| panic!("{name}: {e}")))
}

fn agent(store: Arc<dyn Checkpointer>, browser: Arc<Browser>) -> Runner {
    Runner::new(graph("agent_loop"), store)
        .with_llm(Arc::new(Planner))
        .with_tools(browser)
}

/// A fresh SQLite store in `dir`.
fn sqlite(dir: &Path, name: &str) -> (Arc<dyn Checkpointer>, PathBuf) {
    sqlite_with(dir, name, SqliteOptions::default())
}

fn sqlite_with(dir: &Path, name: &str, options: SqliteOptions) -> (Arc<dyn Checkpointer>, PathBuf) {
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
fn db_bytes(db: &Path) -> u64 {
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
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

fn steps_of(out: &Outcome) -> u64 {
    match out {
        Outcome::Finished { steps, .. } => *steps,
        other => panic!("{other:?}"),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Bench {
    rt: tokio::runtime::Runtime,
    dir: PathBuf,
    /// Counting instructions: a runner's store is not freed at the end of a workload,
    /// which would count its teardown per step (the times never include it).
    leak: bool,
}

impl Bench {
    fn block<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    /// Drops the runner of a finished workload, or leaks it when counting.
    fn done(&self, runner: Runner) {
        if self.leak {
            std::mem::forget(runner);
        }
    }

    /// (a): µs per step.
    fn chain(&self, runs: usize) -> f64 {
        let runner = Runner::new(graph("chain"), Arc::new(MemoryStore::new()));
        let start = Instant::now();
        let mut steps = 0;
        for i in 0..runs {
            steps += steps_of(
                &self
                    .block(runner.start(&format!("c{i}"), json!({})))
                    .expect("run"),
            );
        }
        let per_step = us(start.elapsed()) / steps as f64;
        self.done(runner);
        per_step
    }

    /// (f): 100 parallel `set` branches that meet at a join, in memory: µs per branch
    /// (a whole run, its fork and join included, over 100).
    fn fanout(&self, runs: usize) -> f64 {
        const BRANCHES: usize = 100;
        let mut text = String::from(
            "[graph]\nname = \"fanout\"\nentry = \"fork\"\n\n[state.count]\ntype = \"int\"\nreducer = \"add\"\n\n[nodes.fork]\nkind = \"set\"\nset = { count = \"0\" }\nnext = [",
        );
        let names: Vec<String> = (0..BRANCHES).map(|i| format!("\"b{i}\"")).collect();
        text.push_str(&names.join(", "));
        text.push_str("]\n\n");
        for i in 0..BRANCHES {
            text.push_str(&format!(
                "[nodes.b{i}]\nkind = \"set\"\nset = {{ count = \"1\" }}\nnext = \"join\"\n\n"
            ));
        }
        text.push_str(
            "[nodes.join]\nkind = \"finalize\"\noutcome = \"done\"\nresponse = \"{{ count }}\"\n",
        );
        let path = self.dir.join("fanout.toml");
        std::fs::write(&path, text).expect("fanout graph");
        let graph = Arc::new(switchyard::load_graph(&path).unwrap_or_else(|e| panic!("{e}")));
        let runner = Runner::new(graph, Arc::new(MemoryStore::new()));
        let start = Instant::now();
        for i in 0..runs {
            let out = self
                .block(runner.start(&format!("f{i}"), json!({})))
                .expect("run");
            assert_eq!(steps_of(&out), BRANCHES as u64 + 2, "{out:?}");
        }
        let per_branch = us(start.elapsed()) / (runs * BRANCHES) as f64;
        self.done(runner);
        per_branch
    }

    /// (b): µs per step, and for SQLite the bytes a run adds to the file.
    fn agent_loop(&self, runs: usize, store: &str) -> (f64, Option<u64>) {
        let (cp, db) = match store {
            "memory" => (Arc::new(MemoryStore::new()) as Arc<dyn Checkpointer>, None),
            "none" => (Arc::new(NoStore::new()) as Arc<dyn Checkpointer>, None),
            "postgres" => (
                Arc::new(PostgresStore::open(&postgres_database()).expect("postgres store"))
                    as Arc<dyn Checkpointer>,
                None,
            ),
            _ => {
                let options = SqliteOptions {
                    durability: if store.contains("full") {
                        Durability::Full
                    } else {
                        Durability::Normal
                    },
                    compress: store.contains("lz4"),
                };
                let (cp, db) = sqlite_with(&self.dir, "agent_loop", options);
                (cp, Some(db))
            }
        };
        let before = db.as_deref().map(db_bytes);
        let browser = Browser::new(false);
        let runner = agent(cp, browser.clone());
        let mut took = Duration::ZERO;
        let mut steps = 0;
        for i in 0..runs {
            // A run observes the page 50 times.
            browser.make(50);
            let start = Instant::now();
            let out = self
                .block(runner.start(&format!("b{i}"), json!({})))
                .expect("run");
            took += start.elapsed();
            steps += steps_of(&out);
        }
        let per_step = us(took) / steps as f64;
        self.done(runner);
        let bytes = db
            .as_deref()
            .map(|db| (db_bytes(db) - before.unwrap_or(0)) / runs as u64);
        (per_step, bytes)
    }

    /// (c): `runs` runs of 55 loops confirming every 5th action (11 pauses a run),
    /// each answered at once, against the same runs without confirmations: what a
    /// pause and its resume add, per pause; and the time from the resume call to the
    /// action it approved (the first node) at the first and at the tenth pause, which
    /// should be the same.
    fn round_trips(&self, runs: usize, store: &str) -> (Duration, Duration, Duration) {
        let open = |name: &str| -> Arc<dyn Checkpointer> {
            match store {
                "memory" => Arc::new(MemoryStore::new()),
                _ => sqlite(&self.dir, name).0,
            }
        };
        // Both keep the times of their calls, so that both pay for it.
        let plain = agent(open("plain"), Browser::new(true));
        let browser = Browser::new(true);
        let confirming = agent(open("confirming"), browser.clone());
        let (mut without, mut with) = (Duration::ZERO, Duration::ZERO);
        let mut segments = [Duration::ZERO; 11];
        for i in 0..runs {
            // Interleaved, so that both see the same machine.
            let start = Instant::now();
            count_plain(|| {
                self.block(plain.start(&format!("p{i}"), json!({ "loops": 55 })))
                    .expect("plain run")
            });
            without += start.elapsed();
            let thread = format!("c{i}");
            let start = Instant::now();
            let pause = count_confirming(|| {
                let mut out = self
                    .block(confirming.start(&thread, json!({ "confirm_every": 5, "loops": 55 })))
                    .expect("start");
                let mut pause = 0;
                while matches!(out, Outcome::Interrupted { .. }) {
                    let seen = browser.actions.lock().unwrap().len();
                    let segment = Instant::now();
                    out = self
                        .block(confirming.resume(
                            &thread,
                            Some(json!({ "confirmed": true })),
                            false,
                        ))
                        .expect("resume");
                    segments[pause] += browser.actions.lock().unwrap()[seen] - segment;
                    pause += 1;
                }
                pause
            });
            with += start.elapsed();
            assert_eq!(pause, 11);
        }
        let per_pause = with.saturating_sub(without) / (11 * runs as u32);
        (
            per_pause,
            segments[0] / runs as u32,
            segments[9] / runs as u32,
        )
    }

    /// (c), against history length: `benches/graphs/long_history.toml` threads that
    /// pause after `records` records (their state the same size), each resumed to its
    /// first node by a runner that has not seen it; the best of `threads`. With
    /// `reopened`, through a store opened anew, as another process would.
    fn resume_after(
        &self,
        records: usize,
        threads: usize,
        store: &str,
        reopened: bool,
    ) -> Duration {
        let (cp, db) = match store {
            "memory" => (Arc::new(MemoryStore::new()) as Arc<dyn Checkpointer>, None),
            _ => {
                let name = format!("history{records}-{reopened}");
                let (cp, db) = sqlite(&self.dir, &name);
                (cp, Some(db))
            }
        };
        // Loaded once, as a host does: each resume's runner is new.
        let loaded = graph("long_history");
        let counter = |cp: Arc<dyn Checkpointer>, browser: Arc<Browser>| {
            Runner::new(loaded.clone(), cp).with_tools(browser)
        };
        let runner = counter(cp.clone(), Browser::new(false));
        // The input record, one per count, the interrupt's.
        let input = json!({ "limit": records - 2 });
        for t in 0..threads {
            let out = self
                .block(runner.start(&format!("h{t}"), input.clone()))
                .expect("start");
            assert!(matches!(out, Outcome::Interrupted { .. }), "{out:?}");
        }
        let cp = match (reopened, db) {
            (true, Some(db)) => {
                Arc::new(SqliteStore::open(&db).expect("reopen")) as Arc<dyn Checkpointer>
            }
            _ => cp,
        };
        let mut best = Duration::MAX;
        for t in 0..threads {
            let browser = Browser::new(true);
            let runner = counter(cp.clone(), browser.clone());
            let start = Instant::now();
            self.block(runner.resume(&format!("h{t}"), Some(json!("go")), false))
                .expect("resume");
            let first = browser.actions.lock().unwrap()[0];
            best = best.min(first - start);
        }
        best
    }

    /// (d): starts `threads` threads that pause at their first interrupt (after five
    /// loops); bytes per thread (RSS for memory, the file for SQLite), then the time to
    /// resume one to its first node (the action the confirmation approved), the best
    /// of 20, each in a runner made for it: on the graph loaded once, as a host
    /// (`switchyard serve`) resumes a thread; and with the graph file loaded and
    /// checked just before, as a new process would, which leaves the processor's
    /// caches cold.
    fn paused(&self, threads: usize, store: &str) -> (f64, Duration, Duration) {
        let (cp, db) = match store {
            "memory" => (Arc::new(MemoryStore::new()) as Arc<dyn Checkpointer>, None),
            _ => {
                let (cp, db) = sqlite(&self.dir, "paused");
                (cp, Some(db))
            }
        };
        let runner = agent(cp.clone(), Browser::new(false));
        let input = json!({ "confirm_every": 5 });
        // One first, so what every process has anyway (the graph, the runtime) is not
        // counted per thread.
        self.block(runner.start("warm", input.clone()))
            .expect("warm");
        let rss_before = rss();
        let bytes_before = db.as_deref().map(db_bytes);
        for t in 0..threads {
            let out = self
                .block(runner.start(&format!("d{t}"), input.clone()))
                .expect("start");
            assert!(matches!(out, Outcome::Interrupted { .. }), "{out:?}");
        }
        let per_thread = match &db {
            None => (rss() - rss_before) as f64 / threads as f64,
            Some(db) => (db_bytes(db) - bytes_before.unwrap_or(0)) as f64 / threads as f64,
        };
        drop(runner);
        let loaded = graph("agent_loop");
        let mut best = [Duration::MAX; 2];
        for t in 0..40 {
            let browser = Browser::new(true);
            let runner = if t < 20 {
                Runner::new(loaded.clone(), cp.clone())
                    .with_llm(Arc::new(Planner))
                    .with_tools(browser.clone())
            } else {
                agent(cp.clone(), browser.clone())
            };
            mark_resume();
            let start = Instant::now();
            self.block(runner.resume(&format!("d{t}"), Some(json!({ "confirmed": true })), false))
                .expect("resume");
            let first = browser.actions.lock().unwrap()[0];
            best[t / 20] = best[t / 20].min(first - start);
        }
        (per_thread, best[0], best[1])
    }

    /// (e): one thread of `loops` loops; the mean loop time of the first and the last
    /// 100 loops.
    fn long_thread(&self, loops: usize, store: &str) -> (Duration, Duration) {
        let cp = match store {
            "memory" => Arc::new(MemoryStore::new()) as Arc<dyn Checkpointer>,
            _ => sqlite(&self.dir, "long").0,
        };
        let browser = Browser::new(true);
        let runner = agent(cp, browser.clone());
        self.block(runner.start("e", json!({ "loops": loops })))
            .expect("run");
        let times = browser.snapshots.lock().unwrap().clone();
        assert_eq!(times.len(), loops);
        // (A run of 101 loops or fewer only counts instructions.)
        let mean = |from: usize| match times.get(from + 100) {
            Some(end) => (*end - times[from]) / 100,
            None => Duration::ZERO,
        };
        (mean(0), mean(loops.saturating_sub(101)))
    }
}

/// The runs of (c) without and with confirmations, apart for callgrind's
/// `--toggle-collect` (`benches/callgrind.sh c-memory`).
#[inline(never)]
fn count_plain<T>(f: impl FnOnce() -> T) -> T {
    f()
}

#[inline(never)]
fn count_confirming<T>(f: impl FnOnce() -> T) -> T {
    f()
}

/// Called as a timed resume begins, and as an action's tool is called: under
/// callgrind, `--zero-before` and `--dump-before` these count a resume's instructions
/// to its first node (`benches/callgrind.sh d-sqlite`).
#[inline(never)]
fn mark_resume() {
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
fn postgres_database() -> String {
    static CLUSTER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let admin = CLUSTER.get_or_init(|| {
        let out = std::process::Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/servers/postgres.sh"
            ))
            .arg(std::process::id().to_string())
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "the bench cluster did not start");
        String::from_utf8(out.stdout)
            .expect("URL")
            .trim()
            .to_string()
    });
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!(
        "bench{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    postgres::Client::connect(admin, postgres::NoTls)
        .expect("the bench cluster")
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create database");
    admin.replacen("/postgres?", &format!("/{name}?"), 1)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let bench = Bench {
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_time()
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
            bench.round_trips(runs / 10, store);
            let (trip, first, tenth) = bench.round_trips(runs, store);
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
                "(e) 1,000 loops, {store:<6}: first 100 {:>7.1} us per loop, last 100 {:>7.1} us per loop, ratio {:.2}   (target <= 1.1)",
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

/// Runs `n` units of one workload and nothing else, for instruction counting.
fn callgrind(bench: &Bench, args: &[String]) {
    let n: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(10);
    match args.first().map(String::as_str) {
        Some("a") => {
            bench.chain(n);
        }
        Some("b-memory") => {
            bench.agent_loop(n, "memory");
        }
        Some("b-sqlite") => {
            bench.agent_loop(n, "sqlite");
        }
        Some("b-none") => {
            bench.agent_loop(n, "none");
        }
        Some("c-memory") => {
            bench.round_trips(n, "memory");
        }
        Some("d-memory") => {
            bench.paused(n, "memory");
        }
        Some("d-sqlite") => {
            bench.paused(n, "sqlite");
        }
        Some("c-sqlite") => {
            bench.round_trips(n, "sqlite");
        }
        Some("f") => {
            bench.fanout(n);
        }
        Some("e-memory") => {
            bench.long_thread(n, "memory");
        }
        Some("e-sqlite") => {
            bench.long_thread(n, "sqlite");
        }
        other => panic!("callgrind takes a, b-memory, b-sqlite or c-memory, not {other:?}"),
    }
}
