//! Runs: created in the background, streamed, waited for; listed, read, cancelled,
//! joined, deleted; stateful (on a thread) and stateless (on a thread of their own,
//! deleted after).

use super::AppState;
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::modes::Modes;
use super::query::{Lookup, Params, flag, number};
use super::run_create::RunCreate;
use super::stream;
use super::wire;
use crate::host::{CancelAction, RunHandle, RunRequest};
use crate::store::RunStatus;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_on, list))
        .routes(routes!(stream_on))
        .routes(routes!(stream_thread))
        .routes(routes!(wait_on))
        .routes(routes!(get_one, delete))
        .routes(routes!(cancel))
        .routes(routes!(join))
        .routes(routes!(join_stream))
        .routes(routes!(create_stateless))
        .routes(routes!(stream_stateless))
        .routes(routes!(wait_stateless))
        .routes(routes!(join_stream_stateless))
        .routes(routes!(join_stateless))
}

/// What a created run needs besides its handle.
pub(super) struct Created {
    pub(super) run: Arc<RunHandle>,
    modes: Modes,
    cancel_on_disconnect: bool,
}

/// Creates the run `body` asks for on `thread` (none: a stateless run), once the body
/// passed every check against the thread as it stands and the graph it names.
pub(super) async fn created(
    s: &AppState,
    thread: Option<&str>,
    body: RunCreate,
) -> ApiResult<Created> {
    // Where the thread stands (at the checkpoint the run goes from), without its state
    // (which a run request never needs).
    let standing = |at: Option<u64>| -> futures_util::future::BoxFuture<'_, _> {
        Box::pin(async move {
            let t = thread?;
            match at {
                Some(seq) => s.host.checkpoint(t, seq).await.ok().flatten(),
                None => s.host.latest(t).await.ok().flatten(),
            }
        })
    };
    let new = body.check_on(&s.host, thread.is_none(), standing).await?;
    if let (Some(t), Some(seq)) = (thread, new.request.checkpoint)
        && s.host.checkpoint(t, seq).await?.is_none()
    {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "thread `{t}` has no checkpoint `{}`",
                wire::checkpoint_id(seq)
            ),
        ));
    }
    let run = s
        .host
        .create_run(
            &new.assistant,
            thread,
            new.request,
            new.metadata,
            new.create_thread,
        )
        .await?;
    Ok(Created {
        run,
        modes: new.modes,
        cancel_on_disconnect: new.cancel_on_disconnect,
    })
}

fn location(run: &RunHandle, stateless: bool) -> String {
    if stateless {
        format!("/runs/{}", run.id)
    } else {
        format!("/threads/{}/runs/{}", run.thread, run.id)
    }
}

