//! A run's events as server-sent events, in the LangGraph stream modes.
//!
//! Every reader walks the run's log from its first event, keeping what the modes need
//! to know (the node being run, whether it streamed its reply), and writes the parts
//! of its modes from where it starts: the start, or just after the `Last-Event-ID`
//! it was given. An event of the log can make several parts (a checkpoint makes
//! `values`, `updates`, `tasks`...); each part's id is `<event>-<part>`, numbered over
//! every mode whether asked for or not, so an id names the same part for every reader.
//!
//! Frames are `event:`, one `data:` line of compact JSON, `id:`, a blank line. A quiet
//! stream gets a `: heartbeat` comment line (with no blank line after it: the JS SDK
//! turns a blank line after an id into an empty event). The stream ends when the run
//! does, with an `error` event first if it failed.

use super::modes::Modes;
use super::shared::{Framed, Readers, Shared};
use super::translate::{Data, Translator};
use crate::host::{Host, LogEntry, RunHandle};
use crate::run::Event;
use crate::store::RunStatus;
use axum::body::Bytes;
use serde_json::{Value as Json, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

pub(super) use super::modes::mode_names;

/// What `/wait` and `/join` answer once a run ended: the state after its last
/// checkpoint (with `__interrupt__` when it paused at one), or `__error__` when it
/// failed; a run that wrote nothing answers with its thread's values.
pub(super) async fn result(host: &Host, run: &RunHandle) -> Json {
    match run.end() {
        Some(end) if end.status == RunStatus::Error => {
            return json!({ "__error__": { "error": "RunError", "message": end.error } });
        }
        // Stopped by a shutdown: it goes on when the server is back.
        Some(end) if end.status == RunStatus::Pending => {
            return json!({ "__error__": { "error": "Unavailable", "message": "the server stopped before the run ended; it goes on when the server is back: join it again then" } });
        }
        _ => {}
    }
    // The state is followed through the log with no part built, and shown once, after
    // the last checkpoint: building the values of every checkpoint to keep the last
    // cost a copy of the whole state per step.
    let (entries, _) = run.log.read_from(0);
    let mut translator = Translator::keeping_state(host, run);
    let mut last = None;
    for entry in &entries {
        translator.parts(entry);
        if let Event::Saved { record, .. } = &entry.event {
            last = Some(record);
        }
    }
    let values = match last {
        Some(record) => translator.values_json(record),
        None => host
            .thread(&run.thread)
            .await
            .ok()
            .map(|v| super::threads::thread_json(host, &v)["values"].clone())
            .filter(|v| !v.is_null())
            .unwrap_or_else(|| json!({})),
    };
    output_only(host, &run.assistant, values)
}

/// A run's result as its graph's `[graph] output` gives it: the fields it lists (and
/// `__interrupt__`, `__error__`), the others private to the graph.
pub(super) fn output_only(host: &Host, graph: &str, mut values: Json) -> Json {
    let Some(g) = host.graphs().get(graph).and_then(|s| s.current) else {
        return values;
    };
    if !g.output_declared {
        return values;
    }
    if let Json::Object(o) = &mut values {
        o.retain(|k, _| k.starts_with("__") || g.field_id(k).is_some_and(|id| g.field(id).output));
    }
    values
}

/// Where a reader starts: after part `part` of event `event` of this process's log
/// (none: the beginning; `-1`, an id it cannot read, or one another process gave).
pub(super) fn parse_last_event_id(id: Option<&str>, epoch: &str) -> Option<(u64, usize)> {
    let (id, from) = id?.trim().split_once('.')?;
    if from != epoch {
        return None;
    }
    let (e, p) = id.split_once('-')?;
    Some((e.parse().ok()?, p.parse().ok()?))
}

/// From this size on, a part's data is not copied into its frame (a `values` part of
/// a long conversation).
const BIG: usize = 16 << 10;

fn frame(event: &str, data: &[u8], id: Option<&str>) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 48);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    if let Some(id) = id {
        out.extend_from_slice(b"\nid: ");
        out.extend_from_slice(id.as_bytes());
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Cancels the run when the reader goes away, if it was asked to.
struct CancelOnDrop {
    host: Host,
    run: Arc<RunHandle>,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed && self.run.end().is_none() {
            cancel_apart(&self.host, &self.run);
        }
    }
}

