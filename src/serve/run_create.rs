//! A run's request body as the SDKs send it ([`RunCreate`]), checked option by option
//! into what the host takes ([`NewRun`]) before anything is created: a refusal names
//! the field and changes nothing.

use super::error::{ApiError, ApiResult};
use super::modes::Modes;
use super::stream;
use super::threads::CheckpointRef;
use super::wire;
use crate::graph::Graph;
use crate::host::{
    Bound, Command, Multitask, RunRequest, RunRules, both_given, check_values, constants_of,
};
use crate::store::Checkpoint;
use axum::http::StatusCode;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;

/// A run's request body, as the SDKs send it. Fields Switchyard ignores on purpose:
/// `feedback_keys`, `durability`, `checkpoint_during`, `langsmith_tracer`,
/// `stream_subgraphs` (graphs have no subgraphs).
#[derive(Deserialize, Default)]
pub(super) struct RunCreate {
    #[serde(default)]
    pub(super) assistant_id: Option<String>,
    #[serde(default)]
    input: Option<Json>,
    #[serde(default)]
    command: Option<CommandIn>,
    #[serde(default)]
    metadata: Option<Json>,
    #[serde(default)]
    config: Option<Json>,
    /// The graph's constants' values for this run, as `config.configurable` gives them.
    #[serde(default)]
    context: Option<Json>,
    #[serde(default)]
    stream_mode: Option<Json>,
    #[serde(default)]
    stream_resumable: Option<bool>,
    #[serde(default)]
    multitask_strategy: Option<String>,
    #[serde(default)]
    if_not_exists: Option<String>,
    #[serde(default)]
    on_disconnect: Option<String>,
    #[serde(default)]
    on_completion: Option<String>,
    #[serde(default)]
    interrupt_before: Option<Json>,
    #[serde(default)]
    interrupt_after: Option<Json>,
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint: Option<CheckpointRef>,
    #[serde(default)]
    after_seconds: Option<f64>,
    #[serde(default)]
    webhook: Option<String>,
    /// Switchyard's own: node executions allowed in this run (as `recursion_limit`).
    #[serde(default)]
    max_steps: Option<u64>,
}

#[derive(Deserialize, Default)]
struct CommandIn {
    /// Present, even as null: an answer (null lets a stop or breakpoint go on).
    #[serde(default, deserialize_with = "present")]
    resume: Option<Json>,
    #[serde(default)]
    update: Option<Json>,
    #[serde(default)]
    goto: Option<Json>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Json>, D::Error> {
    Json::deserialize(d).map(Some)
}

/// A run request that passed every check: what `Host::create_run` takes, and how its
/// response streams.
pub(super) struct NewRun {
    pub(super) assistant: String,
    pub(super) request: RunRequest,
    pub(super) metadata: Json,
    pub(super) create_thread: bool,
    pub(super) modes: Modes,
    pub(super) cancel_on_disconnect: bool,
}

impl RunCreate {
    /// [`RunCreate::check`] against the current version of the graph the body names,
    /// under `host`'s rules.
    pub(super) async fn check_on<'s>(
        self,
        host: &crate::host::Host,
        stateless: bool,
        standing: impl FnOnce(Option<u64>) -> BoxFuture<'s, Option<Checkpoint>>,
    ) -> ApiResult<NewRun> {
        let bound = match self.assistant_id.as_deref() {
            Some(a) => host.bind(a).await?,
            None => Bound::default(),
        };
        let graph = host.graphs().get(&bound.graph).and_then(|g| g.current);
        self.check(
            stateless,
            standing,
            graph.as_deref(),
            host.run_rules(),
            &bound,
        )
        .await
    }

