//! `mcp_call` against real MCP servers from npm (installed by `.ci/setup`): the
//! reference "everything", filesystem and memory servers, over stdio and streamable
//! HTTP, and the official conformance suite against our client.

use crate::util::{root, switchyard};
use base64::Engine;
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use switchyard::graph::{Graph, Server, ServerTransport};
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::run::{Event, Outcome, Runner};
use switchyard::store::MemoryStore;
use switchyard::tool::{ToolClient, ToolRequest};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// Fails with the command that installs the npm test servers when they are missing.
#[track_caller]
pub(crate) fn need_npm_packages() {
    for p in [
        "node_modules/.bin/node",
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        "node_modules/@modelcontextprotocol/server-memory/dist/index.js",
        "node_modules/@modelcontextprotocol/conformance/dist/index.js",
    ] {
        assert!(
            root().join(p).exists(),
            "`{p}` is missing: the MCP tests need the npm packages of package.json; run the \
             README's test command `bash .ci/test` (it runs `npm ci` through .ci/setup)"
        );
    }
}

/// A fresh temporary directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-mcp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Loads `tests/fixtures/mcp/<name>.toml`, with `@KEY@` placeholders replaced.
#[track_caller]
fn graph(name: &str, vars: &[(&str, &str)]) -> Arc<Graph> {
    need_npm_packages();
    let path = root().join(format!("tests/fixtures/mcp/{name}.toml"));
    let mut text = std::fs::read_to_string(&path).expect("fixture");
    for (k, v) in vars {
        text = text.replace(&format!("@{k}@"), v);
    }
    let mut sources = switchyard::Sources::new();
    let v = switchyard::validate_str(&path, &text, &mut sources);
    assert!(v.is_valid(), "{name} is not valid: {:?}", v.diagnostics);
    let spec = v.spec.as_ref().expect("valid");
    Arc::new(switchyard::compile(spec, &sources).expect("compiles"))
}

/// A runner with a real MCP client; the client's events come on their own channel.
struct Harness {
    runner: Runner,
    client: Arc<McpClient>,
    events: UnboundedReceiver<Event>,
    server_events: UnboundedReceiver<Event>,
    blobs: PathBuf,
}

fn harness(graph: Arc<Graph>, name: &str) -> Harness {
    harness_with(graph, name, |c| c)
}

fn harness_with(
    graph: Arc<Graph>,
    name: &str,
    configure: impl FnOnce(McpClient) -> McpClient,
) -> Harness {
    let blobs = temp_dir(&format!("{name}-blobs"));
    let (tx, server_events) = unbounded_channel();
    let client = Arc::new(configure(
        McpClient::new(&graph.root, BlobStore::new(&blobs))
            .with_events(tx)
            .with_call_timeout(Duration::from_secs(30)),
    ));
    let mut runner = Runner::new(graph, Arc::new(MemoryStore::new())).with_tools(client.clone());
    let events = runner.events();
    Harness {
        runner,
        client,
        events,
        server_events,
        blobs,
    }
}

fn drain(rx: &mut UnboundedReceiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The server events without stderr lines and with pids and durations blanked.
fn lifecycle(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .filter(|e| !matches!(e, Event::ServerStderr { .. } | Event::ToolProgress { .. }))
        .map(|e| match e {
            Event::ServerStarted {
                server, restart, ..
            } => Event::ServerStarted {
                server: server.clone(),
                pid: None,
                restart: *restart,
                duration_ms: 0,
            },
            other => other.clone(),
        })
        .collect()
}

fn started_event(server: &str, restart: u32) -> Event {
    started(server, restart)
}

fn started(server: &str, restart: u32) -> Event {
    Event::ServerStarted {
        server: server.into(),
        pid: None,
        restart,
        duration_ms: 0,
    }
}

fn stopped(server: &str) -> Event {
    Event::ServerStopped {
        server: server.into(),
    }
}

/// The state of a finished thread, with audit durations set to 0.
async fn state(h: &Harness, thread: &str) -> Json {
    let (mut state, _) = h.runner.threads().state(thread, None).await.expect("state");
    if let Some(Json::Array(records)) = state.get_mut("audit") {
        for r in records {
            assert!(r["duration_ms"].is_u64(), "{r}");
            r["duration_ms"] = json!(0);
        }
    }
    state
}

#[track_caller]
fn finished(outcome: Result<Outcome, switchyard::run::RunError>) {
    match outcome {
        Ok(Outcome::Finished { .. }) => {}
        other => panic!("expected a finished run, got {other:?}"),
    }
}

/// The PNG the everything server returns from `get-tiny-image`, from its source.
fn tiny_png() -> Vec<u8> {
    let js =
        std::fs::read_to_string(root().join(
            "node_modules/@modelcontextprotocol/server-everything/dist/tools/get-tiny-image.js",
        ))
        .expect("server source");
    let start = js.find("MCP_TINY_IMAGE = \"").expect("the image constant") + 18;
    let len = js[start..].find('"').expect("closing quote");
    base64::engine::general_purpose::STANDARD
        .decode(&js[start..start + len])
        .expect("base64")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks that a blob reference names a file in the store holding exactly `bytes`.
#[track_caller]
fn assert_blob(reference: &Json, blobs: &Path, bytes: &[u8], mime: &str, ext: &str) {
    let hex = sha256_hex(bytes);
    assert_eq!(
        reference,
        &json!({ "blob": format!("sha256:{hex}"), "mime_type": mime, "bytes": bytes.len() })
    );
    let on_disk = std::fs::read(blobs.join(format!("{hex}.{ext}"))).expect("blob file");
    assert_eq!(sha256_hex(&on_disk), hex);
}

#[tokio::test]
async fn everything_results_of_each_content_type_over_stdio() {
    let mut h = harness(graph("everything", &[]), "everything");
    finished(h.runner.start("t", json!({ "message": "hello" })).await);
    let mut s = state(&h, "t").await;
    let png = tiny_png();
    assert_blob(&s["image"][1], &h.blobs, &png, "image/png", "png");
    s["image"][1] = json!("<blob>");
    assert_eq!(
        s,
        json!({
            "message": "hello",
            "echoed": "Echo: hello",
            // get-env answers with the server's environment as JSON text.
            "env_mark": "from-the-graph",
            // structuredContent, not the text that repeats it.
            "weather": { "temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82 },
            "image": ["Here's the image you requested:", "<blob>", "The image above is the MCP logo."],
            "sum": "The sum of 2 and 3 is 5.",
            "audit": [{
                "tool": "echo",
                "arguments": { "message": "hello" },
                "result": "Echo: hello",
                "is_error": false,
                "duration_ms": 0,
                "attempt": 1,
            }],
        })
    );
    // One server for every node, stopped when the run ended.
    assert_eq!(
        lifecycle(&drain(&mut h.server_events)),
        vec![started("everything", 0), stopped("everything")]
    );
    let calls: Vec<(String, u32, bool)> = drain(&mut h.events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolCall {
                tool,
                attempt,
                is_error,
                ..
            } => Some((tool, attempt, is_error)),
            _ => None,
        })
        .collect();
    let expected: Vec<(String, u32, bool)> = [
        "echo",
        "get-env",
        "get-structured-content",
        "get-tiny-image",
        "get-sum",
    ]
    .iter()
    .map(|t| (t.to_string(), 1, false))
    .collect();
    assert_eq!(calls, expected);
}

#[tokio::test]
async fn schema_violations_and_unknown_tools_take_the_error_route() {
    let mut h = harness(graph("errors", &[]), "errors");
    finished(h.runner.start("t", json!({ "tool_name": "ecoh" })).await);
    assert_eq!(
        state(&h, "t").await,
        json!({
            "tool_name": "ecoh",
            "errors": [
                {
                    "node": "bad_args",
                    "message": "the arguments of `echo` do not fit its inputSchema: at `/message`: 42 is not of type \"string\"",
                },
                {
                    "node": "unknown_tool",
                    "message": "server `everything` has no tool `ecoh`; did you mean `echo`?",
                },
            ],
            // Refused before the call: no retry, and the record says why.
            "audit": [{
                "tool": "echo",
                "arguments": { "message": 42 },
                "result": { "error": "the arguments of `echo` do not fit its inputSchema: at `/message`: 42 is not of type \"string\"" },
                "is_error": true,
                "duration_ms": 0,
                "attempt": 1,
            }],
        })
    );
    let failed: Vec<(String, bool)> = drain(&mut h.events)
        .into_iter()
        .filter_map(|e| match e {
            Event::NodeFailed { node, handled, .. } => Some((node.to_string(), handled)),
            _ => None,
        })
        .collect();
    assert_eq!(
        failed,
        vec![("bad_args".into(), true), ("unknown_tool".into(), true)]
    );
}

#[tokio::test]
async fn a_call_past_its_timeout_is_retried_then_fails_and_the_server_stays_up() {
    let mut h = harness(graph("timeout", &[]), "timeout");
    let began = std::time::Instant::now();
    finished(h.runner.start("t", json!({})).await);
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "the timeout did not cut the 30 s call short: {:?}",
        began.elapsed()
    );
    let message =
        "`trigger-long-running-operation` on server `everything` did not answer within 400ms";
    let record = |attempt: u32| {
        json!({
            "tool": "trigger-long-running-operation",
            "arguments": { "duration": 30, "steps": 1 },
            "result": { "error": message },
            "is_error": true,
            "duration_ms": 0,
            "attempt": attempt,
        })
    };
    assert_eq!(
        state(&h, "t").await,
        json!({
            "error": { "node": "slow", "message": message },
            "after": "Echo: still here",
            "audit": [record(1), record(2)],
        })
    );
    // Timeouts do not kill the server: one start for the whole run.
    assert_eq!(
        lifecycle(&drain(&mut h.server_events)),
        vec![started("everything", 0), stopped("everything")]
    );
}

/// Kills the server shortly after the node `slow` starts, while its call is in flight;
/// the task's result is the pid it killed.
fn kill_during_slow(h: &mut Harness) -> tokio::task::JoinHandle<u32> {
    let client = h.client.clone();
    let mut events = std::mem::replace(&mut h.events, unbounded_channel().1);
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            if matches!(&e, Event::NodeStarted { node, .. } if &**node == "slow") {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let pid = client.pid("everything").await.expect("a running server");
                let status = Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status()
                    .expect("kill runs");
                assert!(status.success());
                return pid;
            }
        }
        panic!("`slow` never started");
    })
}

