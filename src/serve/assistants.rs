//! Assistants: one per served graph, whose id is the graph's `[graph] name` (made by
//! writing the file), and those made through the API, each binding a served graph to
//! values of its constants (`host/assistants.rs`), kept in versions.

use super::AppState;
use super::body::{Body, field};
use super::error::{ApiError, ApiResult};
use super::wire;
use crate::host::{AssistantPatch, AssistantView, Configuration, NewAssistant, Served};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value as Json, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(search))
        .routes(routes!(count))
        .routes(routes!(get_one, update, delete))
        .routes(routes!(graph))
        .routes(routes!(schemas))
        .routes(routes!(details))
        .routes(routes!(subgraphs))
        .routes(routes!(subgraphs_in))
        .routes(routes!(versions))
        .routes(routes!(latest))
}

/// What assistants are listed by (LangGraph's `sort_by`).
const SORTS: [&str; 5] = [
    "assistant_id",
    "graph_id",
    "name",
    "created_at",
    "updated_at",
];

/// The keys a search may `select`.
const SELECTABLE: [&str; 10] = [
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "metadata",
    "version",
    "created_at",
    "updated_at",
];

/// A search's or a count's body.
struct Search {
    graph_id: Option<String>,
    name: Option<String>,
    metadata: Json,
    /// None: newest first, as LangGraph lists them.
    sort: Option<(String, bool)>,
    limit: usize,
    offset: usize,
    select: Vec<String>,
}

fn limit(b: &Map<String, Json>, default: usize) -> ApiResult<usize> {
    let limit =
        field::<i64>(b, "limit", "a whole number from 1 to 1000")?.unwrap_or(default as i64);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "`limit` is {limit}, not a whole number from 1 to 1000"
        )));
    }
    Ok(limit as usize)
}

fn offset(b: &Map<String, Json>) -> ApiResult<usize> {
    field::<usize>(b, "offset", "a whole number of 0 or more").map(Option::unwrap_or_default)
}

fn search_of(b: &Map<String, Json>) -> ApiResult<Search> {
    let sort_by = field::<String>(b, "sort_by", "an assistant field's name")?;
    if let Some(name) = sort_by.as_deref().filter(|n| !SORTS.contains(n)) {
        return Err(ApiError::invalid(format!(
            "`sort_by` is `{name}`, not one of {}",
            SORTS.map(|n| format!("`{n}`")).join(", ")
        )));
    }
    let descending = match field::<String>(b, "sort_order", "`asc` or `desc`")?.as_deref() {
        None | Some("desc") => true,
        Some("asc") => false,
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "`sort_order` is `{o}`, not `asc` or `desc`"
            )));
        }
    };
    let select: Vec<String> = field(b, "select", "a list of field names")?.unwrap_or_default();
    if let Some(bad) = select.iter().find(|k| !SELECTABLE.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "`select` names `{bad}`, not one of {}",
            SELECTABLE.map(|n| format!("`{n}`")).join(", ")
        )));
    }
    Ok(Search {
        graph_id: field(b, "graph_id", "a graph's name")?,
        name: field(b, "name", "a name")?,
        metadata: field::<Map<String, Json>>(b, "metadata", "an object")?
            .map_or(Json::Null, Json::Object),
        sort: sort_by.map(|s| (s, descending)),
        limit: limit(b, 10)?,
        offset: offset(b)?,
        select,
    })
}

