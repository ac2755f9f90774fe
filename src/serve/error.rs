//! Errors as responses: a status and `{"detail": "..."}`, the body both LangGraph SDKs
//! read (the Python one looks for `detail`; the JS one shows the body as it is).

use crate::host::HostError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A refused or failed request.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) detail: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            detail: detail.into(),
        }
    }

    /// A body or parameter that is not what the endpoint takes.
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    pub(crate) fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }
}

impl From<HostError> for ApiError {
    fn from(e: HostError) -> Self {
        let status = match &e {
            HostError::NotFound(_) => StatusCode::NOT_FOUND,
            HostError::Conflict(_) => StatusCode::CONFLICT,
            HostError::BadRequest(_) => StatusCode::BAD_REQUEST,
            HostError::Invalid(_) | HostError::Unsupported(_) => StatusCode::UNPROCESSABLE_ENTITY,
            HostError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            HostError::Upstream(_) => StatusCode::BAD_GATEWAY,
            // A store that keeps none (`--store none`: no crons, items or made assistants)
            // is told what the request asked.
            HostError::Store(
                crate::store::StoreError::NoCrons
                | crate::store::StoreError::NoItems
                | crate::store::StoreError::NoAssistants,
            ) => StatusCode::UNPROCESSABLE_ENTITY,
            HostError::Store(_) | HostError::Llm(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(json!({ "detail": self.detail }))).into_response()
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;
