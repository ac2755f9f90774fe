//! A2A (`/a2a/{assistant_id}`): every served graph with a `messages` field as an A2A
//! agent, as LangGraph's server offers its assistants (JSON-RPC; compared side by side
//! with it and its official `a2a-sdk` client): a message is a turn on a thread (the
//! A2A context), its reply the last AI message; an interrupt is `input-required`,
//! answered by a message naming the task. Both method spellings are taken, as
//! LangGraph's: `message/send` answers the A2A 0.3 shapes (`user`, `completed`), and
//! `SendMessage` the 1.0 ones (`ROLE_USER`, `TASK_STATE_COMPLETED`, `{"task": ...}`).
//! No streaming (the card says so): `message/stream` is refused.

use super::AppState;
use super::run_create::RunCreate;
use crate::host::{ThreadStatus, new_id, now_ms};
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value as Json, json};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/a2a/{id}", get(card).post(rpc))
        .route("/a2a/{id}/.well-known/agent-card.json", get(card))
        .route("/a2a/{id}/.well-known/agent.json", get(card))
        .route("/.well-known/agent-card.json", get(root_card))
}

const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const TASK_NOT_FOUND: i64 = -32001;
const UNSUPPORTED: i64 = -32004;
const BAD_PART: i64 = -32005;

/// A JSON-RPC error, answered with 200 as LangGraph's server does.
struct Failure(i64, String);

type Answer = Result<Json, Failure>;

fn agent_url(headers: &HeaderMap, id: &str) -> String {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}/a2a/{id}")
}

/// The name and description an agent's card gives: a graph file's, or a made
/// assistant's (whose graph must be served).
async fn agent(s: &AppState, id: &str) -> Option<(String, String)> {
    let a = s.host.assistant(id).await.ok()?;
    let (name, description) = match &a {
        crate::host::AssistantView::File(served) => (served.id.clone(), served.description.clone()),
        crate::host::AssistantView::Made(m) => {
            s.host.graphs().get(&m.graph)?;
            let d = m.body.get("description").and_then(Json::as_str);
            (a.name().to_string(), d.unwrap_or_default().to_string())
        }
    };
    let description = if description.is_empty() {
        format!("{name} assistant")
    } else {
        description
    };
    Some((name, description))
}

async fn card(State(s): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    match agent(&s, &id).await {
        Some((name, description)) => {
            let url = agent_url(&headers, &id);
            let modes = json!(["application/json", "text/plain"]);
            axum::Json(json!({
                "name": name,
                "description": description,
                "url": url,
                "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                "capabilities": {"streaming": false, "pushNotifications": false, "stateTransitionHistory": false},
                "defaultInputModes": modes,
                "defaultOutputModes": modes,
                "skills": [{
                    "id": format!("{id}-main"),
                    "name": format!("{id} Capabilities"),
                    "description": description,
                    "tags": ["assistant", "switchyard"],
                    "examples": [],
                    "inputModes": modes,
                    "outputModes": modes,
                }],
                "version": env!("CARGO_PKG_VERSION"),
            }))
            .into_response()
        }
        None => {
            super::error::ApiError::not_found(format!("Assistant '{id}' not found")).into_response()
        }
    }
}

async fn root_card(
    s: State<AppState>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    match q.into_iter().find(|(k, _)| k == "assistant_id") {
        Some((_, id)) => card(s, Path(id), headers).await,
        None => super::error::ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "`assistant_id` is required: the agent whose card to give",
        )
        .into_response(),
    }
}

async fn rpc(
    State(s): State<AppState>,
    Path(id): Path<String>,
    super::body::Body(request): super::body::Body<Json>,
) -> Response {
    let rpc_id = request.get("id").cloned().unwrap_or(Json::Null);
    let method = request["method"].as_str().unwrap_or_default().to_string();
    let params = request.get("params").cloned().unwrap_or(Json::Null);
    // The 1.0 spellings answer the 1.0 shapes.
    let v1 = method
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase());
    let answer = match method.as_str() {
        "message/send" | "SendMessage" => send(&s, &id, &params, v1).await,
        "tasks/get" | "GetTask" => get_task(&s, &id, &params, v1).await,
        "message/stream" | "SendStreamingMessage" => Err(Failure(
            UNSUPPORTED,
            "streaming is not supported: the agent card says so; use message/send".into(),
        )),
        other => Err(Failure(
            METHOD_NOT_FOUND,
            format!("Method not found: {other}"),
        )),
    };
    let body = match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": rpc_id, "result": result}),
        Err(Failure(code, message)) => {
            json!({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}})
        }
    };
    axum::Json(body).into_response()
}

