//! The interpreter: runs a checked [`Graph`] node by node, checkpointing after each.
//!
//! A step: check stop and limits; run the node's kind; apply its writes and then its
//! `set` expressions through the reducers; pick the next node from its edges on the new
//! state; append a checkpoint record; emit events. An interrupt pauses the run with its
//! record saved; a resume validates the answer, writes it and routes on, so no node
//! runs twice because of a resume.

use super::event::Event;
use super::kinds::cx::NodeCx;
use super::kinds::llm::{LlmClient, NoLlm};
use super::kinds::mcp::{NoTools, ToolClient};
use super::kinds::{self, Step};
use super::scope::RunInfo;
use super::state::State;
use crate::graph::{Body, Graph, NodeId, Target};
use crate::spec::Breakpoint;
use crate::store::{Checkpointer, Status, Write};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

pub use super::outcome::{Outcome, RunError};
pub(super) use super::step::{Flow, Routed};
pub use super::stop::StopHandle;

/// Runs one graph against one checkpoint store.
pub struct Runner {
    pub(super) graph: Arc<Graph>,
    /// The graph file and its hash, as every checkpoint records them.
    pub(super) graph_path: Arc<str>,
    pub(super) graph_hash: Arc<str>,
    pub(super) store: Arc<dyn Checkpointer>,
    pub(super) llm: Arc<dyn LlmClient>,
    pub(super) tools: Arc<dyn ToolClient>,
    pub(super) events: Option<UnboundedSender<Event>>,
    pub(super) stop: StopHandle,
    pub(super) max_steps: Option<u64>,
    /// Whether a run shuts its MCP servers down when it ends or pauses (the command
    /// line), or leaves them to the caller (a server keeps a paused thread's servers).
    pub(super) shutdown_tools: bool,
    /// Emit [`Event::Saved`] for every checkpoint; `Some(true)` with the whole state
    /// on the first of each start or resume.
    pub(super) saved: Option<bool>,
    /// The next `Saved` event is the first of a start or resume.
    pub(super) first_saved: AtomicBool,
    /// The run's last event, held while its MCP servers are shut down: whoever reads
    /// the events sees them stopped before the run ends.
    pub(super) held: std::sync::Mutex<Option<Event>>,
    /// The store keeps records: without, they are built only for `Saved` events.
    pub(super) keep_records: bool,
    /// LLM events carry the messages sent and the reply (see [`Runner::with_llm_content`]).
    pub(super) llm_content: bool,
}

/// What a node's own work came to, before anything is written.
pub(super) enum Work {
    /// Its `only_if` was false: it does nothing and follows its edges.
    Skipped,
    Step(Step),
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
    /// The wall clock (Unix milliseconds) at an instant: a record's time comes from the
    /// clock read for its elapsed time, one read per step instead of two. Read again
    /// every 64 records, so a clock step or a suspended machine is caught up soon.
    pub(super) wall: (Instant, u64),
    /// A limit was reached and the run is on its way to `on_limit`.
    pub(super) limited: bool,
    /// `run.error` as expressions see it: set when a failure takes `on_error`, seen by
    /// the node the run goes to, cleared when that node completes.
    pub(super) error: Arc<Json>,
    /// The node whose `before` breakpoint was just answered: it runs without pausing again.
    pub(super) past_breakpoint: Option<NodeId>,
    /// The answer to what a node's MCP server asked (elicitation), for that node's run
    /// again on resume.
    pub(super) answer: Option<(NodeId, Arc<Json>)>,
    /// How to take back the writes of the node being applied (see `apply`).
    pub(super) undo: Vec<super::state::Undo>,
    /// Inside parallel branches: where each branch is, and where they meet.
    pub(super) frontier: Option<super::parallel::Frontier>,
    /// The branch whose node is being completed, inside parallel branches.
    pub(super) branch: Option<usize>,
}

