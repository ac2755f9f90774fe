//! Threads: create, read, search, change metadata, delete, copy; their state at any
//! checkpoint, their history, and a person's writes to their state.

use super::AppState;
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::query::{Lookup, Params, number};
use super::wire;
use crate::host::{Host, StateView, ThreadFilter, ThreadStatus, ThreadView};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value as Json, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(search))
        .routes(routes!(count))
        .routes(routes!(get_one, patch, delete))
        .routes(routes!(copy))
        .routes(routes!(blob))
        .routes(routes!(state, update))
        .routes(routes!(state_at_body))
        .routes(routes!(state_at))
        .routes(routes!(history_get, history_post))
}

/// A thread as JSON, its values shaped by its graph.
pub(super) fn thread_json(host: &Host, view: &ThreadView) -> Json {
    let graph = view.latest.as_ref().and_then(|l| host.graph_of(l).ok());
    wire::thread(view, graph.as_deref())
}

#[derive(Deserialize, Default)]
struct Create {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Option<Json>,
    #[serde(default)]
    if_exists: Option<String>,
    #[serde(default)]
    supersteps: Option<Json>,
    #[serde(default)]
    graph_id: Option<String>,
}

#[utoipa::path(post, path = "/threads", tag = "threads", summary = "Make a thread", request_body = super::openapi::ThreadCreate, responses((status = 200, description = "The thread", body = Object)))]
async fn create(State(s): State<AppState>, Body(c): Body<Create>) -> ApiResult<Response> {
    let do_nothing = match c.if_exists.as_deref() {
        None | Some("raise") => false,
        Some("do_nothing") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "if_exists `{other}` is not `raise` or `do_nothing`"
            )));
        }
    };
    if c.supersteps.as_ref().is_some_and(|v| !v.is_null()) {
        return Err(ApiError::invalid(
            "supersteps are not supported: create the thread, then update its state",
        ));
    }
    let mut metadata = object(c.metadata, "metadata")?;
    if let Some(g) = c.graph_id {
        metadata["graph_id"] = json!(g);
    }
    let view = s
        .host
        .create_thread(c.thread_id, metadata, do_nothing)
        .await?;
    Ok(axum::Json(thread_json(&s.host, &view)).into_response())
}

fn object(v: Option<Json>, what: &str) -> ApiResult<Json> {
    match v {
        None | Some(Json::Null) => Ok(json!({})),
        Some(o @ Json::Object(_)) => Ok(o),
        Some(other) => Err(ApiError::invalid(format!(
            "`{what}` is an object, not `{other}`"
        ))),
    }
}

#[derive(Deserialize)]
struct Search {
    #[serde(default)]
    metadata: Option<Json>,
    #[serde(default)]
    values: Option<Json>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    ids: Option<Vec<String>>,
    #[serde(default = "ten")]
    limit: usize,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    sort_by: Option<String>,
    #[serde(default)]
    sort_order: Option<String>,
}

fn ten() -> usize {
    10
}

fn filter(q: &Search) -> ApiResult<ThreadFilter> {
    let status = q
        .status
        .as_deref()
        .map(|s| {
            ThreadStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(format!(
                    "status `{s}` is not one of `idle`, `busy`, `interrupted`, `error`"
                ))
            })
        })
        .transpose()?;
    Ok(ThreadFilter {
        metadata: q.metadata.clone().filter(|m| !m.is_null()),
        values: q.values.clone().filter(|v| !v.is_null()),
        status,
        ids: q.ids.clone(),
    })
}

#[utoipa::path(post, path = "/threads/search", tag = "threads", summary = "Search the threads", request_body = Object, responses((status = 200, description = "The threads, paged", body = [Object])))]
async fn search(State(s): State<AppState>, Body(q): Body<Search>) -> ApiResult<Response> {
    let f = filter(&q)?;
    let sort = q
        .sort_by
        .as_deref()
        .map(|by| (by, q.sort_order.as_deref().is_some_and(|o| o == "asc")));
    let views = s.host.search_threads(&f, sort, q.limit, q.offset).await?;
    let body: Vec<Json> = views.iter().map(|v| thread_json(&s.host, v)).collect();
    Ok(axum::Json(body).into_response())
}