#[tokio::test]
async fn a_server_killed_mid_call_is_restarted_and_the_retry_succeeds() {
    let mut h = harness(graph("restart", &[]), "restart");
    let killer = kill_during_slow(&mut h);
    finished(h.runner.start("t", json!({})).await);
    let killed = killer.await.expect("killer");
    let gone = "server `everything` is gone: the connection closed during `trigger-long-running-operation` (Transport closed)";
    let mut s = state(&h, "t").await;
    // What the dying server last wrote to stderr may follow; it varies.
    let message = s["audit"][0]["result"]["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.starts_with(gone), "{message}");
    s["audit"][0]["result"]["error"] = json!(gone);
    assert_eq!(
        s,
        json!({
            "echoed": "Echo: before",
            "slow": "Long running operation completed. Duration: 1 seconds, Steps: 2.",
            "audit": [
                {
                    "tool": "trigger-long-running-operation",
                    "arguments": { "duration": 1, "steps": 2 },
                    "result": { "error": gone },
                    "is_error": true,
                    "duration_ms": 0,
                    "attempt": 1,
                },
                {
                    "tool": "trigger-long-running-operation",
                    "arguments": { "duration": 1, "steps": 2 },
                    "result": "Long running operation completed. Duration: 1 seconds, Steps: 2.",
                    "is_error": false,
                    "duration_ms": 0,
                    "attempt": 2,
                },
            ],
        })
    );
    let server = drain(&mut h.server_events);
    let pids: Vec<u32> = server
        .iter()
        .filter_map(|e| match e {
            Event::ServerStarted { pid, .. } => *pid,
            _ => None,
        })
        .collect();
    assert_eq!(pids.len(), 2, "{server:?}");
    assert_eq!(pids[0], killed);
    assert_ne!(pids[1], killed);
    let server = lifecycle(&server);
    assert_eq!(server.len(), 4, "{server:?}");
    assert_eq!(server[0], started("everything", 0));
    assert!(
        matches!(&server[1], Event::ServerDied { server, message } if server == "everything" && message.starts_with(gone)),
        "{:?}",
        server[1]
    );
    assert_eq!(server[2], started("everything", 1));
    assert_eq!(server[3], stopped("everything"));
}

#[tokio::test]
async fn filesystem_server_writes_reads_and_reports_errors() {
    let dir = temp_dir("fs");
    // The server resolves symlinks; so must the paths we compare with.
    let dir = dir.canonicalize().expect("canonical temp dir");
    let png = tiny_png();
    std::fs::write(dir.join("logo.png"), &png).expect("write png");
    let d = dir.to_str().expect("utf-8 path");
    let mut h = harness(graph("filesystem", &[("DIR", d)]), "fs");
    finished(h.runner.start("t", json!({})).await);
    assert_eq!(
        std::fs::read_to_string(dir.join("note.txt")).expect("written by the server"),
        "hello from switchyard"
    );
    let mut s = state(&h, "t").await;
    // The server mirrors its content in structuredContent; the image in it is a blob.
    assert_blob(
        &s["picture"]["content"][0],
        &h.blobs,
        &png,
        "image/png",
        "png",
    );
    s["picture"]["content"][0] = json!("<blob>");
    assert_eq!(
        s,
        json!({
            // This server answers with structuredContent, which wins over its text.
            "text": { "content": "hello from switchyard" },
            "listing": { "content": "[FILE] logo.png\n[FILE] note.txt" },
            "picture": { "content": ["<blob>"] },
            "error": {
                "node": "missing",
                "message": format!("`read_text_file` reported an error: ENOENT: no such file or directory, open '{d}/missing.txt'"),
            },
        })
    );
    let started = lifecycle(&drain(&mut h.server_events));
    assert_eq!(started, vec![started_event("fs", 0), stopped("fs")]);
}

#[tokio::test]
async fn memory_server_keeps_entities_in_its_file() {
    let dir = temp_dir("memory");
    let file = dir.join("memory.jsonl");
    let mut h = harness(
        graph("memory", &[("FILE", file.to_str().expect("utf-8"))]),
        "memory",
    );
    finished(h.runner.start("t", json!({})).await);
    let entity = json!({ "name": "switchyard", "entityType": "project", "observations": ["runs graphs from TOML"] });
    assert_eq!(
        state(&h, "t").await,
        json!({
            "created": { "entities": [entity] },
            "graph": { "entities": [entity], "relations": [] },
        })
    );
    let saved = std::fs::read_to_string(&file).expect("the memory file");
    let line: Json = serde_json::from_str(saved.trim()).expect("one JSON line");
    assert_eq!(
        line,
        json!({ "type": "entity", "name": "switchyard", "entityType": "project", "observations": ["runs graphs from TOML"] })
    );
    assert_eq!(
        lifecycle(&drain(&mut h.server_events)),
        vec![started_event("memory", 0), stopped("memory")]
    );
}

/// The everything server in streamable-HTTP mode on a free port; killed on drop.
pub(crate) struct HttpServer {
    child: std::process::Child,
    pub(crate) port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_server() -> HttpServer {
    listening(
        &[
            "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            "streamableHttp",
        ],
        &[],
    )
}

#[tokio::test]
async fn streamable_http_transport() {
    let server = http_server();
    let port = server.port.to_string();
    let mut h = harness(graph("http", &[("PORT", &port)]), "http");
    finished(h.runner.start("t", json!({})).await);
    let mut s = state(&h, "t").await;
    assert_blob(&s["image"][1], &h.blobs, &tiny_png(), "image/png", "png");
    s["image"][1] = json!("<blob>");
    assert_eq!(
        s,
        json!({
            "echoed": "Echo: over http",
            "weather": { "temperature": 73, "conditions": "Sunny / Clear", "humidity": 48 },
            "image": ["Here's the image you requested:", "<blob>", "The image above is the MCP logo."],
        })
    );
    assert_eq!(
        lifecycle(&drain(&mut h.server_events)),
        vec![
            Event::ServerStarted {
                server: "everything".into(),
                pid: None,
                restart: 0,
                duration_ms: 0,
            },
            stopped("everything")
        ]
    );
    drop(server);
}

#[tokio::test]
async fn http_server_that_is_not_there_is_a_transient_connect_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let client = McpClient::new(root(), BlobStore::new(temp_dir("nohttp")));
    let server = http(
        "nowhere",
        format!("http://127.0.0.1:{port}/mcp"),
        Vec::new(),
    );
    let e = client
        .list_tools(&server)
        .await
        .expect_err("nothing listens");
    assert!(e.transient, "{e:?}");
    assert!(
        e.message.starts_with(&format!(
            "cannot reach server `nowhere` at `http://127.0.0.1:{port}/mcp`: "
        )),
        "{}",
        e.message
    );
}

/// A server that redirects elsewhere does not get the graph's headers sent there: a
/// redirect to another origin is not followed (nor a 302, which would turn the POST
/// into a GET without its message); the error says what the server answered.
#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed_with_the_headers() {
    use crate::llm::server::{Answer, Server as Scripted};
    let elsewhere = Scripted::start(Vec::new()).await;
    let target = elsewhere.url().replace("/v1", "/mcp");
    let redirect = |status| Answer::Body {
        status,
        headers: vec![("location".into(), target.clone())],
        body: String::new(),
    };
    for status in [307, 302] {
        let here = Scripted::start(vec![redirect(status)]).await;
        let client = McpClient::new(root(), BlobStore::new(temp_dir("redirect")));
        let server = http(
            "moved",
            here.url().replace("/v1", "/mcp"),
            vec![("X-Api-Key".into(), "k-123".into())],
        );
        let e = client
            .list_tools(&server)
            .await
            .expect_err("the redirect is not followed");
        let phrase = reqwest::StatusCode::from_u16(status).unwrap().to_string();
        assert!(e.message.contains(&phrase), "{phrase}: {}", e.message);
        assert_eq!(here.seen().len(), 1, "{status}");
        assert_eq!(here.seen()[0].header("x-api-key"), Some("k-123"));
        assert!(
            elsewhere.seen().is_empty(),
            "{status}: {:?}",
            elsewhere.seen()
        );
    }
    // A 307 to the same origin is followed, headers and message kept.
    let same = Scripted::start(vec![
        Answer::Body {
            status: 307,
            headers: vec![("location".into(), "/moved".into())],
            body: String::new(),
        },
        Answer::Body {
            status: 503,
            headers: Vec::new(),
            body: String::new(),
        },
    ])
    .await;
    let client = McpClient::new(root(), BlobStore::new(temp_dir("redirect")));
    let server = http(
        "moved",
        same.url().replace("/v1", "/mcp"),
        vec![("X-Api-Key".into(), "k-123".into())],
    );
    client
        .list_tools(&server)
        .await
        .expect_err("503 at the end");
    let seen = same.seen();
    assert_eq!(
        seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(),
        ["/mcp", "/moved"]
    );
    assert!(seen.iter().all(|s| s.header("x-api-key") == Some("k-123")));
    assert_eq!(seen[0].body, seen[1].body, "the message went along");
}

/// A streamable-HTTP server at `url`, sent `headers`, with no OAuth settings.
fn http(name: &str, url: String, headers: Vec<(String, String)>) -> Server {
    Server {
        name: name.into(),
        transport: ServerTransport::Http {
            url,
            headers,
            oauth: Default::default(),
        },
        roots: Vec::new(),
        sampling: false,
        protocol: Default::default(),
    }
}

fn stdio(name: &str, command: &str, args: &[&str]) -> Server {
    Server {
        name: name.into(),
        transport: ServerTransport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            env_remove: Vec::new(),
            cwd: root(),
        },
        roots: Vec::new(),
        sampling: false,
        protocol: Default::default(),
    }
}

