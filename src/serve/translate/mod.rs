//! [`Translator`]: what one reader of a run's log knows of the run so far (the node
//! being run, whether it streamed its reply, the state after the last checkpoint),
//! and the parts of the stream modes each log event makes.

mod events;

use super::field_text::FieldText;
use super::modes::{Mode, Modes};
use super::wire;
use crate::graph::Graph;
use crate::host::{Host, LogEntry, RunHandle};
use crate::run::{Event, State, is_ai};
use crate::spec::FieldType;
use crate::store::{Checkpoint, Status};
use events::{ai_message, lc_named};
use serde_json::{Value as Json, json};
use std::sync::Arc;

/// The parts one log event makes, for every mode (the data of a mode the reader did
/// not ask for is left out: `Json::Null`).
pub(super) struct Part {
    pub(super) mode: Mode,
    pub(super) event: &'static str,
    pub(super) data: Data,
}

/// A part's data: a JSON value, or JSON text already written (a `values` part, put
/// together from each field's text).
pub(super) enum Data {
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

/// An `updates` part, `{ node: { field: value } }`, serialised from the record's
/// writes without copying them; a field written twice shows its last value in the
/// place of its first, as a map collected from the writes does.
struct Updates<'a>(&'a str, &'a [crate::store::Write]);

impl serde::Serialize for Updates<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Writes<'a>(&'a [crate::store::Write]);
        impl serde::Serialize for Writes<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let w = self.0;
                let mut map = s.serialize_map(None)?;
                for (i, first) in w.iter().enumerate() {
                    if w[..i].iter().any(|e| e.field == first.field) {
                        continue;
                    }
                    let last = w[i..].iter().rfind(|e| e.field == first.field);
                    map.serialize_entry(&*first.field, &*last.unwrap_or(first).value)?;
                }
                map.end()
            }
        }
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(self.0, &Writes(self.1))?;
        map.end()
    }
}

/// What a reader knows of the run so far.
pub(super) struct Translator {
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
    field_text: Vec<Option<FieldText>>,
    /// The reader's modes: only their parts are built.
    modes: Modes,
    /// Whether the state is followed: only modes that show it need it (a reader of
    /// `updates` alone does not apply every write to a copy of the state).
    keeps_state: bool,
    /// The thread's run number (its checkpoints' `run`), the step of the node
    /// running now, and whether its reply streamed.
    run: u64,
    step: u64,
    /// A `values` part was made (for any reader's modes: part ids count them all).
    values_told: bool,
    node: Option<Arc<str>>,
    streamed: bool,
    /// The id of the reply streaming now and its text so far (the legacy `messages`
    /// mode sends the whole message at each piece).
    partial: (String, String),
    /// The assistant (graph) the run runs, and the run's input, as `events` name the
    /// run's own start and end.
    assistant: String,
    input: Json,
    /// The state the running node was given (`tasks`, `debug` and `events` show it).
    node_input: Option<Json>,
    /// A model's reply is streaming: its `on_chat_model_start` was sent.
    chatting: bool,
    /// Tool calls and model calls the running node made so far (each an `events`
    /// run of its own).
    tool_calls: u32,
    model_calls: u32,
}

