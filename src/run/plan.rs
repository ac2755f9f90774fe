//! A start or a resume, in two halves: [`Runner::prepare`] makes every check the run
//! makes and decides what it will do ([`Plan`]), writing nothing; then
//! [`Runner::begin`] writes its first records and [`Runner::execute`] goes on from
//! there. A server checks an input or an answer
//! before it accepts the request (a refused one leaves the thread as it was), and runs
//! it later.

use super::apply::{apply, route, write_fields};
use super::cursor::{Flow, Live, Routed, now_ms};
use super::event::Event;
use super::go::Go;
use super::kinds;
use super::message_ids::WrittenAt;
use super::outcome::{Outcome, RunError};
use super::runner::Runner;
use super::state::{State, describe};
use super::step::reference_text;
use crate::graph::{Body, NodeId, Target};
use crate::store::{Checkpoint, Pending, Status, StoreError, Write};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a run will do, decided before anything is written.
pub(super) enum Plan {
    /// A new run from `at` (the entry, unless `command.goto` said), its input written
    /// (`writes`).
    Start {
        live: Live,
        writes: Vec<Write>,
        at: Target,
        /// The state as the run found it, before its input, when the run tells it (a
        /// copy kept otherwise would make the input's writes copy what they change).
        found: Option<State>,
    },
    /// Nothing to do: the thread stands at `last`.
    Stay { live: Live, last: Checkpoint },
    /// Go on from a stop, a crash or a breakpoint; `passed` is the node whose
    /// breakpoint was let through, and whether it was a `before` one.
    Continue {
        live: Live,
        next: Target,
        passed: Option<(NodeId, bool)>,
    },
    /// The interrupt's time ran out: take its `on_timeout` route.
    TimedOut {
        live: Live,
        node: NodeId,
        to: Target,
    },
    /// The node runs a subgraph paused at an interrupt: the answer goes to it.
    Child {
        live: Live,
        node: NodeId,
        payload: Json,
    },
    /// The answer was taken, on a copy of the state that now is the run's.
    Answered {
        live: Live,
        node: NodeId,
        applied: Vec<Write>,
        next: Option<Routed>,
        start: Option<Instant>,
        /// The state before the answer, when the run tells it (`Event::Standing`).
        found: Option<State>,
    },
}

impl Runner {
    /// Decides what a run on `thread` will do as `go` says, making every check it
    /// makes; nothing is written.
    pub(super) async fn prepare(&self, thread: &str, go: Go) -> Result<Plan, RunError> {
        match go {
            Go::From { at, go } if !matches!(*go, Go::From { .. }) => {
                self.prepare_at(thread, Some(at), *go).await
            }
            go => self.prepare_at(thread, None, go).await,
        }
    }

    /// [`Runner::prepare`] from checkpoint `at` of the thread (its latest, without).
    async fn prepare_at(&self, thread: &str, at: Option<u64>, go: Go) -> Result<Plan, RunError> {
        match go {
            Go::From { .. } => Err(RunError::Fork(
                "a run goes from one checkpoint, not from one and then another".into(),
            )),
            Go::Start(input) => self.prepare_start(thread, at, input, false).await,
            Go::Restart(input) => self.prepare_start(thread, at, input, true).await,
            Go::StartAt { input, node } => {
                let to = self.goto_target(&node)?;
                match self.prepare_start(thread, at, input, true).await? {
                    Plan::Start {
                        live,
                        writes,
                        found,
                        ..
                    } => Ok(Plan::Start {
                        live,
                        writes,
                        at: to,
                        found,
                    }),
                    other => Ok(other),
                }
            }
            Go::ResumeTo { payload, node } => {
                let to = self.goto_target(&node)?;
                let plan = self
                    .prepare_resume(thread, at, payload, false, false)
                    .await?;
                let (Plan::Answered { live, .. } | Plan::Continue { live, .. }) = &plan else {
                    return Err(RunError::Goto(format!(
                        "thread `{thread}` waits at an interrupt whose answer goes to a subgraph or whose time ran out; answer it without goto"
                    )));
                };
                if live.answer.is_some() || live.frontier.is_some() {
                    return Err(RunError::Goto(format!(
                        "thread `{thread}` waits inside parallel branches or for a tool's question: the run cannot leave from there; answer it without goto"
                    )));
                }
                match plan {
                    Plan::Answered {
                        live,
                        node,
                        applied,
                        start,
                        found,
                        ..
                    } => Ok(Plan::Answered {
                        live,
                        node,
                        applied,
                        next: Some((to, Some("goto".into()))),
                        start,
                        found,
                    }),
                    Plan::Continue { live, passed, .. } => Ok(Plan::Continue {
                        live,
                        next: to,
                        passed,
                    }),
                    _ => Err(RunError::Goto(format!(
                        "thread `{thread}` waits at an interrupt whose answer goes to a subgraph or whose time ran out; answer it without goto"
                    ))),
                }
            }
            Go::Resume { payload, force } => {
                self.prepare_resume(thread, at, payload, force, false).await
            }
            Go::Expire => self.prepare_resume(thread, at, None, false, true).await,
            Go::Stay => {
                let (live, last, _) = self.recorder.threads.load_live_at(thread, at).await?;
                let last = last.ok_or_else(|| RunError::UnknownThread(thread.into()))?;
                Ok(Plan::Stay { live, last })
            }
        }
    }

