//! [`FieldTap`]: the text of one string property of a JSON object, as the object's
//! text streams in. An `llm_structured` node with `stream = "<property>"` streams only
//! that property (a reply's `text`), not the JSON around it: what a chat window should
//! show while the rest of the object is still coming.

/// Follows a JSON object's text delta by delta and hands out the decoded characters
/// of the top-level string property `key`, once.
pub(crate) struct FieldTap {
    key: String,
    /// Nesting of objects and lists; 1 inside the top-level object.
    depth: u32,
    in_string: bool,
    /// Inside the top-level object, whether the next string is a key.
    expect_key: bool,
    /// The string being read is the top-level key (collected) or the wanted value.
    role: Role,
    /// The key just read at the top level.
    last_key: String,
    escape: Escape,
    /// A high surrogate waiting for its low half (`\ud83d\ude00`).
    high: Option<u32>,
    done: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Other,
    Key,
    Wanted,
}

#[derive(Clone, PartialEq)]
enum Escape {
    None,
    Backslash,
    /// `\u` and the hex digits read so far.
    Unicode(String),
}

impl FieldTap {
    pub(crate) fn new(key: &str) -> Self {
        FieldTap {
            key: key.to_string(),
            depth: 0,
            in_string: false,
            expect_key: false,
            role: Role::Other,
            last_key: String::new(),
            escape: Escape::None,
            high: None,
            done: false,
        }
    }

    /// The wanted property's text that `delta` completes (empty when none).
    pub(crate) fn push(&mut self, delta: &str) -> String {
        let mut out = String::new();
        for c in delta.chars() {
            if self.done {
                break;
            }
            if self.in_string {
                self.string_char(c, &mut out);
                continue;
            }
            match c {
                '"' => {
                    self.in_string = true;
                    self.role = match (self.depth, self.expect_key) {
                        (1, true) => {
                            self.last_key.clear();
                            Role::Key
                        }
                        (1, false) if self.last_key == self.key => Role::Wanted,
                        _ => Role::Other,
                    };
                }
                '{' | '[' => {
                    self.depth += 1;
                    if self.depth == 1 {
                        self.expect_key = c == '{';
                    }
                }
                '}' | ']' => self.depth = self.depth.saturating_sub(1),
                ',' if self.depth == 1 => self.expect_key = true,
                ':' if self.depth == 1 => self.expect_key = false,
                _ => {}
            }
        }
        out
    }

    fn string_char(&mut self, c: char, out: &mut String) {
        let decoded = match std::mem::replace(&mut self.escape, Escape::None) {
            Escape::None => match c {
                '\\' => {
                    self.escape = Escape::Backslash;
                    return;
                }
                '"' => {
                    self.in_string = false;
                    if self.role == Role::Wanted {
                        self.done = true;
                    }
                    return;
                }
                c => c,
            },
            Escape::Backslash => match c {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                'b' => '\u{8}',
                'f' => '\u{c}',
                'u' => {
                    self.escape = Escape::Unicode(String::new());
                    return;
                }
                other => other,
            },
            Escape::Unicode(mut hex) => {
                hex.push(c);
                if hex.len() < 4 {
                    self.escape = Escape::Unicode(hex);
                    return;
                }
                let Ok(code) = u32::from_str_radix(&hex, 16) else {
                    return;
                };
                match (code, self.high.take()) {
                    (0xD800..=0xDBFF, _) => {
                        self.high = Some(code);
                        return;
                    }
                    (0xDC00..=0xDFFF, Some(high)) => {
                        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00))
                            .unwrap_or('\u{fffd}')
                    }
                    (code, _) => char::from_u32(code).unwrap_or('\u{fffd}'),
                }
            }
        };
        match self.role {
            Role::Key => self.last_key.push(decoded),
            Role::Wanted => out.push(decoded),
            Role::Other => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the tap hands out for `json` sent in pieces of `size` characters.
    fn tapped(key: &str, json: &str, size: usize) -> String {
        let mut tap = FieldTap::new(key);
        let chars: Vec<char> = json.chars().collect();
        chars
            .chunks(size)
            .map(|c| tap.push(&c.iter().collect::<String>()))
            .collect()
    }

    #[test]
    fn only_the_wanted_string_is_handed_out_however_the_text_is_cut() {
        let json = r#"{"confidence": 0.9, "notes": {"text": "inner"}, "label": "text", "text": "Say \"hi\"\n\u00e9\ud83d\ude00 \\ done", "after": "no"}"#;
        for size in 1..=json.len() {
            assert_eq!(
                tapped("text", json, size),
                "Say \"hi\"\n\u{e9}\u{1f600} \\ done",
                "cut every {size}"
            );
        }
    }

    #[test]
    fn a_missing_or_non_string_property_hands_out_nothing() {
        assert_eq!(tapped("text", r#"{"a": "b"}"#, 3), "");
        assert_eq!(tapped("text", r#"{"text": 3, "b": "c"}"#, 3), "");
        assert_eq!(tapped("text", r#"["text", "x"]"#, 3), "");
    }
}