impl Translator {
    /// The id of the reply the running node streams: the id its message gets.
    fn message_id(&self) -> String {
        crate::run::reply_id(&self.thread, self.run, self.step)
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
    /// Follows a log event without making its parts (another reader made them).
    pub(super) fn follow(&mut self, entry: &Arc<LogEntry>) {
        let modes = std::mem::take(&mut self.modes);
        self.parts(entry);
        self.modes = modes;
    }

    pub(super) fn parts(&mut self, entry: &Arc<LogEntry>) -> Vec<Part> {
        let mut out = Parts {
            modes: self.modes,
            parts: Vec::new(),
        };
        match &entry.event {
            Event::Saved { record, values } => {
                self.saved(entry, record, values.as_deref(), &mut out)
            }
            Event::Standing { values, graph_hash } => self.standing(values, graph_hash, &mut out),
            e => {
                match e {
                    Event::RunStarted { run, .. } => {
                        self.run = *run;
                        out.push(Mode::Events, "events", || {
                            self.lc_event(
                                "on_chain_start",
                                &self.assistant,
                                &self.run_id,
                                json!({ "input": self.input }),
                            )
                        });
                    }
                    Event::NodeStarted { node, step } => {
                        self.step = *step;
                        self.node = Some(node.clone());
                        self.streamed = false;
                        self.chatting = false;
                        self.tool_calls = 0;
                        self.model_calls = 0;
                        // Only modes that show it pay for it: a `values` reader (the
                        // default) would serialise the whole state at every node.
                        let shows = self.modes.tasks || self.modes.debug || self.modes.events;
                        self.node_input = shows.then(|| self.state_json());
                        let id = self.task_id();
                        let task = || {
                            json!({
                                "id": id,
                                "name": &**node,
                                "input": self.node_input,
                                "triggers": [format!("branch:to:{node}")],
                                "metadata": self.run_meta(),
                            })
                        };
                        out.push(Mode::Tasks, "tasks", task);
                        out.push(Mode::Debug, "debug", || {
                            json!({
                                "type": "task",
                                "timestamp": wire::time(entry.at_ms),
                                "step": step,
                                "payload": task(),
                            })
                        });
                        out.push(Mode::Events, "events", || {
                            self.lc_event(
                                "on_chain_start",
                                node,
                                &id,
                                json!({ "input": self.node_input }),
                            )
                        });
                    }
                    Event::TextDelta { node, text } => {
                        self.streamed = true;
                        let chunk = || {
                            json!({
                                "type": "AIMessageChunk",
                                "content": text,
                                "id": self.message_id(),
                                "name": &**node,
                                "tool_call_chunks": [],
                                "tool_calls": [],
                                "invalid_tool_calls": [],
                                "additional_kwargs": {},
                                "response_metadata": {},
                            })
                        };
                        out.push(Mode::Messages, "messages", || json!([chunk(), self.meta()]));
                        let first = !self.chatting;
                        if first {
                            out.push(Mode::Events, "events", || {
                                self.lc_event(
                                    "on_chat_model_start",
                                    node,
                                    &self.model_run_id(),
                                    json!({ "input": {} }),
                                )
                            });
                        }
                        out.push(Mode::Events, "events", || {
                            self.lc_event(
                                "on_chat_model_stream",
                                node,
                                &self.model_run_id(),
                                json!({ "chunk": chunk() }),
                            )
                        });
                        self.chatting = true;
                    }
                    // The text a failed attempt streamed is taken back as LangChain
                    // takes a message back: a `remove` of its id (useStream drops it,
                    // and the next attempt's chunks start the message anew).
                    Event::LlmRetry { discard: true, .. } if self.streamed => {
                        let id = self.message_id();
                        out.push(Mode::Messages, "messages", || {
                            json!([{ "type": "remove", "id": id, "content": "" }, self.meta()])
                        });
                    }
                    Event::LlmInvocation {
                        node,
                        model,
                        tokens_in,
                        tokens_out,
                        messages,
                        reply,
                        ..
                    } => {
                        let input = json!({ "messages": [messages] });
                        if !self.chatting {
                            out.push(Mode::Events, "events", || {
                                self.lc_event(
                                    "on_chat_model_start",
                                    node,
                                    &self.model_run_id(),
                                    json!({ "input": input }),
                                )
                            });
                        }
                        self.chatting = false;
                        out.push(Mode::Events, "events", || {
                            let output = ai_message(
                                reply.as_ref(),
                                &self.message_id(),
                                model,
                                (*tokens_in, *tokens_out),
                            );
                            self.lc_event(
                                "on_chat_model_end",
                                node,
                                &self.model_run_id(),
                                json!({ "output": output, "input": input }),
                            )
                        });
                        self.model_calls += 1;
                    }
                    Event::ToolCall {
                        tool,
                        arguments,
                        result,
                        ..
                    } => {
                        self.tool_calls += 1;
                        let id = format!("{}:tool:{}", self.task_id(), self.tool_calls);
                        out.push(Mode::Events, "events", || {
                            self.lc_event("on_tool_start", tool, &id, json!({ "input": arguments }))
                        });
                        out.push(Mode::Events, "events", || {
                            self.lc_event(
                                "on_tool_end",
                                tool,
                                &id,
                                json!({ "output": result, "input": arguments }),
                            )
                        });
                    }
                    Event::RunFinished { .. } => {
                        out.push(Mode::Events, "events", || {
                            self.lc_event(
                                "on_chain_end",
                                &self.assistant,
                                &self.run_id,
                                json!({ "output": self.state_json() }),
                            )
                        });
                    }
                    Event::NodeFailed { node, message, .. } => {
                        out.push(Mode::Tasks, "tasks", || {
                            json!({ "id": self.task_id(), "name": &**node, "error": message, "result": null, "interrupts": [] })
                        })
                    }
                    _ => {}
                }
                out.push(Mode::Custom, "custom", || {
                    serde_json::to_value(e).unwrap_or_default()
                });
                // Switchyard's own events, as LangChain sends a custom event
                // (`dispatch_custom_event`): its name, its payload as `data`.
                if !lc_named(e) {
                    out.push(Mode::Events, "events", || {
                        let data = serde_json::to_value(e).unwrap_or_default();
                        let name = data["event"].as_str().unwrap_or_default().to_string();
                        let id = self.task_id();
                        self.lc_event("on_custom_event", &name, &id, data)
                    });
                }
            }
        }
        self.whole_messages(entry, &mut out);
        out.parts
    }

    /// The messages a node's record wrote to `messages` fields, each with its field and
    /// place, but a reply that streamed as chunks.
    fn written_messages<'r>(&self, record: &'r Checkpoint) -> Vec<(&'r str, usize, &'r Json)> {
        let (Some(graph), Some(_)) = (&self.graph, &record.node) else {
            return Vec::new();
        };
        let mut out = Vec::new();
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
                // A streamed reply was sent as its chunks, unless it called tools,
                // which the chunks do not carry.
                let calls = m
                    .get("tool_calls")
                    .and_then(Json::as_array)
                    .is_some_and(|c| !c.is_empty());
                if self.streamed && !calls && is_ai(m) {
                    continue;
                }
                out.push((&*w.field, i, m));
            }
        }
        out
    }

    /// A written message as LangChain types it, with an id (one made from where it was
    /// written, for a message that has none).
    fn typed(&self, m: &Json, field: &str, i: usize) -> Json {
        let mut m = m.clone();
        if let Json::Object(o) = &mut m {
            o.entry("id")
                .or_insert_with(|| json!(format!("{}-{field}-{i}", self.message_id())));
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
        m
    }

    /// The legacy `messages` mode's parts of a log event, after every other mode's (part
    /// ids count them all, and these came last): a streamed reply's `messages/metadata`
    /// when it begins, then `messages/partial` with the whole message so far at each
    /// piece; a message a node wrote whole, its `messages/metadata` and
    /// `messages/complete`. LangGraph's server sends no `messages/complete` for a reply
    /// it streamed, nor the run's input.
    fn whole_messages(&mut self, entry: &LogEntry, out: &mut Parts) {
        match &entry.event {
            // A failed attempt's text is void: the next partial holds the new one's.
            Event::LlmRetry { discard: true, .. } => self.partial.1.clear(),
            Event::TextDelta { text, .. } => {
                let id = self.message_id();
                if self.partial.0 != id {
                    self.partial = (id.clone(), String::new());
                    out.push(
                        Mode::MessagesWhole,
                        "messages/metadata",
                        || json!({ id: { "metadata": self.meta() } }),
                    );
                }
                self.partial.1.push_str(text);
                out.push(Mode::MessagesWhole, "messages/partial", || {
                    json!([{
                        "content": self.partial.1,
                        "additional_kwargs": {},
                        "response_metadata": {},
                        "type": "ai",
                        "name": null,
                        "id": self.partial.0,
                        "tool_calls": [],
                        "invalid_tool_calls": [],
                        "usage_metadata": null,
                    }])
                });
            }
            Event::Saved { record, .. } => {
                for (field, i, m) in self.written_messages(record) {
                    let m = self.typed(m, field, i);
                    let id = m["id"].as_str().unwrap_or_default().to_string();
                    out.push(
                        Mode::MessagesWhole,
                        "messages/metadata",
                        || json!({ id: { "metadata": self.meta() } }),
                    );
                    out.push(Mode::MessagesWhole, "messages/complete", || json!([m]));
                }
            }
            _ => {}
        }
    }

    fn task_id(&self) -> String {
        format!("{}:{}", self.run_id, self.step)
    }

    /// The state after the last checkpoint, as clients see it (`{}` before any).
    fn state_json(&self) -> Json {
        match (&self.state, &self.graph) {
            (Some(st), Some(g)) => wire::values(st.to_json(g), Some(g)),
            _ => json!({}),
        }
    }

    /// Where the thread stands as a run goes on from a pause: the state the checkpoints
    /// after it change, and LangGraph's first `values` part of such a run (without the
    /// interrupt being answered).
    fn standing(&mut self, values: &Json, graph_hash: &str, out: &mut Parts) {
        // The version the run uses (a paused thread keeps the one it began on).
        if self.graph.as_ref().is_none_or(|g| *g.hash != *graph_hash)
            && let Some(g) = self.host.graphs().version(graph_hash)
        {
            self.graph = Some(g);
        }
        if let Some(graph) = self.graph.as_ref().filter(|_| self.keeps_state) {
            self.state = Some(State::from_values(graph, values));
            self.field_text.clear();
        }
        self.values_told = true;
        out.push(Mode::Values, "values", || {
            self.output_of(wire::values(values.clone(), self.graph.as_deref()))
        });
    }

    /// Values as the `values` mode shows them: the graph's `[graph] output` fields (and
    /// `__interrupt__`), the whole state when it declares none.
    fn output_of(&self, mut v: Json) -> Json {
        if let (Some(g), Json::Object(o)) = (&self.graph, &mut v)
            && g.output_declared
        {
            o.retain(|k, _| {
                k.starts_with("__") || g.field_id(k).is_some_and(|id| g.field(id).output)
            });
        }
        v
    }

    fn saved(
        &mut self,
        entry: &Arc<LogEntry>,
        record: &Arc<Checkpoint>,
        values: Option<&Json>,
        out: &mut Parts,
    ) {
        // The version the run uses, looked up once (not at every checkpoint of a
        // reader that keeps no state).
        if self.state.is_none()
            && self
                .graph
                .as_ref()
                .is_none_or(|g| *g.hash != *record.graph_hash)
            && let Some(g) = self.host.graphs().version(&record.graph_hash)
        {
            self.graph = Some(g);
        }
        if let Some(graph) = self.graph.as_ref().filter(|_| self.keeps_state) {
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
                        let Some(id) = graph.field_id(&w.field) else {
                            continue;
                        };
                        if let Some(kept) = self.field_text.get_mut(id.0 as usize) {
                            *kept = FieldText::after_write(
                                kept.take(),
                                graph.field(id),
                                &w.value,
                                st.get(id),
                            );
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
        // Messages a node wrote, each once, unless its reply was streamed as chunks; a
        // streamed reply's calls, as the chunk that ends it.
        for (field, i, m) in self.written_messages(record) {
            out.push(Mode::Messages, "messages", || {
                let m = self.typed(m, field, i);
                let m = match self.streamed && is_ai(&m) {
                    true => calls_chunk(m),
                    false => m,
                };
                json!([m, self.meta()])
            });
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
            out.push_data(Mode::Updates, "updates", || {
                Data::Text(serde_json::to_vec(&Updates(node, &record.writes)).unwrap_or_default())
            });
        }
        // The state, once, for the modes that show it in a JSON value; `values` alone
        // writes it from its fields' texts.
        let values = (self.modes.debug || self.modes.checkpoints).then(|| self.values_json(record));
        // As LangGraph sends the state after each step that changed it: a record that
        // writes and asks nothing (an empty input, a run's end) makes no `values`
        // part, unless the stream has told of no state yet (a run that writes nothing
        // shows where its thread stands).
        // With `[graph] output`, only a step that writes one of its fields changes it.
        let writes_output = match &self.graph {
            Some(g) if g.output_declared => record
                .writes
                .iter()
                .any(|w| g.field_id(&w.field).is_none_or(|id| g.field(id).output)),
            _ => !record.writes.is_empty(),
        };
        let unchanged = !writes_output
            && interrupts.is_empty()
            && (self.values_told || (record.node.is_none() && record.status == Status::Running));
        if !unchanged {
            self.values_told = true;
            if self.modes.values {
                let text = match &values {
                    Some(v) => serde_json::to_vec(&self.output_of(v.clone())).unwrap_or_default(),
                    None => self.values_text(record),
                };
                out.push_data(Mode::Values, "values", || Data::Text(text));
            } else {
                out.push(Mode::Values, "values", || Json::Null);
            }
        }
        if let Some(node) = &record.node {
            let id = self.task_id();
            // The node's writes, each field's last, as LangGraph gives a task's result.
            let result = || Json::Object(writes());
            let task = || {
                json!({
                    "id": id,
                    "name": &**node,
                    "error": null,
                    "result": result(),
                    "interrupts": interrupts,
                })
            };
            out.push(Mode::Tasks, "tasks", task);
            out.push(Mode::Debug, "debug", || {
                json!({
                    "type": "task_result",
                    "timestamp": wire::time(entry.at_ms),
                    "step": record.step,
                    "payload": task(),
                })
            });
            if interrupts.is_empty() {
                out.push(Mode::Events, "events", || {
                    self.lc_event("on_chain_stream", node, &id, json!({ "chunk": result() }))
                });
                out.push(Mode::Events, "events", || {
                    self.lc_event(
                        "on_chain_end",
                        node,
                        &id,
                        json!({ "output": result(), "input": self.node_input }),
                    )
                });
            }
        }
        let configurable = |seq: u64| {
            let mut c = wire::checkpoint_ref(&record.thread, seq);
            c["run_id"] = json!(self.run_id);
            c["graph_id"] = json!(self.assistant);
            c["assistant_id"] = json!(self.assistant);
            c
        };
        let checkpoint = || {
            json!({
                "config": { "configurable": configurable(record.seq) },
                "parent_config": record.parent.map(|p| json!({ "configurable": configurable(p) })),
                "values": values.clone().unwrap_or_default(),
                "metadata": wire::metadata(record),
                "next": wire::next(record),
                "tasks": wire::tasks(record),
            })
        };
        out.push(Mode::Debug, "debug", || {
            let short = |seq: u64| {
                json!({
                    "checkpoint_id": wire::checkpoint_id(seq),
                    "thread_id": record.thread,
                    "checkpoint_ns": "",
                })
            };
            let mut payload = checkpoint();
            payload["checkpoint"] = short(record.seq);
            payload["parent_checkpoint"] = record.parent.map(short).unwrap_or(Json::Null);
            json!({
                "type": "checkpoint",
                "timestamp": wire::time(record.at_ms),
                "step": wire::step(record),
                "payload": payload,
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
        let mut out = Vec::new();
        if let (Some(st), Some(g)) = (&self.state, &self.graph) {
            self.field_text.resize_with(g.fields.len(), || None);
            for ((f, v), text) in g
                .fields
                .iter()
                .zip(st.values.iter())
                .zip(&mut self.field_text)
            {
                text.get_or_insert_with(|| FieldText::of(&f.ty, v));
            }
            // Made once at its size: a long conversation's state is grown into no copy.
            let size: usize = g.fields.iter().map(|f| f.name.len() + 4).sum::<usize>()
                + self
                    .field_text
                    .iter()
                    .flatten()
                    .map(|t| t.text.len())
                    .sum::<usize>();
            out.reserve(size + 2);
            out.push(b'{');
            // The graph's output alone (`[graph] output`), as LangGraph streams its
            // output schema.
            for (i, (f, text)) in g
                .fields
                .iter()
                .zip(self.field_text.iter().flatten())
                .filter(|(f, _)| f.output)
                .enumerate()
            {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut out, &*f.name);
                out.push(b':');
                out.extend_from_slice(&text.text);
            }
        } else {
            out.push(b'{');
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
    pub(super) fn values_json(&self, record: &Checkpoint) -> Json {
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

    /// A translator that follows the state whatever the modes, to show it at the end.
    pub(super) fn keeping_state(host: &Host, run: &RunHandle) -> Translator {
        Translator {
            keeps_state: true,
            ..Translator::new(host, run, Modes::default())
        }
    }

    pub(super) fn new(host: &Host, run: &RunHandle, modes: Modes) -> Translator {
        Translator {
            run_id: run.id.clone(),
            thread: run.thread.clone(),
            host: host.clone(),
            graph: host.graphs().get(&run.assistant).and_then(|s| s.current),
            state: None,
            field_text: Vec::new(),
            keeps_state: modes.values
                || modes.debug
                || modes.checkpoints
                || modes.tasks
                || modes.events,
            modes,
            run: 0,
            step: 0,
            values_told: false,
            node: None,
            streamed: false,
            partial: (String::new(), String::new()),
            assistant: run.assistant.clone(),
            input: run.request.input.clone().unwrap_or(Json::Null),
            node_input: None,
            chatting: false,
            tool_calls: 0,
            model_calls: 0,
        }
    }
}

/// The LangChain `astream_events` name closest to an event.
/// A streamed reply's tool calls as the chunk that ends it, as LangChain streams them:
/// no text (its chunks carried it: `useStream` joins the chunks of one id, and a whole
/// message joined to them would say the text twice), the calls as `tool_call_chunks`
/// (arguments as JSON text) and as `tool_calls`.
fn calls_chunk(whole: Json) -> Json {
    let calls = whole["tool_calls"].as_array().cloned().unwrap_or_default();
    let chunks: Vec<Json> = calls
        .iter()
        .enumerate()
        .map(|(k, c)| {
            json!({ "name": c["name"], "args": c["args"].to_string(), "id": c["id"], "index": k, "type": "tool_call_chunk" })
        })
        .collect();
    json!({
        "type": "AIMessageChunk",
        "content": "",
        "id": whole["id"],
        "name": whole.get("name"),
        "tool_call_chunks": chunks,
        "tool_calls": calls,
        "invalid_tool_calls": [],
        "additional_kwargs": {},
        "response_metadata": whole.get("response_metadata").cloned().unwrap_or_else(|| json!({})),
        "usage_metadata": whole.get("usage_metadata"),
    })
}