/// Interrupts `run` from a destructor (its client went away): the cancel writes to the
/// store, so it goes on in a task of its own.
pub(super) fn cancel_apart(host: &Host, run: &RunHandle) {
    let (host, thread, id) = (host.clone(), run.thread.clone(), run.id.clone());
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _ = host
                .cancel(&thread, &id, crate::host::CancelAction::Interrupt)
                .await;
        });
    }
}

/// One reader of a run's stream.
struct Follow {
    run: Arc<RunHandle>,
    modes: Modes,
    translator: Translator,
    /// The next log event to translate, and the parts of the current one to skip.
    next: u64,
    resume: Option<(u64, usize)>,
    queue: VecDeque<Bytes>,
    /// This server process's mark in event ids: an id from another process names
    /// events of a log that is gone.
    epoch: String,
    started: bool,
    ended: bool,
    heartbeat: Duration,
    guard: CancelOnDrop,
    /// The frames this reader shares with the others following the run in its modes.
    shared: Arc<Shared>,
}

impl Follow {
    async fn next_bytes(&mut self) -> Option<Bytes> {
        loop {
            if let Some(b) = self.queue.pop_front() {
                return Some(b);
            }
            if self.ended {
                return None;
            }
            if !self.started {
                self.started = true;
                let data =
                    json!({ "run_id": self.run.id, "thread_id": self.run.thread, "attempt": 1 });
                return Some(frame(
                    "metadata",
                    &serde_json::to_vec(&data).unwrap_or_default(),
                    None,
                ));
            }
            let (entries, closed) = self.run.log.read_from(self.next);
            if entries.is_empty() {
                if closed {
                    self.ended = true;
                    self.guard.armed = false;
                    if let Some(end) = self.run.end()
                        && end.status == RunStatus::Error
                    {
                        let data = json!({
                            "error": "RunError",
                            "message": end.error.unwrap_or_default(),
                        });
                        return Some(frame(
                            "error",
                            &serde_json::to_vec(&data).unwrap_or_default(),
                            None,
                        ));
                    }
                    continue;
                }
                let wait = self.run.log.wait_past(self.next);
                if tokio::time::timeout(self.heartbeat, wait).await.is_err() {
                    return Some(Bytes::from_static(b": heartbeat\n"));
                }
                continue;
            }
            for entry in entries {
                self.next = entry.index + 1;
                // Another reader's frames of this event, or this reader's, made now and
                // left for the others.
                let framed = match self.shared.get(entry.index) {
                    Some(framed) => {
                        self.translator.follow(&entry);
                        framed
                    }
                    None => {
                        let framed = self.frames(&entry);
                        self.shared.put(entry.index, &framed);
                        framed
                    }
                };
                for f in framed.iter() {
                    let skip = self
                        .resume
                        .is_some_and(|(e, p)| entry.index < e || (entry.index == e && f.part <= p));
                    if !skip {
                        self.queue.extend(f.chunks.iter().cloned());
                    }
                }
            }
        }
    }

    /// The frames of the reader's modes that a log event makes.
    fn frames(&mut self, entry: &Arc<LogEntry>) -> Arc<[Framed]> {
        let mut out = Vec::new();
        for (k, part) in self.translator.parts(entry).into_iter().enumerate() {
            if !self.modes.wants(part.mode) {
                continue;
            }
            let id = format!("{}-{k}.{}", entry.index, self.epoch);
            let data = match part.data {
                Data::Json(v) => serde_json::to_vec(&v).unwrap_or_default(),
                Data::Text(text) => text,
            };
            let chunks = if data.len() < BIG {
                vec![frame(part.event, &data, Some(&id))]
            } else {
                // Sent as it is, between its frame's head and tail, rather than
                // copied into one buffer with them.
                vec![
                    Bytes::from(format!("event: {}\ndata: ", part.event)),
                    Bytes::from(data),
                    Bytes::from(format!("\nid: {id}\n\n")),
                ]
            };
            out.push(Framed { part: k, chunks });
        }
        out.into()
    }
}

/// The body of an event stream of `run` from just after `last_event_id`.
pub(super) fn body(
    host: &Host,
    readers: &Readers,
    run: Arc<RunHandle>,
    modes: Modes,
    last_event_id: Option<&str>,
    cancel_on_disconnect: bool,
    heartbeat: Duration,
) -> axum::body::Body {
    let follow = follow(
        host,
        readers,
        run,
        modes,
        last_event_id,
        cancel_on_disconnect,
        heartbeat,
    );
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        f.next_bytes()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), f))
    });
    axum::body::Body::from_stream(stream)
}

