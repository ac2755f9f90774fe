//! The files a graph is made of: the graph file itself and the prompt and schema files
//! it names. Diagnostics point into any of them by [`FileId`].

use codespan_reporting::files::{Files, SimpleFiles};
use std::ops::Range;

/// Index of a file in [`Sources`].
pub type FileId = usize;

/// Every source text read while loading and checking, kept so diagnostics can quote it.
#[derive(Default)]
pub struct Sources {
    files: SimpleFiles<String, String>,
    names: Vec<String>,
}

impl Sources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file under the name diagnostics will show.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let name = name.into();
        self.names.push(name.clone());
        self.files.add(name, text.into())
    }

    /// The names of every file read, in order (the graph file first): what a graph
    /// depends on, for a watcher.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn name(&self, id: FileId) -> &str {
        self.files
            .get(id)
            .map(|f| f.name().as_str())
            .unwrap_or("<unknown>")
    }

    pub fn text(&self, id: FileId) -> &str {
        self.files
            .get(id)
            .map(|f| f.source().as_str())
            .unwrap_or("")
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, id: FileId, offset: usize) -> (usize, usize) {
        let line = self.files.line_index(id, offset).unwrap_or(0);
        let col = self.files.column_number(id, line, offset).unwrap_or(1);
        (line + 1, col)
    }

    pub(crate) fn files(&self) -> &SimpleFiles<String, String> {
        &self.files
    }

    /// Clamps a span to the file so a stale or synthetic span never breaks rendering.
    pub(crate) fn clamp(&self, id: FileId, span: Range<usize>) -> Range<usize> {
        let len = self.text(id).len();
        let start = span.start.min(len);
        let end = span.end.clamp(start, len);
        start..end
    }
}