async fn matching(state: &AppState, q: &Search) -> ApiResult<Vec<AssistantView>> {
    if let Some(g) = &q.graph_id
        && state.host.graphs().get(g).is_none()
    {
        return Err(ApiError::not_found(format!(
            "no graph `{g}`; this server serves {}",
            state.host.graphs().names()
        )));
    }
    let mut all: Vec<AssistantView> = state
        .host
        .assistants()
        .await?
        .into_iter()
        .filter(|a| q.graph_id.as_ref().is_none_or(|g| g == a.graph()))
        .filter(|a| {
            q.name
                .as_ref()
                .is_none_or(|n| a.name().to_lowercase().contains(&n.to_lowercase()))
        })
        .filter(|a| q.metadata.is_null() || crate::host::contains(&a.metadata(), &q.metadata))
        .collect();
    match &q.sort {
        // Newest first, as LangGraph lists them: those made, the later first (of two
        // made in one millisecond too), then the graph files' by name (loaded together
        // at start, in whatever order their reads finished).
        None => {
            all.reverse();
            all.sort_by(|a, b| match (a, b) {
                (AssistantView::File(x), AssistantView::File(y)) => x.id.cmp(&y.id),
                (AssistantView::File(_), _) => std::cmp::Ordering::Greater,
                (_, AssistantView::File(_)) => std::cmp::Ordering::Less,
                _ => b.created_ms().cmp(&a.created_ms()),
            });
        }
        Some((by, descending)) => {
            all.sort_by(|a, b| {
                let order = match by.as_str() {
                    "assistant_id" => a.id().cmp(b.id()),
                    "graph_id" => a.graph().cmp(b.graph()),
                    "name" => a.name().cmp(b.name()),
                    "updated_at" => a.updated_ms().cmp(&b.updated_ms()),
                    _ => a.created_ms().cmp(&b.created_ms()),
                };
                if *descending { order.reverse() } else { order }
            });
        }
    }
    Ok(all)
}

#[utoipa::path(post, path = "/assistants/search", tag = "assistants", summary = "Search the assistants", request_body = Object, responses((status = 200, description = "The assistants, paged (`X-Pagination-Total`, `X-Pagination-Next`)", body = [Object])))]
async fn search(
    State(state): State<AppState>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    let q = search_of(&b)?;
    let all = matching(&state, &q).await?;
    let total = all.len();
    let page: Vec<Json> = all
        .iter()
        .skip(q.offset)
        .take(q.limit)
        .map(|a| {
            let mut j = wire::assistant(a);
            if let (false, Json::Object(m)) = (q.select.is_empty(), &mut j) {
                m.retain(|k, _| q.select.contains(k));
            }
            j
        })
        .collect();
    let next = q.offset + page.len();
    let mut response = axum::Json(page).into_response();
    let headers = response.headers_mut();
    headers.insert("x-pagination-total", total.into());
    if next < total {
        headers.insert("x-pagination-next", next.into());
    }
    Ok(response)
}

#[utoipa::path(post, path = "/assistants/count", tag = "assistants", summary = "Count the assistants a search finds", request_body = Object, responses((status = 200, description = "How many", content_type = "application/json", body = i64)))]
async fn count(
    State(state): State<AppState>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    let q = search_of(&b)?;
    Ok(axum::Json(matching(&state, &q).await?.len()).into_response())
}

/// A configuration as a body gives it: `config` and `context`, each an object when
/// given (whether both configure the graph is the host's to say: 400, as LangGraph).
fn configuration(b: &Map<String, Json>) -> ApiResult<Configuration> {
    let config: Option<Map<String, Json>> = field(b, "config", "an object")?;
    let context: Option<Map<String, Json>> = field(b, "context", "an object")?;
    let configurable = config
        .as_ref()
        .and_then(|c| c.get("configurable"))
        .filter(|c| !c.is_null());
    if configurable.is_some_and(|c| !c.is_object()) {
        return Err(ApiError::invalid(format!(
            "config.configurable is {}, not an object",
            configurable.map(Json::to_string).unwrap_or_default()
        )));
    }
    Ok(Configuration { config, context })
}

