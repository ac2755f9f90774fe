//! Threads as a host shows them: their catalog entry, where they stand, their state
//! at any checkpoint, and a person's writes to it.

use super::{Host, HostError, new_id, now_ms};
use crate::graph::Graph;
use crate::store::{Checkpoint, Status, ThreadRecord};
use serde_json::{Value as Json, json};
use std::sync::Arc;

/// Where a thread stands, named as the LangGraph API names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadStatus {
    /// No run in flight, nothing pending (new, finished, or stopped).
    Idle,
    /// A run is in flight or waiting.
    Busy,
    /// Paused at an interrupt or a breakpoint.
    Interrupted,
    /// Its last run failed.
    Error,
}

impl ThreadStatus {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Busy => "busy",
            ThreadStatus::Interrupted => "interrupted",
            ThreadStatus::Error => "error",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => ThreadStatus::Idle,
            "busy" => ThreadStatus::Busy,
            "interrupted" => ThreadStatus::Interrupted,
            "error" => ThreadStatus::Error,
            _ => return None,
        })
    }
}

/// A thread as clients see it.
#[derive(Clone, Debug)]
pub(crate) struct ThreadView {
    pub record: ThreadRecord,
    pub status: ThreadStatus,
    /// The latest checkpoint, none before the first run.
    pub latest: Option<Checkpoint>,
    /// The state at the latest checkpoint.
    pub values: Option<Json>,
    /// The graph the thread runs, when known.
    pub graph: Option<String>,
    /// Why its last run failed, when the thread is in error.
    pub failure: Option<String>,
}

/// The state at one checkpoint.
#[derive(Clone)]
pub(crate) struct StateView {
    pub values: Json,
    pub record: Checkpoint,
    pub graph: Arc<Graph>,
}

/// Which threads a search returns.
#[derive(Clone, Debug, Default)]
pub(crate) struct ThreadFilter {
    /// Every key of it equals the thread's metadata's (JSON containment).
    pub metadata: Option<Json>,
    /// Contained in the thread's latest values.
    pub values: Option<Json>,
    pub status: Option<ThreadStatus>,
    pub ids: Option<Vec<String>>,
}

impl Host {
    /// Creates a thread (a new id when none is given). An existing id is a conflict,
    /// or, with `do_nothing`, the thread as it is.
    pub(crate) async fn create_thread(
        &self,
        id: Option<String>,
        metadata: Json,
        do_nothing: bool,
    ) -> Result<ThreadView, HostError> {
        self.closing()?;
        let id = id.unwrap_or_else(new_id);
        check_id(&id)?;
        let store = &self.inner.store;
        if store.get_thread(&id).await?.is_some() || store.latest(&id).await?.is_some() {
            if do_nothing {
                return self.thread(&id).await;
            }
            return Err(HostError::Conflict(format!("thread `{id}` already exists")));
        }
        let now = now_ms();
        store
            .put_thread(&ThreadRecord {
                id: id.clone(),
                created_ms: now,
                updated_ms: now,
                metadata: object_or_empty(metadata),
            })
            .await?;
        self.thread(&id).await
    }

    /// A thread: its catalog entry, or (for one run only from the command line) one
    /// made from its checkpoints.
    pub(crate) async fn thread(&self, id: &str) -> Result<ThreadView, HostError> {
        let store = &self.inner.store;
        let latest = store.latest(id).await?;
        let record = match (store.get_thread(id).await?, &latest) {
            (Some(r), _) => r,
            (None, Some(l)) => {
                let first = store.load(id).await?.first().map_or(l.at_ms, |r| r.at_ms);
                ThreadRecord {
                    id: id.to_string(),
                    created_ms: first,
                    updated_ms: l.at_ms,
                    metadata: json!({}),
                }
            }
            (None, None) => {
                return Err(HostError::NotFound(format!("thread `{id}` not found")));
            }
        };
        self.view(record, latest).await
    }

