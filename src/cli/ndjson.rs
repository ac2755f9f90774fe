//! A run's events as NDJSON lines for programs (`--json`), in either of the two
//! published formats:
//!
//! - format 1 (`--json`, `schemas/events.schema.json`): every line carries the
//!   envelope (`v`, `ts`, `thread`, `run`) and every field of its event;
//! - format 2 (`--json=2`, `schemas/events.v2.schema.json`): the envelope once, on the
//!   run's `run_started`, then `t` (milliseconds since it) on each line; fields at
//!   their default left out; a node's one route carried on its `node_finished`. The
//!   same facts in about half the bytes (issue 31: ~3.6 lines a step, where format 1's
//!   envelope alone is 61 bytes a line).
//!
//! Both write each line straight from its event into the caller's buffer, no JSON
//! tree built first: an event line costs its event.

use super::now_ms;
use std::io::Write;
use std::sync::Arc;
use switchyard::run::Event;

type Written = Result<(), Box<dyn std::error::Error>>;

/// The NDJSON format asked for.
pub(super) enum Ndjson {
    V1(Envelope),
    V2(Compact),
}

impl Ndjson {
    /// The writer of format `version` (1 or 2).
    pub(super) fn new(version: u8) -> Self {
        if version >= 2 {
            Ndjson::V2(Compact::default())
        } else {
            Ndjson::V1(Envelope::default())
        }
    }

    /// Appends the lines `e` makes to `out` (format 2 may hold a line back until the
    /// next event shows how it ends: [`Ndjson::finish`] writes it).
    pub(super) fn line(&mut self, e: &Event, out: &mut Vec<u8>) {
        match self {
            Ndjson::V1(v1) => v1.line(e, out),
            Ndjson::V2(v2) => v2.line(e, out),
        }
    }

    /// Appends whatever is held back: the run ended or paused.
    pub(super) fn finish(&mut self, out: &mut Vec<u8>) {
        if let Ndjson::V2(v2) = self {
            v2.release(out, true);
        }
    }
}

/// Appends one line made by `write`, or nothing when it fails (an event that cannot
/// be written as JSON).
fn one_line(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>) -> Written) {
    let start = out.len();
    if write(out).is_ok() {
        out.push(b'\n');
    } else {
        out.truncate(start);
    }
}

/// Writes `e`'s fields after a line's head (`{"t":12` or the envelope): its
/// `{"event":...}` object with the opening brace turned into a comma.
fn event_fields(e: &Event, out: &mut Vec<u8>) -> Written {
    let at = out.len();
    serde_json::to_writer(&mut *out, e)?;
    out[at] = b',';
    Ok(())
}

/// Format 1: what each line carries besides its event: the thread and the run, from
/// the run's `run_started` (its first event). Both are written out once, when they
/// change, and copied into each line as bytes: an event line costs its event, not its
/// envelope.
pub(super) struct Envelope {
    /// `{"v":1,"ts":`.
    head: Vec<u8>,
    /// `,"thread":"t1","run":0` (both null before the run starts).
    tail: Vec<u8>,
}

impl Default for Envelope {
    fn default() -> Self {
        Envelope {
            head: b"{\"v\":1,\"ts\":".to_vec(),
            tail: b",\"thread\":null,\"run\":null".to_vec(),
        }
    }
}

/// `,"thread":"t1","run":0`.
fn thread_and_run(thread: &str, run: u64) -> Option<Vec<u8>> {
    let mut tail = b",\"thread\":".to_vec();
    serde_json::to_writer(&mut tail, thread).ok()?;
    tail.extend_from_slice(b",\"run\":");
    tail.extend_from_slice(itoa::Buffer::new().format(run).as_bytes());
    Some(tail)
}

/// `run_started`'s own fields after the envelope (its thread and run are the
/// envelope's, already written).
fn run_started_fields(graph: &str, resumed: bool, out: &mut Vec<u8>) -> Written {
    out.extend_from_slice(b",\"event\":\"run_started\",\"graph\":");
    serde_json::to_writer(&mut *out, graph)?;
    write!(out, ",\"resumed\":{resumed}}}")?;
    Ok(())
}

impl Envelope {
    /// Appends `e` as one line: `v`, `ts` (Unix milliseconds when the line was made),
    /// `thread` and `run` first, then the event's own fields, each once.
    fn line(&mut self, e: &Event, out: &mut Vec<u8>) {
        if let Event::RunStarted { thread, run, .. } = e
            && let Some(tail) = thread_and_run(thread, *run)
        {
            self.tail = tail;
        }
        one_line(out, |out| {
            out.extend_from_slice(&self.head);
            out.extend_from_slice(itoa::Buffer::new().format(now_ms()).as_bytes());
            out.extend_from_slice(&self.tail);
            match e {
                Event::RunStarted { graph, resumed, .. } => {
                    run_started_fields(graph, *resumed, out)
                }
                _ => event_fields(e, out),
            }
        });
    }
}