    /// The thread as a new run finds it, with the input written; a paused thread's
    /// interrupt dropped when `over_pause`, else a paused thread is refused.
    async fn prepare_start(
        &self,
        thread: &str,
        at: Option<u64>,
        input: Json,
        over_pause: bool,
    ) -> Result<Plan, RunError> {
        let Json::Object(fields) = input else {
            return Err(RunError::Input(format!(
                "expected an object, got {}",
                describe(&input)
            )));
        };
        let (mut live, last, forked) = self.recorder.threads.load_live_at(thread, at).await?;
        if let Some(last) = &last {
            if last.status == Status::Interrupted && !over_pause {
                let node = last.pending.as_ref().map_or("?", |p| &*p.node).to_string();
                return Err(RunError::Paused {
                    thread: thread.into(),
                    node,
                });
            }
            // A fork's run is numbered after every run of the thread already.
            if !forked {
                live.run = last.run + 1;
            }
        }
        // A new run starts afresh: its own limits, no failure being handled, no
        // breakpoint passed; only the state carries over.
        live.step = 0;
        live.tokens = 0;
        live.meter = Default::default();
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
        self.graph.check_input(&fields).map_err(RunError::Input)?;
        self.graph
            .check_configuration(&self.configuration)
            .map_err(RunError::Configuration)?;
        let configured = &self.configuration;
        // Each constant as this run has it: a configurable one as its configuration
        // gives it, the others as the graph does (a value an earlier run was given is
        // the earlier run's).
        let mut fields = fields;
        for (i, f) in self.graph.fields.iter().enumerate() {
            if !f.constant {
                continue;
            }
            let value = configured.get(&*f.name).unwrap_or(&f.default);
            if *live.state.values[i] != *value {
                fields.insert(f.name.to_string(), value.clone());
            }
        }
        let found = self
            .recorder
            .tells_found(&self.events)
            .then(|| live.state.clone());
        // The input's record follows the run's input checkpoint.
        let at = WrittenAt {
            seq: live.seq + 1,
            step: None,
        };
        let writes = write_fields(&self.graph, &mut live, fields, at).map_err(RunError::Input)?;
        Ok(Plan::Start {
            live,
            writes,
            at: Target::Node(self.graph.entry),
            found,
        })
    }

    /// Where `command.goto` sends the run (see [`crate::graph::Graph::goto_target`]).
    fn goto_target(&self, name: &str) -> Result<Target, RunError> {
        self.graph.goto_target(name).map_err(RunError::Goto)
    }

