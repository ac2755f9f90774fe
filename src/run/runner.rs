//! The interpreter: runs a checked [`Graph`] node by node, checkpointing after each.
//!
//! A step: check stop and limits; run the node's kind; apply its writes and then its
//! `set` expressions through the reducers; pick the next node from its edges on the new
//! state; append a checkpoint record; emit events. An interrupt pauses the run with its
//! record saved; a resume validates the answer, writes it and routes on, so no node
//! runs twice because of a resume.

use super::checkpoint::{Checkpoint, Checkpointer, Pending, Status, StoreError, Write};
use super::event::Event;
use super::kinds::llm::{LlmClient, NoLlm};
use super::kinds::mcp::{NoTools, ToolClient};
use super::kinds::{self, Step};
use super::scope::{Scope, from_json, to_json};
use super::state::State;
use crate::graph::{Body, ExprId, Graph, Next, Node, NodeId, Target, ValueTpl};
use crate::spec::Breakpoint;
use minijinja::Value;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// How a call to [`Runner::start`] or [`Runner::resume`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The run reached a finalize node or END.
    Finished {
        outcome: String,
        response: Option<String>,
        steps: u64,
    },
    /// The run is paused for a person; resume the thread with an answer.
    Interrupted { node: String, payload: Json },
    /// A stop request was honoured at a node boundary; resume the thread to go on.
    Stopped { next: Option<String>, steps: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("thread `{0}` has no checkpoints")]
    UnknownThread(String),
    #[error(
        "thread `{thread}` is {status}; only a paused (interrupted or stopped) thread can be resumed"
    )]
    NotPaused {
        thread: String,
        status: &'static str,
    },
    #[error("thread `{thread}` is paused at `{node}`; resume it instead of starting a new run")]
    Paused { thread: String, node: String },
    #[error(
        "thread `{thread}` is paused by a stop or a breakpoint, which takes no payload; resume it without one"
    )]
    UnexpectedPayload { thread: String },
    #[error("the interrupt `{node}` needs a payload to resume")]
    MissingPayload { node: String },
    #[error("the payload does not fit the resume schema of `{node}`: {errors}")]
    InvalidPayload { node: String, errors: String },
    #[error(
        "the payload's reference `{got}` does not match the pending interrupt's reference `{expected}`"
    )]
    WrongReference { expected: String, got: String },
    #[error(
        "the graph file changed since thread `{thread}` paused: {why}; resume with --force to go on anyway"
    )]
    GraphChanged { thread: String, why: String },
    #[error("the input is not an object of state fields: {0}")]
    Input(String),
    #[error("node `{node}` failed: {message}")]
    Node { node: String, message: String },
    #[error(
        "the next node of thread `{thread}`, `{node}`, is no longer in the graph; fork the thread at an earlier checkpoint (`switchyard history`) and resume the fork"
    )]
    NodeGone { thread: String, node: String },
    #[error("the answer to `{node}` cannot be taken: {message}; nothing changed, answer again")]
    AnswerRefused { node: String, message: String },
    #[error("thread `{thread}` has no checkpoint {seq}")]
    NoSuchCheckpoint { thread: String, seq: u64 },
    #[error("thread `{0}` already exists")]
    ThreadExists(String),
}

/// Asks a run to stop at the next node boundary.
#[derive(Clone, Default, Debug)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

/// Runs one graph against one checkpoint store.
pub struct Runner {
    graph: Arc<Graph>,
    /// The graph file and its hash, as every checkpoint records them.
    graph_path: Arc<str>,
    graph_hash: Arc<str>,
    store: Arc<dyn Checkpointer>,
    llm: Arc<dyn LlmClient>,
    tools: Arc<dyn ToolClient>,
    events: Option<UnboundedSender<Event>>,
    stop: StopHandle,
    max_steps: Option<u64>,
}

/// What a node's work sees: the graph, the state, its node, the clients.
pub(crate) struct NodeCx<'a> {
    pub(crate) graph: &'a Arc<Graph>,
    pub(crate) state: &'a State,
    pub(crate) node: &'a Node,
    pub(crate) run: Value,
    pub(crate) llm: &'a dyn LlmClient,
    pub(crate) tools: &'a dyn ToolClient,
    /// The run's store, for an llm node's cache.
    pub(crate) store: &'a dyn Checkpointer,
    events: &'a Option<UnboundedSender<Event>>,
}

