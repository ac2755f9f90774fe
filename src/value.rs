//! JSON values as expressions and templates see them, without copying: a list or an
//! object is wrapped in a view ([`JsonView`]) that resolves attribute and index lookups
//! on demand, so reading `planned_action.kind` costs the same whatever the size of the
//! rest of the value. Below the graph, the template environment and the runner, which
//! all hand JSON to minijinja through here.

use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use serde_json::Value as Json;
use std::sync::Arc;

/// One step of a path into a value: an attribute or string subscript, or a
/// non-negative integer subscript.
#[derive(Debug, Clone)]
pub(crate) enum PathSeg {
    Key(Arc<str>),
    Index(usize),
}

/// Wraps shared JSON (a node's result) for expressions, without copying it.
#[inline]
pub(crate) fn view_of(v: Arc<Json>) -> Value {
    view(&v, Vec::new())
}

/// Wraps shared JSON held elsewhere (a state field) for expressions.
#[inline]
pub(crate) fn view_shared(v: &Arc<Json>) -> Value {
    view(v, Vec::new())
}

/// Wraps owned JSON (a node's result) for expressions.
#[inline]
pub(crate) fn from_json(v: Json) -> Value {
    view(&Arc::new(v), Vec::new())
}

/// `path` into `root`, walked over the JSON itself: what the lookups of a
/// [`JsonView`] would give, with a view made only for the value at its end (and only
/// when that is a list or an object). None where a lookup would give undefined, or
/// meet none on the way.
pub(crate) fn json_path(root: &Arc<Json>, path: &[PathSeg]) -> Option<Value> {
    let mut here: &Json = root;
    for seg in path {
        here = match (here, seg) {
            (Json::Object(m), PathSeg::Key(k)) => m.get(&**k)?,
            (Json::Array(a), PathSeg::Index(i)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(match here {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => number(n),
        Json::String(s) => Value::from(s.as_str()),
        // A list or an object stays a view, its path the same steps.
        Json::Array(_) | Json::Object(_) => view(
            root,
            path.iter()
                .map(|seg| match seg {
                    PathSeg::Key(k) => Seg::Key(k.to_string()),
                    PathSeg::Index(i) => Seg::Index(*i),
                })
                .collect(),
        ),
    })
}

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A lazily resolved part of a field's JSON value.
#[derive(Debug)]
pub(crate) struct JsonView {
    root: Arc<Json>,
    path: Vec<Seg>,
}

impl JsonView {
    pub(crate) fn get(&self) -> &Json {
        let mut here = &*self.root;
        for seg in &self.path {
            here = match (here, seg) {
                (Json::Object(m), Seg::Key(k)) => &m[k],
                (Json::Array(a), Seg::Index(i)) => &a[*i],
                _ => unreachable!("paths are only built from lookups that succeeded"),
            };
        }
        here
    }

    fn child(&self, seg: Seg) -> Value {
        let mut path = self.path.clone();
        path.push(seg);
        view(&self.root, path)
    }
}

/// A minijinja value for the JSON at `path` in `root`: scalars by value, containers as
/// views.
fn view(root: &Arc<Json>, path: Vec<Seg>) -> Value {
    let v = JsonView {
        root: root.clone(),
        path,
    };
    match v.get() {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => number(n),
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(_) | Json::Object(_) => Value::from_object(v),
    }
}

fn number(n: &serde_json::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::from(i)
    } else if let Some(u) = n.as_u64() {
        Value::from(u)
    } else {
        Value::from(n.as_f64().unwrap_or(f64::NAN))
    }
}

impl Object for JsonView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.get() {
            Json::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match self.get() {
            Json::Object(m) => {
                let k = key.as_str()?;
                m.contains_key(k)
                    .then(|| self.child(Seg::Key(k.to_string())))
            }
            Json::Array(a) => {
                let i = i64::try_from(key.clone()).ok()?;
                let i = if i < 0 { a.len() as i64 + i } else { i };
                (0..a.len() as i64)
                    .contains(&i)
                    .then(|| self.child(Seg::Index(i as usize)))
            }
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.get() {
            Json::Object(m) => {
                Enumerator::Values(m.keys().map(|k| Value::from(k.as_str())).collect())
            }
            Json::Array(a) => Enumerator::Seq(a.len()),
            _ => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        match self.get() {
            Json::Object(m) => Some(m.len()),
            Json::Array(a) => Some(a.len()),
            _ => Some(0),
        }
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // JSON is what a prompt author expects to see for a structured value.
        write!(f, "{}", self.get())
    }
}

/// Text that is JSON becomes that JSON; other text stays a string.
pub(crate) fn text_value(text: &str) -> Json {
    let trimmed = text.trim();
    let looks_like_json = trimmed.starts_with(['{', '[', '"'])
        || trimmed == "true"
        || trimmed == "false"
        || trimmed == "null"
        || trimmed.parse::<f64>().is_ok();
    if looks_like_json && let Ok(v) = serde_json::from_str::<Json>(trimmed) {
        return v;
    }
    Json::String(text.to_string())
}
