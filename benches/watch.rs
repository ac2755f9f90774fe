//! What watching a run costs (issue 31): the 1,000-loop agent graph
//! (`benches/graphs/agent_loop.toml`, seed 000's loop: 6,002 steps) with its model
//! answered from a recording and its browser a real MCP server in another process (this
//! bench binary, started as `watch browser`), timed
//!
//! 1. in process: a `Runner` with no reader of its events, the same recording and the
//!    same browser server;
//! 2. through `switchyard run --store none`, with the human lines and with `--json`;
//! 3. through `switchyard serve --store memory`: a run nobody streams (created, then
//!    joined) and a run streamed to one client, in `values` (the SDK's default) and in
//!    `updates`;
//! 4. and, when `LANGGRAPH_PYTHON` names a Python with `langgraph` installed, the same
//!    loop in LangGraph (`benches/langgraph/agent_loop.py`, its browser and planner as
//!    Python functions, an in-memory checkpointer), in the same run of the bench.
//!
//! `cargo bench --bench watch` (`-- LOOPS` for another length). Each figure is the best
//! of three; wall time here moves by ±30 %, so each is printed beside the others of the
//! same minute.

use serde_json::{Value as Json, json};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard::llm::{
    DeltaSink, LlmClient, LlmError, LlmReply, LlmRequest, RecordingClient, ReplayClient, reply_json,
};
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::run::{Outcome, Runner};
use switchyard::store::NoStore;

#[path = "shared/page.rs"]
mod page;
#[path = "shared/serve.rs"]
mod serve;

const TRIES: usize = 3;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("browser") {
        browser();
        return;
    }
    let loops: u64 = args
        .iter()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let bench = Bench::new(dir.path(), loops);
    if std::env::var_os("WATCH_ONLY_WRITE").is_some() {
        // The graph and its recording, left for a profiler: `WATCH_ONLY_WRITE=1`.
        println!("{}", dir.keep().display());
        return;
    }
    let steps = 6 * loops + 2;
    println!("the agent loop, {loops} loops ({steps} steps), best of {TRIES}:");
    let report = |what: &str, d: Duration, base: Option<Duration>| {
        let per = d.as_secs_f64() * 1e6 / steps as f64;
        let ratio = base.map_or(String::new(), |b| {
            format!(", {:.2}x in process", d.as_secs_f64() / b.as_secs_f64())
        });
        println!(
            "  {what:<44} {:>8.1} ms  {per:>6.2} us a step{ratio}",
            d.as_secs_f64() * 1e3
        );
    };
    let inproc = best(|| bench.in_process());
    report("in process, no reader", inproc, None);
    let (human, human_bytes) = best_with(|| bench.cli(0));
    report("switchyard run, human lines", human, Some(inproc));
    let (json, json_bytes) = best_with(|| bench.cli(1));
    report("switchyard run --json", json, Some(inproc));
    let (json2, json2_bytes) = best_with(|| bench.cli(2));
    report("switchyard run --json=2", json2, Some(inproc));
    println!(
        "  bytes a step: human {:.0}, --json {:.0}, --json=2 {:.0} ({:.2}x --json's)",
        human_bytes as f64 / steps as f64,
        json_bytes as f64 / steps as f64,
        json2_bytes as f64 / steps as f64,
        json2_bytes as f64 / json_bytes as f64
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let server = Server::start(&bench).await;
        let (alone, _) = best_async(|| server.run(None)).await;
        report("switchyard serve, nobody streams", alone, Some(inproc));
        for mode in ["updates", "values"] {
            let (d, bytes) = best_async(|| server.run(Some(mode))).await;
            report(
                &format!("switchyard serve, one `{mode}` stream"),
                d,
                Some(inproc),
            );
            println!(
                "    ({:.2}x the run nobody streams; {:.0} bytes a step)",
                d.as_secs_f64() / alone.as_secs_f64(),
                bytes as f64 / steps as f64
            );
        }
    });
    match std::env::var("LANGGRAPH_PYTHON") {
        Ok(python) => {
            let lg = best(|| langgraph(&python, loops));
            report("LangGraph, in process", lg, Some(inproc));
            println!(
                "  LangGraph per step / Switchyard per step: in process {:.0}x, through `switchyard run` {:.0}x, --json {:.0}x",
                lg.as_secs_f64() / inproc.as_secs_f64(),
                lg.as_secs_f64() / human.as_secs_f64(),
                lg.as_secs_f64() / json.as_secs_f64()
            );
        }
        Err(_) => println!("  LangGraph: set LANGGRAPH_PYTHON to a Python with langgraph"),
    }
}

fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..TRIES).map(|_| f()).min().expect("tries")
}

fn best_with(mut f: impl FnMut() -> (Duration, usize)) -> (Duration, usize) {
    (0..TRIES).map(|_| f()).min().expect("tries")
}

async fn best_async<F: Future<Output = (Duration, usize)>>(
    mut f: impl FnMut() -> F,
) -> (Duration, usize) {
    let mut all = Vec::new();
    for _ in 0..TRIES {
        all.push(f().await);
    }
    all.into_iter().min().expect("tries")
}

/// The planner's answer, as `benches/interpreter`'s double gives it.
struct Planner;

#[async_trait::async_trait]
impl LlmClient for Planner {
    async fn complete(&self, _: &LlmRequest, _: DeltaSink<'_>) -> Result<LlmReply, LlmError> {
        Ok(reply_json(page::plan()))
    }
}

struct Bench {
    /// The graph, beside copies of the bench graphs' prompts and schemas.
    graph: PathBuf,
    recording: PathBuf,
    blobs: PathBuf,
    loops: u64,
}

impl Bench {
    /// Writes the graph with this binary as its browser and records the model's answers
    /// of one run.
    fn new(dir: &Path, loops: u64) -> Bench {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/graphs");
        // Copied: a graph reads no file outside its root.
        for sub in ["prompts", "schemas"] {
            std::fs::create_dir(dir.join(sub)).expect("dir");
            for f in std::fs::read_dir(root.join(sub)).expect(sub) {
                let f = f.expect("entry").path();
                std::fs::copy(&f, dir.join(sub).join(f.file_name().unwrap())).expect("copy");
            }
        }
        let exe = std::env::current_exe().expect("this binary");
        let text = std::fs::read_to_string(root.join("agent_loop.toml"))
            .expect("agent_loop.toml")
            .replace(
                "command = \"unused\"",
                &format!(
                    "command = {:?}\nargs = [\"browser\"]",
                    exe.display().to_string()
                ),
            );
        let graph = dir.join("agent_loop.toml");
        std::fs::write(&graph, text).expect("graph");
        let bench = Bench {
            graph,
            recording: dir.join("answers.jsonl"),
            blobs: dir.join("blobs"),
            loops,
        };
        let planner = RecordingClient::create(&bench.recording, Arc::new(Planner)).expect("rec");
        bench.run_in_process(Arc::new(planner));
        bench
    }

    fn input(&self) -> Json {
        json!({ "loops": self.loops })
    }

    fn run_in_process(&self, llm: Arc<dyn LlmClient>) -> Duration {
        let graph = switchyard::load_graph(&self.graph).unwrap_or_else(|e| panic!("{e}"));
        let root = graph.root.clone();
        let runner = Runner::new(Arc::new(graph), Arc::new(NoStore::new()))
            .with_llm(llm)
            .with_tools(Arc::new(McpClient::new(
                root,
                BlobStore::new(self.blobs.clone()),
            )));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let start = Instant::now();
        let out = rt
            .block_on(runner.start("bench", self.input()))
            .expect("run");
        let took = start.elapsed();
        let Outcome::Finished { steps, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(steps, 6 * self.loops + 2);
        took
    }

    fn in_process(&self) -> Duration {
        let replay = ReplayClient::open(&self.recording).expect("recording");
        self.run_in_process(Arc::new(replay))
    }

    /// The run's own time (`duration_ms` of its last event) and the bytes it wrote,
    /// as lines for people (`json` 0) or in NDJSON format `json`.
    fn cli(&self, json: u8) -> (Duration, usize) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        cmd.arg("run")
            .arg(&self.graph)
            .args(["--store", "none", "--replay"])
            .arg(&self.recording)
            .args(["--input", &self.input().to_string()]);
        if json > 0 {
            cmd.arg(format!("--json={json}"));
        }
        let out = cmd.stdin(Stdio::null()).output().expect("switchyard run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events = if json > 0 { &out.stdout } else { &out.stderr };
        let text = String::from_utf8_lossy(events);
        let last = text
            .lines()
            .rev()
            .find(|l| l.contains("finished"))
            .expect("end");
        let ms: u64 = if json > 0 {
            let v: Json = serde_json::from_str(last).expect("json line");
            v["duration_ms"].as_u64().expect("duration_ms")
        } else {
            // `run finished: done in 6002 steps, 0 tokens, 123 ms`
            last.rsplit(' ')
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no duration in {last:?}"))
        };
        (Duration::from_millis(ms), events.len())
    }
}

fn langgraph(python: &str, loops: u64) -> Duration {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/langgraph/agent_loop.py");
    let out = Command::new(python)
        .arg(script)
        .arg(loops.to_string())
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let secs: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("seconds");
    Duration::from_secs_f64(secs)
}

struct Server {
    url: String,
    http: reqwest::Client,
    _child: tokio::process::Child,
    input: Json,
}

impl Server {
    async fn start(bench: &Bench) -> Server {
        let (url, child) = serve::start([
            bench.graph.as_os_str(),
            "--store".as_ref(),
            "memory".as_ref(),
            "--replay".as_ref(),
            bench.recording.as_os_str(),
        ])
        .await;
        let _ = rustls::crypto::ring::default_provider().install_default();
        Server {
            url,
            http: reqwest::Client::new(),
            _child: child,
            input: bench.input(),
        }
    }