    /// `expired`: the interrupt's wait ran out ([`Go::Expire`]), whatever its deadline.
    async fn prepare_resume(
        &self,
        thread: &str,
        at: Option<u64>,
        payload: Option<Json>,
        force: bool,
        expired: bool,
    ) -> Result<Plan, RunError> {
        let threads = &self.recorder.threads;
        let (mut live, last, forked) = threads.load_live_at(thread, at).await?;
        let Some(last) = last.as_ref() else {
            return Err(RunError::UnknownThread(thread.into()));
        };
        live.elapsed_before = Duration::from_millis(last.elapsed_ms);
        match last.status {
            Status::Finished | Status::Failed => Err(RunError::NotPaused {
                thread: thread.into(),
                status: last.status.name(),
            }),
            Status::Stopped | Status::Running if expired => Err(RunError::CannotExpire {
                thread: thread.into(),
                why: format!("it is {}", last.status.name()),
            }),
            Status::Stopped | Status::Running => {
                if payload.is_some() {
                    return Err(RunError::UnexpectedPayload {
                        thread: thread.into(),
                    });
                }
                threads.check_graph(thread, last, None, force)?;
                threads.check_types(thread, &live, force)?;
                let next = threads.next_of(thread, &mut live, last.next.as_deref())?;
                Ok(Plan::Continue {
                    live,
                    next,
                    passed: None,
                })
            }
            Status::Interrupted => {
                let pending =
                    last.pending
                        .as_deref()
                        .cloned()
                        .ok_or_else(|| StoreError::Corrupt {
                            thread: thread.into(),
                            message: format!(
                                "checkpoint {} is interrupted and has no pending interrupt",
                                last.seq
                            ),
                        })?;
                // Interrupts of parallel branches that asked together: the answer's
                // `reference` says which it answers (the first, without one).
                let wanted = payload
                    .as_ref()
                    .and_then(|p| p.get("reference"))
                    .map(reference_text);
                let mut pending = match wanted {
                    Some(r) if pending.reference.as_ref() != Some(&r) => pending
                        .others
                        .iter()
                        .find(|o| o.reference.as_ref() == Some(&r))
                        .cloned()
                        .unwrap_or(pending),
                    _ => pending,
                };
                if expired {
                    let timed = self.graph.node_id(&pending.node).is_some_and(|id| {
                        matches!(&self.graph.node(id).body, Body::Interrupt(b) if b.on_timeout.is_some())
                    });
                    if !timed {
                        return Err(RunError::CannotExpire {
                            thread: thread.into(),
                            why: format!("`{}` has no `on_timeout`", pending.node),
                        });
                    }
                    // Its deadline is past: the plan takes the `on_timeout` route.
                    pending.deadline_ms = Some(0);
                }
                threads.check_graph(thread, last, Some(&pending), force)?;
                threads.check_types(thread, &live, force)?;
                let id =
                    self.graph
                        .node_id(&pending.node)
                        .ok_or_else(|| RunError::GraphChanged {
                            thread: thread.into(),
                            why: format!("the pending node `{}` is gone", pending.node),
                        })?;
                // Paused inside parallel branches: the answer completes the interrupt's
                // branch, and the others go on from where the record says they are.
                let mut next = last.next.as_deref();
                if let Some(text) = next
                    && text.contains(';')
                {
                    threads.next_of(thread, &mut live, Some(text))?;
                    live.branch = live
                        .frontier
                        .as_ref()
                        .and_then(|f| f.cursors.iter().position(|c| *c == Some(id)));
                    next = None;
                }
                let plan = self
                    .prepare_answer(live, id, pending, payload, next)
                    .await?;
                // The subgraph's thread has moved on from where the fork's record
                // paused: its answer would go to another question. A tool's question is
                // answered by running its node again as the same step, with the same
                // idempotency keys, which a fork's run (numbered anew) would not have.
                if forked && matches!(plan, Plan::Child { .. }) {
                    return Err(RunError::Fork(format!(
                        "checkpoint {} of thread `{thread}` waits inside a subgraph, which has gone on since; answer it from the thread's latest checkpoint",
                        last.seq
                    )));
                }
                if forked && matches!(&plan, Plan::Continue { live, .. } if live.answer.is_some()) {
                    return Err(RunError::Fork(format!(
                        "checkpoint {} of thread `{thread}` waits for the answer to a tool's question, which only its run can give (the tool would be called again under other idempotency keys); answer it from the thread's latest checkpoint",
                        last.seq
                    )));
                }
                Ok(plan)
            }
        }
    }

