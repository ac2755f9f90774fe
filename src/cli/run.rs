//! `switchyard run` and `switchyard resume`: drive a thread, print its events, answer
//! interrupts in place when a person is at the terminal.

use super::{StoreArg, exit};
use anyhow::Context;
use serde_json::Value as Json;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use switchyard::graph::{Body, Graph};
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::run::{Event, Outcome, RunError, Runner, answer};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// What `run` and `resume` share.
pub(crate) struct Common {
    pub(crate) store: StoreArg,
    pub(crate) max_steps: Option<u64>,
    pub(crate) json: bool,
    /// Where traces go, when anywhere.
    pub(crate) trace: Option<switchyard::telemetry::TraceOptions>,
    pub(crate) llm: switchyard::llm::LlmOptions,
}

pub(crate) struct RunArgs {
    pub(crate) file: PathBuf,
    pub(crate) input: Option<String>,
    pub(crate) thread: Option<String>,
    pub(crate) common: Common,
}

pub(crate) struct ResumeArgs {
    pub(crate) file: Option<PathBuf>,
    pub(crate) thread: String,
    pub(crate) payload: Option<String>,
    pub(crate) at: Option<u64>,
    pub(crate) force: bool,
    pub(crate) common: Common,
}

pub(crate) fn run(args: RunArgs) -> anyhow::Result<u8> {
    let input = match &args.input {
        Some(text) => read_json_arg(text, "--input")?,
        None => Json::Object(Default::default()),
    };
    let graph = match super::load_graph(&args.file)? {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let thread = args.thread.unwrap_or_else(new_thread_id);
    let session = Session::new(graph, &args.common)?;
    session.drive(&thread, Start::New(input))
}

pub(crate) fn resume(args: ResumeArgs) -> anyhow::Result<u8> {
    let payload = args
        .payload
        .as_deref()
        .map(|p| read_json_arg(p, "--payload"))
        .transpose()?;
    let store = args.common.store.open()?;
    let file = match args.file {
        Some(f) => f,
        None => super::inspect::recorded_graph(&*store, &args.thread)?,
    };
    let graph = match super::load_graph(&file)? {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let session = Session::with_store(graph, store, &args.common)?;
    let thread = match args.at {
        Some(seq) => {
            let new = format!("{}@{seq}", args.thread);
            match session.runner.fork(&args.thread, seq, &new) {
                Ok(()) => {
                    eprintln!(
                        "forked thread `{}` at checkpoint {seq} into `{new}`",
                        args.thread
                    )
                }
                // A fork made by an earlier `resume --at` whose answer was refused, and
                // nothing since: go on in it rather than refuse the retry.
                Err(RunError::ThreadExists(_))
                    if untouched_fork(&session.runner, &args.thread, seq, &new)? =>
                {
                    eprintln!("going on in the fork `{new}`")
                }
                Err(e) => return Err(e.into()),
            }
            new
        }
        None => args.thread,
    };
    session.drive(&thread, Start::Resume(payload, args.force))
}

/// Whether `fork` holds exactly the records of `thread` up to `seq`, nothing more.
fn untouched_fork(runner: &Runner, thread: &str, seq: u64, fork: &str) -> anyhow::Result<bool> {
    let original = runner.history(thread)?;
    let copy = runner.history(fork)?;
    let prefix: Vec<_> = original.iter().filter(|r| r.seq <= seq).collect();
    Ok(prefix.len() == copy.len()
        && prefix.iter().zip(&copy).all(|(a, b)| {
            (a.seq, &a.node, &a.next, &a.writes) == (b.seq, &b.node, &b.next, &b.writes)
        }))
}

/// `--input '{"a": 1}'` or `--input @file.json`.
pub(crate) fn read_json_arg(text: &str, flag: &str) -> anyhow::Result<Json> {
    let (text, from) = match text.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read `{path}` ({flag})"))?,
            format!("`{path}`"),
        ),
        None => (text.to_string(), flag.to_string()),
    };
    serde_json::from_str(&text).with_context(|| format!("{from} is not JSON"))
}

fn new_thread_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "t-{:x}",
        (nanos as u64) ^ u64::from(std::process::id()) << 48
    )
}

enum Start {
    New(Json),
    Resume(Option<Json>, bool),
}