impl Live {
    pub(super) fn elapsed(&self) -> Duration {
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
            held: std::sync::Mutex::new(None),
            keep_records,
            llm_content: false,
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

    /// Puts what each model call was sent (its messages, prompts rendered) and what it
    /// answered into its [`Event::LlmInvocation`], for a reader that shows them (the
    /// server's page). Off by default: prompts can hold what a log should not.
    #[must_use]
    pub fn with_llm_content(mut self, content: bool) -> Self {
        self.llm_content = content;
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

    /// Sends the run's last event, held while its servers were shut down.
    fn release_held(&self) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let (Some(e), Some(tx)) = (held, &self.events) {
            let _ = tx.send(e);
        }
    }

    pub(super) fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(tx) = &self.events {
            let _ = tx.send(make());
        }
    }

    pub(super) fn max_steps(&self) -> Option<u64> {
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
        self.release_held();
        drop(claim);
        outcome
    }

    /// Checks that a run can start on `thread` with `input`, as [`Runner::start`]
    /// would, without writing anything.
    pub fn check_start(&self, thread: &str, input: Json) -> Result<(), RunError> {
        self.prepare_start(thread, input).map(drop)
    }

    /// The thread as a new run finds it, with the input written.
    pub(super) fn prepare_start(
        &self,
        thread: &str,
        input: Json,
    ) -> Result<(Live, Vec<Write>), RunError> {
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
        live.wall = (live.started, now_ms());
        live.limited = false;
        if !live.error.is_null() {
            live.error = Arc::new(Json::Null);
        }
        live.past_breakpoint = None;
        let missing: Vec<String> = self
            .graph
            .fields
            .iter()
            .filter(|f| f.required && !fields.contains_key(&*f.name))
            .map(|f| format!("`{}` ({})", f.name, f.ty))
            .collect();
        if !missing.is_empty() {
            return Err(RunError::Input(format!(
                "the graph requires {} in every run's input, and it has no {}",
                if missing.len() == 1 {
                    "a field"
                } else {
                    "fields"
                },
                missing.join(", ")
            )));
        }
        // A constant another run gave another value is back to the graph's, unless
        // this run's input gives one too: an input's value is for its run.
        let mut fields = fields;
        for (i, f) in self.graph.fields.iter().enumerate() {
            if f.constant && !fields.contains_key(&*f.name) && *live.state.values[i] != f.default {
                fields.insert(f.name.to_string(), f.default.clone());
            }
        }
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

    pub(super) async fn start_prepared(
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
        self.release_held();
        drop(claim);
        outcome
    }

    pub(super) fn run_info(&self, live: &Live) -> RunInfo {
        RunInfo {
            thread: live.thread.clone(),
            run: live.run,
            step: live.step,
            max_steps: self.max_steps(),
            tokens: live.tokens,
            elapsed_before: live.elapsed_before,
            started: live.started,
            error: live.error.clone(),
        }
    }

    /// Which limit, if any, the run has reached.
    pub(super) fn limit_reached(&self, live: &Live) -> Option<&'static str> {
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
            if live.frontier.is_some() {
                // Parallel branches, before the join (`id`): resumed, or just forked.
                match self.run_branches(&mut live).await? {
                    Flow::Next(t) => {
                        next = t;
                        continue;
                    }
                    Flow::Return(o) => return Ok(o),
                    Flow::Fork => {
                        return Err(RunError::GraphChanged {
                            thread: live.thread.to_string(),
                            why: "parallel branches ended in another fork".into(),
                        });
                    }
                }
            }
            if self.stop.take() {
                let name = self.graph.node(id).name.clone();
                return self.stopped(&mut live, Some(next), name);
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
                    limit: limit.into(),
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
                // The branches run at the top of the loop; `next` is their join.
                Flow::Fork => {
                    let join = live
                        .frontier
                        .as_ref()
                        .map(|f| f.join)
                        .expect("a fork sets the frontier");
                    next = Target::Node(join);
                }
            }
        }
    }

    /// Stops the run at a node boundary: a record that says where it goes on (`next`,
    /// or every branch's next node when the frontier is set), events, the outcome.
    pub(super) fn stopped(
        &self,
        live: &mut Live,
        next: Option<Target>,
        name: Arc<str>,
    ) -> Result<Outcome, RunError> {
        self.record(live, None, next, Vec::new(), Status::Stopped, None, None)?;
        self.emit(|| Event::Stopped {
            next: Some(name.clone()),
            step: live.step,
        });
        self.emit_finished(live, "stopped", None, None);
        Ok(Outcome::Stopped {
            next: Some(name.to_string()),
            steps: live.step,
        })
    }

    pub(super) async fn run_node(&self, live: &mut Live, id: NodeId) -> Result<Flow, RunError> {
        // Only an event reports how long the node took.
        let start = self.events.is_some().then(Instant::now);
        let work = self.work(live, id, self.run_info(live), &self.events).await;
        // The answer went to the node it was for, or is for none now.
        live.answer = None;
        self.finish_work(live, id, work, start)
    }

    /// A node's own work, on the state as `live` holds it: its `only_if`, then its kind
    /// (once, or once per item of its map). Nothing is written: parallel branches do
    /// the work of several nodes on one state, and apply their steps after.
    pub(super) async fn work(
        &self,
        live: &Live,
        id: NodeId,
        run: super::scope::RunInfo,
        events: &Option<UnboundedSender<Event>>,
    ) -> Work {
        let node = self.graph.node(id);
        // The answer to what the node's server asked last time (a resumed elicitation),
        // in a branch of its own or not.
        let answer = live
            .answer
            .as_ref()
            .filter(|(node, _)| *node == id)
            .map(|(_, a)| a.clone());
        if let Some(tx) = events {
            let _ = tx.send(Event::NodeStarted {
                node: node.name.clone(),
                step: run.step,
            });
        }
        let cx = NodeCx {
            stop: &self.stop,
            graph: &self.graph,
            state: &live.state,
            node,
            run,
            llm: &*self.llm,
            tools: &*self.tools,
            store: &*self.store,
            events,
            llm_content: self.llm_content,
            answer,
            item: None,
            item_index: None,
        };
        if let Some(cond) = node.only_if {
            match cx.eval(cond) {
                Ok(v) if !v.is_true() => return Work::Skipped,
                Ok(_) => {}
                Err(e) => return Work::Step(Step::fail(format!("only_if: {e}"))),
            }
        }
        Work::Step(match &node.map {
            Some(map) => self.run_mapped(&cx, map).await,
            None => self.run_kind(&cx).await,
        })
    }

    /// Applies a node's work: its writes and `set`, its route, its record.
    pub(super) fn finish_work(
        &self,
        live: &mut Live,
        id: NodeId,
        work: Work,
        start: Option<Instant>,
    ) -> Result<Flow, RunError> {
        let node = self.graph.node(id);
        match work {
            Work::Skipped => match self.route(live, node) {
                Ok(next) => self.commit(live, node, Vec::new(), next, None, start, true),
                Err(message) => self.fail(live, node, message),
            },
            Work::Step(step) => self.complete(live, id, step, start),
        }
    }

    /// The node's kind at work, once.
    pub(super) async fn run_kind(&self, cx: &NodeCx<'_>) -> Step {
        match &cx.node.body {
            Body::Set => Step::done(Arc::new(Json::Null), Vec::new()),
            Body::Policy(p) => kinds::policy::run(cx, p),
            Body::Finalize(f) => kinds::finalize::run(cx, f),
            Body::Fail(f) => kinds::finalize::fail(cx, f),
            Body::Interrupt(i) => kinds::interrupt::run(cx, i),
            Body::Llm(l) => kinds::llm::run(cx, l).await,
            Body::Mcp(m) => kinds::mcp::run(cx, m).await,
            Body::Graph(g) => self.run_subgraph(cx, g).await,
        }
    }
}