#[utoipa::path(post, path = "/assistants", tag = "assistants", summary = "Make an assistant: a served graph with values for its configurable constants", request_body = super::openapi::AssistantCreate, responses((status = 200, description = "The assistant", body = Object)))]
async fn create(
    State(state): State<AppState>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    let Some(graph) = field::<String>(&b, "graph_id", "a served graph's name")? else {
        return Err(ApiError::invalid(
            "`graph_id` is required: the served graph the assistant runs",
        ));
    };
    let keep_existing =
        match field::<String>(&b, "if_exists", "`raise` or `do_nothing`")?.as_deref() {
            None | Some("raise") => false,
            Some("do_nothing") => true,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "`if_exists` is `{other}`, not `raise` or `do_nothing`"
                )));
            }
        };
    let new = NewAssistant {
        id: field(&b, "assistant_id", "an assistant's id (a UUID)")?,
        graph,
        configuration: configuration(&b)?,
        metadata: field(&b, "metadata", "an object")?.unwrap_or_default(),
        name: field(&b, "name", "a name")?,
        description: field(&b, "description", "a description")?,
        keep_existing,
    };
    let made = state.host.create_assistant(new).await?;
    Ok(axum::Json(wire::assistant(&made)).into_response())
}

#[utoipa::path(patch, path = "/assistants/{id}", tag = "assistants", summary = "Change an assistant: a new version", request_body = Object, responses((status = 200, description = "The assistant at its new version", body = Object)))]
async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    let patch = AssistantPatch {
        graph: field(&b, "graph_id", "a served graph's name")?,
        configuration: configuration(&b)?,
        metadata: field(&b, "metadata", "an object")?,
        name: field(&b, "name", "a name")?,
        description: field(&b, "description", "a description")?,
    };
    let changed = state.host.update_assistant(&id, patch).await?;
    Ok(axum::Json(wire::assistant(&changed)).into_response())
}

#[utoipa::path(delete, path = "/assistants/{id}", tag = "assistants", summary = "Delete an assistant", responses((status = 204, description = "Deleted")))]
async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
) -> ApiResult<StatusCode> {
    let threads = super::query::flag(&q, "delete_threads");
    state.host.delete_assistant(&id, threads).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/assistants/{id}/latest", tag = "assistants", summary = "Make one of an assistant's versions its current one", request_body = Object, responses((status = 200, description = "The assistant at that version", body = Object)))]
async fn latest(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    let version = field::<i64>(&b, "version", "a version number")?;
    let now = state.host.set_assistant_version(&id, version).await?;
    Ok(axum::Json(wire::assistant(&now)).into_response())
}

fn served(state: &AppState, id: &str) -> ApiResult<Served> {
    state.host.graphs().get(id).ok_or_else(|| {
        ApiError::not_found(format!(
            "no graph `{id}`; the served graphs are {}",
            state.host.graphs().names()
        ))
    })
}

/// The assistant, and for a graph whose file does not validate, its diagnostics as
/// `validate` prints them (`problems`) and as JSON (`diagnostics`).
#[utoipa::path(get, path = "/assistants/{id}", tag = "assistants", summary = "An assistant", responses((status = 200, description = "The assistant", body = Object)))]
async fn get_one(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let a = state.host.assistant(&id).await?;
    let mut body = wire::assistant(&a);
    if let AssistantView::File(s) = &a
        && let Some(p) = &s.problems
    {
        body["diagnostics"] = json!(p.diagnostics);
    }
    Ok(axum::Json(body).into_response())
}

/// The graph an assistant runs: a made one's, or the file's.
async fn served_of(state: &AppState, id: &str) -> ApiResult<Served> {
    match state.host.assistant(id).await? {
        AssistantView::File(s) => Ok(s),
        AssistantView::Made(a) => served(state, &a.graph),
    }
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
#[utoipa::path(get, path = "/assistants/{id}/graph", tag = "assistants", summary = "The graph's nodes and edges, or its drawing", responses((status = 200, description = "`{nodes, edges}`, or the drawing `format` asks for", content((Object = "application/json"), (String = "text/plain"), (String = "text/vnd.graphviz"), (String = "image/svg+xml")))))]
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
    let s = served_of(&state, &id).await?;
    let drawing = s.drawing.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::CONFLICT,
            format!(
                "graph `{}` has never validated, so there is no drawing of it",
                s.id
            ),
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
#[utoipa::path(get, path = "/assistants/{id}/details", tag = "assistants", summary = "Each node's kind, prompts and schemas (Switchyard's own)", responses((status = 200, description = "The nodes", body = Object)))]
async fn details(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = served_of(&state, &id).await?;
    let drawing = s.drawing.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::CONFLICT,
            format!(
                "graph `{}` has never validated, so its nodes are not known",
                s.id
            ),
        )
    })?;
    // What the version changed from the one it replaced, for the page to show.
    let mut details = drawing.details.clone();
    details["version"] = json!(s.version);
    details["changes"] = json!(s.changes);
    Ok(axum::Json(details).into_response())
}

