//! Seeds 000 and 001 end to end: `graphs/browser_agent.toml` and
//! `graphs/screen_explorer.toml` run by the real `switchyard` binary (`run`, `resume`,
//! `state`, `history`, `fork`, each a subprocess), against @playwright/mcp driving
//! Debian's headless Chromium, on small web apps these tests serve on 127.0.0.1
//! (`tests/fixtures/seeds/<seed>/<app>/`, served by [`web::WebApp`] with the few routes
//! each app handles itself). Threads live in a SQLite store in a temporary directory;
//! the screen explorer's knowledge graph is a @modelcontextprotocol/server-memory file
//! there too (MEMORY_FILE_PATH), read back by the tests.
//!
//! # LLM answers: replayed, recorded from a brain
//!
//! The model's answers come from recordings checked in beside the tests, so the runs are
//! deterministic and offline: `tests/fixtures/seeds/<seed>/<scenario>.<n>.llm.jsonl` is
//! the recording (`switchyard run --record`) of the scenario's n-th `run` or `resume`
//! that asks a model, replayed with `--replay`. A replay answers per process, so a
//! scenario that pauses has one file per process. The web app's port differs on every
//! run: recordings hold `127.0.0.1:APP_PORT` in its place.
//!
//! When a graph, a prompt or a schema changes, a replay fails naming the node whose
//! request differs (`replay: request 2 of node `plan_action` does not match the
//! recording: ...`). Then record again:
//!
//! ```text
//! SWITCHYARD_REGENERATE=1 cargo test --test integration seeds_browser
//! SWITCHYARD_REGENERATE=browser_agent/shopping cargo test --test integration seeds_browser::browser_agent
//! ```
//!
//! (`1` records every scenario; otherwise a comma-separated list of `seed/scenario` or
//! `scenario` names.) Recording runs the same test against the scripted OpenAI-compatible
//! server of the llm tests (`llm/server.rs`), which answers, in order, from the
//! scenario's *brain*: `<scenario>.brain.json`, a list of
//! `{ "node", "reply" | "text", "tokens"?, "times"? }` (the node the answer is for, a
//! JSON reply or a raw text, the usage it reports, and how often in a row). The test then
//! checks every answer went to the node it names and was used, and writes the
//! recordings. A brain is the scenario's model: it refers to page elements by the refs
//! @playwright/mcp gives them, which are the same for the same page, and writes the web
//! app's address as `127.0.0.1:APP_PORT`. When the brain runs out, the server answers
//! 400 (the node falls back at once) and the test fails showing the prompt that found no
//! answer: write the next answer from it. `SWITCHYARD_SEEDS_KEEP=1` keeps a scenario's
//! temporary directory (store, blobs, recordings, knowledge graph) to look at.
//!
//! Every process a scenario starts (the servers, the browser) carries a mark in its
//! environment; after each `switchyard` exits the tests check none is left, and kill
//! any that is.

mod browser_agent;
mod scenario;
mod screen_explorer;
pub(crate) mod web;
