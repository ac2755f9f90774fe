//! A snapshot's values as a resume reads them: small ones parsed, large ones kept as
//! the JSON text the store holds, checked to be JSON and parsed only when the run reads
//! them.
//!
//! Building a value tree is most of what reading a paused thread costs (a string and a
//! map allocation per element, a hash per key: ~80 instructions a byte), and a resumed
//! agent often replaces its largest value, the page it observed, before it reads it
//! again. Checking text is JSON costs a tenth of parsing it.

use super::StoreError;
use super::rows::corrupt;
use serde::Deserialize;
use serde_json::Value as Json;
use serde_json::value::RawValue;
use std::sync::Arc;

/// Values whose JSON text is this long or longer are kept as text until read; shorter
/// ones cost less to parse than to keep apart.
pub(crate) const LAZY_BYTES: usize = 256;

/// A snapshot's value as a store read it.
#[derive(Clone, Debug)]
pub enum Stored {
    Json(Arc<Json>),
    /// JSON text, checked: [`Stored::parse`] builds it.
    Text(Arc<str>),
}

impl Stored {
    /// A value read from `text`, already known to be JSON (a [`RawValue`]): kept as
    /// text when large and safe to parse later, parsed now otherwise.
    pub(crate) fn from_raw(thread: &str, raw: &RawValue, what: &str) -> Result<Self, StoreError> {
        let text = raw.get();
        if text.len() >= LAZY_BYTES && parses_later(text) {
            return Ok(Stored::Text(Arc::from(text)));
        }
        parse_deep(text)
            .map(|v| Stored::Json(Arc::new(v)))
            .map_err(|e| corrupt(thread, format!("`{what}`: {e}")))
    }

    /// The value. Text that `Stored::from_raw` kept parses (it was checked); should it
    /// not, the value is none rather than a panic.
    pub fn parse(&self) -> Arc<Json> {
        match self {
            Stored::Json(v) => v.clone(),
            Stored::Text(t) => Arc::new(parse_text(t)),
        }
    }
}

/// Text [`Stored::from_raw`] kept, parsed.
pub(crate) fn parse_text(text: &str) -> Json {
    parse_deep(text).unwrap_or(Json::Null)
}

impl PartialEq for Stored {
    fn eq(&self, other: &Self) -> bool {
        self.parse() == other.parse()
    }
}

impl From<Arc<Json>> for Stored {
    fn from(v: Arc<Json>) -> Self {
        Stored::Json(v)
    }
}

fn parse_deep(text: &str) -> serde_json::Result<Json> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = Json::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Whether checked JSON `text` is sure to parse into a value: [`RawValue`]'s check
/// reads numbers as digits, and a number a value cannot hold (`1e400`, hundreds of
/// digits) would fail only when parsed. Such text (only ever written by hand: a value
/// Switchyard writes holds finite numbers) is parsed at once, where a failure is an
/// error about the store. So is text with a `\u` escape: the check lets a lone
/// surrogate (`"\ud800"`) through, which a string cannot hold; and so is text with
/// serde_json's private raw-value token as a key, which its parse reads otherwise than
/// the text says. A scan for those escapes and that key, and for exponents and long
/// digit runs outside strings.
fn parses_later(text: &str) -> bool {
    const RAW_VALUE_TOKEN: &[u8] = b"$serde_json::private::RawValue\"";
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            // A string, most of a large value's text: from escape to escape.
            b'"' => {
                // serde_json reads an object whose key is its private token as the raw
                // JSON the token's value spells, which only a parse can tell.
                if b[i + 1..].starts_with(RAW_VALUE_TOKEN) {
                    return false;
                }
                i += 1;
                loop {
                    let Some(at) = b
                        .get(i..)
                        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
                    else {
                        return false;
                    };
                    let at = i + at;
                    if b[at] == b'"' {
                        i = at + 1;
                        break;
                    }
                    if b.get(at + 1) == Some(&b'u') {
                        return false;
                    }
                    i = at + 2;
                }
            }
            // A number (the `e` of `true` and `false` is no exponent: letters outside
            // strings are skipped one by one).
            b'-' | b'0'..=b'9' => {
                let mut digits = 0usize;
                while let Some(&c) = b.get(i) {
                    match c {
                        b'0'..=b'9' => digits += 1,
                        b'-' | b'+' | b'.' => {}
                        b'e' | b'E' => return false,
                        _ => break,
                    }
                    i += 1;
                }
                if digits > 18 {
                    return false;
                }
            }
            _ => i += 1,
        }
    }
    true
}