/// The graph's `messages` field, which an A2A message's text becomes a turn of.
async fn messages_field(s: &AppState, id: &str) -> Result<String, Failure> {
    let bound = s
        .host
        .bind(id)
        .await
        .map_err(|e| Failure(INVALID_PARAMS, e.to_string()))?;
    let served = s
        .host
        .graphs()
        .get(&bound.graph)
        .ok_or_else(|| Failure(INVALID_PARAMS, format!("Assistant '{id}' not found")))?;
    let graph = served.current.ok_or_else(|| {
        Failure(
            INVALID_PARAMS,
            format!("Assistant '{id}' does not validate and cannot run"),
        )
    })?;
    graph
        .fields
        .iter()
        .find(|f| f.ty == crate::spec::FieldType::Messages && f.input)
        .map(|f| f.name.to_string())
        .ok_or_else(|| {
            Failure(
                INVALID_PARAMS,
                format!(
                    "Assistant '{id}' does not support A2A conversational messages: its state has no field of type `messages`"
                ),
            )
        })
}

async fn send(s: &AppState, id: &str, params: &Json, v1: bool) -> Answer {
    let message = &params["message"];
    let parts = match message["parts"].as_array() {
        Some(p) if !p.is_empty() => p,
        _ => {
            return Err(Failure(
                INVALID_PARAMS,
                "Message must contain at least one part".into(),
            ));
        }
    };
    let mut texts = Vec::new();
    let mut data = Map::new();
    for part in parts {
        if let Some(t) = part.get("text").and_then(Json::as_str) {
            texts.push(t.to_string());
        } else if let Some(Json::Object(d)) = part.get("data") {
            data.extend(d.clone());
        } else {
            return Err(Failure(
                BAD_PART,
                "Unsupported part type. A2A agents support 'text' and 'data' parts.".into(),
            ));
        }
    }
    let field = messages_field(s, id).await?;
    let message_id = message["messageId"]
        .as_str()
        .map_or_else(new_id, str::to_string);
    let task = message["taskId"].as_str();
    let context = match (message["contextId"].as_str(), task) {
        (Some(c), _) => c.to_string(),
        // A task id is `<thread>:<run>`; a thread's id may hold a colon, a run's not.
        (None, Some(t)) => t.rsplit_once(':').map_or(t, |(c, _)| c).to_string(),
        (None, None) => new_id(),
    };
    let (body, task_id) = match task {
        // An answer to the task's interrupt: the text (or a data part's `resume`).
        Some(t) => {
            let view = s
                .host
                .thread(&context)
                .await
                .map_err(|_| Failure(TASK_NOT_FOUND, format!("Task '{t}' not found")))?;
            if !t.starts_with(&format!("{context}:")) {
                return Err(Failure(TASK_NOT_FOUND, format!("Task '{t}' not found")));
            }
            if view.status != ThreadStatus::Interrupted {
                return Err(Failure(
                    UNSUPPORTED,
                    "A terminal task cannot accept another message".into(),
                ));
            }
            let resume = data
                .remove("resume")
                .unwrap_or_else(|| json!(texts.join("\n")));
            (
                json!({"assistant_id": id, "command": {"resume": resume}}),
                Some(t.to_string()),
            )
        }
        None => {
            let mut input = data;
            if !texts.is_empty() {
                input.insert(
                    field.clone(),
                    json!([{"type": "human", "content": texts.join("\n"), "id": message_id}]),
                );
            }
            (
                json!({"assistant_id": id, "input": input, "if_not_exists": "create"}),
                None,
            )
        }
    };
    let body: RunCreate =
        serde_json::from_value(body).map_err(|e| Failure(INVALID_PARAMS, e.to_string()))?;
    let created = super::runs::created(s, Some(&context), body)
        .await
        .map_err(|e| {
            Failure(
                INVALID_PARAMS,
                format!("Failed to create run: {}", e.detail),
            )
        })?;
    let run = created.run;
    run.finished().await;
    let task_id = task_id.unwrap_or_else(|| format!("{context}:{}", run.id));
    let result = super::stream::result(&s.host, &run).await;
    let values = s.host.thread(&context).await.ok().and_then(|v| v.values);
    let history = history(values.as_ref(), &field, &task_id, &context, v1);
    let (state, artifacts) = if let Some(e) = result.get("__error__") {
        (
            "failed",
            vec![artifact(
                "Error",
                "The run failed",
                json!({"kind": "text", "text": e["message"]}),
            )],
        )
    } else if let Some(Json::Array(interrupts)) = result.get("__interrupt__") {
        let parts: Vec<Json> = interrupts
            .iter()
            .map(|i| json!({"kind": "data", "data": {"id": i["id"], "value": i["value"]}}))
            .collect();
        (
            "input-required",
            vec![
                json!({"artifactId": new_id(), "name": "Interrupt", "description": "Agent requires input to continue", "parts": parts}),
            ],
        )
    } else {
        let reply = last_ai_text(values.as_ref(), &field).unwrap_or_default();
        (
            "completed",
            vec![artifact(
                "Assistant Response",
                &format!("Response from assistant {id}"),
                json!({"kind": "text", "text": reply}),
            )],
        )
    };
    let task = json!({
        "kind": "task",
        "id": task_id,
        "contextId": context,
        "history": history,
        "status": {"state": state_name(state, v1), "timestamp": super::wire::time(now_ms())},
        "artifacts": artifacts,
    });
    Ok(if v1 { json!({ "task": task }) } else { task })
}