    async fn view(
        &self,
        record: ThreadRecord,
        latest: Option<Checkpoint>,
    ) -> Result<ThreadView, HostError> {
        let busy = !self.in_flight(&record.id).await.is_empty();
        let graph = latest.as_ref().and_then(|l| self.graph_of(l).ok());
        let status = match (&latest, busy) {
            (_, true) => ThreadStatus::Busy,
            // Stopped by a cancel, it waits to go on as a paused one does: LangGraph
            // says `interrupted` of both.
            (Some(l), _) if matches!(l.status, Status::Interrupted | Status::Stopped) => {
                ThreadStatus::Interrupted
            }
            (Some(l), _) if l.status == Status::Failed => ThreadStatus::Error,
            // Ended by a limit no route takes: LangGraph's recursion error.
            (Some(l), _)
                if l.ended_by_limit()
                    && graph.as_ref().is_some_and(|g| g.limits.on_limit.is_none()) =>
            {
                ThreadStatus::Error
            }
            _ => ThreadStatus::Idle,
        };
        let values = match (&latest, &graph) {
            (Some(_), Some(g)) => Some(self.threads(g.clone()).state(&record.id, None).await?.0),
            _ => None,
        };
        let failure = match (status, &latest) {
            (ThreadStatus::Error, Some(l)) if l.status == Status::Failed => Some(
                l.error
                    .as_ref()
                    .and_then(|e| e.get("message"))
                    .and_then(Json::as_str)
                    .unwrap_or("the run failed")
                    .to_string(),
            ),
            (ThreadStatus::Error, Some(_)) => Some(super::drive::LIMIT_ERROR.to_string()),
            _ => None,
        };
        Ok(ThreadView {
            failure,
            graph: graph.map(|g| g.name.clone()).or_else(|| {
                record
                    .metadata
                    .get("graph_id")
                    .and_then(Json::as_str)
                    .map(str::to_string)
            }),
            record,
            status,
            latest,
            values,
        })
    }