impl NodeCx<'_> {
    fn scope(&self, result: Option<Value>) -> Value {
        Value::from_object(Scope {
            graph: self.graph.clone(),
            values: self.state.values.clone(),
            run: self.run.clone(),
            result,
        })
    }

    /// Evaluates a condition (`only_if`, a policy rule's `when`) as minijinja sees it,
    /// without copying what it reads into JSON.
    pub(crate) fn eval(&self, id: ExprId) -> Result<Value, String> {
        self.graph
            .eval(id, self.scope(None))
            .map_err(|e| jinja_error(&e))
    }

    /// Evaluates to JSON, with `result` bound.
    pub(crate) fn eval_with(&self, id: ExprId, result: Option<Value>) -> Result<Json, String> {
        let v = self
            .graph
            .eval(id, self.scope(result))
            .map_err(|e| jinja_error(&e))?;
        to_json(&v)
    }

    pub(crate) fn render(&self, name: &str) -> Result<String, String> {
        self.graph
            .render(name, self.scope(None))
            .map_err(|e| jinja_error(&e))
    }

    pub(crate) fn value(&self, tpl: &ValueTpl) -> Result<Json, String> {
        Ok(match tpl {
            ValueTpl::Expr(e) => self.eval_with(*e, None)?,
            ValueTpl::Literal(l) => l.clone(),
            ValueTpl::Array(items) => Json::Array(
                items
                    .iter()
                    .map(|i| self.value(i))
                    .collect::<Result<_, _>>()?,
            ),
            ValueTpl::Object(entries) => Json::Object(
                entries
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.value(v)?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }

    pub(crate) fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(tx) = self.events {
            let _ = tx.send(make());
        }
    }
}

fn jinja_error(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    }
}

/// A thread being driven.
#[derive(Clone)]
struct Live {
    thread: Arc<str>,
    seq: u64,
    run: u64,
    step: u64,
    state: State,
    tokens: u64,
    /// Wall time of this run before the current segment (earlier segments were paused).
    elapsed_before: Duration,
    started: Instant,
    /// A limit was reached and the run is on its way to `on_limit`.
    limited: bool,
    /// `run.error` as expressions see it: set when a failure takes `on_error`, seen by
    /// the node the run goes to, cleared when that node completes.
    error: Json,
    /// The node whose `before` breakpoint was just answered: it runs without pausing again.
    past_breakpoint: Option<NodeId>,
}

