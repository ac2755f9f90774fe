//! `llm_structured` against a real HTTP server speaking the OpenAI chat-completions
//! API (see `llm/server.rs`): small graphs in `tests/fixtures/llm/`, driven through the
//! library `Runner`, asserting state, events and the requests the server received.

mod anthropic;
pub(crate) mod server;

use crate::util::root;
use serde_json::{Value as Json, json};
use server::{Answer, Seen, Server, completion, failure, tool_call};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use switchyard::graph::{Graph, Server as McpServer};
use switchyard::llm::{
    Exchange, LlmClient, LlmOptions, OpenAiClient, RecordingClient, SetupError, llm_client,
};
use switchyard::run::{Event, Outcome, RunError, Runner};
use switchyard::store::LlmCache;
use switchyard::store::{MemoryStore, SqliteStore};
use switchyard::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};

/// A key distinctive enough that finding it anywhere is a leak.
const KEY: &str = "sk-switchyard-test-KEY-9f3c1e77";

const VALID: &str = r#"{"id":"a1","kind":"click","target":"Search"}"#;

fn graph(name: &str) -> Arc<Graph> {
    let path = root()
        .join("tests/fixtures/llm")
        .join(format!("{name}.toml"));
    Arc::new(switchyard::load_graph(&path).unwrap_or_else(|e| panic!("{name}: {e}")))
}

fn openai(server: &Server) -> Arc<dyn LlmClient> {
    Arc::new(OpenAiClient::new(server.url(), KEY, "TEST_KEY").expect("client"))
}

/// A fresh directory under the system's temp dir.
fn temp_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "switchyard-llm-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// What one run produced.
struct Ran {
    outcome: Result<Outcome, RunError>,
    events: Vec<Event>,
    state: Json,
    runner: Runner,
}

async fn run_on(mut runner: Runner, thread: &str, input: Json) -> Ran {
    let mut rx = runner.events();
    let outcome = runner.start(thread, input).await;
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    let state = runner
        .threads()
        .state(thread, None)
        .await
        .map(|(s, _)| crate::util::without_made_ids(s))
        .unwrap_or(Json::Null);
    Ran {
        outcome,
        events,
        state,
        runner,
    }
}

async fn run(graph: Arc<Graph>, llm: Arc<dyn LlmClient>, input: Json) -> Ran {
    let runner = Runner::new(graph, Arc::new(MemoryStore::new())).with_llm(llm);
    run_on(runner, "t1", input).await
}

/// An event as JSON with its timings zeroed, so runs compare exactly.
fn scrub(e: &Event) -> Json {
    let mut v = serde_json::to_value(e).expect("events serialize");
    for key in ["duration_us", "latency_ms", "duration_ms"] {
        if let Some(x) = v.get_mut(key) {
            *x = json!(0);
        }
    }
    v
}

fn llm_events(events: &[Event]) -> Vec<Json> {
    events
        .iter()
        .filter(|e| matches!(e, Event::LlmInvocation { .. }))
        .map(scrub)
        .collect()
}

fn invocation(node: &str, tokens: (u64, u64), cache_hit: bool, attempt: u32) -> Json {
    json!({
        "event": "llm_invocation", "node": node, "model": "test-model",
        "tokens_in": tokens.0, "tokens_out": tokens.1, "cache_hit": cache_hit,
        "latency_ms": 0, "attempt": attempt
    })
}

fn finished(outcome: &str, response: &str, steps: u64) -> Outcome {
    Outcome::Finished {
        outcome: outcome.into(),
        response: Some(response.into()),
        steps,
    }
}

fn messages(seen: &Seen) -> Json {
    seen.body["messages"].clone()
}

const SYSTEM: &str = "You plan one browser action at a time.";

fn plan_messages(goal: &str) -> Json {
    json!([
        { "role": "system", "content": SYSTEM },
        { "role": "user", "content": format!("Goal: {goal}") },
    ])
}

#[track_caller]
fn assert_gap_at_least(seen: &[Seen], i: usize, at_least: Duration) {
    let gap = seen[i].at.duration_since(seen[i - 1].at);
    assert!(
        gap >= at_least,
        "request {} came {gap:?} after request {i}, expected at least {at_least:?}",
        i + 1
    );
}

#[tokio::test]
async fn happy_path_writes_the_validated_output() {
    let server = Server::start(vec![completion(VALID, 12, 7)]).await;
    let ran = run(
        graph("plan"),
        openai(&server),
        json!({ "goal": "open the docs" }),
    )
    .await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(
        ran.state,
        json!({
            "goal": "open the docs",
            "action": { "id": "a1", "kind": "click", "target": "Search" },
            "failure": null
        })
    );
    assert_eq!(
        ran.events.iter().map(scrub).collect::<Vec<_>>(),
        vec![
            json!({ "event": "run_started", "thread": "t1", "graph": "plan", "run": 0, "resumed": false }),
            json!({ "event": "node_started", "node": "plan", "step": 1 }),
            invocation("plan", (12, 7), false, 1),
            json!({ "event": "node_finished", "node": "plan", "step": 1, "duration_us": 0, "writes": ["action"], "skipped": false }),
            json!({ "event": "route_taken", "from": "plan", "to": "done", "case": null }),
            json!({ "event": "node_started", "node": "done", "step": 2 }),
            json!({ "event": "node_finished", "node": "done", "step": 2, "duration_us": 0, "writes": [], "skipped": false }),
            json!({ "event": "run_finished", "status": "finished", "outcome": "done", "response": "click Search", "steps": 2, "tokens": 19, "duration_ms": 0 }),
        ]
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].header("authorization"),
        Some(&*format!("Bearer {KEY}"))
    );
    let schema: Json = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/llm/schemas/action.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        seen[0].body,
        json!({
            "model": "test-model",
            "messages": plan_messages("open the docs"),
            "response_format": {
                "type": "json_schema",
                "json_schema": { "name": "plan", "schema": schema, "strict": true }
            },
            "temperature": 0.0
        })
    );
}