#[utoipa::path(get, path = "/assistants/{id}/schemas", tag = "assistants", summary = "The graph's input, output, state and configuration schemas", responses((status = 200, description = "The schemas", body = Object)))]
async fn schemas(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = served_of(&state, &id).await?;
    let (input, output, st, config) = match &s.drawing {
        Some(d) => (
            d.input_schema.clone(),
            d.output_schema.clone(),
            d.state_schema.clone(),
            d.config_schema.clone(),
        ),
        None => (Json::Null, Json::Null, Json::Null, Json::Null),
    };
    Ok(axum::Json(json!({
        "graph_id": s.id,
        "input_schema": input,
        "output_schema": output,
        "state_schema": st,
        "config_schema": config,
        "context_schema": config,
    }))
    .into_response())
}

/// Graphs have no subgraphs (yet): an empty map, so clients that ask get an answer.
#[utoipa::path(get, path = "/assistants/{id}/subgraphs", tag = "assistants", summary = "The graph's subgraphs (none)", responses((status = 200, description = "The subgraphs", body = Object)))]
async fn subgraphs(
    State(state): State<AppState>,
    Path(params): Path<Vec<(String, String)>>,
) -> ApiResult<axum::Json<Json>> {
    let id = params.first().map(|(_, v)| v.clone()).unwrap_or_default();
    served_of(&state, &id).await?;
    Ok(axum::Json(json!({})))
}

/// [`subgraphs`] under a namespace: the same answer, as there are no subgraphs.
#[utoipa::path(get, path = "/assistants/{id}/subgraphs/{namespace}", tag = "assistants", summary = "The graph's subgraphs under a namespace (none)", responses((status = 200, description = "The subgraphs", body = Object)))]
async fn subgraphs_in(
    state: State<AppState>,
    params: Path<Vec<(String, String)>>,
) -> ApiResult<axum::Json<Json>> {
    subgraphs(state, params).await
}

/// The versions, newest first (a graph file's: its current one), filtered by
/// metadata and paged; none left is 404, as on LangGraph's server.
#[utoipa::path(post, path = "/assistants/{id}/versions", tag = "assistants", summary = "An assistant's versions, newest first", request_body = Object, responses((status = 200, description = "The versions", body = [Object])))]
async fn versions(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<Map<String, Json>>,
) -> ApiResult<Response> {
    let metadata =
        field::<Map<String, Json>>(&b, "metadata", "an object")?.map_or(Json::Null, Json::Object);
    let (limit, offset) = (limit(&b, 10)?, offset(&b)?);
    let all = state.host.assistant_versions(&id, &metadata).await?;
    let page: Vec<Json> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(wire::assistant_version)
        .collect();
    if page.is_empty() {
        return Err(ApiError::not_found(format!(
            "assistant `{id}` has no version{}",
            if metadata.is_null() && offset == 0 {
                String::new()
            } else {
                " that the filter and offset leave".into()
            }
        )));
    }
    Ok(axum::Json(page).into_response())
}
