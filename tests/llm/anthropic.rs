//! `provider = "anthropic"`: Anthropic's Messages API, spoken to the scripted server (the
//! exact request it received) and to fakellm from PyPI, a mock of Anthropic's API that
//! the test starts (its rules check the headers Anthropic requires).

use super::server::{Answer, Server};
use super::{KEY, finished, graph, run};
use crate::util::{root, switchyard};
use serde_json::{Value as Json, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use switchyard::llm::{AnthropicClient, LlmClient};

fn anthropic(server: &Server) -> Arc<dyn LlmClient> {
    Arc::new(AnthropicClient::new(server.url(), KEY, "TEST_KEY").expect("client"))
}

fn schema() -> Json {
    serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/llm/schemas/action.json")).unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_schemad_reply_comes_as_the_input_of_the_tool_the_model_must_call() {
    let server = Server::start(vec![Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                { "type": "text", "text": "I will click it." },
                { "type": "tool_use", "id": "toolu_1", "name": "plan",
                  "input": { "id": "a1", "kind": "click", "target": "Search" } }
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": { "input_tokens": 31, "output_tokens": 12 }
        })
        .to_string(),
    }])
    .await;
    let ran = run(
        graph("anthropic"),
        anthropic(&server),
        json!({ "goal": "find it" }),
    )
    .await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    assert_eq!(super::tokens(&ran.events), [(31, 12)]);
    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].header("x-api-key"), Some(KEY));
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(
        seen[0].body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 300,
            "system": "You plan one browser action at a time.",
            "messages": [{ "role": "user", "content": [{ "type": "text", "text": "Goal: find it" }] }],
            "tool_choice": { "type": "tool", "name": "plan" },
            "tools": [{
                "name": "plan",
                "description": "Give your answer: call this with it, shaped as the input schema says.",
                "input_schema": schema()
            }],
            "temperature": 0.0
        })
    );
}

#[tokio::test]
async fn a_streamed_reply_shows_its_json_as_it_is_written_and_errors_keep_their_words() {
    let event = |v: Json| v.to_string();
    let server = Server::start(vec![
        Answer::Body {
            status: 529,
            headers: vec![("retry-after".into(), "0".into())],
            body: json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } })
                .to_string(),
        },
        Answer::Stream(vec![
            event(json!({ "type": "message_start", "message": { "usage": { "input_tokens": 20, "output_tokens": 1 } } })),
            event(json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "tool_use", "id": "t", "name": "plan", "input": {} } })),
            event(json!({ "type": "ping" })),
            event(json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "input_json_delta", "partial_json": "{\"id\":\"a1\",\"kind\":" } })),
            event(json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "input_json_delta", "partial_json": "\"click\",\"target\":\"Search\"}" } })),
            event(json!({ "type": "content_block_stop", "index": 0 })),
            event(json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use" }, "usage": { "output_tokens": 15 } })),
            event(json!({ "type": "message_stop" })),
        ]),
    ])
    .await;
    let streaming: Arc<dyn LlmClient> = Arc::new(Streaming(anthropic(&server)));
    let ran = run(graph("anthropic"), streaming, json!({ "goal": "find it" })).await;
    assert_eq!(ran.outcome.unwrap(), finished("done", "click Search", 2));
    let seen = super::deltas_and_retries(&ran.events);
    assert_eq!(
        seen,
        [
            "retry plan after attempt 1 (the server answered 529: Overloaded (overloaded_error)), discard false",
            "{\"id\":\"a1\",\"kind\":",
            "\"click\",\"target\":\"Search\"}"
        ]
    );
    assert_eq!(server.seen()[1].body["stream"], json!(true));
}

/// Streams every request, as `switchyard run --stream` does.
struct Streaming(Arc<dyn LlmClient>);

#[async_trait::async_trait]
impl LlmClient for Streaming {
    async fn complete(
        &self,
        request: &switchyard::llm::LlmRequest,
        deltas: switchyard::llm::DeltaSink<'_>,
    ) -> Result<switchyard::llm::LlmReply, switchyard::llm::LlmError> {
        let request = switchyard::llm::LlmRequest {
            stream: true,
            ..request.clone()
        };
        self.0.complete(&request, deltas).await
    }
}

/// fakellm serving `config`, on a port of its own; killed when dropped.
struct FakeLlm {
    child: Child,
    url: String,
}

impl FakeLlm {
    fn start(config: &str) -> (FakeLlm, tempfile::TempDir) {
        let bin = root().join("target/py/bin/fakellm");
        assert!(
            bin.exists(),
            "{} is missing: run `bash .ci/setup` (fakellm from PyPI)",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fakellm.yaml");
        std::fs::write(&file, config).unwrap();
        let mut child = Command::new(bin)
            .args(["serve", "--host", "127.0.0.1", "--port", "0", "--config"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fakellm starts");
        // Its port is said on standard error; the rest of that is drained so that the
        // server never waits on a full pipe.
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("fakellm says where it listens")
                .expect("fakellm's stderr");
            if let Some(rest) = line.split("Uvicorn running on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        (FakeLlm { child, url }, dir)
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Answers the graph's node with a call of its output tool only when the request
/// carries the key and the API version Anthropic requires; anything else is refused.
const RULES: &str = r#"version: 1
rules:
  - name: plan
    when:
      tools_include: plan
      header.x-api-key: anthropic-test-key
      header.anthropic-version: "2023-06-01"
    respond:
      content: ""
      tool_calls:
        - name: plan
          arguments: {id: "a1", kind: "click", target: "Search"}
  - name: refused
    respond:
      status: 401
      error: "no key or no anthropic-version"
"#;

/// `switchyard run` of a graph whose `[llm] provider = "anthropic"`, through the
/// variables it reads by default, against fakellm: whole and streamed.
#[test]
fn switchyard_run_speaks_to_fakellms_messages_api() {
    let (fake, _dir) = FakeLlm::start(RULES);
    for stream in [false, true] {
        let mut args = vec![
            "run",
            "tests/fixtures/llm/anthropic.toml",
            "--store",
            "none",
            "--input",
            r#"{"goal": "find the search box"}"#,
        ];
        if stream {
            args.push("--stream");
        }
        let out = switchyard(&args)
            .env("ANTHROPIC_BASE_URL", &fake.url)
            .env("ANTHROPIC_API_KEY", "anthropic-test-key")
            .run()
            .code(0);
        assert!(
            out.stdout.ends_with("click Search\n"),
            "stream {stream}:\n{}\n{}",
            out.stdout,
            out.stderr
        );
    }
    // Without the key fakellm refuses, and the run says so in the server's words.
    let out = switchyard(&[
        "run",
        "tests/fixtures/llm/anthropic.toml",
        "--store",
        "none",
        "--input",
        r#"{"goal": "g"}"#,
    ])
    .env("ANTHROPIC_BASE_URL", &fake.url)
    .run();
    assert_ne!(out.code, 0);
    assert!(
        out.stderr
            .contains("the server answered 401: no key or no anthropic-version (mock_error)"),
        "{}",
        out.stderr
    );
}
