//! The interpreter: runs a checked [`Graph`] node by node, checkpointing after each.
//!
//! A step: check stop and limits; run the node's kind; apply its writes and then its
//! `set` expressions through the reducers; pick the next node from its edges on the new
//! state; append a checkpoint record; emit events. An interrupt pauses the run with its
//! record saved; a resume validates the answer, writes it and routes on, so no node
//! runs twice because of a resume.
//!
//! This file holds the runner's parts and its loop ([`Runner::drive`]). What a step
//! leaves behind is in `step.rs`, how a start or resume is decided in `plan.rs`,
//! parallel branches in `parallel.rs`, mapped nodes in `map.rs`, subgraphs in
//! `subgraph.rs`; the thread's cursor is `cursor.rs`, its records `recorder.rs`.

use super::cursor::{Flow, Live, Work};
use super::emitter::Emitter;
use super::event::Event;
use super::go::Go;
use super::kinds::cx::NodeCx;
use super::kinds::{self, Step};
use super::outcome::{Outcome, RunError};
use super::recorder::Recorder;
use super::scope::RunInfo;
use super::stop::StopHandle;
use super::threads::Threads;
use crate::graph::{Body, Graph, NodeId, Target};
use crate::llm::{LlmClient, NoLlm};
use crate::spec::Breakpoint;
use crate::store::{Checkpoints, LlmCache, NoStore};
use crate::tool::{NoTools, ToolClient};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Runs one graph against one checkpoint store.
pub struct Runner {
    pub(super) graph: Arc<Graph>,
    /// Writes the records, into the threads of this graph and store.
    pub(super) recorder: Recorder,
    pub(super) llm: Arc<dyn LlmClient>,
    pub(super) tools: Arc<dyn ToolClient>,
    pub(super) events: Emitter,
    pub(super) stop: StopHandle,
    pub(super) max_steps: Option<u64>,
    /// Whether a run shuts its MCP servers down when it ends or pauses (the command
    /// line), or leaves them to the caller (a server keeps a paused thread's servers).
    pub(super) shutdown_tools: bool,
    /// LLM events carry the messages sent and the reply (see [`Runner::with_llm_content`]).
    pub(super) llm_content: bool,
    /// An llm node's `cache` (see [`Runner::with_cache`]).
    pub(super) cache: Arc<dyn LlmCache>,
    /// What the builtin `store` servers serve, and how they embed (see
    /// [`Runner::with_items`]).
    pub(super) items: Option<(Arc<dyn crate::store::Items>, Option<crate::store::Index>)>,
    /// Values of the graph's `[configurable]` constants a run that starts takes (see
    /// [`Runner::with_configuration`]).
    pub(super) configuration: serde_json::Map<String, serde_json::Value>,
}

impl Runner {
    /// A runner of `graph` whose runs keep their records in `store`. Its llm nodes'
    /// cache is none until [`Runner::with_cache`] gives one.
    pub fn new(graph: Arc<Graph>, store: Arc<dyn Checkpoints>) -> Self {
        Runner {
            recorder: Recorder::new(Threads::new(graph.clone(), store)),
            graph,
            llm: Arc::new(NoLlm),
            tools: Arc::new(NoTools),
            events: Emitter::default(),
            stop: StopHandle::default(),
            max_steps: None,
            shutdown_tools: true,
            llm_content: false,
            cache: Arc::new(NoStore),
            items: None,
            configuration: serde_json::Map::new(),
        }
    }

    /// Where llm nodes with a `cache` keep their answers (usually the same store as the
    /// records: the cache lasts as long as they do).
    #[must_use]
    pub fn with_cache(mut self, cache: Arc<dyn LlmCache>) -> Self {
        self.cache = cache;
        self
    }

    #[must_use]
    pub fn with_llm(mut self, llm: Arc<dyn LlmClient>) -> Self {
        self.llm = llm;
        self
    }

