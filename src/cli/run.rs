//! `switchyard run` and `switchyard resume`: drive a thread, print its events, answer
//! interrupts in place when a person is at the terminal.

use super::answer;
use super::events::Printer;
use super::exit;
use super::flags::{SqliteFlags, TraceArgs, cli_default_store};
use super::store::StoreArg;
use super::{now_ms, read_json_arg, shell_quote};
use anyhow::Context;
use serde_json::Value as Json;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use switchyard::graph::{Body, Graph};
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::run::{Event, Go, Outcome, RunError, Runner};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The graph file to run.
    file: PathBuf,
    /// The input: a JSON object of state fields, or @FILE holding one.
    #[arg(long, value_name = "JSON|@FILE")]
    input: Option<String>,
    /// The thread to run on (default: a new one). A thread keeps its state across
    /// runs, like a chat session.
    #[arg(long)]
    thread: Option<String>,
    /// Values for the graph's `[configurable]` constants, as a JSON object (or @FILE
    /// holding one): `--context '{"MAX_TOOL_STEPS": 5}'`.
    #[arg(long, value_name = "JSON|@FILE")]
    context: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(clap::Args)]
pub(crate) struct ResumeArgs {
    /// The graph file (default: the one that wrote the thread).
    file: Option<PathBuf>,
    /// The paused thread.
    #[arg(long)]
    thread: String,
    /// The answer to the pending interrupt: JSON, or @FILE holding it.
    #[arg(long, value_name = "JSON|@FILE")]
    payload: Option<String>,
    /// Go on from checkpoint SEQ instead of the latest: the thread branches there, and
    /// the checkpoints after SEQ stay on their branch (`history` lists both).
    #[arg(long, value_name = "SEQ")]
    at: Option<u64>,
    /// Resume even though the graph file changed where the thread stands.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `run` and `resume` share.
#[derive(clap::Args)]
struct CommonArgs {
    /// Where checkpoints go.
    #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
    store: StoreArg,
    #[command(flatten)]
    sqlite: SqliteFlags,
    /// Node executions allowed in this run, instead of the graph's `max_steps`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_steps: Option<u64>,
    /// Print events as NDJSON on standard output: format 1 (every line whole), or
    /// `--json=2` (the envelope once, defaults left out: about half the bytes).
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, require_equals = true, default_missing_value = "1", value_parser = clap::value_parser!(u8).range(1..=2))]
    json: Option<u8>,
    /// Stream LLM replies: text deltas become events as they arrive.
    #[arg(long)]
    stream: bool,
    /// Save every LLM request and reply of the run to FILE (JSON lines).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer LLM requests from a recording, with no network.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    #[command(flatten)]
    trace: TraceArgs,
}

impl CommonArgs {
    /// The store, with `--durability` and `--compress`.
    fn store(&self) -> StoreArg {
        self.sqlite.apply(&self.store)
    }

    /// How the run reaches its model.
    fn llm(&self) -> switchyard::llm::LlmOptions {
        switchyard::llm::LlmOptions {
            record: self.record.clone(),
            replay: self.replay.clone(),
            stream: self.stream,
        }
    }
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
    let configuration = match &args.context {
        Some(text) => match read_json_arg(text, "--context")? {
            Json::Object(values) => values,
            other => {
                eprintln!(
                    "{} --context is a JSON object of the graph's configurable values, not `{other}`",
                    super::color::error_label()
                );
                return Ok(exit::USAGE);
            }
        },
        None => Default::default(),
    };
    let thread = args.thread.unwrap_or_else(new_thread_id);
    let mut session = Session::new(graph, &args.common)?;
    session.runner = session.runner.with_configuration(configuration);
    session.drive(&thread, Go::Start(input))
}