    async fn prepare_answer(
        &self,
        live: Live,
        id: NodeId,
        pending: Pending,
        payload: Option<Json>,
        next: Option<&str>,
    ) -> Result<Plan, RunError> {
        let node = self.graph.node(id);
        if let Some(bp) = &pending.breakpoint {
            // A breakpoint pause carries no answer: the person only lets the run go on.
            if payload.is_some() {
                return Err(RunError::UnexpectedPayload {
                    thread: live.thread.to_string(),
                });
            }
            let next = self.recorder.threads.target_of(&live.thread, next)?;
            return Ok(Plan::Continue {
                live,
                next,
                passed: Some((id, bp == "before")),
            });
        }
        if let Body::Graph(g) = &node.body {
            // The child checks the answer as its own resume would.
            self.check_subgraph_answer(g, &live.thread, &node.name, payload.clone())
                .await?;
            return Ok(Plan::Child {
                live,
                node: id,
                payload: payload.unwrap_or(Json::Null),
            });
        }
        if matches!(node.body, Body::Mcp(_))
            && pending.payload.get("kind").and_then(Json::as_str) == Some("elicitation")
        {
            let answer = check_elicited(&node.name, &pending.payload, payload)?;
            let mut live = live;
            live.answer = Some((id, Arc::new(answer)));
            // The node runs again as the same step: its calls keep their idempotency
            // keys, so a tool that acted before the question can tell.
            live.step = live.step.saturating_sub(1);
            // The node runs again; its server, asking again, gets the answer.
            return Ok(Plan::Continue {
                live,
                next: Target::Node(id),
                passed: None,
            });
        }
        let Body::Interrupt(body) = &node.body else {
            return Err(RunError::GraphChanged {
                thread: live.thread.to_string(),
                why: format!("`{}` is no longer an interrupt", node.name),
            });
        };
        if pending.deadline_ms.is_some_and(|d| now_ms() >= d)
            && let Some(to) = body.on_timeout
        {
            return Ok(Plan::TimedOut { live, node: id, to });
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
        let payload = Arc::new(payload);
        let writes: Vec<_> = body
            .output
            .map(|f| vec![(f, payload.clone())])
            .unwrap_or_default();
        // The answer is applied to a copy: an answer the output field, `set` or the
        // route cannot take is refused like one that does not fit the schema, and the
        // thread stays paused, as it was, for another answer instead of failing. A
        // taken answer's copy becomes the run (the original goes, so the two share no
        // field that a later write would then have to copy).
        // Only an event reports how long the node took.
        let start = self.events.is_on().then(Instant::now);
        let found = self
            .recorder
            .tells_found(&self.events)
            .then(|| live.state.clone());
        let mut trial = live.clone();
        drop(live);
        let max_steps = self.max_steps();
        let taken = apply(&self.graph, &mut trial, node, payload, writes, max_steps)
            .and_then(|applied| Ok((applied, route(&self.graph, &trial, node, max_steps)?)));
        let (applied, next) = taken.map_err(|message| RunError::AnswerRefused {
            node: node.name.to_string(),
            message,
        })?;
        Ok(Plan::Answered {
            live: trial,
            node: id,
            applied,
            next,
            start,
            found,
        })
    }

    /// Goes on from where [`Runner::begin`] left the run: the loop, after a subgraph's
    /// child takes its answer when it has one.
    pub(super) async fn execute(&self, mut begun: Begun) -> Result<Outcome, RunError> {
        loop {
            begun = match begun {
                Begun::Drive(live, next) => return self.drive(live, next).await,
                Begun::Ended(outcome) => return Ok(outcome),
                Begun::Child {
                    mut live,
                    node: id,
                    payload,
                } => {
                    let node = self.graph.node(id);
                    let start = self.events.is_on().then(Instant::now);
                    let Body::Graph(g) = &node.body else {
                        unreachable!("a child plan is made for a graph node")
                    };
                    let thread = live.thread.clone();
                    let step = self.resume_subgraph(g, &thread, &node.name, payload).await;
                    let flow = self.complete(&mut live, id, step, start).await?;
                    go_on(live, flow)
                }
            };
        }
    }

    /// Carries `plan` out up to where the loop takes over: its first records and
    /// events. Apart from the loop, so that the loop's future does not hold the plan.
    pub(super) async fn begin(&self, plan: Plan) -> Result<Begun, RunError> {
        let started = |live: &Live| {
            self.events.emit(|| Event::RunStarted {
                thread: live.thread.clone(),
                graph: self.graph.name.clone(),
                run: live.run,
                resumed: true,
            })
        };
        Ok(match plan {
            Plan::Stay { live, last } => {
                started(&live);
                // At a pause, LangGraph's `values` stream tells the state, then the
                // state with the interrupt still waiting.
                if last.pending.is_some() {
                    self.recorder.tell_found(&live.state, &self.events);
                }
                self.recorder.tell_standing(&live, &last, &self.events);
                Begun::Ended(standing(last))
            }
            Plan::Start {
                mut live,
                writes,
                at: entry,
                found,
            } => {
                self.recorder
                    .record_start(&mut live, entry, writes, found.as_ref(), &self.events)
                    .await?;
                self.events.emit(|| Event::RunStarted {
                    thread: live.thread.clone(),
                    graph: self.graph.name.clone(),
                    run: live.run,
                    resumed: false,
                });
                Begun::Drive(live, entry)
            }
            Plan::Continue {
                mut live,
                next,
                passed,
            } => {
                started(&live);
                self.recorder.tell_found(&live.state, &self.events);
                if let Some((id, before)) = passed {
                    self.events.emit(|| Event::Resumed {
                        node: self.graph.node(id).name.clone(),
                        timed_out: false,
                    });
                    if before {
                        live.past_breakpoint = Some(id);
                    }
                }
                Begun::Drive(live, next)
            }
            Plan::TimedOut { mut live, node, to } => {
                let node = self.graph.node(node);
                started(&live);
                self.recorder.tell_found(&live.state, &self.events);
                self.events.emit(|| Event::Resumed {
                    node: node.name.clone(),
                    timed_out: true,
                });
                self.take_edge(&mut live, node, to, Vec::new(), "timeout")
                    .await?;
                live.branch = None;
                Begun::Drive(live, to)
            }
            Plan::Child {
                live,
                node,
                payload,
            } => {
                started(&live);
                self.recorder.tell_found(&live.state, &self.events);
                self.events.emit(|| Event::Resumed {
                    node: self.graph.node(node).name.clone(),
                    timed_out: false,
                });
                Begun::Child {
                    live,
                    node,
                    payload,
                }
            }
            Plan::Answered {
                mut live,
                node,
                applied,
                next,
                start,
                found,
            } => {
                let node = self.graph.node(node);
                started(&live);
                // Told and let go before the answer's writes, which would otherwise copy
                // what they change.
                if let Some(found) = found {
                    self.recorder.tell_found(&found, &self.events);
                }
                self.events.emit(|| Event::Resumed {
                    node: node.name.clone(),
                    timed_out: false,
                });
                let flow = self
                    .commit(&mut live, node, applied, next, None, start, false)
                    .await?;
                live.branch = None;
                go_on(live, flow)
            }
        })
    }
}

/// Where a plan leaves the run once its first records are written.
pub(super) enum Begun {
    /// The loop goes on from this node.
    Drive(Live, Target),
    /// A subgraph's child takes the answer first.
    Child {
        live: Live,
        node: NodeId,
        payload: Json,
    },
    /// The step a resume completed ended or paused the run.
    Ended(Outcome),
}

/// Goes on after the step a resume completed: along its edge, into its branches
/// (their join next), or back with how the run ended or paused again.
fn go_on(live: Live, flow: Flow) -> Begun {
    match flow {
        Flow::Next(t) => Begun::Drive(live, t),
        Flow::Return(o) => Begun::Ended(o),
        Flow::Fork => {
            let join = live.frontier.as_ref().map(|f| f.join);
            Begun::Drive(live, join.map_or(Target::End, Target::Node))
        }
    }
}

/// An answer to what an MCP server asked (an elicitation), checked: accepted content
/// must fit the schema the server sent, once the fields it leaves out take their
/// defaults. What goes back to the server is that answer made whole.
fn check_elicited(node: &str, asked: &Json, payload: Option<Json>) -> Result<Json, RunError> {
    use crate::tool::elicitation::{Action, fill_defaults, parse};
    let payload = payload.ok_or_else(|| RunError::MissingPayload {
        node: node.to_string(),
    })?;
    let invalid = |errors: String| RunError::InvalidPayload {
        node: node.to_string(),
        errors,
    };
    let (action, content) = parse(&payload).map_err(invalid)?;
    let (Action::Accept, Some(mut content)) = (action, content) else {
        return Ok(payload);
    };
    if let Some(schema) = asked.get("requested_schema").filter(|s| !s.is_null()) {
        fill_defaults(&mut content, schema);
        let validator = jsonschema::validator_for(schema)
            .map_err(|e| invalid(format!("the server's schema cannot be used: {e}")))?;
        crate::json_schema::check(&validator, &content).map_err(invalid)?;
    }
    Ok(json!({ "action": "accept", "content": content }))
}

/// Where a thread that stands at `last` is, as a run's outcome.
fn standing(last: Checkpoint) -> Outcome {
    match (last.status, last.pending) {
        (Status::Interrupted, Some(p)) => Outcome::Interrupted {
            node: p.node.to_string(),
            payload: p.payload,
        },
        (Status::Stopped | Status::Running, _) => Outcome::Stopped {
            next: last.next.map(|n| n.to_string()),
            steps: 0,
        },
        _ => Outcome::Finished {
            outcome: last.outcome.unwrap_or_default(),
            response: None,
            steps: 0,
        },
    }
}