    async fn post(&self, path: &str, body: Json) -> reqwest::Response {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .expect("request");
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r
    }

    /// One run on a new thread, from its request to its end: joined with nobody
    /// reading its events, or streamed in `mode`; the bytes the stream sent.
    async fn run(&self, mode: Option<&str>) -> (Duration, usize) {
        let thread: Json = self.post("/threads", json!({})).await.json().await.unwrap();
        let thread = thread["thread_id"].as_str().expect("thread_id").to_string();
        let body =
            json!({ "assistant_id": "agent_loop", "input": self.input, "stream_mode": mode });
        let start = Instant::now();
        let bytes = match mode {
            None => {
                let run: Json = self
                    .post(&format!("/threads/{thread}/runs"), body)
                    .await
                    .json()
                    .await
                    .unwrap();
                let id = run["run_id"].as_str().expect("run_id");
                let r = self
                    .http
                    .get(format!("{}/threads/{thread}/runs/{id}/join", self.url))
                    .send()
                    .await
                    .expect("join");
                let state: Json = r.json().await.unwrap();
                assert_eq!(state["tool_steps"], self.input["loops"], "{state}");
                0
            }
            Some(_) => {
                let mut r = self
                    .post(&format!("/threads/{thread}/runs/stream"), body)
                    .await;
                let mut n = 0;
                let mut tail = Vec::new();
                while let Some(chunk) = r.chunk().await.expect("chunk") {
                    n += chunk.len();
                    tail = chunk.to_vec();
                }
                let tail = String::from_utf8_lossy(&tail);
                assert!(!tail.contains("event: error"), "{tail}");
                n
            }
        };
        (start.elapsed(), bytes)
    }
}

/// A browser for the bench: an MCP server on stdio that answers every snapshot with
/// the same ~2 KB page of 16 elements and every action with "done".
fn browser() {
    let page = page::observation();
    let action = json!({
        "type": "object",
        "properties": { "element": { "type": "string" }, "ref": { "type": "string" } },
    });
    let tools: Vec<Json> = ["browser_click", "browser_type", "browser_navigate"]
        .iter()
        .map(|name| json!({ "name": name, "inputSchema": action }))
        .chain([json!({ "name": "browser_snapshot", "inputSchema": { "type": "object" } })])
        .collect();
    let snapshot = json!({
        "content": [{ "type": "text", "text": page.to_string() }],
        "structuredContent": page,
    });
    let done = json!({ "content": [{ "type": "text", "text": "done" }] });
    let stdin = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    for line in stdin.lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Json>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id") else { continue };
        let result = match msg["method"].as_str().unwrap_or("") {
            "initialize" => json!({
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "bench-browser", "version": "1" },
            }),
            "tools/list" => json!({ "tools": tools }),
            "tools/call" if msg["params"]["name"] == "browser_snapshot" => snapshot.clone(),
            "tools/call" => done.clone(),
            _ => json!({}),
        };
        let reply = json!({ "jsonrpc": "2.0", "id": id, "result": result });
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}
