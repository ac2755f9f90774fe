//! Every place a graph file names something: the declaration and the uses of each node
//! and state field (in `next`, routes, `output`, expressions and inline templates),
//! node kinds, template filters and the prompt and schema files it reads. Hover,
//! definition, references and rename all read this one list.

use super::outline::Outline;
use crate::check::sources::{Source, sources};
use crate::spec::{END, GraphSpec, KindSpec, NodeKind, Prices, Sp, model_ref};
use std::ops::Range;
use std::path::PathBuf;

/// What a name at a place refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Symbol {
    Node(String),
    /// A state field, or a `[consts]` / `[configurable]` value (also kept as fields).
    Field(String),
    Kind(NodeKind),
    Filter(String),
    /// A file the graph reads: as written, and resolved against the root.
    File(String, PathBuf),
}

#[derive(Clone, Debug)]
pub(crate) struct Occurrence {
    /// The name's own bytes, quotes left out.
    pub(crate) span: Range<usize>,
    pub(crate) symbol: Symbol,
    /// The place the symbol is declared (`[nodes.x]`, `[state.x]`, a const's key).
    pub(crate) decl: bool,
}

/// The occurrences of one file, in no particular order.
#[derive(Default)]
pub(crate) struct Index {
    pub(crate) occurrences: Vec<Occurrence>,
}

impl Index {
    pub(crate) fn build(spec: &GraphSpec, text: &str, outline: &Outline) -> Index {
        let mut b = Builder {
            text,
            spec,
            out: Vec::new(),
        };
        b.nodes(outline);
        b.fields();
        b.code();
        b.files();
        Index { occurrences: b.out }
    }

    /// The occurrence under byte `offset` (its end counts, for a cursor just after a
    /// name).
    pub(crate) fn at(&self, offset: usize) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|o| o.span.start <= offset && offset <= o.span.end)
            .min_by_key(|o| o.span.len())
    }

    pub(crate) fn of<'a>(&'a self, symbol: &'a Symbol) -> impl Iterator<Item = &'a Occurrence> {
        self.occurrences.iter().filter(move |o| o.symbol == *symbol)
    }

    pub(crate) fn decl(&self, symbol: &Symbol) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|o| o.decl && o.symbol == *symbol)
            .min_by_key(|o| o.span.start)
    }
}

struct Builder<'a> {
    text: &'a str,
    spec: &'a GraphSpec,
    out: Vec<Occurrence>,
}

