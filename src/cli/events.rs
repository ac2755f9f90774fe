//! A run's events as the command line prints them: a line each for people, or NDJSON
//! lines for programs (`--json`, `--json=2`: `super::ndjson`).
//!
//! What a run costs should not be what watching it costs: lines are written into a
//! buffer, each NDJSON line straight from its event (no JSON tree built first), and the
//! buffer goes to the terminal or pipe when the run ends or pauses, when it holds
//! 64 KiB, or 20 ms after its first line, whichever comes first: a person watching
//! sees each line within 20 ms, a fast run makes one write for many lines.

use super::ndjson::Ndjson;
use std::io::Write;
use std::time::Duration;
use switchyard::run::Event;
use tokio::sync::mpsc::UnboundedReceiver;

/// How long a line may wait in the buffer, and how much the buffer holds before it is
/// written regardless.
const FLUSH_AFTER: Duration = Duration::from_millis(20);
const FLUSH_AT: usize = 64 << 10;

/// Prints a run's events as they come: a line each for people on standard error, or
/// NDJSON on standard output (`--json`); every event also goes to the tracer.
pub(crate) struct Printer {
    /// The NDJSON format asked for; none: lines for people.
    json: Option<Ndjson>,
    /// Lines not yet written out.
    buffer: Vec<u8>,
    pub(crate) tracer: Option<switchyard::telemetry::Tracer>,
}

impl Printer {
    /// A printer of lines for people, or of NDJSON lines in format `json` (1 or 2).
    pub(crate) fn new(json: Option<u8>) -> Self {
        Printer {
            json: json.map(Ndjson::new),
            buffer: Vec::with_capacity(FLUSH_AT),
            tracer: None,
        }
    }

    /// Runs `fut` while printing the events it emits as they come; every line is out
    /// when it returns.
    pub(crate) async fn pump<T>(
        &mut self,
        events: &mut UnboundedReceiver<Event>,
        fut: impl std::future::Future<Output = T>,
    ) -> T {
        tokio::pin!(fut);
        // Armed while the buffer holds lines: when it fires they are written out.
        let due = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(due);
        let mut armed = false;
        let result = loop {
            tokio::select! {
                biased;
                out = &mut fut => break out,
                Some(e) = events.recv() => {
                    self.print(&e);
                    if self.buffer.len() >= FLUSH_AT {
                        self.flush();
                        armed = false;
                    } else if !armed && !self.buffer.is_empty() {
                        due.as_mut().reset(tokio::time::Instant::now() + FLUSH_AFTER);
                        armed = true;
                    }
                }
                () = &mut due, if armed => {
                    self.flush();
                    armed = false;
                }
            }
        };
        while let Ok(e) = events.try_recv() {
            self.print(&e);
        }
        // The run ended or paused: nothing more comes to complete a held line.
        if let Some(json) = &mut self.json {
            json.finish(&mut self.buffer);
        }
        self.flush();
        result
    }

    fn print(&mut self, e: &Event) {
        if let Some(t) = &self.tracer {
            t.observe("cli", e);
        }
        if let Some(json) = &mut self.json {
            json.line(e, &mut self.buffer);
        } else {
            let start = self.buffer.len();
            if human(e, &mut self.buffer).is_err() {
                self.buffer.truncate(start);
            } else if !matches!(e, Event::TextDelta { .. }) {
                self.buffer.push(b'\n');
            }
        }
    }

    /// Writes the buffered lines out. A closed stdout or stderr must not turn into a
    /// panic; the run goes on.
    fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let _ = if self.json.is_some() {
            let mut out = std::io::stdout().lock();
            out.write_all(&self.buffer).and_then(|()| out.flush())
        } else {
            std::io::stderr().lock().write_all(&self.buffer)
        };
        self.buffer.clear();
    }
}

