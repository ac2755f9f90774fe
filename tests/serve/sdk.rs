//! LangGraph's official client SDKs, unmodified, as the server's clients: the JS one
//! from npm (`@langchain/langgraph-sdk`) and the Python one from PyPI (`langgraph-sdk`,
//! in the virtual environment `.ci/setup` makes at `target/py`). Each script in
//! `serve/sdk/` prints what it saw, one JSON line per step.

use super::server::{Scrub, serve};
use crate::llm::server::{Answer, Reply, Server as Llm};
use crate::util::root;
use serde_json::{Value as Json, json};
use std::time::Duration;

/// Runs `tests/serve/sdk/<script>` with Node against `url`; its steps, scrubbed.
async fn node(script: &str, url: &str, key: Option<&str>) -> String {
    let sdk = root().join("node_modules/@langchain/langgraph-sdk/package.json");
    assert!(
        sdk.exists(),
        "`{}` is missing: run `bash .ci/setup` (npm ci) for the SDK tests",
        sdk.display()
    );
    script_steps(&root().join("node_modules/.bin/node"), script, url, key).await
}

/// Runs `tests/serve/sdk/<script>` with Node, `input` as JSON on its standard input;
/// the JSON it prints.
pub(crate) async fn node_script(script: &str, input: &Json) -> Json {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(root().join("node_modules/.bin/node"))
        .arg(root().join("tests/serve/sdk").join(script))
        .current_dir(root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut stdin = child.stdin.take().expect("its stdin");
    stdin.write_all(input.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the script ends in time")
        .expect("node runs");
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the script prints JSON")
}

/// Runs `tests/serve/sdk/<script>` with the Python that has `langgraph-sdk`.
async fn python(script: &str, url: &str, key: Option<&str>) -> String {
    let python = root().join("target/py/bin/python");
    assert!(
        python.exists(),
        "`{}` is missing: run `bash .ci/setup` (it installs langgraph-sdk from PyPI there)",
        python.display()
    );
    script_steps(&python, script, url, key).await
}

async fn script_steps(
    program: &std::path::Path,
    script: &str,
    url: &str,
    key: Option<&str>,
) -> String {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg(root().join("tests/serve/sdk").join(script))
        .current_dir(root())
        .env("API_URL", url)
        .env_remove("LANGGRAPH_API_KEY")
        .env_remove("LANGSMITH_API_KEY")
        .env_remove("LANGCHAIN_API_KEY")
        .kill_on_drop(true);
    if let Some(k) = key {
        cmd.env("API_KEY", k);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the script ends in time")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut scrub = Scrub::new();
    stdout
        .lines()
        .map(|l| {
            let v: Json =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a step ({e}): {l}"));
            format!(
                "{}: {}",
                v["step"].as_str().unwrap_or("?"),
                serde_json::to_string(&scrub.json(&v["value"])).unwrap()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_official_js_client_drives_the_server() {
    let llm = Llm::start(vec![Answer::Reply(Reply {
        content: Some(json!({ "text": "2 + 2 is 4, as it always was." }).to_string()),
        tool_calls: Vec::new(),
    })])
    .await;
    let s = serve(&[
        "tests/fixtures/serve",
        "tests/fixtures/serve_assistants/greet.toml",
    ])
    .env("OPENAI_BASE_URL", llm.url())
    .env("SERVE_TEST_KEY", "sdk-key")
    .arg("--api-key-env")
    .arg("SERVE_TEST_KEY")
    .start()
    .await;
    let steps = node("client.mjs", &s.url, Some("sdk-key")).await;
    insta::assert_snapshot!(steps);
    assert_eq!(llm.seen().len(), 1, "one model call, streamed");
    assert_eq!(llm.seen()[0].body["stream"], json!(true));
}

#[tokio::test]
async fn the_official_python_client_drives_the_server() {
    let llm = Llm::start(vec![Answer::Reply(Reply {
        content: Some(json!({ "text": "Four." }).to_string()),
        tool_calls: Vec::new(),
    })])
    .await;
    let s = serve(&[
        "tests/fixtures/serve",
        "tests/fixtures/serve_assistants/greet.toml",
    ])
    .env("OPENAI_BASE_URL", llm.url())
    .env("SERVE_TEST_KEY", "py-key")
    .arg("--api-key-env")
    .arg("SERVE_TEST_KEY")
    .start()
    .await;
    let steps = python("client.py", &s.url, Some("py-key")).await;
    insta::assert_snapshot!(steps);
}

/// The official MCP TypeScript SDK's client calls every served graph as a tool at
/// `/mcp` (behind the server's API key): the graph's input schema, a call's result the
/// state at the run's end, a refused input the tool's error, an interrupt answered
/// through `answer_interrupt`, an unknown tool a protocol error; no thread is left
/// behind but the one a pause kept until it was answered.
#[tokio::test]
async fn the_official_mcp_client_calls_each_graph_as_a_tool() {
    let s = serve(&[
        "tests/fixtures/serve/three.toml",
        "tests/fixtures/serve_mcp/ask.toml",
    ])
    .env("SERVE_TEST_KEY", "mcp-key")
    .arg("--api-key-env")
    .arg("SERVE_TEST_KEY")
    .start()
    .await;
    let steps = node("mcp_client.mjs", &s.url, Some("mcp-key")).await;
    insta::assert_snapshot!(steps);
    let threads = s
        .http()
        .with_key("mcp-key")
        .post("/threads/search", json!({}))
        .await
        .json();
    assert_eq!(threads, json!([]));
    // Without the key: refused, as every other endpoint.
    let r = s
        .http()
        .post(
            "/mcp",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(r.status, 401);
}

/// The MCP Inspector's command-line mode (`@modelcontextprotocol/inspector --cli`, from
/// npm, headless) lists the graphs as tools and calls one over `/mcp` with the key, as a
/// person checking the server by hand would.
#[tokio::test]
async fn the_mcp_inspectors_cli_lists_and_calls_the_graphs() {
    let s = serve(&["tests/fixtures/serve/three.toml"])
        .env("SERVE_TEST_KEY", "insp-key")
        .arg("--api-key-env")
        .arg("SERVE_TEST_KEY")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let inspector = |args: &[&str]| {
        let mut cmd = std::process::Command::new(root().join("node_modules/.bin/mcp-inspector"));
        cmd.arg("--cli")
            .arg(format!("{}/mcp", s.url))
            .args(["--header", "x-api-key: insp-key"])
            .args(args)
            // Its catalog of servers goes under HOME: a directory of the test's own.
            .env("HOME", home.path())
            .env("PATH", path_with_node());
        let out = cmd.output().expect("the inspector runs");
        assert!(
            out.status.success(),
            "the inspector failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Json>(&out.stdout).expect("the inspector answers JSON")
    };
    // An assistant made through the API is a tool too, named by its id.
    let made = s
        .http()
        .with_key("insp-key")
        .post(
            "/assistants",
            json!({"graph_id": "three", "name": "triple", "description": "Three, named."}),
        )
        .await
        .json();
    let id = made["assistant_id"].as_str().unwrap().to_string();
    let listed = inspector(&["--method", "tools/list"]);
    let names: Vec<(&str, &str)> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["title"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("three", "three"),
            (id.as_str(), "triple"),
            ("answer_interrupt", "")
        ]
    );
    assert_eq!(listed["tools"][1]["description"], "Three, named.");
    assert_eq!(
        listed["tools"][0]["inputSchema"]["required"],
        json!(["input"])
    );
    let called = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "three",
        "--tool-arg",
        "input=hi",
    ]);
    assert_eq!(called["isError"], json!(false));
    assert_eq!(
        called["structuredContent"],
        json!({"input": "hi", "trail": ["a:hi", "b"]})
    );
    let by_assistant = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        &id,
        "--tool-arg",
        "input=ho",
    ]);
    assert_eq!(
        by_assistant["structuredContent"],
        json!({"input": "ho", "trail": ["a:ho", "b"]})
    );
}

/// The official A2A client (`a2a-sdk` from PyPI) talks to each graph that has a
/// `messages` field at `/a2a/{assistant}` (behind the server's API key): its card, a
/// conversation in one context, a task that waits for input and is answered, a task
/// read back, the refusals.
#[tokio::test]
async fn the_official_a2a_client_talks_to_a_graph() {
    let s = serve(&[
        "tests/fixtures/serve_a2a",
        "tests/fixtures/serve/three.toml",
    ])
    .env("SERVE_TEST_KEY", "a2a-key")
    .arg("--api-key-env")
    .arg("SERVE_TEST_KEY")
    .start()
    .await;
    let steps = python("a2a_client.py", &s.url, Some("a2a-key")).await;
    insta::assert_snapshot!(steps);
    // Without the key: refused, as every other endpoint.
    for path in ["/a2a/echo", "/a2a/echo/.well-known/agent-card.json"] {
        assert_eq!(s.http().get(path).await.status, 401, "{path}");
    }
    // An assistant made through the API is an agent too, at its id.
    let h = s.http().with_key("a2a-key");
    let id = h
        .post(
            "/assistants",
            json!({"graph_id": "echo", "name": "parrot", "description": "Says it back."}),
        )
        .await
        .json()["assistant_id"]
        .as_str()
        .unwrap()
        .to_string();
    let card = h.get(&format!("/a2a/{id}")).await.json();
    assert_eq!(
        (&card["name"], &card["description"]),
        (&json!("parrot"), &json!("Says it back."))
    );
    let sent = h
        .post(
            &format!("/a2a/{id}"),
            json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
                "role": "user", "messageId": "m1", "kind": "message",
                "parts": [{"kind": "text", "text": "hi"}]}}}),
        )
        .await
        .json();
    assert_eq!(sent["result"]["status"]["state"], "completed", "{sent}");
    assert_eq!(
        sent["result"]["artifacts"][0]["parts"][0]["text"],
        "echo: hi"
    );
}

/// `PATH` with the Node the tests install (`node_modules/.bin/node`, Node 22) first, for
/// tools from npm that start with `#!/usr/bin/env node`.
fn path_with_node() -> String {
    format!(
        "{}:{}",
        root().join("node_modules/.bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}
