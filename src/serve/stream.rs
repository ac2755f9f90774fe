//! A run's events as server-sent events, in the LangGraph stream modes.
//!
//! Every reader walks the run's log from its first event, keeping what the modes need
//! to know (the node being run, whether it streamed its reply), and writes the parts
//! of its modes from where it starts: the start, or just after the `Last-Event-ID`
//! it was given. An event of the log can make several parts (a checkpoint makes
//! `values`, `updates`, `tasks`...); each part's id is `<event>-<part>`, numbered over
//! every mode whether asked for or not, so an id names the same part for every reader.
//!
//! Frames are `event:`, one `data:` line of compact JSON, `id:`, a blank line. A quiet
//! stream gets a `: heartbeat` comment line (with no blank line after it: the JS SDK
//! turns a blank line after an id into an empty event). The stream ends when the run
//! does, with an `error` event first if it failed.

use super::wire;
use crate::graph::Graph;
use crate::host::{Host, LogEntry, RunHandle};
use crate::run::{Event, State};
use crate::spec::FieldType;
use crate::store::{Checkpoint, RunStatus, Status};
use axum::body::Bytes;
use serde_json::{Value as Json, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// The stream modes a reader asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Modes {
    pub(super) values: bool,
    pub(super) updates: bool,
    pub(super) messages: bool,
    pub(super) custom: bool,
    pub(super) events: bool,
    pub(super) debug: bool,
    pub(super) tasks: bool,
    pub(super) checkpoints: bool,
}

impl Modes {
    /// From the names a client gives; none means `values`.
    pub(super) fn parse(names: &[String]) -> Result<Modes, String> {
        let mut m = Modes::default();
        for name in names {
            match name.as_str() {
                "values" => m.values = true,
                "updates" => m.updates = true,
                // The legacy `messages` mode gets the tuples too: the one message
                // stream this server has.
                "messages-tuple" | "messages" => m.messages = true,
                "custom" => m.custom = true,
                "events" => m.events = true,
                "debug" => m.debug = true,
                "tasks" => m.tasks = true,
                "checkpoints" => m.checkpoints = true,
                other => {
                    return Err(format!(
                        "stream mode `{other}` is not one of values, updates, messages-tuple, messages, custom, events, debug, tasks, checkpoints"
                    ));
                }
            }
        }
        if m == Modes::default() {
            m.values = true;
        }
        Ok(m)
    }

    fn wants(&self, mode: Mode) -> bool {
        match mode {
            Mode::Values => self.values,
            Mode::Updates => self.updates,
            Mode::Messages => self.messages,
            Mode::Custom => self.custom,
            Mode::Events => self.events,
            Mode::Debug => self.debug,
            Mode::Tasks => self.tasks,
            Mode::Checkpoints => self.checkpoints,
        }
    }
}

/// Reads a `stream_mode` value as clients send it: a name, a list of names, or (in a
/// query string) a JSON list.
pub(super) fn mode_names(v: &Json) -> Result<Vec<String>, String> {
    match v {
        Json::Null => Ok(Vec::new()),
        Json::String(s) if s.trim_start().starts_with('[') => {
            let parsed: Json =
                serde_json::from_str(s).map_err(|e| format!("stream_mode `{s}`: {e}"))?;
            mode_names(&parsed)
        }
        Json::String(s) => Ok(vec![s.clone()]),
        Json::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("stream_mode holds `{i}`, not a name"))
            })
            .collect(),
        other => Err(format!("stream_mode is `{other}`, not a name or a list")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Values,
    Updates,
    Messages,
    Custom,
    Events,
    Debug,
    Tasks,
    Checkpoints,
}

/// The parts one log event makes, for every mode (the data of a mode the reader did
/// not ask for is left out: `Json::Null`).
struct Part {
    mode: Mode,
    event: &'static str,
    data: Data,
}

/// A part's data: a JSON value, or JSON text already written (a `values` part, put
/// together from each field's text).
enum Data {
    Json(Json),
    Text(Vec<u8>),
}

/// Parts being collected for a reader's modes.
struct Parts {
    modes: Modes,
    parts: Vec<Part>,
}

impl Parts {
    fn push(&mut self, mode: Mode, event: &'static str, data: impl FnOnce() -> Json) {
        self.push_data(mode, event, || Data::Json(data()));
    }