fn with_locations(mut r: Response, content: &str, location: &str) -> Response {
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content) {
        h.insert(header::CONTENT_LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(location) {
        h.insert(header::LOCATION, v);
    }
    r
}

async fn create(s: AppState, thread: Option<String>, body: RunCreate) -> ApiResult<Response> {
    let c = created(&s, thread.as_deref(), body).await?;
    let at = location(&c.run, thread.is_none());
    // The run as created, as LangGraph answers (its worker may have started it since).
    let r = axum::Json(wire::run(&c.run.created)).into_response();
    Ok(with_locations(r, &at, &at))
}

#[utoipa::path(post, path = "/threads/{tid}/runs", tag = "runs", summary = "Make a run on a thread, in the background", request_body = super::openapi::RunCreate, responses((status = 200, description = "The run", body = Object)))]
async fn create_on(
    State(s): State<AppState>,
    Path(tid): Path<String>,
    Body(b): Body<RunCreate>,
) -> ApiResult<Response> {
    create(s, Some(tid), b).await
}

#[utoipa::path(post, path = "/runs", tag = "runs", summary = "Make a run on a thread of its own, in the background", request_body = super::openapi::RunCreate, responses((status = 200, description = "The run", body = Object)))]
async fn create_stateless(
    State(s): State<AppState>,
    Body(b): Body<RunCreate>,
) -> ApiResult<Response> {
    create(s, None, b).await
}

fn sse(s: &AppState, c: Created, last_event_id: Option<&str>, stateless: bool) -> Response {
    let at = location(&c.run, stateless);
    let body = stream::body(
        &s.host,
        &s.readers,
        c.run.clone(),
        c.modes,
        last_event_id,
        c.cancel_on_disconnect,
        s.heartbeat,
    );
    let r = (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        [("x-accel-buffering", "no")],
        body,
    )
        .into_response();
    with_locations(r, &at, &format!("{at}/stream"))
}

#[utoipa::path(post, path = "/threads/{tid}/runs/stream", tag = "runs", summary = "Make a run on a thread and stream it", request_body = super::openapi::RunCreate, responses((status = 200, description = "The run's events", content_type = "text/event-stream", body = super::openapi::StreamEvent)))]
async fn stream_on(
    State(s): State<AppState>,
    Path(tid): Path<String>,
    Body(b): Body<RunCreate>,
) -> ApiResult<Response> {
    let c = created(&s, Some(&tid), b).await?;
    Ok(sse(&s, c, None, false))
}

#[utoipa::path(post, path = "/runs/stream", tag = "runs", summary = "Make a run on a thread of its own and stream it", request_body = super::openapi::RunCreate, responses((status = 200, description = "The run's events", content_type = "text/event-stream", body = super::openapi::StreamEvent)))]
async fn stream_stateless(
    State(s): State<AppState>,
    Body(b): Body<RunCreate>,
) -> ApiResult<Response> {
    let c = created(&s, None, b).await?;
    Ok(sse(&s, c, None, true))
}

/// A body that sends a newline now and then until the run ends, then its result:
/// JSON parsers skip the leading whitespace, and proxies keep the connection open.
fn result_body(s: &AppState, run: Arc<RunHandle>, cancel_on_disconnect: bool) -> axum::body::Body {
    struct State {
        host: crate::host::Host,
        run: Arc<RunHandle>,
        every: std::time::Duration,
        done: bool,
        cancel_on_disconnect: bool,
    }
    impl Drop for State {
        fn drop(&mut self) {
            if self.cancel_on_disconnect && self.run.end().is_none() {
                crate::serve::stream::cancel_apart(&self.host, &self.run);
            }
        }
    }
    let state = State {
        host: s.host.clone(),
        run,
        every: s.heartbeat,
        done: false,
        cancel_on_disconnect,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        match tokio::time::timeout(st.every, st.run.finished()).await {
            Err(_) => Some((
                Ok::<_, std::convert::Infallible>(axum::body::Bytes::from_static(b"\n")),
                st,
            )),
            Ok(_) => {
                st.done = true;
                st.cancel_on_disconnect = false;
                let result = stream::result(&st.host, &st.run).await;
                Some((
                    Ok(serde_json::to_vec(&result).unwrap_or_default().into()),
                    st,
                ))
            }
        }
    });
    axum::body::Body::from_stream(stream)
}

fn wait_response(s: &AppState, c: Created, stateless: bool) -> Response {
    let at = location(&c.run, stateless);
    let body = result_body(s, c.run.clone(), c.cancel_on_disconnect);
    let r = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    with_locations(r, &at, &format!("{at}/join"))
}

#[utoipa::path(post, path = "/threads/{tid}/runs/wait", tag = "runs", summary = "Make a run on a thread and wait for its end", request_body = super::openapi::RunCreate, responses((status = 200, description = "The state at the run's end", body = Object)))]
async fn wait_on(
    State(s): State<AppState>,
    Path(tid): Path<String>,
    Body(b): Body<RunCreate>,
) -> ApiResult<Response> {
    let c = created(&s, Some(&tid), b).await?;
    Ok(wait_response(&s, c, false))
}

#[utoipa::path(post, path = "/runs/wait", tag = "runs", summary = "Make a run on a thread of its own and wait for its end", request_body = super::openapi::RunCreate, responses((status = 200, description = "The state at the run's end", body = Object)))]
async fn wait_stateless(
    State(s): State<AppState>,
    Body(b): Body<RunCreate>,
) -> ApiResult<Response> {
    let c = created(&s, None, b).await?;
    Ok(wait_response(&s, c, true))
}

