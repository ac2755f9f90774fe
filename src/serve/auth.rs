//! API keys: a request carries the server's key in `x-api-key` (what the LangGraph SDKs
//! send) or as `Authorization: Bearer <key>`; one without it is refused with 401.

use super::AppState;
use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub(super) async fn require_key(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let Some(key) = &state.api_key else {
        return next.run(req).await;
    };
    let headers = req.headers();
    let given = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        });
    match given {
        Some(g) if same(g.trim().as_bytes(), key.as_bytes()) => next.run(req).await,
        Some(_) => ApiError::new(StatusCode::UNAUTHORIZED, "the API key is not this server's")
            .into_response(),
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this server needs an API key: send it in the `x-api-key` header (or as `Authorization: Bearer <key>`)",
        )
        .into_response(),
    }
}

/// Compares in time that does not depend on where the two differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
