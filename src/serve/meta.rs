//! `/ok` and `/info`, open without a key, and the answer to unknown paths.

use super::AppState;
use super::error::ApiError;
use axum::Router;
use axum::http::Uri;
use axum::routing::get;
use serde_json::{Value as Json, json};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ok", get(ok))
        .route("/info", get(info))
}

async fn ok() -> axum::Json<Json> {
    axum::Json(json!({ "ok": true }))
}

async fn info() -> axum::Json<Json> {
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "server": "switchyard",
        "flags": {
            "assistants": true,
            "crons": false,
            "langsmith": false,
            "langsmith_tracing_replicas": false,
        },
        "host": { "kind": "self-hosted" },
    }))
}

pub(super) async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "no endpoint at `{}`; docs/server.md lists them",
        uri.path()
    ))
}