impl Live {
    fn elapsed(&self) -> Duration {
        self.elapsed_before + self.started.elapsed()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Runner {
    pub fn new(graph: Arc<Graph>, store: Arc<dyn Checkpointer>) -> Self {
        let graph_path = Arc::from(
            std::path::absolute(&graph.path)
                .unwrap_or_else(|_| graph.path.clone())
                .to_string_lossy()
                .as_ref(),
        );
        let graph_hash = Arc::from(graph.hash.as_str());
        Runner {
            graph,
            graph_path,
            graph_hash,
            store,
            llm: Arc::new(NoLlm),
            tools: Arc::new(NoTools),
            events: None,
            stop: StopHandle::default(),
            max_steps: None,
        }
    }

    #[must_use]
    pub fn with_llm(mut self, llm: Arc<dyn LlmClient>) -> Self {
        self.llm = llm;
        self
    }

    #[must_use]
    pub fn with_tools(mut self, tools: Arc<dyn ToolClient>) -> Self {
        self.tools = tools;
        self
    }

    /// Overrides the graph's `max_steps` for runs of this runner.
    #[must_use]
    pub fn with_max_steps(mut self, max_steps: Option<u64>) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Subscribes to the events of every later run: a stream of [`Event`]s.
    pub fn events(&mut self) -> UnboundedReceiver<Event> {
        let (tx, rx) = unbounded_channel();
        self.events = Some(tx);
        rx
    }

    /// The sender behind [`Runner::events`], for clients that emit events of their own
    /// (an MCP server's stderr) into the same stream.
    pub fn event_sender(&self) -> Option<UnboundedSender<Event>> {
        self.events.clone()
    }

    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(tx) = &self.events {
            let _ = tx.send(make());
        }
    }

    fn max_steps(&self) -> Option<u64> {
        self.max_steps.or(self.graph.limits.max_steps)
    }

    /// Starts a new run of the graph on a thread: the input's fields are written through
    /// their reducers (onto the thread's state when it has one), then the entry runs.
    /// When the run ends or pauses, its MCP servers are shut down.
    pub async fn start(&self, thread: &str, input: Json) -> Result<Outcome, RunError> {
        let claim = self.store.claim(thread)?;
        let outcome = self.start_run(thread, input).await;
        self.tools.shutdown().await;
        drop(claim);
        outcome
    }

    async fn start_run(&self, thread: &str, input: Json) -> Result<Outcome, RunError> {
        let Json::Object(fields) = input else {
            return Err(RunError::Input(format!(
                "expected an object, got {}",
                super::state::describe(&input)
            )));
        };
        let records = self.store.load(thread)?;
        let (mut live, _) = self.replay(thread, &records)?;
        if let Some(last) = records.last() {
            if last.status == Status::Interrupted {
                let node = last.pending.as_ref().map_or("?", |p| &*p.node).to_string();
                return Err(RunError::Paused {
                    thread: thread.into(),
                    node,
                });
            }
            live.run = last.run + 1;
        }
        // A new run starts afresh: its own limits, no failure being handled, no
        // breakpoint passed; only the state carries over.
        live.step = 0;
        live.tokens = 0;
        live.elapsed_before = Duration::ZERO;
        live.started = Instant::now();
        live.limited = false;
        live.error = Json::Null;
        live.past_breakpoint = None;
        let mut writes = Vec::new();
        for (name, value) in fields {
            let id = self.graph.field_id(&name).ok_or_else(|| {
                let hint =
                    crate::suggestion::help_for(&name, self.graph.fields.iter().map(|f| &*f.name))
                        .map(|h| format!("; {h}"))
                        .unwrap_or_default();
                RunError::Input(format!("`{name}` is not a state field{hint}"))
            })?;
            let value = Arc::new(value);
            live.state
                .write(&self.graph, id, value.clone())
                .map_err(|e| RunError::Input(e.to_string()))?;
            writes.push(Write {
                field: self.graph.field(id).name.clone(),
                value,
            });
        }
        let entry = Target::Node(self.graph.entry);
        self.record(
            &mut live,
            None,
            Some(entry),
            writes,
            Status::Running,
            None,
            None,
        )?;
        self.emit(|| Event::RunStarted {
            thread: live.thread.clone(),
            graph: self.graph.name.clone(),
            run: live.run,
            resumed: false,
        });
        self.drive(live, entry).await
    }

    /// Resumes a paused thread: an interrupted one with the person's answer, a stopped
    /// (or crashed) one with none. When the run ends or pauses again, its MCP servers
    /// are shut down.
    pub async fn resume(
        &self,
        thread: &str,
        payload: Option<Json>,
        force: bool,
    ) -> Result<Outcome, RunError> {
        let claim = self.store.claim(thread)?;
        let outcome = self.resume_run(thread, payload, force).await;
        self.tools.shutdown().await;
        drop(claim);
        outcome
    }

    async fn resume_run(
        &self,
        thread: &str,
        payload: Option<Json>,
        force: bool,
    ) -> Result<Outcome, RunError> {
        let records = self.store.load(thread)?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        let (mut live, last) = self.replay(thread, &records)?;
        let Some(last) = last else {
            return Err(RunError::UnknownThread(thread.into()));
        };
        live.elapsed_before = Duration::from_millis(last.elapsed_ms);
        let started = |live: &Live| {
            self.emit(|| Event::RunStarted {
                thread: live.thread.clone(),
                graph: self.graph.name.clone(),
                run: live.run,
                resumed: true,
            })
        };
        match last.status {
            Status::Finished | Status::Failed => Err(RunError::NotPaused {
                thread: thread.into(),
                status: last.status.name(),
            }),
            Status::Stopped | Status::Running => {
                if payload.is_some() {
                    return Err(RunError::UnexpectedPayload {
                        thread: thread.into(),
                    });
                }
                self.check_graph(thread, last, None, force)?;
                self.check_types(thread, &live, force)?;
                let next = self.target_of(thread, last.next.as_deref())?;
                started(&live);
                self.drive(live, next).await
            }
            Status::Interrupted => {
                let pending = last.pending.clone().ok_or_else(|| StoreError::Corrupt {
                    thread: thread.into(),
                    message: format!(
                        "checkpoint {} is interrupted and has no pending interrupt",
                        last.seq
                    ),
                })?;
                self.check_graph(thread, last, Some(&pending), force)?;
                self.check_types(thread, &live, force)?;
                let id =
                    self.graph
                        .node_id(&pending.node)
                        .ok_or_else(|| RunError::GraphChanged {
                            thread: thread.into(),
                            why: format!("the pending node `{}` is gone", pending.node),
                        })?;
                self.resume_interrupt(live, id, pending, payload, last.next.as_deref(), started)
                    .await
            }
        }
    }

    /// Copies a thread's history up to and including checkpoint `seq` into a new
    /// thread, which can then be resumed from there.
    pub fn fork(&self, thread: &str, seq: u64, new_thread: &str) -> Result<(), RunError> {
        if self.store.latest(new_thread)?.is_some() {
            return Err(RunError::ThreadExists(new_thread.into()));
        }
        let records = self.store.load(thread)?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        if !records.iter().any(|r| r.seq == seq) {
            return Err(RunError::NoSuchCheckpoint {
                thread: thread.into(),
                seq,
            });
        }
        let new: Arc<str> = Arc::from(new_thread);
        // A fork of a mid-run checkpoint (`running`) resumes from its `next` node, as a
        // thread whose process died there would.
        for mut r in records.into_iter().filter(|r| r.seq <= seq) {
            r.thread = new.clone();
            self.store.append(r)?;
        }
        Ok(())
    }

    /// The state of a thread at its latest checkpoint, or at checkpoint `seq`.
    pub fn state(&self, thread: &str, seq: Option<u64>) -> Result<(Json, Checkpoint), RunError> {
        let mut records = self.store.load(thread)?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        if let Some(seq) = seq {
            if !records.iter().any(|r| r.seq == seq) {
                return Err(RunError::NoSuchCheckpoint {
                    thread: thread.into(),
                    seq,
                });
            }
            records.retain(|r| r.seq <= seq);
        }
        let (live, last) = self.replay(thread, &records)?;
        let last = last.ok_or_else(|| RunError::UnknownThread(thread.into()))?;
        Ok((live.state.to_json(&self.graph), last.clone()))
    }

    /// The latest checkpoint of a thread: where it stands, its pending interrupt.
    pub fn latest(&self, thread: &str) -> Result<Checkpoint, RunError> {
        self.store
            .latest(thread)?
            .ok_or_else(|| RunError::UnknownThread(thread.into()))
    }

    /// Every checkpoint of a thread.
    pub fn history(&self, thread: &str) -> Result<Vec<Checkpoint>, RunError> {
        let records = self.store.load(thread)?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        Ok(records)
    }

    /// Rebuilds a thread's state by replaying its records' writes.
    fn replay<'r>(
        &self,
        thread: &str,
        records: &'r [Checkpoint],
    ) -> Result<(Live, Option<&'r Checkpoint>), RunError> {
        let mut state = State::new(&self.graph);
        for r in records {
            for w in &r.writes {
                // A field the graph no longer declares is skipped: its value cannot be
                // read by anything the graph now says.
                // The writes were checked when they were made; a field whose type was
                // edited since is reported by `check_types` where it matters.
                if let Some(id) = self.graph.field_id(&w.field) {
                    state
                        .replay(&self.graph, id, w.value.clone())
                        .map_err(|e| StoreError::Corrupt {
                            thread: thread.into(),
                            message: format!("replaying checkpoint {}: {e}", r.seq),
                        })?;
                }
            }
        }
        let last = records.last();
        Ok((
            Live {
                thread: Arc::from(thread),
                seq: last.map_or(0, |r| r.seq.saturating_add(1)),
                run: last.map_or(0, |r| r.run),
                step: last.map_or(0, |r| r.step),
                state,
                tokens: last.map_or(0, |r| r.tokens),
                elapsed_before: Duration::ZERO,
                started: Instant::now(),
                limited: last.is_some_and(|r| r.limited),
                error: last.and_then(|r| r.error.clone()).unwrap_or(Json::Null),
                past_breakpoint: None,
            },
            last,
        ))
    }