#[utoipa::path(post, path = "/threads/count", tag = "threads", summary = "Count the threads a search finds", request_body = Object, responses((status = 200, description = "How many", content_type = "application/json", body = i64)))]
async fn count(State(s): State<AppState>, Body(q): Body<Search>) -> ApiResult<Response> {
    let f = filter(&q)?;
    let n = s.host.search_threads(&f, None, usize::MAX, 0).await?.len();
    Ok(axum::Json(n).into_response())
}

#[utoipa::path(get, path = "/threads/{id}", tag = "threads", summary = "A thread", responses((status = 200, description = "The thread", body = Object)))]
async fn get_one(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let view = s.host.thread(&id).await?;
    Ok(axum::Json(thread_json(&s.host, &view)).into_response())
}

#[derive(Deserialize, Default)]
struct Patch {
    #[serde(default)]
    metadata: Option<Json>,
}

#[utoipa::path(patch, path = "/threads/{id}", tag = "threads", summary = "Change a thread's metadata", request_body = Object, responses((status = 200, description = "The thread", body = Object)))]
async fn patch(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Body(p): Body<Patch>,
) -> ApiResult<Response> {
    let metadata = object(p.metadata, "metadata")?;
    let view = s.host.patch_thread(&id, metadata).await?;
    Ok(axum::Json(thread_json(&s.host, &view)).into_response())
}

