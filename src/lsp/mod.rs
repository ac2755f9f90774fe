//! What an editor asks of a graph file, answered from the same loader and checker as
//! `switchyard validate`: diagnostics, hover, go to definition, references, completion,
//! rename, document symbols and quick fixes.
//!
//! An [`Analysis`] is made from a document's text and URI in one pass: the pipeline's
//! [`validate_str`](crate::pipeline::validate_str) (load -> check), an [`outline`] of the
//! table headers read from the text alone, and an [`index`] of every place a node, field,
//! kind, filter or file is named. Each question is then a lookup by position. The results
//! are `lsp_types` values (plain data: positions are lines and UTF-16 units); nothing here
//! reads or writes the protocol's messages, which is the binary's `cli/lsp.rs`.

mod actions;
mod complete;
mod docs;
mod hover;
mod index;
mod keys;
mod lines;
mod outline;
mod symbols;

use crate::diagnostic::{Diagnostic, Severity};
use crate::pipeline::{Validation, validate_str};
use crate::source::{FileId, Sources};
use index::{Index, Symbol};
use lines::LineIndex;
use lsp_types::{
    DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Position, Range,
    TextEdit, Url, WorkspaceEdit,
};
use outline::Outline;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use lsp_types;

/// One graph document, loaded and checked, ready to answer questions about positions.
pub struct Analysis {
    uri: Url,
    text: String,
    sources: Sources,
    validation: Validation,
    outline: Outline,
    index: Index,
}

/// Why a rename was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenameError {
    #[error("there is no node or state field here to rename")]
    NothingHere,
    #[error(
        "`{0}` is not a valid name: names start with a letter or `_` and hold only letters, digits and `_`"
    )]
    BadName(String),
    #[error("`{0}` is reserved")]
    Reserved(String),
    #[error("`{0}` is taken: the graph has one of that name already")]
    Taken(String),
}

impl Analysis {
    /// Loads and checks `text` as the graph file `uri` names; its prompt and schema
    /// files are read from disk, relative to it. A URI that is not a file's (an unsaved
    /// buffer) is read as a file in the working directory.
    pub fn new(uri: Url, text: &str) -> Analysis {
        let path = uri.to_file_path().unwrap_or_else(|()| {
            PathBuf::from(uri.path().rsplit('/').next().unwrap_or("graph.toml"))
        });
        let path = absolute(&path);
        let mut sources = Sources::new();
        // A graph's tests are checked against the graph they test. Only the test
        // file's own diagnostics are told (a graph with problems is one of them): the
        // graph's are its own document's, from its text, which may be unsaved.
        let validation = if crate::testing::is_test_file(&path) {
            let mut diagnostics = crate::testing::check_text(&path, text, &mut sources);
            let name = path.display().to_string();
            diagnostics.retain(|d| sources.name(d.file) == name);
            Validation {
                spec: None,
                diagnostics,
            }
        } else {
            validate_str(&path, text, &mut sources)
        };
        let outline = Outline::read(text);
        let index = match &validation.spec {
            Some(spec) => Index::build(spec, text, &outline),
            None => Index::default(),
        };
        Analysis {
            uri,
            text: text.to_string(),
            sources,
            validation,
            outline,
            index,
        }
    }

    /// An analysis of the file at `path` (made absolute), with `text` as its contents.
    pub fn for_path(path: &Path, text: &str) -> Analysis {
        let uri = file_uri(&absolute(path))
            .unwrap_or_else(|| Url::parse("file:///graph.toml").expect("a valid URL"));
        Analysis::new(uri, text)
    }

    pub fn uri(&self) -> &Url {
        &self.uri
    }