    fn push_data(&mut self, mode: Mode, event: &'static str, data: impl FnOnce() -> Data) {
        let data = if self.modes.wants(mode) {
            data()
        } else {
            Data::Json(Json::Null)
        };
        self.parts.push(Part { mode, event, data });
    }
}

/// What a reader knows of the run so far.
struct Translator {
    run_id: String,
    thread: String,
    /// The graph version the run uses (from its first checkpoint), for the fields'
    /// types and reducers.
    host: Host,
    graph: Option<Arc<Graph>>,
    /// The state after the last checkpoint: the run's first checkpoint carries it
    /// whole, the others their writes, applied here through the reducers.
    state: Option<State>,
    /// Each field's value as JSON text (as clients see it), kept until a checkpoint
    /// writes the field: a `values` part joins them, so a field that did not change
    /// (a 2 KB page between two looks) is not copied and serialised again.
    field_text: Vec<Option<Vec<u8>>>,
    /// The reader's modes: only their parts are built.
    modes: Modes,
    /// The step of the node running now, and whether its reply streamed.
    step: u64,
    node: Option<Arc<str>>,
    streamed: bool,
}

impl Translator {
    fn message_id(&self) -> String {
        format!("run-{}-{}", self.run_id, self.step)
    }

    fn meta(&self) -> Json {
        json!({
            "tags": [],
            "thread_id": self.thread,
            "run_id": self.run_id,
            "langgraph_node": self.node.as_deref(),
            "langgraph_step": self.step,
            "langgraph_checkpoint_ns": "",
            "checkpoint_ns": "",
        })
    }

    /// The parts one log event makes. Every mode's parts are counted (their ids do not
    /// depend on the reader's modes), and only the reader's are built.
    fn parts(&mut self, entry: &Arc<LogEntry>) -> Vec<Part> {
        let mut out = Parts {
            modes: self.modes,
            parts: Vec::new(),
        };
        match &entry.event {
            Event::Saved { record, values } => {
                self.saved(entry, record, values.as_deref(), &mut out)
            }
            e => {
                match e {
                    Event::NodeStarted { node, step } => {
                        self.step = *step;
                        self.node = Some(node.clone());
                        self.streamed = false;
                        let id = self.task_id();
                        out.push(Mode::Tasks, "tasks", || {
                            json!({ "id": id, "name": &**node, "input": null, "triggers": [], "interrupts": [] })
                        });
                        out.push(Mode::Debug, "debug", || {
                            json!({
                                "type": "task",
                                "timestamp": wire::time(entry.at_ms),
                                "step": step,
                                "payload": { "id": id, "name": &**node, "input": null, "triggers": [] },
                            })
                        });
                    }
                    Event::TextDelta { node, text } => {
                        self.streamed = true;
                        out.push(Mode::Messages, "messages", || {
                            json!([
                                {
                                    "type": "AIMessageChunk",
                                    "content": text,
                                    "id": self.message_id(),
                                    "name": &**node,
                                    "tool_call_chunks": [],
                                    "tool_calls": [],
                                    "invalid_tool_calls": [],
                                    "additional_kwargs": {},
                                    "response_metadata": {},
                                },
                                self.meta(),
                            ])
                        });
                    }
                    Event::NodeFailed { node, message, .. } => {
                        out.push(Mode::Tasks, "tasks", || {
                            json!({ "id": self.task_id(), "name": &**node, "error": message, "interrupts": [] })
                        })
                    }
                    _ => {}
                }
                out.push(Mode::Custom, "custom", || {
                    serde_json::to_value(e).unwrap_or_default()
                });
                out.push(Mode::Events, "events", || {
                    let data = serde_json::to_value(e).unwrap_or_default();
                    json!({
                        "event": langchain_event(e),
                        "name": data["event"],
                        "run_id": self.run_id,
                        "tags": [],
                        "metadata": self.meta(),
                        "parent_ids": [],
                        "data": data,
                    })
                });
            }
        }
        out.parts
    }

    fn task_id(&self) -> String {
        format!("{}:{}", self.run_id, self.step)
    }