#[tokio::test]
async fn a_node_with_strict_false_sends_its_schema_without_strict() {
    let server = Server::start(vec![completion(VALID, 12, 7)]).await;
    let ran = run(
        graph("plan_loose"),
        openai(&server),
        json!({ "goal": "open the docs" }),
    )
    .await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    let schema: Json = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/llm/schemas/action.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        server.seen()[0].body["response_format"],
        json!({
            "type": "json_schema",
            "json_schema": { "name": "plan", "schema": schema, "strict": false }
        })
    );
}

#[tokio::test]
async fn the_history_goes_between_the_system_prompt_and_the_prompt() {
    let server = Server::start(vec![completion(VALID, 12, 7)]).await;
    let history = json!([
        { "role": "user", "content": "find the docs", "id": "m1" },
        { "role": "assistant", "content": "Which docs?", "id": "m2" },
        { "role": "user", "content": "Rust's", "name": "ann", "id": "m3" },
    ]);
    let input = json!({ "goal": "open the docs", "messages": history });
    let ran = run(graph("history"), openai(&server), input).await;
    assert_eq!(
        ran.outcome.unwrap(),
        Outcome::Finished {
            outcome: "done".into(),
            response: None,
            steps: 2
        }
    );
    assert_eq!(
        messages(&server.seen()[0]),
        json!([
            { "role": "system", "content": SYSTEM },
            { "role": "user", "content": "find the docs" },
            { "role": "assistant", "content": "Which docs?" },
            { "role": "user", "content": "Rust's", "name": "ann" },
            { "role": "user", "content": "Goal: open the docs" },
        ])
    );
    let mut expected = history.as_array().unwrap().clone();
    expected.push(json!({ "role": "assistant", "content": "click Search" }));
    assert_eq!(ran.state["messages"], json!(expected));
}

#[tokio::test]
async fn a_schema_violation_is_fed_back_and_the_second_reply_wins() {
    let bad = r#"{"id":"a1","kind":"jump","target":"Search"}"#;
    let server = Server::start(vec![completion(bad, 12, 7), completion(VALID, 20, 7)]).await;
    let ran = run(
        graph("plan"),
        openai(&server),
        json!({ "goal": "open the docs" }),
    )
    .await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(
        llm_events(&ran.events),
        vec![
            invocation("plan", (12, 7), false, 1),
            invocation("plan", (20, 7), false, 2)
        ]
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(messages(&seen[0]), plan_messages("open the docs"));
    assert_eq!(
        messages(&seen[1]),
        json!([
            { "role": "system", "content": SYSTEM },
            { "role": "user", "content": "Goal: open the docs" },
            { "role": "assistant", "content": bad },
            { "role": "user", "content": "That reply is not valid: the reply does not fit the schema: at `/kind`: \"jump\" is not one of \"click\", \"type\" or \"stop\". Reply again, with the problem fixed." },
        ])
    );
}

#[tokio::test]
async fn garbage_twice_takes_the_fallback() {
    let server = Server::start(vec![
        completion("I would click the search box.", 10, 9),
        completion("{\"id\": \"a1\", \"kind\":", 10, 4),
    ])
    .await;
    let ran = run(
        graph("fallback"),
        openai(&server),
        json!({ "goal": "search" }),
    )
    .await;
    assert_eq!(
        ran.outcome.unwrap(),
        finished("done", "stop {\"id\": \"a1\", \"kind\":", 2)
    );
    assert_eq!(
        ran.state["action"],
        json!({ "id": "fallback", "kind": "stop", "target": "{\"id\": \"a1\", \"kind\":" })
    );
    assert_eq!(
        llm_events(&ran.events),
        vec![
            invocation("plan", (10, 9), false, 1),
            invocation("plan", (10, 4), false, 2)
        ]
    );
    let seen = server.seen();
    assert_eq!(
        messages(&seen[1]).as_array().unwrap()[1..],
        [
            json!({ "role": "assistant", "content": "I would click the search box." }),
            json!({ "role": "user", "content": "That reply is not valid: the reply is not JSON: expected value at line 1 column 1. Reply again, with the problem fixed." }),
        ]
    );
}

#[tokio::test]
async fn an_unreachable_model_takes_the_fallback_too() {
    let server = Server::start(vec![failure(400, "no such model", &[])]).await;
    let ran = run(
        graph("fallback"),
        openai(&server),
        json!({ "goal": "search" }),
    )
    .await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "stop no reply", 2));
    assert_eq!(llm_events(&ran.events), Vec::<Json>::new());
}

#[tokio::test]
async fn invalid_replies_without_a_fallback_fail_the_node() {
    let server = Server::start(vec![completion("nope", 3, 1), completion("[]", 3, 1)]).await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(
        ran.outcome.unwrap(),
        finished(
            "failed",
            "the reply does not fit the schema: [] is not of type \"object\" (after 2 replies)",
            2
        )
    );
    assert_eq!(
        ran.events.last().map(scrub),
        Some(
            json!({ "event": "run_finished", "status": "finished", "outcome": "failed", "response": "the reply does not fit the schema: [] is not of type \"object\" (after 2 replies)", "steps": 2, "tokens": 8, "duration_ms": 0 })
        )
    );
}

