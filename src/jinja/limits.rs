//! How complex an expression or template may be before minijinja sees it.
//!
//! minijinja parses and compiles by recursion: an expression of tens of thousands of
//! nested `not`, `+`, `~`, filters, attributes or `if/else` overflows the stack and
//! aborts the process, in `validate` as in a run. So every source is measured here
//! first, with a scan that does not recurse: the operators of each expression (or of
//! each `{{ }}` and `{% %}` of a template), and how deep a template's blocks nest. A
//! source past a limit is refused with a diagnostic and never parsed.

use crate::spec::{MAX_BLOCK_DEPTH, MAX_OPERATORS};

/// Why `source` is too complex to parse safely, if it is. `template` says whether it is
/// a template (text with tags) rather than a bare expression.
pub(crate) fn too_complex(source: &str, template: bool) -> Option<String> {
    if !template {
        let n = operators(source);
        return (n > MAX_OPERATORS).then(|| {
            format!("the expression has {n} operators; at most {MAX_OPERATORS} are taken")
        });
    }
    let mut depth = 0usize;
    let mut rest = source;
    while let Some(open) = rest.find(['{']) {
        let after = &rest[open + 1..];
        let (close, is_block) = match after.as_bytes().first() {
            Some(b'{') => ("}}", false),
            Some(b'%') => ("%}", true),
            Some(b'#') => {
                // A comment: skip to its end.
                rest = after.find("#}").map_or("", |e| &after[e + 2..]);
                continue;
            }
            _ => {
                rest = after;
                continue;
            }
        };
        let inner_start = 1;
        let Some(end) = after[inner_start..].find(close) else {
            break;
        };
        let inner = &after[inner_start..inner_start + end];
        let n = operators(inner);
        if n > MAX_OPERATORS {
            return Some(format!(
                "a tag of the template has {n} operators; at most {MAX_OPERATORS} are taken"
            ));
        }
        if is_block {
            let word = inner
                .trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace())
                .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .next()
                .unwrap_or("");
            match word {
                "if" | "for" | "macro" | "call" | "filter" | "with" | "block" | "raw"
                | "autoescape" => depth += 1,
                // `{% set x = ... %}` is one tag; `{% set x %}...{% endset %}` a block.
                "set" if !inner.contains('=') => depth += 1,
                w if w.starts_with("end") => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > MAX_BLOCK_DEPTH {
                return Some(format!(
                    "the template's blocks nest more than {MAX_BLOCK_DEPTH} deep"
                ));
            }
        }
        rest = &after[inner_start + end + close.len()..];
    }
    None
}

/// The operator tokens of an expression: every symbol and keyword that may make the
/// syntax tree one level deeper. String literals are skipped.
fn operators(source: &str) -> usize {
    let bytes = source.as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\'' | b'"' => {
                // A string literal, with backslash escapes.
                i += 1;
                while i < bytes.len() && bytes[i] != b {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                continue;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'~' | b'|' | b'.' | b'[' | b'(' | b'<' | b'>'
            | b'=' | b'!' | b',' | b':' => n += 1,
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if matches!(
                    &source[start..i],
                    "not" | "and" | "or" | "if" | "else" | "in" | "is"
                ) {
                    n += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_sources_pass() {
        assert_eq!(
            too_complex("action.kind in ['click', 'type'] and not done", false),
            None
        );
        assert_eq!(
            too_complex(
                "{% for m in messages %}{% if m.role == 'user' %}{{ m.content | trim }}{% endif %}{% endfor %}",
                true
            ),
            None
        );
        // Operators inside strings do not count.
        assert_eq!(too_complex(&format!("'{}'", "+".repeat(5000)), false), None);
    }

    #[test]
    fn deep_sources_are_refused_before_parsing() {
        let nots = format!("{}x", "not ".repeat(20_000));
        assert_eq!(
            too_complex(&nots, false).unwrap(),
            "the expression has 20000 operators; at most 1000 are taken"
        );
        let filters = format!("{{{{ x{} }}}}", "|abs".repeat(2_000));
        assert_eq!(
            too_complex(&filters, true).unwrap(),
            "a tag of the template has 2000 operators; at most 1000 are taken"
        );
        let ifs = "{% if x %}".repeat(101);
        assert_eq!(
            too_complex(&ifs, true).unwrap(),
            "the template's blocks nest more than 100 deep"
        );
        // Closed blocks do not add up.
        assert_eq!(
            too_complex(&"{% if x %}a{% endif %}".repeat(500), true),
            None
        );
    }
}