    #[must_use]
    pub fn with_tools(mut self, tools: Arc<dyn ToolClient>) -> Self {
        self.tools = match &self.items {
            Some((items, index)) => Arc::new(super::store_tools::StoreTools::new(
                items.clone(),
                index.clone(),
                tools,
            )),
            None => tools,
        };
        self
    }

    /// Serves the graph's builtin `store` servers from `items` (the long-term store
    /// of the store the runs are kept in), embedding through `index` when given (for
    /// semantic search), in front of the tool client.
    #[must_use]
    pub fn with_items(
        mut self,
        items: Arc<dyn crate::store::Items>,
        index: Option<crate::store::Index>,
    ) -> Self {
        self.items = Some((items.clone(), index.clone()));
        self.tools = Arc::new(super::store_tools::StoreTools::new(
            items,
            index,
            self.tools.clone(),
        ));
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

    /// Values for the graph's `[configurable]` constants, which a run that starts
    /// takes (each checked against its type and bounds; a run that goes on keeps those
    /// its thread's run started with). The others have their defaults.
    #[must_use]
    pub fn with_configuration(
        mut self,
        configuration: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        self.configuration = configuration;
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
        self.recorder.saved = Some(values);
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
        self.events = Emitter::to(tx);
        rx
    }

    /// Sends the events of every later run to `tx`.
    #[must_use]
    pub fn with_events(mut self, tx: UnboundedSender<Event>) -> Self {
        self.events = Emitter::to(tx);
        self
    }

    /// The sender behind [`Runner::events`], for clients that emit events of their own
    /// (an MCP server's stderr) into the same stream.
    pub fn event_sender(&self) -> Option<UnboundedSender<Event>> {
        self.events.sender().clone()
    }

    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The threads this runner's runs write: their state, history, forks, updates.
    pub fn threads(&self) -> &Threads {
        &self.recorder.threads
    }

    /// The run's step limit: the runner's, else the graph's.
    pub(super) fn max_steps(&self) -> Option<u64> {
        self.max_steps.or(self.graph.limits.max_steps)
    }

    /// Runs on `thread` as `go` says: a new run from the entry, or the paused thread
    /// resumed. One run at a time holds the thread (its claim). When the run ends or
    /// pauses, its MCP servers are shut down (unless kept).
    pub async fn run(&self, thread: &str, go: Go) -> Result<Outcome, RunError> {
        let claim = self.recorder.threads.store().claim(thread).await?;
        self.recorder.begin();
        let outcome = match self.prepare(thread, go).await {
            Ok(plan) => match self.begin(plan).await {
                Ok(begun) => self.execute(begun).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if self.shutdown_tools {
            self.tools.shutdown().await;
        }
        self.events.release();
        claim.release().await;
        outcome
    }

    /// Checks that a run can go on `thread` as `go` says, as [`Runner::run`] would,
    /// without writing anything: a server refuses a request that would fail with the
    /// thread as it was.
    pub async fn check(&self, thread: &str, go: Go) -> Result<(), RunError> {
        self.prepare(thread, go).await.map(drop)
    }

    /// [`Runner::run`] with [`Go::Start`]. (The future is `run`'s own, not one that
    /// wraps it: a run's future is copied when it is spawned or pinned.)
    pub fn start<'a>(
        &'a self,
        thread: &'a str,
        input: serde_json::Value,
    ) -> impl Future<Output = Result<Outcome, RunError>> + Send + 'a {
        self.run(thread, Go::Start(input))
    }

    /// [`Runner::run`] with [`Go::Resume`].
    pub fn resume<'a>(
        &'a self,
        thread: &'a str,
        payload: Option<serde_json::Value>,
        force: bool,
    ) -> impl Future<Output = Result<Outcome, RunError>> + Send + 'a {
        self.run(thread, Go::Resume { payload, force })
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
        } else if limits.budget.is_empty() {
            None
        } else {
            let used = live.meter.usage();
            limits
                .budget
                .passed(live.tokens, used.model_calls, used.tool_calls, used.usd)
        }
    }

    /// The loop: runs nodes from `next` until the run ends, pauses or stops.
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
                return self.finish(&mut live, None, outcome.into(), None).await;
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
                return self.stopped(&mut live, Some(next), name).await;
            }
            if live.limited {
                if grace == 0 {
                    return self.finish(&mut live, None, "limit".into(), None).await;
                }
                grace -= 1;
            } else if let Some(limit) = self.limit_reached(&live) {
                live.limited = true;
                let to = self.graph.limits.on_limit;
                self.events.emit(|| Event::LimitReached {
                    limit: limit.into(),
                    to: to.map(|t| Arc::from(self.graph.target_name(t))),
                });
                match to {
                    Some(t @ Target::Node(_)) => {
                        next = t;
                        continue;
                    }
                    _ => return self.finish(&mut live, None, "limit".into(), None).await,
                }
            }
            let node = self.graph.node(id);
            if node.breakpoint == Some(Breakpoint::Before)
                && live.past_breakpoint.take() != Some(id)
            {
                return self
                    .pause(
                        &mut live,
                        node,
                        json!({ "breakpoint": "before", "node": &*node.name }),
                        Some("before"),
                        next,
                    )
                    .await;
            }
            live.step += 1;
            // Lets a Ctrl-C handler or an event printer on the same runtime run between
            // nodes even when no node awaits anything (a loop of `set` nodes). Whoever
            // follows the events may stop the run at the next node, so then every step
            // yields; without them tokio's budget yields once every so many steps (a
            // yield costs about as much as a `set` step).
            if self.events.is_on() {
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

    pub(super) async fn run_node(&self, live: &mut Live, id: NodeId) -> Result<Flow, RunError> {
        // Only an event reports how long the node took.
        let start = self.events.is_on().then(Instant::now);
        let run = live.run_info(self.max_steps());
        let work = self.work(live, id, run, self.events.sender()).await;
        // The answer went to the node it was for, or is for none now.
        live.answer = None;
        self.finish_work(live, id, work, start).await
    }

    /// A node's own work, on the state as `live` holds it: its `only_if`, then its kind
    /// (once, or once per item of its map). Nothing is written: parallel branches do
    /// the work of several nodes on one state, and apply their steps after.
    pub(super) async fn work(
        &self,
        live: &Live,
        id: NodeId,
        run: RunInfo,
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
        // A graph with a budget counts its replies and calls; one without is not slowed.
        let budget = &self.graph.limits.budget;
        let metered = (!budget.is_empty())
            .then(|| super::meter::metered(&self.llm, &self.tools, &live.meter, &budget.prices));
        let (llm, tools): (&dyn LlmClient, &dyn ToolClient) = match &metered {
            Some((l, t)) => (&**l, &**t),
            None => (&*self.llm, &*self.tools),
        };
        let cx = NodeCx {
            stop: &self.stop,
            graph: &self.graph,
            state: &live.state,
            node,
            run,
            llm,
            tools,
            meter: metered.is_some().then_some(&live.meter),
            cache: &*self.cache,
            claims: &**self.recorder.threads.store(),
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

    /// The node's kind at work, once.
    pub(super) async fn run_kind(&self, cx: &NodeCx<'_>) -> Step {
        match &cx.node.body {
            Body::Set => Step::done(Arc::new(serde_json::Value::Null), Vec::new()),
            Body::Policy(p) => kinds::policy::run(cx, p),
            Body::Finalize(f) => kinds::finalize::run(cx, f),
            Body::Fail(f) => kinds::finalize::fail(cx, f),
            Body::Interrupt(i) => kinds::interrupt::run(cx, i),
            Body::Llm(l) if l.chat => kinds::chat::run(cx, l).await,
            Body::Llm(l) => kinds::llm::run(cx, l).await,
            // The model's calls (LangGraph's ToolNode), or the node's own.
            Body::Mcp(m) => match m.tool_calls {
                Some(field) => kinds::tool_calls::run(cx, m, field).await,
                None => kinds::mcp::run(cx, m).await,
            },
            Body::Graph(g) => self.run_subgraph(cx, g).await,
        }
    }
}
