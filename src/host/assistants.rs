//! Assistants: a served graph bound to a configuration (values for the graph's
//! constants) and metadata. Each graph file gives one, whose id is its `[graph] name`
//! and whose configuration is the file's own; more are made through the API and kept
//! in the store in versions (`store::Assistants`), each change a new version, any
//! version made current again. A run of an assistant runs its graph with the
//! assistant's configuration, the run's own over it (`Bound`).
//!
//! LangGraph's two ways of saying a configuration are one here: `config.configurable`
//! and `context` each give the constants' values, and each mirrors the other, as on
//! LangGraph's server. A value is checked against its constant's type when it is
//! given, so a wrong one is refused naming the field, not found by a run.

use super::graphs::Served;
use super::{Host, HostError, contains, now_ms};
use crate::graph::Graph;
use crate::store::Assistant;
use serde_json::{Map, Value as Json, json};

/// An assistant as clients see it: one a graph file gives, or one made.
pub(crate) enum AssistantView {
    File(Served),
    Made(Assistant),
}

impl AssistantView {
    pub(crate) fn id(&self) -> &str {
        match self {
            AssistantView::File(s) => &s.id,
            AssistantView::Made(a) => &a.id,
        }
    }

    pub(crate) fn graph(&self) -> &str {
        match self {
            AssistantView::File(s) => &s.id,
            AssistantView::Made(a) => &a.graph,
        }
    }

    pub(crate) fn name(&self) -> &str {
        match self {
            AssistantView::File(s) => &s.id,
            AssistantView::Made(a) => a.body.get("name").and_then(Json::as_str).unwrap_or(""),
        }
    }

    pub(crate) fn created_ms(&self) -> u64 {
        match self {
            AssistantView::File(s) => s.created_ms,
            AssistantView::Made(a) => a.created_ms,
        }
    }

    pub(crate) fn updated_ms(&self) -> u64 {
        match self {
            AssistantView::File(s) => s.updated_ms,
            AssistantView::Made(a) => a.updated_ms,
        }
    }

    /// The metadata a search filters on: a made one's as given; a file's, the
    /// server's note of its file (see `serve/wire.rs`).
    pub(crate) fn metadata(&self) -> Json {
        match self {
            AssistantView::File(s) => file_metadata(s),
            AssistantView::Made(a) => a.body.get("metadata").cloned().unwrap_or(json!({})),
        }
    }
}

/// What the server says of the assistant a graph file gives.
pub(crate) fn file_metadata(s: &Served) -> Json {
    let mut metadata = json!({
        "created_by": "system",
        "file": s.path.display().to_string(),
        "valid": s.problems.is_none(),
    });
    if let Some(g) = &s.current {
        metadata["hash"] = json!(g.hash);
    }
    if let Some(p) = &s.problems {
        metadata["problems"] = json!(p.rendered);
    }
    metadata
}

/// A configuration as given: `config` (its `configurable` the constants' values, the
/// rest kept as given) or `context` (the values alone), not both.
#[derive(Default, Clone)]
pub(crate) struct Configuration {
    pub(crate) config: Option<Map<String, Json>>,
    pub(crate) context: Option<Map<String, Json>>,
}

/// An assistant to make (`POST /assistants`).
pub(crate) struct NewAssistant {
    /// A UUID, or none for a new one.
    pub(crate) id: Option<String>,
    pub(crate) graph: String,
    pub(crate) configuration: Configuration,
    pub(crate) metadata: Map<String, Json>,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    /// An id the store has already: answer with that assistant as it is, rather than
    /// refuse (LangGraph's `if_exists: "do_nothing"`).
    pub(crate) keep_existing: bool,
}

/// A change to an assistant (`PATCH /assistants/{id}`): a new version, made from the
/// current one. The configuration and the name, description and graph replace the
/// current ones; the metadata is merged into it, key by key.
#[derive(Default)]
pub(crate) struct AssistantPatch {
    pub(crate) graph: Option<String>,
    pub(crate) configuration: Configuration,
    pub(crate) metadata: Option<Map<String, Json>>,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
}

/// A run's assistant, resolved: the graph it runs and the constants' values it gives.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bound {
    pub(crate) id: String,
    pub(crate) graph: String,
    /// The assistant's `config.configurable` (= its `context`).
    pub(crate) configurable: Map<String, Json>,
    /// The rest of the assistant's `config` (`tags`, `recursion_limit`, ...).
    pub(crate) config: Map<String, Json>,
    /// The assistant's metadata, which its runs' metadata starts from.
    pub(crate) metadata: Map<String, Json>,
}

/// An assistant's `config` and `context`, as kept.
type ConfigAndContext = (Map<String, Json>, Map<String, Json>);

