//! Request bodies: JSON whatever the `Content-Type` says (the SDKs send none on some
//! POSTs, and LangGraph's servers do not check it), an empty body taken as `{}`, and
//! every refusal a `{"detail": ...}` error naming what is wrong.

use super::error::ApiError;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// A JSON body of type `T`.
pub(crate) struct Body<T>(pub(crate) T);

impl<S, T> FromRequest<S> for Body<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| match e.status() {
                StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the request body is larger than this server takes (see `--max-body`)",
                ),
                status => ApiError::new(status, format!("cannot read the request body: {e}")),
            })?;
        // No body is `{}`, with every field's default (what its serde attributes say).
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        let mut de = serde_json::Deserializer::from_slice(bytes);
        match serde_path_to_error::deserialize(&mut de) {
            Ok(v) => match de.end() {
                Ok(()) => Ok(Body(v)),
                Err(e) => Err(ApiError::invalid(format!(
                    "the request body is not valid JSON: {e}"
                ))),
            },
            Err(e) => {
                let path = e.path().to_string();
                let inner = Plain(e.into_inner());
                Err(ApiError::invalid(if inner.is_data() && path != "." {
                    format!("the request body does not fit: at `{path}`: {inner}")
                } else if inner.is_data() {
                    format!("the request body does not fit: {inner}")
                } else {
                    format!("the request body is not valid JSON: {inner}")
                }))
            }
        }
    }
}

/// A serde error as a client reads it: Rust's names for counts (`usize`, `u64`) in
/// words.
struct Plain(serde_json::Error);

impl Plain {
    fn is_data(&self) -> bool {
        self.0.is_data()
    }
}

impl std::fmt::Display for Plain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.0.to_string();
        let mut plain = text;
        for rust in ["expected usize", "expected u64", "expected u32"] {
            plain = plain.replace(rust, "expected a whole number of 0 or more");
        }
        f.write_str(&plain)
    }
}

/// Field `key` of a body read as an object: none when missing or null; refused,
/// saying it should be `what`, when it is not a `T`.
pub(super) fn field<T: DeserializeOwned>(
    body: &serde_json::Map<String, serde_json::Value>,
    key: &str,
    what: &str,
) -> Result<Option<T>, ApiError> {
    match body.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|_| ApiError::invalid(format!("`{key}` is {v}, not {what}"))),
    }
}
