//! The JSON shapes of the LangGraph Agent Server API, made from the host's views:
//! assistants, threads, thread states, runs, checkpoints, interrupts, times and ids.

use crate::graph::Graph;
use crate::host::{AssistantView, StateView, ThreadView, file_metadata};
use crate::spec::{END, FieldType};
use crate::store::{Checkpoint, RunRecord, Status};
use serde_json::{Map, Value as Json, json};

/// An ISO 8601 time in UTC, to the millisecond, from Unix milliseconds.
pub(crate) fn time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// A checkpoint's id: UUID-shaped, so clients that expect one get one, and ordered
/// by position, as clients sort history by id. `seq` is in its last group.
pub(crate) fn checkpoint_id(seq: u64) -> String {
    format!("00000000-0000-7000-8000-{seq:012x}")
}

/// The position a checkpoint id names: its own form, or a plain number.
pub(crate) fn parse_checkpoint_id(id: &str) -> Option<u64> {
    if let Some(hex) = id.strip_prefix("00000000-0000-7000-8000-") {
        return u64::from_str_radix(hex, 16).ok();
    }
    id.parse().ok()
}

pub(crate) fn checkpoint_ref(thread: &str, seq: u64) -> Json {
    json!({
        "thread_id": thread,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id(seq),
        "checkpoint_map": null,
    })
}

pub(crate) fn assistant(a: &AssistantView) -> Json {
    match a {
        AssistantView::File(s) => json!({
            "assistant_id": s.id,
            "graph_id": s.id,
            "name": s.id,
            "description": if s.description.is_empty() { Json::Null } else { json!(s.description) },
            "config": {},
            "context": {},
            "metadata": file_metadata(s),
            "version": s.version.max(1),
            "created_at": time(s.created_ms),
            "updated_at": time(s.updated_ms),
        }),
        AssistantView::Made(m) => {
            let mut j = assistant_version(a);
            j["created_at"] = json!(time(m.created_ms));
            j["updated_at"] = json!(time(m.updated_ms));
            j
        }
    }
}

/// One version of an assistant, as `POST /assistants/{id}/versions` lists them (with
/// no `updated_at`: a version does not change).
pub(crate) fn assistant_version(a: &AssistantView) -> Json {
    let AssistantView::Made(m) = a else {
        let mut j = assistant(a);
        if let Json::Object(o) = &mut j {
            o.remove("updated_at");
        }
        return j;
    };
    let get = |k: &str| m.body.get(k).cloned().unwrap_or(Json::Null);
    let object = |k: &str| {
        m.body
            .get(k)
            .filter(|v| v.is_object())
            .cloned()
            .unwrap_or(json!({}))
    };
    json!({
        "assistant_id": m.id,
        "graph_id": m.graph,
        "name": get("name"),
        "description": get("description"),
        "config": object("config"),
        "context": object("context"),
        "metadata": object("metadata"),
        "version": m.version,
        "created_at": time(m.created_ms),
    })
}

/// An interrupt as clients look for it: its payload and an id to answer it by.
pub(crate) fn interrupt(record: &Checkpoint) -> Option<Json> {
    let p = record.pending.as_ref()?;
    let id = crate::run::interrupt_id(&record.thread, p.at_seq.unwrap_or(record.seq));
    Some(json!({ "value": p.payload, "id": id }))
}

/// Every interrupt a checkpoint waits for: its own, then those of other parallel
/// branches that asked in the same superstep (answered by their `reference`), each
/// with an id of its own.
pub(crate) fn interrupts_of(record: &Checkpoint) -> Vec<Json> {
    let Some(first) = interrupt(record) else {
        return Vec::new();
    };
    let id = first["id"].as_str().unwrap_or_default().to_string();
    let others = record
        .pending
        .iter()
        .flat_map(|p| &p.others)
        .map(|o| json!({ "value": o.payload, "id": format!("{id}-{}", o.node) }));
    std::iter::once(first).chain(others).collect()
}

pub(crate) fn thread(view: &ThreadView, graph: Option<&Graph>) -> Json {
    let r = &view.record;
    let mut interrupts = Map::new();
    for i in view.latest.as_ref().map(interrupts_of).unwrap_or_default() {
        interrupts.insert(i["id"].as_str().unwrap_or_default().to_string(), json!([i]));
    }
    // As LangGraph's server names them: a failure's kind and message, and a cancel
    // (its message word for word, braces and all).
    let error = match (&view.failure, view.latest.as_ref().map(|l| l.status)) {
        (Some(message), _) => json!({ "error": "RunError", "message": message }),
        (None, Some(Status::Stopped)) => json!({
            "error": "UserInterrupt",
            "message": "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel",
        }),
        _ => Json::Null,
    };
    let state_updated = view.latest.as_ref().map_or(r.updated_ms, |l| l.at_ms);
    json!({
        "thread_id": r.id,
        "created_at": time(r.created_ms),
        "updated_at": time(r.updated_ms.max(state_updated)),
        "state_updated_at": time(state_updated),
        "metadata": r.metadata,
        "status": view.status.name(),
        "config": {},
        "values": view.values.clone().map(|v| values(v, graph)),
        "interrupts": interrupts,
        "error": error,
    })
}

