//! Quick fixes: a diagnostic whose help says "did you mean `x`?" offers to write `x`
//! in place of the misspelt name.

use super::Analysis;
use lsp_types::{CodeAction, CodeActionKind, Range, TextEdit, WorkspaceEdit};
use std::collections::HashMap;

impl Analysis {
    /// The quick fixes of the graph's diagnostics that touch `range`.
    pub fn code_actions(&self, range: Range) -> Vec<CodeAction> {
        let lines = self.lines();
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let ours = self
            .validation
            .diagnostics
            .iter()
            .filter(|d| d.file == self.file());
        for d in ours {
            let Some(suggestion) = d.help.as_deref().and_then(suggested) else {
                continue;
            };
            let span = self.sources.clamp(d.file, d.span.clone());
            let diag_range = lines.range(&span);
            if diag_range.end < range.start || range.end < diag_range.start {
                continue;
            }
            let Some(word) = misspelt(&self.text, &span, &d.message, suggestion) else {
                continue;
            };
            if !seen.insert(word.start) {
                continue;
            }
            let old = &self.text[word.clone()];
            let edit = TextEdit::new(lines.range(&word), suggestion.to_string());
            let mut lsp = self.convert(d, &mut HashMap::new());
            lsp.related_information = None;
            out.push(CodeAction {
                title: format!("Replace `{old}` with `{suggestion}`"),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![lsp]),
                edit: Some(WorkspaceEdit::new(HashMap::from([(
                    self.uri.clone(),
                    vec![edit],
                )]))),
                is_preferred: Some(true),
                ..Default::default()
            });
        }
        out
    }
}

/// The name in "did you mean `x`?".
fn suggested(help: &str) -> Option<&str> {
    let rest = &help[help.find("did you mean `")? + "did you mean `".len()..];
    Some(&rest[..rest.find('`')?])
}

/// The span of the misspelt word inside `span`: the name the message quotes, if it
/// is there, else the word closest to the suggestion.
fn misspelt(
    text: &str,
    span: &std::ops::Range<usize>,
    message: &str,
    suggestion: &str,
) -> Option<std::ops::Range<usize>> {
    let raw = text.get(span.clone())?;
    let mut words: Vec<(usize, &str)> = Vec::new();
    let mut start = None;
    for (i, c) in raw.char_indices().chain(std::iter::once((raw.len(), ' '))) {
        let part = c.is_ascii_alphanumeric() || c == '_';
        match (part, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push((s, &raw[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    let quoted: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
    let chosen = words
        .iter()
        .find(|(_, w)| quoted.contains(w) && *w != suggestion)
        .or_else(|| {
            words
                .iter()
                .filter(|(_, w)| *w != suggestion)
                .min_by_key(|(_, w)| strsim::damerau_levenshtein(w, suggestion))
        })?;
    Some(span.start + chosen.0..span.start + chosen.0 + chosen.1.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_suggestion_and_the_misspelt_word() {
        assert_eq!(suggested("did you mean `tools`?"), Some("tools"));
        assert_eq!(suggested("declare it"), None);
        let text = "next = \"tols\"";
        assert_eq!(
            misspelt(text, &(7..13), "unknown node `tols`", "tools"),
            Some(8..12)
        );
        let text = "type = \"strng?\"";
        assert_eq!(
            misspelt(text, &(7..15), "field `x` has an invalid type", "string"),
            Some(8..13)
        );
    }
}