#[utoipa::path(get, path = "/threads/{tid}/runs", tag = "runs", summary = "A thread's runs", responses((status = 200, description = "The runs", body = [Object])))]
async fn list(
    State(s): State<AppState>,
    Path(tid): Path<String>,
    Query(p): Params,
) -> ApiResult<Response> {
    let limit = number(&p, "limit", 10)?;
    let offset = number(&p, "offset", 0)?;
    let status = p
        .param("status")
        .map(|v| {
            RunStatus::parse(v).ok_or_else(|| {
                ApiError::invalid(format!(
                    "status `{v}` is not one of pending, running, error, success, timeout, interrupted"
                ))
            })
        })
        .transpose()?;
    let runs: Vec<Json> = s
        .host
        .runs(&tid)
        .await?
        .iter()
        .filter(|r| status.is_none_or(|st| r.status == st))
        .skip(offset)
        .take(limit)
        .map(wire::run)
        .collect();
    Ok(axum::Json(runs).into_response())
}

#[utoipa::path(get, path = "/threads/{tid}/runs/{rid}", tag = "runs", summary = "A run", responses((status = 200, description = "The run", body = Object)))]
async fn get_one(
    State(s): State<AppState>,
    Path((tid, rid)): Path<(String, String)>,
) -> ApiResult<Response> {
    Ok(axum::Json(wire::run(&s.host.run(Some(&tid), &rid).await?)).into_response())
}