/// Format 2. Its lines:
///
/// - `run_started` carries the envelope as in format 1 (`"v":2`, `ts`, `thread`,
///   `run`); every later line starts `{"t":MS,` (milliseconds since that `ts`) and has
///   no `v`, `thread` or `run`. (A line before any `run_started` has `ts` instead.)
/// - A field at its default is left out: `node_finished`'s `skipped` when false,
///   `route_taken`'s `case` when null, `tool_call`'s `attempt` when 1 and `is_error`
///   when false, `llm_invocation`'s `attempt` when 1 and `cache_hit` when false.
/// - When exactly one route leaves a node, its `node_finished` carries it (`to`, and
///   `case` unless null) and no `route_taken` line is written; the routes of a fork
///   are `route_taken` lines as before.
/// - Every other event, and the events inside `subgraph`, as in format 1.
#[derive(Default)]
pub(super) struct Compact {
    /// The `ts` of the last `run_started`.
    base: Option<u64>,
    /// A `node_finished` line without its closing brace, held until the next event
    /// shows whether exactly one route leaves its node.
    held: Vec<u8>,
    /// The held line's node.
    held_node: Option<Arc<str>>,
    /// The first route from the held node: its `t`, its `to` and its `case`.
    route: Option<(u64, Arc<str>, Option<String>)>,
}

impl Compact {
    fn line(&mut self, e: &Event, out: &mut Vec<u8>) {
        let now = now_ms();
        if let Some(node) = &self.held_node {
            match e {
                Event::RouteTaken { from, to, case } if from == node => {
                    if self.route.is_none() {
                        self.route = Some((now, to.clone(), case.clone()));
                        return;
                    }
                    // A fork: each of its routes is a line of its own.
                    self.release(out, false);
                }
                _ => self.release(out, true),
            }
        }
        match e {
            Event::RunStarted {
                thread,
                graph,
                run,
                resumed,
            } => {
                self.base = Some(now);
                one_line(out, |out| {
                    out.extend_from_slice(b"{\"v\":2,\"ts\":");
                    out.extend_from_slice(itoa::Buffer::new().format(now).as_bytes());
                    out.extend_from_slice(&thread_and_run(thread, *run).ok_or("thread")?);
                    run_started_fields(graph, *resumed, out)
                });
            }
            Event::NodeStarted { node, step } => one_line(out, |out| {
                self.head(now, out);
                out.extend_from_slice(b",\"event\":\"node_started\",\"node\":");
                serde_json::to_writer(&mut *out, &**node)?;
                out.extend_from_slice(b",\"step\":");
                out.extend_from_slice(itoa::Buffer::new().format(*step).as_bytes());
                out.push(b'}');
                Ok(())
            }),
            Event::NodeFinished {
                node,
                step,
                duration_us,
                writes,
                skipped,
            } => {
                let mut held = std::mem::take(&mut self.held);
                held.clear();
                let written = (|| -> Written {
                    self.head(now, &mut held);
                    held.extend_from_slice(b",\"event\":\"node_finished\",\"node\":");
                    serde_json::to_writer(&mut held, &**node)?;
                    held.extend_from_slice(b",\"step\":");
                    held.extend_from_slice(itoa::Buffer::new().format(*step).as_bytes());
                    held.extend_from_slice(b",\"duration_us\":");
                    held.extend_from_slice(itoa::Buffer::new().format(*duration_us).as_bytes());
                    held.extend_from_slice(b",\"writes\":");
                    serde_json::to_writer(&mut held, writes)?;
                    if *skipped {
                        held.extend_from_slice(b",\"skipped\":true");
                    }
                    Ok(())
                })();
                if written.is_ok() {
                    self.held = held;
                    self.held_node = Some(node.clone());
                    self.route = None;
                }
            }
            Event::RouteTaken { from, to, case } => one_line(out, |out| {
                self.route_line(now, from, to, case.as_deref(), out)
            }),
            Event::ToolCall {
                node,
                server,
                tool,
                arguments,
                duration_ms,
                attempt,
                is_error,
                result,
                ..
            } => one_line(out, |out| {
                self.head(now, out);
                out.extend_from_slice(b",\"event\":\"tool_call\",\"node\":");
                serde_json::to_writer(&mut *out, &**node)?;
                out.extend_from_slice(b",\"server\":");
                serde_json::to_writer(&mut *out, server)?;
                out.extend_from_slice(b",\"tool\":");
                serde_json::to_writer(&mut *out, tool)?;
                out.extend_from_slice(b",\"arguments\":");
                serde_json::to_writer(&mut *out, arguments)?;
                out.extend_from_slice(b",\"duration_ms\":");
                out.extend_from_slice(itoa::Buffer::new().format(*duration_ms).as_bytes());
                if *attempt != 1 {
                    out.extend_from_slice(b",\"attempt\":");
                    out.extend_from_slice(itoa::Buffer::new().format(*attempt).as_bytes());
                }
                if *is_error {
                    out.extend_from_slice(b",\"is_error\":true");
                }
                if let Some(result) = result {
                    out.extend_from_slice(b",\"result\":");
                    serde_json::to_writer(&mut *out, result)?;
                }
                out.push(b'}');
                Ok(())
            }),
            Event::LlmInvocation {
                node,
                model,
                tokens_in,
                tokens_out,
                cache_hit,
                latency_ms,
                attempt,
                messages,
                reply,
                ..
            } => one_line(out, |out| {
                self.head(now, out);
                out.extend_from_slice(b",\"event\":\"llm_invocation\",\"node\":");
                serde_json::to_writer(&mut *out, &**node)?;
                out.extend_from_slice(b",\"model\":");
                serde_json::to_writer(&mut *out, model)?;
                write!(
                    out,
                    ",\"tokens_in\":{tokens_in},\"tokens_out\":{tokens_out},\"latency_ms\":{latency_ms}"
                )?;
                if *cache_hit {
                    out.extend_from_slice(b",\"cache_hit\":true");
                }
                if *attempt != 1 {
                    write!(out, ",\"attempt\":{attempt}")?;
                }
                if let Some(messages) = messages {
                    out.extend_from_slice(b",\"messages\":");
                    serde_json::to_writer(&mut *out, messages)?;
                }
                if let Some(reply) = reply {
                    out.extend_from_slice(b",\"reply\":");
                    serde_json::to_writer(&mut *out, reply)?;
                }
                out.push(b'}');
                Ok(())
            }),
            _ => one_line(out, |out| {
                self.head(now, out);
                event_fields(e, out)
            }),
        }
    }

