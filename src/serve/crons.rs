//! Crons (`/runs/crons`, `/threads/{id}/runs/crons`), as LangGraph's Agent Server
//! takes and answers them, and the scheduler that makes their runs: each due
//! occurrence the host hands this process becomes a run exactly as the same request
//! to `POST /runs` or `POST /threads/{id}/runs` would.

use super::AppState;
use super::body::{Body, field};
use super::error::{ApiError, ApiResult};
use super::run_create::RunCreate;
use super::wire::time;
use crate::host::{CronFilter, CronPatch, CronSort, NewCron, Notice};
use crate::store::Cron;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value as Json, json};
use std::time::Duration;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(create_for_thread))
        .routes(routes!(search))
        .routes(routes!(count))
        .routes(routes!(get_one, update, delete))
}

/// A cron as LangGraph sends it.
fn cron_json(c: &Cron) -> Json {
    let body = |k: &str| c.body.get(k).cloned().unwrap_or(Json::Null);
    json!({
        "cron_id": c.id,
        "assistant_id": c.assistant,
        "thread_id": c.thread,
        "user_id": body("user_id"),
        "end_time": body("end_time"),
        "schedule": body("schedule"),
        "timezone": body("timezone"),
        "payload": body("payload"),
        "next_run_date": c.next_ms.map(time),
        "metadata": body("metadata"),
        "on_run_completed": body("on_run_completed"),
        "enabled": c.enabled,
        "created_at": time(c.created_ms),
        "updated_at": time(c.updated_ms),
    })
}

/// An `end_time`: RFC 3339 (LangGraph keeps any text; a run could then never end).
fn end_time(body: &Map<String, Json>) -> ApiResult<Option<Option<(String, u64)>>> {
    match body.get("end_time") {
        None => Ok(None),
        Some(Json::Null) => Ok(Some(None)),
        Some(Json::String(t)) => {
            let at: jiff::Timestamp = t.parse().map_err(|_| {
                ApiError::invalid(format!(
                    "`end_time` is `{t}`, not a date and time as RFC 3339 writes them (`2030-01-01T00:00:00Z`)"
                ))
            })?;
            Ok(Some(Some((t.clone(), at.as_millisecond().max(0) as u64))))
        }
        Some(v) => Err(ApiError::invalid(format!(
            "`end_time` is {v}, not a date and time as RFC 3339 writes them"
        ))),
    }
}

fn on_run_completed(body: &Map<String, Json>) -> ApiResult<Option<String>> {
    match field::<String>(body, "on_run_completed", "`delete` or `keep`")? {
        None => Ok(None),
        Some(o) if o == "delete" || o == "keep" => Ok(Some(o)),
        Some(o) => Err(ApiError::invalid(format!(
            "`on_run_completed` is `{o}`, not `delete` or `keep`"
        ))),
    }
}

/// The run a cron makes at each occurrence, as a run request: its payload, with what
/// becomes of a stateless run's thread.
fn run_request(
    assistant: &str,
    payload: &Map<String, Json>,
    on_completed: Option<&str>,
) -> Map<String, Json> {
    let mut run = payload.clone();
    run.insert("assistant_id".into(), json!(assistant));
    if let Some(o) = on_completed {
        run.insert("on_completion".into(), json!(o));
    }
    run
}

/// Checks `run` as the run request it will be at each occurrence, so that a cron
/// whose runs would all be refused is refused now.
async fn check_run(s: &AppState, thread: Option<&str>, run: Map<String, Json>) -> ApiResult<()> {
    let create: RunCreate = serde_json::from_value(Json::Object(run))
        .map_err(|e| ApiError::invalid(format!("the cron's run request does not fit: {e}")))?;
    let new = create
        .check_on(&s.host, thread.is_none(), |_| Box::pin(async { None }))
        .await?;
    // Its input against the graph, as a run's (a thread's runs each take it too).
    s.host
        .check_stateless_run(&new.assistant, &new.request)
        .await?;
    Ok(())
}

/// Metadata keys a cron cannot set (see [`made`]).
const RESERVED: [&str; 4] = ["thread_id", "assistant_id", "run_id", "cron_id"];

fn without_reserved(mut metadata: Map<String, Json>) -> Map<String, Json> {
    metadata.retain(|k, _| !RESERVED.contains(&k.as_str()));
    metadata
}

