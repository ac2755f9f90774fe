//! A run's events as the command line prints them: a line each for people, or NDJSON
//! lines with an envelope for programs (`--json`, `schemas/events.schema.json`).

use serde_json::Value as Json;
use std::io::Write;
use std::sync::Arc;
use switchyard::run::Event;
use tokio::sync::mpsc::UnboundedReceiver;

/// The version of the NDJSON event lines (`v`), as `schemas/events.schema.json`
/// describes them: a change a reader would notice gets a new one.
const EVENTS_VERSION: u64 = 1;

/// What each NDJSON line carries besides its event: the thread and the run, from the
/// run's `run_started` (its first event).
#[derive(Default)]
struct Envelope {
    thread: Option<Arc<str>>,
    run: Option<u64>,
}

impl Envelope {
    /// `e` as one NDJSON line: `v`, `ts` (Unix milliseconds when it was written out),
    /// `thread` and `run` first, then the event's own fields.
    fn line(&mut self, e: &Event) -> Option<String> {
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

/// Prints a run's events as they come: a line each for people on standard error, or
/// NDJSON on standard output (`--json`); every event also goes to the tracer.
pub(crate) struct Printer {
    json: bool,
    envelope: Envelope,
    pub(crate) tracer: Option<switchyard::telemetry::Tracer>,
}

impl Printer {
    pub(crate) fn new(json: bool) -> Self {
        Printer {
            json,
            envelope: Envelope::default(),
            tracer: None,
        }
    }

    /// Runs `fut` while printing the events it emits as they come.
    pub(crate) async fn pump<T>(
        &mut self,
        events: &mut UnboundedReceiver<Event>,
        fut: impl std::future::Future<Output = T>,
    ) -> T {
        tokio::pin!(fut);
        let result = loop {
            tokio::select! {
                biased;
                out = &mut fut => break out,
                Some(e) = events.recv() => self.print(&e),
            }
        };
        while let Ok(e) = events.try_recv() {
            self.print(&e);
        }
        result
    }

    fn print(&mut self, e: &Event) {
        if let Some(t) = &self.tracer {
            t.observe("cli", e);
        }
        // A closed stdout or stderr must not turn into a panic; the run goes on.
        if self.json {
            if let Some(line) = self.envelope.line(e) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        } else if !matches!(e, Event::TextDelta { .. }) {
            let _ = writeln!(std::io::stderr().lock(), "{}", human(e));
        } else {
            let _ = write!(std::io::stderr().lock(), "{}", human(e));
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One line for people.
pub(crate) fn human(event: &Event) -> String {
    match event {
        Event::RunStarted {
            thread,
            graph,
            run,
            resumed,
        } => {
            format!(
                "{} {graph} (thread {thread}, run {run})",
                if *resumed { "resumed" } else { "started" }
            )
        }
        Event::NodeStarted { node, step } => format!("[{step:>3}] {node}"),
        Event::NodeFinished {
            node,
            duration_us,
            writes,
            skipped,
            ..
        } => {
            if *skipped {
                format!("      {node} skipped (only_if is false)")
            } else if writes.is_empty() {
                format!("      {node} finished in {}", micros(*duration_us))
            } else {
                format!(
                    "      {node} wrote {} in {}",
                    writes.join(", "),
                    micros(*duration_us)
                )
            }
        }
        Event::RouteTaken { from, to, case } => match case {
            Some(c) => format!("      {from} -> {to} ({c})"),
            None => format!("      {from} -> {to}"),
        },
        Event::Interrupted { node, payload } => format!("paused at {node}: {payload}"),
        Event::Resumed { node, timed_out } => {
            if *timed_out {
                format!("{node} timed out")
            } else {
                format!("resumed {node}")
            }
        }
        Event::LimitReached { limit, to } => match to {
            Some(to) => format!("limit reached: {limit}; going to {to}"),
            None => format!("limit reached: {limit}"),
        },
        Event::LlmInvocation {
            node,
            model,
            tokens_in,
            tokens_out,
            cache_hit,
            latency_ms,
            ..
        } => format!(
            "      {node}: {model} {tokens_in}+{tokens_out} tokens in {latency_ms} ms{}",
            if *cache_hit { " (cache hit)" } else { "" }
        ),
        Event::ToolCall {
            node,
            tool,
            duration_ms,
            attempt,
            is_error,
            ..
        } => format!(
            "      {node}: called {tool} in {duration_ms} ms (attempt {attempt}){}",
            if *is_error { ", error" } else { "" }
        ),
        Event::LlmFallback { node, reason } => {
            format!("      {node}: took its fallback ({reason})")
        }
        Event::TextDelta { text, .. } => text.clone(),
        Event::ServerStarted {
            server,
            pid,
            restart,
        } => {
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            if *restart == 0 {
                format!("      server {server} started{pid}")
            } else {
                format!("      server {server} restarted{pid}, restart {restart}")
            }
        }
        Event::Subgraph { node, inner } => format!("  {node} | {}", human(inner)),
        Event::ToolProgress {
            server,
            progress,
            total,
            message,
        } => {
            let of = total.map(|t| format!(" of {t}")).unwrap_or_default();
            let says = message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            format!("      {server} progress {progress}{of}{says}")
        }
        Event::SignIn { server, url } => {
            format!("      server {server} wants you to sign in: open {url}")
        }
        Event::ServerDied { server, message } => {
            format!("      server {server} died: {message}")
        }
        Event::ServerStopped { server } => format!("      server {server} stopped"),
        Event::ServerStderr { server, line } => format!("      {server}: {line}"),
        Event::NodeFailed {
            node,
            message,
            handled,
        } => {
            format!(
                "      {node} failed: {message}{}",
                if *handled { " (taking on_error)" } else { "" }
            )
        }
        Event::Stopped { next, step } => match next {
            Some(n) => format!("stopped after step {step}; next is {n}"),
            None => format!("stopped after step {step}"),
        },
        Event::Saved { record, .. } => format!("      saved checkpoint {}", record.seq),
        Event::RunFinished {
            status,
            outcome,
            steps,
            response: _,
            tokens,
            duration_ms,
        } => format!(
            "{status}{} after {steps} steps, {tokens} tokens, {duration_ms} ms",
            outcome
                .as_ref()
                .map(|o| format!(": {o}"))
                .unwrap_or_default()
        ),
    }
}

fn micros(us: u64) -> String {
    if us >= 10_000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{us} us")
    }
}
