//! OpenTelemetry traces over OTLP: `switchyard run --otlp URL` against a receiver on
//! 127.0.0.1 (the scripted HTTP server, answering 200), what arrives decoded with the
//! official OTLP definitions (`opentelemetry-proto`: protobuf, the default, and the JSON
//! mapping): one span per run, node, model call, tool call and server start, named,
//! kinded and attributed by the GenAI conventions. `phoenix.rs`: the same runs exported
//! to Arize Phoenix, a real tracing backend, and read back through its API.

use crate::llm::server::{Answer, Server, completion};

pub(crate) mod phoenix;
use crate::util::switchyard;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;

/// A collector that takes `n` exports.
async fn collector(n: usize) -> Server {
    let ok = || Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: "{}".into(),
    };
    Server::start((0..n).map(|_| ok()).collect()).await
}

/// Waits until the collector has taken `n` exports (30 s at most), and says so.
async fn exports(otlp: &Server, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while otlp.seen().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{n} exports expected, the collector took {}",
            otlp.seen().len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(otlp.seen().len(), n, "more exports than expected");
}

/// `switchyard serve` of the three-node graph, exporting its traces to `otlp`.
async fn traced_server(otlp: &Server) -> crate::serve::server::Serve {
    let base = otlp.url().trim_end_matches("/v1").to_string();
    crate::serve::server::serve(&["tests/fixtures/serve/three.toml"])
        .arg("--otlp")
        .arg(&base)
        .start()
        .await
}

/// Runs the traced graph with `extra` flags, the model answering from `llm`.
async fn run_traced(llm: &Server, extra: &[&str]) -> crate::util::Output {
    run_traced_with(llm, extra, &[]).await
}

/// [`run_traced`] with environment variables set.
pub(crate) async fn run_traced_with(
    llm: &Server,
    extra: &[&str],
    env: &[(&str, &str)],
) -> crate::util::Output {
    let mut args = vec![
        "run",
        "tests/fixtures/telemetry/traced.toml",
        "--input",
        r#"{"question": "2 + 2?"}"#,
        "--thread",
        "t1",
        "--store",
        "memory",
    ];
    args.extend_from_slice(extra);
    let mut cmd = switchyard(&args).env("OPENAI_BASE_URL", llm.url());
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.run())
        .await
        .unwrap()
}

/// An export as it arrived: protobuf (OTLP's default) or OTLP JSON, as its content
/// type says.
fn decode(seen: &crate::llm::server::Seen) -> ExportTraceServiceRequest {
    match seen.header("content-type") {
        Some("application/x-protobuf") => {
            <ExportTraceServiceRequest as prost::Message>::decode(seen.raw.as_slice())
                .unwrap_or_else(|e| panic!("not OTLP protobuf: {e}"))
        }
        Some("application/json") => serde_json::from_value(seen.body.clone())
            .unwrap_or_else(|e| panic!("not OTLP JSON ({e}): {}", seen.body)),
        other => panic!("an export of content type {other:?}"),
    }
}