async fn get_task(s: &AppState, id: &str, params: &Json, v1: bool) -> Answer {
    let field = messages_field(s, id).await?;
    let task = params["id"]
        .as_str()
        .ok_or_else(|| Failure(INVALID_PARAMS, "`id` is required: the task's".into()))?;
    let not_found = || Failure(TASK_NOT_FOUND, format!("Task '{task}' not found"));
    let (context, _) = task.rsplit_once(':').ok_or_else(not_found)?;
    let view = s.host.thread(context).await.map_err(|_| not_found())?;
    let state = match view.status {
        ThreadStatus::Interrupted => "input-required",
        ThreadStatus::Error => "failed",
        ThreadStatus::Busy => "working",
        ThreadStatus::Idle => "completed",
    };
    Ok(json!({
        "kind": "task",
        "id": task,
        "contextId": context,
        "status": {"state": state_name(state, v1), "timestamp": super::wire::time(view.record.updated_ms)},
        "history": history(view.values.as_ref(), &field, task, context, v1),
    }))
}

fn artifact(name: &str, description: &str, part: Json) -> Json {
    json!({"artifactId": new_id(), "name": name, "description": description, "parts": [part]})
}

/// A task state as the method's version spells it.
fn state_name(state: &str, v1: bool) -> String {
    if v1 {
        format!(
            "TASK_STATE_{}",
            state.replace('-', "_").to_ascii_uppercase()
        )
    } else {
        state.to_string()
    }
}

/// A message's text: its content, or its text blocks joined.
fn text_of(m: &Json) -> String {
    match &m["content"] {
        Json::String(t) => t.clone(),
        Json::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn is_ai(m: &Json) -> bool {
    matches!(
        m["type"].as_str().or(m["role"].as_str()),
        Some("ai" | "assistant")
    )
}

fn last_ai_text(values: Option<&Json>, field: &str) -> Option<String> {
    values?[field]
        .as_array()?
        .iter()
        .rev()
        .find(|m| is_ai(m))
        .map(text_of)
}

/// The thread's conversation as A2A messages: a person's as `user`, the model's as
/// `agent` (tool messages left out).
fn history(values: Option<&Json>, field: &str, task: &str, context: &str, v1: bool) -> Vec<Json> {
    let Some(messages) = values.and_then(|v| v[field].as_array()) else {
        return Vec::new();
    };
    messages
        .iter()
        .filter_map(|m| {
            let role = match m["type"].as_str().or(m["role"].as_str()) {
                Some("human" | "user") => "user",
                Some("ai" | "assistant") => "agent",
                _ => return None,
            };
            let role = if v1 {
                format!("ROLE_{}", role.to_ascii_uppercase())
            } else {
                role.to_string()
            };
            Some(json!({
                "kind": "message",
                "role": role,
                "parts": [{"kind": "text", "text": text_of(m)}],
                "messageId": m["id"],
                "taskId": task,
                "contextId": context,
            }))
        })
        .collect()
}
