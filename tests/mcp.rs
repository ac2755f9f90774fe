//! `mcp_call` against real MCP servers from npm (installed by `.ci/setup`): the
//! reference "everything", filesystem and memory servers, over stdio and streamable
//! HTTP, and the official conformance suite against our client.

use crate::util::root;
use base64::Engine;
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use switchyard::graph::Graph;
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::run::{Event, MemoryStore, Outcome, Runner};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// Fails with the command that installs the npm test servers when they are missing.
#[track_caller]
fn need_npm_packages() {
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
    Arc::new(switchyard::graph::compile(spec, &sources).expect("compiles"))
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
    let blobs = temp_dir(&format!("{name}-blobs"));
    let (tx, server_events) = unbounded_channel();
    let client = Arc::new(
        McpClient::new(&graph.root, BlobStore::new(&blobs))
            .with_events(tx)
            .with_call_timeout(Duration::from_secs(30)),
    );
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

/// The server events without stderr lines and with pids blanked.
fn lifecycle(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .filter(|e| !matches!(e, Event::ServerStderr { .. }))
        .map(|e| match e {
            Event::ServerStarted {
                server, restart, ..
            } => Event::ServerStarted {
                server: server.clone(),
                pid: None,
                restart: *restart,
            },
            other => other.clone(),
        })
        .collect()
}

fn started(server: &str, restart: u32) -> Event {
    Event::ServerStarted {
        server: server.into(),
        pid: None,
        restart,
    }
}

fn stopped(server: &str) -> Event {
    Event::ServerStopped {
        server: server.into(),
    }
}

/// The state of a finished thread, with audit durations set to 0.
fn state(h: &Harness, thread: &str) -> Json {
    let (mut state, _) = h.runner.state(thread, None).expect("state");
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
    let mut s = state(&h, "t");
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
        state(&h, "t"),
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
        state(&h, "t"),
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

#[tokio::test]
async fn a_server_killed_mid_call_is_restarted_and_the_retry_succeeds() {
    let mut h = harness(graph("restart", &[]), "restart");
    let client = h.client.clone();
    let mut events = std::mem::replace(&mut h.events, unbounded_channel().1);
    // Kills the server shortly after `slow` starts, while its call is in flight.
    let killer = tokio::spawn(async move {
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
    });
    finished(h.runner.start("t", json!({})).await);
    let killed = killer.await.expect("killer");
    let gone = "server `everything` is gone: the connection closed during `trigger-long-running-operation` (Transport closed)";
    let mut s = state(&h, "t");
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