#[tokio::test]
async fn a_server_that_answers_garbage_or_does_not_exist_is_a_clear_error() {
    need_npm_packages();
    let (tx, mut rx) = unbounded_channel();
    let client = McpClient::new(root(), BlobStore::new(temp_dir("garbage")))
        .with_events(tx)
        .with_handshake_timeout(Duration::from_secs(10));
    let garbage = stdio(
        "garbage",
        "node_modules/.bin/node",
        &["tests/fixtures/mcp/garbage_server.js"],
    );
    let e = client.list_tools(&garbage).await.expect_err("no handshake");
    assert!(
        e.message
            .starts_with("server `garbage` failed the MCP handshake: "),
        "{}",
        e.message
    );
    assert!(
        e.message.ends_with(
            "; its stderr ended with: garbage server: starting | garbage server: giving up"
        ),
        "{}",
        e.message
    );
    let request = ToolRequest::new(
        stdio("missing", "no-such-mcp-server", &[]),
        "x",
        json!({}),
        "t/0/1/0",
    );
    let e = client.call(&request).await.expect_err("nothing to start");
    assert!(!e.transient);
    assert_eq!(
        e.message,
        format!(
            "cannot start server `missing`: `no-such-mcp-server` is not a program on PATH nor a file relative to the graph root `{}`",
            root().display()
        )
    );
    client.shutdown().await;
    let stderr: Vec<Event> = drain(&mut rx);
    assert_eq!(
        stderr,
        vec![
            Event::ServerStderr {
                server: "garbage".into(),
                line: "garbage server: starting".into()
            },
            Event::ServerStderr {
                server: "garbage".into(),
                line: "garbage server: giving up".into()
            },
        ]
    );
}

#[test]
fn server_settings_read_the_environment_when_the_server_starts() {
    need_npm_packages();
    let run = |env: &[(&str, &str)]| {
        let mut cmd = switchyard(&[
            "run",
            "tests/fixtures/mcp/env_vars.toml",
            "--store",
            "memory",
        ]);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        cmd.run()
    };
    let out = run(&[
        ("SWITCHYARD_TEST_TRANSPORT", "stdio"),
        ("SWITCHYARD_TEST_MARK", "from-the-environment"),
    ])
    .code(0);
    assert_eq!(out.stdout, "from-the-environment and ${literal}\n");
    // A default stands in for a variable that is not set.
    let out = run(&[("SWITCHYARD_TEST_TRANSPORT", "stdio")]).code(0);
    assert_eq!(out.stdout, "unset and ${literal}\n");
    // A variable without a default must be set.
    let out = run(&[]).code(1);
    assert_eq!(
        out.stderr.lines().last().unwrap(),
        "error: node `read_env` failed: `get-env`: cannot start server `everything`: `args`: the environment variable `SWITCHYARD_TEST_TRANSPORT` is not set (write `${SWITCHYARD_TEST_TRANSPORT:-default}` to give a default)"
    );
}

#[test]
fn tools_lists_each_servers_tools_with_their_schemas() {
    need_npm_packages();
    let out = switchyard(&[
        "tools",
        "tests/fixtures/mcp/everything.toml",
        "--format",
        "json",
    ])
    .run()
    .code(0);
    let listed: Json = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["server"], "everything");
    let names: Vec<&str> = listed[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "echo",
            "get-annotated-message",
            "get-env",
            "get-resource-links",
            "get-resource-reference",
            "get-structured-content",
            "get-sum",
            "get-tiny-image",
            "gzip-file-as-resource",
            "toggle-simulated-logging",
            "toggle-subscriber-updates",
            "trigger-long-running-operation",
            // Offered because the client declares that it takes elicitations.
            "trigger-elicitation-request",
            "simulate-research-query",
        ]
    );
    assert_eq!(
        listed[0]["tools"][0],
        json!({
            "name": "echo",
            "description": "Echoes back the input string",
            "input_schema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": { "message": { "type": "string", "description": "Message to echo" } },
                "required": ["message"],
            },
            "output_schema": null,
        })
    );
    // A tool that promises a structured result says its shape.
    let weather = listed[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get-structured-content")
        .unwrap();
    assert_eq!(
        weather["output_schema"]["required"],
        json!(["temperature", "conditions", "humidity"])
    );
    let out = switchyard(&[
        "tools",
        "tests/fixtures/mcp/everything.toml",
        "--server",
        "everything",
    ])
    .run()
    .code(0);
    let head: Vec<&str> = out.stdout.lines().take(5).collect();
    assert_eq!(
        head,
        [
            "everything: 14 tools",
            "  echo",
            "    Echoes back the input string",
            r#"    input: {"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"message":{"type":"string","description":"Message to echo"}},"required":["message"]}"#,
            "    result: its content (text parsed as JSON when it is JSON; images as blob references)",
        ]
    );
    assert!(
        out.stdout.contains(r#"    result: {"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"temperature":{"type":"number","description":"Temperature in celsius"},"#),
        "{}",
        out.stdout
    );
    assert_eq!(out.stderr, "");
    let out = switchyard(&[
        "tools",
        "tests/fixtures/mcp/everything.toml",
        "--server",
        "everythin",
    ])
    .run()
    .code(1);
    assert_eq!(
        out.stderr,
        "error: `tests/fixtures/mcp/everything.toml` has no server `everythin`; did you mean `everything`?\n"
    );
}

#[test]
fn validate_online_checks_tool_names_and_literal_arguments() {
    need_npm_packages();
    switchyard(&["validate", "tests/fixtures/mcp/err_online.toml"])
        .run()
        .code(0);
    let out = switchyard(&["validate", "--online", "tests/fixtures/mcp/err_online.toml"])
        .run()
        .code(3);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        r#"error: server `everything` has no tool `ecoh`
   --> tests/fixtures/mcp/err_online.toml:23:8
   |
23 | tool = "ecoh"
   |        ^^^^^^ no tool has this name
   |
   = help: did you mean `echo`?

error: the arguments of `get-sum` do not fit its inputSchema
   --> tests/fixtures/mcp/err_online.toml:31:14
   |
31 | args = { a = "'two'", b = "topic" }
   |              ^^^^^^^ at `/a`: "two" is not of type "number"

error: the arguments of `get-structured-content` do not fit its inputSchema
   --> tests/fixtures/mcp/err_online.toml:38:21
   |
38 | args = { location = "'Paris'", units = 3 }
   |                     ^^^^^^^^^ at `/location`: "Paris" is not one of "New York", "Chicago" or "Los Angeles"

error: field `topic` of type `string` cannot hold the result of `get-structured-content`
   --> tests/fixtures/mcp/err_online.toml:39:10
   |
39 | output = "topic"
   |          ^^^^^^^ the tool's outputSchema has the top-level type `object`
   |
   = help: change the field's type, or write the result to another field

error: field `weathers` holds items of type `string`, which cannot hold a result of `get-structured-content`
   --> tests/fixtures/mcp/err_online.toml:49:10
   |
49 | output = "weathers"
   |          ^^^^^^^^^^ the tool's outputSchema has the top-level type `object`
   |
   = help: change the field's type, or write the result to another field

tests/fixtures/mcp/err_online.toml: 5 errors
"#
    );
    let out = switchyard(&["validate", "--online", "tests/fixtures/mcp/everything.toml"])
        .run()
        .code(0);
    assert_eq!(
        out.stdout,
        "tests/fixtures/mcp/everything.toml: ok (5 nodes, 7 state fields)\n"
    );
}

/// Runs one client scenario of the official conformance suite against
/// `switchyard mcp-conformance-client`, under Node 22 from npm.
#[track_caller]
fn conformance(scenario: &str, check: &str, description: &str) {
    conformance_checks(scenario, &[(check, description)]);
}

/// Runs a client scenario of the suite; every check it reports must be one of `expected`
/// (id and description), in order, each a success.
fn conformance_checks(scenario: &str, expected: &[(&str, &str)]) {
    let checks = conformance_report(scenario);
    let wanted: Vec<String> = expected
        .iter()
        .map(|(check, description)| format!("{check} SUCCESS {description}"))
        .collect();
    assert_eq!(checks, wanted, "conformance scenario `{scenario}`");
}

/// Runs a client scenario of the suite, which must pass with no failure and no
/// warning; the checks it reports (`id STATUS description`, INFO lines left out).
fn conformance_report(scenario: &str) -> Vec<String> {
    let client = format!(
        "{} mcp-conformance-client",
        env!("CARGO_BIN_EXE_switchyard")
    );
    conformance_report_of(scenario, &client, &[])
}

/// The suite's report of `scenario` against `client` (a command line the suite
/// appends the server's URL to), started with `env`.
fn conformance_report_of(scenario: &str, client: &str, env: &[(&str, String)]) -> Vec<String> {
    conformance_run(scenario, client, env).0
}

/// The suite's checks of `scenario`, and its whole report (the client's stderr
/// included).
fn conformance_run(scenario: &str, client: &str, env: &[(&str, String)]) -> (Vec<String>, String) {
    let (checks, stdout, stderr, status) = conformance_raw(scenario, client, env);
    let n = checks.len();
    assert!(
        status.success()
            && n > 0
            && stderr.contains(&format!("Passed: {n}/{n}, 0 failed, 0 warnings"))
            && checks.iter().all(|c| c.contains(" SUCCESS ")),
        "conformance scenario `{scenario}` failed ({status}): {checks:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
    );
    (checks, stderr)
}