struct Session {
    runner: Runner,
    events: UnboundedReceiver<Event>,
    /// What every NDJSON event line carries besides the event.
    envelope: Envelope,
    file: PathBuf,
    store: StoreArg,
    json: bool,
    trace: Option<switchyard::telemetry::TraceOptions>,
    /// The flags a printed resume command repeats, so the run goes on as it started
    /// (a replayed run is not resumed against the real endpoint).
    carried: Vec<String>,
}

impl Session {
    fn new(graph: Graph, common: &Common) -> anyhow::Result<Self> {
        let store = common.store.open()?;
        Self::with_store(graph, store, common)
    }

    fn with_store(
        graph: Graph,
        store: Arc<dyn switchyard::run::Checkpointer>,
        common: &Common,
    ) -> anyhow::Result<Self> {
        let file = graph.path.clone();
        let root = graph.root.clone();
        let llm = switchyard::llm::llm_client(&graph, &common.llm)?;
        let mut runner = Runner::new(Arc::new(graph), store)
            .with_max_steps(common.max_steps)
            .with_llm_content(common.trace.as_ref().is_some_and(|t| t.content))
            .with_llm(llm);
        let events = runner.events();
        let mut tools = McpClient::new(&root, BlobStore::new(common.store.blob_dir()));
        if let Some(tx) = runner.event_sender() {
            tools = tools.with_events(tx);
        }
        let runner = runner.with_tools(Arc::new(tools));
        let mut carried = Vec::new();
        if let Some(n) = common.max_steps {
            carried.push(format!("--max-steps {n}"));
        }
        if common.llm.stream {
            carried.push("--stream".into());
        }
        if let Some(f) = &common.llm.replay {
            carried.push(format!(
                "--replay {}",
                shell_quote(&f.display().to_string())
            ));
        }
        if common.json {
            carried.push("--json".into());
        }
        Ok(Session {
            runner,
            events,
            envelope: Envelope::default(),
            file,
            store: common.store.clone(),
            json: common.json,
            trace: common.trace.clone(),
            carried,
        })
    }

    fn drive(mut self, thread: &str, start: Start) -> anyhow::Result<u8> {
        super::runtime()?.block_on(async move {
            let tracer = self.trace.take().map(switchyard::telemetry::Tracer::start);
            self.envelope.tracer = tracer.clone();
            let result = self.drive_on(thread, start).await;
            if let Some(t) = tracer {
                t.end("cli");
                // Sent before the process ends; a collector that is down costs a warning.
                let (failed, last) = t.flush().await;
                if failed > 0 {
                    eprintln!(
                        "warning: the run's traces were not sent: {}",
                        last.unwrap_or_default()
                    );
                }
            }
            result
        })
    }

