//! The store API (`/store/...`): the long-term store's items, as LangGraph's Agent
//! Server takes and answers them.

use super::AppState;
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::query::{Lookup, Params};
use super::wire::time;
use crate::store::{Fields, Put};
use crate::store::{Item, Listing, Search};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value as Json, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_one, put, delete))
        .routes(routes!(search))
        .routes(routes!(namespaces))
}

/// An item as LangGraph sends it (`score` only in a search's).
fn item_json(item: &Item) -> Json {
    json!({
        "namespace": item.namespace.labels(),
        "key": item.key,
        "value": item.value,
        "created_at": time(item.created_ms),
        "updated_at": time(item.updated_ms),
    })
}

#[derive(Deserialize)]
struct PutBody {
    namespace: Vec<String>,
    key: String,
    value: Map<String, Json>,
    /// Which fields to embed for semantic search: `false` none, a list of paths
    /// instead of the server's (`--embeddings-fields`); none or null: the server's.
    #[serde(default)]
    index: Option<Json>,
    /// Minutes.
    #[serde(default)]
    ttl: Option<f64>,
}

/// A put's `index`, as LangGraph takes it.
fn fields(index: Option<Json>) -> ApiResult<Fields> {
    match index {
        None | Some(Json::Null) => Ok(Fields::Default),
        Some(Json::Bool(false)) => Ok(Fields::None),
        Some(Json::Array(paths)) => paths
            .into_iter()
            .map(|p| match p {
                Json::String(p) => Ok(p),
                other => Err(ApiError::invalid(format!(
                    "`index` holds {other}: it is false or a list of paths into the value (`text`, `tags[*]`)"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|paths| {
                if paths.is_empty() {
                    Fields::None
                } else {
                    Fields::These(paths)
                }
            }),
        Some(other) => Err(ApiError::invalid(format!(
            "`index` is {other}: it is false or a list of paths into the value (`text`, `tags[*]`)"
        ))),
    }
}

#[utoipa::path(put, path = "/store/items", tag = "store", summary = "Put an item in a namespace", request_body = super::openapi::ItemPut, responses((status = 204, description = "Put")))]
async fn put(State(s): State<AppState>, Body(b): Body<PutBody>) -> ApiResult<Response> {
    let index = fields(b.index)?;
    s.host
        .put_item(Put {
            namespace: b.namespace,
            key: b.key,
            value: b.value,
            ttl_minutes: b.ttl,
            index,
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A `refresh_ttl` parameter or field: true unless it says false.
fn refresh(v: Option<&str>) -> ApiResult<bool> {
    match v.map(str::to_ascii_lowercase).as_deref() {
        None | Some("true" | "1") => Ok(true),
        Some("false" | "0") => Ok(false),
        Some(other) => Err(ApiError::invalid(format!(
            "`refresh_ttl` is `{other}`, not true or false"
        ))),
    }
}

#[utoipa::path(get, path = "/store/items", tag = "store", summary = "An item", responses((status = 200, description = "The item", body = Object)))]
async fn get_one(State(s): State<AppState>, Query(p): Params) -> ApiResult<Response> {
    let Some(key) = p.param("key") else {
        return Err(ApiError::invalid("`key` is missing: the item's key"));
    };
    let labels = p
        .param("namespace")
        .map(|n| n.split('.').map(str::to_string).collect())
        .unwrap_or_default();
    let refresh = refresh(p.param("refresh_ttl").map(String::as_str))?;
    let item = s.host.get_item(labels, key, refresh).await?;
    Ok(axum::Json(item.as_ref().map_or(Json::Null, item_json)).into_response())
}

#[derive(Deserialize)]
struct DeleteBody {
    namespace: Vec<String>,
    key: String,
}

#[utoipa::path(delete, path = "/store/items", tag = "store", summary = "Delete an item", request_body = Object, responses((status = 204, description = "Deleted")))]
async fn delete(State(s): State<AppState>, Body(b): Body<DeleteBody>) -> ApiResult<Response> {
    s.host.delete_item(b.namespace, &b.key).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
struct SearchBody {
    #[serde(default)]
    namespace_prefix: Option<Vec<String>>,
    #[serde(default)]
    filter: Option<Map<String, Json>>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    /// Semantic search: the items ranked by their closeness to it, each with its
    /// score, when the server embeds items (`--embeddings`); without, as LangGraph
    /// without an index, the items of the filter with no score.
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    refresh_ttl: Option<bool>,
}

#[utoipa::path(post, path = "/store/items/search", tag = "store", summary = "Search the items under a namespace", request_body = Object, responses((status = 200, description = "`{items}`", body = Object)))]
async fn search(State(s): State<AppState>, Body(b): Body<SearchBody>) -> ApiResult<Response> {
    let search = Search {
        prefix: b.namespace_prefix.unwrap_or_default(),
        filter: b.filter.unwrap_or_default(),
        limit: b.limit.unwrap_or(10),
        offset: b.offset.unwrap_or(0),
        query: b.query,
    };
    let items = s
        .host
        .search_items(search, b.refresh_ttl.unwrap_or(true))
        .await?;
    let items: Vec<Json> = items
        .iter()
        .map(|(i, score)| {
            let mut j = item_json(i);
            j["score"] = json!(score);
            j
        })
        .collect();
    Ok(axum::Json(json!({ "items": items })).into_response())
}

#[derive(Deserialize)]
struct NamespacesBody {
    #[serde(default)]
    prefix: Option<Vec<String>>,
    #[serde(default)]
    suffix: Option<Vec<String>>,
    #[serde(default)]
    max_depth: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

#[utoipa::path(post, path = "/store/namespaces", tag = "store", summary = "List the namespaces", request_body = Object, responses((status = 200, description = "`{namespaces}`", body = Object)))]
async fn namespaces(
    State(s): State<AppState>,
    Body(b): Body<NamespacesBody>,
) -> ApiResult<Response> {
    let listing = Listing {
        prefix: b.prefix.unwrap_or_default(),
        suffix: b.suffix.unwrap_or_default(),
        max_depth: b.max_depth,
        limit: b.limit.unwrap_or(100),
        offset: b.offset.unwrap_or(0),
    };
    let found = s.host.item_namespaces(listing).await?;
    let found: Vec<&[String]> = found.iter().map(|n| n.labels()).collect();
    Ok(axum::Json(json!({ "namespaces": found })).into_response())
}