/// The suite's checks of `scenario` (`<id> <STATUS> <description>`), its stdout and
/// stderr, and how it exited; nothing asserted. `next:SCENARIO` is a scenario of the
/// newest suite (`conformance-next` in package.json, 0.2.0-alpha.12), the others
/// of the stable one (0.1.16).
fn conformance_raw(
    scenario: &str,
    client: &str,
    env: &[(&str, String)],
) -> (Vec<String>, String, String, std::process::ExitStatus) {
    need_npm_packages();
    let (suite, scenario) = match scenario.strip_prefix("next:") {
        Some(s) => ("node_modules/conformance-next/dist/index.js", s),
        None => (
            "node_modules/@modelcontextprotocol/conformance/dist/index.js",
            scenario,
        ),
    };
    let cwd = temp_dir(&format!("conformance-{scenario}"));
    let out = Command::new(root().join("node_modules/.bin/node"))
        .arg(root().join(suite))
        .args(["client", "--scenario", scenario, "--command", client])
        .current_dir(&cwd)
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("the conformance suite runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = strip_ansi(&String::from_utf8_lossy(&out.stderr));
    // `<time> [<check id, padded>] <STATUS> <description>`, without the INFO lines.
    let checks: Vec<String> = stderr
        .lines()
        .filter_map(|l| {
            let (id, rest) = l.split_once(" [")?.1.split_once(']')?;
            let rest = rest.trim();
            // Only the suite's own lines: the client's stderr is echoed too.
            let status = rest.split(' ').next()?;
            ["SUCCESS", "FAILURE", "WARNING"]
                .contains(&status)
                .then(|| format!("{} {rest}", id.trim()))
        })
        .collect();
    (checks, stdout.into_owned(), stderr, out.status)
}

/// The suite colours its report whatever the terminal; the escapes are removed.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn conformance_initialize() {
    conformance(
        "initialize",
        "mcp-client-initialization",
        "Validates that MCP client properly initializes with server",
    );
}

/// A tool's response stream that the server closes early is resumed as SEP-1699 says:
/// a GET after the `retry` interval the server sent, with `Last-Event-ID`, and the
/// result read from it.
#[test]
fn conformance_sse_retry() {
    let client = format!(
        "{} mcp-conformance-client",
        env!("CARGO_BIN_EXE_switchyard")
    );
    let (checks, _, stderr, _) = conformance_raw("sse-retry", &client, &[]);
    // Reconnecting early, or ignoring `retry`, is a FAILURE; a reconnect up to 500 ms
    // late is the suite's WARNING, which a loaded machine may cause: taken.
    let timing = checks.get(1).map(String::as_str).unwrap_or_default();
    assert!(
        timing.starts_with("client-sse-retry-timing SUCCESS ")
            || timing.starts_with("client-sse-retry-timing WARNING "),
        "{checks:?}\n{stderr}"
    );
    assert_eq!(
        [checks[0].as_str(), checks[2].as_str()],
        [
            "client-sse-graceful-reconnect SUCCESS Client reconnects via GET after SSE stream is closed gracefully",
            "client-sse-last-event-id SUCCESS Client SHOULD send Last-Event-ID header on reconnection for resumability",
        ],
        "{stderr}"
    );
    assert_eq!(checks.len(), 3, "{checks:?}");
}

/// OAuth 2.1: every authorization scenario of the suite, each with every check it
/// reports (a snapshot per scenario): discovery in its variants (from the challenge,
/// a tenant path, the 2025-03-26 layouts), client registration (dynamic, pre-registered,
/// a client-ID metadata document), PKCE, the token endpoint's authentication methods,
/// scopes (from the challenge, the metadata, a step-up, a bounded retry), resource
/// indicators, offline access, the client-credentials grant with a secret and a
/// signed assertion, cross-app access, a workload's own JWT, and DPoP.
#[test]
fn conformance_oauth() {
    for scenario in [
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/basic-cimd",
        "auth/scope-from-www-authenticate",
        "auth/scope-step-up",
        "auth/scope-retry-limit",
        "auth/pre-registration",
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/client-credentials-jwt",
        "auth/client-credentials-basic",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/resource-mismatch",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/cross-app-access-complete-flow",
        // From the newest suite (0.2.0-alpha.12): a workload's own JWT (SEP-1933), and
        // DPoP-bound tokens (SEP-1932), with nonces asked by both servers.
        "next:auth/wif-jwt-bearer",
        "next:auth/dpop",
        "next:auth/dpop-nonce",
    ] {
        let checks = conformance_report(scenario);
        let name = scenario.trim_start_matches("next:").replace('/', "_");
        insta::assert_snapshot!(name, checks.join("\n"));
    }
}

/// A server that keeps refusing a scope already granted is authorized once, then the
/// request fails with why, as the server's refusal (it is not restarted for it).
#[test]
fn a_scope_that_granting_does_not_satisfy_is_refused_with_why() {
    let client = format!(
        "{} mcp-conformance-client",
        env!("CARGO_BIN_EXE_switchyard")
    );
    let (_, report) = conformance_run("auth/scope-retry-limit", &client, &[]);
    assert!(
        report.contains(
            "error: server `conformance` refused `tools/list`: OAuth: the server refuses the request for want of scope `mcp:admin` (403 insufficient_scope), and a wider grant did not help or is not allowed"
        ),
        "{report}"
    );
}

/// A graph's `[servers.x.oauth]` settings, with their `${...}` read from the
/// environment, reach the flow: the client-credentials grant with a secret (HTTP Basic)
/// and with a signed assertion, a pre-registered client's authorization code,
/// cross-app access (an identity assertion from the person's identity provider), and a
/// workload's own JWT read from a file (SEP-1933), and a DPoP-bound token that asks
/// for no setting at all (SEP-1932).
#[test]
fn a_graphs_oauth_settings_choose_the_grant_and_the_client() {
    let fixtures = root().join("tests/fixtures/mcp/oauth");
    let client = format!(
        "{} {}",
        root().join("node_modules/.bin/node").display(),
        fixtures.join("client.mjs").display()
    );
    for (graph, scenario, proof) in [
        (
            "client_credentials.toml",
            "auth/client-credentials-basic",
            "client-credentials-basic-auth SUCCESS Client successfully authenticated with client_secret_basic",
        ),
        (
            "signed_assertion.toml",
            "auth/client-credentials-jwt",
            "client-credentials-jwt-verified SUCCESS Client successfully authenticated with signed JWT assertion",
        ),
        (
            "pre_registered.toml",
            "auth/pre-registration",
            "pre-registration-auth SUCCESS Client correctly used pre-registered credentials when server does not support DCR",
        ),
        (
            "identity_assertion.toml",
            "auth/cross-app-access-complete-flow",
            "complete-flow-jwt-bearer SUCCESS Successfully verified client auth, ID-JAG claims, and exchanged for access token",
        ),
        (
            "bound_token.toml",
            "next:auth/dpop-nonce",
            "sep-1932-client-rs-nonce SUCCESS On a use_dpop_nonce challenge from the MCP server, the client retries the request with the server-supplied nonce (RFC 9449 §9)",
        ),
        (
            "workload.toml",
            "next:auth/wif-jwt-bearer",
            "wif-assertion-verified SUCCESS Workload JWT assertion verified — signature, audience, and expiry are valid (iss not validated; keypair is run-scoped)",
        ),
    ] {
        let env = [
            ("SWITCHYARD", env!("CARGO_BIN_EXE_switchyard").to_string()),
            ("GRAPH", fixtures.join(graph).display().to_string()),
        ];
        let checks = conformance_report_of(scenario, &client, &env);
        assert!(
            checks.iter().any(|c| c == proof),
            "{graph}: no `{proof}` in {checks:#?}"
        );
        // The token reached the server: as a bearer token, or (DPoP) bound to a key.
        assert!(
            checks.iter().any(|c| {
                c.starts_with("valid-bearer-token SUCCESS")
                    || c.starts_with("sep-1932-client-dpop-auth-scheme SUCCESS")
            }),
            "{graph}: {checks:#?}"
        );
    }
}

/// A DPoP-bound token over its life (tests/servers/dpop_server.mjs, an MCP server
/// and its authorization server that check every proof with `jose`): the first
/// grant's token expires and is refreshed with a proof; a tool that wants more scope
/// gets a wider sign-in, also with a proof; every request carries `Authorization:
/// DPoP` and a proof that verifies.
#[test]
fn a_bound_token_is_refreshed_and_widened_with_proofs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    let server = node_server(
        "tests/servers/dpop_server.mjs",
        &[("LOG", log.to_str().unwrap())],
    );
    let out = switchyard(&[
        "run",
        "tests/fixtures/mcp/oauth/bound_token_life.toml",
        "--store",
        "none",
    ])
    .env("DPOP_URL", &format!("http://127.0.0.1:{}/mcp", server.port))
    .run()
    .code(0);
    assert_eq!(
        out.stdout, "at-2 read / at-3 read write\n",
        "{}",
        out.stderr
    );
    let seen: Vec<Json> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mcp = |method: &str, token: &str| json!({ "at": "mcp", "method": method, "scheme": "DPoP", "token": token, "proof": "valid" });
    let token = |grant: &str| json!({ "at": "token", "grant": grant, "proof": "valid" });
    assert_eq!(
        seen,
        [
            json!({ "at": "mcp", "token": null }),
            token("authorization_code"),
            mcp("initialize", "at-1"),
            mcp("notifications/initialized", "at-1"),
            mcp("tools/list", "at-1"),
            // Expired on its fourth use: refreshed, and the call sent again.
            mcp("tools/call", "at-1"),
            token("refresh_token"),
            mcp("tools/call", "at-2"),
            // `write` wants scope `write`: a wider grant, and the call sent again.
            mcp("tools/call", "at-2"),
            token("authorization_code"),
            mcp("tools/call", "at-3"),
        ]
    );
}

/// A workload's JWT bearer grant that the authorization server refuses is the
/// answer: the error says why, and neither the grant nor another grant is tried again
/// (SEP-1933; the suite warns on either).
#[test]
fn a_refused_workload_grant_is_not_tried_again_nor_replaced() {
    let fixtures = root().join("tests/fixtures/mcp/oauth");
    let client = format!(
        "{} {}",
        root().join("node_modules/.bin/node").display(),
        fixtures.join("client.mjs").display()
    );
    let env = [
        ("SWITCHYARD", env!("CARGO_BIN_EXE_switchyard").to_string()),
        (
            "GRAPH",
            fixtures.join("workload_refused.toml").display().to_string(),
        ),
    ];
    let (checks, _, stderr, _) = conformance_raw("next:auth/wif-jwt-bearer", &client, &env);
    assert_eq!(
        checks,
        [
            "prm-pathbased-requested SUCCESS Client requested PRM metadata at path-based location",
            "authorization-server-metadata SUCCESS Client requested authorization server metadata",
            "token-request SUCCESS Client requested access token",
            "wif-assertion-verified SUCCESS Workload JWT assertion verified — signature, audience, and expiry are valid (iss not validated; keypair is run-scoped)",
        ],
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "error: cannot reach server `api` at `${MCP_URL}`: OAuth: the JWT bearer grant of the workload's token was refused (400 Bad Request): invalid_scope Requested scope is not permitted for this grant\n"
        ),
        "{stderr}"
    );
}

