//! Requests about many runs or threads at once: `POST /runs/cancel`,
//! `POST /threads/prune` and `POST /runs/batch`, as LangGraph's server takes and
//! answers them.

use super::AppState;
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::query::Params;
use super::run_create::RunCreate;
use super::runs::cancel_action;
use super::wire;
use crate::host::CancelMany;
use crate::store::RunStatus;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value as Json, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(cancel))
        .routes(routes!(prune))
        .routes(routes!(batch))
}

/// Stateless runs, created in the background as `POST /runs` creates one, each checked
/// (its body, its graph, its input) before any is created: a batch with one refusal
/// creates none, and the refusal names the run by its place in the batch.
#[utoipa::path(post, path = "/runs/batch", tag = "runs", summary = "Make many runs, each on a thread of its own", request_body = [Object], responses((status = 200, description = "The runs", body = [Object])))]
async fn batch(State(s): State<AppState>, Body(runs): Body<Vec<Json>>) -> ApiResult<Response> {
    if runs.is_empty() {
        return Err(ApiError::invalid("a batch holds at least one run"));
    }
    let body = |i: usize, run: &Json| -> ApiResult<RunCreate> {
        serde_json::from_value(run.clone())
            .map_err(|e| ApiError::invalid(format!("run {} of the batch does not fit: {e}", i + 1)))
    };
    let named = |i: usize, e: ApiError| ApiError {
        detail: format!("run {} of the batch: {}", i + 1, e.detail),
        ..e
    };
    for (i, run) in runs.iter().enumerate() {
        let b = body(i, run)?;
        let new = b
            .check_on(&s.host, true, |_| Box::pin(async { None }))
            .await
            .map_err(|e| named(i, e))?;
        s.host
            .check_stateless_run(&new.assistant, &new.request)
            .await
            .map_err(|e| named(i, e.into()))?;
    }
    let mut created = Vec::with_capacity(runs.len());
    for (i, run) in runs.iter().enumerate() {
        let c = super::runs::created(&s, None, body(i, run)?)
            .await
            .map_err(|e| named(i, e))?;
        created.push(wire::run(&c.run.created));
    }
    Ok(axum::Json(Json::Array(created)).into_response())
}

#[derive(Deserialize)]
struct Cancel {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    run_ids: Option<Vec<String>>,
    #[serde(default)]
    status: Option<String>,
}

/// 204 once every run chosen that is in flight was asked to stop (each ends at its
/// next boundary, as with a cancel of one run without `wait`).
#[utoipa::path(post, path = "/runs/cancel", tag = "runs", summary = "Cancel many runs", request_body = Object, responses((status = 204, description = "Asked to stop")))]
async fn cancel(
    State(s): State<AppState>,
    Query(p): Params,
    Body(c): Body<Cancel>,
) -> ApiResult<StatusCode> {
    let action = cancel_action(&p)?;
    let which = match (c.status, c.thread_id, c.run_ids) {
        (Some(status), None, None) => CancelMany::Status(match status.as_str() {
            "pending" => Some(RunStatus::Pending),
            "running" => Some(RunStatus::Running),
            "all" => None,
            other => {
                return Err(ApiError::invalid(format!(
                    "status `{other}` is not `pending`, `running` or `all`"
                )));
            }
        }),
        (Some(_), _, _) => {
            return Err(ApiError::invalid(
                "with `status`, `thread_id` and `run_ids` must be left out: `status` cancels every run in flight with that status, whatever its thread",
            ));
        }
        (None, Some(thread), Some(runs)) => CancelMany::Runs { thread, runs },
        (None, _, _) => {
            return Err(ApiError::invalid(
                "give `status` (`pending`, `running` or `all`), or `thread_id` and `run_ids`",
            ));
        }
    };
    s.host.cancel_many(which, action).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct Prune {
    thread_ids: Vec<String>,
    #[serde(default)]
    strategy: Option<String>,
}

#[utoipa::path(post, path = "/threads/prune", tag = "threads", summary = "Delete or prune many threads", request_body = Object, responses((status = 200, description = "`{pruned_count}`", body = Object)))]
async fn prune(
    State(s): State<AppState>,
    Body(b): Body<Prune>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    let keep_latest = match b.strategy.as_deref() {
        None | Some("delete") => false,
        Some("keep_latest") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "strategy `{other}` is not `delete` or `keep_latest`"
            )));
        }
    };
    let pruned = s.host.prune_threads(&b.thread_ids, keep_latest).await?;
    Ok(axum::Json(json!({ "pruned_count": pruned })))
}