#[utoipa::path(delete, path = "/threads/{tid}/runs/{rid}", tag = "runs", summary = "Delete a run", responses((status = 204, description = "Deleted")))]
async fn delete(
    State(s): State<AppState>,
    Path((tid, rid)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    s.host.delete_run(&tid, &rid).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/threads/{tid}/runs/{rid}/cancel", tag = "runs", summary = "Cancel a run", responses((status = 200, description = "Cancelled", body = Object), (status = 202, description = "Asked to stop")))]
async fn cancel(
    State(s): State<AppState>,
    Path((tid, rid)): Path<(String, String)>,
    Query(p): Params,
) -> ApiResult<StatusCode> {
    let run = s.host.cancel(&tid, &rid, cancel_action(&p)?).await?;
    if flag(&p, "wait") {
        run.finished().await;
        return Ok(StatusCode::NO_CONTENT);
    }
    Ok(StatusCode::ACCEPTED)
}

/// A cancel's `action` parameter: `interrupt` (the default) or `rollback`.
pub(super) fn cancel_action(p: &[(String, String)]) -> ApiResult<CancelAction> {
    match p.param("action").map(String::as_str) {
        None | Some("interrupt") => Ok(CancelAction::Interrupt),
        Some("rollback") => Ok(CancelAction::Rollback),
        Some(other) => Err(ApiError::invalid(format!(
            "action `{other}` is not `interrupt` or `rollback`"
        ))),
    }
}

#[utoipa::path(get, path = "/threads/{tid}/runs/{rid}/join", tag = "runs", summary = "Wait for a run's end", responses((status = 200, description = "The state at the run's end", body = Object)))]
async fn join(
    State(s): State<AppState>,
    Path((tid, rid)): Path<(String, String)>,
    Query(p): Params,
) -> ApiResult<Response> {
    joined_result(&s, Some(&tid), &rid, &p).await
}

#[utoipa::path(get, path = "/runs/{rid}/join", tag = "runs", summary = "Wait for the end of a run made on a thread of its own", responses((status = 200, description = "The state at the run's end", body = Object)))]
async fn join_stateless(
    State(s): State<AppState>,
    Path(rid): Path<String>,
    Query(p): Params,
) -> ApiResult<Response> {
    joined_result(&s, None, &rid, &p).await
}

/// Waits for the run and answers with its result (the thread's values, with
/// `__interrupt__` or `__error__` as LangGraph gives them).
async fn joined_result(
    s: &AppState,
    thread: Option<&str>,
    rid: &str,
    p: &[(String, String)],
) -> ApiResult<Response> {
    let record = s.host.run(thread, rid).await?;
    let tid = record.thread.clone();
    let at = match thread {
        Some(_) => format!("/threads/{tid}/runs/{rid}"),
        None => format!("/runs/{rid}"),
    };
    match s.host.handle(rid).await {
        Some(run) => {
            let body = result_body(s, run, flag(p, "cancel_on_disconnect"));
            let r = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
            Ok(with_locations(r, &at, &format!("{at}/join")))
        }
        // Finished long ago: the thread as it stands, with its interrupt if it waits at
        // one, as LangGraph answers.
        None => {
            let result = if record.status == RunStatus::Error {
                json!({ "__error__": { "error": "RunError", "message": record.error } })
            } else {
                let view = s.host.thread(&tid).await?;
                let mut values = super::threads::thread_json(&s.host, &view)["values"].clone();
                let pending = view
                    .latest
                    .as_ref()
                    .map(wire::interrupts_of)
                    .unwrap_or_default();
                if let (false, Json::Object(o)) = (pending.is_empty(), &mut values) {
                    o.insert("__interrupt__".into(), json!(pending));
                }
                stream::output_only(&s.host, &record.assistant, values)
            };
            Ok(with_locations(
                axum::Json(result).into_response(),
                &at,
                &format!("{at}/join"),
            ))
        }
    }
}

async fn joined(
    s: &AppState,
    thread: Option<&str>,
    rid: &str,
    p: &[(String, String)],
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let record = s.host.run(thread, rid).await?;
    let asked: Vec<String> = p.params("stream_mode").into_iter().cloned().collect();
    let names = if asked.is_empty() {
        serde_json::from_value::<RunRequest>(record.kwargs.clone())
            .map(|r| r.stream_mode)
            .unwrap_or_default()
    } else {
        let mut names = Vec::new();
        for v in asked {
            names.extend(stream::mode_names(&Json::String(v)).map_err(ApiError::invalid)?);
        }
        names
    };
    let modes = Modes::parse(&names).map_err(ApiError::invalid)?;
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let Some(run) = s.host.handle(rid).await else {
        // Finished, and its events no longer kept: a stream that says so and ends,
        // rather than an error a page would retry at every load.
        let mut text = String::from("event: metadata\ndata: ");
        text.push_str(
            &json!({ "run_id": rid, "thread_id": record.thread, "attempt": 1 }).to_string(),
        );
        text.push_str("\n\n");
        if record.status == RunStatus::Error {
            text.push_str("event: error\ndata: ");
            text.push_str(&json!({ "error": "RunError", "message": record.error }).to_string());
            text.push_str("\n\n");
        }
        return Ok((
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            text,
        )
            .into_response());
    };
    let c = Created {
        run,
        modes,
        cancel_on_disconnect: flag(p, "cancel_on_disconnect"),
    };
    Ok(sse(s, c, last.as_deref(), thread.is_none()))
}

#[utoipa::path(get, path = "/threads/{tid}/runs/{rid}/stream", tag = "runs", summary = "Stream a run that was made before", responses((status = 200, description = "The run's events", content_type = "text/event-stream", body = super::openapi::StreamEvent)))]
async fn join_stream(
    State(s): State<AppState>,
    Path((tid, rid)): Path<(String, String)>,
    Query(p): Params,
    headers: HeaderMap,
) -> ApiResult<Response> {
    joined(&s, Some(&tid), &rid, &p, &headers).await
}

#[utoipa::path(get, path = "/runs/{rid}/stream", tag = "runs", summary = "Stream a run made on a thread of its own", responses((status = 200, description = "The run's events", content_type = "text/event-stream", body = super::openapi::StreamEvent)))]
async fn join_stream_stateless(
    State(s): State<AppState>,
    Path(rid): Path<String>,
    Query(p): Params,
    headers: HeaderMap,
) -> ApiResult<Response> {
    joined(&s, None, &rid, &p, &headers).await
}

/// Every run of the thread from now on, streamed one after the other (see
/// `stream::thread_body`). `stream_mode` and `Last-Event-ID` are taken and not used:
/// LangGraph's server sends each run's own modes whatever is asked.
#[utoipa::path(get, path = "/threads/{tid}/stream", tag = "runs", summary = "Follow a thread's runs", responses((status = 200, description = "The runs' events", content_type = "text/event-stream", body = super::openapi::StreamEvent)))]
async fn stream_thread(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    s.host.thread(&id).await?;
    let body = stream::thread_body(&s.host, &s.readers, &id, s.heartbeat);
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        [("x-accel-buffering", "no")],
        body,
    )
        .into_response())
}
