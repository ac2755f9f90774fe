//! Switchyard runs agent graphs declared in TOML.
//!
//! Data flows through the stages in this order:
//!
//! 1. [`load`]: the TOML text becomes a [`spec::GraphSpec`], the graph as written, with
//!    every name, target, type and path keeping its byte span.
//! 2. [`check`]: static analysis of the spec (names, reachability, cycles, route
//!    coverage, data flow, prompt and schema files, policy guards), collecting every
//!    [`Diagnostic`] at once.
//! 3. [`graph::compile`]: a spec that passed every check becomes a [`graph::Graph`]:
//!    names resolved to indices, expressions compiled, templates and schemas loaded.
//!    Only a `Graph` can run.
//! 4. [`run`]: the async interpreter runs a `Graph` node by node, merging writes into
//!    the state through reducers, checkpointing after every node, pausing at interrupts
//!    and emitting events. Its `mcp_call` nodes reach tools through a
//!    [`run::ToolClient`]; [`mcp::McpClient`] is the real one (rmcp over stdio and
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
pub mod region;
pub mod render;
pub mod run;
pub mod serve;
pub mod source;
pub mod spec;
pub mod store;
pub mod suggestion;
pub mod telemetry;
pub mod topology;

pub use diagnostic::{Diagnostic, Severity};
pub use source::Sources;

use std::path::Path;

/// Why a graph file could not be made runnable.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Read(#[from] load::ReadError),
    /// The file has problems; `rendered` is every diagnostic, as `validate` prints them.
    #[error("`{path}` is not a valid graph ({count} error{s})", s = if *.count == 1 { "" } else { "s" })]
    Invalid {
        path: String,
        count: usize,
        rendered: String,
    },
    #[error(transparent)]
    Compile(#[from] graph::CompileError),
}

/// Loads, checks and compiles a graph file: the one way to get a runnable graph.
pub fn load_graph(path: &Path) -> Result<graph::Graph, LoadError> {
    let mut sources = Sources::new();
    let v = validate_file(path, &mut sources)?;
    match &v.spec {
        Some(spec) if v.is_valid() => Ok(graph::compile(spec, &sources)?),
        _ => {
            let errors: Vec<&Diagnostic> = v.diagnostics.iter().filter(|d| d.is_error()).collect();
            Err(LoadError::Invalid {
                path: path.display().to_string(),
                count: errors.len(),
                rendered: errors
                    .iter()
                    .map(|d| d.render(&sources))
                    .collect::<Vec<_>>()
                    .join("\n"),
            })
        }
    }
}

/// The result of validating one graph file.
pub struct Validation {
    pub spec: Option<spec::GraphSpec>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Validation {
    pub fn is_valid(&self) -> bool {
        self.spec.is_some() && !self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Loads and checks a graph file, collecting every problem.
pub fn validate_file(path: &Path, sources: &mut Sources) -> Result<Validation, load::ReadError> {
    let loaded = load::load_file(path, sources)?;
    Ok(validate_loaded(loaded, sources))
}

/// Loads and checks graph text as if it were the file at `path`.
pub fn validate_str(path: &Path, text: &str, sources: &mut Sources) -> Validation {
    validate_loaded(load::load_str(path, text, sources), sources)
}

fn validate_loaded(loaded: load::Loaded, sources: &mut Sources) -> Validation {
    let mut diagnostics = loaded.diagnostics;
    if let Some(spec) = &loaded.spec {
        diagnostics.extend(check::check(spec, sources));
    }
    diagnostic::sort(&mut diagnostics);
    Validation {
        spec: loaded.spec,
        diagnostics,
    }
}