    /// The checker's diagnostics, grouped by the file they are in: the graph document
    /// first (always, so stale ones are cleared), then each prompt, schema or subgraph
    /// file that has some. A problem in another file is also shown in the graph, at
    /// the path that names the file, pointing there. A TOML file that is no graph
    /// (no `[graph]`, no nodes, no state: `Cargo.toml`) gets none.
    pub fn diagnostics(&self) -> Vec<(Url, Vec<lsp_types::Diagnostic>)> {
        let mut out: Vec<(Url, Vec<lsp_types::Diagnostic>)> = vec![(self.uri.clone(), Vec::new())];
        if !self.is_graph() {
            return out;
        }
        let mut lines: HashMap<FileId, LineIndex<'_>> = HashMap::new();
        for d in &self.validation.diagnostics {
            let converted = self.convert(d, &mut lines);
            if d.file == self.file() {
                out[0].1.push(converted);
                continue;
            }
            let Some(uri) = self.file_url(d.file) else {
                continue;
            };
            // In the graph: at each path naming that file.
            let here = lines
                .entry(self.file())
                .or_insert_with(|| LineIndex::new(&self.text));
            let written: Vec<_> = self
                .index
                .occurrences
                .iter()
                .filter_map(|o| match &o.symbol {
                    Symbol::File(name, resolved) if file_uri(resolved).as_ref() == Some(&uri) => {
                        Some((name, here.range(&o.span)))
                    }
                    _ => None,
                })
                .collect();
            for (name, range) in written {
                out[0].1.push(lsp_types::Diagnostic {
                    range,
                    message: format!("in `{name}`: {}", converted.message),
                    related_information: Some(vec![DiagnosticRelatedInformation {
                        location: Location::new(uri.clone(), converted.range),
                        message: d.message.clone(),
                    }]),
                    ..converted.clone()
                });
            }
            match out.iter_mut().find(|(u, _)| *u == uri) {
                Some((_, list)) => list.push(converted),
                None => out.push((uri, vec![converted])),
            }
        }
        out
    }

    /// Whether the document is a graph file at all (or text that is not TOML yet).
    fn is_graph(&self) -> bool {
        let Some(spec) = &self.validation.spec else {
            return true;
        };
        let missing = self
            .validation
            .diagnostics
            .iter()
            .any(|d| d.code == "missing-graph");
        !(missing && spec.nodes.is_empty() && spec.state.is_empty())
    }