/// The stream of every run of `thread` from now on, one after the other, as
/// LangGraph's `GET /threads/{id}/stream` sends it: each run's own stream (in the
/// stream modes it was made with) and then `metadata {status: "run_done", run_id}`;
/// a heartbeat while no run is in flight. Open until the reader goes away, the thread
/// is deleted or the server shuts down.
pub(super) fn thread_body(
    host: &Host,
    readers: &Arc<Readers>,
    thread: &str,
    heartbeat: Duration,
) -> axum::body::Body {
    struct Thread {
        host: Host,
        readers: Arc<Readers>,
        thread: String,
        heartbeat: Duration,
        current: Option<(Follow, String)>,
        seen: std::collections::HashSet<String>,
        quiet_since: std::time::Instant,
        /// When the reader came (Unix milliseconds).
        since_ms: u64,
    }
    impl Thread {
        /// None: the thread is gone, or the server is shutting down.
        async fn next_bytes(&mut self) -> Option<Bytes> {
            loop {
                if let Some((follow, id)) = &mut self.current {
                    match follow.next_bytes().await {
                        Some(b) => return Some(b),
                        None => {
                            let data = json!({ "status": "run_done", "run_id": id });
                            self.current = None;
                            self.quiet_since = std::time::Instant::now();
                            return Some(frame(
                                "metadata",
                                &serde_json::to_vec(&data).unwrap_or_default(),
                                None,
                            ));
                        }
                    }
                }
                if self.host.is_closing() {
                    return None;
                }
                // The thread's runs in flight, and those made since the reader came,
                // oldest first: a run made and ended between two looks is followed
                // too, from its log.
                let mut runs = match self.host.runs(&self.thread).await {
                    Ok(runs) => runs,
                    Err(crate::host::HostError::NotFound(_)) => return None,
                    // The store failing for a moment: looked at again.
                    Err(_) => Vec::new(),
                };
                runs.reverse();
                for record in runs {
                    let id = record.id;
                    if self.seen.contains(&id)
                        || !(record.created_ms >= self.since_ms || record.status.in_flight())
                    {
                        continue;
                    }
                    let Some(run) = self.host.handle(&id).await else {
                        continue;
                    };
                    self.seen.insert(id.clone());
                    let modes = Modes::parse(&run.request.stream_mode).unwrap_or_default();
                    let f = follow(
                        &self.host,
                        &self.readers,
                        run,
                        modes,
                        None,
                        false,
                        self.heartbeat,
                    );
                    self.current = Some((f, id));
                    break;
                }
                if self.current.is_some() {
                    continue;
                }
                // Runs are looked for every 50 ms while none is in flight.
                tokio::time::sleep(Duration::from_millis(50)).await;
                if self.quiet_since.elapsed() >= self.heartbeat {
                    self.quiet_since = std::time::Instant::now();
                    return Some(Bytes::from_static(b": heartbeat\n"));
                }
            }
        }
    }
    let state = Thread {
        host: host.clone(),
        readers: readers.clone(),
        thread: thread.to_string(),
        heartbeat,
        current: None,
        seen: Default::default(),
        quiet_since: std::time::Instant::now(),
        since_ms: crate::host::now_ms(),
    };
    let stream = futures_util::stream::unfold(state, |mut t| async move {
        t.next_bytes()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), t))
    });
    axum::body::Body::from_stream(stream)
}

/// A reader of `run`'s stream from just after `last_event_id`.
fn follow(
    host: &Host,
    readers: &Readers,
    run: Arc<RunHandle>,
    modes: Modes,
    last_event_id: Option<&str>,
    cancel_on_disconnect: bool,
    heartbeat: Duration,
) -> Follow {
    let epoch = host.epoch().to_string();
    Follow {
        translator: Translator::new(host, &run, modes),
        shared: readers.join(&run.id, modes),
        modes,
        next: 0,
        resume: parse_last_event_id(last_event_id, &epoch),
        epoch,
        queue: VecDeque::new(),
        started: false,
        ended: false,
        heartbeat,
        guard: CancelOnDrop {
            host: host.clone(),
            run: run.clone(),
            armed: cancel_on_disconnect,
        },
        run,
    }
}
