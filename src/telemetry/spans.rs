//! Spans from a run's events: one per run (a start or a resume), per node, per model
//! call and per tool call, with the OpenTelemetry GenAI semantic conventions' names.
//! Pure: the events and when each arrived go in, finished spans come out.

use crate::run::Event;
use serde_json::{Value as Json, json};
use std::collections::HashMap;

/// A finished span: ids, times in nanoseconds since the Unix epoch, the GenAI
/// conventions' name, kind and attributes (values as JSON: strings, numbers, booleans,
/// lists of strings), and the events that happened in it.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(&'static str, Json)>,
    pub events: Vec<SpanEvent>,
    /// An error's message: the span's status is ERROR.
    pub error: Option<String>,
}

/// A span's kind, as the GenAI conventions give them: CLIENT for a request to a
/// model's server, INTERNAL for the run, its nodes and tool executions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Internal,
    Client,
}

/// Something that happened in a span (a retried model request).
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    pub name: &'static str,
    pub at_ns: u64,
    pub attributes: Vec<(&'static str, Json)>,
}

/// A span still open.
struct Open {
    id: [u8; 8],
    name: String,
    start_ns: u64,
    attributes: Vec<(&'static str, Json)>,
    events: Vec<SpanEvent>,
}

/// The spans of one run so far.
struct RunTrace {
    trace_id: [u8; 16],
    run: Open,
    nodes: HashMap<String, Open>,
    done: Vec<Span>,
}

/// Turns the events of runs (each under a key of the caller's: a run id) into spans.
#[derive(Default)]
pub struct Spans {
    runs: HashMap<String, RunTrace>,
    /// Messages and replies go into model spans.
    pub content: bool,
}

impl Spans {
    pub fn new(content: bool) -> Self {
        Spans {
            runs: HashMap::new(),
            content,
        }
    }

