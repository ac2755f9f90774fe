//! Query strings as the SDKs write them: booleans as `true`/`1`, lists as JSON.
//!
//! Python's client (httpx) writes a list as the key repeated and a missing value as
//! an empty one; the JS client writes a list as JSON. Both are read. Every parameter
//! that does not parse is a 422 with a `detail` naming it, as the bodies' are (axum's
//! own typed query extractor answers 400 in plain text).

use super::error::{ApiError, ApiResult};
use axum::extract::Query;

/// The query parameters, in order.
pub(super) type Params = Query<Vec<(String, String)>>;

/// The query parameters, with the empty ones dropped.
pub(super) trait Lookup {
    fn param(&self, name: &str) -> Option<&String>;
    fn params(&self, name: &str) -> Vec<&String>;
}

impl Lookup for [(String, String)] {
    fn param(&self, name: &str) -> Option<&String> {
        self.iter()
            .rev()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v)
    }

    fn params(&self, name: &str) -> Vec<&String> {
        self.iter()
            .filter(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v)
            .collect()
    }
}

pub(super) fn flag(p: &[(String, String)], name: &str) -> bool {
    p.param(name)
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// A count or an offset: a whole number, 0 or more.
pub(super) fn number(p: &[(String, String)], name: &str, default: usize) -> ApiResult<usize> {
    match p.param(name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| {
            ApiError::invalid(format!(
                "`{name}` is `{v}`, not a whole number of 0 or more"
            ))
        }),
    }
}
