//! The workloads, each timed by itself.

use crate::doubles::{
    Browser, Planner, agent, count_confirming, count_plain, db_bytes, graph, mark_resume,
    postgres_database, rss, sqlite, sqlite_with, steps_of, us,
};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use switchyard::run::{Outcome, Runner};
use switchyard::store::{Durability, PostgresStore, SqliteOptions};
use switchyard::store::{MemoryStore, NoStore, SqliteStore, Store};

pub(crate) struct Bench {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) dir: PathBuf,
    /// Counting instructions: a runner's store is not freed at the end of a workload,
    /// which would count its teardown per step (the times never include it).
    pub(crate) leak: bool,
}

impl Bench {
    pub(crate) fn block<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    /// Drops the runner of a finished workload, or leaks it when counting.
    pub(crate) fn done(&self, runner: Runner) {
        if self.leak {
            std::mem::forget(runner);
        }
    }

    /// (a): µs per step.
    pub(crate) fn chain(&self, runs: usize) -> f64 {
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
    pub(crate) fn fanout(&self, runs: usize) -> f64 {
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
    pub(crate) fn agent_loop(&self, runs: usize, store: &str) -> (f64, Option<u64>) {
        let (cp, db) = match store {
            "memory" => (Arc::new(MemoryStore::new()) as Arc<dyn Store>, None),
            "none" => (Arc::new(NoStore::new()) as Arc<dyn Store>, None),
            "postgres" => (
                Arc::new(PostgresStore::open(&postgres_database()).expect("postgres store"))
                    as Arc<dyn Store>,
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
    /// should be the same. Under callgrind, the resume at pause `mark_at` (from 0) is
    /// counted to its action ([`mark_resume`]).
    pub(crate) fn round_trips(
        &self,
        runs: usize,
        store: &str,
        mark_at: Option<usize>,
    ) -> (Duration, Duration, Duration) {
        let open = |name: &str| -> Arc<dyn Store> {
            match store {
                "memory" => Arc::new(MemoryStore::new()),
                _ => sqlite(&self.dir, name).0,
            }
        };
        // Both keep the times of their calls, so that both pay for it.
        let plain_browser = Browser::new(true);
        let plain = agent(open("plain"), plain_browser.clone());
        let browser = Browser::new(true);
        let confirming = agent(open("confirming"), browser.clone());
        for b in [&plain_browser, &browser] {
            b.mark_next.store(false, Relaxed);
        }
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
                    if mark_at == Some(pause) {
                        browser.mark_next.store(true, Relaxed);
                        mark_resume();
                    }
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
    pub(crate) fn resume_after(
        &self,
        records: usize,
        threads: usize,
        store: &str,
        reopened: bool,
    ) -> Duration {
        let (cp, db) = match store {
            "memory" => (Arc::new(MemoryStore::new()) as Arc<dyn Store>, None),
            _ => {
                let name = format!("history{records}-{reopened}");
                let (cp, db) = sqlite(&self.dir, &name);
                (cp, Some(db))
            }
        };
        // Loaded once, as a host does: each resume's runner is new.
        let loaded = graph("long_history");
        let counter = |cp: Arc<dyn Store>, browser: Arc<Browser>| {
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
            (true, Some(db)) => Arc::new(SqliteStore::open(&db).expect("reopen")) as Arc<dyn Store>,
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
    pub(crate) fn paused(&self, threads: usize, store: &str) -> (f64, Duration, Duration) {
        let (cp, db) = match store {
            "memory" => (Arc::new(MemoryStore::new()) as Arc<dyn Store>, None),
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

    /// (e): one thread of `loops` loops; the median loop time of the first and the
    /// last 100 loops.
    pub(crate) fn long_thread(&self, loops: usize, store: &str) -> (Duration, Duration) {
        let cp = match store {
            "memory" => Arc::new(MemoryStore::new()) as Arc<dyn Store>,
            _ => sqlite(&self.dir, "long").0,
        };
        let browser = Browser::new(true);
        let runner = agent(cp, browser.clone());
        self.block(runner.start("e", json!({ "loops": loops })))
            .expect("run");
        let times = browser.snapshots.lock().unwrap().clone();
        assert_eq!(times.len(), loops);
        // The median loop of each 100: a mean would carry whatever else the machine
        // did during one of them (a loop that waited 2 ms moves it by 20 us).
        // (A run of 101 loops or fewer only counts instructions.)
        let median = |from: usize| {
            let Some(window) = times.get(from..=from + 100) else {
                return Duration::ZERO;
            };
            let mut loops: Vec<Duration> = window.windows(2).map(|w| w[1] - w[0]).collect();
            loops.sort();
            loops[loops.len() / 2]
        };
        (median(0), median(loops.saturating_sub(101)))
    }
}
