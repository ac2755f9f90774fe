//! Switchyard runs agent graphs declared in TOML.
//!
//! Data flows through the stages in this order:
//!
//! 1. [`load`]: the TOML text becomes a [`spec::GraphSpec`], the graph as written, with
//!    every name, target, type and path keeping its byte span.
//! 2. [`check`]: static analysis of the spec (names, reachability, cycles, route
//!    coverage, data flow, prompt and schema files, policy guards), collecting every
//!    [`Diagnostic`] at once.
//! 3. [`render`]: DOT and Mermaid drawings of the spec, from the file alone.
//!
//! [`validate_file`] drives load -> check for one file. The library never prints.

pub mod check;
pub mod diagnostic;
pub mod load;
pub mod render;
pub mod source;
pub mod spec;
pub mod suggestion;
pub mod topology;

pub use diagnostic::{Diagnostic, Severity};
pub use source::Sources;

use std::path::Path;

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
