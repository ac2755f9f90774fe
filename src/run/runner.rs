//! The interpreter: runs a checked [`Graph`] node by node, checkpointing after each.
//!
//! A step: check stop and limits; run the node's kind; apply its writes and then its
//! `set` expressions through the reducers; pick the next node from its edges on the new
//! state; append a checkpoint record; emit events. An interrupt pauses the run with its
//! record saved; a resume validates the answer, writes it and routes on, so no node
//! runs twice because of a resume.

use super::event::Event;
use super::kinds::cx::{NodeCx, jinja_error};
use super::kinds::llm::{LlmClient, NoLlm};
use super::kinds::mcp::{NoTools, ToolClient};
use super::kinds::{self, Step};
use super::scope::{RunInfo, Scope, to_json, view_of};
use super::state::State;
use crate::graph::{Body, ExprId, Graph, Next, Node, NodeId, Target};
use crate::spec::Breakpoint;
use crate::store::{Checkpoint, Checkpointer, Pending, Source, Status, StoreError, Write};
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
    /// A person's write to the state (`Runner::update`) that the fields refuse.
    #[error("the update is refused: {0}")]
    Update(String),
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

/// Asks a run to stop at the next node boundary. A node waiting to try again (an LLM
/// or tool call's retry) stops waiting: the run stops before that node, which a resume
/// runs again.
#[derive(Clone, Default, Debug)]
pub struct StopHandle(Arc<StopInner>);

#[derive(Default, Debug)]
struct StopInner {
    asked: AtomicBool,
    wake: tokio::sync::Notify,
}

impl StopHandle {
    pub fn stop(&self) {
        self.0.asked.store(true, Ordering::SeqCst);
        self.0.wake.notify_waiters();
    }

    pub(crate) fn take(&self) -> bool {
        self.0.asked.swap(false, Ordering::SeqCst)
    }

    /// Whether a stop was asked (and not yet honoured).
    pub fn is_asked(&self) -> bool {
        self.0.asked.load(Ordering::SeqCst)
    }

    /// Waits until a stop is asked.
    pub async fn asked(&self) {
        loop {
            let woken = self.0.wake.notified();
            tokio::pin!(woken);
            // Registered before looking, so a stop between the two is not missed.
            woken.as_mut().enable();
            if self.is_asked() {
                return;
            }
            woken.await;
        }
    }
}

/// Records between two snapshots of a thread that is running.
const SNAPSHOT_EVERY: u64 = 1024;

/// Runs one graph against one checkpoint store.
pub struct Runner {
    pub(super) graph: Arc<Graph>,
    /// The graph file and its hash, as every checkpoint records them.
    pub(super) graph_path: Arc<str>,
    pub(super) graph_hash: Arc<str>,
    pub(super) store: Arc<dyn Checkpointer>,
    llm: Arc<dyn LlmClient>,
    tools: Arc<dyn ToolClient>,
    events: Option<UnboundedSender<Event>>,
    stop: StopHandle,
    max_steps: Option<u64>,
    /// Whether a run shuts its MCP servers down when it ends or pauses (the command
    /// line), or leaves them to the caller (a server keeps a paused thread's servers).
    shutdown_tools: bool,
    /// Emit [`Event::Saved`] for every checkpoint; `Some(true)` with the whole state
    /// on the first of each start or resume.
    saved: Option<bool>,
    /// The next `Saved` event is the first of a start or resume.
    first_saved: AtomicBool,
    /// The store keeps records: without, they are built only for `Saved` events.
    keep_records: bool,
}