/// Custom headers (SEP-2243, from the newest suite): a tool's parameters marked
/// `x-mcp-header` are mirrored as `Mcp-Param-*` headers, encoded where a header
/// cannot carry them as they are, and left out for a null (an optional parameter
/// given as null is not sent: its type takes none).
#[test]
fn conformance_custom_headers() {
    let checks = conformance_report("next:http-custom-headers");
    for id in [
        "sep-2243-client-supports-custom-headers SUCCESS",
        "sep-2243-client-base64-unsafe SUCCESS Client sends correct Mcp-Param-NonAscii header (string value)",
        "sep-2243-client-omit-null SUCCESS",
    ] {
        assert!(
            checks.iter().any(|c| c.starts_with(id)),
            "no `{id}` in {checks:#?}"
        );
    }
}

/// The newest protocol (2026-07-28, from the newest suite): no `initialize`; a
/// `server/discover`, then every request carrying its version and metadata; and the
/// authorization scenarios of that version (the issuer in the redirect, offline
/// access, a server moving to another authorization server). The suite names the
/// version, which the conformance client takes as `protocol = "auto"`.
#[test]
fn conformance_newest_protocol() {
    for scenario in [
        "request-metadata",
        "http-standard-headers",
        "tools_call",
        "auth/iss-supported",
        "auth/iss-not-advertised",
        "auth/authorization-server-migration",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
    ] {
        let checks = conformance_report(&format!("next:{scenario}"));
        assert!(!checks.is_empty(), "{scenario}");
    }
}

/// A graph's `protocol = "2026-07-28"` reaches the session: the suite's server of
/// that version, which has no `initialize`, is listed and checked.
#[test]
fn a_graphs_server_speaks_the_protocol_it_names() {
    let fixtures = root().join("tests/fixtures/mcp");
    let client = format!(
        "{} {}",
        root().join("node_modules/.bin/node").display(),
        fixtures.join("oauth/client.mjs").display()
    );
    let env = [
        ("SWITCHYARD", env!("CARGO_BIN_EXE_switchyard").to_string()),
        (
            "GRAPH",
            fixtures.join("newest_protocol.toml").display().to_string(),
        ),
    ];
    let checks = conformance_report_of("next:request-metadata", &client, &env);
    for id in [
        "sep-2575-http-client-sends-version-header SUCCESS",
        "sep-2575-client-populates-meta SUCCESS",
    ] {
        assert!(
            checks.iter().any(|c| c.starts_with(id)),
            "no `{id}` in {checks:#?}"
        );
    }
}

/// An elicitation accepted with nothing filled in takes the schema's defaults.
#[test]
fn conformance_elicitation_defaults() {
    conformance_checks(
        "elicitation-sep1034-client-defaults",
        &[
            (
                "client-elicitation-sep1034-string-default",
                "Client applies string default value for elicitation",
            ),
            (
                "client-elicitation-sep1034-integer-default",
                "Client applies integer default value for elicitation",
            ),
            (
                "client-elicitation-sep1034-number-default",
                "Client applies number default value for elicitation",
            ),
            (
                "client-elicitation-sep1034-enum-default",
                "Client applies enum default value for elicitation",
            ),
            (
                "client-elicitation-sep1034-boolean-default",
                "Client applies boolean default value for elicitation",
            ),
        ],
    );
}

#[test]
fn conformance_tools_call() {
    conformance(
        "tools_call",
        "tool-add-numbers",
        "Validates that the add_numbers tool works correctly",
    );
}

#[tokio::test]
async fn servers_stop_when_the_run_pauses_and_start_again_on_resume() {
    let mut h = harness(graph("pause", &[]), "pause");
    let outcome = h.runner.start("t", json!({})).await.expect("runs");
    assert_eq!(
        outcome,
        Outcome::Interrupted {
            node: "ask".into(),
            payload: json!({ "question": "go on?" }),
        }
    );
    assert_eq!(
        lifecycle(&drain(&mut h.server_events)),
        vec![started("everything", 0), stopped("everything")]
    );
    finished(
        h.runner
            .resume("t", Some(json!({ "word": "two" })), false)
            .await,
    );
    assert_eq!(
        state(&h, "t").await,
        json!({ "first": "Echo: one", "answer": { "word": "two" }, "second": "Echo: two" })
    );
    // A fresh start, not a restart: the pause shut the server down on purpose.
    assert_eq!(
        lifecycle(&drain(&mut h.server_events)),
        vec![started("everything", 0), stopped("everything")]
    );
}

