//! A scenario: `switchyard` run as a subprocess on a seed graph, its LLM answers replayed
//! from a checked-in recording or, when regenerating, recorded against the scripted
//! OpenAI-compatible server answering from the scenario's brain. See the module docs
//! of `seeds_browser` for the files and how to regenerate them.

use crate::llm::server::{Server, completion, failure};
use crate::util::root;
use serde::Deserialize;
use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `switchyard` process may take before the test kills it and fails.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(240);

/// Where recordings keep the web app's port, which differs on every test run.
const PORT_PLACEHOLDER: &str = "127.0.0.1:APP_PORT";

/// One answer of a brain: what the model replies to the next request, in order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BrainAnswer {
    /// The llm node the answer is meant for; a request from another node fails the
    /// recording with a message naming both.
    node: String,
    /// A JSON reply (sent as the message text, compact).
    #[serde(default)]
    reply: Option<Json>,
    /// A reply that is sent as it is (for replies that are not valid).
    #[serde(default)]
    text: Option<String>,
    /// Usage the server reports: prompt and completion tokens.
    #[serde(default = "default_tokens")]
    tokens: (u64, u64),
    /// Send this answer this many times in a row.
    #[serde(default = "one")]
    times: usize,
}

fn default_tokens() -> (u64, u64) {
    (300, 40)
}

fn one() -> usize {
    1
}

/// Whether this scenario records its LLM answers afresh: `SWITCHYARD_REGENERATE` is `1`
/// (every scenario) or a comma-separated list of scenario names (`seed/scenario` or
/// just `scenario`).
fn regenerating(seed: &str, name: &str) -> bool {
    let Ok(v) = std::env::var("SWITCHYARD_REGENERATE") else {
        return false;
    };
    v == "1"
        || v.split(',')
            .map(str::trim)
            .any(|s| s == name || s == format!("{seed}/{name}"))
}

