//! Spans from a run's events: one per run (a start or a resume), per node, per model
//! call and per tool call, with the OpenTelemetry GenAI semantic conventions' names.
//! Pure: the events and when each arrived go in, finished spans come out.

use crate::run::Event;
use serde_json::{Value as Json, json};
use std::collections::HashMap;

/// A finished span, in OTLP's JSON mapping (ids as hex, times as strings of nanoseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub start_ms: u64,
    pub end_ms: u64,
    pub attributes: Vec<(&'static str, Json)>,
    /// An error's message: the span's status is ERROR.
    pub error: Option<String>,
}

impl Span {
    pub fn to_otlp(&self) -> Json {
        let attributes: Vec<Json> = self
            .attributes
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": any_value(v) }))
            .collect();
        let mut span = json!({
            "traceId": hex::encode(self.trace_id),
            "spanId": hex::encode(self.span_id),
            "name": self.name,
            // INTERNAL for the run and its nodes, CLIENT for calls out of the process.
            "kind": if self.name.starts_with("chat ") || self.name.starts_with("execute_tool ") { 3 } else { 1 },
            "startTimeUnixNano": (self.start_ms * 1_000_000).to_string(),
            "endTimeUnixNano": (self.end_ms.max(self.start_ms) * 1_000_000).to_string(),
            "attributes": attributes,
            "status": match &self.error {
                Some(m) => json!({ "code": 2, "message": m }),
                None => json!({ "code": 0 }),
            },
        });
        if let Some(p) = self.parent {
            span["parentSpanId"] = json!(hex::encode(p));
        }
        span
    }
}

/// An attribute value in OTLP's JSON mapping (integers as strings, as protobuf's JSON
/// form writes 64-bit numbers).
fn any_value(v: &Json) -> Json {
    match v {
        Json::Bool(b) => json!({ "boolValue": b }),
        Json::Number(n) if n.is_i64() || n.is_u64() => json!({ "intValue": n.to_string() }),
        Json::Number(n) => json!({ "doubleValue": n.as_f64() }),
        Json::String(s) => json!({ "stringValue": s }),
        other => json!({ "stringValue": other.to_string() }),
    }
}

/// A span still open.
struct Open {
    id: [u8; 8],
    name: String,
    start_ms: u64,
    attributes: Vec<(&'static str, Json)>,
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

    /// Takes one event of the run under `key`, arrived at `at_ms`; the run's spans when
    /// it has ended (or paused, or stopped).
    pub fn event(&mut self, key: &str, at_ms: u64, event: &Event) -> Option<Vec<Span>> {
        if let Event::RunStarted {
            thread,
            graph,
            run,
            resumed,
        } = event
        {
            let earlier = self.close(key, at_ms, None);
            self.runs.insert(
                key.to_string(),
                RunTrace {
                    trace_id: new_id(),
                    run: Open {
                        id: new_id(),
                        name: format!("invoke_agent {graph}"),
                        start_ms: at_ms,
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
                        start_ms: at_ms,
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
                    let span = finish(trace.trace_id, Some(trace.run.id), open, at_ms, None);
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
                        at_ms,
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
            } => {
                let mut attributes = vec![
                    ("gen_ai.operation.name", json!("chat")),
                    ("gen_ai.request.model", json!(model)),
                    ("gen_ai.usage.input_tokens", json!(tokens_in)),
                    ("gen_ai.usage.output_tokens", json!(tokens_out)),
                    ("switchyard.cache_hit", json!(cache_hit)),
                    ("switchyard.attempt", json!(attempt)),
                    ("switchyard.node", json!(&**node)),
                ];
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
                            json!(output_messages(r).to_string()),
                        ));
                    }
                }
                let parent = trace.nodes.get(&**node).map_or(trace.run.id, |n| n.id);
                trace.done.push(Span {
                    trace_id: trace.trace_id,
                    span_id: new_id(),
                    parent: Some(parent),
                    name: format!("chat {model}"),
                    start_ms: at_ms.saturating_sub(*latency_ms),
                    end_ms: at_ms,
                    attributes,
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
                ..
            } => {
                let mut attributes = vec![
                    ("gen_ai.operation.name", json!("execute_tool")),
                    ("gen_ai.tool.name", json!(tool)),
                    ("switchyard.mcp.server", json!(server)),
                    ("switchyard.attempt", json!(attempt)),
                    ("switchyard.node", json!(&**node)),
                ];
                if self.content {
                    attributes.push(("gen_ai.tool.call.arguments", json!(arguments.to_string())));
                }
                let parent = trace.nodes.get(&**node).map_or(trace.run.id, |n| n.id);
                trace.done.push(Span {
                    trace_id: trace.trace_id,
                    span_id: new_id(),
                    parent: Some(parent),
                    name: format!("execute_tool {tool}"),
                    start_ms: at_ms.saturating_sub(*duration_ms),
                    end_ms: at_ms,
                    attributes,
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
                return self.close(key, at_ms, Some((status, error)));
            }
            _ => {}
        }
        None
    }

    /// Ends the run under `key` if it is still open (it ended without its last event):
    /// its spans, the run's marked as an error.
    pub fn end(&mut self, key: &str, at_ms: u64) -> Option<Vec<Span>> {
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
            spans.extend(self.close(&k, at_ms, Some(how)).into_iter().flatten());
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
        at_ms: u64,
        how: Option<(String, Option<String>)>,
    ) -> Option<Vec<Span>> {
        let mut trace = self.runs.remove(key)?;
        let run_id = trace.run.id;
        let mut open: Vec<Open> = trace.nodes.drain().map(|(_, o)| o).collect();
        open.sort_by_key(|o| o.start_ms);
        for node in open {
            let span = finish(trace.trace_id, Some(run_id), node, at_ms, None);
            trace.done.push(span);
        }
        let (status, error) = how.unwrap_or_else(|| ("unknown".into(), None));
        trace
            .run
            .attributes
            .push(("switchyard.status", json!(status)));
        let run = finish(trace.trace_id, None, trace.run, at_ms, error);
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
/// the text it stands for).
fn output_messages(reply: &Json) -> Json {
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
    json!([{ "role": "assistant", "parts": parts }])
}

fn finish(
    trace_id: [u8; 16],
    parent: Option<[u8; 8]>,
    open: Open,
    end_ms: u64,
    error: Option<String>,
) -> Span {
    Span {
        trace_id,
        span_id: open.id,
        parent,
        name: open.name,
        start_ms: open.start_ms,
        end_ms,
        attributes: open.attributes,
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
        assert!(ended.iter().all(|s| s.end_ms == 9 && s.error.is_some()));
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