pub(crate) fn resume(args: ResumeArgs) -> anyhow::Result<u8> {
    let payload = args
        .payload
        .as_deref()
        .map(|p| read_json_arg(p, "--payload"))
        .transpose()?;
    let store = args.common.store().open()?;
    let file = match args.file {
        Some(f) => f,
        None => super::wait(super::recorded_graph(&*store, &args.thread))??,
    };
    let graph = match super::load_graph(&file)? {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let session = Session::with_store(graph, store, &args.common)?;
    let go = Go::Resume {
        payload,
        force: args.force,
    };
    // From an earlier checkpoint: the thread branches there (the records after it
    // stay, on their own branch); a refused answer writes nothing, so it can be tried
    // again the same way.
    let go = match args.at {
        Some(at) => Go::From {
            at,
            go: Box::new(go),
        },
        None => go,
    };
    session.drive(&args.thread, go)
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

struct Session {
    runner: Runner,
    events: UnboundedReceiver<Event>,
    /// Prints the events, for people or as NDJSON lines.
    printer: Printer,
    file: PathBuf,
    store: StoreArg,
    /// Events go out as NDJSON (`--json`), not as lines for people.
    json: bool,
    trace: Option<switchyard::telemetry::TraceOptions>,
    /// The flags a printed resume command repeats, so the run goes on as it started
    /// (a replayed run is not resumed against the real endpoint).
    carried: Vec<String>,
}

impl Session {
    fn new(graph: Graph, common: &CommonArgs) -> anyhow::Result<Self> {
        let store = common.store().open()?;
        Self::with_store(graph, store, common)
    }

    fn with_store(
        graph: Graph,
        store: Arc<dyn switchyard::store::Store>,
        common: &CommonArgs,
    ) -> anyhow::Result<Self> {
        let file = graph.path.clone();
        let root = graph.root.clone();
        let llm_options = common.llm();
        let trace = common.trace.resolve()?;
        let llm = switchyard::llm::llm_client(&graph, &llm_options)?;
        let (sampling_llm, sampling_model) = (llm.clone(), graph.llm.model.clone());
        // The cache lives beside the checkpoints (with `--store none`, nowhere).
        let mut runner = Runner::new(Arc::new(graph), store.clone())
            .with_cache(store.clone())
            .with_items(store, None)
            .with_max_steps(common.max_steps)
            .with_llm_content(trace.as_ref().is_some_and(|t| t.content))
            .with_llm(llm);
        let events = runner.events();
        let mut tools = McpClient::new(&root, BlobStore::new(common.store().blob_dir()));
        if let Some(tx) = runner.event_sender() {
            tools = tools.with_events(tx);
        }
        // The servers the graph lets ask for completions get the run's model.
        tools.set_sampler(Some(switchyard::mcp::Sampler {
            llm: sampling_llm,
            model: sampling_model,
        }));
        let runner = runner.with_tools(Arc::new(tools));
        let mut carried = Vec::new();
        if let Some(n) = common.max_steps {
            carried.push(format!("--max-steps {n}"));
        }
        if llm_options.stream {
            carried.push("--stream".into());
        }
        if let Some(f) = &llm_options.replay {
            carried.push(format!(
                "--replay {}",
                shell_quote(&f.display().to_string())
            ));
        }
        match common.json {
            Some(1) => carried.push("--json".into()),
            Some(v) => carried.push(format!("--json={v}")),
            None => {}
        }
        Ok(Session {
            runner,
            events,
            printer: Printer::new(common.json),
            file,
            store: common.store(),
            json: common.json.is_some(),
            trace,
            carried,
        })
    }

    fn drive(mut self, thread: &str, go: Go) -> anyhow::Result<u8> {
        super::runtime()?.block_on(async move {
            let tracer = self.trace.take().map(switchyard::telemetry::Tracer::start);
            self.printer.tracer = tracer.clone();
            let result = self.drive_on(thread, go).await;
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

    async fn drive_on(&mut self, thread: &str, go: Go) -> anyhow::Result<u8> {
        {
            let stop_asked = watch_signals(self.runner.stop_handle());
            let interactive = std::io::stdin().is_terminal() && !self.json;
            let mut lines = interactive.then(stdin_lines);
            // The checkpoint a `resume --at` answers, until a run from it writes: a
            // refused answer is asked again there, not at the thread's latest.
            let mut from = match &go {
                Go::From { at, .. } => Some(*at),
                _ => None,
            };
            let mut asked_again = false;
            let fut = self.runner.run(thread, go);
            let mut outcome = self.printer.pump(&mut self.events, fut).await;
            loop {
                match outcome {
                    Ok(Outcome::Interrupted { node, payload }) => {
                        // A new pause is the thread's latest checkpoint.
                        if !std::mem::take(&mut asked_again) {
                            from = None;
                        }
                        let Some(lines) = lines.as_mut() else {
                            return self.paused(thread, &node, &payload).await;
                        };
                        let answer = tokio::select! {
                            a = self.ask(thread, from, &node, &payload, lines) => a?,
                            () = stop_asked.notified() => None,
                        };
                        let Some(answer) = answer else {
                            return self.paused(thread, &node, &payload).await;
                        };
                        let go = match from {
                            Some(at) => Go::From {
                                at,
                                go: Box::new(Go::resume(answer)),
                            },
                            None => Go::resume(answer),
                        };
                        let fut = self.runner.run(thread, go);
                        outcome = self.printer.pump(&mut self.events, fut).await;
                    }
                    // A person at the terminal may try again after a refused answer.
                    Err(
                        e @ (RunError::InvalidPayload { .. }
                        | RunError::WrongReference { .. }
                        | RunError::AnswerRefused { .. }),
                    ) if lines.is_some() => {
                        eprintln!("error: {e}");
                        let pending = self
                            .pending_at(thread, from)
                            .await?
                            .context("the thread is no longer paused")?;
                        asked_again = true;
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
                    // What the command line gave (`--input`, `--context`) is refused
                    // before anything is saved: a usage error, as a bad flag is.
                    Err(e @ (RunError::Input(_) | RunError::Configuration(_))) => {
                        eprintln!("{} {e}", super::color::error_label());
                        return Ok(exit::USAGE);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }

    /// The interrupt checkpoint `at` of `thread` waits for (its latest, without).
    async fn pending_at(
        &self,
        thread: &str,
        at: Option<u64>,
    ) -> anyhow::Result<Option<Box<switchyard::store::Pending>>> {
        let threads = self.runner.threads();
        Ok(match at {
            None => threads.latest(thread).await?.pending,
            Some(seq) => threads.state(thread, Some(seq)).await?.1.pending,
        })
    }

    /// Asks the person at the terminal; `None` when stdin closed. A timed-out
    /// interrupt gives `Some(None)`: resume without an answer takes `on_timeout`.
    async fn ask(
        &self,
        thread: &str,
        at: Option<u64>,
        node: &str,
        payload: &Json,
        lines: &mut UnboundedReceiver<String>,
    ) -> anyhow::Result<Option<Option<Json>>> {
        let graph = self.runner.graph();
        let pending = self
            .pending_at(thread, at)
            .await?
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

    async fn paused(&self, thread: &str, node: &str, payload: &Json) -> anyhow::Result<u8> {
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
                .threads()
                .latest(thread)
                .await?
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