    /// Checks the body for a run on a thread (`stateless`: a thread of its own) that
    /// stands at what `standing` reads (its record at the checkpoint the run goes from,
    /// none: its latest; read only once the options are known to be right), of
    /// `graph` (the current version of the assistant named, whose message fields take
    /// LangChain's messages).
    pub(super) async fn check<'s>(
        self,
        stateless: bool,
        standing: impl FnOnce(Option<u64>) -> BoxFuture<'s, Option<Checkpoint>>,
        graph: Option<&Graph>,
        rules: RunRules,
        bound: &Bound,
    ) -> ApiResult<NewRun> {
        if self.assistant_id.is_none() {
            return Err(ApiError::invalid(
                "`assistant_id` is required: the graph to run",
            ));
        }
        let assistant = bound.graph.clone();
        let names = stream::mode_names(self.stream_mode.as_ref().unwrap_or(&Json::Null))
            .map_err(ApiError::invalid)?;
        let modes = Modes::parse(&names).map_err(ApiError::invalid)?;
        let multitask = multitask(self.multitask_strategy.as_deref(), rules)?;
        let create_thread = choice(
            "if_not_exists",
            self.if_not_exists.as_deref(),
            &[("reject", false), ("create", true)],
            "is not `create` or `reject`",
        )?;
        let cancel_on_disconnect = choice(
            "on_disconnect",
            self.on_disconnect.as_deref(),
            &[("continue", false), ("cancel", true)],
            "is not `cancel` or `continue`",
        )?;
        let keep = choice(
            "on_completion",
            self.on_completion.as_deref(),
            &[
                ("delete", false),
                ("complete", false),
                ("keep", true),
                ("continue", true),
            ],
            "is not `delete` or `keep`",
        )?;
        self.refuse_unsupported()?;
        let command = self.command.unwrap_or_default();
        let goto = match &command.goto {
            None | Some(Json::Null) => None,
            Some(Json::String(node)) => Some(node.clone()),
            // LangGraph takes a list of destinations; one is what a run can go to.
            Some(Json::Array(nodes)) if nodes.len() == 1 && nodes[0].is_string() => {
                nodes[0].as_str().map(str::to_string)
            }
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "command.goto is a node's name (or `__end__`), not `{other}`: a run goes to one node at a time"
                )));
            }
        };
        // Refused now, whatever the thread is doing (a paused one would take a goto
        // alone as nothing to do).
        if let (Some(g), Some(node)) = (graph, &goto) {
            g.goto_target(node)
                .map_err(|e| ApiError::invalid(format!("command.goto is refused: {e}")))?;
        }
        if stateless && goto.is_some() && command.resume.is_some() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "a resume needs a thread: POST /threads/{thread_id}/runs",
            ));
        }
        if stateless && command.resume.is_some() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "a resume needs a thread: POST /threads/{thread_id}/runs",
            ));
        }
        let at = self
            .checkpoint_id
            .or(self.checkpoint.and_then(|c| c.checkpoint_id));
        // A run from one of the thread's checkpoints: an earlier one forks the thread
        // there (whether the thread has it is the host's to say, when the run goes).
        let checkpoint = match at {
            None => None,
            Some(_) if stateless => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "a run from a checkpoint needs a thread: POST /threads/{thread_id}/runs",
                ));
            }
            // As LangGraph's server answers an id that is no checkpoint's form.
            Some(at) => Some(
                wire::parse_checkpoint_id(&at)
                    .ok_or_else(|| ApiError::invalid(format!("Invalid checkpoint ID: `{at}`")))?,
            ),
        };
        // An answer by interrupt id is read against the checkpoint the run goes from.
        let standing = standing(checkpoint).await;
        let (config, constants) = configure(self.config, self.context.as_ref(), bound, graph)?;
        let max_steps = max_steps(self.max_steps, &config)?;
        let resume = command.resume.map(|r| answer_by_id(r, standing.as_ref()));
        let mut input = self.input;
        let mut update = command.update.filter(|u| !u.is_null());
        if let Some(g) = graph {
            if let Some(i) = &mut input {
                wire::input_messages(i, g);
                wire::check_content(i, g).map_err(|e| ApiError::invalid(format!("input: {e}")))?;
                // Refused now, whatever the thread is doing: a run queued behind others,
                // or one that writes an update first, is otherwise checked only when it
                // starts (after the update is written, or the runs in its way cancelled).
                if let Json::Object(fields) = i {
                    g.check_input(fields)
                        .map_err(|e| ApiError::invalid(format!("the input is refused: {e}")))?;
                }
            }
            if let Some(u) = &mut update {
                wire::input_messages(u, g);
                wire::check_content(u, g)
                    .map_err(|e| ApiError::invalid(format!("command.update: {e}")))?;
            }
        }
        let metadata = match self.metadata {
            // A made assistant's metadata under the run's own, as LangGraph gives it.
            None | Some(Json::Null) => Json::Object(bound.metadata.clone()),
            Some(Json::Object(m)) => {
                let mut all = bound.metadata.clone();
                all.extend(m);
                Json::Object(all)
            }
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "`metadata` is an object, not `{other}`"
                )));
            }
        };
        let request = RunRequest {
            input,
            checkpoint,
            command: (resume.is_some() || update.is_some() || goto.is_some()).then_some(Command {
                resume,
                update,
                goto,
            }),
            max_steps,
            multitask_strategy: multitask,
            config,
            configured: constants,
            assistant_id: (bound.id != bound.graph).then(|| bound.id.clone()),
            context: self.context.filter(|c| !c.is_null()),
            stream_mode: names,
            stream_resumable: self.stream_resumable.unwrap_or(false),
            temporary: false,
            on_completion_keep: keep,
            resumed_after_restart: false,
        };
        Ok(NewRun {
            assistant,
            request,
            metadata,
            create_thread,
            modes,
            cancel_on_disconnect,
        })
    }

    /// The options LangGraph takes that Switchyard refuses, each with what to do
    /// instead.
    fn refuse_unsupported(&self) -> ApiResult<()> {
        for (name, v) in [
            ("interrupt_before", &self.interrupt_before),
            ("interrupt_after", &self.interrupt_after),
        ] {
            if v.as_ref()
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
            {
                return Err(ApiError::invalid(format!(
                    "{name} is not supported: declare `breakpoint = \"{}\"` on the node in the graph file",
                    if name == "interrupt_before" {
                        "before"
                    } else {
                        "after"
                    }
                )));
            }
        }
        if self.after_seconds.is_some_and(|s| s > 0.0) {
            return Err(ApiError::invalid(
                "after_seconds is not supported: runs start when their thread and a slot are free",
            ));
        }
        if self.webhook.as_ref().is_some_and(|w| !w.is_empty()) {
            return Err(ApiError::invalid(
                "webhook is not supported: follow the run with /join or its stream",
            ));
        }
        Ok(())
    }
}

