//! Assistants: one per served graph, whose id is the graph's `[graph] name`. They are
//! the graph files; they are made by writing a file, not by the API.

use super::AppState;
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::wire;
use crate::host::Served;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value as Json, json};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/assistants", post(create))
        .route("/assistants/search", post(search))
        .route("/assistants/count", post(count))
        .route(
            "/assistants/{id}",
            get(get_one).patch(unsupported).delete(unsupported),
        )
        .route("/assistants/{id}/graph", get(graph))
        .route("/assistants/{id}/schemas", get(schemas))
        .route("/assistants/{id}/details", get(details))
        .route("/assistants/{id}/subgraphs", get(subgraphs))
        .route("/assistants/{id}/subgraphs/{namespace}", get(subgraphs))
        .route("/assistants/{id}/versions", post(versions))
}

#[derive(Deserialize)]
struct Search {
    #[serde(default)]
    graph_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    metadata: Option<Json>,
    #[serde(default = "ten")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

fn ten() -> usize {
    10
}

fn matching(state: &AppState, q: &Search) -> Vec<Served> {
    state
        .host
        .graphs()
        .list()
        .into_iter()
        .filter(|s| q.graph_id.as_ref().is_none_or(|g| *g == s.id))
        .filter(|s| {
            q.name
                .as_ref()
                .is_none_or(|n| s.id.to_lowercase().contains(&n.to_lowercase()))
        })
        .filter(|s| {
            q.metadata
                .as_ref()
                .is_none_or(|m| crate::host::contains(&wire::assistant(s)["metadata"], m))
        })
        .collect()
}

async fn search(State(state): State<AppState>, Body(q): Body<Search>) -> Response {
    let all = matching(&state, &q);
    let total = all.len();
    let page: Vec<Json> = all
        .iter()
        .skip(q.offset)
        .take(q.limit)
        .map(wire::assistant)
        .collect();
    let next = q.offset + page.len();
    let mut response = axum::Json(page).into_response();
    let headers = response.headers_mut();
    headers.insert("x-pagination-total", total.into());
    if next < total {
        headers.insert("x-pagination-next", next.into());
    }
    response
}

async fn count(State(state): State<AppState>, Body(q): Body<Search>) -> axum::Json<usize> {
    axum::Json(matching(&state, &q).len())
}

fn served(state: &AppState, id: &str) -> ApiResult<Served> {
    state.host.graphs().get(id).ok_or_else(|| {
        let ids: Vec<String> = state
            .host
            .graphs()
            .list()
            .iter()
            .map(|s| format!("`{}`", s.id))
            .collect();
        ApiError::not_found(format!(
            "no assistant `{id}`; the assistants are the served graphs: {}",
            if ids.is_empty() {
                "none".into()
            } else {
                ids.join(", ")
            }
        ))
    })
}

/// The assistant, and for a graph whose file does not validate, its diagnostics as
/// `validate` prints them (`problems`) and as JSON (`diagnostics`).
async fn get_one(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = served(&state, &id)?;
    let mut body = wire::assistant(&s);
    if let Some(p) = &s.problems {
        body["diagnostics"] = json!(p.diagnostics);
    }
    Ok(axum::Json(body).into_response())
}

#[derive(Deserialize)]
struct GraphQuery {
    #[serde(default)]
    format: Option<String>,
    /// Accepted for LangGraph's clients (there are no subgraphs to expand), and
    /// checked as LangGraph checks it: `true`, `false` or a depth of 1 or more.
    #[serde(default)]
    xray: Option<String>,
}

/// The graph's nodes and edges as JSON, or (`?format=mermaid|dot|svg`) its drawing.
async fn graph(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<GraphQuery>,
) -> ApiResult<Response> {
    let xray_fits = |x: &str| {
        x.is_empty()
            || matches!(x, "true" | "True" | "false" | "False")
            || x.parse::<u32>().is_ok_and(|d| d > 0)
    };
    if q.xray.as_deref().is_some_and(|x| !xray_fits(x)) {
        return Err(ApiError::invalid("Invalid xray value"));
    }
    let s = served(&state, &id)?;
    let drawing = s.drawing.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::CONFLICT,
            format!("graph `{id}` has never validated, so there is no drawing of it"),
        )
    })?;
    Ok(match q.format.as_deref() {
        None | Some("json") => axum::Json(drawing.json.clone()).into_response(),
        Some("mermaid") => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            drawing.mermaid.clone(),
        )
            .into_response(),
        Some("dot") => (
            [(header::CONTENT_TYPE, "text/vnd.graphviz; charset=utf-8")],
            drawing.dot.clone(),
        )
            .into_response(),
        Some("svg") => (
            [(header::CONTENT_TYPE, "image/svg+xml")],
            drawing.svg.clone(),
        )
            .into_response(),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "format `{other}` is not one of `json`, `mermaid`, `dot`, `svg`"
            )));
        }
    })
}

/// Switchyard's own: each node's kind, description, prompts and schemas, as the web
/// page shows a selected node.
async fn details(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = served(&state, &id)?;
    let drawing = s.drawing.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::CONFLICT,
            format!("graph `{id}` has never validated, so its nodes are not known"),
        )
    })?;
    Ok(axum::Json(drawing.details.clone()).into_response())
}

async fn schemas(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = served(&state, &id)?;
    let (input, st) = match &s.drawing {
        Some(d) => (d.input_schema.clone(), d.state_schema.clone()),
        None => (Json::Null, Json::Null),
    };
    Ok(axum::Json(json!({
        "graph_id": s.id,
        "input_schema": input,
        "output_schema": st,
        "state_schema": st,
        "config_schema": null,
        "context_schema": null,
    }))
    .into_response())
}

/// Graphs have no subgraphs (yet): an empty map, so clients that ask get an answer.
async fn subgraphs(
    State(state): State<AppState>,
    Path(params): Path<Vec<(String, String)>>,
) -> ApiResult<axum::Json<Json>> {
    let id = params.first().map(|(_, v)| v.clone()).unwrap_or_default();
    served(&state, &id)?;
    Ok(axum::Json(json!({})))
}

async fn versions(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = served(&state, &id)?;
    let mut v = wire::assistant(&s);
    if let Json::Object(o) = &mut v {
        o.remove("updated_at");
    }
    Ok(axum::Json(json!([v])).into_response())
}

async fn create() -> ApiError {
    unsupported().await
}

async fn unsupported() -> ApiError {
    ApiError::invalid(
        "assistants are the served graph files: add, edit or remove a graph file to change them (the server reloads it)",
    )
}