impl Builder<'_> {
    fn push(&mut self, span: Range<usize>, symbol: Symbol, decl: bool) {
        if !self.out.iter().any(|o| o.span == span) {
            self.out.push(Occurrence { span, symbol, decl });
        }
    }

    /// A name written as a key or a string: its span without the quotes.
    fn name(&mut self, s: &Sp<String>, symbol: Symbol, decl: bool) {
        let span = inner(self.text, s.span());
        self.push(span, symbol, decl);
    }

    fn node_ref(&mut self, s: &Sp<String>) {
        if s.get_ref() != END {
            self.name(s, Symbol::Node(s.get_ref().clone()), false);
        }
    }

    fn field_ref(&mut self, s: &Sp<String>) {
        self.name(s, Symbol::Field(s.get_ref().clone()), false);
    }

    fn nodes(&mut self, outline: &Outline) {
        let spec = self.spec;
        for node in &spec.nodes {
            self.name(&node.name, Symbol::Node(node.name.get_ref().clone()), true);
            if !node.kind_unknown {
                let span = inner(self.text, node.kind.span());
                self.push(span, Symbol::Kind(*node.kind.get_ref()), false);
            }
            for edge in node.edges() {
                self.node_ref(edge.target);
            }
            // `next = ["a", "b"]` and a case naming several nodes: `edges` gives each
            // target once; the forks' first branches are read here too.
            for (_, targets) in node.route.iter().flat_map(|r| &r.case_forks) {
                targets.iter().for_each(|t| self.node_ref(t));
            }
        }
        // `[nodes.x.set]`, `[nodes.x.route]`: the name again, which a rename changes.
        for h in &outline.headers {
            if let Some((name, span)) = h.named("nodes") {
                self.push(span.clone(), Symbol::Node(name.to_string()), false);
            }
        }
        for s in spec.graph.entry.iter() {
            self.node_ref(s);
        }
        // `on_limit` names a node, or is a keyword.
        for s in spec.graph.on_limit.iter() {
            if spec.node(s.get_ref()).is_some() {
                self.node_ref(s);
            }
        }
    }

    fn fields(&mut self) {
        let spec = self.spec;
        for f in &spec.state {
            self.name(&f.name, Symbol::Field(f.name.get_ref().clone()), true);
        }
        for list in [&spec.graph.input, &spec.graph.output]
            .into_iter()
            .flatten()
        {
            list.get_ref().iter().for_each(|s| self.field_ref(s));
        }
        for node in &spec.nodes {
            for (field, _) in &node.set {
                self.field_ref(field);
            }
            for field in node.output_fields() {
                self.field_ref(field);
            }
            if let KindSpec::Llm(l) = &node.body {
                l.history.iter().for_each(|s| self.field_ref(s));
                l.model.iter().for_each(|m| self.model(m));
            }
        }
        if let Some(m) = &spec.llm.model {
            self.model(m);
        }
    }

    /// `model = "{{ MODEL }}"`: the constant it reads.
    fn model(&mut self, m: &Sp<String>) {
        if let Some(name) = model_ref(m.get_ref())
            && let Some(raw) = self.text.get(m.span())
            && let Some(at) = raw.find(name)
        {
            let start = m.span().start + at;
            self.push(
                start..start + name.len(),
                Symbol::Field(name.to_string()),
                false,
            );
        }
    }

    /// Names read by expressions and inline templates.
    fn code(&mut self) {
        for source in sources(self.spec) {
            let (text, template) = match source {
                Source::Expr { text, .. } => (text, false),
                Source::Template { text, .. } => (text, true),
            };
            let span = inner(self.text, text.span());
            for (word, at, filter) in words(self.text, span, template) {
                if filter {
                    self.push(at, Symbol::Filter(word.to_string()), false);
                } else if self.spec.field(word).is_some() {
                    self.push(at, Symbol::Field(word.to_string()), false);
                }
            }
        }
    }

    fn files(&mut self) {
        let spec = self.spec;
        let mut paths: Vec<&Sp<String>> = spec
            .state
            .iter()
            .filter_map(|f| f.schema.as_ref())
            .collect();
        if let Some(Prices::File(p)) = &spec.llm.prices {
            paths.push(p);
        }
        for node in &spec.nodes {
            match &node.body {
                KindSpec::Llm(l) => {
                    paths.extend([&l.prompt, &l.system, &l.schema].into_iter().flatten());
                    paths.extend(l.pseudo_tools.iter().filter_map(|p| p.schema.as_ref()));
                }
                KindSpec::Interrupt(i) => paths.extend(i.resume_schema.iter()),
                KindSpec::Graph(g) => paths.extend(g.graph.iter()),
                _ => {}
            }
        }
        for p in paths {
            let resolved = normalize(&spec.resolve(p.get_ref()));
            self.name(p, Symbol::File(p.get_ref().clone(), resolved), false);
        }
    }
}

/// A string's or key's span without its quotes (`"x"`, `'x'`, `"""x"""`, `'''x'''`).
pub(crate) fn inner(text: &str, span: Range<usize>) -> Range<usize> {
    let Some(raw) = text.get(span.clone()) else {
        return span;
    };
    for q in ["\"\"\"", "'''", "\"", "'"] {
        if raw.len() >= 2 * q.len() && raw.starts_with(q) && raw.ends_with(q) {
            return span.start + q.len()..span.end - q.len();
        }
    }
    span
}