fn multitask(given: Option<&str>, rules: RunRules) -> ApiResult<Multitask> {
    match given {
        // LangGraph's default: a second run on a busy thread waits its turn.
        None if rules == RunRules::LangGraph => Ok(Multitask::Enqueue),
        None => Ok(Multitask::Reject),
        Some(m) => Multitask::parse(m).ok_or_else(|| {
            ApiError::invalid(format!(
                "multitask_strategy `{m}` is not one of reject, enqueue, interrupt, rollback"
            ))
        }),
    }
}

/// One of an option's words (`choices`, with what each means; none given means the
/// first), or the refusal `refused` completes.
fn choice(
    name: &str,
    given: Option<&str>,
    choices: &[(&str, bool)],
    refused: &str,
) -> ApiResult<bool> {
    let Some(given) = given else {
        return Ok(choices[0].1);
    };
    choices
        .iter()
        .find(|(word, _)| *word == given)
        .map(|(_, v)| *v)
        .ok_or_else(|| ApiError::invalid(format!("{name} `{given}` {refused}")))
}

/// Node executions allowed in the run: Switchyard's own `max_steps`, else LangGraph's
/// `config.recursion_limit`.
fn max_steps(given: Option<u64>, config: &Json) -> ApiResult<Option<u64>> {
    let max_steps = match (given, config.get("recursion_limit")) {
        (Some(n), _) => Some(n),
        (None, None | Some(Json::Null)) => None,
        (None, Some(v)) => Some(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            ApiError::invalid(format!(
                "config.recursion_limit is `{v}`, not a positive integer"
            ))
        })?),
    };
    if max_steps == Some(0) {
        return Err(ApiError::invalid(
            "max_steps is 0: a run takes at least one step",
        ));
    }
    Ok(max_steps)
}

/// An answer keyed by the interrupt's id, as LangGraph allows, is the answer. The
/// runner picks among the interrupts of parallel branches by `reference`: an answer to
/// one of those that carries none is given its interrupt's.
fn answer_by_id(r: Json, latest: Option<&Checkpoint>) -> Json {
    match (&r, latest) {
        (Json::Object(m), Some(l)) if m.len() == 1 => {
            let pending = wire::interrupts_of(l);
            let Some((k, i)) = pending
                .iter()
                .enumerate()
                .find_map(|(k, i)| Some((k, m.get(i["id"].as_str()?)?)))
            else {
                return r;
            };
            let mut answer = i.clone();
            let reference = l.pending.as_ref().and_then(|p| {
                if k == 0 {
                    p.reference.clone()
                } else {
                    p.others.get(k - 1)?.reference.clone()
                }
            });
            if let (Json::Object(a), Some(reference)) = (&mut answer, reference)
                && k > 0
                && !a.contains_key("reference")
            {
                a.insert("reference".into(), Json::String(reference));
            }
            answer
        }
        _ => r,
    }
}

/// The run's config: its own over its assistant's, `configurable` merged key by key
/// (the run's `context` giving it as `config.configurable` would), and the graph's
/// constants' values among them, checked.
fn configure(
    config: Option<Json>,
    context: Option<&Json>,
    bound: &Bound,
    graph: Option<&Graph>,
) -> ApiResult<(Json, serde_json::Map<String, Json>)> {
    let mut config = match config {
        None | Some(Json::Null) => serde_json::Map::new(),
        Some(Json::Object(c)) => c,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "`config` is an object, not `{other}`"
            )));
        }
    };
    let own = match config.remove("configurable") {
        None | Some(Json::Null) => serde_json::Map::new(),
        Some(Json::Object(c)) => c,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "config.configurable is an object, not `{other}`"
            )));
        }
    };
    let context = match context {
        None | Some(Json::Null) => serde_json::Map::new(),
        Some(Json::Object(c)) => c.clone(),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "`context` is an object, not `{other}`"
            )));
        }
    };
    if both_given(Some(&own), &context, graph) {
        // As LangGraph's server answers it.
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            crate::host::CONFIG_AND_CONTEXT,
        ));
    }
    let mut values = bound.configurable.clone();
    if let Some(g) = graph {
        check_values(
            g,
            &bound.configurable,
            "the assistant's config.configurable",
            false,
        )?;
        check_values(g, &own, "config.configurable", false)?;
        check_values(g, &context, "context", true)?;
    }
    values.extend(own);
    values.extend(context);
    for (k, v) in &bound.config {
        config.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let constants = graph.map(|g| constants_of(g, &values)).unwrap_or_default();
    if !values.is_empty() {
        config.insert("configurable".into(), Json::Object(values));
    }
    Ok((Json::Object(config), constants))
}