#[utoipa::path(delete, path = "/threads/{id}", tag = "threads", summary = "Delete a thread, its runs and its checkpoints", responses((status = 204, description = "Deleted")))]
async fn delete(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    s.host.delete_thread(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A copy of the thread, or (`checkpoint_id`, Switchyard's own) a fork: its history
/// up to that checkpoint.
#[utoipa::path(post, path = "/threads/{id}/copy", tag = "threads", summary = "Copy a thread", request_body = Object, responses((status = 200, description = "The copy", body = Object)))]
async fn copy(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<CopyBody>,
) -> ApiResult<Response> {
    let upto = match body.checkpoint_id {
        Some(c) => Some(seq_of(&c)?),
        None => None,
    };
    let view = s.host.copy_thread(&id, upto).await?;
    Ok(axum::Json(thread_json(&s.host, &view)).into_response())
}

/// Switchyard's own: a blob a tool's result was stored as (a screenshot), by the
/// reference state holds (`sha256:<hex>`), with its MIME type.
#[utoipa::path(get, path = "/blobs/{reference}", tag = "threads", summary = "A binary value a thread's state holds by reference", responses((status = 200, description = "The bytes, with their MIME type", content_type = "application/octet-stream", body = [u8])))]
async fn blob(State(s): State<AppState>, Path(reference): Path<String>) -> ApiResult<Response> {
    use axum::http::header;
    let (bytes, mime) = s.host.blob(&reference)?;
    // A tool's bytes, not the server's: never run as a page of this origin (an SVG
    // could hold a script).
    Ok((
        [
            (header::CONTENT_TYPE, mime),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "sandbox; default-src 'none'",
            ),
        ],
        bytes,
    )
        .into_response())
}

#[derive(Deserialize, Default)]
struct CopyBody {
    #[serde(default)]
    checkpoint_id: Option<String>,
}

fn state_json(view: Option<StateView>) -> Json {
    view.as_ref().map_or_else(wire::empty_state, wire::state)
}

#[utoipa::path(get, path = "/threads/{id}/state", tag = "threads", summary = "A thread's state at its latest checkpoint", responses((status = 200, description = "The state", body = Object)))]
async fn state(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(axum::Json(state_json(s.host.state(&id, None).await?)).into_response())
}

fn seq_of(id: &str) -> ApiResult<u64> {
    wire::parse_checkpoint_id(id)
        .ok_or_else(|| ApiError::not_found(format!("no checkpoint `{id}`")))
}

#[utoipa::path(get, path = "/threads/{id}/state/{checkpoint_id}", tag = "threads", summary = "A thread's state at a checkpoint", responses((status = 200, description = "The state", body = Object)))]
async fn state_at(
    State(s): State<AppState>,
    Path((id, checkpoint)): Path<(String, String)>,
) -> ApiResult<Response> {
    let seq = seq_of(&checkpoint)?;
    Ok(axum::Json(state_json(s.host.state(&id, Some(seq)).await?)).into_response())
}

#[derive(Deserialize, Default)]
struct CheckpointBody {
    #[serde(default)]
    checkpoint: Option<CheckpointRef>,
}

/// A checkpoint as clients name one; only its id matters here.
#[derive(Deserialize, Default, Clone)]
pub(super) struct CheckpointRef {
    #[serde(default)]
    pub(super) checkpoint_id: Option<String>,
}

#[utoipa::path(post, path = "/threads/{id}/state/checkpoint", tag = "threads", summary = "A thread's state at a checkpoint named in the body", request_body = Object, responses((status = 200, description = "The state", body = Object)))]
async fn state_at_body(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<CheckpointBody>,
) -> ApiResult<Response> {
    let seq = b
        .checkpoint
        .and_then(|c| c.checkpoint_id)
        .map(|c| seq_of(&c))
        .transpose()?;
    Ok(axum::Json(state_json(s.host.state(&id, seq).await?)).into_response())
}

#[derive(Deserialize, Default)]
struct Update {
    #[serde(default)]
    values: Option<Json>,
    #[serde(default)]
    as_node: Option<String>,
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint: Option<CheckpointRef>,
}

/// A person's write to the state, through the fields' reducers, recorded as a
/// checkpoint of its own; to an earlier checkpoint's state, a fork of the thread there.
#[utoipa::path(post, path = "/threads/{id}/state", tag = "threads", summary = "Write to a thread's state, as a node would", request_body = Object, responses((status = 200, description = "The checkpoint written", body = Object)))]
async fn update(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Body(u): Body<Update>,
) -> ApiResult<Response> {
    let at = u
        .checkpoint_id
        .or(u.checkpoint.and_then(|c| c.checkpoint_id));
    let at = at.map(|at| seq_of(&at)).transpose()?;
    let mut values = u.values.unwrap_or_else(|| json!({}));
    if let Ok(view) = s.host.thread(&id).await
        && let Some(graph) = view.latest.as_ref().and_then(|l| s.host.graph_of(l).ok())
    {
        wire::input_messages(&mut values, &graph);
        wire::check_content(&values, &graph)
            .map_err(|e| ApiError::invalid(format!("values: {e}")))?;
    }
    let record = s
        .host
        .update_state(&id, at, values, u.as_node.as_deref())
        .await?;
    let checkpoint = wire::checkpoint_ref(&record.thread, record.seq);
    Ok(axum::Json(json!({
        "checkpoint": checkpoint,
        "configurable": checkpoint,
        "checkpoint_id": wire::checkpoint_id(record.seq),
    }))
    .into_response())
}

#[derive(Deserialize)]
struct History {
    #[serde(default = "ten")]
    limit: usize,
    /// A checkpoint id, or a config `{configurable: {checkpoint_id}}` as the JS SDK
    /// sends it.
    #[serde(default)]
    before: Option<Json>,
}

fn before_seq(before: Option<&Json>) -> ApiResult<Option<u64>> {
    let id = match before {
        None | Some(Json::Null) => return Ok(None),
        Some(Json::String(s)) => s.clone(),
        Some(v) => v
            .pointer("/configurable/checkpoint_id")
            .or_else(|| v.get("checkpoint_id"))
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| ApiError::invalid(format!("`before` names no checkpoint: `{v}`")))?,
    };
    seq_of(&id).map(Some)
}

async fn history(s: &AppState, id: &str, h: History) -> ApiResult<Response> {
    let before = before_seq(h.before.as_ref())?;
    let states = s.host.history(id, before, h.limit).await?;
    let body: Vec<Json> = states.iter().map(wire::state).collect();
    Ok(axum::Json(body).into_response())
}

#[utoipa::path(post, path = "/threads/{id}/history", tag = "threads", summary = "A thread's checkpoints, newest first", request_body = Object, responses((status = 200, description = "The states", body = [Object])))]
async fn history_post(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Body(h): Body<History>,
) -> ApiResult<Response> {
    history(&s, &id, h).await
}

#[utoipa::path(get, path = "/threads/{id}/history", tag = "threads", summary = "A thread's checkpoints, newest first", responses((status = 200, description = "The states", body = [Object])))]
async fn history_get(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(p): Params,
) -> ApiResult<Response> {
    history(
        &s,
        &id,
        History {
            limit: number(&p, "limit", ten())?,
            before: p.param("before").cloned().map(Json::String),
        },
    )
    .await
}