/// The names an expression reads, or a template inside its `{{ }}` and `{% %}`, as
/// written in the file's text within `span`: (name, its span, whether it is a filter
/// after `|`). Attributes (`.name`), string literals and tests (`is string`) are left
/// out; what is a field is for the caller to say.
pub(crate) fn words(
    text: &str,
    span: Range<usize>,
    template: bool,
) -> Vec<(&str, Range<usize>, bool)> {
    let Some(raw) = text.get(span.clone()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if template {
        let mut from = 0;
        while let Some(open) = raw[from..].find(['{']).map(|i| from + i) {
            let close = match raw.get(open + 1..open + 2) {
                Some("{") => "}}",
                Some("%") => "%}",
                _ => {
                    from = open + 1;
                    continue;
                }
            };
            let body = open + 2;
            let end = raw[body..].find(close).map_or(raw.len(), |i| body + i);
            code_words(raw, body..end, span.start, &mut out);
            from = (end + 2).min(raw.len());
        }
    } else {
        code_words(raw, 0..raw.len(), span.start, &mut out);
    }
    out
}

const KEYWORDS: [&str; 16] = [
    "and", "or", "not", "in", "is", "if", "else", "elif", "for", "endfor", "endif", "true",
    "false", "none", "set", "endset",
];

fn code_words<'t>(
    raw: &'t str,
    range: Range<usize>,
    base: usize,
    out: &mut Vec<(&'t str, Range<usize>, bool)>,
) {
    let bytes = raw.as_bytes();
    let mut i = range.start;
    let mut quote: Option<u8> = None;
    // The last token that was not whitespace: `.` makes an attribute, `|` a filter,
    // `is` a test.
    let mut last: &str = "";
    while i < range.end {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == b'\\' {
                // `\"` in a TOML basic string is the expression's `"`.
                if bytes.get(i + 1) == Some(&q) && q == b'"' {
                    quote = None;
                }
                i += 2;
                continue;
            }
            if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match b {
            b'\'' | b'"' => {
                quote = Some(b);
                last = "'";
                i += 1;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'"') => {
                quote = Some(b'"');
                last = "'";
                i += 2;
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < range.end && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let word = &raw[start..i];
                let at = base + start..base + i;
                match last {
                    "." | "is" => {}
                    "|" => out.push((word, at, true)),
                    _ if KEYWORDS.contains(&word) => {}
                    // A keyword argument's name (`map(attribute='x')`).
                    _ if raw[i..range.end].trim_start().starts_with('=')
                        && !raw[i..range.end].trim_start().starts_with("==") => {}
                    _ => out.push((word, at, false)),
                }
                last = if word == "is" || word == "not" && last == "is" {
                    "is"
                } else {
                    word
                };
            }
            b if b.is_ascii_whitespace() => i += 1,
            b if b.is_ascii_digit() => {
                while i < range.end && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                    i += 1;
                }
                last = "0";
            }
            _ => {
                let len = raw[i..].chars().next().map_or(1, char::len_utf8);
                last = match b {
                    b'.' => ".",
                    b'|' => "|",
                    _ => "(",
                };
                i += len;
            }
        }
    }
}

/// `a/b/../c` as `a/c`, without asking the file system: the path a diagnostic's file
/// is named by and an editor's URI for it then agree.
pub(crate) fn normalize(path: &std::path::Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_skip_attributes_strings_tests_and_keyword_arguments() {
        let text =
            r#"x = "a.b + c | length if d is string else m | map(attribute='e') | join(\"f\")""#;
        let span = inner(text, 4..text.len());
        let found: Vec<(&str, bool)> = words(text, span, false)
            .into_iter()
            .map(|(w, _, f)| (w, f))
            .collect();
        assert_eq!(
            found,
            [
                ("a", false),
                ("c", false),
                ("length", true),
                ("d", false),
                ("m", false),
                ("map", true),
                ("join", true),
            ]
        );
    }

    #[test]
    fn template_words_are_only_inside_delimiters() {
        let text = "r = \"task {{ task | upper }} and {% if done %}ok{% endif %}\"";
        let found: Vec<&str> = words(text, inner(text, 4..text.len()), true)
            .into_iter()
            .map(|(w, _, _)| w)
            .collect();
        assert_eq!(found, ["task", "upper", "done"]);
    }
}