/// One line for people (without its line end), written into `out`.
fn human(event: &Event, out: &mut Vec<u8>) -> std::io::Result<()> {
    match event {
        Event::RunStarted {
            thread,
            graph,
            run,
            resumed,
        } => {
            write!(
                out,
                "{} {graph} (thread {thread}, run {run})",
                if *resumed { "resumed" } else { "started" }
            )
        }
        Event::NodeStarted { node, step } => write!(out, "[{step:>3}] {node}"),
        Event::NodeFinished {
            node,
            duration_us,
            writes,
            skipped,
            ..
        } => {
            if *skipped {
                write!(out, "      {node} skipped (only_if is false)")
            } else if writes.is_empty() {
                write!(out, "      {node} finished in {}", micros(*duration_us))
            } else {
                write!(
                    out,
                    "      {node} wrote {} in {}",
                    writes.join(", "),
                    micros(*duration_us)
                )
            }
        }
        Event::RouteTaken { from, to, case } => match case {
            Some(c) => write!(out, "      {from} -> {to} ({c})"),
            None => write!(out, "      {from} -> {to}"),
        },
        Event::Interrupted { node, payload } => write!(out, "paused at {node}: {payload}"),
        Event::Resumed { node, timed_out } => {
            if *timed_out {
                write!(out, "{node} timed out")
            } else {
                write!(out, "resumed {node}")
            }
        }
        Event::LimitReached { limit, to } => match to {
            Some(to) => write!(out, "limit reached: {limit}; going to {to}"),
            None => write!(out, "limit reached: {limit}"),
        },
        Event::LlmInvocation {
            node,
            model,
            tokens_in,
            tokens_out,
            cache_hit,
            latency_ms,
            ..
        } => write!(
            out,
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
        } => write!(
            out,
            "      {node}: called {tool} in {duration_ms} ms (attempt {attempt}){}",
            if *is_error { ", error" } else { "" }
        ),
        Event::LlmRetry {
            node,
            attempt,
            error,
            wait_ms,
            discard,
        } => write!(
            out,
            "      {node}: attempt {attempt} failed ({error}); trying again in {wait_ms} ms{}",
            if *discard {
                ", the text above void"
            } else {
                ""
            }
        ),
        Event::LlmFallback { node, reason } => {
            write!(out, "      {node}: took its fallback ({reason})")
        }
        Event::TextDelta { text, .. } => out.write_all(text.as_bytes()),
        Event::ServerStarted {
            server,
            pid,
            restart,
            ..
        } => {
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            if *restart == 0 {
                write!(out, "      server {server} started{pid}")
            } else {
                write!(
                    out,
                    "      server {server} restarted{pid}, restart {restart}"
                )
            }
        }
        Event::Subgraph { node, inner } => {
            write!(out, "  {node} | ")?;
            human(inner, out)
        }
        Event::ToolProgress {
            server,
            node,
            tool,
            progress,
            total,
            message,
        } => {
            let of = total.map(|t| format!(" of {t}")).unwrap_or_default();
            let says = message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            match (node, tool) {
                (Some(node), Some(tool)) => write!(
                    out,
                    "      {node}: {server}/{tool} progress {progress}{of}{says}"
                ),
                (None, Some(tool)) => {
                    write!(out, "      {server}/{tool} progress {progress}{of}{says}")
                }
                _ => write!(out, "      {server} progress {progress}{of}{says}"),
            }
        }
        Event::SignIn { server, url } => {
            write!(
                out,
                "      server {server} wants you to sign in: open {url}"
            )
        }
        Event::ServerDied { server, message } => {
            write!(out, "      server {server} died: {message}")
        }
        Event::ServerStopped { server } => write!(out, "      server {server} stopped"),
        Event::ServerStderr { server, line } => write!(out, "      {server}: {line}"),
        Event::NodeFailed {
            node,
            message,
            handled,
        } => {
            write!(
                out,
                "      {node} failed: {message}{}",
                if *handled { " (taking on_error)" } else { "" }
            )
        }
        Event::Stopped { next, step } => match next {
            Some(n) => write!(out, "stopped after step {step}; next is {n}"),
            None => write!(out, "stopped after step {step}"),
        },
        Event::Saved { record, .. } => write!(out, "      saved checkpoint {}", record.seq),
        Event::Standing { .. } => write!(out, "      standing before the run"),
        Event::RunFinished {
            status,
            outcome,
            steps,
            response: _,
            tokens,
            duration_ms,
        } => write!(
            out,
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
