//! Whether a field's type takes a value still held as JSON text (see `slot.rs`), told
//! without building the value: by its first character for most types; a list's or a
//! history's items read one by one, what no type looks at skipped. A resume checks
//! every field's type, and a history of messages would otherwise be parsed only to be
//! checked.

use crate::spec::FieldType;
use serde::Deserialize;
use serde::de::{
    DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use std::fmt;

/// Whether `ty` takes the JSON value `text` (checked JSON): what
/// `ty.accepts(&parsed)` would say, or none where only the value can tell (a map,
/// whose text may repeat a key the value holds once). The text is what
/// `Stored::from_raw` kept, which leaves out text its parse would read otherwise than
/// it reads (serde_json's private raw-value key).
pub(crate) fn text_fits(ty: &FieldType, text: &str) -> Option<bool> {
    let first = text.trim_start().bytes().next()?;
    match ty {
        FieldType::Json => Some(true),
        FieldType::Optional(_) if first == b'n' => Some(true),
        FieldType::Optional(t) => text_fits(t, text),
        FieldType::Object => Some(first == b'{'),
        FieldType::String => Some(first == b'"'),
        FieldType::Bool => Some(first == b't' || first == b'f'),
        FieldType::Map(_) => None,
        FieldType::Int | FieldType::Float | FieldType::List(_) | FieldType::Messages => {
            let mut de = serde_json::Deserializer::from_str(text);
            let fits = Fits(ty).deserialize(&mut de).ok()?;
            de.end().ok()?;
            Some(fits)
        }
    }
}

/// Reads one value, saying whether the type takes it.
#[derive(Clone, Copy)]
struct Fits<'t>(&'t FieldType);

/// One message of a history.
struct Message;

impl<'de> DeserializeSeed<'de> for Fits<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> DeserializeSeed<'de> for Message {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

/// What a scalar is, as the types see it.
#[derive(Clone, Copy, PartialEq)]
enum Scalar {
    Null,
    Bool,
    Int,
    Float,
    Str,
}

fn takes(ty: &FieldType, s: Scalar) -> bool {
    match ty {
        FieldType::Json => true,
        FieldType::Optional(t) => s == Scalar::Null || takes(t, s),
        FieldType::String => s == Scalar::Str,
        FieldType::Int => s == Scalar::Int,
        FieldType::Float => matches!(s, Scalar::Int | Scalar::Float),
        FieldType::Bool => s == Scalar::Bool,
        _ => false,
    }
}

/// `ty` without the `Optional`s around it.
fn bare(ty: &FieldType) -> &FieldType {
    match ty {
        FieldType::Optional(t) => bare(t),
        t => t,
    }
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// The scalars, for a visitor whose `takes` says which it takes.
macro_rules! scalars {
    ($takes:expr) => {
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok($takes(self, Scalar::Null))
        }
        fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
            Ok($takes(self, Scalar::Bool))
        }
        fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
            Ok($takes(self, Scalar::Int))
        }
        fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
            Ok($takes(self, Scalar::Int))
        }
        fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
            Ok($takes(self, Scalar::Float))
        }
        fn visit_str<E>(self, _: &str) -> Result<bool, E> {
            Ok($takes(self, Scalar::Str))
        }
    };
}

impl<'de> Visitor<'de> for Fits<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    scalars!(|s: Self, scalar| takes(s.0, scalar));

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        match bare(self.0) {
            FieldType::List(t) => {
                let mut all = true;
                while let Some(fits) = seq.next_element_seed(Fits(t))? {
                    all &= fits;
                }
                Ok(all)
            }
            FieldType::Messages => {
                let mut all = true;
                while let Some(fits) = seq.next_element_seed(Message)? {
                    all &= fits;
                }
                Ok(all)
            }
            t => {
                skip_seq(seq)?;
                Ok(matches!(t, FieldType::Json))
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        match bare(self.0) {
            // A key written twice is one entry of the value, the last: left to it.
            FieldType::Map(_) => Err(A::Error::custom("a map")),
            t => {
                skip_map(map)?;
                Ok(matches!(t, FieldType::Json | FieldType::Object))
            }
        }
    }
}

/// A message's keys, as far as `is_message` looks at them.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Role,
    Content,
    #[serde(other)]
    Other,
}

impl<'de> Visitor<'de> for Message {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }

    scalars!(|_: Self, _| false);

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        skip_seq(seq)?;
        Ok(false)
    }

    /// As `is_message`: a string `role` (the last, where the text repeats it) and a
    /// `content`.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (mut role, mut content) = (false, false);
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Role => role = map.next_value_seed(Fits(&FieldType::String))?,
                Key::Content => {
                    map.next_value::<IgnoredAny>()?;
                    content = true;
                }
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(role && content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_fits_where_its_value_does() {
        let types = [
            "int",
            "float",
            "string",
            "bool",
            "json",
            "object",
            "messages",
            "list<int>",
            "list<string>",
            "list<list<float>>",
            "list<object>",
            "list<json>",
            "int?",
            "list<int>?",
            "messages?",
            "list<int?>",
            "map<int>",
            "list<map<int>>",
        ];
        let texts = [
            "1",
            "-1",
            "0",
            "-0",
            "1.0",
            "1e3",
            "18446744073709551615",
            "18446744073709551616",
            "\"a\"",
            "true",
            "null",
            "{}",
            "[]",
            "[1, 2]",
            "[1, 2.5]",
            "[1, null]",
            "[\"a\", \"b\"]",
            "[[1.5], [2]]",
            "[[1], \"x\"]",
            "[{}, {\"a\": 1}]",
            r#"[{"role": "user", "content": "hi"}]"#,
            r#"[{"role": "user", "content": null, "id": "m1"}]"#,
            r#"[{"role": 1, "content": "hi"}]"#,
            r#"[{"role": "user"}]"#,
            r#"[{"content": "x", "role": 1, "role": "user"}]"#,
            r#"[{"content": "x", "role": "user", "role": 1}]"#,
            r#"[{"role": "a", "content": "b"}, 3]"#,
            r#"[{"rôle": "a", "content": "b"}]"#,
            r#"[{"ro\u006ce": "a", "content": "b"}]"#,
            r#"{"a": 1, "a": "x"}"#,
            r#"[{"a": 1}]"#,
            "[[[[[[1]]]]]]",
        ];
        let mut told = 0;
        for ty in types {
            let ty = crate::spec::parse_field_type(ty).unwrap();
            for text in texts {
                let value: serde_json::Value = serde_json::from_str(text).unwrap();
                if let Some(fits) = text_fits(&ty, text) {
                    told += 1;
                    assert_eq!(fits, ty.accepts(&value), "`{ty}` and {text}");
                }
            }
        }
        assert!(told > 450, "{told}");
    }

    #[test]
    fn maps_are_left_to_the_value_and_what_no_type_reads_is_skipped_at_any_depth() {
        let map = crate::spec::parse_field_type("map<int>").unwrap();
        assert_eq!(text_fits(&map, r#"{"a": 1}"#), None);
        // The reader goes only as deep as the type; below, serde_json skips without
        // recursing.
        let list = crate::spec::parse_field_type("list<json>").unwrap();
        let deep = format!("[{}{}]", "[".repeat(5_000), "]".repeat(5_000));
        assert_eq!(text_fits(&list, &deep), Some(true));
        let ints = crate::spec::parse_field_type("list<int>").unwrap();
        assert_eq!(text_fits(&ints, &deep), Some(false));
    }
}