#[tokio::test]
async fn a_429_waits_as_long_as_retry_after_says() {
    let server = Server::start(vec![
        failure(429, "rate limited", &[("retry-after", "1")]),
        completion(VALID, 12, 7),
    ])
    .await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    // The node's own backoff is 100 ms; the server asked for a second.
    assert_gap_at_least(&seen, 1, Duration::from_secs(1));
    assert_eq!(seen[0].body, seen[1].body);
    assert_eq!(
        llm_events(&ran.events),
        vec![invocation("plan", (12, 7), false, 1)]
    );
}

#[tokio::test]
async fn server_errors_are_retried_with_exponential_backoff() {
    let server = Server::start(vec![
        failure(500, "boom", &[]),
        Answer::Body {
            status: 502,
            headers: Vec::new(),
            body: "<html>bad gateway</html>".into(),
        },
        completion(VALID, 12, 7),
    ])
    .await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    // backoff = "100ms", no jitter: 100 ms, then 200 ms.
    assert_gap_at_least(&seen, 1, Duration::from_millis(100));
    assert_gap_at_least(&seen, 2, Duration::from_millis(200));
}

#[tokio::test]
async fn server_errors_past_the_attempts_take_on_error() {
    let server = Server::start(vec![
        failure(500, "boom", &[]),
        failure(503, "overloaded", &[]),
        Answer::Body {
            status: 502,
            headers: Vec::new(),
            body: "<html>bad gateway</html>".into(),
        },
    ])
    .await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    let message = "the server answered 502: <html>bad gateway</html> (after 3 attempts)";
    assert_eq!(ran.outcome.unwrap(), finished("failed", message, 2));
    assert_eq!(ran.state["failure"], json!(message));
    assert!(ran.events.contains(&Event::NodeFailed {
        node: "plan".into(),
        message: message.into(),
        handled: true
    }));
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let server = Server::start(vec![failure(400, "unknown model `test-model`", &[])]).await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(
        ran.outcome.unwrap(),
        finished(
            "failed",
            "the server answered 400: unknown model `test-model`",
            2
        )
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn a_slow_server_times_out_and_the_node_fails() {
    let slow = || Answer::Slow(Duration::from_secs(3), Box::new(completion(VALID, 1, 1)));
    let server = Server::start(vec![slow(), slow()]).await;
    let ran = run(graph("timeout"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(
        ran.outcome.unwrap(),
        finished("failed", "no reply within 300 ms (after 2 attempts)", 2)
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_gap_at_least(&seen, 1, Duration::from_millis(300));
    assert_eq!(llm_events(&ran.events), Vec::<Json>::new());
}

#[tokio::test]
async fn malformed_answers_fail_cleanly() {
    // Not HTTP at all: a transport error, retried, then on_error.
    let server = Server::start(vec![
        Answer::Raw("SMTP ready\r\n\r\n"),
        Answer::Raw("\0\0\0"),
        Answer::Raw("HTTP/1.1 200 OK\r\ncontent-length: 999\r\n\r\n{\"cho"),
    ])
    .await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    let failure = ran.state["failure"].as_str().unwrap().to_string();
    assert!(
        failure.starts_with("the connection to the server failed: ")
            && failure.ends_with("(after 3 attempts)"),
        "{failure}"
    );
    assert_eq!(server.seen().len(), 3);

    // A 200 whose JSON breaks off: not a chat completion, not worth another try.
    let server = Server::start(vec![Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: r#"{"choices": [{"message": {"content": "{\"id"#.into(),
    }])
    .await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(
        ran.state["failure"],
        json!(
            "the server's answer is not a chat completion: EOF while parsing a string at line 1 column 43 in `{\"choices\": [{\"message\": {\"content\": \"{\\\"id`"
        )
    );
    assert_eq!(server.seen().len(), 1);
}

/// A tool client with a fixed list of tools; no call is made in these tests.
struct FsTools;

#[async_trait::async_trait]
impl ToolClient for FsTools {
    async fn list_tools(&self, server: &McpServer) -> Result<Vec<ToolInfo>, ToolError> {
        assert_eq!(server.name, "fs");
        let path_schema = json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"]
        });
        Ok(["read_file", "write_file", "delete_file"]
            .into_iter()
            .map(|name| ToolInfo {
                name: name.into(),
                description: format!("{name} in the workspace."),
                input_schema: path_schema.clone(),
                output_schema: None,
            })
            .collect())
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        Err(ToolError {
            message: format!("no calls in this test ({})", request.tool),
            transient: false,
            asked: None,
            unsent: false,
        })
    }
}

fn tools_runner(server: &Server) -> Runner {
    Runner::new(graph("tools"), Arc::new(MemoryStore::new()))
        .with_llm(openai(server))
        .with_tools(Arc::new(FsTools))
}

#[tokio::test]
async fn a_node_that_takes_parallel_calls_asks_for_them_and_keeps_them_all() {
    let two_calls = Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: json!({
            "id": "chatcmpl-3",
            "object": "chat.completion",
            "created": 1,
            "model": "test-model",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Reading both.",
                    "tool_calls": [
                        { "id": "call_a", "type": "function", "function": { "name": "read_file", "arguments": r#"{"path":"a.txt"}"# } },
                        { "id": "call_b", "type": "function", "function": { "name": "read_file", "arguments": r#"{"path":"b.txt"}"# } },
                    ]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": { "prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29 }
        })
        .to_string(),
    };
    let server = Server::start(vec![two_calls]).await;
    let runner = Runner::new(graph("tools_parallel"), Arc::new(MemoryStore::new()))
        .with_llm(openai(&server))
        .with_tools(Arc::new(FsTools));
    let ran = run_on(runner, "t1", json!({ "task": "read a and b" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "2 calls", 2));
    assert_eq!(
        ran.state["call"],
        json!({
            "calls": [
                { "tool": "read_file", "arguments": { "path": "a.txt" } },
                { "tool": "read_file", "arguments": { "path": "b.txt" } },
            ],
            "text": "Reading both."
        })
    );
    let body = &server.seen()[0].body;
    assert_eq!(
        (&body["parallel_tool_calls"], &body["tool_choice"]),
        (&json!(true), &json!("required"))
    );
}

/// `tests/fixtures/llm/sampling.toml` for `provider`, in a directory of its own whose
/// root is the fixtures' (its prompt is theirs).
fn sampling_graph(provider: &str) -> (tempfile::TempDir, Arc<Graph>) {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("tests/fixtures/llm/sampling.toml"))
        .unwrap()
        .replace(
            "provider = \"openai\"",
            &format!("provider = \"{provider}\""),
        )
        .replace(
            "[graph]\n",
            &format!(
                "[graph]\nroot = {:?}\n",
                root().join("tests/fixtures/llm").display().to_string()
            ),
        );
    let path = dir.path().join("sampling.toml");
    std::fs::write(&path, text).unwrap();
    let graph = Arc::new(switchyard::load_graph(&path).unwrap_or_else(|e| panic!("{e}")));
    (dir, graph)
}

#[tokio::test]
async fn each_provider_gets_the_request_it_takes() {
    let tools = json!([{ "type": "function", "function": {
        "name": "read_file",
        "description": "read_file in the workspace.",
        "parameters": { "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] }
    }}]);
    let common = json!({
        "model": "test-model",
        "messages": [{ "role": "user", "content": "Task: read a" }],
        "tools": tools,
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["END", "STOP"],
        "reasoning_effort": "low",
    });
    // What differs from one provider to the next.
    let expected = |extra: Json| {
        let mut body = common.clone();
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases = [
        (
            "openai",
            json!({ "max_completion_tokens": 300, "tool_choice": "required", "parallel_tool_calls": true }),
        ),
        (
            "azure",
            json!({ "max_completion_tokens": 300, "tool_choice": "required", "parallel_tool_calls": true }),
        ),
        (
            "vllm",
            json!({ "max_completion_tokens": 300, "tool_choice": "required", "parallel_tool_calls": true }),
        ),
        // Ollama ignores `tool_choice` and `parallel_tool_calls`, and takes only
        // `max_tokens`.
        ("ollama", json!({ "max_tokens": 300 })),
        (
            "llamacpp",
            json!({ "max_tokens": 300, "tool_choice": "required", "parallel_tool_calls": true }),
        ),
        (
            "litellm",
            json!({ "max_tokens": 300, "tool_choice": "required", "parallel_tool_calls": true }),
        ),
    ];
    for (provider, extra) in cases {
        let server = Server::start(vec![tool_call("read_file", r#"{"path":"a"}"#)]).await;
        let (_dir, graph) = sampling_graph(provider);
        let llm = Arc::new(
            OpenAiClient::for_provider(server.url(), KEY, "TEST_KEY", graph.llm.provider).unwrap(),
        );
        let runner = Runner::new(graph, Arc::new(MemoryStore::new()))
            .with_llm(llm)
            .with_tools(Arc::new(FsTools));
        let ran = run_on(runner, "t1", json!({ "task": "read a" })).await;
        assert_eq!(
            ran.outcome.unwrap(),
            finished("done", "1 calls", 2),
            "{provider}"
        );
        let seen = server.seen();
        assert_eq!(seen[0].body, expected(extra), "{provider}");
        // Azure takes the key in `api-key`; the others as a bearer token.
        let auth = (seen[0].header("authorization"), seen[0].header("api-key"));
        let bearer = format!("Bearer {KEY}");
        if provider == "azure" {
            assert_eq!(auth, (None, Some(KEY)), "{provider}");
        } else {
            assert_eq!(auth, (Some(bearer.as_str()), None), "{provider}");
        }
    }
}

#[tokio::test]
async fn a_required_call_is_enforced_where_the_provider_ignores_tool_choice() {
    // Ollama is not sent `tool_choice`; a reply without a call is refused here and the
    // model asked again, as for any provider.
    let server = Server::start(vec![
        completion("I would read a.", 5, 4),
        tool_call("read_file", r#"{"path":"a"}"#),
    ])
    .await;
    let (_dir, graph) = sampling_graph("ollama");
    let llm = Arc::new(
        OpenAiClient::for_provider(server.url(), KEY, "TEST_KEY", graph.llm.provider).unwrap(),
    );
    let runner = Runner::new(graph, Arc::new(MemoryStore::new()))
        .with_llm(llm)
        .with_tools(Arc::new(FsTools));
    let ran = run_on(runner, "t1", json!({ "task": "read a" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "1 calls", 2));
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body.get("tool_choice"), None);
    assert_eq!(
        seen[1].body["messages"][2],
        json!({ "role": "user", "content": "That reply is not valid: the reply called no tool; call exactly one of `read_file`. Reply again, with the problem fixed." })
    );
}

#[tokio::test]
async fn tool_choice_checks_arguments_and_refuses_tools_not_offered() {
    let server = Server::start(vec![
        tool_call("delete_file", r#"{"path":"notes.txt"}"#),
        tool_call("read_file", r#"{"path":3}"#),
        tool_call("read_file", r#"{"path":"notes.txt"}"#),
    ])
    .await;
    let ran = run_on(
        tools_runner(&server),
        "t1",
        json!({ "task": "read my notes" }),
    )
    .await;
    assert_eq!(
        ran.outcome.unwrap(),
        finished("done", "read_file notes.txt", 2)
    );
    assert_eq!(
        ran.state["call"],
        json!({ "tool": "read_file", "arguments": { "path": "notes.txt" }, "text": null })
    );
    assert_eq!(
        llm_events(&ran.events),
        vec![
            invocation("choose", (30, 8), false, 1),
            invocation("choose", (30, 8), false, 2),
            invocation("choose", (30, 8), false, 3),
        ]
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    let function = |name: &str| {
        json!({ "type": "function", "function": {
            "name": name,
            "description": format!("{name} in the workspace."),
            "parameters": { "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] }
        }})
    };
    let ask_human: Json = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/llm/schemas/ask_human.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        seen[0].body,
        json!({
            "model": "test-model",
            "messages": [{ "role": "user", "content": "Task: read my notes" }],
            "tools": [
                function("read_file"),
                function("write_file"),
                { "type": "function", "function": {
                    "name": "ask_human",
                    "description": "Ask the person one question.",
                    "parameters": ask_human
                }},
            ],
            "tool_choice": "required"
        })
    );
    let call = |name: &str, args: &str| {
        json!({ "role": "assistant", "tool_calls": [
            { "id": "call_a", "type": "function", "function": { "name": name, "arguments": args } }
        ]})
    };
    assert_eq!(
        messages(&seen[2]),
        json!([
            { "role": "user", "content": "Task: read my notes" },
            call("delete_file", r#"{"path":"notes.txt"}"#),
            { "role": "tool", "tool_call_id": "call_a", "content": "Not called: `delete_file` is not an offered tool; call exactly one of `read_file`, `write_file`, `ask_human`. Call again, with the problem fixed." },
            call("read_file", r#"{"path":3}"#),
            { "role": "tool", "tool_call_id": "call_a", "content": "Not called: the arguments of `read_file` do not fit its schema: at `/path`: 3 is not of type \"string\". Call again, with the problem fixed." },
        ])
    );
}

#[tokio::test]
async fn a_pseudo_tool_writes_its_arguments_and_routes_to_its_node() {
    let server = Server::start(vec![tool_call(
        "ask_human",
        r#"{"question":"Which notes?"}"#,
    )])
    .await;
    let ran = run_on(
        tools_runner(&server),
        "t1",
        json!({ "task": "read my notes" }),
    )
    .await;
    assert_eq!(
        ran.outcome.unwrap(),
        Outcome::Interrupted {
            node: "ask".into(),
            payload: json!({ "question": "Which notes?" })
        }
    );
    assert_eq!(ran.state["call"], json!({ "question": "Which notes?" }));
    // The route names the pseudo tool that took it.
    assert!(ran.events.contains(&Event::RouteTaken {
        from: "choose".into(),
        to: "ask".into(),
        case: Some("ask_human".into())
    }));
}

#[tokio::test]
async fn a_cache_hit_on_the_second_run_makes_no_request() {
    let dir = temp_dir("cache");
    let db = dir.join("store.db");
    let server = Server::start(vec![
        completion(VALID, 12, 7),
        completion(r#"{"id":"b2","kind":"stop","target":"done"}"#, 12, 7),
    ])
    .await;
    let store = Arc::new(SqliteStore::open(&db).unwrap());
    let first = Runner::new(graph("cache"), store.clone())
        .with_cache(store)
        .with_llm(openai(&server));
    let ran = run_on(first, "t1", json!({ "goal": "open the docs" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(
        llm_events(&ran.events),
        vec![invocation("plan", (12, 7), false, 1)]
    );
    drop(ran.runner);

    // Another runner on another store handle: the cache is in the file.
    let store = Arc::new(SqliteStore::open(&db).unwrap());
    let second = Runner::new(graph("cache"), store.clone())
        .with_cache(store)
        .with_llm(openai(&server));
    let ran = run_on(second, "t2", json!({ "goal": "open the docs" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(
        llm_events(&ran.events),
        vec![invocation("plan", (0, 0), true, 1)]
    );
    assert_eq!(
        ran.state["action"],
        serde_json::from_str::<Json>(VALID).unwrap()
    );
    assert_eq!(
        ran.events.last().map(scrub),
        Some(
            json!({ "event": "run_finished", "status": "finished", "outcome": "done", "response": "click Search", "steps": 2, "tokens": 0, "duration_ms": 0 })
        )
    );
    assert_eq!(server.seen().len(), 1);

    // Another key is a miss.
    let ran = run_on(ran.runner, "t3", json!({ "goal": "close the docs" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "stop done", 2));
    assert_eq!(server.seen().len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_expired_cache_entry_is_a_miss() {
    let store = MemoryStore::new();
    store.cache_put("k", &json!(1), 1_000).await.unwrap();
    assert_eq!(store.cache_get("k", 999).await.unwrap(), Some(json!(1)));
    assert_eq!(store.cache_get("k", 1_000).await.unwrap(), None);
    let dir = temp_dir("expiry");
    let sqlite = SqliteStore::open(&dir.join("s.db")).unwrap();
    sqlite
        .cache_put("k", &json!({ "a": [1] }), 1_000)
        .await
        .unwrap();
    assert_eq!(
        sqlite.cache_get("k", 999).await.unwrap(),
        Some(json!({ "a": [1] }))
    );
    assert_eq!(sqlite.cache_get("k", 1_000).await.unwrap(), None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn exceeding_the_token_budget_takes_on_limit() {
    let server = Server::start(vec![completion(VALID, 20, 5), completion(VALID, 20, 5)]).await;
    let ran = run(graph("budget"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(
        ran.outcome.unwrap(),
        finished("budget", "stopped at 50 tokens", 3)
    );
    assert!(ran.events.contains(&Event::LimitReached {
        limit: "max_tokens".into(),
        to: Some("over_budget".into())
    }));
    assert_eq!(
        llm_events(&ran.events),
        vec![
            invocation("first", (20, 5), false, 1),
            invocation("second", (20, 5), false, 1)
        ]
    );
    assert_eq!(server.seen().len(), 2);
}

fn chunk(delta: Json, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
    })
    .to_string()
}

const PIECES: [&str; 3] = [
    r#"{"id":"a1","#,
    r#""kind":"click","#,
    r#""target":"Search"}"#,
];

fn full_stream() -> Answer {
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
    events.extend(PIECES.iter().map(|p| chunk(json!({ "content": p }), None)));
    events.push(chunk(json!({}), Some("stop")));
    events.push(
        json!({ "id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
            "choices": [], "usage": { "prompt_tokens": 9, "completion_tokens": 6 } })
        .to_string(),
    );
    Answer::Stream(events)
}

fn deltas(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TextDelta { node, text } => {
                assert_eq!(&**node, "plan");
                Some(text.clone())
            }
            _ => None,
        })
        .collect()
}

/// Each model call's tokens (in, out).
pub(crate) fn tokens(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::LlmInvocation {
                tokens_in,
                tokens_out,
                ..
            } => Some((*tokens_in, *tokens_out)),
            _ => None,
        })
        .collect()
}

/// The streamed text and the retries between, in order (a retry's wait is jittered:
/// only checked to be short).
pub(crate) fn deltas_and_retries(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TextDelta { text, .. } => Some(text.clone()),
            Event::LlmRetry {
                node,
                attempt,
                error,
                wait_ms,
                discard,
            } => {
                assert!(*wait_ms <= 1_000, "{wait_ms}");
                Some(format!(
                    "retry {node} after attempt {attempt} ({error}), discard {discard}"
                ))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streaming_emits_text_deltas_as_they_arrive() {
    let server = Server::start(vec![full_stream()]).await;
    let ran = run(graph("stream"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(deltas(&ran.events), PIECES);
    assert_eq!(
        llm_events(&ran.events),
        vec![invocation("plan", (9, 6), false, 1)]
    );
    let seen = server.seen();
    assert_eq!(seen[0].body["stream"], json!(true));
    // Switchyard names itself, so a provider's logs and rate limits can tell it apart.
    assert_eq!(
        seen[0].header("user-agent"),
        Some(concat!("switchyard/", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(
        seen[0].body["stream_options"],
        json!({ "include_usage": true })
    );
}

#[tokio::test]
async fn a_stream_that_breaks_off_is_retried() {
    let cut = Answer::Stream(vec![chunk(json!({ "content": PIECES[0] }), None)]);
    let server = Server::start(vec![cut, full_stream()]).await;
    let ran = run(graph("stream"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    // The broken-off delta was already out: the retry says it is void, and the second
    // try streams the reply from its start.
    let seen = deltas_and_retries(&ran.events);
    assert_eq!(
        seen,
        [
            PIECES[0],
            "retry plan after attempt 1 (the connection to the server failed: the stream ended before the reply was complete), discard true",
            PIECES[0],
            PIECES[1],
            PIECES[2]
        ]
    );
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn a_stream_of_garbage_fails_the_node_cleanly() {
    let server = Server::start(vec![Answer::Stream(vec!["not json".into()])]).await;
    let ran = run(graph("stream"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(
        ran.outcome.unwrap_err().to_string(),
        "node `plan` failed: the server's answer is not a chat completion: expected ident at line 1 column 2 in `not json`"
    );
}

#[tokio::test]
async fn an_error_in_the_stream_is_reported_with_the_servers_words() {
    let server = Server::start(vec![Answer::Stream(vec![
        json!({ "choices": [{ "index": 0, "delta": { "content": "{\"kind\"" } }] }).to_string(),
        json!({ "error": { "message": "overloaded", "type": "server_error" } }).to_string(),
    ])])
    .await;
    let ran = run(graph("stream"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(
        ran.outcome.unwrap_err().to_string(),
        "node `plan` failed: the server reported an error in the stream: overloaded"
    );
    assert_eq!(server.seen().len(), 1, "a reported error is not retried");
}

#[tokio::test]
async fn float_token_counts_are_read() {
    let server = Server::start(vec![Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": VALID }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 12.0, "completion_tokens": "seven" }
        })
        .to_string(),
    }])
    .await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(tokens(&ran.events), [(12, 0)]);
}

/// Anthropic's OpenAI-compatible endpoint ignores `response_format` and answers with
/// the JSON in a fence; other servers put words around it. The JSON is taken out and
/// checked against the schema like any reply: one request each, no correction.
#[tokio::test]
async fn json_in_a_fence_or_among_words_is_taken_and_checked() {
    for text in [
        format!("```json\n{VALID}\n```"),
        format!("Here is the action:\n\n{VALID}\n\nLet me know."),
    ] {
        let server = Server::start(vec![completion(&text, 12, 7)]).await;
        let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
        assert_eq!(
            ran.outcome.unwrap(),
            finished("done", "click Search", 2),
            "{text}"
        );
        assert_eq!(server.seen().len(), 1);
    }
    // Found, but not fitting the schema: corrected like any reply that does not fit.
    let server = Server::start(vec![
        completion("```json\n{\"id\": \"a1\"}\n```", 1, 1),
        completion(VALID, 1, 1),
    ])
    .await;
    let ran = run(graph("plan"), openai(&server), json!({ "goal": "g" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    let seen = server.seen();
    let correction = seen[1].body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        correction.starts_with("That reply is not valid: the reply does not fit the schema:"),
        "{correction}"
    );
}

#[tokio::test]
async fn a_recording_replays_without_the_network() {
    let dir = temp_dir("record");
    let file = dir.join("run.jsonl");
    let server = Server::start(vec![completion(VALID, 12, 7)]).await;
    let recorder = RecordingClient::create(&file, openai(&server)).unwrap();
    let ran = run(
        graph("plan"),
        Arc::new(recorder),
        json!({ "goal": "open the docs" }),
    )
    .await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    drop(server);

    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Exchange> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].node, "plan");
    assert_eq!(lines[0].model, "test-model");
    assert_eq!(json!(lines[0].messages), plan_messages("open the docs"));
    assert_eq!(lines[0].reply.content.as_deref(), Some(VALID));
    assert_eq!(
        (lines[0].reply.tokens_in, lines[0].reply.tokens_out),
        (12, 7)
    );

    // Replayed (and streamed, as `--stream` asks): the same run, no server.
    let options = LlmOptions {
        replay: Some(file.clone()),
        stream: true,
        ..LlmOptions::default()
    };
    let replay = llm_client(&graph("plan"), &options).unwrap();
    let ran = run(
        graph("plan"),
        replay.clone(),
        json!({ "goal": "open the docs" }),
    )
    .await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(
        ran.state["action"],
        serde_json::from_str::<Json>(VALID).unwrap()
    );
    assert_eq!(deltas(&ran.events), [VALID]);
    assert_eq!(
        llm_events(&ran.events),
        vec![invocation("plan", (12, 7), false, 1)]
    );

    // The recording holds one request of `plan`; a second run asks for another.
    let ran = run(graph("plan"), replay, json!({ "goal": "open the docs" })).await;
    assert_eq!(
        ran.state["failure"],
        json!("replay: node `plan` made request 2, and the recording holds 1 of it")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_replay_that_does_not_match_names_the_node() {
    let dir = temp_dir("mismatch");
    let file = dir.join("run.jsonl");
    let server = Server::start(vec![completion(VALID, 12, 7)]).await;
    let recorder = RecordingClient::create(&file, openai(&server)).unwrap();
    run(
        graph("plan"),
        Arc::new(recorder),
        json!({ "goal": "open the docs" }),
    )
    .await;
    let options = LlmOptions {
        replay: Some(file.clone()),
        ..LlmOptions::default()
    };

    // Another goal renders another prompt.
    let ran = run(
        graph("plan"),
        llm_client(&graph("plan"), &options).unwrap(),
        json!({ "goal": "buy a ticket" }),
    )
    .await;
    assert_eq!(
        ran.outcome.unwrap(),
        finished(
            "failed",
            "replay: request 1 of node `plan` does not match the recording: message 2 differs: the request has `{\"role\":\"user\",\"content\":\"Goal: buy a ticket\"}`, the recording `{\"role\":\"user\",\"content\":\"Goal: open the docs\"}`",
            2
        )
    );

    // Another schema (here: a recording whose schema hash was changed).
    let mut exchange: Exchange =
        serde_json::from_str(std::fs::read_to_string(&file).unwrap().trim()).unwrap();
    exchange.schema_hash = "0".repeat(64);
    std::fs::write(&file, serde_json::to_string(&exchange).unwrap()).unwrap();
    let ran = run(
        graph("plan"),
        llm_client(&graph("plan"), &options).unwrap(),
        json!({ "goal": "open the docs" }),
    )
    .await;
    assert_eq!(
        ran.state["failure"],
        json!(
            "replay: request 1 of node `plan` does not match the recording: the output schema or the offered tools differ"
        )
    );
    assert_eq!(server.seen().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn setup_errors_are_typed() {
    let dir = temp_dir("setup");
    let options = LlmOptions {
        record: Some(dir.join("a.jsonl")),
        replay: Some(dir.join("b.jsonl")),
        stream: false,
    };
    assert!(matches!(
        llm_client(&graph("plan"), &options),
        Err(SetupError::RecordAndReplay)
    ));
    std::fs::write(dir.join("bad.jsonl"), "{\"node\": \"plan\"}\n").unwrap();
    let options = LlmOptions {
        replay: Some(dir.join("bad.jsonl")),
        ..LlmOptions::default()
    };
    let err = llm_client(&graph("plan"), &options).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "line 1 of the recording `{}` is not a recorded exchange: missing field `model` at line 1 column 16",
            dir.join("bad.jsonl").display()
        )
    );
    assert!(matches!(
        OpenAiClient::new("http://127.0.0.1:9/v1", "sk-bad\nkey", "MY_KEY"),
        Err(SetupError::BadKey { var }) if var == "MY_KEY"
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Everything a run leaves behind, as text.
async fn traces(ran: &Ran, thread: &str) -> String {
    let events: Vec<Json> = ran.events.iter().map(scrub).collect();
    let history = ran
        .runner
        .threads()
        .history(thread)
        .await
        .map(|h| json!(h))
        .unwrap_or(Json::Null);
    let outcome = match &ran.outcome {
        Ok(o) => format!("{o:?}"),
        Err(e) => format!("{e} / {e:?}"),
    };
    format!("{}\n{}\n{history}\n{outcome}", json!(events), ran.state)
}

#[tokio::test]
async fn the_api_key_never_shows() {
    let dir = temp_dir("key");
    let file = dir.join("run.jsonl");
    let server = Server::start(vec![
        // A success, recorded.
        completion(VALID, 12, 7),
        // A 401 that quotes the request's headers, then 5xx ones that do too.
        Answer::EchoHeaders(401),
        Answer::EchoHeaders(500),
        Answer::EchoHeaders(503),
        Answer::EchoHeaders(500),
        // Plain text that quotes the key across the point where errors are cut short.
        Answer::Body {
            status: 400,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: format!("{}Bearer {KEY}", "A".repeat(283)),
        },
    ])
    .await;
    let client: Arc<dyn LlmClient> =
        Arc::new(RecordingClient::create(&file, openai(&server)).unwrap());
    let mut seen_text = String::new();
    for (thread, expect) in [
        ("ok", "done"),
        ("denied", "failed"),
        ("broken", "failed"),
        ("cut", "failed"),
    ] {
        let runner =
            Runner::new(graph("plan"), Arc::new(MemoryStore::new())).with_llm(client.clone());
        let ran = run_on(runner, thread, json!({ "goal": "g" })).await;
        match &ran.outcome {
            Ok(Outcome::Finished { outcome, .. }) => assert_eq!(outcome, expect),
            other => panic!("{thread}: {other:?}"),
        }
        seen_text.push_str(&traces(&ran, thread).await);
    }
    seen_text.push_str(&std::fs::read_to_string(&file).unwrap());
    seen_text.push_str(&format!(
        "{:?}",
        OpenAiClient::new(server.url(), KEY, "TEST_KEY").unwrap()
    ));
    // The key went to the server, and the server echoed it back...
    let seen = server.seen();
    assert_eq!(seen.len(), 6);
    for s in &seen {
        assert_eq!(s.header("authorization"), Some(&*format!("Bearer {KEY}")));
    }
    // ...and it is nowhere in what the runs left, where the echo shows redacted.
    assert!(!seen_text.contains(KEY), "the key leaked:\n{seen_text}");
    assert!(!seen_text.contains("9f3c1e77"), "part of the key leaked");
    assert!(
        !seen_text.contains("Bearer sk-"),
        "the start of the key leaked"
    );
    assert!(
        seen_text.contains("the server answered 401: rejected request with headers")
            && seen_text.contains("authorization: Bearer [redacted]"),
        "{seen_text}"
    );
    assert!(seen_text.contains("(after 3 attempts)"), "{seen_text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// [`FsTools`] whose `read_file` answers with the file's text.
struct NotesTools;

#[async_trait::async_trait]
impl ToolClient for NotesTools {
    async fn list_tools(&self, server: &McpServer) -> Result<Vec<ToolInfo>, ToolError> {
        FsTools.list_tools(server).await
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        assert_eq!(request.tool, "read_file");
        Ok(ToolReply {
            content: json!(format!(
                "{} says hi",
                request.arguments["path"].as_str().unwrap()
            )),
            is_error: false,
            ..Default::default()
        })
    }
}

#[tokio::test]
async fn a_chat_node_calls_tools_natively_and_a_tool_node_answers_them() {
    let server = Server::start(vec![
        tool_call("read_file", r#"{"path":3}"#),
        tool_call("read_file", r#"{"path":"notes.txt"}"#),
        completion("Your notes say hi.", 40, 6),
    ])
    .await;
    let runner = Runner::new(graph("chat_tools"), Arc::new(MemoryStore::new()))
        .with_llm(openai(&server))
        .with_tools(Arc::new(NotesTools));
    let ran = run_on(
        runner,
        "t1",
        json!({ "messages": [{ "role": "user", "content": "What do my notes say?" }] }),
    )
    .await;
    assert!(
        matches!(ran.outcome, Ok(Outcome::Finished { .. })),
        "{:?}",
        ran.outcome
    );
    let messages = crate::util::without_made_ids(ran.state["messages"].clone());
    let usage =
        |i: u64, o: u64| json!({ "input_tokens": i, "output_tokens": o, "total_tokens": i + o });
    assert_eq!(
        messages,
        json!([
            { "role": "user", "content": "What do my notes say?" },
            {
                "role": "assistant",
                "content": "",
                "additional_kwargs": {},
                "name": null,
                "tool_calls": [{ "name": "read_file", "args": { "path": "notes.txt" }, "id": "call_a", "type": "tool_call" }],
                "invalid_tool_calls": [],
                "response_metadata": { "model_name": "test-model", "finish_reason": "tool_calls" },
                "usage_metadata": usage(30, 8),
            },
            { "role": "tool", "content": "notes.txt says hi", "tool_call_id": "call_a", "name": "read_file", "status": "success" },
            {
                "role": "assistant",
                "content": "Your notes say hi.",
                "additional_kwargs": {},
                "name": null,
                "tool_calls": [],
                "invalid_tool_calls": [],
                "response_metadata": { "model_name": "test-model", "finish_reason": "stop" },
                "usage_metadata": usage(40, 6),
            },
        ])
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    // Offered natively, the model free to answer instead; only the tools named.
    assert_eq!(seen[0].body["tool_choice"], "auto");
    let offered: Vec<&Json> = seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["function"]["name"])
        .collect();
    assert_eq!(offered, [&json!("read_file")]);
    // Arguments that do not fit the tool's schema are refused before any call.
    assert_eq!(
        seen[1].body["messages"][2],
        json!({ "role": "user", "content": "Your tool call was refused: the arguments of `read_file` do not fit its schema: at `/path`: 3 is not of type \"string\". Call again, or answer in plain text." })
    );
    // The next turn sends the call and its result as the chat API's messages.
    assert_eq!(
        seen[2].body["messages"],
        json!([
            { "role": "user", "content": "What do my notes say?" },
            { "role": "assistant", "content": "", "tool_calls": [{ "id": "call_a", "type": "function", "function": { "name": "read_file", "arguments": "{\"path\":\"notes.txt\"}" } }] },
            { "role": "tool", "content": "notes.txt says hi", "tool_call_id": "call_a" },
        ])
    );
}
