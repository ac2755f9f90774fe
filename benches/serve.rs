//! `switchyard serve` measured from a client, as a front end sees it
//! (`cargo bench --bench serve`). The server is the release binary in a child process
//! (memory store unless said otherwise, access logs on, drained); the client is reqwest
//! on this process's runtime, over loopback.
//!
//! 1. `runs/wait` round trip of a 3-node graph (`tests/fixtures/serve/three.toml`),
//!    stateless (the server creates and deletes a thread each time), p50 and p99, beside
//!    the same run started in process with no server: the difference is what the server
//!    adds.
//! 2. Runs per second with 16 clients at once.
//! 3. First event latency: from sending `runs/stream` to the first `values` event.
//! 4. Memory per idle paused thread: RSS growth of the server over 10,000 threads each
//!    paused at an interrupt (`benches/graphs/ask.toml`), no MCP servers, with the run
//!    logs expired.
//! 5. 1,000 clients following one run's stream at once (`values` of a 251-step run of
//!    `tests/fixtures/run/count.toml`, the whole state in each event): time until every
//!    client has every event.
//! 6. Runs per second with 1, 2, 3 and 4 servers sharing one Postgres database (a
//!    throwaway cluster, fsync and synchronous_commit on, Unix socket), 16 clients
//!    spread over them, each running the 3-node graph again and again on a thread of
//!    its own (`cargo bench --bench serve -- workers` runs this one alone).

#[path = "shared/serve.rs"]
mod serve;

use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Server {
    url: String,
    child: tokio::process::Child,
}

impl Server {
    async fn start(args: &[&str]) -> Server {
        let (url, child) = serve::start(args).await;
        Server { url, child }
    }

