//! Switchyard runs agent graphs declared in TOML.
//!
//! Data flows down the pipeline, each stage a module that imports only those below it:
//!
//! 1. load (`load/`): the TOML text becomes a [`spec::GraphSpec`], the graph as
//!    written, every name, target, type and path keeping its byte span.
//! 2. check (`check/`): static analysis of the spec (names, reachability, cycles,
//!    route coverage, data flow, types, prompt and schema files, policy guards),
//!    collecting every [`Diagnostic`] at once.
//! 3. compile ([`graph`]): a spec that passed every check becomes a [`graph::Graph`]:
//!    names resolved to indices, expressions compiled, templates and schemas loaded.
//!    Only a `Graph` can run. [`validate_file`] drives load -> check,
//!    [`load_graph`] load -> check -> compile.
//! 4. run ([`run`]): the async interpreter drives a `Graph` on a thread, node by node,
//!    writing through the reducers, pausing at interrupts and emitting [`run::Event`]s.
//!    It reaches the world through two ports beside it: models through
//!    [`llm::LlmClient`] (an OpenAI-compatible client, recordings, replays) and tools
//!    through [`tool::ToolClient`] ([`mcp::McpClient`] is the real one).
//! 5. store ([`store`]): the runner records a checkpoint after every node into a
//!    store's [`store::Checkpoints`] role (memory, SQLite, Postgres); a server's
//!    catalog of threads and runs is its [`store::Catalog`] role, runs shared by
//!    several servers its [`store::RunQueue`], llm nodes' answers its
//!    [`store::LlmCache`], the long-term store's items its [`store::Items`];
//!    [`run::Threads`] reads a thread back.
//!
//! Beside the pipeline: [`render`] draws a spec (DOT, Mermaid, SVG); [`telemetry`]
//! turns a run's events into OpenTelemetry traces. [`host`] is the adapter that serves
//! many clients (graphs reloaded as their files change, a queue of runs per thread,
//! MCP servers kept per thread) and [`serve`] puts it behind the LangGraph Agent
//! Server API over HTTP; [`lsp`] answers an editor's questions about a graph file
//! from the same load -> check; the `switchyard` binary's `cli/` puts the library on the
//! command line. The library never prints.

mod check;
pub mod diagnostic;
mod fxhash;
pub mod graph;
pub mod host;
mod jinja;
mod json_schema;
pub mod llm;
mod load;
pub mod lsp;
pub mod mcp;
mod pipeline;
mod region;
pub mod render;
pub mod run;
pub mod serve;
mod source;
pub mod spec;
pub mod store;
mod suggestion;
pub mod telemetry;
pub mod testing;
pub mod tool;
mod topology;
mod value;

pub use check::cost::{Amount, CostReport, LoopBound, MEASURES, Worst, cost};
pub use diagnostic::{Diagnostic, Severity};
pub use pipeline::{LoadError, Validation, compile, load_graph, validate_file, validate_str};
pub use source::Sources;
pub use tool::USER_AGENT;
