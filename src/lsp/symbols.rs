//! Document symbols: the nodes and state fields (constants, configurable values), in
//! the order written.

use super::Analysis;
use lsp_types::{DocumentSymbol, SymbolKind};

impl Analysis {
    pub fn symbols(&self) -> Vec<DocumentSymbol> {
        let Some(spec) = &self.validation.spec else {
            return Vec::new();
        };
        let lines = self.lines();
        let text_len = self.text.len();
        let mut out: Vec<(usize, DocumentSymbol)> = Vec::new();
        let mut push = |name: &str,
                        detail: String,
                        kind,
                        select: std::ops::Range<usize>,
                        whole: Option<std::ops::Range<usize>>| {
            // The whole must hold the name, or a client drops the symbol.
            let whole = whole
                .filter(|w| w.start <= select.start && select.end <= w.end)
                .unwrap_or_else(|| select.clone());
            #[allow(deprecated)] // `deprecated` is a field every literal must fill.
            let symbol = DocumentSymbol {
                name: name.to_string(),
                detail: Some(detail),
                kind,
                tags: None,
                deprecated: None,
                range: lines.range(&whole),
                selection_range: lines.range(&select),
                children: None,
            };
            out.push((select.start, symbol));
        };
        for node in &spec.nodes {
            let name = node.name.get_ref();
            let select = super::index::inner(&self.text, node.name.span());
            let whole = self.outline.extent("nodes", name, text_len);
            let detail = if node.kind_unknown {
                "node".to_string()
            } else {
                node.kind.get_ref().name().to_string()
            };
            push(name, detail, SymbolKind::FUNCTION, select, whole);
        }
        for f in &spec.state {
            let name = f.name.get_ref();
            let select = super::index::inner(&self.text, f.name.span());
            let (kind, whole) = if f.constant {
                let end = f.default.as_ref().map_or(select.end, |d| d.span().end);
                let whole = match f.configurable {
                    Some(_) => self.outline.extent("configurable", name, text_len),
                    None => Some(select.start..end),
                };
                (SymbolKind::CONSTANT, whole)
            } else {
                (
                    SymbolKind::FIELD,
                    self.outline.extent("state", name, text_len),
                )
            };
            push(name, f.ty.get_ref().to_string(), kind, select, whole);
        }
        out.sort_by_key(|(at, _)| *at);
        out.into_iter().map(|(_, s)| s).collect()
    }
}
