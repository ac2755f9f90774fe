//! A seed scenario: a thread driven by `switchyard run` and `resume` subprocesses, its
//! model answers replayed from (or, with `SWITCHYARD_REGENERATE=1`, recorded into) its
//! recording; and helpers to read what the runs did.

use crate::llm::server::{Answer, Reply, Server};
use crate::util::root;
use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use switchyard::llm::{LlmClient, OpenAiClient, RecordingClient, ReplayClient};

/// The environment variable that makes the scenarios record instead of replay.
pub(crate) const REGENERATE: &str = "SWITCHYARD_REGENERATE";

/// Time allowed for one `switchyard` process; far more than any scenario needs.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(180);

/// One scripted model answer and the node it is for.
struct Scripted {
    node: String,
    reply: Reply,
}

enum Mode {
    Replay(PathBuf),
    Record {
        server: Server,
        nodes: Vec<String>,
        /// One recording per process, concatenated at the end.
        parts: Vec<PathBuf>,
    },
}

/// A scenario of one seed graph: one thread in its own store and temporary directory.
pub(crate) struct Scenario {
    graph: &'static str,
    name: &'static str,
    pub(crate) dir: tempfile::TempDir,
    store: String,
    pub(crate) thread: String,
    env: Vec<(String, String)>,
    mode: Mode,
    /// A copy of the graph that the runs use instead (`edit_graph`).
    graph_copy: Option<PathBuf>,
    /// `llm_invocation` events of every process so far (replies, not cache hits).
    replies: usize,
}

/// What one `switchyard` process did.
pub(crate) struct Ran {
    pub(crate) code: i32,
    /// Its events (`--json`), in order.
    pub(crate) events: Vec<Json>,
    pub(crate) stderr: String,
}

impl Scenario {
    /// The scenario `name` of `graphs/<graph>.toml`. Fails with what to do when its
    /// recording is missing.
    pub(crate) async fn new(graph: &'static str, name: &'static str) -> Scenario {
        let regenerate = std::env::var_os(REGENERATE).is_some_and(|v| !v.is_empty());
        Self::with_mode(graph, name, regenerate).await
    }

    /// The scenario replaying its recording even when the others regenerate theirs.
    pub(crate) async fn replaying(graph: &'static str, name: &'static str) -> Scenario {
        Self::with_mode(graph, name, false).await
    }

    async fn with_mode(graph: &'static str, name: &'static str, record: bool) -> Scenario {
        need_npm_packages();
        let dir = tempfile::tempdir().expect("temp dir");
        let store = format!("sqlite:{}", dir.path().join("checkpoints.db").display());
        let mode = if record {
            let script = read_script(&fixture(graph, name, "script.json"));
            let nodes = script.iter().map(|s| s.node.clone()).collect();
            let answers = script.into_iter().map(|s| Answer::Reply(s.reply)).collect();
            Mode::Record {
                server: Server::start(answers).await,
                nodes,
                parts: Vec::new(),
            }
        } else {
            let recording = fixture(graph, name, "llm.jsonl");
            assert!(
                recording.exists(),
                "`{}` is missing: make it from its script with `{REGENERATE}=1 cargo test --test integration seeds_tools::{graph}::{name}`",
                recording.display()
            );
            Mode::Replay(recording)
        };
        Scenario {
            graph,
            name,
            dir,
            store,
            thread: name.to_string(),
            env: Vec::new(),
            mode,
            graph_copy: None,
            replies: 0,
        }
    }

