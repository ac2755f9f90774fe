//! Hover: what the name under the cursor is.

use super::Analysis;
use super::docs;
use super::index::Symbol;
use crate::spec::FieldSpec;
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position};

impl Analysis {
    /// A node's kind and description, a field's type, reducer and description, a
    /// constant's value, a node kind's or a filter's meaning, a file's full path.
    pub fn hover(&self, pos: Position) -> Option<Hover> {
        let lines = self.lines();
        let at = self.index.at(lines.offset(pos))?;
        let spec = self.validation.spec.as_ref()?;
        let value = match &at.symbol {
            Symbol::Node(name) => {
                let node = spec.node(name)?;
                let mut s = format!("(node) `{name}`: `{}`", node.kind.get_ref().name());
                if node.kind_unknown {
                    s = format!("(node) `{name}`");
                }
                paragraph(&mut s, &node.description);
                s
            }
            Symbol::Field(name) => field(spec.field(name)?),
            Symbol::Kind(kind) => format!("(node kind) `{}`\n\n{}", kind.name(), docs::kind(*kind)),
            Symbol::Filter(name) => match docs::filter(name) {
                Some(doc) => format!("(filter) `{name}`\n\n{doc}"),
                None => format!("(filter) `{name}`: not a filter Switchyard knows"),
            },
            Symbol::File(_, resolved) => {
                let mut s = format!("(file) `{}`", resolved.display());
                if !resolved.is_file() {
                    s.push_str("\n\nnot found");
                }
                s
            }
        };
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value,
            }),
            range: Some(lines.range(&at.span)),
        })
    }
}

fn field(f: &FieldSpec) -> String {
    let name = f.name.get_ref();
    let ty = f.ty.get_ref();
    let value = f.default.as_ref().map(|d| d.get_ref().to_string());
    let mut s = match (&f.configurable, f.constant) {
        (Some(bounds), _) => {
            let mut s = format!("(configurable) `{name}`: `{ty}`");
            if let Some(v) = &value {
                s.push_str(&format!(" = `{v}`"));
            }
            let mut limits = Vec::new();
            if let Some(min) = &bounds.min {
                limits.push(format!("at least `{}`", min.get_ref()));
            }
            if let Some(max) = &bounds.max {
                limits.push(format!("at most `{}`", max.get_ref()));
            }
            if let Some(one_of) = &bounds.one_of {
                let list: Vec<String> = one_of.get_ref().iter().map(|v| format!("`{v}`")).collect();
                limits.push(format!("one of {}", list.join(", ")));
            }
            if !limits.is_empty() {
                s.push_str(&format!("\n\n{}", limits.join("; ")));
            }
            s
        }
        (None, true) => format!(
            "(constant) `{name}`: `{ty}` = `{}`",
            value.unwrap_or_default()
        ),
        (None, false) => {
            let mut s = format!(
                "(state field) `{name}`: `{ty}`, reducer `{}`",
                f.reducer().name()
            );
            if let Some(v) = &value {
                s.push_str(&format!(", default `{v}`"));
            }
            if f.required {
                s.push_str(", required");
            }
            if let Some(schema) = &f.schema {
                s.push_str(&format!(", schema `{}`", schema.get_ref()));
            }
            s
        }
    };
    paragraph(&mut s, &f.description);
    s
}

fn paragraph(s: &mut String, text: &str) {
    if !text.is_empty() {
        s.push_str("\n\n");
        s.push_str(text);
    }
}