    async fn drive_on(&mut self, thread: &str, start: Start) -> anyhow::Result<u8> {
        {
            let stop_asked = watch_signals(self.runner.stop_handle());
            let interactive = std::io::stdin().is_terminal() && !self.json;
            let mut lines = interactive.then(stdin_lines);
            let mut outcome = match start {
                Start::New(input) => {
                    let fut = self.runner.start(thread, input);
                    pump(&mut self.events, self.json, &mut self.envelope, fut).await
                }
                Start::Resume(payload, force) => {
                    let fut = self.runner.resume(thread, payload, force);
                    pump(&mut self.events, self.json, &mut self.envelope, fut).await
                }
            };
            loop {
                match outcome {
                    Ok(Outcome::Interrupted { node, payload }) => {
                        let Some(lines) = lines.as_mut() else {
                            return self.paused(thread, &node, &payload);
                        };
                        let answer = tokio::select! {
                            a = self.ask(thread, &node, &payload, lines) => a?,
                            () = stop_asked.notified() => None,
                        };
                        let Some(answer) = answer else {
                            return self.paused(thread, &node, &payload);
                        };
                        let fut = self.runner.resume(thread, answer, false);
                        outcome = pump(&mut self.events, self.json, &mut self.envelope, fut).await;
                    }
                    // A person at the terminal may try again after a refused answer.
                    Err(
                        e @ (RunError::InvalidPayload { .. }
                        | RunError::WrongReference { .. }
                        | RunError::AnswerRefused { .. }),
                    ) if lines.is_some() => {
                        eprintln!("error: {e}");
                        let pending = self
                            .runner
                            .latest(thread)?
                            .pending
                            .context("the thread is no longer paused")?;
                        outcome = Ok(Outcome::Interrupted {
                            node: pending.node.to_string(),
                            payload: pending.payload,
                        });
                    }
                    Ok(Outcome::Finished { response, .. }) => {
                        if !self.json
                            && let Some(r) = response
                        {
                            let mut out = std::io::stdout().lock();
                            writeln!(out, "{r}")?;
                            out.flush()?;
                        }
                        return Ok(exit::OK);
                    }
                    Ok(Outcome::Stopped { .. }) => {
                        eprintln!("resume with: {}", self.resume_command(thread, None));
                        return Ok(exit::STOPPED);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }

    /// Asks the person at the terminal; `None` when stdin closed. A timed-out
    /// interrupt gives `Some(None)`: resume without an answer takes `on_timeout`.
    async fn ask(
        &self,
        thread: &str,
        node: &str,
        payload: &Json,
        lines: &mut UnboundedReceiver<String>,
    ) -> anyhow::Result<Option<Option<Json>>> {
        let graph = self.runner.graph();
        let pending = self
            .runner
            .latest(thread)?
            .pending
            .context("the thread is not paused")?;
        // An interrupt node's resume schema, or the schema an MCP server sent with its
        // question (an elicitation, answered with the content alone).
        let schema = graph
            .node_id(node)
            .and_then(|id| match &graph.node(id).body {
                Body::Interrupt(i) => i.resume_schema_json.clone(),
                _ => None,
            })
            .or_else(|| {
                (payload["kind"] == "elicitation")
                    .then(|| payload.get("requested_schema").cloned().map(Arc::new))
                    .flatten()
            });
        if pending.breakpoint.is_some() {
            eprint!("paused at breakpoint of `{node}`; press Enter to go on: ");
            std::io::stderr().flush()?;
            return Ok(lines.recv().await.map(|_| None));
        }
        let shape = answer::shape(schema.as_deref());
        eprintln!("{node} asks:");
        eprintln!("{}", serde_json::to_string_pretty(payload)?);
        loop {
            eprint!("{}> ", shape.hint());
            std::io::stderr().flush()?;
            let line = match pending.deadline_ms {
                Some(deadline) => {
                    // A millisecond past it: the resume that follows must find the
                    // time run out (the deadline is wall-clock, the wait monotonic).
                    let left = deadline.saturating_sub(now_ms()) + 1;
                    match tokio::time::timeout(std::time::Duration::from_millis(left), lines.recv())
                        .await
                    {
                        Ok(line) => line,
                        Err(_) => {
                            eprintln!("\nno answer in time");
                            return Ok(Some(None));
                        }
                    }
                }
                None => lines.recv().await,
            };
            let Some(line) = line else {
                eprintln!();
                return Ok(None);
            };
            match answer::payload(
                &shape,
                schema.as_deref(),
                pending.reference.as_deref(),
                &line,
            ) {
                Ok(p) => return Ok(Some(Some(p))),
                Err(e) => eprintln!("{e}"),
            }
        }
    }

    fn paused(&self, thread: &str, node: &str, payload: &Json) -> anyhow::Result<u8> {
        if !self.json {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{payload}")?;
            out.flush()?;
        }
        if matches!(self.store, StoreArg::Memory) {
            eprintln!(
                "paused at `{node}`; the memory store ends with this process, so the thread cannot be resumed (use --store sqlite:PATH)"
            );
        } else if matches!(self.store, StoreArg::None) {
            eprintln!(
                "paused at `{node}`; --store none keeps nothing, so the thread cannot be resumed (use --store sqlite:PATH)"
            );
        } else {
            // A breakpoint takes no answer; an interrupt does.
            let breakpoint = self
                .runner
                .latest(thread)?
                .pending
                .is_some_and(|p| p.breakpoint.is_some());
            let payload = (!breakpoint).then_some("<JSON>");
            eprintln!(
                "paused at `{node}`; resume with:\n  {}",
                self.resume_command(thread, payload)
            );
        }
        Ok(exit::PAUSED)
    }

    fn resume_command(&self, thread: &str, payload: Option<&str>) -> String {
        let mut cmd = format!(
            "switchyard resume {} --thread {}",
            shell_quote(&self.file.display().to_string()),
            shell_quote(thread)
        );
        if let Some(p) = payload {
            cmd.push_str(&format!(" --payload '{p}'"));
        }
        if !matches!(&self.store, StoreArg::Sqlite(p, _) if *p == default_store_path()) {
            cmd.push(' ');
            cmd.push_str(&self.store.flag());
        }
        for flag in &self.carried {
            cmd.push(' ');
            cmd.push_str(flag);
        }
        cmd
    }
}

fn default_store_path() -> PathBuf {
    match super::store::DEFAULT_STORE.parse() {
        Ok(StoreArg::Sqlite(p, _)) => p,
        _ => PathBuf::new(),
    }
}

pub(crate) fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./@:".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The version of the NDJSON event lines (`v`), as `schemas/events.schema.json`
/// describes them: a change a reader would notice gets a new one.
pub(crate) const EVENTS_VERSION: u64 = 1;

/// What each NDJSON line carries besides its event: the thread and the run, from the
/// run's `run_started` (its first event); and the tracer every event also goes to.
#[derive(Default)]
pub(crate) struct Envelope {
    thread: Option<Arc<str>>,
    run: Option<u64>,
    pub(crate) tracer: Option<switchyard::telemetry::Tracer>,
}

impl Envelope {
    /// `e` as one NDJSON line: `v`, `ts` (Unix milliseconds when it was written out),
    /// `thread` and `run` first, then the event's own fields.
    pub(crate) fn line(&mut self, e: &Event) -> Option<String> {
        if let Event::RunStarted { thread, run, .. } = e {
            self.thread = Some(thread.clone());
            self.run = Some(*run);
        }
        let Json::Object(fields) = serde_json::to_value(e).ok()? else {
            return None;
        };
        let mut out = serde_json::Map::with_capacity(fields.len() + 4);
        out.insert("v".into(), Json::from(EVENTS_VERSION));
        out.insert("ts".into(), Json::from(now_ms()));
        out.insert(
            "thread".into(),
            self.thread.as_deref().map_or(Json::Null, Json::from),
        );
        out.insert("run".into(), self.run.map_or(Json::Null, Json::from));
        out.extend(fields);
        serde_json::to_string(&Json::Object(out)).ok()
    }
}

/// Runs `fut` while printing the events it emits as they come.
async fn pump<T>(
    events: &mut UnboundedReceiver<Event>,
    json: bool,
    envelope: &mut Envelope,
    fut: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(fut);
    let result = loop {
        tokio::select! {
            biased;
            out = &mut fut => break out,
            Some(e) = events.recv() => print_event(&e, json, envelope),
        }
    };
    while let Ok(e) = events.try_recv() {
        print_event(&e, json, envelope);
    }
    result
}

fn print_event(e: &Event, json: bool, envelope: &mut Envelope) {
    if let Some(t) = &envelope.tracer {
        t.observe("cli", e);
    }
    // A closed stdout or stderr must not turn into a panic; the run goes on.
    if json {
        if let Some(line) = envelope.line(e) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    } else if !matches!(e, Event::TextDelta { .. }) {
        let _ = writeln!(std::io::stderr().lock(), "{}", e.human());
    } else {
        let _ = write!(std::io::stderr().lock(), "{}", e.human());
    }
}

/// Ctrl-C or SIGTERM asks the run to stop at the next node boundary (its MCP servers
/// are then shut down, their process groups with them); a second one quits at once
/// (the last checkpoint stands). The returned notice wakes a prompt waiting for an
/// answer: a paused thread needs no boundary to stop at.
fn watch_signals(stop: switchyard::run::StopHandle) -> std::sync::Arc<tokio::sync::Notify> {
    let asked = std::sync::Arc::new(tokio::sync::Notify::new());
    let notify = asked.clone();
    tokio::spawn(async move {
        let Some(code) = signal().await else { return };
        eprintln!("\nstopping at the next node boundary (again to quit now)");
        stop.stop();
        notify.notify_one();
        if signal().await.is_some() {
            std::process::exit(code);
        }
    });
    asked
}

/// The next Ctrl-C (exit code 130 to quit on) or SIGTERM (143); none when no signal
/// can be watched.
async fn signal() -> Option<i32> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).ok()?;
        tokio::select! {
            c = tokio::signal::ctrl_c() => c.ok().map(|()| 130),
            t = term.recv() => t.map(|()| 143),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.ok().map(|()| 130)
    }
}

/// Lines typed at the terminal, read on their own thread so a prompt can time out.
fn stdin_lines() -> UnboundedReceiver<String> {
    let (tx, rx) = unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        loop {
            line.clear();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx
                        .send(line.trim_end_matches(['\n', '\r']).to_string())
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    rx
}