    /// Takes one event of the run under `key`, arrived at `at_ns`; the run's spans when
    /// it has ended (or paused, or stopped).
    pub fn event(&mut self, key: &str, at_ns: u64, event: &Event) -> Option<Vec<Span>> {
        if let Event::RunStarted {
            thread,
            graph,
            run,
            resumed,
        } = event
        {
            let earlier = self.close(key, at_ns, None);
            self.runs.insert(
                key.to_string(),
                RunTrace {
                    trace_id: new_id(),
                    run: Open {
                        id: new_id(),
                        name: format!("invoke_agent {graph}"),
                        start_ns: at_ns,
                        events: Vec::new(),
                        attributes: vec![
                            ("gen_ai.operation.name", json!("invoke_agent")),
                            ("gen_ai.agent.name", json!(graph)),
                            ("gen_ai.conversation.id", json!(&**thread)),
                            ("switchyard.run", json!(run)),
                            ("switchyard.resumed", json!(resumed)),
                        ],
                    },
                    nodes: HashMap::new(),
                    done: Vec::new(),
                },
            );
            return earlier;
        }
        let trace = self.runs.get_mut(key)?;
        match event {
            Event::NodeStarted { node, step } => {
                trace.nodes.insert(
                    node.to_string(),
                    Open {
                        id: new_id(),
                        name: format!("node {node}"),
                        start_ns: at_ns,
                        events: Vec::new(),
                        attributes: vec![
                            ("switchyard.node", json!(&**node)),
                            ("switchyard.step", json!(step)),
                        ],
                    },
                );
            }
            Event::NodeFinished { node, skipped, .. } => {
                if let Some(mut open) = trace.nodes.remove(&**node) {
                    if *skipped {
                        open.attributes.push(("switchyard.skipped", json!(true)));
                    }
                    let span = finish(trace.trace_id, Some(trace.run.id), open, at_ns, None);
                    trace.done.push(span);
                }
            }
            Event::NodeFailed {
                node,
                message,
                handled,
            } => {
                if let Some(mut open) = trace.nodes.remove(&**node) {
                    open.attributes.push(("switchyard.handled", json!(handled)));
                    let span = finish(
                        trace.trace_id,
                        Some(trace.run.id),
                        open,
                        at_ns,
                        Some(message.clone()),
                    );
                    trace.done.push(span);
                }
            }
            Event::LlmInvocation {
                node,
                model,
                tokens_in,
                tokens_out,
                cache_hit,
                latency_ms,
                attempt,
                messages,
                reply,
                provider,
                endpoint,
                response_id,
                response_model,
                finish_reason,
            } => {
                let mut attributes = vec![
                    ("gen_ai.operation.name", json!("chat")),
                    ("gen_ai.request.model", json!(model)),
                    ("gen_ai.usage.input_tokens", json!(tokens_in)),
                    ("gen_ai.usage.output_tokens", json!(tokens_out)),
                ];
                if let Some(p) = provider {
                    attributes.push(("gen_ai.provider.name", json!(provider_name(p))));
                }
                if let Some((host, port)) = endpoint.as_deref().and_then(address) {
                    attributes.push(("server.address", json!(host)));
                    attributes.push(("server.port", json!(port)));
                }
                if let Some(id) = response_id {
                    attributes.push(("gen_ai.response.id", json!(id)));
                }
                if let Some(m) = response_model {
                    attributes.push(("gen_ai.response.model", json!(m)));
                }
                if let Some(f) = finish_reason {
                    attributes.push(("gen_ai.response.finish_reasons", json!([f])));
                }
                attributes.extend([
                    ("switchyard.cache_hit", json!(cache_hit)),
                    ("switchyard.attempt", json!(attempt)),
                    ("switchyard.node", json!(&**node)),
                ]);
                if self.content {
                    if let Some(m) = messages {
                        let input: Vec<Json> = m.iter().map(input_message).collect();
                        attributes.push((
                            "gen_ai.input.messages",
                            json!(Json::from(input).to_string()),
                        ));
                    }
                    if let Some(r) = reply {
                        attributes.push((
                            "gen_ai.output.messages",
                            json!(output_messages(r, finish_reason.as_deref()).to_string()),
                        ));
                    }
                }
                let parent = trace.nodes.get(&**node).map_or(trace.run.id, |n| n.id);
                trace.done.push(Span {
                    trace_id: trace.trace_id,
                    span_id: new_id(),
                    parent: Some(parent),
                    name: format!("chat {model}"),
                    kind: Kind::Client,
                    start_ns: at_ns.saturating_sub(latency_ms.saturating_mul(1_000_000)),
                    end_ns: at_ns,
                    attributes,
                    events: Vec::new(),
                    error: None,
                });
            }
            Event::LlmRetry {
                node,
                attempt,
                error,
                wait_ms,
                discard,
            } => {
                if let Some(open) = trace.nodes.get_mut(&**node) {
                    open.events.push(SpanEvent {
                        name: "gen_ai.request.retry",
                        at_ns,
                        attributes: vec![
                            ("switchyard.attempt", json!(attempt)),
                            ("switchyard.error", json!(error)),
                            ("switchyard.wait_ms", json!(wait_ms)),
                            ("switchyard.discard", json!(discard)),
                        ],
                    });
                }
            }
            Event::ServerStarted {
                server,
                pid,
                restart,
                duration_ms,
            } => {
                let mut attributes = vec![
                    ("switchyard.mcp.server", json!(server)),
                    ("switchyard.mcp.restart", json!(restart)),
                ];
                if let Some(pid) = pid {
                    attributes.push(("process.pid", json!(pid)));
                }
                // Under the node that needed the server, when one node runs (a server
                // starts when a node first calls it); else under the run.
                let parent = match trace.nodes.values().collect::<Vec<_>>().as_slice() {
                    [node] => node.id,
                    _ => trace.run.id,
                };
                trace.done.push(Span {
                    trace_id: trace.trace_id,
                    span_id: new_id(),
                    parent: Some(parent),
                    name: format!("start_server {server}"),
                    kind: Kind::Internal,
                    start_ns: at_ns.saturating_sub(duration_ms.saturating_mul(1_000_000)),
                    end_ns: at_ns,
                    attributes,
                    events: Vec::new(),
                    error: None,
                });
            }
            Event::ToolCall {
                node,
                server,
                tool,
                arguments,
                duration_ms,
                attempt,
                is_error,
                call_id,
                ..
            } => {
                let mut attributes = vec![
                    ("gen_ai.operation.name", json!("execute_tool")),
                    ("gen_ai.tool.name", json!(tool)),
                    ("gen_ai.tool.type", json!("extension")),
                    ("switchyard.mcp.server", json!(server)),
                    ("switchyard.attempt", json!(attempt)),
                    ("switchyard.node", json!(&**node)),
                ];
                if !call_id.is_empty() {
                    attributes.push(("gen_ai.tool.call.id", json!(call_id)));
                }
                if self.content {
                    attributes.push(("gen_ai.tool.call.arguments", json!(arguments.to_string())));
                }
                let parent = trace.nodes.get(&**node).map_or(trace.run.id, |n| n.id);
                trace.done.push(Span {
                    trace_id: trace.trace_id,
                    span_id: new_id(),
                    parent: Some(parent),
                    name: format!("execute_tool {tool}"),
                    kind: Kind::Internal,
                    start_ns: at_ns.saturating_sub(duration_ms.saturating_mul(1_000_000)),
                    end_ns: at_ns,
                    attributes,
                    events: Vec::new(),
                    error: is_error.then(|| "the tool answered with an error".to_string()),
                });
            }
            Event::Interrupted { node, .. } => {
                trace
                    .run
                    .attributes
                    .push(("switchyard.interrupted_at", json!(&**node)));
            }
            Event::RunFinished { status, .. } => {
                let status = status.to_string();
                let error = (status == "failed").then(|| "the run failed".to_string());
                return self.close(key, at_ns, Some((status, error)));
            }
            _ => {}
        }
        None
    }