    /// Sets an environment variable for every later process (and the MCP servers they
    /// start).
    pub(crate) fn env(&mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) {
        self.env.push((
            key.to_string(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
    }

    /// The graph file, relative to the repository root (or absolute, for a copy).
    pub(crate) fn graph_file(&self) -> String {
        match &self.graph_copy {
            Some(copy) => copy.display().to_string(),
            None => format!("graphs/{}.toml", self.graph),
        }
    }

    /// Runs a copy of the graph from now on, with `from` replaced by `to` in its text
    /// (its paths still resolve against the repository). For what a test cannot wait
    /// for, such as a 10-minute timeout; prompts and schemas are the same files, so the
    /// recording still matches.
    pub(crate) fn edit_graph(&mut self, from: &str, to: &str) {
        let text = std::fs::read_to_string(root().join(format!("graphs/{}.toml", self.graph)))
            .expect("graph");
        assert!(text.contains(from), "the graph has no `{from}`");
        let root_line = "root = \"..\"";
        assert!(text.contains(root_line), "the graph has no `{root_line}`");
        let text = text.replace(from, to).replace(
            root_line,
            &format!("root = {:?}", root().display().to_string()),
        );
        let copy = self.dir.path().join(format!("{}.toml", self.graph));
        std::fs::write(&copy, text).expect("write the graph's copy");
        self.graph_copy = Some(copy);
    }

    /// The scenario's checkpoint store, for a run through the library.
    pub(crate) fn store_file(&self) -> PathBuf {
        self.dir.path().join("checkpoints.db")
    }

    /// The model client for a run through the library: the recording's replay, or (when
    /// regenerating) the scripted server, recorded like a process of the scenario.
    pub(crate) fn llm(&mut self) -> Arc<dyn LlmClient> {
        match &mut self.mode {
            Mode::Replay(recording) => Arc::new(ReplayClient::open(recording).expect("replay")),
            Mode::Record { server, parts, .. } => {
                let part = self
                    .dir
                    .path()
                    .join(format!("recording-{}.llm.jsonl", parts.len()));
                let inner = OpenAiClient::new(server.url(), "", "OPENAI_API_KEY").expect("client");
                let client = RecordingClient::create(&part, Arc::new(inner)).expect("recording");
                parts.push(part);
                Arc::new(client)
            }
        }
    }

    /// Counts the replies of a run through the library, as `finish` checks them.
    pub(crate) fn count_replies(&mut self, events: &[Json]) {
        self.replies += events
            .iter()
            .filter(|e| e["event"] == "llm_invocation" && e["cache_hit"] == false)
            .count();
    }

    /// `switchyard run <graph> --input INPUT --thread <scenario>`.
    pub(crate) async fn run(&mut self, input: Json, extra: &[&str]) -> Ran {
        let graph = self.graph_file();
        let thread = self.thread.clone();
        let input = input.to_string();
        let mut args = vec!["run", &graph, "--thread", &thread, "--input", &input];
        args.extend_from_slice(extra);
        self.switchyard(&args).await
    }

    /// `switchyard resume <graph> --thread <scenario> [--payload PAYLOAD]`.
    pub(crate) async fn resume(&mut self, payload: Option<Json>, extra: &[&str]) -> Ran {
        let graph = self.graph_file();
        let thread = self.thread.clone();
        let payload = payload.map(|p| p.to_string());
        let mut args = vec!["resume", &graph, "--thread", &thread];
        if let Some(p) = &payload {
            args.extend_from_slice(&["--payload", p]);
        }
        args.extend_from_slice(extra);
        self.switchyard(&args).await
    }

    /// Runs `switchyard` with `args`, the scenario's store, `--json` and the recording.
    pub(crate) async fn switchyard(&mut self, args: &[&str]) -> Ran {
        let mut cmd = self.command(args);
        cmd.args(["--store", &self.store, "--json"]);
        match &mut self.mode {
            Mode::Replay(recording) => {
                cmd.arg("--replay").arg(&*recording);
                // Nothing listens there: a request that is not replayed cannot be answered.
                cmd.env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
            }
            Mode::Record { server, parts, .. } => {
                let part = self
                    .dir
                    .path()
                    .join(format!("recording-{}.llm.jsonl", parts.len()));
                cmd.arg("--record").arg(&part);
                cmd.env("OPENAI_BASE_URL", server.url());
                parts.push(part);
            }
        }
        let out = output(cmd).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let events: Vec<Json> = stdout.lines().map(crate::util::event_line).collect();
        self.count_replies(&events);
        Ran {
            code: out.status.code().unwrap_or(-1),
            events,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `switchyard state --thread <scenario>`: where the thread stands and its state.
    pub(crate) async fn state(&self) -> Json {
        let mut cmd = self.command(&["state", "--thread", &self.thread]);
        cmd.args(["--store", &self.store]);
        let out = output(cmd).await;
        assert!(
            out.status.success(),
            "state: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        crate::util::without_made_ids(
            serde_json::from_slice(&out.stdout).expect("state prints JSON"),
        )
    }

    /// What a test snapshots: the events of its processes (`trace`), then the thread's
    /// final state, durations zeroed.
    pub(crate) async fn report(&self, trace: &[String]) -> String {
        let mut state = self.state().await["state"].take();
        zero_durations(&mut state);
        format!(
            "{}\n--- final state\n{}",
            trace.join("\n"),
            serde_json::to_string_pretty(&state).expect("state")
        )
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
        cmd.args(args)
            .current_dir(root())
            .env_remove("OPENAI_API_KEY")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A test that fails mid-run leaves no process behind.
            .kill_on_drop(true);
        cmd
    }

    /// Ends the scenario: every recorded reply was used (replay), or the recording is
    /// written and each scripted answer went to the node its script names (record).
    pub(crate) fn finish(self) {
        match self.mode {
            Mode::Replay(recording) => {
                let recorded = std::fs::read_to_string(&recording)
                    .expect("recording")
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .count();
                assert_eq!(
                    self.replies,
                    recorded,
                    "the runs used {} of the {recorded} replies in `{}`",
                    self.replies,
                    recording.display()
                );
            }
            Mode::Record {
                server,
                nodes,
                parts,
            } => {
                let mut text = String::new();
                for part in &parts {
                    text.push_str(&std::fs::read_to_string(part).unwrap_or_default());
                }
                let asked: Vec<String> = text
                    .lines()
                    .map(|l| {
                        let e: Json = serde_json::from_str(l).expect("a recording line");
                        e["node"].as_str().expect("node").to_string()
                    })
                    .collect();
                assert_eq!(
                    asked, nodes,
                    "the nodes that asked (left) differ from the script of `{}` (right)",
                    self.name
                );
                assert_eq!(server.seen().len(), nodes.len(), "requests the server saw");
                // Whole or not at all: another test may be replaying this recording.
                let path = fixture(self.graph, self.name, "llm.jsonl");
                let tmp = path.with_extension(format!("jsonl.{}", std::process::id()));
                std::fs::write(&tmp, text).expect("write the recording");
                std::fs::rename(&tmp, &path).expect("write the recording");
                eprintln!("wrote {}", path.display());
            }
        }
    }
}

fn zero_durations(v: &mut Json) {
    match v {
        Json::Object(o) => {
            for (k, v) in o.iter_mut() {
                if k == "duration_ms" {
                    *v = json!(0);
                } else {
                    zero_durations(v);
                }
            }
        }
        Json::Array(items) => items.iter_mut().for_each(zero_durations),
        _ => {}
    }
}

async fn output(mut cmd: tokio::process::Command) -> std::process::Output {
    tokio::time::timeout(PROCESS_TIMEOUT, cmd.output())
        .await
        .expect("switchyard finishes in time")
        .expect("switchyard runs")
}

fn fixture(graph: &str, name: &str, ext: &str) -> PathBuf {
    root().join(format!("tests/fixtures/seeds/{graph}/{name}.{ext}"))
}

#[track_caller]
fn read_script(path: &Path) -> Vec<Scripted> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", path.display()));
    let steps: Vec<Json> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("`{}` is not JSON: {e}", path.display()));
    steps
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let node = s["node"]
                .as_str()
                .unwrap_or_else(|| panic!("answer {} of `{}` names no node", i + 1, path.display()))
                .to_string();
            let content = match (&s["content"], &s["json"]) {
                (Json::String(t), Json::Null) => Some(t.clone()),
                (Json::Null, Json::Null) => None,
                (Json::Null, v) => Some(v.to_string()),
                _ => panic!(
                    "answer {} of `{}`: `content` or `json`, not both",
                    i + 1,
                    path.display()
                ),
            };
            // One call (`call`) or several at once (`calls`).
            let calls: Vec<&Json> = match (&s["call"], &s["calls"]) {
                (Json::Null, Json::Array(calls)) => calls.iter().collect(),
                (Json::Null, Json::Null) => Vec::new(),
                (call, Json::Null) => vec![call],
                _ => panic!(
                    "answer {} of `{}`: `call` or `calls`, not both",
                    i + 1,
                    path.display()
                ),
            };
            let tool_calls = calls
                .into_iter()
                .map(|call| {
                    let name = call["name"].as_str().expect("call.name").to_string();
                    let arguments = match &call["arguments"] {
                        Json::String(raw) => raw.clone(),
                        Json::Null => "{}".to_string(),
                        v => v.to_string(),
                    };
                    (name, arguments)
                })
                .collect();
            Scripted {
                node,
                reply: Reply {
                    content,
                    tool_calls,
                },
            }
        })
        .collect()
}

/// Fails with the command that installs the npm test servers when they are missing.
#[track_caller]
fn need_npm_packages() {
    for p in [
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        "node_modules/@modelcontextprotocol/sdk/package.json",
    ] {
        assert!(
            root().join(p).exists(),
            "`{p}` is missing: the seed tests need the npm packages of package.json; run \
             `bash .ci/setup` (or the README's test command `bash .ci/test`)"
        );
    }
}

/// The events as compact lines, one per event, without what varies between runs
/// (durations, pids, server stderr): `> node` starts a node, `< node [writes]` ends it,
/// `a -> b (case)` is a route, consecutive text deltas of a node are joined.
pub(crate) fn trace(events: &[Json]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let s = |v: &Json| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    for e in events {
        let line = match e["event"].as_str().unwrap_or("?") {
            "run_started" => format!("run_started run={} resumed={}", e["run"], e["resumed"]),
            "node_started" => format!("> {}", s(&e["node"])),
            "node_finished" => {
                let writes: Vec<String> = e["writes"]
                    .as_array()
                    .map(|w| w.iter().map(s).collect())
                    .unwrap_or_default();
                let skipped = if e["skipped"] == true { " skipped" } else { "" };
                format!("< {} [{}]{skipped}", s(&e["node"]), writes.join(", "))
            }
            "route_taken" => {
                let case = match &e["case"] {
                    Json::Null => String::new(),
                    c => format!(" ({})", s(c)),
                };
                format!("{} -> {}{case}", s(&e["from"]), s(&e["to"]))
            }
            "interrupted" => format!("interrupted {} {}", s(&e["node"]), e["payload"]),
            "resumed" => format!("resumed {} timed_out={}", s(&e["node"]), e["timed_out"]),
            "limit_reached" => format!("limit_reached {} -> {}", s(&e["limit"]), s(&e["to"])),
            "llm_invocation" => format!(
                "llm {} attempt={} tokens={}+{}{}",
                s(&e["node"]),
                e["attempt"],
                e["tokens_in"],
                e["tokens_out"],
                if e["cache_hit"] == true {
                    " cache_hit"
                } else {
                    ""
                }
            ),
            "tool_call" => format!(
                "tool {}/{} {} attempt={}{}",
                s(&e["server"]),
                s(&e["tool"]),
                e["arguments"],
                e["attempt"],
                if e["is_error"] == true { " error" } else { "" }
            ),
            "text_delta" => {
                let prefix = format!("text {}: ", s(&e["node"]));
                if let Some(last) = lines.last_mut().filter(|l| l.starts_with(&prefix)) {
                    last.push_str(&s(&e["text"]));
                    continue;
                }
                format!("{prefix}{}", s(&e["text"]))
            }
            "server_started" => format!(
                "server_started {} restart={}",
                s(&e["server"]),
                e["restart"]
            ),
            "server_died" => format!("server_died {}", s(&e["server"])),
            "server_stopped" => format!("server_stopped {}", s(&e["server"])),
            "server_stderr" => continue,
            "node_failed" => format!(
                "node_failed {} handled={}: {}",
                s(&e["node"]),
                e["handled"],
                s(&e["message"])
            ),
            "stopped" => format!("stopped next={} step={}", s(&e["next"]), e["step"]),
            "run_finished" => format!(
                "run_finished {} outcome={} steps={} tokens={}",
                s(&e["status"]),
                s(&e["outcome"]),
                e["steps"],
                e["tokens"]
            ),
            // The event's own fields: the envelope's timestamp differs every run.
            other => format!("{other} {}", crate::util::without_envelope(e)),
        };
        lines.push(line);
    }
    lines
}

/// The `run_finished` event of a process (its last).
#[track_caller]
fn finished(ran: &Ran) -> &Json {
    ran.events
        .iter()
        .rev()
        .find(|e| e["event"] == "run_finished")
        .unwrap_or_else(|| panic!("no run_finished event; stderr:\n{}", ran.stderr))
}

/// The node names a run went through, in order (from `node_finished`).
pub(crate) fn path(events: &[Json]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] == "node_finished")
        .map(|e| e["node"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The tool calls of a run: `(tool, arguments, attempt, is_error)`.
pub(crate) fn tool_calls(events: &[Json]) -> Vec<(String, Json, u64, bool)> {
    events
        .iter()
        .filter(|e| e["event"] == "tool_call")
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or("?").to_string(),
                e["arguments"].clone(),
                e["attempt"].as_u64().unwrap_or(0),
                e["is_error"] == true,
            )
        })
        .collect()
}

impl Ran {
    /// Asserts the exit code, showing stderr when it differs.
    #[track_caller]
    pub(crate) fn code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            expected,
            "exit code; stderr:\n{}\nevents:\n{}",
            self.stderr,
            trace(&self.events).join("\n")
        );
        self
    }

    /// The `run_finished` event's status, outcome and response.
    #[track_caller]
    pub(crate) fn ended(&self) -> Json {
        let f = finished(self);
        json!({ "status": f["status"], "outcome": f["outcome"], "response": f["response"] })
    }
}
