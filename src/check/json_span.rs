//! Where a value sits in a JSON file's text, so that a diagnostic about a schema points
//! at the property it is about rather than at the graph line that names the file.
//! serde_json keeps no positions; this walks the text just far enough to find one.

use std::ops::Range;

/// Deepest nesting walked: a schema nested deeper is pointed at from its top.
const MAX_DEPTH: usize = 128;

/// The span of the key of the value at `path` (object keys, or array indexes as
/// numbers), or of the value itself when it has no key (the root, an array item).
pub(crate) fn locate(text: &str, path: &[String]) -> Option<Range<usize>> {
    let b = text.as_bytes();
    let mut i = 0;
    find(b, &mut i, path, None, 0)
}

fn find(
    b: &[u8],
    i: &mut usize,
    path: &[String],
    key: Option<Range<usize>>,
    depth: usize,
) -> Option<Range<usize>> {
    skip_ws(b, i);
    let start = *i;
    let Some((first, rest)) = path.split_first() else {
        skip_value(b, i, depth)?;
        return Some(key.unwrap_or(start..*i));
    };
    if depth >= MAX_DEPTH {
        return None;
    }
    match b.get(*i)? {
        b'{' => {
            *i += 1;
            loop {
                skip_ws(b, i);
                if b.get(*i)? == &b'}' {
                    return None;
                }
                let key_start = *i;
                let name = string(b, i)?;
                let key_span = key_start..*i;
                skip_ws(b, i);
                if b.get(*i)? != &b':' {
                    return None;
                }
                *i += 1;
                if &name == first {
                    return find(b, i, rest, Some(key_span), depth + 1);
                }
                skip_value(b, i, depth + 1)?;
                if !comma(b, i)? {
                    return None;
                }
            }
        }
        b'[' => {
            let want: usize = first.parse().ok()?;
            *i += 1;
            for n in 0.. {
                skip_ws(b, i);
                if b.get(*i)? == &b']' {
                    return None;
                }
                if n == want {
                    return find(b, i, rest, None, depth + 1);
                }
                skip_value(b, i, depth + 1)?;
                if !comma(b, i)? {
                    return None;
                }
            }
            None
        }
        _ => None,
    }
}

/// Past a `,` (true) or at the closing bracket (false).
fn comma(b: &[u8], i: &mut usize) -> Option<bool> {
    skip_ws(b, i);
    match b.get(*i)? {
        b',' => {
            *i += 1;
            Some(true)
        }
        b'}' | b']' => Some(false),
        _ => None,
    }
}

fn skip_ws(b: &[u8], i: &mut usize) {
    while b.get(*i).is_some_and(u8::is_ascii_whitespace) {
        *i += 1;
    }
}

fn skip_value(b: &[u8], i: &mut usize, depth: usize) -> Option<()> {
    skip_ws(b, i);
    match b.get(*i)? {
        b'"' => string(b, i).map(drop),
        open @ (b'{' | b'[') => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let close = if *open == b'{' { b'}' } else { b']' };
            *i += 1;
            loop {
                skip_ws(b, i);
                if b.get(*i)? == &close {
                    *i += 1;
                    return Some(());
                }
                if close == b'}' {
                    string(b, i)?;
                    skip_ws(b, i);
                    if b.get(*i)? != &b':' {
                        return None;
                    }
                    *i += 1;
                }
                skip_value(b, i, depth + 1)?;
                if !comma(b, i)? {
                    skip_ws(b, i);
                    *i += 1;
                    return Some(());
                }
            }
        }
        _ => {
            while b
                .get(*i)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                *i += 1;
            }
            Some(())
        }
    }
}

/// A string token, decoded; `i` ends past its closing quote.
fn string(b: &[u8], i: &mut usize) -> Option<String> {
    if b.get(*i)? != &b'"' {
        return None;
    }
    let start = *i;
    *i += 1;
    loop {
        match b.get(*i)? {
            b'\\' => *i += 2,
            b'"' => {
                *i += 1;
                break;
            }
            _ => *i += 1,
        }
    }
    let token = std::str::from_utf8(b.get(start..*i)?).ok()?;
    serde_json::from_str(token).ok()
}

#[cfg(test)]
mod tests {
    use super::locate;

    fn at(text: &str, path: &[&str]) -> Option<String> {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        locate(text, &path).map(|r| text[r].to_string())
    }

    #[test]
    fn finds_keys_and_items() {
        let text = r#"{ "type": "object", "properties": { "a\"b": { "type": "string" }, "list": [1, {"x": true}] } }"#;
        assert_eq!(at(text, &["type"]).as_deref(), Some(r#""type""#));
        assert_eq!(
            at(text, &["properties", "a\"b"]).as_deref(),
            Some(r#""a\"b""#)
        );
        assert_eq!(
            at(text, &["properties", "list", "1"]).as_deref(),
            Some(r#"{"x": true}"#)
        );
        assert_eq!(
            at(text, &["properties", "list", "1", "x"]).as_deref(),
            Some(r#""x""#)
        );
        assert_eq!(at(text, &["nope"]), None);
        assert_eq!(at(text, &[]).map(|s| s.len()), Some(text.len()));
    }
}