/// The state values as clients see them: message fields' messages carry LangChain's
/// `type` beside their `role`, so chat front ends made for LangGraph show them.
pub(crate) fn values(mut v: Json, graph: Option<&Graph>) -> Json {
    let Some(graph) = graph else {
        return v;
    };
    if let Json::Object(fields) = &mut v {
        for f in &graph.fields {
            if matches!(f.ty.base(), FieldType::Messages)
                && let Some(Json::Array(messages)) = fields.get_mut(&*f.name)
            {
                for m in messages {
                    add_type(m);
                }
            }
        }
    }
    v
}

/// A message as [`values`] shows it, serialised without being copied: with the
/// `type` LangChain reads after its own keys when it has a `role` and no `type`.
pub(crate) struct Typed<'a>(pub(crate) &'a Json);

impl serde::Serialize for Typed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Json::Object(o) = self.0 else {
            return self.0.serialize(s);
        };
        let Some(t) = (!o.contains_key("type"))
            .then(|| o.get("role").and_then(Json::as_str))
            .flatten()
            .map(type_of)
        else {
            return self.0.serialize(s);
        };
        let mut map = s.serialize_map(Some(o.len() + 1))?;
        for (k, v) in o {
            map.serialize_entry(k, v)?;
        }
        map.serialize_entry("type", t)?;
        map.end()
    }
}

/// LangChain's message type for a `role`.
fn type_of(role: &str) -> &str {
    match role {
        "user" => "human",
        "assistant" => "ai",
        other => other,
    }
}

fn add_type(m: &mut Json) {
    if let Json::Object(o) = m
        && !o.contains_key("type")
        && let Some(role) = o.get("role").and_then(Json::as_str)
    {
        let t = type_of(role).to_string();
        o.insert("type".into(), json!(t));
    }
}

/// Messages written in LangChain's shape (`type: "human"`, no `role`) become the
/// `role` messages the graph's reducers take.
pub(crate) fn input_messages(v: &mut Json, graph: &Graph) {
    let Json::Object(fields) = v else { return };
    for f in &graph.fields {
        if !matches!(f.ty.base(), FieldType::Messages) {
            continue;
        }
        match fields.get_mut(&*f.name) {
            Some(Json::Array(messages)) => messages.iter_mut().for_each(to_role),
            Some(m @ Json::Object(_)) => to_role(m),
            _ => {}
        }
    }
}

/// Refuses, naming the field, message and block, content a model could not be sent
/// (a content block the chat API has no part for): before the run, not at its model
/// call.
pub(crate) fn check_content(v: &Json, graph: &Graph) -> Result<(), String> {
    let Json::Object(fields) = v else {
        return Ok(());
    };
    for f in &graph.fields {
        if !matches!(f.ty.base(), FieldType::Messages) {
            continue;
        }
        let check = match fields.get(&*f.name) {
            Some(Json::Array(messages)) => crate::llm::content::check_messages(messages),
            Some(m @ Json::Object(_)) => crate::llm::content::check_messages([m]),
            _ => Ok(()),
        };
        check.map_err(|e| format!("field `{}`: {e}", f.name))?;
    }
    Ok(())
}

fn to_role(m: &mut Json) {
    let Json::Object(o) = m else { return };
    if o.contains_key("role") {
        return;
    }
    let Some(t) = o.get("type").and_then(Json::as_str) else {
        return;
    };
    let role = match t {
        "human" | "HumanMessage" | "HumanMessageChunk" => "user",
        "ai" | "AIMessage" | "AIMessageChunk" => "assistant",
        "system" | "SystemMessage" => "system",
        "tool" | "ToolMessage" => "tool",
        other => other,
    };
    o.insert("role".into(), json!(role));
    o.remove("type");
}

/// The nodes named by a record's `next`: one node, or inside parallel branches
/// (`a,b;join`) each branch's next node, as LangGraph lists a superstep's tasks.
fn next_nodes(next: &str) -> impl Iterator<Item = String> + '_ {
    let branches = next.split_once(';').map(|(at, _)| at);
    branches
        .unwrap_or(next)
        .split(',')
        .filter(|n| !n.is_empty() && *n != END)
        .map(str::to_string)
}

/// The nodes a thread goes to next: none once it ended.
pub(crate) fn next(record: &Checkpoint) -> Vec<String> {
    match record.status {
        Status::Finished | Status::Failed => Vec::new(),
        Status::Interrupted => match &record.pending {
            // An interrupt node waits for its answer; a breakpoint waits before the
            // node it names (or its successor, after one).
            Some(p) if p.breakpoint.is_none() => vec![p.node.to_string()],
            _ => record.next.iter().flat_map(|n| next_nodes(n)).collect(),
        },
        Status::Running | Status::Stopped => {
            record.next.iter().flat_map(|n| next_nodes(n)).collect()
        }
    }
}

