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

    /// `call` with the current token; on a 401, authorized once and sent again; on a
    /// 403 for more scope, sent again with a wider grant while that may help.
    async fn call<T, F, Fut>(&self, given: Option<String>, call: F) -> Result<T, Error>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut token = match given {
            Some(token) => Some(token),
            None => self.auth.lock().await.token().await.map_err(refused)?,
        };
        let mut authorized = false;
        // Each round is a grant or a token another request got meanwhile; a server that
        // keeps refusing fresh tokens is not asked forever.
        for _ in 0..4 {
            match call(token.clone()).await {
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
        self.call(auth_header, |token| {
            self.http.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.call(auth_header, |token| {
            self.http.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
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
        self.call(auth_header, |token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}