/// LangGraph's refusal of a configuration given both ways, said as it says it.
pub(crate) const CONFIG_AND_CONTEXT: &str = "Cannot specify both configurable and context. Prefer setting context alone. Context was introduced in LangGraph 0.6.0 and is the long term planned replacement for configurable.";

impl Configuration {
    /// The values given, as LangGraph keeps them: `config` with `configurable`, and
    /// `context` mirroring it. Both given: refused, as LangGraph refuses it.
    fn mirrored(self, graph: &Graph) -> Result<ConfigAndContext, HostError> {
        let mut config = self.config.unwrap_or_default();
        let configurable = match config.get("configurable") {
            None | Some(Json::Null) => None,
            Some(Json::Object(c)) => Some(c.clone()),
            Some(other) => {
                return Err(HostError::Invalid(format!(
                    "config.configurable is an object, not `{other}`"
                )));
            }
        };
        let context = self.context.unwrap_or_default();
        match configurable {
            Some(_) if both_given(configurable.as_ref(), &context, Some(graph)) => {
                Err(HostError::BadRequest(CONFIG_AND_CONTEXT.into()))
            }
            Some(values) if context.is_empty() => Ok((config, values)),
            configurable => {
                // `configurable`'s keys that configure nothing stay beside the values.
                let mut merged = configurable.unwrap_or_default();
                merged.extend(context.clone());
                if !merged.is_empty() {
                    config.insert("configurable".into(), Json::Object(merged));
                }
                Ok((config, context))
            }
        }
    }

    /// Whether it gives anything.
    fn is_given(&self) -> bool {
        self.config.is_some() || self.context.is_some()
    }
}

/// Whether a configuration is given both ways, which LangGraph refuses: `context` with
/// values, and `config.configurable` with a key that configures `graph` (a cron's
/// `cron_id` or a client's own keys do not; without a graph, any key does).
pub(crate) fn both_given(
    configurable: Option<&Map<String, Json>>,
    context: &Map<String, Json>,
    graph: Option<&Graph>,
) -> bool {
    let configures =
        |k: &String| graph.is_none_or(|g| g.field_id(k).is_some_and(|id| g.field(id).constant));
    !context.is_empty() && configurable.is_some_and(|c| c.keys().any(configures))
}

/// Checks values for `graph`'s configurable constants: each key of `context` must
/// name one, and each value that names a constant must be configurable and fit its
/// type and bounds (`config.configurable` takes other keys too, as LangGraph's does: a
/// thread id, a cron id, a client's own). `at` is where the values were given
/// (`context`, `config.configurable`).
pub(crate) fn check_values(
    graph: &Graph,
    values: &Map<String, Json>,
    at: &str,
    strict_keys: bool,
) -> Result<(), HostError> {
    for (key, value) in values {
        let names_constant = graph
            .field_id(key)
            .is_some_and(|id| graph.field(id).constant);
        if strict_keys || names_constant {
            graph
                .check_configured(key, value)
                .map_err(|e| HostError::Invalid(format!("{at}.{key}: {e}")))?;
        }
    }
    Ok(())
}

