//! Problems found in a graph, each pointing at the place in a file.

use crate::source::{FileId, Sources};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::term::{self, Config};
use serde::Serialize;
use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem: a message, the span it is about, and what to do.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable short name of the check, for `--format json` and for tests.
    pub code: &'static str,
    pub message: String,
    pub file: FileId,
    pub span: Range<usize>,
    /// Short text under the caret.
    pub label: String,
    pub help: Option<String>,
    pub notes: Vec<String>,
    /// Text already formatted by its producer (the toml crate's syntax errors), shown
    /// as it is.
    pub preformatted: Option<String>,
}

impl Diagnostic {
    pub fn error(
        code: &'static str,
        file: FileId,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity: Severity::Error,
            code,
            message: message.into(),
            file,
            span,
            label: String::new(),
            help: None,
            notes: Vec::new(),
            preformatted: None,
        }
    }

    pub fn warning(
        code: &'static str,
        file: FileId,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(code, file, span, message)
        }
    }

    #[must_use]
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    #[must_use]
    pub fn help_opt(mut self, help: Option<String>) -> Self {
        if help.is_some() {
            self.help = help;
        }
        self
    }

    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Renders as `error: ...`, `--> file:line:col`, the source line, a caret and `help:`.
    pub fn render(&self, sources: &Sources) -> String {
        if let Some(text) = &self.preformatted {
            return format!("{}\n", text.trim_end());
        }
        let span = sources.clamp(self.file, self.span.clone());
        let mut cs = match self.severity {
            Severity::Error => CsDiagnostic::error(),
            Severity::Warning => CsDiagnostic::warning(),
        }
        .with_message(&self.message)
        .with_labels(vec![
            Label::primary(self.file, span).with_message(&self.label),
        ]);
        let mut notes: Vec<String> = self.notes.iter().map(|n| format!("note: {n}")).collect();
        if let Some(help) = &self.help {
            notes.push(format!("help: {help}"));
        }
        cs = cs.with_notes(notes);
        let config = Config {
            chars: term::Chars::ascii(),
            start_context_lines: 0,
            end_context_lines: 0,
            ..Config::default()
        };
        let text = term::emit_into_string(&config, sources.files(), &cs)
            .unwrap_or_else(|_| format!("error: {}\n", self.message));
        let mut out = String::with_capacity(text.len().min(8 << 10));
        for line in text.trim_end().lines() {
            out.push_str(&cut_snippet(line));
            out.push('\n');
        }
        out
    }

    /// The machine-readable form used by `validate --format json`.
    pub fn to_json(&self, sources: &Sources) -> JsonDiagnostic {
        let span = sources.clamp(self.file, self.span.clone());
        let (line, column) = sources.line_col(self.file, span.start);
        let (end_line, end_column) = sources.line_col(self.file, span.end);
        JsonDiagnostic {
            severity: self.severity,
            code: self.code,
            message: self.message.clone(),
            file: sources.name(self.file).to_string(),
            line,
            column,
            end_line,
            end_column,
            label: self.label.clone(),
            help: self.help.clone(),
            notes: self.notes.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct JsonDiagnostic {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Source lines (and the caret lines under them) longer than this many characters are
/// cut: a generated one-line template of megabytes would otherwise fill the terminal.
const MAX_SNIPPET_CHARS: usize = 200;

/// `line` cut to [`MAX_SNIPPET_CHARS`] when it is a snippet line (`12 | ...`, `  | ^^^`).
fn cut_snippet(line: &str) -> std::borrow::Cow<'_, str> {
    let gutter = line
        .trim_start()
        .trim_start_matches(|c: char| c.is_ascii_digit());
    let is_snippet = gutter.starts_with(" |") || gutter.starts_with('|');
    match line.char_indices().nth(MAX_SNIPPET_CHARS) {
        Some((cut, _)) if is_snippet => {
            // A caret line keeps its label, after the cut carets.
            let label = match line.rfind('^') {
                Some(last) if last >= cut => &line[last + 1..],
                _ => "",
            };
            format!("{} ...{label}", &line[..cut]).into()
        }
        _ => line.into(),
    }
}

/// Orders diagnostics by file and position so output is stable and reads top to bottom.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| (a.file, a.span.start, a.code).cmp(&(b.file, b.span.start, b.code)));
}