    /// Ends the run under `key` if it is still open (it ended without its last event):
    /// its spans, the run's marked as an error.
    pub fn end(&mut self, key: &str, at_ns: u64) -> Option<Vec<Span>> {
        // The run's subgraph children (`key/node`, deeper ones first) end with it: a
        // child that failed sent no last event of its own.
        let prefix = format!("{key}/");
        let mut keys: Vec<String> = self
            .runs
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
        keys.push(key.to_string());
        let mut spans = Vec::new();
        for k in keys {
            let how = (
                "ended".to_string(),
                Some("the run ended without finishing".to_string()),
            );
            spans.extend(self.close(&k, at_ns, Some(how)).into_iter().flatten());
        }
        (!spans.is_empty()).then_some(spans)
    }

    /// Whether `event` makes or ends a span: the others are not sent to the exporter.
    pub(crate) fn wants(event: &Event) -> bool {
        match event {
            Event::Subgraph { inner, .. } => Self::wants(inner),
            Event::RunStarted { .. }
            | Event::NodeStarted { .. }
            | Event::NodeFinished { .. }
            | Event::NodeFailed { .. }
            | Event::LlmInvocation { .. }
            | Event::LlmRetry { .. }
            | Event::ServerStarted { .. }
            | Event::ToolCall { .. }
            | Event::Interrupted { .. }
            | Event::RunFinished { .. } => true,
            _ => false,
        }
    }

    /// Ends the run under `key` and everything still open in it.
    fn close(
        &mut self,
        key: &str,
        at_ns: u64,
        how: Option<(String, Option<String>)>,
    ) -> Option<Vec<Span>> {
        let mut trace = self.runs.remove(key)?;
        let run_id = trace.run.id;
        let mut open: Vec<Open> = trace.nodes.drain().map(|(_, o)| o).collect();
        open.sort_by_key(|o| o.start_ns);
        for node in open {
            let span = finish(trace.trace_id, Some(run_id), node, at_ns, None);
            trace.done.push(span);
        }
        let (status, error) = how.unwrap_or_else(|| ("unknown".into(), None));
        trace
            .run
            .attributes
            .push(("switchyard.status", json!(status)));
        let run = finish(trace.trace_id, None, trace.run, at_ns, error);
        trace.done.insert(0, run);
        Some(trace.done)
    }
}

/// A chat message as the GenAI conventions write one: its role and its parts.
fn input_message(m: &Json) -> Json {
    let mut parts = Vec::new();
    match m.get("content") {
        Some(Json::String(text)) => parts.push(json!({ "type": "text", "content": text })),
        Some(Json::Null) | None => {}
        Some(other) => parts.push(json!({ "type": "text", "content": other.to_string() })),
    }
    for call in m
        .get("tool_calls")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(json!({
            "type": "tool_call",
            "id": call.get("id"),
            "name": call.pointer("/function/name"),
            "arguments": call.pointer("/function/arguments"),
        }));
    }
    if let Some(id) = m.get("tool_call_id") {
        parts =
            vec![json!({ "type": "tool_call_response", "id": id, "response": m.get("content") })];
    }
    json!({ "role": m.get("role").cloned().unwrap_or(json!("user")), "parts": parts })
}