/// The configurable constants' values among `values`: those a run takes (see
/// `RunRequest::configured`).
pub(crate) fn constants_of(graph: &Graph, values: &Map<String, Json>) -> Map<String, Json> {
    values
        .iter()
        .filter(|(k, _)| {
            graph
                .field_id(k)
                .is_some_and(|id| graph.field(id).configurable.is_some())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// An assistant id as LangGraph takes one: a UUID (with or without its dashes),
/// written with them.
fn uuid_id(id: &str) -> Result<String, HostError> {
    uuid::Uuid::parse_str(id)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| HostError::Invalid("Invalid assistant ID: must be a UUID".into()))
}

fn body(
    name: &str,
    description: Option<&str>,
    config: Map<String, Json>,
    context: Map<String, Json>,
    metadata: Map<String, Json>,
) -> Map<String, Json> {
    let mut body = Map::new();
    body.insert("name".into(), json!(name));
    body.insert("description".into(), json!(description));
    body.insert("config".into(), Json::Object(config));
    body.insert("context".into(), Json::Object(context));
    body.insert("metadata".into(), Json::Object(metadata));
    body
}

fn object(body: &Map<String, Json>, key: &str) -> Map<String, Json> {
    match body.get(key) {
        Some(Json::Object(o)) => o.clone(),
        _ => Map::new(),
    }
}

impl Host {
    /// The assistant `id`: a graph file's, else one made.
    pub(crate) async fn assistant(&self, id: &str) -> Result<AssistantView, HostError> {
        if let Some(s) = self.graphs().get(id) {
            return Ok(AssistantView::File(s));
        }
        match self.inner.store.get_assistant(id).await? {
            Some(a) => Ok(AssistantView::Made(a)),
            None => Err(self.no_assistant(id)),
        }
    }

    fn no_assistant(&self, id: &str) -> HostError {
        HostError::NotFound(format!(
            "no assistant `{id}`: not a served graph's ({}) nor one made through the API",
            self.graphs().names()
        ))
    }

    /// What a run of assistant `id` runs: for a made one, its graph and configuration;
    /// any other id is taken as a graph's name (and refused, if none, where the run
    /// is made, as before there were assistants).
    pub(crate) async fn bind(&self, id: &str) -> Result<Bound, HostError> {
        if self.graphs().get(id).is_none()
            && let Some(a) = self.inner.store.get_assistant(id).await?
        {
            let mut config = object(&a.body, "config");
            let configurable = match config.remove("configurable") {
                Some(Json::Object(c)) => c,
                _ => object(&a.body, "context"),
            };
            return Ok(Bound {
                metadata: object(&a.body, "metadata"),
                id: a.id,
                graph: a.graph,
                configurable,
                config,
            });
        }
        Ok(Bound {
            id: id.to_string(),
            graph: id.to_string(),
            ..Bound::default()
        })
    }

    /// Every assistant: the graph files', then those made, oldest first.
    pub(crate) async fn assistants(&self) -> Result<Vec<AssistantView>, HostError> {
        let mut all: Vec<AssistantView> = self
            .graphs()
            .list()
            .into_iter()
            .map(AssistantView::File)
            .collect();
        all.extend(
            self.inner
                .store
                .assistants()
                .await?
                .into_iter()
                .map(AssistantView::Made),
        );
        Ok(all)
    }

    /// A configuration checked against `graph`: `config` and `context` as kept.
    fn configure(
        &self,
        graph: &Graph,
        given: Configuration,
    ) -> Result<ConfigAndContext, HostError> {
        let from_context = given.context.as_ref().is_some_and(|c| !c.is_empty());
        let (config, values) = given.mirrored(graph)?;
        if from_context {
            check_values(graph, &values, "context", true)?;
        } else {
            check_values(graph, &values, "config.configurable", false)?;
        }
        Ok((config, values))
    }

    /// Checks values kept when an assistant moves from graph `from` to `to`: each
    /// that gives one of `from`'s constants must give one of `to`'s, of its type.
    fn check_moved(
        &self,
        from: &str,
        to: &Graph,
        values: &Map<String, Json>,
    ) -> Result<(), HostError> {
        let Ok(old) = self.current_graph(from) else {
            return check_values(to, values, "context", false);
        };
        let constants: Map<String, Json> = constants_of(&old, values);
        check_values(to, &constants, "context", true).map_err(|e| {
            HostError::Invalid(format!(
                "{e}; the assistant's configuration is graph `{from}`'s: give one for `{}` with the change",
                to.name
            ))
        })
    }

    pub(crate) async fn create_assistant(
        &self,
        new: NewAssistant,
    ) -> Result<AssistantView, HostError> {
        let id = match &new.id {
            Some(id) => uuid_id(id)?,
            None => uuid::Uuid::new_v4().to_string(),
        };
        let graph = self.current_graph(&new.graph)?;
        if let Some(existing) = self.inner.store.get_assistant(&id).await? {
            return if new.keep_existing {
                Ok(AssistantView::Made(existing))
            } else {
                Err(HostError::Conflict(format!(
                    "Assistant {id} already exists"
                )))
            };
        }
        let (config, context) = self.configure(&graph, new.configuration)?;
        let now = now_ms();
        let made = Assistant {
            id: id.clone(),
            graph: new.graph,
            version: 1,
            body: body(
                new.name.as_deref().unwrap_or("Untitled"),
                new.description.as_deref(),
                config,
                context,
                new.metadata,
            ),
            created_ms: now,
            updated_ms: now,
        };
        if !self.inner.store.add_assistant_version(&made).await? {
            // Made by another request since it was read.
            return match self.inner.store.get_assistant(&id).await? {
                Some(existing) if new.keep_existing => Ok(AssistantView::Made(existing)),
                _ => Err(HostError::Conflict(format!(
                    "Assistant {id} already exists"
                ))),
            };
        }
        Ok(AssistantView::Made(made))
    }

    /// A made assistant, or why not: the graph files' are changed by editing them.
    async fn made(&self, id: &str) -> Result<Assistant, HostError> {
        if self.graphs().get(id).is_some() {
            return Err(HostError::Conflict(format!(
                "assistant `{id}` is graph file {}'s: edit the file to change it, or make an assistant of the graph (POST /assistants)",
                self.graphs()
                    .get(id)
                    .map(|s| format!("`{}`", s.path.display()))
                    .unwrap_or_default()
            )));
        }
        self.inner
            .store
            .get_assistant(id)
            .await?
            .ok_or_else(|| self.no_assistant(id))
    }

    /// Writes `patch` as the assistant's next version, made from its current one;
    /// read and made again when another change got in first.
    pub(crate) async fn update_assistant(
        &self,
        id: &str,
        patch: AssistantPatch,
    ) -> Result<AssistantView, HostError> {
        // Another change written between the read and the write: read again. Only a
        // store that never takes one (a broken one) would go on past this many.
        for _ in 0..100 {
            let current = self.made(id).await?;
            let highest = self
                .inner
                .store
                .assistant_versions(id)
                .await?
                .first()
                .map_or(current.version, |v| v.version);
            let graph_id = patch.graph.clone().unwrap_or(current.graph.clone());
            let graph = self.current_graph(&graph_id)?;
            let (config, context) = if patch.configuration.is_given() {
                self.configure(&graph, patch.configuration.clone())?
            } else {
                let kept = (
                    object(&current.body, "config"),
                    object(&current.body, "context"),
                );
                if graph_id != current.graph {
                    self.check_moved(&current.graph, &graph, &kept.1)?;
                }
                kept
            };
            let mut metadata = object(&current.body, "metadata");
            for (k, v) in patch.metadata.clone().unwrap_or_default() {
                metadata.insert(k, v);
            }
            let name = patch
                .name
                .clone()
                .or_else(|| {
                    current
                        .body
                        .get("name")
                        .and_then(Json::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let description = patch.description.clone().or_else(|| {
                current
                    .body
                    .get("description")
                    .and_then(Json::as_str)
                    .map(str::to_string)
            });
            let now = now_ms().max(current.updated_ms);
            let next = Assistant {
                id: id.to_string(),
                graph: graph_id,
                version: highest + 1,
                body: body(&name, description.as_deref(), config, context, metadata),
                created_ms: now,
                updated_ms: now,
            };
            if self.inner.store.add_assistant_version(&next).await? {
                return Ok(AssistantView::Made(Assistant {
                    created_ms: current.created_ms,
                    ..next
                }));
            }
        }
        Err(HostError::Conflict(format!(
            "assistant `{id}` kept changing while this change was written; try again"
        )))
    }

    /// Deletes a made assistant and its crons; with `threads`, the threads its runs
    /// made or ran on too (those whose metadata names it), as LangGraph's
    /// `delete_threads`. A thread with a run in flight refuses it all, before anything
    /// is deleted.
    pub(crate) async fn delete_assistant(&self, id: &str, threads: bool) -> Result<(), HostError> {
        self.made(id).await?;
        let doomed = if threads {
            let filter = super::ThreadFilter {
                metadata: Some(json!({ "assistant_id": id })),
                ..Default::default()
            };
            self.search_threads(&filter, None, usize::MAX, 0).await?
        } else {
            Vec::new()
        };
        if let Some(busy) = doomed
            .iter()
            .find(|t| !self.inner.queue.in_flight(&t.record.id).is_empty())
        {
            return Err(HostError::Conflict(format!(
                "thread `{}` of assistant `{id}` has a run in flight; cancel it, or delete the assistant without its threads",
                busy.record.id
            )));
        }
        for cron in self.inner.store.crons().await? {
            if cron.assistant == id {
                self.inner.store.delete_cron(&cron.id).await?;
            }
        }
        for t in doomed {
            self.delete_thread(&t.record.id).await?;
        }
        if !self.inner.store.delete_assistant(id).await? {
            return Err(self.no_assistant(id));
        }
        Ok(())
    }

    /// Makes `version` the assistant's current one.
    pub(crate) async fn set_assistant_version(
        &self,
        id: &str,
        version: Option<i64>,
    ) -> Result<AssistantView, HostError> {
        self.made(id).await?;
        let missing = || {
            HostError::NotFound(format!(
                "Version {} not found for assistant {id}",
                version.map_or("None".into(), |v| v.to_string())
            ))
        };
        let v = version
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(missing)?;
        if !self
            .inner
            .store
            .set_assistant_version(id, v, now_ms())
            .await?
        {
            return Err(missing());
        }
        self.made(id).await.map(AssistantView::Made)
    }

    /// Its versions, newest first, those whose metadata holds `metadata`; a graph
    /// file's has its current one alone.
    pub(crate) async fn assistant_versions(
        &self,
        id: &str,
        metadata: &Json,
    ) -> Result<Vec<AssistantView>, HostError> {
        if let Some(s) = self.graphs().get(id) {
            return Ok(vec![AssistantView::File(s)]);
        }
        let versions = self.inner.store.assistant_versions(id).await?;
        if versions.is_empty() {
            return Err(self.no_assistant(id));
        }
        Ok(versions
            .into_iter()
            .filter(|v| {
                metadata.is_null()
                    || contains(v.body.get("metadata").unwrap_or(&json!({})), metadata)
            })
            .map(AssistantView::Made)
            .collect())
    }
}