/// A thread being driven.
#[derive(Clone)]
pub(super) struct Live {
    pub(super) thread: Arc<str>,
    pub(super) seq: u64,
    pub(super) run: u64,
    pub(super) step: u64,
    pub(super) state: State,
    pub(super) tokens: u64,
    /// Wall time of this run before the current segment (earlier segments were paused).
    pub(super) elapsed_before: Duration,
    pub(super) started: Instant,
    /// A limit was reached and the run is on its way to `on_limit`.
    pub(super) limited: bool,
    /// `run.error` as expressions see it: set when a failure takes `on_error`, seen by
    /// the node the run goes to, cleared when that node completes.
    pub(super) error: Arc<Json>,
    /// The node whose `before` breakpoint was just answered: it runs without pausing again.
    pub(super) past_breakpoint: Option<NodeId>,
}

impl Live {
    fn elapsed(&self) -> Duration {
        self.elapsed_before + self.started.elapsed()
    }
}

pub(super) fn now_ms() -> u64 {
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
        let keep_records = store.keeps_records();
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
            shutdown_tools: true,
            saved: None,
            first_saved: AtomicBool::new(true),
            keep_records,
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

    /// Leaves the tool client's servers running when a run ends or pauses: the caller
    /// owns them (a server keeps a paused thread's browser open for its resume).
    #[must_use]
    pub fn with_tools_kept(mut self) -> Self {
        self.shutdown_tools = false;
        self
    }

    /// Overrides the graph's `max_steps` for runs of this runner.
    #[must_use]
    pub fn with_max_steps(mut self, max_steps: Option<u64>) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Uses `stop` as the runner's stop handle, so a caller can hold it before the
    /// runner exists.
    #[must_use]
    pub fn with_stop(mut self, stop: StopHandle) -> Self {
        self.stop = stop;
        self
    }

    /// Emits an [`Event::Saved`] after every checkpoint the runs write, carrying the
    /// record and, with `values`, the whole state after the first checkpoint of each
    /// start or resume: a reader applies the later records' writes to it (keeping every
    /// state would cost a copy of the state per step).
    #[must_use]
    pub fn with_saved_events(mut self, values: bool) -> Self {
        self.saved = Some(values);
        self
    }

    /// Subscribes to the events of every later run: a stream of [`Event`]s.
    pub fn events(&mut self) -> UnboundedReceiver<Event> {
        let (tx, rx) = unbounded_channel();
        self.events = Some(tx);
        rx
    }

    /// Sends the events of every later run to `tx`.
    #[must_use]
    pub fn with_events(mut self, tx: UnboundedSender<Event>) -> Self {
        self.events = Some(tx);
        self
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

    pub(super) fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(tx) = &self.events {
            let _ = tx.send(make());
        }
    }

    fn max_steps(&self) -> Option<u64> {
        self.max_steps.or(self.graph.limits.max_steps)
    }

    /// Starts a new run of the graph on a thread: the input's fields are written through
    /// their reducers (onto the thread's state when it has one), then the entry runs.
    /// When the run ends or pauses, its MCP servers are shut down (unless kept).
    pub async fn start(&self, thread: &str, input: Json) -> Result<Outcome, RunError> {
        let claim = self.store.claim(thread)?;
        self.first_saved.store(true, Ordering::SeqCst);
        let outcome = match self.prepare_start(thread, input) {
            Ok((live, writes)) => self.start_prepared(live, writes).await,
            Err(e) => Err(e),
        };
        if self.shutdown_tools {
            self.tools.shutdown().await;
        }
        drop(claim);
        outcome
    }

    /// Checks that a run can start on `thread` with `input`, as [`Runner::start`]
    /// would, without writing anything.
    pub fn check_start(&self, thread: &str, input: Json) -> Result<(), RunError> {
        self.prepare_start(thread, input).map(drop)
    }

    /// The thread as a new run finds it, with the input written.
    fn prepare_start(&self, thread: &str, input: Json) -> Result<(Live, Vec<Write>), RunError> {
        let Json::Object(fields) = input else {
            return Err(RunError::Input(format!(
                "expected an object, got {}",
                super::state::describe(&input)
            )));
        };
        let (mut live, last) = self.load_live(thread)?;
        if let Some(last) = &last {
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
        if !live.error.is_null() {
            live.error = Arc::new(Json::Null);
        }
        live.past_breakpoint = None;
        let writes = self
            .write_fields(&mut live, fields)
            .map_err(RunError::Input)?;
        Ok((live, writes))
    }

    /// Writes each field of an input (or a person's update) through its reducer.
    pub(super) fn write_fields(
        &self,
        live: &mut Live,
        fields: serde_json::Map<String, Json>,
    ) -> Result<Vec<Write>, String> {
        let mut writes = Vec::with_capacity(fields.len());
        for (name, value) in fields {
            let id = self.graph.field_id(&name).ok_or_else(|| {
                let hint =
                    crate::suggestion::help_for(&name, self.graph.fields.iter().map(|f| &*f.name))
                        .map(|h| format!("; {h}"))
                        .unwrap_or_default();
                format!("`{name}` is not a state field{hint}")
            })?;
            let value = Arc::new(value);
            live.state
                .write(&self.graph, id, value.clone())
                .map_err(|e| e.to_string())?;
            writes.push(Write {
                field: self.graph.field(id).name.clone(),
                value,
            });
        }
        Ok(writes)
    }

    async fn start_prepared(
        &self,
        mut live: Live,
        writes: Vec<Write>,
    ) -> Result<Outcome, RunError> {
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
    /// are shut down (unless kept).
    pub async fn resume(
        &self,
        thread: &str,
        payload: Option<Json>,
        force: bool,
    ) -> Result<Outcome, RunError> {
        let claim = self.store.claim(thread)?;
        self.first_saved.store(true, Ordering::SeqCst);
        let outcome = match self.prepare_resume(thread, payload, force) {
            Ok(r) => self.resume_prepared(r).await,
            Err(e) => Err(e),
        };
        if self.shutdown_tools {
            self.tools.shutdown().await;
        }
        drop(claim);
        outcome
    }

    fn run_value(&self, live: &Live) -> Value {
        Value::from_object(RunInfo {
            thread: live.thread.clone(),
            step: live.step,
            max_steps: self.max_steps(),
            tokens: live.tokens,
            elapsed_before: live.elapsed_before,
            started: live.started,
            error: live.error.clone(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &self,
        live: &mut Live,
        node: Option<&Node>,
        next: Option<Target>,
        writes: Vec<Write>,
        status: Status,
        pending: Option<Pending>,
        outcome: Option<String>,
    ) -> Result<(), RunError> {
        let saved_events = self.saved.is_some() && self.events.is_some();
        if !self.keep_records && !saved_events {
            live.seq += 1;
            return Ok(());
        }
        // The one record no node wrote that leaves a run going is its input's.
        let source = if node.is_none() && status == Status::Running {
            Source::Input
        } else {
            Source::Loop
        };
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
            error: (!live.error.is_null()).then(|| (*live.error).clone()),
            tokens: live.tokens,
            elapsed_ms: live.elapsed().as_millis() as u64,
            at_ms: now_ms(),
            source,
        };
        let saved = match (self.saved, &self.events) {
            (Some(values), Some(_)) => Some((
                Arc::new(record.clone()),
                (values && self.first_saved.swap(false, Ordering::SeqCst))
                    .then(|| Arc::new(live.state.to_json(&self.graph))),
            )),
            _ => None,
        };
        if self.keep_records {
            self.store.append(record)?;
        }
        live.seq += 1;
        // A paused, stopped or ended thread keeps its whole state, so that resuming it
        // reads no history; a long run keeps one every so often, for a process killed
        // mid-run.
        if self.keep_records
            && (status != Status::Running || live.seq.is_multiple_of(SNAPSHOT_EVERY))
        {
            self.snapshot(live, live.seq - 1)?;
        }
        if let Some((record, values)) = saved {
            self.emit(|| Event::Saved { record, values });
        }
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

    pub(super) async fn drive(
        &self,
        mut live: Live,
        mut next: Target,
    ) -> Result<Outcome, RunError> {
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
            // nodes even when no node awaits anything (a loop of `set` nodes). Whoever
            // follows the events may stop the run at the next node, so then every step
            // yields; without them tokio's budget yields once every so many steps (a
            // yield costs about as much as a `set` step).
            if self.events.is_some() {
                tokio::task::yield_now().await;
            } else {
                tokio::task::coop::consume_budget().await;
            }
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
            at_seq: Some(live.seq),
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

    async fn run_node(&self, live: &mut Live, id: NodeId) -> Result<Flow, RunError> {
        let node = self.graph.node(id);
        let start = Instant::now();
        self.emit(|| Event::NodeStarted {
            node: node.name.clone(),
            step: live.step,
        });
        let cx = NodeCx {
            stop: &self.stop,
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
            Body::Set => Step::done(Arc::new(Json::Null), Vec::new()),
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
            Step::Abandoned { writes, tokens } => {
                live.tokens = live.tokens.saturating_add(tokens);
                // The node did not complete: what it recorded of its attempts stands,
                // and the run stops before it, to run it again on a resume.
                let mut applied = Vec::with_capacity(writes.len());
                for (field, value) in writes {
                    if live.state.write(&self.graph, field, value.clone()).is_ok() {
                        applied.push(Write {
                            field: self.graph.field(field).name.clone(),
                            value,
                        });
                    }
                }
                self.stop.take();
                live.step = live.step.saturating_sub(1);
                self.record(
                    live,
                    None,
                    Some(Target::Node(id)),
                    applied,
                    Status::Stopped,
                    None,
                    None,
                )?;
                self.emit(|| Event::Stopped {
                    next: Some(node.name.clone()),
                    step: live.step,
                });
                self.emit_finished(live, "stopped", None, None);
                Ok(Flow::Return(Outcome::Stopped {
                    next: Some(node.name.to_string()),
                    steps: live.step,
                }))
            }
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
                    // `apply` left the state as it was before the node.
                    Err(message) => self.fail(live, node, message),
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
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
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
                // The record says why the run failed, for whoever reads it later.
                live.error = Arc::new(json!({ "node": &*node.name, "message": message }));
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
    pub(super) fn apply(
        &self,
        live: &mut Live,
        node: &Node,
        result: Arc<Json>,
        writes: Vec<(crate::graph::FieldId, Arc<Json>)>,
    ) -> Result<Vec<Write>, String> {
        // A refused write leaves the state as it was before the node: the writes
        // before it are taken back.
        let mut undo = Vec::new();
        let applied = self.apply_noting(live, node, result, writes, &mut undo);
        if applied.is_err() {
            live.state.undo(&self.graph, undo);
        }
        applied
    }

    fn apply_noting(
        &self,
        live: &mut Live,
        node: &Node,
        result: Arc<Json>,
        writes: Vec<(crate::graph::FieldId, Arc<Json>)>,
        undo: &mut Vec<super::state::Undo>,
    ) -> Result<Vec<Write>, String> {
        let mut applied = Vec::with_capacity(writes.len() + node.set.len());
        for (field, value) in writes {
            live.state
                .write_undoable(&self.graph, field, value.clone(), undo)
                .map_err(|e| e.to_string())?;
            applied.push(Write {
                field: self.graph.field(field).name.clone(),
                value,
            });
        }
        if node.set.is_empty() {
            return Ok(applied);
        }
        let result = view_of(result);
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
                .write_undoable(&self.graph, *field, value.clone(), undo)
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
    pub(super) fn route(&self, live: &Live, node: &Node) -> Result<Option<Routed>, String> {
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
    pub(super) fn commit(
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
        if !live.error.is_null() {
            live.error = Arc::new(Json::Null);
        }
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
pub(super) type Routed = (Target, Option<String>);

pub(super) enum Flow {
    Next(Target),
    Return(Outcome),
}

/// A `reference` as pending interrupts keep it: a string as it is, anything else as
/// JSON text.
pub(super) fn reference_text(r: &Json) -> String {
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
