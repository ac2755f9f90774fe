//! `switchyard serve` as its clients use it: a child process on a loopback port, driven
//! over HTTP by these tests (exact responses, snapshotted with ids and times scrubbed),
//! by LangGraph's official JS client SDK from npm (`serve/sdk/*.mjs`), and by the seed
//! graphs with their replayed model answers.
//!
//! Model answers come from the scripted OpenAI-compatible server of `llm/server.rs`
//! (`OPENAI_BASE_URL` of the server process), or from the seeds' recordings (`--replay`).

mod api;
mod assistants;
mod browser;
mod cluster;
mod crons;
mod events;
mod hosting;
mod openapi;
mod page;
pub(crate) mod sdk;
mod seeds;
mod semantic;
pub(crate) mod server;

use server::{Resp, Scrub};

/// One request and its answer, for a snapshot: `POST /threads {body}` then the status
/// and the body (JSON pretty-printed, an event stream one event a line).
pub(crate) struct Transcript {
    pub(crate) lines: Vec<String>,
    pub(crate) scrub: Scrub,
}

impl Transcript {
    pub(crate) fn new() -> Self {
        Transcript {
            lines: Vec::new(),
            scrub: Scrub::new(),
        }
    }

    pub(crate) fn note(&mut self, request: &str, r: &Resp) {
        let request = self.scrub.text(request);
        let body = if r
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            r.events()
                .iter()
                .map(|(event, data, id)| {
                    let data = serde_json::to_string(&self.scrub.json(data)).unwrap();
                    // An id ends with the server process's mark, which varies.
                    match id.as_deref().and_then(|i| i.split('.').next()) {
                        Some(id) => format!("  {event} [{id}] {data}"),
                        None => format!("  {event} {data}"),
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        } else if r.text.trim().is_empty() {
            String::new()
        } else {
            match serde_json::from_str::<serde_json::Value>(r.text.trim_start()) {
                Ok(j) => serde_json::to_string_pretty(&self.scrub.json(&j)).unwrap(),
                Err(_) => self.scrub.text(&r.text),
            }
        };
        let mut line = format!("{request}\n-> {}", r.status);
        for h in ["content-location", "location"] {
            if let Some(v) = r.header(h) {
                line.push_str(&format!(" {h}: {}", self.scrub.text(v)));
            }
        }
        if !body.is_empty() {
            line.push('\n');
            line.push_str(&body);
        }
        self.lines.push(line);
    }

    pub(crate) fn text(&self) -> String {
        self.lines.join("\n\n") + "\n"
    }
}

/// Notes a response with its pagination headers.
pub(crate) fn note_paged(t: &mut Transcript, request: &str, r: &server::Resp) {
    t.note(request, r);
    let headers: Vec<String> = ["x-pagination-total", "x-pagination-next"]
        .iter()
        .filter_map(|h| r.header(h).map(|v| format!("{h}: {v}")))
        .collect();
    if let Some(last) = t.lines.last_mut() {
        last.push_str(&format!("\n({})", headers.join(", ")));
    }
}