/// The spans of every export, as a tree: name, kind, status, then attributes and
/// events.
fn tree(collector: &Server) -> String {
    let mut spans: Vec<Span> = Vec::new();
    for seen in collector.seen() {
        assert_eq!(seen.path, "/v1/traces");
        let request = decode(&seen);
        for resource in request.resource_spans {
            let service = resource.resource.unwrap().attributes;
            assert!(service.iter().any(|a| a.key == "service.name"));
            for scope in resource.scope_spans {
                assert_eq!(scope.scope.unwrap().name, "switchyard");
                spans.extend(scope.spans);
            }
        }
    }
    let trace = spans[0].trace_id.clone();
    assert!(
        spans.iter().all(|s| s.trace_id == trace),
        "one trace per run"
    );
    assert!(
        spans
            .iter()
            .all(|s| s.start_time_unix_nano <= s.end_time_unix_nano)
    );
    let mut out = String::new();
    fn print(spans: &[Span], parent: &[u8], depth: usize, out: &mut String) {
        let mut children: Vec<&Span> = spans
            .iter()
            .filter(|s| s.parent_span_id == parent)
            .collect();
        // A run's nodes in the order they ran; a node's calls and server starts by
        // name (their start times are their end less a duration in whole ms, which
        // can put a call that began first after a server start it waited for).
        if depth == 0 || depth == 1 {
            children.sort_by_key(|s| (s.start_time_unix_nano, s.name.clone()));
        } else {
            children.sort_by_key(|s| s.name.clone());
        }
        for s in children {
            let status = s.status.as_ref().map_or(0, |st| st.code);
            out.push_str(&format!(
                "{}{} (kind {}, status {status})\n",
                "  ".repeat(depth),
                s.name,
                s.kind
            ));
            for a in &s.attributes {
                let value = match a.value.as_ref().and_then(|v| v.value.clone()) {
                    Some(Value::StringValue(v)) => format!("{v:?}"),
                    Some(Value::IntValue(v)) => v.to_string(),
                    Some(Value::BoolValue(v)) => v.to_string(),
                    Some(Value::DoubleValue(v)) => v.to_string(),
                    Some(Value::ArrayValue(v)) => format!(
                        "{:?}",
                        v.values
                            .iter()
                            .filter_map(|x| match &x.value {
                                Some(Value::StringValue(s)) => Some(s.clone()),
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                    ),
                    other => format!("{other:?}"),
                };
                // What changes from run to run.
                let value = match a.key.as_str() {
                    "server.port" | "process.pid" => "<varies>".to_string(),
                    _ => value,
                };
                out.push_str(&format!("{}  . {} = {value}\n", "  ".repeat(depth), a.key));
            }
            for e in &s.events {
                let attributes: Vec<String> = e.attributes.iter().map(|a| a.key.clone()).collect();
                out.push_str(&format!(
                    "{}  ! {} ({})\n",
                    "  ".repeat(depth),
                    e.name,
                    attributes.join(", ")
                ));
            }
            print(spans, &s.span_id, depth + 1, out);
        }
    }
    print(&spans, &[], 0, &mut out);
    out
}

#[tokio::test]
async fn a_run_is_traced_with_a_span_per_run_node_model_call_and_tool_call() {
    // The model's server is busy once: the retry is an event of the node's span.
    let llm = Server::start(vec![
        crate::llm::server::failure(503, "busy", &[("retry-after", "0")]),
        completion(r#"{"text": "four"}"#, 12, 3),
    ])
    .await;
    let otlp = collector(1).await;
    let base = otlp.url().trim_end_matches("/v1").to_string();
    let out = run_traced(&llm, &["--otlp", &base]).await.code(0);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    assert_eq!(otlp.seen().len(), 1, "one export, when the run ended");
    insta::assert_snapshot!(tree(&otlp));
}

#[tokio::test]
async fn content_goes_into_spans_only_when_asked_and_a_collector_that_is_down_costs_a_warning() {
    let llm = Server::start(vec![completion(r#"{"text": "four"}"#, 12, 3)]).await;
    let otlp = collector(1).await;
    let url = otlp.url().replace("/v1", "/v1/traces");
    // OTLP's JSON this time, with the standard variables' headers and resource.
    run_traced_with(
        &llm,
        &["--otlp", &url, "--otlp-content"],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-tenant=acme,authorization=Bearer%20t0k",
            ),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=test,service.name=agents",
            ),
        ],
    )
    .await
    .code(0);
    let seen = &otlp.seen()[0];
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(
        (seen.header("x-tenant"), seen.header("authorization")),
        (Some("acme"), Some("Bearer t0k"))
    );
    assert_eq!(
        seen.header("user-agent"),
        Some(concat!("switchyard/", env!("CARGO_PKG_VERSION")))
    );
    let resource: Vec<(String, String)> = decode(seen).resource_spans[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .filter_map(|a| match a.value.as_ref().and_then(|v| v.value.clone()) {
            Some(Value::StringValue(v)) if !a.key.starts_with("telemetry.sdk") => {
                Some((a.key.clone(), v))
            }
            _ => None,
        })
        .collect();
    let mut resource = resource;
    resource.sort();
    assert_eq!(
        resource,
        [
            ("deployment.environment".to_string(), "test".to_string()),
            ("service.name".to_string(), "agents".to_string()),
            (
                "service.version".to_string(),
                env!("CARGO_PKG_VERSION").to_string()
            ),
        ]
    );
    let text = tree(&otlp);
    assert!(
        text.contains(r#". gen_ai.input.messages = "[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"Answer in a word: 2 + 2?\"}]}]""#),
        "{text}"
    );
    assert!(
        text.contains(r#". gen_ai.output.messages = "[{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"{\\\"text\\\": \\\"four\\\"}\"}],\"finish_reason\":\"stop\"}]""#),
        "{text}"
    );
    assert!(
        text.contains(r#". gen_ai.tool.call.arguments = "{\"message\":\"four\"}""#),
        "{text}"
    );

    // A protocol of another name is refused before anything runs.
    let out = run_traced_with(
        &llm,
        &["--otlp", "http://127.0.0.1:9"],
        &[("OTEL_EXPORTER_OTLP_PROTOCOL", "pigeon")],
    )
    .await
    .code(1);
    assert_eq!(
        out.stderr,
        "error: OTEL_EXPORTER_OTLP_PROTOCOL is `pigeon`: traces go by `http/protobuf`, `http/json` or `grpc`\n"
    );

    // Nothing listens there: the run is not held up, and says so once it ends.
    let llm = Server::start(vec![completion(r#"{"text": "four"}"#, 12, 3)]).await;
    let out = run_traced(&llm, &["--otlp", "http://127.0.0.1:9"])
        .await
        .code(0);
    assert!(
        out.stderr.contains(
            "warning: the run's traces were not sent: cannot send traces to http://127.0.0.1:9/v1/traces"
        ),
        "{}",
        out.stderr
    );
}

/// `switchyard serve --otlp`: each run the server drives is a trace, its thread the
/// conversation.
#[tokio::test]
async fn the_server_traces_the_runs_it_drives() {
    let otlp = collector(1).await;
    let s = traced_server(&otlp).await;
    let h = s.http();
    h.post("/threads", serde_json::json!({ "thread_id": "traced" }))
        .await;
    let done = h
        .post(
            "/threads/traced/runs/wait",
            serde_json::json!({ "assistant_id": "three", "input": { "input": "x" } }),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.text);
    exports(&otlp, 1).await;
    let text = tree(&otlp);
    let names: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('.'))
        .collect();
    // The nodes indented under the run: its children.
    assert_eq!(
        names,
        [
            "invoke_agent three (kind 1, status 0)",
            "  node a (kind 1, status 0)",
            "  node b (kind 1, status 0)",
            "  node c (kind 1, status 0)",
        ]
    );
    assert!(
        text.contains(r#". gen_ai.conversation.id = "traced""#),
        "{text}"
    );
}

/// A slow collector holds back neither the runs nor each other: the runs that end while
/// an export is in flight are sent together in the next one.
#[tokio::test]
async fn runs_that_end_during_a_slow_export_are_sent_together() {
    let ok = || Answer::Body {
        status: 200,
        headers: Vec::new(),
        body: "{}".into(),
    };
    // Its first export answered when the test lets it.
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let otlp = Server::start(vec![Answer::Held(gate.clone(), Box::new(ok())), ok()]).await;
    let s = traced_server(&otlp).await;
    let h = s.http();
    let run = |thread: &'static str| {
        let h = &h;
        async move {
            h.post("/threads", serde_json::json!({ "thread_id": thread }))
                .await;
            let done = h
                .post(
                    &format!("/threads/{thread}/runs/wait"),
                    serde_json::json!({ "assistant_id": "three", "input": { "input": "x" } }),
                )
                .await;
            assert_eq!(done.status, 200, "{}", done.text);
        }
    };
    run("first").await;
    exports(&otlp, 1).await;
    // The first export is in flight, held: two runs end meanwhile.
    run("second").await;
    run("third").await;
    gate.notify_one();
    exports(&otlp, 2).await;
    // Which threads' runs each export carried.
    let threads: Vec<Vec<String>> = otlp
        .seen()
        .iter()
        .map(|seen| {
            let request = decode(seen);
            let mut threads: Vec<String> = request
                .resource_spans
                .into_iter()
                .flat_map(|r| r.scope_spans)
                .flat_map(|s| s.spans)
                .filter(|s| s.name.starts_with("invoke_agent"))
                .flat_map(|s| s.attributes)
                .filter(|a| a.key == "gen_ai.conversation.id")
                .filter_map(|a| match a.value.and_then(|v| v.value) {
                    Some(Value::StringValue(s)) => Some(s),
                    _ => None,
                })
                .collect();
            threads.sort();
            threads
        })
        .collect();
    assert_eq!(threads, [vec!["first"], vec!["second", "third"]]);
}