/// A write or snapshot value as stored: a value, or the record that holds it (see
/// `rows.rs`), its value checked but not parsed.
#[derive(Deserialize)]
pub(crate) struct RawWrite<'a> {
    pub(crate) field: Arc<str>,
    #[serde(borrow, default)]
    pub(crate) value: Option<&'a RawValue>,
    #[serde(default)]
    pub(crate) same: Option<u64>,
}

/// A row's writes (or a snapshot's values), checked to be JSON but not parsed.
pub(crate) fn raw_writes<'a>(
    thread: &str,
    text: &'a str,
    what: &str,
) -> Result<Vec<RawWrite<'a>>, StoreError> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    Vec::<RawWrite<'a>>::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| corrupt(thread, format!("`{what}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(text: &str) -> Stored {
        let raw: Box<RawValue> = serde_json::from_str(text).unwrap();
        Stored::from_raw("t", &raw, "snapshot").unwrap()
    }

    #[test]
    fn large_values_stay_text_until_parsed_and_small_ones_are_parsed() {
        let big = format!("{{\"name\": \"{}\", \"n\": [1, 2.5, -3]}}", "x".repeat(300));
        let s = stored(&big);
        assert!(matches!(s, Stored::Text(_)), "{s:?}");
        assert_eq!(*s.parse(), serde_json::from_str::<Json>(&big).unwrap());
        assert!(matches!(stored("[1, 2]"), Stored::Json(_)));
    }

    #[test]
    fn text_a_value_cannot_hold_is_parsed_at_once_and_reported() {
        // Digits in strings are not numbers, nor is the `e` of `true`; an exponent or a
        // long number is.
        let pad = "y".repeat(300);
        assert!(matches!(
            stored(&format!(
                "[\"{pad} 1e400 12345678901234567890 \\\" 2e9 \\\\\", true, false, -1.5, 7]"
            )),
            Stored::Text(_)
        ));
        for number in ["1e400", "12345678901234567890123"] {
            let text = format!("[\"{pad}\", {number}]");
            let raw: Box<RawValue> = serde_json::from_str(&text).unwrap();
            let got = Stored::from_raw("t", &raw, "snapshot");
            match number {
                "1e400" => assert_eq!(
                    got.unwrap_err().to_string(),
                    "checkpoint store: a record of thread `t` is corrupt: `snapshot`: number out of range at line 1 column 310"
                ),
                _ => assert!(matches!(got, Ok(Stored::Json(_)))),
            }
        }
    }

    #[test]
    fn text_with_a_unicode_escape_is_parsed_at_once() {
        let pad = "z".repeat(300);
        let text = format!("[\"{pad}\", \"\\ud800\"]");
        let raw: Box<RawValue> = serde_json::from_str(&text).unwrap();
        assert_eq!(
            Stored::from_raw("t", &raw, "snapshot")
                .unwrap_err()
                .to_string(),
            "checkpoint store: a record of thread `t` is corrupt: `snapshot`: unexpected end of hex escape at line 1 column 313"
        );
        let token = format!("[\"{pad}\", {{\"$serde_json::private::RawValue\": \"[1]\"}}]");
        assert!(matches!(stored(&token), Stored::Json(_)));
        let fine = stored(&format!("[\"{pad}\", \"\\u00e9\\n\"]"));
        assert_eq!(*fine.parse(), serde_json::json!([pad, "\u{e9}\n"]));
    }
}