/// The model's answer as the conventions' output messages (a cache hit's output as
/// the text it stands for), with why it finished, which the conventions require.
fn output_messages(reply: &Json, finish_reason: Option<&str>) -> Json {
    let mut parts = Vec::new();
    match reply.get("content") {
        Some(Json::String(text)) => parts.push(json!({ "type": "text", "content": text })),
        Some(_) => {}
        None => parts.push(json!({ "type": "text", "content": reply.to_string() })),
    }
    for call in reply
        .get("tool_calls")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(json!({ "type": "tool_call", "name": call.get("name"), "arguments": call.get("arguments") }));
    }
    json!([{
        "role": "assistant",
        "parts": parts,
        "finish_reason": finish_reason.unwrap_or("stop"),
    }])
}

/// `gen_ai.provider.name` as the conventions spell the providers Switchyard knows
/// (the others by their own names).
fn provider_name(provider: &str) -> &str {
    match provider {
        "azure" => "azure.ai.openai",
        other => other,
    }
}

/// The host and port of an endpoint's URL (the scheme's port when it names none).
fn address(url: &str) -> Option<(String, u16)> {
    let url = reqwest::Url::parse(url).ok()?;
    Some((url.host_str()?.to_string(), url.port_or_known_default()?))
}

fn finish(
    trace_id: [u8; 16],
    parent: Option<[u8; 8]>,
    open: Open,
    end_ns: u64,
    error: Option<String>,
) -> Span {
    Span {
        trace_id,
        span_id: open.id,
        parent,
        name: open.name,
        kind: Kind::Internal,
        start_ns: open.start_ns,
        end_ns: end_ns.max(open.start_ns),
        attributes: open.attributes,
        events: open.events,
        error,
    }
}

/// A fresh id, every byte of it spread: the digest of a UUIDv7 (its time and random
/// bits) and a counter (never all zero, which OTLP forbids).
fn new_id<const N: usize>() -> [u8; N] {
    use sha2::Digest;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut hasher = sha2::Sha256::new();
    hasher.update(uuid::Uuid::now_v7().as_bytes());
    hasher.update(n.to_le_bytes());
    let digest = hasher.finalize();
    let mut out = [0u8; N];
    out.copy_from_slice(&digest[..N]);
    if out.iter().all(|b| *b == 0) {
        out[N - 1] = 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(graph: &str) -> Event {
        Event::RunStarted {
            thread: "t".into(),
            graph: graph.into(),
            run: 0,
            resumed: false,
        }
    }

    /// A run that ends without its last event takes its subgraph children with it: a
    /// child that failed sent none of its own, and would be kept forever.
    #[test]
    fn a_run_ended_without_finishing_ends_its_subgraph_children() {
        let mut spans = Spans::new(false);
        spans.event("r", 1, &started("parent"));
        spans.event("r/child", 2, &started("child"));
        spans.event("r/child/inner", 3, &started("inner"));
        spans.event("other", 3, &started("other"));
        let ended = spans.end("r", 9).unwrap();
        let names: Vec<&str> = ended.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "invoke_agent inner",
                "invoke_agent child",
                "invoke_agent parent"
            ]
        );
        assert!(ended.iter().all(|s| s.end_ns == 9 && s.error.is_some()));
        assert_eq!(spans.runs.keys().collect::<Vec<_>>(), ["other"]);
    }

    #[test]
    fn only_events_that_make_spans_are_wanted() {
        assert!(Spans::wants(&started("g")));
        let delta = Event::TextDelta {
            node: "n".into(),
            text: "x".into(),
        };
        assert!(!Spans::wants(&delta));
        assert!(!Spans::wants(&Event::Subgraph {
            node: "n".into(),
            inner: Box::new(delta),
        }));
        assert!(Spans::wants(&Event::Subgraph {
            node: "n".into(),
            inner: Box::new(started("g")),
        }));
    }
}
