//! `/ok` and `/info`, open without a key, and the answer to unknown paths.

use super::AppState;
use super::error::ApiError;
use axum::http::Uri;
use serde_json::{Value as Json, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ok))
        .routes(routes!(info))
}

/// Whether the server is up.
///
/// As LangGraph's server answers (`services` lists the dependencies it checked: none
/// here, the store is checked when it opens). No key needed.
#[utoipa::path(get, path = "/ok", tag = "meta", security(()),
    responses((status = 200, body = Object, example = json!({"ok": true, "services": {}}))))]
async fn ok() -> axum::Json<Json> {
    axum::Json(json!({ "ok": true, "services": {} }))
}

/// The server's version and what it offers, with LangGraph's keys. No key needed.
#[utoipa::path(get, path = "/info", tag = "meta", security(()), responses((status = 200, body = Object)))]
async fn info() -> axum::Json<Json> {
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "server": "switchyard",
        "flags": {
            "assistants": true,
            "crons": true,
            "langsmith": false,
            "langsmith_tracing_replicas": false,
            "langsmith_tracing_session_on_runs": false,
        },
        // LangGraph's keys, with nothing of LangSmith's to name.
        "host": {
            "kind": "self-hosted",
            "project_id": null,
            "host_revision_id": null,
            "revision_id": null,
            "tenant_id": null,
        },
    }))
}

/// A method an endpoint does not take: 405 with a `detail`, as every refusal has.
pub(super) async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "`{}` does not take {method}; docs/server.md lists what each endpoint takes",
            uri.path()
        ),
    )
}

pub(super) async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "no endpoint at `{}`; docs/server.md lists them",
        uri.path()
    ))
}