    fn convert<'s>(
        &'s self,
        d: &Diagnostic,
        lines: &mut HashMap<FileId, LineIndex<'s>>,
    ) -> lsp_types::Diagnostic {
        let index = lines
            .entry(d.file)
            .or_insert_with(|| LineIndex::new(self.sources.text(d.file)));
        let span = self.sources.clamp(d.file, d.span.clone());
        let mut message = d.message.clone();
        if !d.label.is_empty() && d.label != d.message {
            message.push_str(&format!("\n{}", d.label));
        }
        for note in &d.notes {
            message.push_str(&format!("\nnote: {note}"));
        }
        if let Some(help) = &d.help {
            message.push_str(&format!("\nhelp: {help}"));
        }
        lsp_types::Diagnostic {
            range: index.range(&span),
            severity: Some(match d.severity {
                Severity::Error => DiagnosticSeverity::ERROR,
                Severity::Warning => DiagnosticSeverity::WARNING,
            }),
            code: Some(NumberOrString::String(d.code.to_string())),
            source: Some("switchyard".into()),
            message,
            ..Default::default()
        }
    }

    /// The graph document's own file id: the first file read.
    fn file(&self) -> FileId {
        self.validation.spec.as_ref().map_or(0, |s| s.file)
    }

    fn file_url(&self, id: FileId) -> Option<Url> {
        if id == self.file() {
            return Some(self.uri.clone());
        }
        file_uri(&index::normalize(&absolute(Path::new(
            self.sources.name(id),
        ))))
    }

    fn lines(&self) -> LineIndex<'_> {
        LineIndex::new(&self.text)
    }

    /// Where the node, field or file under the cursor is declared: `[nodes.x]`,
    /// `[state.x]`, a constant's key, or the file itself.
    pub fn definition(&self, pos: Position) -> Option<Location> {
        let lines = self.lines();
        let at = self.index.at(lines.offset(pos))?;
        match &at.symbol {
            Symbol::File(_, resolved) => Some(Location::new(file_uri(resolved)?, Range::default())),
            s @ (Symbol::Node(_) | Symbol::Field(_)) => {
                let decl = self.index.decl(s)?;
                Some(Location::new(self.uri.clone(), lines.range(&decl.span)))
            }
            Symbol::Kind(_) | Symbol::Filter(_) => None,
        }
    }

    /// Every place the node or field under the cursor is named in the graph.
    pub fn references(&self, pos: Position, include_declaration: bool) -> Vec<Location> {
        let lines = self.lines();
        let Some(at) = self.index.at(lines.offset(pos)) else {
            return Vec::new();
        };
        let mut found: Vec<_> = self
            .index
            .of(&at.symbol)
            .filter(|o| include_declaration || !o.decl)
            .map(|o| o.span.clone())
            .collect();
        found.sort_by_key(|s| s.start);
        found
            .iter()
            .map(|s| Location::new(self.uri.clone(), lines.range(s)))
            .collect()
    }

    /// The range of the node or field name a rename at `pos` would change.
    pub fn prepare_rename(&self, pos: Position) -> Option<Range> {
        let lines = self.lines();
        let at = self.index.at(lines.offset(pos))?;
        matches!(at.symbol, Symbol::Node(_) | Symbol::Field(_)).then(|| lines.range(&at.span))
    }

    /// Renames the node or field under the cursor everywhere the graph names it (its
    /// headers, edges, outputs, expressions and inline templates) and, for a field, in
    /// the prompt files that read it.
    pub fn rename(&self, pos: Position, new_name: &str) -> Result<WorkspaceEdit, RenameError> {
        let lines = self.lines();
        let at = self
            .index
            .at(lines.offset(pos))
            .ok_or(RenameError::NothingHere)?;
        let spec = self
            .validation
            .spec
            .as_ref()
            .ok_or(RenameError::NothingHere)?;
        if !crate::load::is_identifier(new_name) {
            return Err(RenameError::BadName(new_name.into()));
        }
        // The loader's rules for the new name: an identifier, not a reserved word.
        let (reserved, taken) = match &at.symbol {
            Symbol::Node(_) => (
                crate::load::is_reserved("nodes", new_name),
                spec.node(new_name).is_some(),
            ),
            Symbol::Field(_) => (
                crate::load::is_reserved("state", new_name),
                spec.field(new_name).is_some(),
            ),
            _ => return Err(RenameError::NothingHere),
        };
        if reserved {
            return Err(RenameError::Reserved(new_name.into()));
        }
        if taken {
            return Err(RenameError::Taken(new_name.into()));
        }
        let mut edits: Vec<TextEdit> = self
            .index
            .of(&at.symbol)
            .map(|o| TextEdit::new(lines.range(&o.span), new_name.to_string()))
            .collect();
        edits.sort_by_key(|e| (e.range.start.line, e.range.start.character));
        let mut changes = HashMap::from([(self.uri.clone(), edits)]);
        if let Symbol::Field(old) = &at.symbol {
            for (uri, edits) in self.prompt_edits(old, new_name) {
                changes.insert(uri, edits);
            }
        }
        Ok(WorkspaceEdit::new(changes))
    }

    /// A field's name in every prompt file the check read (templates, not schemas or
    /// subgraphs), as each was on disk.
    fn prompt_edits(&self, old: &str, new: &str) -> Vec<(Url, Vec<TextEdit>)> {
        let mut out = Vec::new();
        for id in 0..self.sources.names().len() {
            let name = self.sources.name(id);
            if id == self.file() || name.ends_with(".json") || name.ends_with(".toml") {
                continue;
            }
            let text = self.sources.text(id);
            let lines = LineIndex::new(text);
            let edits: Vec<TextEdit> = index::words(text, 0..text.len(), true)
                .into_iter()
                .filter(|(w, _, filter)| *w == old && !filter)
                .map(|(_, span, _)| TextEdit::new(lines.range(&span), new.to_string()))
                .collect();
            if let (false, Some(uri)) = (edits.is_empty(), self.file_url(id)) {
                out.push((uri, edits));
            }
        }
        out
    }
}

/// `path` from the working directory when relative, lexically normalised.
fn absolute(path: &Path) -> PathBuf {
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |d| d.join(path))
    };
    index::normalize(&full)
}

fn file_uri(path: &Path) -> Option<Url> {
    Url::from_file_path(path).ok()
}

#[cfg(test)]
mod tests;