async fn made(
    s: &AppState,
    thread: Option<String>,
    body: Map<String, Json>,
) -> ApiResult<Response> {
    let Some(assistant) = field::<String>(&body, "assistant_id", "an assistant's id")? else {
        return Err(ApiError::invalid(
            "`assistant_id` is required: the graph to run",
        ));
    };
    let Some(schedule) = field::<String>(&body, "schedule", "a cron schedule")? else {
        return Err(ApiError::invalid(
            "`schedule` is required: when to run, as cron writes it (`*/5 * * * *`)",
        ));
    };
    if s.host.assistant(&assistant).await.is_err() {
        return Err(ApiError::not_found(format!(
            "Assistant '{assistant}' not found"
        )));
    }
    let timezone = field::<String>(&body, "timezone", "a time zone's name")?;
    let enabled = field::<bool>(&body, "enabled", "true or false")?.unwrap_or(true);
    let mut body = body;
    // Keys a run's metadata gets from the server, which a cron's cannot set: left out
    // of both, as LangGraph does.
    let metadata = without_reserved(
        field::<Map<String, Json>>(&body, "metadata", "an object")?.unwrap_or_default(),
    );
    if let Some(Json::Object(m)) = body.get_mut("metadata") {
        *m = without_reserved(std::mem::take(m));
    }
    // A thread's cron runs on the thread, which stays: LangGraph leaves it null.
    let on_completed = match &thread {
        None => Some(on_run_completed(&body)?.unwrap_or_else(|| "delete".into())),
        Some(_) => {
            on_run_completed(&body)?;
            None
        }
    };
    let end_time = end_time(&body)?.flatten();
    crate::host::check_schedule(
        &schedule,
        timezone.as_deref(),
        end_time.as_ref().map(|(_, ms)| *ms),
    )?;
    check_run(
        s,
        thread.as_deref(),
        run_request(&assistant, &body, on_completed.as_deref()),
    )
    .await?;
    let cron = s
        .host
        .create_cron(NewCron {
            assistant,
            thread,
            schedule,
            timezone,
            end_time,
            enabled,
            metadata,
            payload: body,
            on_run_completed: on_completed,
        })
        .await?;
    Ok(axum::Json(cron_json(&cron)).into_response())
}

#[utoipa::path(post, path = "/runs/crons", tag = "crons", summary = "Make a cron: a run on a schedule, each on a thread of its own", request_body = super::openapi::CronCreate, responses((status = 200, description = "The cron", body = Object)))]
async fn create(
    State(s): State<AppState>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    made(&s, None, b).await
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/crons", tag = "crons", summary = "Make a cron whose runs go on a thread", request_body = super::openapi::CronCreate, responses((status = 200, description = "The cron", body = Object)))]
async fn create_for_thread(
    State(s): State<AppState>,
    Path(thread): Path<String>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    s.host.thread(&thread).await?;
    made(&s, Some(thread), b).await
}

#[utoipa::path(get, path = "/runs/crons/{cron_id}", tag = "crons", summary = "A cron", responses((status = 200, description = "The cron", body = Object)))]
async fn get_one(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let cron = s.host.get_cron(&id).await?;
    Ok(axum::Json(cron_json(&cron)).into_response())
}

#[utoipa::path(delete, path = "/runs/crons/{cron_id}", tag = "crons", summary = "Delete a cron", responses((status = 204, description = "Deleted")))]
async fn delete(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    s.host.delete_cron(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(patch, path = "/runs/crons/{cron_id}", tag = "crons", summary = "Change a cron", request_body = Object, responses((status = 200, description = "The cron", body = Object)))]
async fn update(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    if b.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "Request body cannot be empty",
        ));
    }
    let cron = s.host.get_cron(&id).await?;
    let patch = CronPatch {
        schedule: field(&b, "schedule", "a cron schedule")?,
        timezone: b
            .contains_key("timezone")
            .then(|| field::<String>(&b, "timezone", "a time zone's name"))
            .transpose()?,
        end_time: end_time(&b)?,
        enabled: field(&b, "enabled", "true or false")?,
        on_run_completed: on_run_completed(&b)?,
        metadata: without_reserved(field(&b, "metadata", "an object")?.unwrap_or_default()),
        // The whole change goes into the run request too, as LangGraph keeps it (a
        // cron's assistant is not changed).
        payload: b
            .iter()
            .filter(|(k, _)| k.as_str() != "assistant_id")
            .map(|(k, v)| match (k.as_str(), v) {
                ("metadata", Json::Object(m)) => {
                    (k.clone(), Json::Object(without_reserved(m.clone())))
                }
                _ => (k.clone(), v.clone()),
            })
            .collect(),
    };
    if !patch.payload.is_empty() {
        // The run request as it would be after the change must still be one.
        let payload = crate::host::cron_payload(&cron, &patch.payload);
        let completed = patch
            .on_run_completed
            .as_deref()
            .or(crate::host::cron_text(&cron, "on_run_completed"));
        check_run(
            &s,
            cron.thread.as_deref(),
            run_request(&cron.assistant, &payload, completed),
        )
        .await?;
    }
    let cron = s.host.update_cron(&id, patch).await?;
    Ok(axum::Json(cron_json(&cron)).into_response())
}

/// A search's or a count's body.
struct Query {
    filter: CronFilter,
    sort: CronSort,
    descending: bool,
    limit: usize,
    offset: usize,
    select: Vec<String>,
}

/// The keys a search may `select`.
const SELECTABLE: [&str; 14] = [
    "cron_id",
    "assistant_id",
    "thread_id",
    "user_id",
    "end_time",
    "schedule",
    "timezone",
    "payload",
    "next_run_date",
    "metadata",
    "on_run_completed",
    "enabled",
    "created_at",
    "updated_at",
];