/// The tasks of a checkpoint: the node that runs next, with its interrupt or error.
pub(crate) fn tasks(record: &Checkpoint) -> Vec<Json> {
    let id = checkpoint_id(record.seq);
    if record.status == Status::Failed {
        let node = record.node.as_deref().unwrap_or_default();
        let message = record
            .error
            .as_ref()
            .and_then(|e| e.get("message"))
            .cloned()
            .unwrap_or(Json::Null);
        return vec![task(&id, node, message, Vec::new())];
    }
    let interrupts: Vec<Json> = interrupts_of(record);
    next(record)
        .iter()
        .map(|n| task(&id, n, Json::Null, interrupts.clone()))
        .collect()
}

fn task(id: &str, name: &str, error: Json, interrupts: Vec<Json>) -> Json {
    json!({
        "id": id,
        "name": name,
        "path": ["__pregel_pull", name],
        "error": error,
        "interrupts": interrupts,
        "checkpoint": null,
        "state": null,
        "result": null,
    })
}

/// A checkpoint's step as LangGraph counts it: a thread's first checkpoint (its first
/// run's input checkpoint, the state before any input) is step -1. Steps count per run
/// here, not per thread. (A store an older version wrote has `input` records that hold
/// the input: those are step 0.)
pub(crate) fn step(record: &Checkpoint) -> i64 {
    match (record.source, record.parent) {
        (crate::store::Source::Input, None) if record.writes.is_empty() => -1,
        _ => record.step as i64,
    }
}

/// What a checkpoint's metadata says: LangGraph's `source`, `step`, `writes` and
/// `parents`, and Switchyard's own record fields.
pub(crate) fn metadata(record: &Checkpoint) -> Json {
    let writes: Map<String, Json> = record
        .writes
        .iter()
        .map(|w| (w.field.to_string(), (*w.value).clone()))
        .collect();
    let writer = match (&record.node, record.source) {
        (Some(n), _) => n.to_string(),
        (None, crate::store::Source::Update | crate::store::Source::Base) => "__update__".into(),
        (None, _) => "__start__".into(),
    };
    let writes = if writes.is_empty() {
        Json::Null
    } else {
        json!({ writer: writes })
    };
    json!({
        "source": record.source.name(),
        "step": step(record),
        "writes": writes,
        "parents": {},
        "run": record.run,
        "status": record.status.name(),
        "outcome": record.outcome,
        "graph_hash": *record.graph_hash,
    })
}

pub(crate) fn state(view: &StateView) -> Json {
    let r = &view.record;
    let parent = r.parent.map(|p| checkpoint_ref(&r.thread, p));
    json!({
        "values": values(view.values.clone(), Some(&view.graph)),
        "next": next(r),
        "tasks": tasks(r),
        "checkpoint": checkpoint_ref(&r.thread, r.seq),
        "metadata": metadata(r),
        "created_at": time(r.at_ms),
        "parent_checkpoint": parent,
        "interrupts": interrupts_of(r),
        "checkpoint_id": checkpoint_id(r.seq),
        "parent_checkpoint_id": r.parent.map(checkpoint_id),
    })
}

/// The state of a thread with no checkpoints.
pub(crate) fn empty_state() -> Json {
    json!({
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": null,
        "metadata": null,
        "created_at": null,
        "parent_checkpoint": null,
        "interrupts": [],
    })
}

pub(crate) fn run(r: &RunRecord) -> Json {
    json!({
        "run_id": r.id,
        "thread_id": r.thread,
        // A made assistant's id, which the request keeps; else the graph's own.
        "assistant_id": r.kwargs.get("assistant_id").and_then(Json::as_str).unwrap_or(&r.assistant),
        "created_at": time(r.created_ms),
        "updated_at": time(r.updated_ms),
        "status": r.status.name(),
        "metadata": r.metadata,
        "kwargs": r.kwargs,
        "multitask_strategy": r.multitask_strategy,
        "error": r.error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_iso_8601_in_utc() {
        assert_eq!(time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(time(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(time(1_795_462_350_999), "2026-11-23T19:32:30.999Z");
    }

    #[test]
    fn checkpoint_ids_sort_by_position_and_read_back() {
        let ids: Vec<String> = [0, 9, 10, 255, 4096].map(checkpoint_id).to_vec();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert_eq!(ids[3], "00000000-0000-7000-8000-0000000000ff");
        assert_eq!(parse_checkpoint_id(&ids[3]), Some(255));
        assert_eq!(parse_checkpoint_id("12"), Some(12));
        assert_eq!(parse_checkpoint_id("nope"), None);
    }
}
