//! The HTTP client rmcp's streamable-HTTP transport sends through: reqwest's, with the
//! server's token added, and authorization done when the server asks for it (a 401,
//! or a 403 for a wider scope), in the middle of the request that was refused.

use super::flow::Authorization;
use crate::mcp::event_sink::EventSink;
use crate::spec::OAuth;
use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

type Error = StreamableHttpError<reqwest::Error>;

#[derive(Clone)]
pub(crate) struct Authorizing {
    http: reqwest::Client,
    /// Held across a grant, so requests refused at once wait for one authorization
    /// and then use its token.
    auth: Arc<tokio::sync::Mutex<Authorization>>,
}

impl Authorizing {
    /// For the server `server` at `url`; `events` gets a `sign_in` event when a person
    /// must sign in, and `signing_in` is set while one is waited for.
    pub(crate) fn new(
        url: &str,
        server: &str,
        settings: OAuth,
        events: EventSink,
        signing_in: Arc<AtomicBool>,
    ) -> Result<Self, String> {
        // The authorization server's endpoints: no redirect followed (the authorization
        // endpoint's answer carries the code), and none waited on forever, since the
        // server's other requests wait for the grant.
        let oauth_http = reqwest::Client::builder()
            .user_agent(crate::tool::USER_AGENT)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            http: mcp_http()?,
            auth: Arc::new(tokio::sync::Mutex::new(Authorization::new(
                url, server, settings, oauth_http, events, signing_in,
            ))),
        })
    }

    /// `call` (a `method` request to `uri`, with these headers) with the current
    /// token; on a 401, authorized once and sent again; on a 403 for more scope, sent
    /// again with a wider grant while that may help; on a DPoP nonce challenge, sent
    /// again with the nonce.
    async fn call<T, F, Fut>(
        &self,
        method: &str,
        uri: &str,
        given: Option<String>,
        headers: &HashMap<HeaderName, HeaderValue>,
        call: F,
    ) -> Result<T, Error>
    where
        F: Fn(Option<String>, HashMap<HeaderName, HeaderValue>) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut token = match given {
            Some(token) => Some(token),
            None => self.auth.lock().await.token().await.map_err(refused)?,
        };
        let mut authorized = false;
        let mut nonce_learned = false;
        // Each round is a grant or a token another request got meanwhile; a server that
        // keeps refusing fresh tokens is not asked forever.
        for _ in 0..5 {
            let (bearer, headers) = self
                .credentials(method, uri, token.as_deref(), headers)
                .await?;
            match call(bearer, headers).await {
                Err(StreamableHttpError::AuthRequired(challenge))
                    if !nonce_learned
                        && challenge.www_authenticate_header.contains("use_dpop_nonce") =>
                {
                    nonce_learned = true;
                    self.learn_nonce(uri, token.as_deref()).await?;
                }
                Err(StreamableHttpError::AuthRequired(challenge)) if !authorized => {
                    authorized = true;
                    let mut auth = self.auth.lock().await;
                    token = Some(
                        auth.authorize(token.as_deref(), &challenge.www_authenticate_header)
                            .await
                            .map_err(refused)?,
                    );
                }
                Err(StreamableHttpError::InsufficientScope(e)) => {
                    let mut auth = self.auth.lock().await;
                    match auth
                        .upgrade(token.as_deref(), e.required_scope.as_deref())
                        .await
                        .map_err(refused)?
                    {
                        Some(wider) => token = Some(wider),
                        None => {
                            return Err(refused(format!(
                                "the server refuses the request for want of scope `{}` (403 insufficient_scope), and a wider grant did not help or is not allowed",
                                e.required_scope.as_deref().unwrap_or("?")
                            )));
                        }
                    }
                }
                other => return other,
            }
        }
        Err(refused(
            "the server kept refusing the request with fresh tokens".to_string(),
        ))
    }

    /// The token as rmcp sends it (a bearer token) and the request's headers: for a
    /// token bound to a DPoP key, no bearer, but `Authorization: DPoP ...` and a fresh
    /// proof for this request.
    async fn credentials(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) -> Result<(Option<String>, HashMap<HeaderName, HeaderValue>), Error> {
        let auth = self.auth.lock().await;
        let (Some(grant), Some(token)) = (auth.dpop.as_ref().filter(|g| g.bound), token) else {
            return Ok((token.map(str::to_string), headers.clone()));
        };
        let proof = grant
            .key
            .proof(method, uri, Some(token), grant.server_nonce.as_deref())
            .map_err(refused)?;
        let mut headers = headers.clone();
        let bad = |_| refused("the token cannot be sent as a header".to_string());
        let mut value = HeaderValue::from_str(&format!("DPoP {token}")).map_err(bad)?;
        value.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, value);
        headers.insert(
            HeaderName::from_static("dpop"),
            HeaderValue::from_str(&proof).map_err(bad)?,
        );
        Ok((None, headers))
    }

    /// The nonce a server asking for one (`use_dpop_nonce`, RFC 9449 §9) sends in its
    /// 401's `DPoP-Nonce` header, which rmcp's transport does not pass on: learned by
    /// sending the server an empty request with a proof and the token, which it
    /// refuses the same way before reading it.
    async fn learn_nonce(&self, uri: &str, token: Option<&str>) -> Result<(), Error> {
        let (_, headers) = self
            .credentials("POST", uri, token, &HashMap::new())
            .await?;
        let mut request = self
            .http
            .post(uri)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .body("{}");
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let response = request.send().await.map_err(Error::Client)?;
        let nonce = response
            .headers()
            .get("DPoP-Nonce")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match nonce {
            Some(nonce) => {
                if let Some(grant) = &mut self.auth.lock().await.dpop {
                    grant.server_nonce = Some(nonce);
                }
                Ok(())
            }
            None => Err(refused(
                "the server asks for a DPoP nonce (use_dpop_nonce) but sends none".to_string(),
            )),
        }
    }
}

/// The MCP server's own requests, made as rmcp's default client makes them: only
/// same-origin 307 and 308 redirects are followed (a 301-303 would turn the POST into a
/// bodyless GET; another origin would be sent the session id and the graph's headers),
/// and no idle connections kept (a reused one can stall ~40 ms on delayed ACKs).
fn mcp_http() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .user_agent(crate::tool::USER_AGENT)
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > 10 {
                attempt.error("more than 10 redirects")
            } else {
                attempt.follow()
            }
        }))
        .build()
        .map_err(|e| e.to_string())
}

/// Why authorization failed, as rmcp carries it (the text holds no token or secret).
fn refused(message: String) -> Error {
    StreamableHttpError::Auth(AuthError::AuthorizationFailed(message))
}

/// rmcp's transport calls the `_with_response_limits` and `_with_max_sse_event_size`
/// forms; the plain ones the trait requires forward to them with the default limits.
impl StreamableHttpClient for Authorizing {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.call(
            "POST",
            &uri,
            auth_header,
            &custom_headers,
            |token, headers| {
                self.http.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    headers,
                    limits,
                )
            },
        )
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.call(
            "DELETE",
            &uri,
            auth_header,
            &custom_headers,
            |token, headers| {
                self.http
                    .delete_session(uri.clone(), session_id.clone(), token, headers)
            },
        )
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.call(
            "GET",
            &uri,
            auth_header,
            &custom_headers,
            |token, headers| {
                self.http.get_stream_with_max_sse_event_size(
                    uri.clone(),
                    session_id.clone(),
                    last_event_id.clone(),
                    token,
                    headers,
                    max_sse_event_size,
                )
            },
        )
        .await
    }
}
