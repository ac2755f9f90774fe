//! The web page at `/`: one HTML file, a style sheet and a script, compiled into the
//! binary (no CDN, no build step, no library). The page is a client of the same API
//! as any other; these routes only hand out the files, so they need no key (the
//! page asks for one when the API answers 401).

use super::AppState;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// The page runs only its own script and is not framed by other sites (its buttons
/// answer interrupts).
const PAGE_POLICY: &str = "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'";

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/",
            get(|| async {
                (
                    [
                        (header::CONTENT_SECURITY_POLICY, PAGE_POLICY),
                        (header::X_FRAME_OPTIONS, "DENY"),
                    ],
                    file("text/html; charset=utf-8", INDEX).await,
                )
            }),
        )
        .route(
            "/ui/app.js",
            get(|| file("text/javascript; charset=utf-8", SCRIPT)),
        )
        .route(
            "/ui/app.css",
            get(|| file("text/css; charset=utf-8", STYLE)),
        )
}

async fn file(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            // Served from the binary: a new one is a new server, so a reload is enough.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}