/// The scripted LLM server of a recording scenario, kept running on its own thread.
struct Recorder {
    server: Server,
    nodes: Vec<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    fn start(brain: &Path, port: u16) -> Recorder {
        let text = std::fs::read_to_string(brain).unwrap_or_else(|e| {
            panic!(
                "cannot read the brain {}: {e}; a recorded scenario needs one",
                brain.display()
            )
        });
        let answers: Vec<BrainAnswer> = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a brain: {e}", brain.display()));
        let mut script = Vec::new();
        let mut nodes = Vec::new();
        for a in answers {
            let content = match (&a.reply, &a.text) {
                (Some(r), None) => r.to_string(),
                (None, Some(t)) => t.clone(),
                _ => panic!(
                    "{}: an answer for `{}` needs exactly one of `reply` and `text`",
                    brain.display(),
                    a.node
                ),
            };
            let content = content.replace(PORT_PLACEHOLDER, &format!("127.0.0.1:{port}"));
            for _ in 0..a.times {
                script.push(completion(&content, a.tokens.0, a.tokens.1));
                nodes.push(a.node.clone());
            }
        }
        // Past the brain, a 400 (never retried): the node takes its fallback at once, the
        // run ends soon, and `check` shows the prompt that found no answer.
        for _ in 0..200 {
            script.push(failure(400, "the brain has no more answers", &[]));
        }
        // The scripted server runs on a current-thread runtime that a thread of its own
        // drives until the scenario ends.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (server_tx, server_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            rt.block_on(async move {
                let server = Server::start(script).await;
                server_tx.send(server).expect("hand over the server");
                let _ = rx.await;
            });
        });
        let server = server_rx.recv().expect("the scripted server starts");
        Recorder {
            server,
            nodes,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// Fails when a request so far came from another node than its brain answer was
    /// written for.
    #[track_caller]
    fn check(&self, brain: &Path) {
        let seen = self.server.seen();
        for (i, s) in seen.iter().enumerate() {
            let node = s.body["response_format"]["json_schema"]["name"]
                .as_str()
                .unwrap_or("?");
            match self.nodes.get(i) {
                Some(want) if want == node => {}
                Some(want) => panic!(
                    "{}: answer {} is for `{want}`, but request {} came from `{node}`; the \
                     graph or its prompts changed: edit the brain",
                    brain.display(),
                    i + 1,
                    i + 1
                ),
                None => panic!(
                    "{}: request {} (from `{node}`) found the brain out of answers ({} of \
                     them); its last message:\n{}",
                    brain.display(),
                    i + 1,
                    self.nodes.len(),
                    s.body["messages"]
                        .as_array()
                        .and_then(|m| m.last())
                        .and_then(|m| m["content"].as_str())
                        .unwrap_or("?")
                ),
            }
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What one `switchyard` process did.
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Ran {
    #[track_caller]
    pub(crate) fn code(self, expected: i32) -> Self {
        assert_eq!(
            self.code, expected,
            "exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// The NDJSON events of a `--json` run.
    pub(crate) fn events(&self) -> Vec<Json> {
        self.stdout.lines().map(crate::util::event_line).collect()
    }

    pub(crate) fn json(&self) -> Json {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

/// One scenario of a seed graph: a temporary directory with its SQLite store, blob store
/// and knowledge-graph file, and the LLM side (replay, or recording when regenerating).
pub(crate) struct Scenario {
    seed: &'static str,
    name: &'static str,
    dir: PathBuf,
    /// Removes `dir` when the scenario ends (none when it is kept).
    _tmp: Option<tempfile::TempDir>,
    port: u16,
    recorder: Option<Recorder>,
    /// LLM processes so far: the n-th uses recording `<name>.<n>.llm.jsonl`.
    processes: usize,
    /// Marks every process this scenario starts (through the environment, which the MCP
    /// servers and the browser inherit), so cleanup finds them all.
    mark: String,
}

impl Scenario {
    /// A scenario of `graphs/<seed>.toml` against the web app on `port`.
    pub(crate) fn new(seed: &'static str, name: &'static str, port: u16) -> Scenario {
        let recorder = regenerating(seed, name)
            .then(|| Recorder::start(&fixture(seed, name, "brain.json"), port));
        let tmp = tempfile::Builder::new()
            .prefix(&format!("switchyard-seed-{name}-"))
            .tempdir()
            .expect("temp dir");
        let mark = tmp
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // SWITCHYARD_SEEDS_KEEP=1 keeps the directory (store, blobs, recordings) to look at.
        let (dir, tmp) = if std::env::var_os("SWITCHYARD_SEEDS_KEEP").is_some() {
            let dir = tmp.keep();
            eprintln!("keeping {}", dir.display());
            (dir, None)
        } else {
            (tmp.path().to_path_buf(), Some(tmp))
        };
        Scenario {
            seed,
            name,
            dir,
            _tmp: tmp,
            port,
            recorder,
            processes: 0,
            mark,
        }
    }

    pub(crate) fn graph(&self) -> String {
        format!("graphs/{}.toml", self.seed)
    }

    pub(crate) fn store(&self) -> String {
        format!("sqlite:{}", self.dir.join("checkpoints.db").display())
    }

    /// The blob store of the SQLite store: `blobs/` beside it.
    pub(crate) fn blobs(&self) -> PathBuf {
        self.dir.join("blobs")
    }

    /// The knowledge-graph server's file (MEMORY_FILE_PATH).
    pub(crate) fn memory_file(&self) -> PathBuf {
        self.dir.join("memory.jsonl")
    }

    /// The text with the web app's port put back in place of the placeholder.
    pub(crate) fn app(&self, text: &str) -> String {
        text.replace(PORT_PLACEHOLDER, &format!("127.0.0.1:{}", self.port))
    }

    /// The text with the web app's port replaced by the placeholder (for snapshots).
    pub(crate) fn portless(&self, text: &str) -> String {
        text.replace(&format!("127.0.0.1:{}", self.port), PORT_PLACEHOLDER)
    }

    /// `switchyard run` or `resume` with its LLM answers: `--record` when regenerating,
    /// else `--replay` of the scenario's next recording. `--json` and the store are added.
    pub(crate) fn llm(&mut self, args: &[&str]) -> Ran {
        self.processes += 1;
        let n = self.processes;
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.extend(["--json".into(), "--store".into(), self.store()]);
        let llm_url = match &self.recorder {
            Some(r) => {
                args.extend([
                    "--record".into(),
                    self.recording_tmp(n).display().to_string(),
                ]);
                r.server.url().to_string()
            }
            None => {
                let fixture = fixture(self.seed, self.name, &format!("{n}.llm.jsonl"));
                let text = std::fs::read_to_string(&fixture).unwrap_or_else(|e| {
                    panic!(
                        "cannot read the recording {} ({e}); record it with \
                         `SWITCHYARD_REGENERATE={}/{} cargo test --test integration seeds_browser`",
                        fixture.display(),
                        self.seed,
                        self.name
                    )
                });
                let replay = self.dir.join(format!("replay.{n}.llm.jsonl"));
                std::fs::write(&replay, self.app(&text)).expect("write the replay");
                args.extend(["--replay".into(), replay.display().to_string()]);
                // Nothing may reach a model during a replay.
                no_model()
            }
        };
        let ran = self.spawn(&args, &llm_url);
        if let Some(r) = &self.recorder {
            r.check(&fixture(self.seed, self.name, "brain.json"));
        }
        ran
    }

    /// Any other `switchyard` command (nothing is added to `args`). A model it asks for
    /// refuses the connection.
    pub(crate) fn cli(&self, args: &[&str]) -> Ran {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        self.spawn(&args, &no_model())
    }

    /// `switchyard state` of a thread, as JSON.
    pub(crate) fn state(&self, thread: &str) -> Json {
        crate::util::without_made_ids(
            self.cli(&["state", "--thread", thread, "--store", &self.store()])
                .code(0)
                .json(),
        )
    }

    fn recording_tmp(&self, n: usize) -> PathBuf {
        self.dir.join(format!("record.{n}.llm.jsonl"))
    }

    fn spawn(&self, args: &[String], llm_url: &str) -> Ran {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(args)
            .current_dir(root())
            .env("OPENAI_BASE_URL", llm_url)
            .env_remove("OPENAI_API_KEY")
            .env("MEMORY_FILE_PATH", self.memory_file())
            .env("PLAYWRIGHT_MCP_OUTPUT_DIR", self.dir.join("playwright"))
            .env("SWITCHYARD_SEEDS_TEST", &self.mark)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("switchyard starts");
        // Read the pipes on their own threads so a chatty child never blocks.
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        });
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for switchyard") {
                break status;
            }
            if started.elapsed() > PROCESS_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                kill_marked(&self.mark);
                let events: Vec<Json> = out
                    .join()
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                let trace = trace(&events);
                panic!(
                    "`switchyard {}` took longer than {PROCESS_TIMEOUT:?}; killed it\n--- stderr\n{}\n--- the last events\n{}",
                    args.join(" "),
                    err.join().unwrap_or_default(),
                    trace[trace.len().saturating_sub(60)..].join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let ran = Ran {
            code: status.code().unwrap_or(-1),
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        };
        assert_no_leftovers(&self.mark, args);
        ran
    }

    /// Ends the scenario. When regenerating: every brain answer was used, and the
    /// recordings replace the checked-in ones (with the port replaced by a placeholder).
    pub(crate) fn finish(mut self) {
        let Some(recorder) = self.recorder.take() else {
            return;
        };
        let brain = fixture(self.seed, self.name, "brain.json");
        recorder.check(&brain);
        let used = recorder.server.seen().len();
        assert_eq!(
            used,
            recorder.nodes.len(),
            "{}: the run asked {used} times, and the brain has {} answers",
            brain.display(),
            recorder.nodes.len()
        );
        for n in 1..=self.processes {
            let text = std::fs::read_to_string(self.recording_tmp(n)).unwrap_or_default();
            let text = text.replace(&format!("127.0.0.1:{}", self.port), PORT_PLACEHOLDER);
            let path = fixture(self.seed, self.name, &format!("{n}.llm.jsonl"));
            std::fs::write(&path, text).expect("write the recording");
            eprintln!("recorded {}", path.display());
        }
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        kill_marked(&self.mark);
    }
}

/// An endpoint where no model listens: a port just freed, so connections are refused.
fn no_model() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    format!("http://127.0.0.1:{port}/v1")
}

/// `tests/fixtures/seeds/<seed>/<name>.<suffix>`
fn fixture(seed: &str, name: &str, suffix: &str) -> PathBuf {
    root()
        .join("tests/fixtures/seeds")
        .join(seed)
        .join(format!("{name}.{suffix}"))
}

/// The processes whose environment carries the scenario's mark (the MCP servers and
/// the browser a `switchyard` process started), with their command names.
fn marked(mark: &str) -> Vec<(String, String)> {
    let needle = format!("SWITCHYARD_SEEDS_TEST={mark}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            pid.parse::<u32>().ok()?;
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            let found = environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes());
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            found.then(|| (pid, comm.trim().to_string()))
        })
        .collect()
}

fn kill_marked(mark: &str) {
    let pids: Vec<String> = marked(mark).into_iter().map(|(pid, _)| pid).collect();
    if !pids.is_empty() {
        let _ = Command::new("kill").arg("-9").args(&pids).status();
    }
}

/// After `switchyard` exited, the servers and the browser it started are gone: they
/// are given a while to exit, then killed, and the test fails naming them.
#[track_caller]
fn assert_no_leftovers(mark: &str, args: &[String]) {
    let started = Instant::now();
    loop {
        let left = marked(mark);
        if left.is_empty() {
            return;
        }
        if started.elapsed() > Duration::from_secs(20) {
            kill_marked(mark);
            panic!(
                "`switchyard {}` left processes running: {left:?}",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sha256:` and 64 hex digits (a screenshot's reference; the image's bytes may differ
/// from machine to machine) become `sha256:<hex>`.
pub(crate) fn scrub_hashes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("sha256:") {
        let (head, tail) = rest.split_at(i + "sha256:".len());
        out.push_str(head);
        let hex = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
        if hex == 64 {
            out.push_str("<hex>");
            rest = &tail[64..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Events as short lines, in order, without what changes from run to run (durations,
/// pids, the servers' stderr, screenshot hashes): `node`, `  browser.browser_click {...}`,
/// `  llm plan_action #1 300+40`, `  -> next [case]`, ...
pub(crate) fn trace(events: &[Json]) -> Vec<String> {
    let s = |v: &Json| v.as_str().unwrap_or("").to_string();
    events
        .iter()
        .filter_map(|e| {
            Some(match e["event"].as_str()? {
                "run_started" => format!(
                    "run_started {} run {}{}",
                    s(&e["thread"]),
                    e["run"],
                    if e["resumed"] == json!(true) {
                        " (resumed)"
                    } else {
                        ""
                    }
                ),
                "node_started" => s(&e["node"]),
                "node_finished" if e["skipped"] == json!(true) => "  (skipped)".into(),
                "node_finished" | "server_stderr" | "text_delta" => return None,
                "route_taken" => match e["case"].as_str() {
                    Some(case) => format!("  -> {} [{case}]", s(&e["to"])),
                    None => format!("  -> {}", s(&e["to"])),
                },
                "tool_call" => format!(
                    "  {}.{} {}{}",
                    s(&e["server"]),
                    s(&e["tool"]),
                    scrub_hashes(&e["arguments"].to_string()),
                    if e["is_error"] == json!(true) {
                        " (error)"
                    } else {
                        ""
                    }
                ),
                "llm_invocation" => format!(
                    "  llm {} #{} {}+{}{}",
                    s(&e["node"]),
                    e["attempt"],
                    e["tokens_in"],
                    e["tokens_out"],
                    if e["cache_hit"] == json!(true) {
                        " (cache hit)"
                    } else {
                        ""
                    }
                ),
                "server_started" => {
                    format!("  server_started {} #{}", s(&e["server"]), e["restart"])
                }
                "server_stopped" => format!("server_stopped {}", s(&e["server"])),
                "server_died" => format!("  server_died {}", s(&e["server"])),
                // The reason names the model's address, which changes from run to run.
                "llm_fallback" => format!("  fallback {}", s(&e["node"])),
                // So does the error; the wait is jittered.
                "llm_retry" => format!(
                    "  retry {} after attempt {}{}",
                    s(&e["node"]),
                    e["attempt"],
                    if e["discard"] == json!(true) {
                        " (discard)"
                    } else {
                        ""
                    }
                ),
                "node_failed" => format!(
                    "  failed{}: {}",
                    if e["handled"] == json!(true) {
                        " (handled)"
                    } else {
                        ""
                    },
                    s(&e["message"])
                ),
                "interrupted" => format!("interrupted {} {}", s(&e["node"]), e["payload"]),
                "resumed" => format!("resumed {}", s(&e["node"])),
                "limit_reached" => format!("limit_reached {} -> {}", s(&e["limit"]), s(&e["to"])),
                "stopped" => format!("stopped before {}", s(&e["next"])),
                "run_finished" => format!(
                    "run_finished {} {} after {} steps, {} tokens: {}",
                    s(&e["status"]),
                    e["outcome"],
                    e["steps"],
                    e["tokens"],
                    e["response"]
                ),
                // The event's own fields: the envelope's timestamp differs every run.
                other => format!("{other} {}", crate::util::without_envelope(e)),
            })
        })
        .collect()
}

/// Asserts two traces are equal, showing both in full when they are not.
#[track_caller]
pub(crate) fn assert_trace(got: &[String], want: &[&str]) {
    if got != want {
        panic!(
            "the trace differs\n--- got\n{}\n--- want\n{}",
            got.join("\n"),
            want.join("\n")
        );
    }
}

/// A screenshot reference names a PNG in the blob store with that hash and size.
#[track_caller]
pub(crate) fn assert_blob(s: &Scenario, reference: &Json) {
    let hex = reference["blob"]
        .as_str()
        .and_then(|b| b.strip_prefix("sha256:"))
        .unwrap_or_else(|| panic!("not a blob reference: {reference}"));
    assert_eq!(reference["mime_type"], json!("image/png"));
    let bytes = std::fs::read(s.blobs().join(format!("{hex}.png"))).expect("the blob is stored");
    assert_eq!(reference["bytes"], json!(bytes.len()));
    assert_eq!(sha256_hex(&bytes), hex);
    assert_eq!(&bytes[1..4], b"PNG");
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
