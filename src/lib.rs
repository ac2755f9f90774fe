//! Switchyard runs agent graphs declared in TOML.
//!
//! Data flows through the stages in this order:
//!
//! 1. [`load`]: the TOML text becomes a [`spec::GraphSpec`], the graph as written, with
//!    every name, target, type and path keeping its byte span.
//! 2. [`check`]: static analysis of the spec (names, reachability, cycles, route
//!    coverage, data flow, prompt and schema files, policy guards), collecting every
//!    [`Diagnostic`] at once.
//! 3. [`compile`]: a spec that passed every check becomes a [`graph::Graph`]:
//!    names resolved to indices, expressions compiled, templates and schemas loaded.
//!    Only a `Graph` can run.
//! 4. [`run`]: the async interpreter runs a `Graph` node by node, merging writes into
//!    the state through reducers, checkpointing after every node, pausing at interrupts
//!    and emitting events. Its `mcp_call` nodes reach tools through a
//!    [`tool::ToolClient`]; [`mcp::McpClient`] is the real one (rmcp over stdio and
//!    streamable HTTP, schema-checked arguments, a blob store for binary results).
//! 5. [`render`]: DOT and Mermaid drawings of the spec, from the file alone.
//!
//! [`validate_file`] drives load -> check for one file, [`load_graph`] load -> check ->
//! compile. The library never prints.

pub mod check;
pub mod diagnostic;
mod fxhash;
pub mod graph;
pub mod host;
pub mod jinja;
mod json_schema;
pub mod llm;
pub mod load;
pub mod mcp;
mod pipeline;
pub mod region;
pub mod render;
pub mod run;
pub mod serve;
pub mod source;
pub mod spec;
pub mod store;
pub mod suggestion;
pub mod telemetry;
pub mod tool;
pub mod topology;
mod value;

pub use diagnostic::{Diagnostic, Severity};
pub use pipeline::{LoadError, Validation, compile, load_graph, validate_file, validate_str};
pub use source::Sources;
