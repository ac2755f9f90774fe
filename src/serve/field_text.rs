//! [`FieldText`]: a state field's value as a `values` stream shows it, kept as JSON
//! text between checkpoints, so a field that did not change is not serialised again
//! and a list that grew is only extended.

use super::wire;
use crate::graph::Field;
use crate::spec::{FieldType, Reducer};
use serde_json::Value as Json;

/// A field's value as JSON text, and, for a list, how many items it holds: a write
/// that appends to the list extends the text rather than writing it all again (a
/// conversation's messages would be written whole at every checkpoint).
pub(super) struct FieldText {
    pub(super) text: Vec<u8>,
    items: Option<usize>,
}

impl FieldText {
    pub(super) fn of(ty: &FieldType, v: &Json) -> FieldText {
        let mut text = Vec::new();
        let items = match v {
            Json::Array(items) => {
                text.push(b'[');
                Self::write_items(&mut text, ty, items, true);
                text.push(b']');
                Some(items.len())
            }
            _ => {
                let _ = serde_json::to_writer(&mut text, v);
                None
            }
        };
        FieldText { text, items }
    }

    fn write_items(text: &mut Vec<u8>, ty: &FieldType, items: &[Json], first: bool) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 || !first {
                text.push(b',');
            }
            let _ = match ty.base() {
                FieldType::Messages => serde_json::to_writer(&mut *text, &wire::Typed(item)),
                _ => serde_json::to_writer(&mut *text, item),
            };
        }
    }

    /// The text of `now`, a list that a write appended to: the new items added to the
    /// text; none when `now` is not this list with items after it.
    fn appended(mut self, ty: &FieldType, now: &Json) -> Option<FieldText> {
        let (Some(had), Json::Array(items)) = (self.items, now) else {
            return None;
        };
        let new = items.get(had..).filter(|n| !n.is_empty())?;
        self.text.pop();
        Self::write_items(&mut self.text, ty, new, had == 0);
        self.text.push(b']');
        self.items = Some(items.len());
        Some(self)
    }

    /// The text after `write` was applied to `field`, whose value is now `now`: the
    /// kept text extended when the write appended to a list (its items are now as
    /// many as before and the write's: a write that replaced a message by its id, or
    /// a record writing the field twice, does not add up), else none, to be written
    /// out whole when next shown.
    pub(super) fn after_write(
        kept: Option<FieldText>,
        field: &Field,
        write: &Json,
        now: &Json,
    ) -> Option<FieldText> {
        if !matches!(field.reducer, Reducer::Append | Reducer::Messages) {
            return None;
        }
        let kept = kept?;
        let added = match write {
            Json::Array(items) => items.len(),
            _ => 1,
        };
        let grew = now
            .as_array()
            .is_some_and(|a| Some(a.len()) == kept.items.map(|had| had + added));
        if grew {
            kept.appended(&field.ty, now)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::State;
    use serde_json::json;

    /// Writes through the reducers, keeping each field's text as a stream reader
    /// does; after each, every kept text is the field's value serialised as clients
    /// see it.
    #[test]
    fn kept_text_is_the_value_as_serialised_after_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.toml");
        std::fs::write(
            &path,
            r#"
[graph]
name = "g"
entry = "a"

[state.messages]
type = "messages"

[state.log]
type = "list<string>"
reducer = "append"

[state.page]
type = "json?"

[nodes.a]
kind = "finalize"
outcome = "done"
response = "{{ log }}{{ page }}{{ messages }}"
"#,
        )
        .unwrap();
        let graph = crate::load_graph(&path).unwrap();
        let mut state = State::new(&graph);
        let mut kept: Vec<Option<FieldText>> = graph.fields.iter().map(|_| None).collect();
        let writes = [
            ("messages", json!([{ "role": "user", "content": "hi" }])),
            ("log", json!(["one"])),
            (
                "messages",
                json!([{ "role": "assistant", "content": "yo", "id": "m1" }]),
            ),
            ("log", json!("two")),
            ("page", json!({ "url": "x", "items": [1, 2] })),
            // Replaced by its id: the list does not grow.
            (
                "messages",
                json!([{ "role": "assistant", "content": "yes", "id": "m1" }]),
            ),
            (
                "messages",
                json!([{ "role": "tool", "content": "r", "id": "m2" }, { "role": "user", "content": "ok", "type": "human" }]),
            ),
            // One new, one replacing: grows by one, not two.
            (
                "messages",
                json!([{ "role": "user", "content": "again", "id": "m3" }, { "role": "tool", "content": "r2", "id": "m2" }]),
            ),
            ("page", json!(null)),
            ("log", json!([])),
            ("log", json!(["three", "four"])),
        ];
        for (name, value) in writes {
            let id = graph.field_id(name).unwrap();
            state
                .replay(&graph, id, std::sync::Arc::new(value.clone()))
                .unwrap();
            let k = &mut kept[id.0 as usize];
            *k = FieldText::after_write(k.take(), graph.field(id), &value, state.get(id));
            for (i, f) in graph.fields.iter().enumerate() {
                let now = state.get(crate::graph::FieldId(i as u32));
                let text = kept[i].get_or_insert_with(|| FieldText::of(&f.ty, now));
                let whole = wire::values(json!({ &*f.name: now.clone() }), Some(&graph));
                let expected = serde_json::to_vec(&whole[&*f.name]).unwrap();
                assert_eq!(
                    String::from_utf8_lossy(&text.text),
                    String::from_utf8_lossy(&expected),
                    "{} after writing {name}",
                    f.name
                );
            }
        }
    }
}
