//! Seeds 002, 003 and 004 end to end: `graphs/tool_agent.toml`,
//! `graphs/confirm_execute.toml` and `graphs/reason_act_observe.toml`, run by the
//! `switchyard` binary (a subprocess, as a person runs it) against real MCP servers: the
//! reference filesystem and "everything" servers from npm, and the simulation bridge of
//! `tests/servers/simulation_bridge.mjs`.
//!
//! **Model answers come from recordings.** Each scenario has a recording,
//! `tests/fixtures/seeds/<graph>/<scenario>.llm.jsonl`, and every `run` and `resume` of
//! the scenario replays it (`--replay`): no network, no key, the same answers each time.
//! When a prompt, a schema or a tool list changes, the request no longer matches and the
//! run fails with an error naming the node (``replay: request 2 of node `model` does
//! not match the recording: message 3 differs: ...``).
//!
//! **Regenerating them.** The recordings are made from scripts: beside each recording,
//! `<scenario>.script.json` lists the model's answers in the order the nodes ask, each
//! naming the node it answers and holding `content` (text), `json` (a value sent as its
//! JSON text) and/or `call` (`{ name, arguments }`, arguments as a value, or as text
//! when they are to be malformed). With `SWITCHYARD_REGENERATE=1` in the environment
//! each scenario runs with `--record` against the scripted OpenAI-compatible server of
//! `llm/server.rs` answering from its script, writes the recording (the recordings of
//! its `run` and `resume`s, concatenated), checks that each answer went to the node the
//! script names, and then makes the same assertions:
//!
//! ```text
//! SWITCHYARD_REGENERATE=1 cargo test --test integration seeds_tools
//! ```
//!
//! Review the diff of the recordings, and commit them with the change that needed them.
//! The graphs run unchanged against a real endpoint (`OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`); the scripts only stand in for a model's choices.

mod confirm_execute;
mod harness;
mod reason_act_observe;
mod tool_agent;