    fn saved(
        &mut self,
        entry: &Arc<LogEntry>,
        record: &Arc<Checkpoint>,
        values: Option<&Json>,
        out: &mut Parts,
    ) {
        if self.state.is_none()
            && let Some(g) = self.host.graphs().version(&record.graph_hash)
        {
            self.graph = Some(g);
        }
        if let Some(graph) = &self.graph {
            match (values, &mut self.state) {
                (Some(v), _) => {
                    self.state = Some(State::from_values(graph, v));
                    self.field_text.clear();
                }
                (None, Some(st)) => {
                    let _ = st.apply(graph, record);
                    if record.source == crate::store::Source::Base {
                        self.field_text.clear();
                    }
                    for w in &record.writes {
                        if let Some(text) = graph
                            .field_id(&w.field)
                            .and_then(|id| self.field_text.get_mut(id.0 as usize))
                        {
                            *text = None;
                        }
                    }
                }
                (None, None) => {}
            }
        }
        // Every pending interrupt: a pause inside parallel branches may list several.
        let interrupts = wire::interrupts_of(record);
        let writes = || -> serde_json::Map<String, Json> {
            record
                .writes
                .iter()
                .map(|w| (w.field.to_string(), (*w.value).clone()))
                .collect()
        };
        // Messages a node wrote, each once, unless its reply was streamed as chunks.
        if let (Some(graph), Some(_)) = (&self.graph, &record.node) {
            for w in &record.writes {
                let is_messages = graph
                    .field_id(&w.field)
                    .is_some_and(|id| matches!(graph.field(id).ty.base(), FieldType::Messages));
                if !is_messages {
                    continue;
                }
                let items: Vec<&Json> = match &*w.value {
                    Json::Array(items) => items.iter().collect(),
                    other => vec![other],
                };
                for (i, m) in items.into_iter().enumerate() {
                    if self.streamed && m.get("role").and_then(Json::as_str) == Some("assistant") {
                        continue;
                    }
                    out.push(Mode::Messages, "messages", || {
                        let mut m = m.clone();
                        if let Json::Object(o) = &mut m {
                            o.entry("id").or_insert_with(|| {
                                json!(format!("{}-{}-{i}", self.message_id(), w.field))
                            });
                            if !o.contains_key("type") {
                                let t = match o.get("role").and_then(Json::as_str) {
                                    Some("user") => "human",
                                    Some("assistant") | None => "ai",
                                    Some(other) => other,
                                }
                                .to_string();
                                o.insert("type".into(), json!(t));
                            }
                        }
                        json!([m, self.meta()])
                    });
                }
            }
        }
        if !interrupts.is_empty() {
            out.push(
                Mode::Updates,
                "updates",
                || json!({ "__interrupt__": interrupts }),
            );
        } else if let Some(node) = &record.node
            && !record.writes.is_empty()
        {
            out.push(Mode::Updates, "updates", || json!({ &**node: writes() }));
        }
        // The state, once, for the modes that show it in a JSON value; `values` alone
        // writes it from its fields' texts.
        let values = (self.modes.debug || self.modes.checkpoints).then(|| self.values_json(record));
        if self.modes.values {
            let text = match &values {
                Some(v) => serde_json::to_vec(v).unwrap_or_default(),
                None => self.values_text(record),
            };
            out.push_data(Mode::Values, "values", || Data::Text(text));
        } else {
            out.push(Mode::Values, "values", || Json::Null);
        }
        if let Some(node) = &record.node {
            let id = self.task_id();
            let result =
                || -> Vec<Json> { writes().into_iter().map(|(k, v)| json!([k, v])).collect() };
            out.push(Mode::Tasks, "tasks", || {
                json!({
                    "id": id,
                    "name": &**node,
                    "error": null,
                    "result": result(),
                    "interrupts": interrupts,
                })
            });
            out.push(Mode::Debug, "debug", || {
                json!({
                    "type": "task_result",
                    "timestamp": wire::time(entry.at_ms),
                    "step": record.step,
                    "payload": { "id": id, "name": &**node, "error": null, "result": result(), "interrupts": interrupts },
                })
            });
        }
        let checkpoint = || {
            json!({
                "config": { "configurable": wire::checkpoint_ref(&record.thread, record.seq) },
                "parent_config": record.seq.checked_sub(1).map(|p| json!({ "configurable": wire::checkpoint_ref(&record.thread, p) })),
                "values": values.clone().unwrap_or_default(),
                "metadata": wire::metadata(record),
                "next": wire::next(record),
                "tasks": wire::tasks(record),
            })
        };
        out.push(Mode::Debug, "debug", || {
            json!({
                "type": "checkpoint",
                "timestamp": wire::time(record.at_ms),
                "step": record.step,
                "payload": checkpoint(),
            })
        });
        out.push(Mode::Checkpoints, "checkpoints", checkpoint);
        if record.status != Status::Running {
            self.node = None;
        }
    }

