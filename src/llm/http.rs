//! The HTTP transport under async-openai: one request per call, no retries.
//!
//! async-openai's default transport retries 429 and 5xx by itself and then turns the
//! response into an error without its headers, so `Retry-After` is lost. The node kind
//! owns the retry policy (the node's `retry`), so this transport never retries and
//! hands failures up as [`HttpFailure`], headers read.

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use reqwest::header::HeaderMap;
use std::time::Duration;

/// A non-2xx answer, read before async-openai would drop its headers.
#[derive(Debug, thiserror::Error)]
#[error("HTTP {status}")]
pub(crate) struct HttpFailure {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<Duration>,
    /// The start of the body (at most [`BODY_LIMIT`] bytes), lossily decoded.
    pub(crate) body: String,
}

/// How much of an error body is kept: enough for the server's message.
const BODY_LIMIT: usize = 8 * 1024;

/// A tower service for `async_openai::Client::with_http_service`.
///
/// Without a key (`no_key`), no `Authorization` header is sent at all: async-openai
/// would send `Bearer ` with nothing after it, which some proxies refuse.
/// How a request carries the API key.
#[derive(Clone)]
pub(crate) enum Auth {
    /// No key: no `Authorization` header at all.
    None,
    /// `Authorization: Bearer <key>`, as async-openai sends it.
    Bearer,
    /// Azure's `api-key: <key>` header, and no `Authorization`.
    ApiKey(String),
}

pub(crate) fn service(
    client: reqwest::Client,
    auth: Auth,
    query: Option<String>,
) -> impl tower::Service<
    HttpRequestFactory,
    Response = reqwest::Response,
    Error = OpenAIError,
    Future = impl Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(move |factory: HttpRequestFactory| {
        let client = client.clone();
        let query = query.clone();
        let auth = auth.clone();
        async move {
            let mut request = factory.build().await?;
            match &auth {
                Auth::None => {
                    request.headers_mut().remove(reqwest::header::AUTHORIZATION);
                }
                Auth::Bearer => {}
                Auth::ApiKey(key) => {
                    request.headers_mut().remove(reqwest::header::AUTHORIZATION);
                    if let Ok(mut value) = reqwest::header::HeaderValue::from_str(key) {
                        value.set_sensitive(true);
                        request.headers_mut().insert("api-key", value);
                    }
                }
            }
            if let Some(q) = &query {
                let url = request.url_mut();
                let merged = match url.query() {
                    Some(own) if !own.is_empty() => format!("{own}&{q}"),
                    _ => q.clone(),
                };
                url.set_query(Some(&merged));
            }
            let mut response = client.execute(request).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = retry_after(response.headers());
            let mut body = Vec::new();
            // A body that breaks off is still worth what arrived.
            while body.len() < BODY_LIMIT {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    Ok(None) | Err(_) => break,
                }
            }
            body.truncate(BODY_LIMIT);
            Err(OpenAIError::Boxed(Box::new(HttpFailure {
                status: status.as_u16(),
                retry_after,
                body: String::from_utf8_lossy(&body).into_owned(),
            })))
        }
    })
}

/// The wait a server asks for: `retry-after-ms` (OpenAI's), else `Retry-After` in
/// seconds (whole or decimal) or as an HTTP date (the wait until then; none for a date
/// already past, and the node's backoff applies).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, std::time::SystemTime::now())
}

fn retry_after_at(headers: &HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let v: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        (v.is_finite() && v >= 0.0).then_some(v)
    };
    // Anything beyond a day is a broken header, not a plan.
    let cap = 86_400.0;
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(cap)));
    }
    if let Some(s) = number("retry-after") {
        return Some(Duration::from_secs_f64(s.min(cap)));
    }
    let date = httpdate::parse_http_date(headers.get("retry-after")?.to_str().ok()?.trim()).ok()?;
    let wait = date.duration_since(now).ok()?;
    (!wait.is_zero()).then(|| wait.min(Duration::from_secs_f64(cap)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "0.5")])),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "9"), ("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn retry_after_reads_an_http_date_as_the_wait_until_then() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let at = |v: &'static str| retry_after_at(&headers(&[("retry-after", v)]), now);
        assert_eq!(
            at("Wed, 21 Oct 2015 07:28:30 GMT"),
            Some(Duration::from_secs(30))
        );
        // Past, or now: nothing to wait for. Years ahead: a day at most.
        assert_eq!(at("Wed, 21 Oct 2015 07:27:00 GMT"), None);
        assert_eq!(at("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(
            at("Sat, 21 Oct 2017 07:28:00 GMT"),
            Some(Duration::from_secs(86_400))
        );
    }

    #[test]
    fn retry_after_ignores_nonsense() {
        for v in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "-1",
            "NaN",
            "inf",
            "",
            "tomorrow",
        ] {
            assert_eq!(retry_after(&headers(&[("retry-after", v)])), None, "{v}");
        }
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1e12")])),
            Some(Duration::from_secs(86_400))
        );
    }
}
