//! The tables of a graph file read from its text alone: every `[a.b.c]` header with
//! the span of each key, and the keys of `[consts]` and `[configurable]`. It needs no
//! valid TOML, so completion still knows the names while a line is half typed, and it
//! finds the names in sub-table headers (`[nodes.x.set]`) that the spec does not keep.

use std::ops::Range;

/// One table header, `[nodes.model.set]` or `[[...]]`.
pub(crate) struct Header {
    /// The whole line's span, from its first character.
    pub(crate) line: Range<usize>,
    /// Each dotted key with the span of its text (quotes left out).
    pub(crate) keys: Vec<(String, Range<usize>)>,
}

impl Header {
    pub(crate) fn key(&self, i: usize) -> Option<&str> {
        self.keys.get(i).map(|(k, _)| k.as_str())
    }

    /// `[nodes.<name>...]` or `[state.<name>...]`: the name and its span.
    pub(crate) fn named(&self, section: &str) -> Option<(&str, &Range<usize>)> {
        match self.keys.as_slice() {
            [(s, _), (name, span), ..] if s == section => Some((name, span)),
            _ => None,
        }
    }
}

#[derive(Default)]
pub(crate) struct Outline {
    pub(crate) headers: Vec<Header>,
    /// Keys of `[consts]` and `[configurable]`, with their spans.
    pub(crate) consts: Vec<(String, Range<usize>)>,
}

impl Outline {
    pub(crate) fn read(text: &str) -> Outline {
        let mut out = Outline::default();
        // Inside a multi-line string no line is a header (an expression's `[` often
        // starts one).
        let mut open: Option<&str> = None;
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let start = at;
            at += line.len();
            let was_open = open.is_some();
            for delim in ["'''", "\"\""] {
                let n = line.matches(delim).count();
                match open {
                    Some(d) if d == delim && n % 2 == 1 => open = None,
                    None if n % 2 == 1 => {
                        open = Some(if delim == "'''" { "'''" } else { "\"\"\"" })
                    }
                    _ => {}
                }
            }
            if was_open {
                continue;
            }
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            if trimmed.starts_with('[') {
                if let Some(keys) = header_keys(trimmed, start + indent) {
                    out.headers.push(Header {
                        line: start + indent..start + line.trim_end().len(),
                        keys,
                    });
                }
                continue;
            }
            let table = out.headers.last().and_then(|h| h.key(0));
            let bare = out.headers.last().is_some_and(|h| h.keys.len() == 1);
            if bare
                && matches!(table, Some("consts" | "configurable"))
                && let Some((key, span)) = line_key(trimmed, start + indent)
            {
                out.consts.push((key, span));
            }
        }
        for h in &out.headers {
            if let Some((name, span)) = h.named("configurable") {
                out.consts.push((name.to_string(), span.clone()));
            }
        }
        out
    }

    /// Names declared by headers of `section` (`nodes`, `state`), each once, in order.
    pub(crate) fn names(&self, section: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (name, _) in self.headers.iter().filter_map(|h| h.named(section)) {
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }

    /// The span from the first header of `[section.name]` to the line before the next
    /// header outside it: what a document symbol covers.
    pub(crate) fn extent(
        &self,
        section: &str,
        name: &str,
        text_len: usize,
    ) -> Option<Range<usize>> {
        let inside = |h: &Header| h.named(section).is_some_and(|(n, _)| n == name);
        let first = self.headers.iter().position(inside)?;
        let start = self.headers[first].line.start;
        let end = self.headers[first..]
            .iter()
            .find(|h| !inside(h))
            .map_or(text_len, |h| h.line.start);
        Some(start..end)
    }

    /// The table the byte `offset` lies in: the last header before it.
    pub(crate) fn table_at(&self, offset: usize) -> Option<&Header> {
        self.headers
            .iter()
            .take_while(|h| h.line.start <= offset)
            .last()
    }
}

/// The dotted keys of a header line starting with `[`; none if it is not one.
fn header_keys(line: &str, base: usize) -> Option<Vec<(String, Range<usize>)>> {
    let bytes = line.as_bytes();
    let mut i = if line.starts_with("[[") { 2 } else { 1 };
    let mut keys = Vec::new();
    loop {
        while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
            i += 1;
        }
        let (key, span, next) = key_at(line, i)?;
        keys.push((key, base + span.start..base + span.end));
        i = next;
        while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'.') => i += 1,
            Some(b']') => return Some(keys),
            _ => return None,
        }
    }
}

/// `key = ...` at the start of a line: the key and its span.
fn line_key(line: &str, base: usize) -> Option<(String, Range<usize>)> {
    let (key, span, next) = key_at(line, 0)?;
    line[next..]
        .trim_start()
        .starts_with('=')
        .then(|| (key, base + span.start..base + span.end))
}

/// A bare or quoted key at byte `i`: its text, its span (without quotes) and where
/// the text after it starts.
fn key_at(line: &str, i: usize) -> Option<(String, Range<usize>, usize)> {
    let rest = line.get(i..)?;
    match rest.chars().next()? {
        q @ ('"' | '\'') => {
            let end = rest[1..].find(q)? + 1;
            Some((rest[1..end].to_string(), i + 1..i + end, i + end + 1))
        }
        _ => {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(rest.len());
            (len > 0).then(|| (rest[..len].to_string(), i..i + len, i + len))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_headers_consts_and_skips_multiline_strings() {
        let text = "[consts]\nLIMIT = 3\n\n[nodes.a]\nkind = \"set\"\n\n[nodes.a.set]\nx = '''\n[not, a, header]\n'''\n[nodes.\"b\"]\n[state.x]\n[configurable.MODE]\n";
        let o = Outline::read(text);
        assert_eq!(o.names("nodes"), ["a", "b"]);
        assert_eq!(o.names("state"), ["x"]);
        let consts: Vec<&str> = o.consts.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(consts, ["LIMIT", "MODE"]);
        let b = o
            .headers
            .iter()
            .find_map(|h| h.named("nodes").filter(|(n, _)| *n == "b"));
        assert_eq!(&text[b.unwrap().1.clone()], "b");
        let a = o.extent("nodes", "a", text.len()).unwrap();
        assert!(text[a].ends_with("'''\n"));
    }
}