    /// [`Self::values_json`] as text, byte for byte what serialising it gives, written
    /// from each field's kept text.
    fn values_text(&mut self, record: &Checkpoint) -> Vec<u8> {
        let pending = wire::interrupts_of(record);
        let mut out = Vec::with_capacity(256);
        out.push(b'{');
        if let (Some(st), Some(g)) = (&self.state, &self.graph) {
            self.field_text.resize(g.fields.len(), None);
            for (i, ((f, v), text)) in g
                .fields
                .iter()
                .zip(st.values.iter())
                .zip(self.field_text.iter_mut())
                .enumerate()
            {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut out, &*f.name);
                out.push(b':');
                let text = text.get_or_insert_with(|| {
                    let v: &Json = v;
                    let mut t = Vec::new();
                    let _ = match (f.ty.base(), v) {
                        (FieldType::Messages, Json::Array(items)) => serde_json::to_writer(
                            &mut t,
                            &items.iter().map(wire::Typed).collect::<Vec<_>>(),
                        ),
                        _ => serde_json::to_writer(&mut t, v),
                    };
                    t
                });
                out.extend_from_slice(text);
            }
        }
        if !pending.is_empty() {
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(b"\"__interrupt__\":");
            let _ = serde_json::to_writer(&mut out, &pending);
        }
        out.push(b'}');
        out
    }

    /// The state after a checkpoint, as clients see it, with the pending interrupt.
    fn values_json(&self, record: &Checkpoint) -> Json {
        let mut v = match (&self.state, &self.graph) {
            (Some(st), Some(g)) => wire::values(st.to_json(g), Some(g)),
            _ => json!({}),
        };
        let pending = wire::interrupts_of(record);
        if let (false, Json::Object(o)) = (pending.is_empty(), &mut v) {
            o.insert("__interrupt__".into(), json!(pending));
        }
        v
    }

    fn new(host: &Host, run: &RunHandle, modes: Modes) -> Translator {
        Translator {
            run_id: run.id.clone(),
            thread: run.thread.clone(),
            host: host.clone(),
            graph: host.graphs().get(&run.assistant).and_then(|s| s.current),
            state: None,
            field_text: Vec::new(),
            modes,
            step: 0,
            node: None,
            streamed: false,
        }
    }
}

/// What `/wait` and `/join` answer once a run ended: the state after its last
/// checkpoint (with `__interrupt__` when it paused at one), or `__error__` when it
/// failed; a run that wrote nothing answers with its thread's values.
pub(super) fn result(host: &Host, run: &RunHandle) -> Json {
    match run.end() {
        Some(end) if end.status == RunStatus::Error => {
            return json!({ "__error__": { "error": "RunError", "message": end.error } });
        }
        // Stopped by a shutdown: it goes on when the server is back.
        Some(end) if end.status == RunStatus::Pending => {
            return json!({ "__error__": { "error": "Unavailable", "message": "the server stopped before the run ended; it goes on when the server is back: join it again then" } });
        }
        _ => {}
    }
    // The state is followed through the log with no part built, and shown once, after
    // the last checkpoint: building the values of every checkpoint to keep the last
    // cost a copy of the whole state per step.
    let (entries, _) = run.log.read_from(0);
    let mut translator = Translator::new(host, run, Modes::default());
    let mut last = None;
    for entry in &entries {
        translator.parts(entry);
        if let Event::Saved { record, .. } = &entry.event {
            last = Some(record);
        }
    }
    match last {
        Some(record) => translator.values_json(record),
        None => host
            .thread(&run.thread)
            .ok()
            .map(|v| super::threads::thread_json(host, &v)["values"].clone())
            .filter(|v| !v.is_null())
            .unwrap_or_else(|| json!({})),
    }
}

/// The LangChain `astream_events` name closest to an event.
fn langchain_event(e: &Event) -> &'static str {
    match e {
        Event::NodeStarted { .. } | Event::RunStarted { .. } => "on_chain_start",
        Event::NodeFinished { .. } | Event::RunFinished { .. } => "on_chain_end",
        Event::TextDelta { .. } => "on_chat_model_stream",
        Event::LlmInvocation { .. } => "on_chat_model_end",
        Event::ToolCall { .. } => "on_tool_end",
        _ => "on_custom_event",
    }
}