    fn rss_kb(&self) -> u64 {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap()
}

async fn post(c: &reqwest::Client, url: &str, body: &Json) -> Json {
    let r = c.post(url).body(body.to_string()).send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(text.trim_start()).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().any(|a| a == "workers") {
        rt.block_on(workers_on_postgres());
        return;
    }
    rt.block_on(async {
        direct_and_round_trip().await;
        throughput().await;
        first_event().await;
        paused_threads("memory").await;
        concurrent_streams().await;
        workers_on_postgres().await;
    });
}

/// 6: runs per second with 1, 2 and 4 servers on one Postgres database.
async fn workers_on_postgres() {
    let admin = serve::postgres_cluster();
    for n in [1, 2, 3, 4] {
        let db = serve::postgres_database(&admin, &format!("workers{n}"));
        let mut servers = Vec::new();
        for _ in 0..n {
            servers.push(
                Server::start(&[
                    "tests/fixtures/serve/three.toml",
                    "--store",
                    &db,
                    "--max-runs",
                    "64",
                ])
                .await,
            );
        }
        let c = client();
        let secs = 5;
        let until = Instant::now() + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for i in 0..16 {
            let base = servers[i % n].url.clone();
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                let thread = format!("w{i}");
                post(
                    &c,
                    &format!("{base}/threads"),
                    &json!({ "thread_id": thread }),
                )
                .await;
                let url = format!("{base}/threads/{thread}/runs/wait");
                let body = json!({ "assistant_id": "three", "input": { "input": "x" } });
                let mut runs = 0u64;
                while Instant::now() < until {
                    post(&c, &url, &body).await;
                    runs += 1;
                }
                runs
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        println!(
            "runs per second, {n} server{} on Postgres, 16 clients: {:>6.0}",
            if n == 1 { "" } else { "s" },
            total as f64 / secs as f64
        );
        drop(servers);
    }
}

/// The same 3-node run, in process (no server) and through `POST /runs/wait`.
async fn direct_and_round_trip() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let graph =
        Arc::new(switchyard::load_graph(&root.join("tests/fixtures/serve/three.toml")).unwrap());
    let store: Arc<dyn switchyard::store::Store> = Arc::new(switchyard::store::MemoryStore::new());
    let runner = switchyard::run::Runner::new(graph, store);
    let mut direct = Vec::new();
    for i in 0..3000 {
        let t = Instant::now();
        runner
            .start(&format!("t{i}"), json!({ "input": "x" }))
            .await
            .unwrap();
        direct.push(t.elapsed());
    }
    direct.sort();

    let s = Server::start(&["tests/fixtures/serve", "--store", "memory"]).await;
    let c = client();
    let url = format!("{}/runs/wait", s.url);
    let body = json!({ "assistant_id": "three", "input": { "input": "x" } });
    for _ in 0..300 {
        post(&c, &url, &body).await;
    }
    let mut rtt = Vec::new();
    for _ in 0..3000 {
        let t = Instant::now();
        let out = post(&c, &url, &body).await;
        rtt.push(t.elapsed());
        assert_eq!(out["trail"], json!(["a:x", "b"]));
    }
    rtt.sort();
    let (d50, d99) = (percentile(&direct, 0.5), percentile(&direct, 0.99));
    let (r50, r99) = (percentile(&rtt, 0.5), percentile(&rtt, 0.99));
    println!(
        "3-node run in process, no server:   p50 {:>8}  p99 {:>8}",
        us(d50),
        us(d99)
    );
    println!(
        "POST /runs/wait round trip:         p50 {:>8}  p99 {:>8}",
        us(r50),
        us(r99)
    );
    println!(
        "added by the server (p50, p99):          {:>8}      {:>8}   (target < 1 ms)",
        us(r50.saturating_sub(d50)),
        us(r99.saturating_sub(d99))
    );
}

/// Stateless runs/wait from 16 clients at once for 5 seconds.
async fn throughput() {
    let s = Server::start(&[
        "tests/fixtures/serve",
        "--store",
        "memory",
        "--max-runs",
        "64",
    ])
    .await;
    let c = client();
    let url = format!("{}/runs/wait", s.url);
    let body = json!({ "assistant_id": "three", "input": { "input": "x" } });
    let until = Instant::now() + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (c, url, body) = (c.clone(), url.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                post(&c, &url, &body).await;
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    println!(
        "runs per second, 16 clients, 5 s:  {:>8.0}",
        total as f64 / 5.0
    );
    // The same with SQLite: each run writes 5 checkpoints and its catalog rows.
    let dir = std::env::temp_dir().join(format!("switchyard-serve-bench-{}", std::process::id()));
    let store = format!("sqlite:{}", dir.join("s.db").display());
    let s = Server::start(&[
        "tests/fixtures/serve",
        "--store",
        &store,
        "--max-runs",
        "64",
    ])
    .await;
    let url = format!("{}/runs/wait", s.url);
    let until = Instant::now() + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (c, url, body) = (c.clone(), url.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                post(&c, &url, &body).await;
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    println!(
        "runs per second, 16 clients, SQLite: {:>6.0}",
        total as f64 / 5.0
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// From sending `POST /runs/stream` to reading the first `values` event.
async fn first_event() {
    let s = Server::start(&["tests/fixtures/serve", "--store", "memory"]).await;
    let c = client();
    let url = format!("{}/runs/stream", s.url);
    let body =
        json!({ "assistant_id": "three", "input": { "input": "x" }, "stream_mode": "values" });
    let mut firsts = Vec::new();
    for i in 0..1200 {
        let t = Instant::now();
        let mut r = c.post(&url).body(body.to_string()).send().await.unwrap();
        let mut seen = String::new();
        let mut first = None;
        while let Some(chunk) = r.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if first.is_none() && seen.contains("event: values") {
                first = Some(t.elapsed());
            }
        }
        if i >= 200 {
            firsts.push(first.expect("a values event"));
        }
    }
    firsts.sort();
    println!(
        "first values event of runs/stream:  p50 {:>8}  p99 {:>8}",
        us(percentile(&firsts, 0.5)),
        us(percentile(&firsts, 0.99))
    );
}

/// RSS growth of the server over 10,000 threads paused at an interrupt.
async fn paused_threads(store: &str) {
    let s = Server::start(&[
        "benches/graphs/ask.toml",
        "--store",
        store,
        "--log-retention",
        "1s",
        "--quiet",
    ])
    .await;
    let c = client();
    // Warm the server's allocations with a few threads first.
    let pause = |i: usize| {
        let c = c.clone();
        let base = s.url.clone();
        async move {
            let t = format!("t{i}");
            post(&c, &format!("{base}/threads"), &json!({ "thread_id": t })).await;
            let out = post(
                &c,
                &format!("{base}/threads/{t}/runs/wait"),
                &json!({ "assistant_id": "ask", "input": { "question": format!("question {i}?") } }),
            )
            .await;
            assert!(out.get("__interrupt__").is_some());
        }
    };
    for i in 0..500 {
        pause(i).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = s.rss_kb();
    let n = 10_000;
    for i in 500..500 + n {
        pause(i).await;
    }
    // The finished runs' logs expire after --log-retention.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = s.rss_kb();
    println!(
        "memory per idle paused thread ({store}): {:.1} KB (RSS {} -> {} KB over {n} threads; target <= 16 KB)",
        (after.saturating_sub(before)) as f64 / n as f64,
        before,
        after
    );
}

/// 1,000 clients read one run's stream at once.
async fn concurrent_streams() {
    let s = Server::start(&[
        "tests/fixtures/run/count.toml",
        "--store",
        "memory",
        "--quiet",
    ])
    .await;
    let c = client();
    post(
        &c,
        &format!("{}/threads", s.url),
        &json!({ "thread_id": "shared" }),
    )
    .await;
    let run = post(
        &c,
        &format!("{}/threads/shared/runs", s.url),
        &json!({ "assistant_id": "count", "input": { "goal": 100 }, "stream_mode": ["values"] }),
    )
    .await;
    let stream = format!(
        "{}/threads/shared/runs/{}/stream",
        s.url,
        run["run_id"].as_str().unwrap()
    );
    let before = s.rss_kb();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let (c, stream) = (c.clone(), stream.clone());
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let mut r = c
                .get(&stream)
                .header("last-event-id", "-1")
                .send()
                .await
                .unwrap();
            let mut events = 0usize;
            let mut bytes = 0usize;
            let mut tail = String::new();
            while let Some(chunk) = r.chunk().await.unwrap() {
                bytes += chunk.len();
                tail.push_str(&String::from_utf8_lossy(&chunk));
                // Count whole lines only; an unfinished one waits for the next chunk.
                let cut = tail.rfind('\n').map_or(0, |i| i + 1);
                events += tail[..cut].matches("event: values").count();
                tail.drain(..cut);
            }
            (events, bytes, t.elapsed())
        }));
    }
    let mut done = Vec::new();
    let mut counts = Vec::new();
    let mut total_bytes = 0;
    for t in tasks {
        let (events, bytes, took) = t.await.unwrap();
        counts.push(events);
        total_bytes += bytes;
        done.push(took);
    }
    let all = start.elapsed();
    done.sort();
    counts.sort();
    println!(
        "1,000 clients on one run's stream: every client got {}..{} values events ({:.1} MB in all); all done in {:.2} s (per client p50 {:.2} s, p99 {:.2} s); server RSS {} -> {} KB",
        counts[0],
        counts[counts.len() - 1],
        total_bytes as f64 / 1e6,
        all.as_secs_f64(),
        percentile(&done, 0.5).as_secs_f64(),
        percentile(&done, 0.99).as_secs_f64(),
        before,
        s.rss_kb()
    );
}
