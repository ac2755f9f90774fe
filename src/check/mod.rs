//! Check: static analysis of a [`GraphSpec`]. Every pass adds to one list, so a file's
//! problems are reported together. Passes run in dependency order: files are read first
//! (the later passes need the schemas), flow analysis runs on the petgraph topology.

mod contract;
pub(crate) mod cost;
mod dataflow;
mod files;
mod flow;
mod json_span;
mod map;
mod names;
mod parallel;
mod policy;
mod routes;
pub(crate) mod schema_path;
mod set_types;
mod settings;
pub(crate) mod sources;
mod strict;
mod subgraph;
pub(crate) mod types;

use crate::diagnostic::Diagnostic;
use crate::source::{FileId, Sources};
use crate::spec::{GraphSpec, Sp};
use crate::topology::Topology;
use std::collections::HashMap;
use std::ops::Range;

/// Runs every check on a loaded graph.
pub(crate) fn check(spec: &GraphSpec, sources: &mut Sources) -> Vec<Diagnostic> {
    let topo = Topology::build(spec);
    let text = sources.text(spec.file).to_string();
    let mut cx = Cx {
        spec,
        file: spec.file,
        text,
        diags: Vec::new(),
        schemas: HashMap::new(),
        schema_files: HashMap::new(),
        templates: Vec::new(),
    };
    names::check(&mut cx);
    // A source too complex to parse stops the check before any pass parses it: the
    // parser would overflow its stack.
    if too_complex(&mut cx) {
        return cx.diags;
    }
    files::check(&mut cx, sources);
    subgraph::check(&mut cx, sources);
    types::check(&mut cx);
    contract::check(&mut cx);
    set_types::check(&mut cx);
    map::check(&mut cx);
    parallel::check(&mut cx);
    strict::check(&mut cx);
    settings::check(&mut cx);
    let field_schemas = types::field_schemas(&cx);
    dataflow::check(&mut cx, &field_schemas);
    routes::check(&mut cx, &field_schemas);
    flow::check(&mut cx, &topo);
    policy::check(&mut cx, &topo);
    cost::check(&mut cx, sources);
    cx.diags
}

/// Refuses every expression and inline template past the parser's limits
/// ([`crate::jinja::limits`]); whether there was one.
fn too_complex(cx: &mut Cx<'_>) -> bool {
    let mut found = false;
    for source in sources::sources(cx.spec) {
        let (text, template) = match source {
            sources::Source::Expr { text, .. } => (text, false),
            sources::Source::Template { text, .. } => (text, true),
        };
        if let Some(why) = crate::jinja::limits::too_complex(text.get_ref(), template) {
            found = true;
            let what = if template { "template" } else { "expression" };
            cx.error(
                "too-complex",
                text.span(),
                format!("this {what} is too complex to check"),
            )
            .with_label(why)
            .with_help(if template {
                "split it into smaller templates, or compute the value in a node"
            } else {
                "split it into several `set` expressions, or compute the value in a node"
            });
        }
    }
    found
}

/// What the passes share.
pub(crate) struct Cx<'s> {
    pub(crate) spec: &'s GraphSpec,
    pub(crate) file: FileId,
    /// The graph file's text, to place carets inside string values.
    pub(crate) text: String,
    pub(crate) diags: Vec<Diagnostic>,
    /// Schema files by the path written in the graph; `None` when unreadable or invalid
    /// (already reported).
    pub(crate) schemas: HashMap<String, Option<serde_json::Value>>,
    /// Schema files that parsed, by the path written in the graph: where their
    /// diagnostics point, and their text.
    pub(crate) schema_files: HashMap<String, (FileId, String)>,
    /// Template files that parsed, for the data-flow pass.
    pub(crate) templates: Vec<TemplateFile>,
}

pub(crate) struct TemplateFile {
    pub(crate) file: FileId,
    pub(crate) text: String,
    /// The item name of the mapped node that renders it, which it may read.
    pub(crate) item: Option<String>,
}

impl Cx<'_> {
    pub(crate) fn error(
        &mut self,
        code: &'static str,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        self.diags
            .push(Diagnostic::error(code, self.file, span, message));
        self.diags.last_mut().expect("just pushed")
    }

    pub(crate) fn node_names(&self) -> impl Iterator<Item = &str> {
        self.spec.nodes.iter().map(|n| n.name.get_ref().as_str())
    }

    pub(crate) fn field_names(&self) -> impl Iterator<Item = &str> {
        self.spec.state.iter().map(|f| f.name.get_ref().as_str())
    }

    pub(crate) fn schema(&self, path: &Sp<String>) -> Option<&serde_json::Value> {
        self.schemas.get(path.get_ref()).and_then(Option::as_ref)
    }
}

/// Builder-style setters on a pushed diagnostic.
pub(crate) trait DiagExt {
    fn with_label(&mut self, label: impl Into<String>) -> &mut Self;
    fn with_help(&mut self, help: impl Into<String>) -> &mut Self;
    fn with_help_opt(&mut self, help: Option<String>) -> &mut Self;
}

impl DiagExt for Diagnostic {
    fn with_label(&mut self, label: impl Into<String>) -> &mut Self {
        self.label = label.into();
        self
    }
    fn with_help(&mut self, help: impl Into<String>) -> &mut Self {
        self.help = Some(help.into());
        self
    }
    fn with_help_opt(&mut self, help: Option<String>) -> &mut Self {
        if help.is_some() {
            self.help = help;
        }
        self
    }
}