/// Where a reader starts: after part `part` of event `event` of this process's log
/// (none: the beginning; `-1`, an id it cannot read, or one another process gave).
pub(super) fn parse_last_event_id(id: Option<&str>, epoch: &str) -> Option<(u64, usize)> {
    let (id, from) = id?.trim().split_once('.')?;
    if from != epoch {
        return None;
    }
    let (e, p) = id.split_once('-')?;
    Some((e.parse().ok()?, p.parse().ok()?))
}

fn frame(event: &str, data: &[u8], id: Option<&str>) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 48);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    if let Some(id) = id {
        out.extend_from_slice(b"\nid: ");
        out.extend_from_slice(id.as_bytes());
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Cancels the run when the reader goes away, if it was asked to.
struct CancelOnDrop {
    host: Host,
    run: Arc<RunHandle>,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed && self.run.end().is_none() {
            let _ = self.host.cancel(
                &self.run.thread,
                &self.run.id,
                crate::host::CancelAction::Interrupt,
            );
        }
    }
}

/// One reader of a run's stream.
struct Follow {
    run: Arc<RunHandle>,
    modes: Modes,
    translator: Translator,
    /// The next log event to translate, and the parts of the current one to skip.
    next: u64,
    resume: Option<(u64, usize)>,
    queue: VecDeque<Bytes>,
    /// This server process's mark in event ids: an id from another process names
    /// events of a log that is gone.
    epoch: String,
    started: bool,
    ended: bool,
    heartbeat: Duration,
    guard: CancelOnDrop,
}

impl Follow {
    async fn next_bytes(&mut self) -> Option<Bytes> {
        loop {
            if let Some(b) = self.queue.pop_front() {
                return Some(b);
            }
            if self.ended {
                return None;
            }
            if !self.started {
                self.started = true;
                let data =
                    json!({ "run_id": self.run.id, "thread_id": self.run.thread, "attempt": 1 });
                return Some(frame(
                    "metadata",
                    &serde_json::to_vec(&data).unwrap_or_default(),
                    None,
                ));
            }
            let (entries, closed) = self.run.log.read_from(self.next);
            if entries.is_empty() {
                if closed {
                    self.ended = true;
                    self.guard.armed = false;
                    if let Some(end) = self.run.end()
                        && end.status == RunStatus::Error
                    {
                        let data = json!({
                            "error": "RunError",
                            "message": end.error.unwrap_or_default(),
                        });
                        return Some(frame(
                            "error",
                            &serde_json::to_vec(&data).unwrap_or_default(),
                            None,
                        ));
                    }
                    continue;
                }
                let wait = self.run.log.wait_past(self.next);
                if tokio::time::timeout(self.heartbeat, wait).await.is_err() {
                    return Some(Bytes::from_static(b": heartbeat\n"));
                }
                continue;
            }
            for entry in entries {
                self.next = entry.index + 1;
                let parts = self.translator.parts(&entry);
                for (k, part) in parts.into_iter().enumerate() {
                    let skip = self
                        .resume
                        .is_some_and(|(e, p)| entry.index < e || (entry.index == e && k <= p));
                    if skip || !self.modes.wants(part.mode) {
                        continue;
                    }
                    let id = format!("{}-{k}.{}", entry.index, self.epoch);
                    let data = match part.data {
                        Data::Json(v) => serde_json::to_vec(&v).unwrap_or_default(),
                        Data::Text(text) => text,
                    };
                    self.queue.push_back(frame(part.event, &data, Some(&id)));
                }
            }
        }
    }
}

/// The body of an event stream of `run` from just after `last_event_id`.
pub(super) fn body(
    host: &Host,
    run: Arc<RunHandle>,
    modes: Modes,
    last_event_id: Option<&str>,
    cancel_on_disconnect: bool,
    heartbeat: Duration,
) -> axum::body::Body {
    let epoch = host.epoch().to_string();
    let follow = Follow {
        translator: Translator::new(host, &run, modes),
        modes,
        next: 0,
        resume: parse_last_event_id(last_event_id, &epoch),
        epoch,
        queue: VecDeque::new(),
        started: false,
        ended: false,
        heartbeat,
        guard: CancelOnDrop {
            host: host.clone(),
            run: run.clone(),
            armed: cancel_on_disconnect,
        },
        run,
    };
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        f.next_bytes()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), f))
    });
    axum::body::Body::from_stream(stream)
}