    fn target_of(&self, thread: &str, name: Option<&str>) -> Result<Target, RunError> {
        match name {
            None => Ok(Target::End),
            Some(n) if n == crate::spec::END => Ok(Target::End),
            Some(n) => self
                .graph
                .node_id(n)
                .map(Target::Node)
                .ok_or_else(|| RunError::NodeGone {
                    thread: thread.into(),
                    node: n.to_string(),
                }),
        }
    }

    /// Refuses to go on when a field's type was edited so that the value the thread
    /// holds no longer fits it, unless forced.
    fn check_types(&self, thread: &str, live: &Live, force: bool) -> Result<(), RunError> {
        if force {
            return Ok(());
        }
        for (i, f) in self.graph.fields.iter().enumerate() {
            let value = live.state.get(crate::graph::FieldId(i as u32));
            if !f.ty.accepts(value) {
                return Err(RunError::GraphChanged {
                    thread: thread.into(),
                    why: format!(
                        "field `{}` is now `{}`, and the thread holds {}",
                        f.name,
                        f.ty,
                        super::state::describe(value)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Refuses to go on when the graph changed under a paused thread in a way that
    /// touches where it stands, unless forced.
    fn check_graph(
        &self,
        thread: &str,
        last: &Checkpoint,
        pending: Option<&Pending>,
        force: bool,
    ) -> Result<(), RunError> {
        if force || *last.graph_hash == self.graph.hash {
            return Ok(());
        }
        let why = match pending {
            Some(p) => match self.graph.node_id(&p.node) {
                None => Some(format!("the pending node `{}` was removed", p.node)),
                Some(id) if self.graph.node(id).fingerprint != p.fingerprint => Some(format!(
                    "the pending node `{}` (its keys, edges, prompt or schema files) was edited",
                    p.node
                )),
                Some(_) => None,
            },
            None => match last.next.as_deref() {
                Some(n) if n != crate::spec::END && self.graph.node_id(n).is_none() => {
                    Some(format!("the next node `{n}` was removed"))
                }
                _ => None,
            },
        };
        match why {
            Some(why) => Err(RunError::GraphChanged {
                thread: thread.into(),
                why,
            }),
            None => Ok(()),
        }
    }

    fn run_value(&self, live: &Live) -> Value {
        from_json(json!({
            "thread_id": &*live.thread,
            "step": live.step,
            "max_steps": self.max_steps(),
            "tokens": live.tokens,
            "elapsed_ms": live.elapsed().as_millis() as u64,
            "error": live.error,
        }))
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        live: &mut Live,
        node: Option<&Node>,
        next: Option<Target>,
        writes: Vec<Write>,
        status: Status,
        pending: Option<Pending>,
        outcome: Option<String>,
    ) -> Result<(), RunError> {
        let record = Checkpoint {
            thread: live.thread.clone(),
            seq: live.seq,
            run: live.run,
            step: live.step,
            node: node.map(|n| n.name.clone()),
            next: next.map(|t| match t {
                Target::Node(n) => self.graph.node(n).name.clone(),
                Target::End => Arc::from(crate::spec::END),
            }),
            writes,
            status,
            pending,
            outcome,
            graph: self.graph_path.clone(),
            graph_hash: self.graph_hash.clone(),
            limited: live.limited,
            error: (!live.error.is_null()).then(|| live.error.clone()),
            tokens: live.tokens,
            elapsed_ms: live.elapsed().as_millis() as u64,
            at_ms: now_ms(),
        };
        self.store.append(record)?;
        live.seq += 1;
        Ok(())
    }

    /// Which limit, if any, the run has reached.
    fn limit_reached(&self, live: &Live) -> Option<&'static str> {
        let limits = &self.graph.limits;
        if self.max_steps().is_some_and(|m| live.step >= m) {
            Some("max_steps")
        } else if limits.max_wall_time.is_some_and(|m| live.elapsed() >= m) {
            Some("max_wall_time")
        } else if limits.max_tokens.is_some_and(|m| live.tokens >= m) {
            Some("max_tokens")
        } else {
            None
        }
    }

    async fn drive(&self, mut live: Live, mut next: Target) -> Result<Outcome, RunError> {
        // After a limit sends the run to `on_limit`, it may take as many steps as the
        // graph has nodes to finish; a graph that loops back instead still ends.
        let mut grace = self.graph.nodes.len() as u64;
        loop {
            let Target::Node(id) = next else {
                // A run that reached a limit ends with outcome `limit` unless a finalize
                // node on the `on_limit` path recorded another.
                let outcome = if live.limited { "limit" } else { "end" };
                return self.finish(&mut live, None, outcome.into(), None);
            };
            if self.stop.take() {
                self.record(
                    &mut live,
                    None,
                    Some(next),
                    Vec::new(),
                    Status::Stopped,
                    None,
                    None,
                )?;
                let name = self.graph.node(id).name.clone();
                self.emit(|| Event::Stopped {
                    next: Some(name.clone()),
                    step: live.step,
                });
                self.emit_finished(&live, "stopped", None, None);
                return Ok(Outcome::Stopped {
                    next: Some(name.to_string()),
                    steps: live.step,
                });
            }
            if live.limited {
                if grace == 0 {
                    return self.finish(&mut live, None, "limit".into(), None);
                }
                grace -= 1;
            } else if let Some(limit) = self.limit_reached(&live) {
                live.limited = true;
                let to = self.graph.limits.on_limit;
                self.emit(|| Event::LimitReached {
                    limit,
                    to: to.map(|t| Arc::from(self.graph.target_name(t))),
                });
                match to {
                    Some(t @ Target::Node(_)) => {
                        next = t;
                        continue;
                    }
                    _ => return self.finish(&mut live, None, "limit".into(), None),
                }
            }
            let node = self.graph.node(id);
            if node.breakpoint == Some(Breakpoint::Before)
                && live.past_breakpoint.take() != Some(id)
            {
                return self.pause(
                    &mut live,
                    node,
                    json!({ "breakpoint": "before", "node": &*node.name }),
                    Some("before"),
                    next,
                );
            }
            live.step += 1;
            // Lets a Ctrl-C handler or an event printer on the same runtime run between
            // nodes even when no node awaits anything (a loop of `set` nodes).
            tokio::task::yield_now().await;
            match self.run_node(&mut live, id).await? {
                Flow::Next(t) => next = t,
                Flow::Return(outcome) => return Ok(outcome),
            }
        }
    }

    /// Saves an interrupted record and returns the payload. `next` is where a resume
    /// goes on: the interrupt node itself (its answer completes it), the node of a
    /// `before` breakpoint, or the successor of a node with an `after` breakpoint.
    fn pause(
        &self,
        live: &mut Live,
        node: &Node,
        payload: Json,
        breakpoint: Option<&str>,
        next: Target,
    ) -> Result<Outcome, RunError> {
        let deadline_ms = match &node.body {
            Body::Interrupt(i) if breakpoint.is_none() => i
                .timeout
                .map(|t| now_ms().saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))),
            _ => None,
        };
        let pending = Pending {
            node: node.name.clone(),
            reference: payload.get("reference").map(reference_text),
            payload: payload.clone(),
            deadline_ms,
            fingerprint: node.fingerprint.clone(),
            breakpoint: breakpoint.map(String::from),
        };
        self.record(
            live,
            Some(node),
            Some(next),
            Vec::new(),
            Status::Interrupted,
            Some(pending),
            None,
        )?;
        self.emit(|| Event::Interrupted {
            node: node.name.clone(),
            payload: payload.clone(),
        });
        self.emit_finished(live, "interrupted", None, None);
        Ok(Outcome::Interrupted {
            node: node.name.to_string(),
            payload,
        })
    }

    async fn resume_interrupt(
        &self,
        mut live: Live,
        id: NodeId,
        pending: Pending,
        payload: Option<Json>,
        next: Option<&str>,
        started: impl Fn(&Live),
    ) -> Result<Outcome, RunError> {
        let node = self.graph.node(id);
        if let Some(bp) = &pending.breakpoint {
            // A breakpoint pause carries no answer: the person only lets the run go on.
            if payload.is_some() {
                return Err(RunError::UnexpectedPayload {
                    thread: live.thread.to_string(),
                });
            }
            let next = self.target_of(&live.thread, next)?;
            started(&live);
            self.emit(|| Event::Resumed {
                node: node.name.clone(),
                timed_out: false,
            });
            if bp == "before" {
                live.past_breakpoint = Some(id);
            }
            return self.drive(live, next).await;
        }
        let Body::Interrupt(body) = &node.body else {
            return Err(RunError::GraphChanged {
                thread: live.thread.to_string(),
                why: format!("`{}` is no longer an interrupt", node.name),
            });
        };
        if pending.deadline_ms.is_some_and(|d| now_ms() > d)
            && let Some(to) = body.on_timeout
        {
            started(&live);
            self.emit(|| Event::Resumed {
                node: node.name.clone(),
                timed_out: true,
            });
            self.record(
                &mut live,
                Some(node),
                Some(to),
                Vec::new(),
                Status::Running,
                None,
                None,
            )?;
            self.emit(|| Event::RouteTaken {
                from: node.name.clone(),
                to: Arc::from(self.graph.target_name(to)),
                case: Some("timeout".into()),
            });
            return self.drive(live, to).await;
        }
        let payload = payload.ok_or_else(|| RunError::MissingPayload {
            node: node.name.to_string(),
        })?;
        kinds::interrupt::check_payload(body, &payload).map_err(|errors| {
            RunError::InvalidPayload {
                node: node.name.to_string(),
                errors,
            }
        })?;
        if let (Some(expected), Some(got)) = (&pending.reference, payload.get("reference")) {
            let got = reference_text(got);
            if &got != expected {
                return Err(RunError::WrongReference {
                    expected: expected.clone(),
                    got,
                });
            }
        }
        let writes: Vec<_> = body
            .output
            .map(|f| vec![(f, payload.clone())])
            .unwrap_or_default();
        // The answer is applied to a copy: an answer the output field, `set` or the
        // route cannot take is refused like one that does not fit the schema, and the
        // thread stays paused, as it was, for another answer instead of failing. A
        // taken answer's copy becomes the run (the original goes, so the two share no
        // field that a later write would then have to copy).
        let start = Instant::now();
        let mut trial = live.clone();
        let taken = self
            .apply(&mut trial, node, payload, writes)
            .and_then(|applied| Ok((applied, self.route(&trial, node)?)));
        let (applied, next) = taken.map_err(|message| RunError::AnswerRefused {
            node: node.name.to_string(),
            message,
        })?;
        live = trial;
        started(&live);
        self.emit(|| Event::Resumed {
            node: node.name.clone(),
            timed_out: false,
        });
        match self.commit(&mut live, node, applied, next, None, start, false)? {
            Flow::Next(t) => self.drive(live, t).await,
            Flow::Return(o) => Ok(o),
        }
    }

    async fn run_node(&self, live: &mut Live, id: NodeId) -> Result<Flow, RunError> {
        let node = self.graph.node(id);
        let start = Instant::now();
        self.emit(|| Event::NodeStarted {
            node: node.name.clone(),
            step: live.step,
        });
        let cx = NodeCx {
            graph: &self.graph,
            state: &live.state,
            node,
            run: self.run_value(live),
            llm: &*self.llm,
            tools: &*self.tools,
            store: &*self.store,
            events: &self.events,
        };
        if let Some(cond) = node.only_if {
            match cx.eval(cond) {
                Ok(v) if !v.is_true() => {
                    drop(cx);
                    return match self.route(live, node) {
                        Ok(next) => self.commit(live, node, Vec::new(), next, None, start, true),
                        Err(message) => self.fail(live, node, message),
                    };
                }
                Ok(_) => {}
                Err(e) => {
                    drop(cx);
                    return self.fail(live, node, format!("only_if: {e}"));
                }
            }
        }
        let step = match &node.body {
            Body::Set => Step::done(Json::Null, Vec::new()),
            Body::Policy(p) => kinds::policy::run(&cx, p),
            Body::Finalize(f) => kinds::finalize::run(&cx, f),
            Body::Interrupt(i) => kinds::interrupt::run(&cx, i),
            Body::Llm(l) => kinds::llm::run(&cx, l).await,
            Body::Mcp(m) => kinds::mcp::run(&cx, m).await,
        };
        drop(cx);
        self.complete(live, id, step, start)
    }

    /// Applies a node's step: writes, `set`, routing, the checkpoint, events.
    fn complete(
        &self,
        live: &mut Live,
        id: NodeId,
        step: Step,
        start: Instant,
    ) -> Result<Flow, RunError> {
        let node = self.graph.node(id);
        match step {
            Step::Pause { payload } => Ok(Flow::Return(self.pause(
                live,
                node,
                payload,
                None,
                Target::Node(id),
            )?)),
            Step::Fail {
                message,
                tokens,
                writes,
            } => {
                live.tokens = live.tokens.saturating_add(tokens);
                // What the node wrote before it failed (audit records) stands, as far
                // as the fields take it.
                let mut applied = Vec::with_capacity(writes.len());
                for (field, value) in writes {
                    let value = Arc::new(value);
                    if live.state.write(&self.graph, field, value.clone()).is_ok() {
                        applied.push(Write {
                            field: self.graph.field(field).name.clone(),
                            value,
                        });
                    }
                }
                self.fail_with(live, node, message, applied)
            }
            Step::Done {
                result,
                writes,
                route,
                finish,
                tokens,
            } => {
                live.tokens = live.tokens.saturating_add(tokens);
                match self.apply(live, node, result, writes) {
                    Ok(applied) => {
                        let next = match (&finish, route) {
                            (Some(_), _) => None,
                            (None, Some(t)) => Some((t, None)),
                            (None, None) => match self.route(live, node) {
                                Ok(t) => t,
                                // The writes stand: they were valid, only the route failed.
                                Err(message) => {
                                    return self.fail_with(live, node, message, applied);
                                }
                            },
                        };
                        self.commit(live, node, applied, next, finish, start, false)
                    }
                    Err(message) => {
                        // A refused write leaves the state as it was before the node:
                        // rebuilt from the checkpoints, which only this failure pays
                        // for. (Keeping a copy instead would make every append copy
                        // its list, since the copy would share it.)
                        let records = self.store.load(&live.thread)?;
                        live.state = self.replay(&live.thread, &records)?.0.state;
                        self.fail(live, node, message)
                    }
                }
            }
        }
    }

    fn fail(&self, live: &mut Live, node: &Node, message: String) -> Result<Flow, RunError> {
        self.fail_with(live, node, message, Vec::new())
    }

    /// A failure whose `writes` (already applied to the state) are recorded with it.
    fn fail_with(
        &self,
        live: &mut Live,
        node: &Node,
        message: String,
        writes: Vec<Write>,
    ) -> Result<Flow, RunError> {
        let handled = node.on_error.is_some();
        self.emit(|| Event::NodeFailed {
            node: node.name.clone(),
            message: message.clone(),
            handled,
        });
        match node.on_error {
            Some(to) => {
                live.error = json!({ "node": &*node.name, "message": message });
                self.record(
                    live,
                    Some(node),
                    Some(to),
                    writes,
                    Status::Running,
                    None,
                    None,
                )?;
                self.emit(|| Event::RouteTaken {
                    from: node.name.clone(),
                    to: Arc::from(self.graph.target_name(to)),
                    case: Some("error".into()),
                });
                Ok(Flow::Next(to))
            }
            None => {
                let id = self.graph.node_id(&node.name).map(Target::Node);
                self.record(live, Some(node), id, writes, Status::Failed, None, None)?;
                self.emit_finished(live, "failed", None, None);
                Err(RunError::Node {
                    node: node.name.to_string(),
                    message,
                })
            }
        }
    }

    /// Applies the kind's writes and then `set`, in order, returning the records.
    fn apply(
        &self,
        live: &mut Live,
        node: &Node,
        result: Json,
        writes: Vec<(crate::graph::FieldId, Json)>,
    ) -> Result<Vec<Write>, String> {
        let mut applied = Vec::with_capacity(writes.len() + node.set.len());
        for (field, value) in writes {
            let value = Arc::new(value);
            live.state
                .write(&self.graph, field, value.clone())
                .map_err(|e| e.to_string())?;
            applied.push(Write {
                field: self.graph.field(field).name.clone(),
                value,
            });
        }
        if node.set.is_empty() {
            return Ok(applied);
        }
        let result = from_json(result);
        let run = self.run_value(live);
        for (field, expr) in &node.set {
            let scope = Value::from_object(Scope {
                graph: self.graph.clone(),
                values: live.state.values.clone(),
                run: run.clone(),
                result: Some(result.clone()),
            });
            let v = self.graph.eval(*expr, scope).map_err(|e| {
                format!(
                    "`set` of `{}`: {}",
                    self.graph.field(*field).name,
                    jinja_error(&e)
                )
            })?;
            let value = Arc::new(to_json(&v)?);
            drop(v);
            live.state
                .write(&self.graph, *field, value.clone())
                .map_err(|e| e.to_string())?;
            applied.push(Write {
                field: self.graph.field(*field).name.clone(),
                value,
            });
        }
        Ok(applied)
    }

    /// Picks the next node from the node's edges, on the current state, with the name
    /// of the case that chose it. None for a finalize node.
    fn route(&self, live: &Live, node: &Node) -> Result<Option<Routed>, String> {
        // `run` is built once for all the route's expressions, and only for a route
        // that has any.
        let run = std::cell::OnceCell::new();
        let scope = || {
            Value::from_object(Scope {
                graph: self.graph.clone(),
                values: live.state.values.clone(),
                run: run.get_or_init(|| self.run_value(live)).clone(),
                result: None,
            })
        };
        let eval = |id: ExprId| {
            self.graph.eval(id, scope()).map_err(|e| {
                format!(
                    "route `{}`: {}",
                    self.graph.expr_source(id),
                    jinja_error(&e)
                )
            })
        };
        match &node.next {
            Next::Finish => Ok(None),
            Next::Goto(t) => Ok(Some((*t, None))),
            Next::Switch { on, cases, default } => {
                let v = eval(*on)?;
                let key = case_key(&v);
                match cases
                    .iter()
                    .find(|(c, _)| *c == key)
                    .map(|(c, t)| (*t, Some(c.clone())))
                    .or(default.map(|t| (t, Some("default".to_string()))))
                {
                    Some(r) => Ok(Some(r)),
                    None => Err(format!(
                        "route on `{}` got `{key}`, which no case names, and the route has no default",
                        self.graph.expr_source(*on)
                    )),
                }
            }
            Next::When { cases, default } => {
                for c in cases {
                    if eval(c.cond)?.is_true() {
                        return Ok(Some((c.to, Some(c.label.clone()))));
                    }
                }
                default
                    .map(|t| Some((t, Some("default".to_string()))))
                    .ok_or_else(|| "no `when` case holds and the route has no default".to_string())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        live: &mut Live,
        node: &Node,
        writes: Vec<Write>,
        next: Option<Routed>,
        finish: Option<(String, Option<String>)>,
        start: Instant,
        skipped: bool,
    ) -> Result<Flow, RunError> {
        self.emit(|| Event::NodeFinished {
            node: node.name.clone(),
            step: live.step,
            duration_us: start.elapsed().as_micros() as u64,
            writes: writes.iter().map(|w| w.field.clone()).collect(),
            skipped,
        });
        live.error = Json::Null;
        if let Some((outcome, response)) = finish {
            return self
                .finish(live, Some((node, writes)), outcome, response)
                .map(Flow::Return);
        }
        let (next, case) = next.unwrap_or((Target::End, None));
        self.record(
            live,
            Some(node),
            Some(next),
            writes,
            Status::Running,
            None,
            None,
        )?;
        if node.breakpoint == Some(Breakpoint::After) {
            return Ok(Flow::Return(self.pause(
                live,
                node,
                json!({ "breakpoint": "after", "node": &*node.name }),
                Some("after"),
                next,
            )?));
        }
        self.emit(|| Event::RouteTaken {
            from: node.name.clone(),
            to: Arc::from(self.graph.target_name(next)),
            case,
        });
        Ok(Flow::Next(next))
    }

    fn finish(
        &self,
        live: &mut Live,
        last: Option<(&Node, Vec<Write>)>,
        outcome: String,
        response: Option<String>,
    ) -> Result<Outcome, RunError> {
        let (node, writes) = match last {
            Some((n, w)) => (Some(n), w),
            None => (None, Vec::new()),
        };
        self.record(
            live,
            node,
            None,
            writes,
            Status::Finished,
            None,
            Some(outcome.clone()),
        )?;
        self.emit_finished(live, "finished", Some(outcome.clone()), response.clone());
        Ok(Outcome::Finished {
            outcome,
            response,
            steps: live.step,
        })
    }

    fn emit_finished(
        &self,
        live: &Live,
        status: &'static str,
        outcome: Option<String>,
        response: Option<String>,
    ) {
        self.emit(|| Event::RunFinished {
            status,
            outcome,
            response,
            steps: live.step,
            tokens: live.tokens,
            duration_ms: live.elapsed().as_millis() as u64,
        });
    }
}

/// Where a node's edges lead, and the name of the case that chose it.
type Routed = (Target, Option<String>);

enum Flow {
    Next(Target),
    Return(Outcome),
}

/// A `reference` as pending interrupts keep it: a string as it is, anything else as
/// JSON text.
fn reference_text(r: &Json) -> String {
    match r {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The case name a switch value selects: strings as they are, others as JSON.
fn case_key(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    if v.is_none() || v.is_undefined() {
        return "none".into();
    }
    match to_json(v) {
        Ok(j) => j.to_string(),
        Err(_) => v.to_string(),
    }
}
