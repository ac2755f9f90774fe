//! A state field's value as the state holds it: parsed, or the JSON text a resumed
//! thread's snapshot kept (see `store/stored.rs`), parsed the first time anything
//! reads it. A large value the run replaces before reading it is never built.

use super::text_fits::text_fits;
use crate::spec::FieldType;
use crate::store::Stored;
use serde_json::Value as Json;
use std::sync::{Arc, OnceLock};

#[derive(Clone, Debug)]
pub(crate) enum Slot {
    Json(Arc<Json>),
    Text(Arc<Unparsed>),
}

/// Checked JSON text and, once read, its value: shared by the copies of a state (a
/// resume's trial copy), so it is parsed once.
#[derive(Debug)]
pub(crate) struct Unparsed {
    text: Arc<str>,
    value: OnceLock<Arc<Json>>,
}

impl Slot {
    /// The value, parsed now if it was not.
    pub(crate) fn arc(&self) -> &Arc<Json> {
        match self {
            Slot::Json(v) => v,
            Slot::Text(u) => u
                .value
                .get_or_init(|| Arc::new(crate::store::stored::parse_text(&u.text))),
        }
    }

    /// Whether a field of type `ty` takes this value; text is looked at without being
    /// parsed where its first character tells (JSON, an object, a string, none).
    pub(crate) fn fits(&self, ty: &FieldType) -> bool {
        match self {
            Slot::Text(u) if u.value.get().is_none() => match text_fits(ty, &u.text) {
                Some(fits) => fits,
                None => ty.accepts(self.arc()),
            },
            _ => ty.accepts(self.arc()),
        }
    }
}

impl From<Stored> for Slot {
    fn from(s: Stored) -> Self {
        match s {
            Stored::Json(v) => Slot::Json(v),
            Stored::Text(text) => Slot::Text(Arc::new(Unparsed {
                text,
                value: OnceLock::new(),
            })),
        }
    }
}

impl std::ops::Deref for Slot {
    type Target = Json;

    fn deref(&self) -> &Json {
        self.arc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Slot {
        Slot::from(Stored::Text(Arc::from(t)))
    }

    #[test]
    fn text_is_parsed_once_when_read_and_its_type_told_without_parsing() {
        let slot = text(r#"{"a": [1, 2]}"#);
        assert!(slot.fits(&FieldType::Object));
        assert!(slot.fits(&FieldType::Optional(Box::new(FieldType::Json))));
        assert!(!slot.fits(&FieldType::String));
        let Slot::Text(u) = &slot else { panic!() };
        assert!(u.value.get().is_none(), "looking at its type parsed it");
        let copy = slot.clone();
        assert_eq!(*slot, serde_json::json!({"a": [1, 2]}));
        // The copy shares the parse.
        assert!(Arc::ptr_eq(slot.arc(), copy.arc()));
        // A type the first character does not tell is checked on the value.
        assert!(text("[1, 2]").fits(&FieldType::List(Box::new(FieldType::Int))));
        assert!(!text("[1, \"x\"]").fits(&FieldType::List(Box::new(FieldType::Int))));
        assert!(text("null").fits(&FieldType::Optional(Box::new(FieldType::Int))));
    }
}