#[tokio::test]
async fn a_server_that_dies_more_often_than_allowed_is_not_started_again() {
    let mut h = harness_with(graph("restart", &[]), "no-restarts", |c| {
        c.with_max_restarts(0)
    });
    let killer = kill_during_slow(&mut h);
    let e = h
        .runner
        .start("t", json!({}))
        .await
        .expect_err("the node fails");
    killer.await.expect("killer");
    assert_eq!(
        e.to_string(),
        "node `slow` failed: `trigger-long-running-operation`: server `everything` died 1 time, more than the 0 restarts allowed; it is not started again"
    );
    let (s, _) = h.runner.threads().state("t", None).await.expect("state");
    let attempts: Vec<(u64, bool)> = s["audit"]
        .as_array()
        .expect("audit")
        .iter()
        .map(|r| {
            (
                r["attempt"].as_u64().unwrap(),
                r["is_error"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(attempts, [(1, true), (2, true)]);
    let server = lifecycle(&drain(&mut h.server_events));
    assert_eq!(server.len(), 2, "{server:?}");
    assert_eq!(server[0], started("everything", 0));
    assert!(matches!(&server[1], Event::ServerDied { .. }), "{server:?}");
}

#[test]
fn stdio_servers_do_not_get_the_model_key() {
    need_npm_packages();
    let out = switchyard(&[
        "run",
        "tests/fixtures/mcp/env_key.toml",
        "--store",
        "memory",
    ])
    .env("OPENAI_API_KEY", "sk-never-to-a-server")
    .env("SWITCHYARD_MARK", "inherited")
    .run()
    .code(0);
    // The server saw the rest of the environment, not the key.
    assert_eq!(out.stdout, "key=no mark=inherited\n");
    assert!(!out.stderr.contains("sk-never"), "{}", out.stderr);
}

#[tokio::test]
async fn an_http_servers_url_shows_as_written_in_errors() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let client = McpClient::new(root(), BlobStore::new(temp_dir("secreturl")));
    // A token in the query, from the environment (HOME stands in for a secret here).
    let server = http(
        "nowhere",
        format!("http://127.0.0.1:{port}/mcp?token=${{HOME}}"),
        Vec::new(),
    );
    let e = client
        .list_tools(&server)
        .await
        .expect_err("nothing listens");
    let home = std::env::var("HOME").expect("HOME is set");
    assert!(
        e.message.starts_with(&format!(
            "cannot reach server `nowhere` at `http://127.0.0.1:{port}/mcp?token=${{HOME}}`: "
        )),
        "{}",
        e.message
    );
    assert!(
        !e.message.contains(&format!("token={home}")),
        "{}",
        e.message
    );
}

/// `tests/servers/auth_http.mjs` on a free port, wanting `token`; killed on drop.
fn auth_server(token: &str) -> HttpServer {
    node_server("tests/servers/auth_http.mjs", &[("AUTH_TOKEN", token)])
}

/// A node script of tests/servers on a free port (`PORT`), with `env`, once it
/// listens; killed on drop.
pub(crate) fn node_server(script: &str, env: &[(&str, &str)]) -> HttpServer {
    listening(&[script], env)
}

/// Node running `args` with `PORT` set to a free port, once it listens there. A port
/// found free can be taken by another test's server before this one binds it (this
/// one then exits, and the port answers, but not for it): then again on another port.
fn listening(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
    need_npm_packages();
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(root().join("node_modules/.bin/node"))
            .args(args)
            .env("PORT", port.to_string())
            .envs(env.iter().copied())
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the HTTP server");
        let mut server = HttpServer { child, port };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the HTTP server did not listen on port {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Listening is ours only if the server still runs a moment later.
        std::thread::sleep(Duration::from_millis(200));
        if server
            .child
            .try_wait()
            .expect("the server's status")
            .is_none()
        {
            return server;
        }
    }
    panic!("no free port kept for `{}` after 5 tries", args.join(" "))
}

#[test]
fn an_http_server_gets_the_headers_the_graph_gives_it_from_the_environment() {
    const TOKEN: &str = "tok-7f3a9c2e51";
    let server = auth_server(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("auth_http.toml");
    std::fs::write(
        &graph,
        std::fs::read_to_string(root().join("tests/fixtures/mcp/auth_http.toml"))
            .unwrap()
            .replace("@PORT@", &server.port.to_string())
            .replace(
                "root = \"../../..\"",
                &format!("root = {:?}", root().display().to_string()),
            ),
    )
    .unwrap();
    let graph = graph.to_str().unwrap();
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    let run = |token: &str| {
        crate::util::switchyard(&["run", graph, "--store", &store, "--thread", "t", "--json"])
            .env("AUTH_HTTP_TOKEN", token)
            .run()
    };
    // The right token, and the tenant header with it.
    let out = run(TOKEN).code(0);
    let events: Vec<Json> = out.stdout.lines().map(crate::util::event_line).collect();
    let finished = events.last().unwrap();
    assert_eq!(finished["event"], "run_finished");
    assert_eq!(finished["status"], "finished");
    let call = events.iter().find(|e| e["event"] == "tool_call").unwrap();
    assert_eq!(
        (&call["tool"], &call["is_error"]),
        (&json!("whoami"), &json!(false))
    );
    let state = crate::util::switchyard(&["state", "--thread", "t", "--store", &store]).run();
    let state: Json = serde_json::from_str(&state.code(0).stdout).unwrap();
    assert_eq!(state["state"]["who"], json!({ "tenant": "acme" }));
    // A wrong token is refused by the server; the message names the header as the
    // file writes it, never the token.
    let out = run("wrong-token-9d1e").code(1);
    assert!(!out.stdout.contains("wrong-token-9d1e") && !out.stderr.contains("wrong-token-9d1e"));
    assert!(
        out.stderr.contains("cannot reach server `auth`"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains(TOKEN) && !out.stderr.contains(TOKEN));
    drop(server);
}

#[tokio::test]
async fn a_servers_progress_notifications_become_events() {
    let g = graph("progress", &[]);
    assert_eq!(g.servers[0].roots, [root().join("tests/fixtures")]);
    let mut h = harness(g, "progress");
    finished(h.runner.start("t", json!({})).await);
    let progress: Vec<(f64, Option<f64>)> = drain(&mut h.server_events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolProgress {
                server,
                node,
                tool,
                progress,
                total,
                ..
            } => {
                // Told by the progress token of the call it reports on.
                assert_eq!(
                    (server.as_str(), node.as_deref(), tool.as_deref()),
                    (
                        "everything",
                        Some("work"),
                        Some("trigger-long-running-operation")
                    )
                );
                Some((progress, total))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        progress,
        [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]
    );
    assert_eq!(
        state(&h, "t").await["done"],
        json!("Long running operation completed. Duration: 0.3 seconds, Steps: 3.")
    );
}

#[tokio::test]
async fn a_changed_tool_list_is_listed_again() {
    need_npm_packages();
    let client = McpClient::new(root(), BlobStore::new(temp_dir("growing")));
    let server = stdio(
        "growing",
        "node_modules/.bin/node",
        &["tests/servers/growing_tools.mjs"],
    );
    let names = |tools: Vec<switchyard::tool::ToolInfo>| -> Vec<String> {
        tools.into_iter().map(|t| t.name).collect()
    };
    assert_eq!(
        names(client.list_tools(&server).await.unwrap()),
        ["grow", "roots", "meta", "wait", "cancelled", "ask"]
    );
    // Every call carries its idempotency key in `_meta`.
    let meta = client
        .call(&ToolRequest::new(
            server.clone(),
            "meta",
            json!({}),
            "t/0/3/1",
        ))
        .await
        .unwrap();
    assert_eq!(meta.content, json!("t/0/3/1 (call 1)"));
    // A call made under a claim carries its fencing token too, and is not sent once
    // the instant the claim surely held to has passed: the server never sees it.
    let now = std::time::Instant::now();
    let fenced = |send_by| ToolRequest {
        fencing_token: Some(7),
        send_by: Some(send_by),
        ..ToolRequest::new(server.clone(), "meta", json!({}), "t/0/3/2")
    };
    let late = client.call(&fenced(now)).await.unwrap_err();
    assert_eq!(
        (late.message.as_str(), late.unsent, late.transient),
        (
            "`meta` on server `growing` was not called: the thread's claim was last confirmed longer ago than its lease (this process was stopped or slowed)",
            true,
            false
        )
    );
    let sent = client
        .call(&fenced(now + std::time::Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(sent.content, json!("t/0/3/2 fenced by 7 (call 2)"));
    let grown = client
        .call(&ToolRequest::new(
            server.clone(),
            "grow",
            json!({}),
            "t/0/4/0",
        ))
        .await
        .unwrap();
    assert_eq!(grown.content, json!("grow done"));
    // The server said its list changed: what a node offers now includes the new tool,
    // without waiting for a call of a name the old list does not have.
    assert_eq!(
        names(client.list_tools(&server).await.unwrap()),
        ["grow", "roots", "meta", "wait", "cancelled", "ask", "extra"]
    );
    client.shutdown().await;
}

/// A call that runs past its node's timeout is cancelled at the server too
/// (`notifications/cancelled`), not left running there.
#[tokio::test]
async fn a_timed_out_call_is_cancelled_at_the_server() {
    need_npm_packages();
    let client = McpClient::new(root(), BlobStore::new(temp_dir("cancel")));
    let server = stdio(
        "waiting",
        "node_modules/.bin/node",
        &["tests/servers/growing_tools.mjs"],
    );
    let call = |tool: &str, timeout: Option<std::time::Duration>| ToolRequest {
        timeout,
        ..ToolRequest::new(server.clone(), tool, json!({}), "t/0/1/0")
    };
    // Started first, so the call's time is the call's alone (request 0 is the
    // handshake, 1 the tool list; the call is 2).
    client.list_tools(&server).await.expect("the server starts");
    let started = std::time::Instant::now();
    let waited = client
        .call(&call("wait", Some(std::time::Duration::from_millis(300))))
        .await
        .expect_err("the call times out");
    assert_eq!(
        waited.message,
        "`wait` on server `waiting` did not answer within 300ms"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let seen = loop {
        let seen = client.call(&call("cancelled", None)).await.unwrap().content;
        if seen.as_array().is_some_and(|a| !a.is_empty()) {
            break seen;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server heard no cancel"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    // The server's record of it: the call's request, and why (rmcp's words).
    assert_eq!(
        seen,
        json!([{ "request": "2", "reason": "request abandoned by the caller" }])
    );
    client.shutdown().await;
}

#[tokio::test]
async fn a_server_gets_the_roots_the_graph_declares_and_none_otherwise() {
    need_npm_packages();
    let client = McpClient::new(root(), BlobStore::new(temp_dir("roots")));
    let ask = |server: Server| {
        let client = &client;
        async move {
            let reply = client
                .call(&ToolRequest::new(server, "roots", json!({}), "t/0/1/0"))
                .await
                .unwrap();
            reply.content
        }
    };
    let plain = stdio(
        "plain",
        "node_modules/.bin/node",
        &["tests/servers/growing_tools.mjs"],
    );
    assert_eq!(
        ask(plain).await,
        json!({ "declared": false, "roots": null })
    );
    let mut rooted = stdio(
        "rooted",
        "node_modules/.bin/node",
        &["tests/servers/growing_tools.mjs"],
    );
    rooted.roots = vec![root().join("tests/fixtures")];
    assert_eq!(
        ask(rooted).await,
        json!({
            "declared": true,
            "roots": [{ "uri": format!("file://{}", root().join("tests/fixtures").display()), "name": "fixtures" }]
        })
    );
    client.shutdown().await;
}

/// A server that asks the person for input mid-call (an elicitation): the run pauses
/// with what it asked; an answer that does not fit the server's schema is refused and
/// the thread stays paused; a fitting one goes back to the server when the node runs
/// again, and a declined one too.
#[test]
fn an_elicitation_pauses_the_run_and_the_answer_goes_back_to_the_server() {
    need_npm_packages();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    let graph = "tests/fixtures/mcp/elicit.toml";
    let paused = switchyard(&["run", graph, "--thread", "e1", "--store", &store, "--json"])
        .run()
        .code(4);
    let asked: Vec<Json> = paused
        .stdout
        .lines()
        .map(crate::util::event_line)
        .filter(|e| e["event"] == "interrupted")
        .collect();
    assert_eq!(
        crate::util::without_envelope(&asked[0]),
        json!({
            "event": "interrupted",
            "node": "greet",
            "payload": {
                "kind": "elicitation",
                "server": "growing",
                "tool": "ask",
                "message": "Who is asking?",
                "requested_schema": {
                    "type": "object",
                    "properties": { "name": { "type": "string", "minLength": 1 } },
                    "required": ["name"],
                },
            },
        })
    );
    let refused = switchyard(&[
        "resume",
        "--thread",
        "e1",
        "--store",
        &store,
        "--payload",
        r#"{"name": ""}"#,
    ])
    .run()
    .code(1);
    assert_eq!(
        refused.stderr.lines().last(),
        Some(
            r#"error: the payload does not fit the resume schema of `greet`: at `/name`: "" is shorter than 1 character"#
        )
    );
    let done = switchyard(&[
        "resume",
        "--thread",
        "e1",
        "--store",
        &store,
        "--payload",
        r#"{"action": "accept", "content": {"name": "Ada"}}"#,
    ])
    .run()
    .code(0);
    // The node ran again as the step it was: the call kept its idempotency key.
    assert_eq!(done.stdout, "hello Ada [e1/0/1/0]\n");

    // Declined: the server hears it, and says what it does then.
    switchyard(&["run", graph, "--thread", "e2", "--store", &store])
        .run()
        .code(4);
    let declined = switchyard(&[
        "resume",
        "--thread",
        "e2",
        "--store",
        &store,
        "--payload",
        r#"{"action": "decline"}"#,
    ])
    .run()
    .code(0);
    assert_eq!(declined.stdout, "decline\n");

    // Asked inside parallel branches: the answer goes to that branch's call.
    let graph = "tests/fixtures/mcp/elicit_parallel.toml";
    switchyard(&["run", graph, "--thread", "e3", "--store", &store])
        .run()
        .code(4);
    let done = switchyard(&[
        "resume",
        "--thread",
        "e3",
        "--store",
        &store,
        "--payload",
        r#"{"action": "accept", "content": {"name": "Ada"}}"#,
    ])
    .run()
    .code(0);
    // (Its idempotency key is the re-run's step, not the first call's: a branch that
    // paused runs again in a superstep of its own.)
    let (greeting, rest) = done.stdout.split_once(" [e3/0/").unwrap();
    assert_eq!(greeting, "hello Ada");
    assert!(rest.ends_with("/0] / plan, worked\n"), "{}", done.stdout);
}

/// A tool that asks for input inside its result (SEP-2322, the 2026-07-28 protocol:
/// `input_required` with an elicitation and a `requestState`), served by the Python
/// MCP SDK: the run pauses with what it asked, as for an elicitation sent on its own;
/// on the answer the node runs again, and the call goes back with the answer and the
/// state as the server sent it. Declined, the server hears that too.
#[test]
fn an_input_required_result_pauses_the_run_and_the_answer_goes_back_with_its_state() {
    assert!(
        root().join("target/py/bin/python").exists(),
        "target/py is missing: run `bash .ci/setup` (it installs mcp)"
    );
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    let graph = "tests/fixtures/mcp/ask_again.toml";
    let paused = switchyard(&["run", graph, "--thread", "m1", "--store", &store, "--json"])
        .run()
        .code(4);
    let asked: Vec<Json> = paused
        .stdout
        .lines()
        .map(crate::util::event_line)
        .filter(|e| e["event"] == "interrupted")
        .collect();
    assert_eq!(
        crate::util::without_envelope(&asked[0]),
        json!({
            "event": "interrupted",
            "node": "greet",
            "payload": {
                "kind": "elicitation",
                "server": "ask",
                "tool": "greet",
                "message": "Who is asking?",
                "requested_schema": {
                    "type": "object",
                    "properties": { "name": { "type": "string", "minLength": 1 } },
                    "required": ["name"],
                },
            },
        })
    );
    let done = switchyard(&[
        "resume",
        "--thread",
        "m1",
        "--store",
        &store,
        "--payload",
        r#"{"action": "accept", "content": {"name": "Ada"}}"#,
    ])
    .run()
    .code(0);
    assert_eq!(
        done.stdout,
        "{\"result\":\"hello Ada (state asked-once)\"}\n"
    );

    switchyard(&["run", graph, "--thread", "m2", "--store", &store])
        .run()
        .code(4);
    let declined = switchyard(&[
        "resume",
        "--thread",
        "m2",
        "--store",
        &store,
        "--payload",
        r#"{"action": "decline"}"#,
    ])
    .run()
    .code(0);
    assert_eq!(declined.stdout, "{\"result\":\"no name (decline)\"}\n");
}

/// Tool schemas as servers list them (SEP-1613, SEP-2106, from the newest suite): a
/// `$ref` to another document is never fetched, and a 2020-12 schema is kept whole
/// (`$schema`, `$defs` with an `$anchor`, `allOf`/`anyOf`, `if`/`then`/`else`,
/// `additionalProperties`), as the scenario sees it echoed back.
#[test]
fn conformance_json_schema() {
    assert_eq!(
        conformance_report("next:json-schema-ref-no-deref"),
        [
            "sep-2106-no-network-ref-deref SUCCESS Client did not dereference the network-URI $ref in the tool inputSchema"
        ]
    );
    let checks = conformance_report("next:json-schema-2020-12-preservation");
    for id in [
        "json-schema-2020-12-client-echo-completed SUCCESS",
        "json-schema-2020-12-client-$defs-preserved SUCCESS",
        "sep-2106-client-composition-keywords-preserved SUCCESS",
        "sep-2106-client-conditional-keywords-preserved SUCCESS",
        "sep-2106-client-anchor-keyword-preserved SUCCESS",
    ] {
        assert!(
            checks.iter().any(|c| c.starts_with(id)),
            "no `{id}` in {checks:#?}"
        );
    }
}

/// What a tool's `input_required` result asks that Switchyard cannot give fails the
/// node with why, not as the server's refusal: a second question in one call (a run
/// resumes with one answer, and the call starts again from its first round), and a
/// completion from a server the graph does not let sample.
#[test]
fn an_input_required_result_switchyard_cannot_answer_fails_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    let graph = |tool: &str| {
        let path = dir.path().join(format!("{tool}.toml"));
        std::fs::write(
            &path,
            std::fs::read_to_string(root().join("tests/fixtures/mcp/ask_again.toml"))
                .unwrap()
                .replace(
                    "root = \"../../..\"",
                    &format!("root = {:?}", root().display().to_string()),
                )
                .replace("tool = \"greet\"", &format!("tool = {tool:?}")),
        )
        .unwrap();
        path.display().to_string()
    };
    let twice = graph("greet_twice");
    switchyard(&["run", &twice, "--thread", "q", "--store", &store])
        .run()
        .code(4);
    let failed = switchyard(&[
        "resume",
        "--thread",
        "q",
        "--store",
        &store,
        "--payload",
        r#"{"action": "accept", "content": {"name": "Ada"}}"#,
    ])
    .run()
    .code(1);
    assert_eq!(
        failed.stderr.lines().last(),
        Some(
            "error: node `greet` failed: server `ask` asked during `greet_twice` for a second person's answer, which Switchyard cannot answer: a run answers one question a call (the call starts again from its first round when the run resumes)"
        ),
        "{}",
        failed.stderr
    );
    let summarize = graph("summarize");
    let failed = switchyard(&["run", &summarize, "--thread", "s", "--store", &store])
        .run()
        .code(1);
    assert_eq!(
        failed.stderr.lines().last(),
        Some(
            "error: node `greet` failed: server `ask` asked during `summarize` for a completion (sampling), which Switchyard cannot answer: the graph does not let it ask (`sampling = true` in its `[servers.x]`)"
        ),
        "{}",
        failed.stderr
    );
}

/// `protocol = "auto"`: a server of today's protocol (server-everything, which
/// answers `server/discover` that it does not know it) is spoken to with `initialize`
/// after all, and one of the 2026-07-28 protocol (the Python SDK's) in that: its
/// `input_required` result, which it sends only to a client of that version, pauses
/// the run.
#[test]
fn auto_speaks_the_newer_protocol_to_a_server_that_knows_it_and_the_older_else() {
    need_npm_packages();
    let dir = tempfile::tempdir().unwrap();
    let variant = |fixture: &str, from: &str, to: &str| {
        let path = dir.path().join(fixture.rsplit('/').next().unwrap());
        let text = std::fs::read_to_string(root().join(fixture))
            .unwrap()
            .replace(
                "root = \"../../..\"",
                &format!("root = {:?}", root().display().to_string()),
            );
        assert!(text.contains(from), "{fixture}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
        path.display().to_string()
    };
    let older = variant(
        "tests/fixtures/mcp/everything.toml",
        "env = { SWITCHYARD_MARK = \"from-the-graph\" }",
        "env = { SWITCHYARD_MARK = \"from-the-graph\" }\nprotocol = \"auto\"",
    );
    let listed = switchyard(&["tools", &older]).run().code(0);
    assert!(
        listed.stdout.starts_with("everything: 14 tools\n"),
        "{}",
        listed.stdout
    );
    let newer = variant(
        "tests/fixtures/mcp/ask_again.toml",
        "protocol = \"2026-07-28\"",
        "protocol = \"auto\"",
    );
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    let paused = switchyard(&["run", &newer, "--thread", "a", "--store", &store])
        .run()
        .code(4);
    assert!(
        paused.stderr.contains("paused at greet"),
        "{}",
        paused.stderr
    );
}

/// Multi round-trip requests (SEP-2322, from the newest suite): the state echoed as
/// it came, each retry a new request, no state sent where none was given, none
/// carried into another call, and a result without `resultType` taken as complete.
#[test]
fn conformance_multi_round_trip_requests() {
    let checks = conformance_report("next:sep-2322-client-request-state");
    assert_eq!(checks.len(), 5, "{checks:#?}");
}

/// Through the server: the thread keeps its MCP server while paused, and the answer
/// given with `command: {resume}` reaches it.
#[tokio::test]
async fn an_elicitation_is_answered_through_the_server() {
    need_npm_packages();
    let s = crate::serve::server::serve(&["tests/fixtures/mcp/elicit.toml"])
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "e" })).await;
    let paused = h
        .post(
            "/threads/e/runs/wait",
            json!({ "assistant_id": "elicit", "input": {} }),
        )
        .await
        .json();
    assert_eq!(
        paused["__interrupt__"][0]["value"]["message"], "Who is asking?",
        "{paused}"
    );
    let refused = h
        .post(
            "/threads/e/runs/wait",
            json!({ "assistant_id": "elicit", "command": { "resume": { "nom": "Ada" } } }),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert!(
        refused.text.contains("\\\"name\\\" is a required property"),
        "{}",
        refused.text
    );
    let done = h
        .post(
            "/threads/e/runs/wait",
            json!({ "assistant_id": "elicit", "command": { "resume": { "name": "Ada" } } }),
        )
        .await
        .json();
    assert_eq!(done["greeting"], "hello Ada [e/0/1/0]", "{done}");
}

/// An authorization server that wants a person: the run says where to sign in (a
/// `sign_in` event with the URL), waits, and goes on once the person has; the browser
/// comes back to a loopback port of Switchyard's, which answers it. The token is in no
/// event. A person who declines ends the run with the authorization server's words.
#[test]
fn a_person_signs_in_at_the_url_the_run_gives_and_the_run_goes_on() {
    use std::io::BufRead;
    let server = node_server("tests/servers/oauth_person.mjs", &[]);
    let base = format!("http://127.0.0.1:{}", server.port);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let get = |url: String| rt.block_on(async { http.get(url).send().await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    for (click, code) in [("approve", 0), ("deny", 1)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["run", "tests/fixtures/mcp/oauth/person.toml", "--json"])
            .args(["--store", &store, "--thread", click])
            .env("PERSON_MCP_URL", format!("{base}/mcp"))
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read on a thread of its own, so a run that hangs fails the test rather than
        // holding it.
        let (tx, lines) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let _ = tx.send(line.unwrap());
            }
        });
        let mut seen = Vec::new();
        let url = loop {
            let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) else {
                let _ = child.kill();
                panic!("no sign_in event within 60 s: {seen:#?}");
            };
            let event: Json = crate::util::event_line(&line);
            seen.push(line);
            if event["event"] == "sign_in" {
                assert_eq!(event["server"], "person");
                break event["url"].as_str().unwrap().to_string();
            }
        };
        assert!(url.starts_with(&format!("{base}/authorize?")), "{url}");
        // The person's click, and the browser sent back to Switchyard.
        let state = reqwest::Url::parse(&url)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "state")
            .unwrap()
            .1
            .to_string();
        // A request to Switchyard's port that is not this sign-in's (another state)
        // is turned away, and the sign-in waited for still.
        let redirect = reqwest::Url::parse(&url)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "redirect_uri")
            .unwrap()
            .1
            .to_string();
        let forged = get(format!("{redirect}?code=stolen&state=forged"));
        assert_eq!(forged.status(), 404);
        let clicked = get(format!("{base}/{click}?state={state}"));
        assert_eq!(clicked.status(), 302);
        let back = clicked.headers()["location"].to_str().unwrap().to_string();
        assert!(back.starts_with("http://127.0.0.1:"), "{back}");
        let page = get(back);
        assert_eq!(page.status(), 200);
        let text = rt.block_on(page.text()).unwrap();
        assert!(
            text.contains("Switchyard has the answer for server <b>person</b>"),
            "{text}"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while let Ok(line) =
            lines.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            seen.push(line);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!("the run did not end within 60 s: {seen:#?}");
        }
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code), "{click}: {stderr}\n{seen:#?}");
        let all = seen.join("\n");
        assert!(!all.contains("tok-person") && !stderr.contains("tok-person"));
        let last: Json = crate::util::event_line(seen.last().unwrap());
        let failed: Vec<Json> = seen
            .iter()
            .map(|l| crate::util::event_line(l))
            .filter(|e| e["event"] == "node_failed")
            .collect();
        if click == "approve" {
            assert_eq!(
                (last["event"].as_str(), last["status"].as_str()),
                (Some("run_finished"), Some("finished")),
                "{all}"
            );
            assert!(failed.is_empty(), "{all}");
            let state = crate::util::switchyard(&["state", "--thread", click, "--store", &store])
                .run()
                .code(0);
            let state: Json = serde_json::from_str(&state.stdout).unwrap();
            assert_eq!(
                state["state"]["who"],
                serde_json::json!({ "user": "ada" }),
                "{state}"
            );
        } else {
            assert_eq!(
                (last["event"].as_str(), last["status"].as_str()),
                (Some("run_finished"), Some("failed")),
                "{all}"
            );
            assert_eq!(failed.len(), 1, "{all}");
            assert_eq!(failed[0]["node"], "ask");
            let message = failed[0]["message"].as_str().unwrap();
            assert!(
                message.contains("the sign-in was refused (access_denied: Ada said no)"),
                "{message}"
            );
        }
    }
}

/// Schemas real servers list: a required property with a default is filled in when the
/// graph leaves it out (as the server would), and a reference to a schema on the
/// network is not fetched: the call is made, that part unchecked, and `validate
/// --online` warns of it.
#[test]
fn a_required_default_is_filled_in_and_a_remote_ref_left_unchecked() {
    need_npm_packages();
    let out = switchyard(&[
        "validate",
        "--online",
        "tests/fixtures/mcp/odd_schemas.toml",
    ])
    .run()
    .code(0);
    assert_eq!(
        out.stdout,
        "tests/fixtures/mcp/odd_schemas.toml: ok (3 nodes, 2 state fields)\n"
    );
    assert_eq!(
        out.stderr,
        r#"warning: the inputSchema of `remote` refers to `https://schemas.example.com/place.json`, which is not fetched
   --> tests/fixtures/mcp/odd_schemas.toml:30:8
   |
30 | tool = "remote"
   |        ^^^^^^^^ what it stands for is not checked before a call
   |
   = help: the server checks it; the rest of the schema is checked as usual

"#
    );
    let dir = temp_dir("odd-schemas");
    let store = format!("sqlite:{}", dir.join("c.db").display());
    switchyard(&[
        "run",
        "tests/fixtures/mcp/odd_schemas.toml",
        "--thread",
        "t",
        "--store",
        &store,
    ])
    .run()
    .code(0);
    let state = switchyard(&["state", "--thread", "t", "--store", &store]).run();
    let state: Json = serde_json::from_str(&state.code(0).stdout).unwrap();
    // What each server got, as it answered it.
    assert_eq!(
        (&state["state"]["shot"], &state["state"]["remote"]),
        (
            &json!({ "filename": "page.png", "type": "png" }),
            &json!({ "where": { "city": "Paris" }, "n": 2 })
        )
    );
}

/// Runs `tests/fixtures/mcp/NAME.toml` on thread `t` of a SQLite store of its own, the
/// graph's model a scripted server giving `answers`: what that server was sent, and the
/// store.
async fn run_sampling(
    name: &str,
    answers: Vec<crate::llm::server::Answer>,
) -> (Vec<crate::llm::server::Seen>, String) {
    let model = crate::llm::server::Server::start(answers).await;
    let dir = temp_dir(name);
    let store = format!("sqlite:{}", dir.join("c.db").display());
    let cmd = switchyard(&[
        "run",
        &format!("tests/fixtures/mcp/{name}.toml"),
        "--thread",
        "t",
        "--store",
        &store,
    ])
    .env("OPENAI_BASE_URL", model.url())
    .env("OPENAI_API_KEY", "k");
    tokio::task::spawn_blocking(move || cmd.run().code(0))
        .await
        .unwrap();
    (model.seen(), store)
}

/// A server the graph lets ask (`sampling = true`) is told the client samples, and its
/// request is answered by the graph's model (the scripted OpenAI-compatible server):
/// the system prompt, the message, the token limit and the temperature it asked for.
#[tokio::test]
async fn a_servers_sampling_request_is_answered_by_the_graphs_model() {
    need_npm_packages();
    let (seen, store) = run_sampling(
        "sampling",
        vec![crate::llm::server::completion("Teal.", 20, 2)],
    )
    .await;
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (
            &seen[0].body["model"],
            &seen[0].body["messages"],
            &seen[0].body["max_completion_tokens"],
            &seen[0].body["temperature"],
        ),
        (
            &json!("graph-model"),
            &json!([
                { "role": "system", "content": "You are a helpful test server." },
                { "role": "user", "content": "Resource trigger-sampling-request context: Name a colour." },
            ]),
            &json!(30),
            &json!(0.7),
        )
    );
    let state = switchyard(&["state", "--thread", "t", "--store", &store]).run();
    let state: Json = serde_json::from_str(&state.code(0).stdout).unwrap();
    let answer = state["state"]["answer"].to_string();
    assert!(answer.contains("Teal."), "{answer}");
}

/// A server's sampling request that offers the model a tool (MCP sampling with tools,
/// through the official TypeScript SDK, which sends `tools` only to a client that
/// declared `sampling.tools`): the model's call goes back as a `tool_use`, the server's
/// `tool_result` reaches the model as a tool message, and its final text is the answer.
#[tokio::test]
async fn a_sampling_request_with_tools_runs_the_models_tool_loop() {
    need_npm_packages();
    let (seen, store) = run_sampling(
        "sampling_tools",
        vec![
            crate::llm::server::tool_call("weather", r#"{"city":"Paris"}"#),
            crate::llm::server::completion("Sunny in Paris: no umbrella.", 20, 5),
        ],
    )
    .await;
    assert_eq!(seen.len(), 2);
    // First: the tool offered, the model free to call it.
    assert_eq!(
        (
            &seen[0].body["messages"],
            &seen[0].body["tools"][0]["function"]["name"],
            &seen[0].body["tool_choice"],
        ),
        (
            &json!([{ "role": "user", "content": "Forecast for Paris?" }]),
            &json!("weather"),
            &json!("auto"),
        )
    );
    // Then: the call and its result in the chat API's form, and no tool offered.
    assert_eq!(
        seen[1].body["messages"],
        json!([
            { "role": "user", "content": "Forecast for Paris?" },
            { "role": "assistant", "tool_calls": [
                { "id": "call_a", "type": "function", "function": { "name": "weather", "arguments": "{\"city\":\"Paris\"}" } },
            ] },
            { "role": "tool", "tool_call_id": "call_a", "content": "Sunny in Paris" },
        ])
    );
    assert_eq!(seen[1].body.get("tools"), None);
    let state = switchyard(&["state", "--thread", "t", "--store", &store]).run();
    let state: Json = serde_json::from_str(&state.code(0).stdout).unwrap();
    assert_eq!(
        state["state"]["answer"],
        json!("Sunny in Paris: no umbrella.")
    );
}

/// A resource and a prompt, read by `mcp_call` nodes as tools are called (`tool =
/// "resources/read"`, `tool = "prompts/get"`): the resource as an embedded text
/// resource is written, the prompt as its chat messages.
#[test]
fn a_node_reads_a_resource_and_gets_a_prompt() {
    need_npm_packages();
    switchyard(&["validate", "--online", "tests/fixtures/mcp/read.toml"])
        .run()
        .code(0);
    let dir = temp_dir("read");
    let store = format!("sqlite:{}", dir.join("c.db").display());
    switchyard(&[
        "run",
        "tests/fixtures/mcp/read.toml",
        "--thread",
        "t",
        "--store",
        &store,
        "--input",
        r#"{"id": "7", "city": "Lyon"}"#,
    ])
    .run()
    .code(0);
    let state = switchyard(&["state", "--thread", "t", "--store", &store]).run();
    let state: Json = serde_json::from_str(&state.code(0).stdout).unwrap();
    let doc = &state["state"]["doc"];
    assert_eq!(
        (&doc["uri"], &doc["mime_type"]),
        (
            &json!("demo://resource/dynamic/text/7"),
            &json!("text/plain")
        )
    );
    assert!(
        doc["text"]
            .as_str()
            .unwrap()
            .starts_with("Resource 7: This is a plaintext resource created at "),
        "{doc}"
    );
    assert_eq!(
        state["state"]["prompt"],
        json!([{ "role": "user", "content": "What's weather in Lyon?" }])
    );
}

/// A graph given by a path relative to another folder than its own starts its stdio
/// server all the same: the server's relative command is resolved against the graph's
/// root and made absolute before the child starts there.
#[test]
fn a_relative_server_command_starts_from_any_working_directory() {
    let root = crate::util::root();
    let workspace = tempfile::tempdir().unwrap();
    let graph = std::path::Path::new(root.file_name().unwrap()).join("graphs/tool_agent.toml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["tools", graph.to_str().unwrap(), "--format", "json"])
        .env("TOOL_AGENT_WORKSPACE", workspace.path())
        .current_dir(root.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["server"], "fs");
    assert!(listed[0]["tools"].as_array().unwrap().len() > 5);
}