    /// `{"t":12` (or `{"ts":...` before any `run_started`).
    fn head(&self, now: u64, out: &mut Vec<u8>) {
        match self.base {
            Some(base) => {
                out.extend_from_slice(b"{\"t\":");
                out.extend_from_slice(
                    itoa::Buffer::new()
                        .format(now.saturating_sub(base))
                        .as_bytes(),
                );
            }
            None => {
                out.extend_from_slice(b"{\"ts\":");
                out.extend_from_slice(itoa::Buffer::new().format(now).as_bytes());
            }
        }
    }

    /// A `route_taken` line, without its line end.
    fn route_line(
        &self,
        now: u64,
        from: &str,
        to: &str,
        case: Option<&str>,
        out: &mut Vec<u8>,
    ) -> Written {
        self.head(now, out);
        out.extend_from_slice(b",\"event\":\"route_taken\",\"from\":");
        serde_json::to_writer(&mut *out, from)?;
        route_fields(to, case, out)?;
        out.push(b'}');
        Ok(())
    }

    /// Writes the held `node_finished` out: with its one route when `merge` and it had
    /// one, else closed as it is and followed by its route's own line.
    fn release(&mut self, out: &mut Vec<u8>, merge: bool) {
        let Some(node) = self.held_node.take() else {
            return;
        };
        let route = self.route.take();
        let start = out.len();
        out.extend_from_slice(&self.held);
        let written = (|| -> Written {
            match route {
                Some((_, to, case)) if merge => {
                    route_fields(&to, case.as_deref(), out)?;
                    out.extend_from_slice(b"}\n");
                }
                Some((t, to, case)) => {
                    out.extend_from_slice(b"}\n");
                    self.route_line(t, &node, &to, case.as_deref(), out)?;
                    out.push(b'\n');
                }
                None => out.extend_from_slice(b"}\n"),
            }
            Ok(())
        })();
        if written.is_err() {
            out.truncate(start);
        }
    }
}

/// `,"to":"b","case":"c"` (no `case` when it is null).
fn route_fields(to: &str, case: Option<&str>, out: &mut Vec<u8>) -> Written {
    out.extend_from_slice(b",\"to\":");
    serde_json::to_writer(&mut *out, to)?;
    if let Some(case) = case {
        out.extend_from_slice(b",\"case\":");
        serde_json::to_writer(&mut *out, case)?;
    }
    Ok(())
}
