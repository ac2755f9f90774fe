//! `switchyard serve`: the HTTP adapter over a [`Host`], speaking a compatible subset
//! of the LangGraph Agent Server API so that LangGraph's own client SDKs and front ends
//! work against it unmodified.
//!
//! One file per resource (`assistants`, `threads`, `runs`), one for the event stream
//! (`stream`: server-sent events, resumable by event id), one for the wire shapes
//! (`wire`), one for API keys (`auth`). Handlers translate a request into a host call
//! and its result into a response; nothing here runs a graph. docs/server.md lists every
//! endpoint and field.

mod a2a;
mod assistants;
mod auth;
mod body;
mod bulk;
mod crons;
mod error;
mod field_text;
mod items;
mod mcp;
mod meta;
mod modes;
mod openapi;
mod query;
mod run_create;
mod runs;
mod shared;
mod stream;
mod threads;
mod translate;
mod ui;
mod wire;

use crate::host::Host;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use utoipa_axum::router::OpenApiRouter;

/// How a server listens and whom it lets in.
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Requests must carry this key (`x-api-key`, or `Authorization: Bearer`), except
    /// `/ok` and `/info`. Without one the server binds only to loopback addresses,
    /// unless `insecure` says otherwise.
    pub api_key: Option<String>,
    pub insecure: bool,
    /// Origins a browser front end may call from (`*` for any); none: no CORS headers.
    pub cors: Vec<String>,
    /// The largest request body taken, in bytes.
    pub max_body: usize,
    /// A `: heartbeat` comment goes down an event stream that has been quiet this
    /// long, so proxies keep it open.
    pub heartbeat: Duration,
    /// Where one line per request goes (method, path, status, time).
    pub access_log: Option<UnboundedSender<AccessLog>>,
}

/// One request, as the access log records it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AccessLog {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// Until the response's head was sent (a stream goes on after it).
    pub duration_us: u64,
    pub remote: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to listen on `{0}` without an API key: set one (--api-key-env or --api-key-file), listen on a loopback address, or pass --insecure"
    )]
    NoKey(SocketAddr),
    #[error("cannot listen on `{addr}`")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the server stopped: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Clone)]
struct AppState {
    host: Host,
    /// The frames of the runs being streamed, shared by their readers.
    readers: Arc<shared::Readers>,
    api_key: Option<Arc<str>>,
    heartbeat: Duration,
}

/// A server bound to its address, not yet serving.
pub struct Bound {
    listener: tokio::net::TcpListener,
    app: Router,
    state: AppState,
}

impl Bound {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then lets requests in progress finish (an
    /// event stream ends when its run stops).
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        use axum::serve::ListenerExt;
        // Small responses go out at once: with Nagle's algorithm the end of a streamed
        // response waits for the client's delayed ACK (about 40 ms).
        let listener = self.listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let scheduler = tokio::spawn(crons::schedule(self.state));
        let served = axum::serve(
            listener,
            self.app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await;
        scheduler.abort();
        served?;
        Ok(())
    }
}

/// Refuses to listen beyond loopback without an API key, unless told to.
pub fn check_exposure(listen: SocketAddr, has_key: bool, insecure: bool) -> Result<(), ServeError> {
    if !has_key && !listen.ip().is_loopback() && !insecure {
        return Err(ServeError::NoKey(listen));
    }
    Ok(())
}

/// Binds the server's address and builds its routes.
pub async fn bind(host: Host, options: ServeOptions) -> Result<Bound, ServeError> {
    check_exposure(options.listen, options.api_key.is_some(), options.insecure)?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: options.listen,
            source,
        })?;
    let state = AppState {
        host,
        readers: Arc::default(),
        api_key: options.api_key.map(Arc::from),
        heartbeat: options.heartbeat,
    };
    // Each module's routes carry their handlers' descriptions (see `openapi.rs`).
    let api = OpenApiRouter::default()
        .merge(assistants::routes())
        .merge(threads::routes())
        .merge(runs::routes())
        .merge(items::routes())
        .merge(bulk::routes())
        .merge(crons::routes())
        .merge(a2a::routes().into())
        .nest_service(
            "/mcp",
            mcp::service(state.clone(), !options.listen.ip().is_loopback()),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ));
    let (api, described) = OpenApiRouter::default()
        .merge(meta::routes())
        .merge(api)
        .split_for_parts();
    let mut app = Router::new()
        .merge(openapi::routes(openapi::finish(described)))
        .merge(ui::routes())
        .merge(api)
        .fallback(meta::not_found)
        .method_not_allowed_fallback(meta::method_not_allowed)
        .with_state(state.clone())
        .layer(DefaultBodyLimit::max(options.max_body));
    if !options.cors.is_empty() {
        app = app.layer(cors(&options.cors));
    }
    if let Some(tx) = options.access_log {
        app = app.layer(axum::middleware::from_fn(move |req, next| {
            access_log(tx.clone(), req, next)
        }));
    }
    Ok(Bound {
        listener,
        app,
        state,
    })
}

fn cors(origins: &[String]) -> tower_http::cors::CorsLayer {
    use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
    let origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    CorsLayer::new()
        .allow_origin(origin)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([
            HeaderName::from_static("content-location"),
            HeaderName::from_static("location"),
            HeaderName::from_static("x-pagination-next"),
            HeaderName::from_static("x-pagination-total"),
        ])
        .max_age(Duration::from_secs(600))
}

async fn access_log(tx: UnboundedSender<AccessLog>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.to_string());
    let remote = req
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0.to_string());
    let response = next.run(req).await;
    let _ = tx.send(AccessLog {
        method,
        path,
        status: response.status().as_u16(),
        duration_us: start.elapsed().as_micros() as u64,
        remote,
    });
    response
}
