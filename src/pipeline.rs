//! The pipeline driven end to end: load -> check ([`validate_file`], [`validate_str`])
//! and load -> check -> compile ([`load_graph`]). A subgraph node's graph is loaded
//! through here too: [`compile`] hands the graph compiler this module's loader, so the
//! compiler never calls back up into the pipeline.

use crate::check;
use crate::diagnostic::{self, Diagnostic};
use crate::graph::{self, CompileError, Graph};
use crate::load;
use crate::source::Sources;
use crate::spec::GraphSpec;
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
    Compile(#[from] CompileError),
}

/// Loads, checks and compiles a graph file: the one way to get a runnable graph.
pub fn load_graph(path: &Path) -> Result<Graph, LoadError> {
    let mut sources = Sources::new();
    let v = validate_file(path, &mut sources)?;
    match &v.spec {
        Some(spec) if v.is_valid() => Ok(compile(spec, &sources)?),
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

/// Compiles a spec that passed every check into a runnable [`Graph`]; the graphs its
/// subgraph nodes name are loaded, checked and compiled in turn.
pub fn compile(spec: &GraphSpec, sources: &Sources) -> Result<Graph, CompileError> {
    graph::compile(spec, sources, &|path| {
        load_graph(path).map_err(|e| e.to_string())
    })
}

/// The result of validating one graph file.
pub struct Validation {
    pub spec: Option<GraphSpec>,
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