fn query(b: &Map<String, Json>) -> ApiResult<Query> {
    let sort = match field::<String>(b, "sort_by", "a cron field's name")? {
        None => CronSort::default(),
        Some(name) => CronSort::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "`sort_by` is `{name}`, not one of {}",
                    CronSort::NAMES.map(|(n, _)| format!("`{n}`")).join(", ")
                ))
            })?,
    };
    let descending = match field::<String>(b, "sort_order", "`asc` or `desc`")?.as_deref() {
        None | Some("desc") => true,
        Some("asc") => false,
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "`sort_order` is `{o}`, not `asc` or `desc`"
            )));
        }
    };
    let limit = field::<usize>(b, "limit", "a whole number from 1 to 1000")?.unwrap_or(10);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "`limit` is {limit}, not a whole number from 1 to 1000"
        )));
    }
    let select: Vec<String> = field(b, "select", "a list of field names")?.unwrap_or_default();
    if let Some(bad) = select.iter().find(|k| !SELECTABLE.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "`select` names `{bad}`, not one of {}",
            SELECTABLE.map(|n| format!("`{n}`")).join(", ")
        )));
    }
    Ok(Query {
        filter: CronFilter {
            assistant: field(b, "assistant_id", "a graph's name")?,
            thread: field(b, "thread_id", "a thread's id")?,
            enabled: field(b, "enabled", "true or false")?,
            metadata: field(b, "metadata", "an object")?.unwrap_or_default(),
        },
        sort,
        descending,
        limit,
        offset: field(b, "offset", "a whole number of 0 or more")?.unwrap_or(0),
        select,
    })
}

#[utoipa::path(post, path = "/runs/crons/search", tag = "crons", summary = "Search the crons", request_body = Object, responses((status = 200, description = "The crons, paged", body = [Object])))]
async fn search(
    State(s): State<AppState>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    let q = query(&b)?;
    let found = s.host.search_crons(&q.filter, q.sort, q.descending).await?;
    let page: Vec<Json> = found
        .iter()
        .skip(q.offset)
        .take(q.limit)
        .map(|c| {
            let mut j = cron_json(c);
            if let (false, Json::Object(m)) = (q.select.is_empty(), &mut j) {
                m.retain(|k, _| q.select.contains(k));
            }
            j
        })
        .collect();
    let next = q.offset + page.len();
    let mut response = axum::Json(page).into_response();
    let headers = response.headers_mut();
    headers.insert("x-pagination-total", found.len().into());
    if next < found.len() {
        headers.insert("x-pagination-next", next.into());
    }
    Ok(response)
}

#[utoipa::path(post, path = "/runs/crons/count", tag = "crons", summary = "Count the crons a search finds", request_body = Object, responses((status = 200, description = "How many", content_type = "application/json", body = i64)))]
async fn count(State(s): State<AppState>, Body(b): Body<Map<String, Json>>) -> ApiResult<Response> {
    let q = query(&b)?;
    let found = s.host.search_crons(&q.filter, q.sort, q.descending).await?;
    Ok(axum::Json(found.len()).into_response())
}

/// How often the scheduler looks for due occurrences: a run starts within this of
/// its time.
const TICK: Duration = Duration::from_secs(1);

/// Due occurrences taken at one look: more wait for the next.
const BATCH: usize = 100;

/// Makes the runs of due crons until `stop` says so: each occurrence this process
/// takes becomes a run, as `POST /runs` (or the thread's) would make it; one that
/// cannot be made (its graph or thread gone, its request no longer fits) is told
/// through `notice` and the cron goes on to its next occurrence.
pub(super) async fn schedule(s: AppState) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if s.host.is_closing() {
            return;
        }
        let due = match s.host.take_due_crons(crate::host::now_ms(), BATCH).await {
            Ok(due) => due,
            Err(e) => {
                s.host.notice(Notice::CronFailed {
                    cron: None,
                    error: e.to_string(),
                });
                continue;
            }
        };
        for cron in due {
            s.host.notice(fire(&s, &cron).await);
        }
    }
}

/// Makes the run of one occurrence of `cron`: what happened, as a notice.
async fn fire(s: &AppState, cron: &Cron) -> Notice {
    let payload = cron
        .body
        .get("payload")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    let mut run = run_request(
        &cron.assistant,
        &payload,
        crate::host::cron_text(cron, "on_run_completed"),
    );
    // The cron's metadata (which a change merges into) under the request's, as
    // LangGraph gives a cron's run.
    let mut metadata = crate::host::cron_metadata(cron).clone();
    if let Some(Json::Object(m)) = run.get("metadata") {
        metadata.extend(m.clone());
    }
    run.insert("metadata".into(), Json::Object(metadata));
    let made = match serde_json::from_value::<RunCreate>(Json::Object(run)) {
        Ok(body) => super::runs::created(s, cron.thread.as_deref(), body).await,
        Err(e) => Err(ApiError::invalid(e.to_string())),
    };
    match made {
        Ok(c) => Notice::CronFired {
            cron: cron.id.clone(),
            at_ms: cron.next_ms.unwrap_or_default(),
            run: c.run.id.clone(),
            thread: c.run.thread.clone(),
        },
        Err(e) => Notice::CronFailed {
            cron: Some(cron.id.clone()),
            error: e.detail,
        },
    }
}
