//! Traces in a real tracing backend: Arize Phoenix (from PyPI, started here, offline:
//! its outside resources and its own telemetry off), taking Switchyard's OTLP over HTTP
//! (protobuf) and over gRPC, and giving the spans back through its REST API with its
//! reading of them: an agent, its LLM call with the model's input and output messages,
//! its tool call.

use super::run_traced_with;
use crate::llm::server::{Server, completion};
use crate::util::root;
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Phoenix {
    child: Child,
    url: String,
    grpc: u16,
    _dir: tempfile::TempDir,
}

impl Phoenix {
    fn start() -> Phoenix {
        let bin = root().join("target/phoenix/bin/phoenix");
        assert!(
            bin.exists(),
            "{} is missing: run `bash .ci/setup` (arize-phoenix from PyPI)",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        // Its gRPC port is said nowhere: one that was free a moment ago.
        let grpc = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(bin)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", "0")
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_SQL_DATABASE_URL", "sqlite:///:memory:")
            // Nothing fetched from outside, nothing told about the run.
            .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("PHOENIX_DISABLE_AGENT_ASSISTANT", "true")
            .env("PHOENIX_ENABLE_MCP_SERVER", "false")
            .env("PHOENIX_ALLOWED_SANDBOX_PROVIDERS", "NONE")
            .env("PHOENIX_LOG_MIGRATIONS", "false")
            .env("HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("phoenix starts");
        // Its port is said on standard error; the rest is drained so that it never
        // waits on a full pipe.
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut said = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("Uvicorn running on ").nth(1) {
                    let _ = tx.send(Ok(rest.split_whitespace().next().unwrap().to_string()));
                } else if said.len() < 40 {
                    said.push(line);
                }
            }
            let _ = tx.send(Err(said.join("\n")));
        });
        let url = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(url)) => url,
            Ok(Err(said)) => panic!("phoenix ended before it listened:\n{said}"),
            Err(_) => panic!("phoenix did not listen within 120 s"),
        };
        Phoenix {
            child,
            url,
            grpc,
            _dir: dir,
        }
    }

    /// The spans of `project`, once there are `n` (its ingestion is asynchronous).
    async fn spans(&self, project: &str, n: usize) -> Vec<Json> {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let url = format!(
                "{}/v1/projects/{project}/spans?sort=start_time&order=asc&limit=100",
                self.url
            );
            if let Ok(r) = client.get(&url).send().await
                && r.status().is_success()
            {
                let body: Json = serde_json::from_str(&r.text().await.unwrap()).unwrap();
                let spans = body["data"].as_array().cloned().unwrap_or_default();
                if spans.len() >= n {
                    return spans;
                }
            }
            assert!(
                Instant::now() < deadline,
                "phoenix has not got {n} spans of project `{project}` in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each span as Phoenix read it: by name, its kind, its parent's name, and the
/// attributes asked for (Phoenix adds its own, `llm.*`, from the GenAI ones).
fn read(spans: &[Json], keys: &[&str]) -> Json {
    let names: HashMap<&str, &str> = spans
        .iter()
        .map(|s| {
            (
                s["context"]["span_id"].as_str().unwrap(),
                s["name"].as_str().unwrap(),
            )
        })
        .collect();
    let mut out = serde_json::Map::new();
    for s in spans {
        let attributes: serde_json::Map<String, Json> = keys
            .iter()
            .filter_map(|k| s["attributes"].get(*k).map(|v| (k.to_string(), v.clone())))
            .collect();
        out.insert(
            s["name"].as_str().unwrap().to_string(),
            json!({
                "kind": s["span_kind"],
                "parent": s["parent_id"].as_str().map(|p| names.get(p).copied().unwrap_or("?")),
                "status": s["status_code"],
                "attributes": attributes,
            }),
        );
    }
    Json::Object(out)
}

#[tokio::test]
async fn phoenix_takes_the_traces_over_http_and_grpc_and_reads_the_model_and_tool_calls() {
    let phoenix = Phoenix::start();
    let keys = [
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        // Phoenix's reading of the model's input and output messages: the output is
        // there only when each message says why it finished.
        "llm.input_messages.0.message.content",
        "llm.output_messages.0.message.content",
        "llm.output_messages.0.message.finish_reason",
        "llm.token_count.total",
    ];
    let expected = json!({
        "invoke_agent traced": {
            "kind": "AGENT", "parent": null, "status": "UNSET",
            "attributes": { "gen_ai.operation.name": "invoke_agent" },
        },
        "node ask": { "kind": "UNKNOWN", "parent": "invoke_agent traced", "status": "UNSET", "attributes": {} },
        "chat scripted": {
            "kind": "LLM", "parent": "node ask", "status": "UNSET",
            "attributes": {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "scripted",
                "gen_ai.response.finish_reasons": ["stop"],
                "gen_ai.usage.input_tokens": 12,
                "llm.input_messages.0.message.content": "Answer in a word: 2 + 2?",
                "llm.output_messages.0.message.content": "{\"text\": \"four\"}",
                "llm.output_messages.0.message.finish_reason": "stop",
                "llm.token_count.total": 15,
            },
        },
        "node echo": { "kind": "UNKNOWN", "parent": "invoke_agent traced", "status": "UNSET", "attributes": {} },
        "start_server everything": { "kind": "UNKNOWN", "parent": "node echo", "status": "UNSET", "attributes": {} },
        "execute_tool echo": {
            "kind": "TOOL", "parent": "node echo", "status": "UNSET",
            "attributes": {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "echo",
                "gen_ai.tool.call.id": "t1/0/2/0",
            },
        },
        "node done": { "kind": "UNKNOWN", "parent": "invoke_agent traced", "status": "UNSET", "attributes": {} },
    });
    // OTLP/HTTP with protobuf, the default, to its HTTP port; then gRPC to its gRPC
    // port. Each run in a project of its own, named by the resource.
    let grpc = format!("http://127.0.0.1:{}", phoenix.grpc);
    for (project, url, protocol) in [
        ("over-http", phoenix.url.as_str(), "http/protobuf"),
        ("over-grpc", grpc.as_str(), "grpc"),
    ] {
        let llm = Server::start(vec![completion(r#"{"text": "four"}"#, 12, 3)]).await;
        let resource = format!("openinference.project.name={project}");
        let out = run_traced_with(
            &llm,
            &["--otlp", url, "--otlp-content"],
            &[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
                ("OTEL_RESOURCE_ATTRIBUTES", &resource),
            ],
        )
        .await
        .code(0);
        assert!(
            !out.stderr.contains("warning"),
            "{protocol}: {}",
            out.stderr
        );
        let spans = phoenix.spans(project, 7).await;
        assert_eq!(read(&spans, &keys), expected, "{protocol}");
    }
}