    /// Threads that pass `filter`, newest first (or by `sort`), `limit` from `offset`.
    pub(crate) async fn search_threads(
        &self,
        filter: &ThreadFilter,
        sort: Option<(&str, bool)>,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ThreadView>, HostError> {
        let mut records: Vec<ThreadRecord> = self
            .inner
            .store
            .threads()
            .await?
            .into_iter()
            .filter(|t| filter.ids.as_ref().is_none_or(|ids| ids.contains(&t.id)))
            .filter(|t| {
                filter
                    .metadata
                    .as_ref()
                    .is_none_or(|m| contains(&t.metadata, m))
            })
            .collect();
        let (key, ascending) = sort.unwrap_or(("created_at", false));
        records.sort_by(|a, b| {
            let o = match key {
                "thread_id" => a.id.cmp(&b.id),
                "updated_at" | "state_updated_at" => a.updated_ms.cmp(&b.updated_ms),
                _ => a.created_ms.cmp(&b.created_ms),
            };
            if ascending { o } else { o.reverse() }
        });
        let needs_view = filter.status.is_some() || filter.values.is_some();
        let mut out = Vec::new();
        let mut skipped = 0;
        for record in records {
            if out.len() >= limit {
                break;
            }
            if !needs_view && skipped < offset {
                skipped += 1;
                continue;
            }
            let latest = self.inner.store.latest(&record.id).await?;
            let view = self.view(record, latest).await?;
            if filter.status.is_some_and(|s| s != view.status)
                || filter
                    .values
                    .as_ref()
                    .is_some_and(|v| !view.values.as_ref().is_some_and(|have| contains(have, v)))
            {
                continue;
            }
            if skipped < offset {
                skipped += 1;
                continue;
            }
            out.push(view);
        }
        if key == "status" {
            out.sort_by_key(|v| v.status.name());
        }
        Ok(out)
    }

    /// Merges `metadata` into a thread's.
    pub(crate) async fn patch_thread(
        &self,
        id: &str,
        metadata: Json,
    ) -> Result<ThreadView, HostError> {
        let view = self.thread(id).await?;
        let mut record = view.record;
        if let (Json::Object(have), Json::Object(new)) = (&mut record.metadata, metadata) {
            have.extend(new);
        }
        record.updated_ms = now_ms();
        self.inner.store.put_thread(&record).await?;
        self.thread(id).await
    }

    /// Deletes a thread with its checkpoints and runs. A thread with runs in flight is
    /// refused: cancel them first.
    pub(crate) async fn delete_thread(&self, id: &str) -> Result<(), HostError> {
        self.thread(id).await?;
        self.refuse_busy(id, "deleted").await?;
        self.inner.store.delete_thread(id).await?;
        // A paused thread's servers (its browser) go with it.
        let tools = self.inner.tools.clone();
        let thread = id.to_string();
        tokio::spawn(async move { tools.stop_thread(&thread).await });
        Ok(())
    }

    /// The bytes and MIME type of a blob a tool's result was stored as
    /// (`{"blob": "sha256:..."}` in state: a screenshot).
    pub(crate) fn blob(&self, reference: &str) -> Result<(Vec<u8>, &'static str), HostError> {
        self.inner
            .tools
            .blob(reference)
            .ok_or_else(|| HostError::NotFound(format!("no blob `{reference}`")))
    }

    /// Copies a thread (its metadata and every checkpoint, or those up to `upto`) into a
    /// new one.
    pub(crate) async fn copy_thread(
        &self,
        id: &str,
        upto: Option<u64>,
    ) -> Result<ThreadView, HostError> {
        self.closing()?;
        let view = self.thread(id).await?;
        let new = new_id();
        let store = &self.inner.store;
        let thread: Arc<str> = Arc::from(new.as_str());
        let records = store.load(id).await?;
        if let Some(seq) = upto
            && !records.iter().any(|r| r.seq == seq)
        {
            return Err(HostError::NotFound(format!(
                "thread `{id}` has no checkpoint number {seq}"
            )));
        }
        // Up to a checkpoint: a fork, which a run with no input goes on from (a
        // mid-run checkpoint resumes at its next node).
        let copy = records
            .into_iter()
            .filter(|r| upto.is_none_or(|seq| r.seq <= seq))
            .map(|mut r| {
                r.thread = thread.clone();
                r
            })
            .collect();
        store.append_all(copy).await?;
        let now = now_ms();
        let mut metadata = view.record.metadata;
        if let Json::Object(m) = &mut metadata
            && m.contains_key("thread_id")
        {
            m.insert("thread_id".into(), json!(new));
        }
        store
            .put_thread(&ThreadRecord {
                id: new.clone(),
                created_ms: now,
                updated_ms: now,
                metadata,
            })
            .await?;
        self.thread(&new).await
    }

    /// A thread's latest checkpoint, none before its first run (or for no thread): where
    /// it stands, read without its state.
    pub(crate) async fn latest(&self, id: &str) -> Result<Option<Checkpoint>, HostError> {
        Ok(self.inner.store.latest(id).await?)
    }

    /// A thread's checkpoint `seq`, read without its state; none when it has none.
    pub(crate) async fn checkpoint(
        &self,
        id: &str,
        seq: u64,
    ) -> Result<Option<Checkpoint>, HostError> {
        Ok(self
            .inner
            .store
            .load_from(id, seq)
            .await?
            .into_iter()
            .next()
            .filter(|r| r.seq == seq))
    }

    /// The state at the latest checkpoint, or at checkpoint `seq`; none for a thread
    /// with no checkpoints.
    pub(crate) async fn state(
        &self,
        id: &str,
        seq: Option<u64>,
    ) -> Result<Option<StateView>, HostError> {
        let view = self.thread(id).await?;
        let Some(latest) = view.latest else {
            return match seq {
                Some(seq) => Err(HostError::NotFound(format!(
                    "thread `{id}` has no checkpoint {seq}"
                ))),
                None => Ok(None),
            };
        };
        let graph = self.graph_of(&latest)?;
        let (values, record) = self.threads(graph.clone()).state(id, seq).await?;
        Ok(Some(StateView {
            values,
            record,
            graph,
        }))
    }

    /// The state at each checkpoint, newest first: `limit` of them before checkpoint
    /// `before` (or the latest).
    pub(crate) async fn history(
        &self,
        id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StateView>, HostError> {
        let view = self.thread(id).await?;
        let Some(latest) = view.latest else {
            return Ok(Vec::new());
        };
        let graph = self.graph_of(&latest)?;
        Ok(self
            .threads(graph.clone())
            .states(id, before, limit)
            .await?
            .into_iter()
            .map(|(values, record)| StateView {
                values,
                record,
                graph: graph.clone(),
            })
            .collect())
    }

    /// A person's write to a thread's state (see [`crate::run::Threads::update`]),
    /// refused while the thread has runs in flight. A thread with no checkpoint takes
    /// the write under the graph its metadata names (`graph_id`).
    pub(crate) async fn update_state(
        &self,
        id: &str,
        at: Option<u64>,
        values: Json,
        as_node: Option<&str>,
    ) -> Result<Checkpoint, HostError> {
        self.closing()?;
        let mut view = self.thread(id).await?;
        self.refuse_busy(id, "updated").await?;
        // From an earlier checkpoint: the update forks the thread there, through the
        // graph that wrote it.
        if let Some(seq) = at.filter(|&a| view.latest.as_ref().is_none_or(|l| l.seq != a)) {
            let record = self.checkpoint(id, seq).await?.ok_or_else(|| {
                HostError::NotFound(format!("thread `{id}` has no checkpoint {seq}"))
            })?;
            view.latest = Some(record);
        }
        let graph = match &view.latest {
            Some(latest) => self.graph_of(latest)?,
            None => match &view.graph {
                Some(g) => self.current_graph(g)?,
                None => {
                    return Err(HostError::Conflict(format!(
                        "thread `{id}` has no graph yet: no run has been made on it, and its metadata names no `graph_id`"
                    )));
                }
            },
        };
        let record = self
            .threads(graph)
            .update_at(id, at, values, as_node)
            .await?;
        if let Some(mut t) = self.inner.store.get_thread(id).await? {
            t.updated_ms = now_ms();
            self.inner.store.put_thread(&t).await?;
        }
        Ok(record)
    }

    async fn refuse_busy(&self, id: &str, what: &str) -> Result<(), HostError> {
        let runs = self.in_flight(id).await;
        if runs.is_empty() {
            return Ok(());
        }
        Err(HostError::Conflict(format!(
            "thread `{id}` has runs in flight ({}); it can be {what} when they end, or after cancelling them",
            runs.iter()
                .map(|r| format!("`{r}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// The graph version a checkpoint was written by: loaded by hash, else the graph
    /// now served from the same file.
    pub(crate) fn graph_of(&self, record: &Checkpoint) -> Result<Arc<Graph>, HostError> {
        if let Some(g) = self.inner.graphs.version(&record.graph_hash) {
            return Ok(g);
        }
        self.inner
            .graphs
            .by_path(&record.graph)
            .and_then(|s| s.current)
            .ok_or_else(|| {
                HostError::Conflict(format!(
                    "thread `{}` was written by the graph file `{}`, which this server does not serve",
                    record.thread, record.graph
                ))
            })
    }
}

/// Thread ids go into URLs and lock-file names: printable, no slashes, not too long.
pub(super) fn check_id(id: &str) -> Result<(), HostError> {
    if id.is_empty()
        || id.len() > 200
        || id
            .chars()
            .any(|c| c.is_control() || c == '/' || c == '\\' || c == '?' || c == '#')
    {
        return Err(HostError::Invalid(format!(
            "thread id `{}` is not usable: an id is 1 to 200 printable characters without `/`, `\\`, `?` or `#`",
            id.escape_debug()
        )));
    }
    Ok(())
}

fn object_or_empty(v: Json) -> Json {
    match v {
        Json::Object(_) => v,
        _ => json!({}),
    }
}

/// JSON containment, as Postgres's `@>`: every key of `want` is in `have` with a value
/// that contains `want`'s; arrays contain each element of `want`'s.
pub(crate) fn contains(have: &Json, want: &Json) -> bool {
    match (have, want) {
        (Json::Object(h), Json::Object(w)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| contains(hv, wv))),
        (Json::Array(h), Json::Array(w)) => w.iter().all(|wv| h.iter().any(|hv| contains(hv, wv))),
        _ => have == want,
    }
}
