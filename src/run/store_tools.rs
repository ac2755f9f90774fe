//! The builtin server `store` (`[servers.memory] builtin = "store"`): the long-term
//! store's items as tools, served in process from the store the run is kept in, in
//! front of the tool client that reaches every other server. Here, above both the tool
//! port and the stores, because it joins them. An `mcp_call` node puts
//! and reads items as it calls any tool; an llm node's `tools` offers them to the
//! model, which then remembers across threads by calling them.

use super::kinds::llm::now_ms;
use crate::graph::{Server, ServerTransport};
use crate::store::{Fields, Index, ItemError, Items, Listing, Put, Search, item_ops};
use crate::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json, json};
use std::sync::Arc;

/// The builtin `store` server's tools, and `inner` for every other server.
pub struct StoreTools {
    items: Arc<dyn Items>,
    index: Option<Index>,
    inner: Arc<dyn ToolClient>,
}

impl StoreTools {
    pub fn new(items: Arc<dyn Items>, index: Option<Index>, inner: Arc<dyn ToolClient>) -> Self {
        StoreTools {
            items,
            index,
            inner,
        }
    }
}

/// The tools, as `tools/list` would describe them.
pub fn store_tools() -> Vec<ToolInfo> {
    let namespace = json!({
        "type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
        "description": "The namespace: labels such as [\"users\", \"u1\"], none with a period."
    });
    let labels = json!({"type": "array", "items": {"type": "string", "minLength": 1}});
    let tool = |name: &str, description: &str, properties: Json, required: &[&str]| ToolInfo {
        name: name.into(),
        description: description.into(),
        input_schema: json!({
            "type": "object", "properties": properties, "required": required,
            "additionalProperties": false
        }),
        output_schema: None,
    };
    vec![
        tool(
            "put",
            "Stores `value` (an object) under `key` in `namespace`, replacing what was there; kept `ttl` minutes after its last put or read when given.",
            json!({"namespace": namespace, "key": {"type": "string"}, "value": {"type": "object"},
                   "ttl": {"type": "number", "exclusiveMinimum": 0}}),
            &["namespace", "key", "value"],
        ),
        tool(
            "get",
            "The value stored under `key` in `namespace`, or null.",
            json!({"namespace": namespace, "key": {"type": "string"}}),
            &["namespace", "key"],
        ),
        tool(
            "search",
            "Items under a namespace prefix whose values fit `filter` (a field and the value it equals, or {\"$gt\": v} and the like), in the order they were stored: [{namespace, key, value}]. With `query`, where the server embeds items, the closest in meaning first, each with its `score`.",
            json!({"namespace_prefix": labels, "filter": {"type": "object"},
                   "query": {"type": "string"},
                   "limit": {"type": "integer", "minimum": 0}, "offset": {"type": "integer", "minimum": 0}}),
            &[],
        ),
        tool(
            "delete",
            "Removes the item under `key` in `namespace`, if there is one.",
            json!({"namespace": namespace, "key": {"type": "string"}}),
            &["namespace", "key"],
        ),
        tool(
            "list_namespaces",
            "The namespaces that hold items, under `prefix` and ending with `suffix` (`*` matches any label), cut to `max_depth` labels.",
            json!({"prefix": labels, "suffix": labels, "max_depth": {"type": "integer", "minimum": 0},
                   "limit": {"type": "integer", "minimum": 0}, "offset": {"type": "integer", "minimum": 0}}),
            &[],
        ),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    namespace: Vec<String>,
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutArgs {
    namespace: Vec<String>,
    key: String,
    value: Map<String, Json>,
    #[serde(default)]
    ttl: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    #[serde(default)]
    namespace_prefix: Vec<String>,
    #[serde(default)]
    filter: Map<String, Json>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    query: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    prefix: Vec<String>,
    #[serde(default)]
    suffix: Vec<String>,
    #[serde(default)]
    max_depth: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: usize,
}

fn failed(message: String) -> ToolError {
    ToolError {
        message,
        transient: false,
        asked: None,
        unsent: false,
    }
}

fn args<T: DeserializeOwned>(tool: &str, arguments: &Json) -> Result<T, ToolError> {
    let arguments = match arguments {
        Json::Null => json!({}),
        a => a.clone(),
    };
    serde_json::from_value(arguments)
        .map_err(|e| failed(format!("the arguments of `{tool}` do not fit: {e}")))
}

/// A result whose content is `content` and whose text (what a model reads) is its JSON.
fn reply(content: Json) -> ToolReply {
    ToolReply {
        text: Some(content.to_string()),
        content,
        is_error: false,
        structured: true,
    }
}

impl StoreTools {
    async fn call_store(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        let items = &*self.items;
        let now = now_ms();
        let a = &request.arguments;
        let done: Result<Json, ItemError> = match request.tool.as_str() {
            "put" => {
                let p: PutArgs = args("put", a)?;
                let key = p.key.clone();
                let namespace = p.namespace.clone();
                item_ops::put(
                    items,
                    Put {
                        namespace: p.namespace,
                        key: p.key,
                        value: p.value,
                        ttl_minutes: p.ttl,
                        index: Fields::Default,
                    },
                    self.index.as_ref(),
                    now,
                )
                .await
                .map(|()| json!({"namespace": namespace, "key": key}))
            }
            "get" => {
                let k: Key = args("get", a)?;
                item_ops::get(items, k.namespace, &k.key, true, now)
                    .await
                    .map(|i| i.map_or(Json::Null, |i| Json::Object(i.value)))
            }
            "delete" => {
                let k: Key = args("delete", a)?;
                let key = k.key.clone();
                item_ops::delete(items, k.namespace, &k.key)
                    .await
                    .map(|()| json!({"deleted": key}))
            }
            "search" => {
                let s: SearchArgs = args("search", a)?;
                let search = Search {
                    prefix: s.namespace_prefix,
                    filter: s.filter,
                    limit: s.limit.unwrap_or(10),
                    offset: s.offset,
                    query: s.query,
                };
                item_ops::search(items, &search, self.index.as_ref(), true, now)
                    .await
                    .map(|found| {
                        Json::Array(
                            found
                                .into_iter()
                                .map(|(i, score)| {
                                    let mut j = json!({"namespace": i.namespace.labels(), "key": i.key, "value": i.value});
                                    if let Some(score) = score {
                                        j["score"] = json!(score);
                                    }
                                    j
                                })
                                .collect(),
                        )
                    })
            }
            "list_namespaces" => {
                let l: ListArgs = args("list_namespaces", a)?;
                let listing = Listing {
                    prefix: l.prefix,
                    suffix: l.suffix,
                    max_depth: l.max_depth,
                    limit: l.limit.unwrap_or(100),
                    offset: l.offset,
                };
                item_ops::namespaces(items, &listing, now)
                    .await
                    .map(|found| json!(found.iter().map(|n| n.labels()).collect::<Vec<_>>()))
            }
            other => {
                let tools = store_tools();
                let help = crate::suggestion::offers(other, tools.iter().map(|t| t.name.as_str()));
                return Err(failed(format!(
                    "server `{}` has no tool `{other}`{help}",
                    request.server.name
                )));
            }
        };
        done.map(reply).map_err(|e| {
            failed(format!(
                "`{}` on server `{}`: {e}",
                request.tool, request.server.name
            ))
        })
    }
}

fn builtin(server: &Server) -> bool {
    matches!(server.transport, ServerTransport::Store)
}

#[async_trait::async_trait]
impl ToolClient for StoreTools {
    async fn list_tools(&self, server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        if builtin(server) {
            return Ok(store_tools());
        }
        self.inner.list_tools(server).await
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        if builtin(&request.server) {
            return self.call_store(request).await;
        }
        self.inner.call(request).await
    }

    async fn shutdown(&self) {
        self.inner.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    /// The checker knows the tools by name (`spec::STORE_TOOLS`), the client by their
    /// schemas: the same tools.
    #[test]
    fn the_checker_and_the_client_name_the_same_tools() {
        let names: Vec<String> = super::store_tools().into_iter().map(|t| t.name).collect();
        assert_eq!(names, crate::spec::STORE_TOOLS);
    }
}
