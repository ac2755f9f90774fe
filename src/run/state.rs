//! A run's state: one JSON value per declared field, merged by the field's reducer.
//!
//! Values sit behind `Arc`s so that evaluation can share them without copying, and so
//! that appending to a list mutates it in place once nothing else holds it: the cost of
//! a write does not grow with the length of the list.

use super::slot::Slot;
use crate::graph::{FieldId, Graph};
use crate::spec::{FieldType, Reducer, is_message};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct State {
    pub(crate) values: Arc<Vec<Slot>>,
    /// For `messages` fields: message id -> position, so replacing by id is O(1).
    /// A field without an entry has its index built from its value when needed.
    msg_index: HashMap<FieldId, HashMap<String, usize>>,
}

/// How to take back one write (see [`State::write_undoable`]).
#[derive(Clone)]
pub(crate) enum Undo {
    /// The field held this value.
    Was(FieldId, Slot),
    /// The field was a list of `len` items, and these of them were replaced.
    Grown {
        field: FieldId,
        len: usize,
        replaced: Vec<(usize, Json)>,
    },
}

/// Why a write was refused. The state is unchanged.
#[derive(Debug, thiserror::Error)]
#[error("field `{field}` {problem}")]
pub struct WriteError {
    pub field: String,
    pub problem: String,
}

impl State {
    /// Every field at its default.
    pub fn new(graph: &Graph) -> Self {
        let values = graph
            .fields
            .iter()
            .map(|f| Slot::Json(Arc::new(f.default.clone())))
            .collect();
        State {
            values: Arc::new(values),
            msg_index: HashMap::new(),
        }
    }

    /// The state that `values` (an object of fields, as [`State::to_json`] makes it)
    /// describes: fields it lacks keep their defaults, and nothing is checked (it
    /// describes a state that was). For readers that follow a run from a snapshot.
    pub fn from_values(graph: &Graph, values: &Json) -> Self {
        let mut s = State::new(graph);
        if let Json::Object(fields) = values {
            for (name, v) in fields {
                if let Some(id) = graph.field_id(name) {
                    s.put(id, Slot::Json(Arc::new(v.clone())));
                }
            }
        }
        s
    }

    /// The state a snapshot holds: its values as they are (shared, or text to be
    /// parsed when read), fields it lacks at their defaults.
    pub(crate) fn from_snapshot(
        graph: &Graph,
        values: impl IntoIterator<Item = (Arc<str>, Slot)>,
    ) -> Self {
        let mut s = State::new(graph);
        for (name, v) in values {
            if let Some(id) = graph.field_id(&name) {
                s.put(id, v);
            }
        }
        s
    }

    /// The state a pruned thread's base record holds (see `Threads::prune`).
    pub(crate) fn from_base(graph: &Graph, record: &crate::store::Checkpoint) -> Self {
        let values = record
            .writes
            .iter()
            .map(|w| (w.field.clone(), Slot::Json(w.value.clone())));
        State::from_snapshot(graph, values)
    }

    /// Applies a checkpoint record's writes through the reducers, as a replay of the
    /// thread does.
    pub fn apply(
        &mut self,
        graph: &Graph,
        record: &crate::store::Checkpoint,
    ) -> Result<(), WriteError> {
        if record.source == crate::store::Source::Base {
            *self = State::from_base(graph, record);
            return Ok(());
        }
        for w in &record.writes {
            if let Some(id) = graph.field_id(&w.field) {
                self.replay(graph, id, w.value.clone())?;
            }
        }
        Ok(())
    }

    pub fn get(&self, field: FieldId) -> &Json {
        &self.values[field.0 as usize]
    }

    /// The whole state as one JSON object, in declaration order.
    pub fn to_json(&self, graph: &Graph) -> Json {
        Json::Object(
            graph
                .fields
                .iter()
                .zip(self.values.iter())
                .map(|(f, v)| (f.name.to_string(), (**v).clone()))
                .collect(),
        )
    }

    /// Writes `value` to `field` through the field's reducer, after checking its type.
    /// A replacing write keeps the value as it is, shared with the caller (the
    /// checkpoint record holds the same one), rather than copying it.
    pub fn write(
        &mut self,
        graph: &Graph,
        field: FieldId,
        value: Arc<Json>,
    ) -> Result<(), WriteError> {
        self.reduce(graph, field, value, true)
    }

    /// Applies a write recorded in a checkpoint: through the reducer, without checking
    /// the value against the field's type and schema again. It was checked when it was
    /// made; the graph may have been edited since, which resume reports on its own.
    pub(crate) fn replay(
        &mut self,
        graph: &Graph,
        field: FieldId,
        value: Arc<Json>,
    ) -> Result<(), WriteError> {
        self.reduce(graph, field, value, false)
    }

    fn reduce(
        &mut self,
        graph: &Graph,
        field: FieldId,
        value: Arc<Json>,
        checked: bool,
    ) -> Result<(), WriteError> {
        let f = graph.field(field);
        if checked && let Err(problem) = within_bounds(&value) {
            return Err(WriteError {
                field: f.name.to_string(),
                problem,
            });
        }
        match f.reducer {
            Reducer::Replace => self.replace(graph, field, value, checked),
            // A recorded write the field's edited reducer can no longer take is replayed
            // as the value it left.
            Reducer::Add if !checked && !value.is_number() => {
                self.replace(graph, field, value, checked)
            }
            Reducer::Merge if !checked && !value.is_object() => {
                self.replace(graph, field, value, checked)
            }
            // The other reducers take the value apart: one the caller still shares is
            // copied here.
            _ => self.combine(graph, field, Arc::unwrap_or_clone(value), checked),
        }
    }

    /// The `replace` reducer: the field holds `value` itself.
    fn replace(
        &mut self,
        graph: &Graph,
        field: FieldId,
        value: Arc<Json>,
        checked: bool,
    ) -> Result<(), WriteError> {
        let f = graph.field(field);
        let fail = |problem: String| WriteError {
            field: f.name.to_string(),
            problem,
        };
        if checked && !f.ty.accepts(&value) {
            return Err(fail(format!(
                "is `{}`, and the value written is {}",
                f.ty,
                describe(&value)
            )));
        }
        // The schema describes a value; none clears an optional field.
        if checked
            && let Some(schema) = &f.schema
            && !(value.is_null() && f.ty.is_optional())
            && let Err(e) = schema.validate(&value)
        {
            return Err(fail(format!("does not accept the value written: {e}")));
        }
        self.put(field, Slot::Json(value));
        Ok(())
    }

    /// The reducers that combine a write with the current value.
    fn combine(
        &mut self,
        graph: &Graph,
        field: FieldId,
        value: Json,
        checked: bool,
    ) -> Result<(), WriteError> {
        let f = graph.field(field);
        let fail = |problem: String| WriteError {
            field: f.name.to_string(),
            problem,
        };
        match f.reducer {
            Reducer::Replace => self.replace(graph, field, Arc::new(value), checked)?,
            Reducer::Append => {
                let item_ty = match f.ty.base() {
                    FieldType::List(t) => Some((**t).clone()),
                    FieldType::Messages => None,
                    _ => Some(FieldType::Json),
                };
                let items = match value {
                    Json::Array(items) => items,
                    other => vec![other],
                };
                if checked
                    && item_ty.is_none()
                    && let Some(bad) = items.iter().find(|m| !is_message(m))
                {
                    return Err(fail(format!(
                        "holds messages with `role` and `content`, and the value appended is {}",
                        describe(bad)
                    )));
                }
                let item_ty = item_ty.unwrap_or(FieldType::Json);
                if let Some(bad) = items.iter().find(|i| checked && !item_ty.accepts(i)) {
                    return Err(fail(format!(
                        "holds `{item_ty}` items, and the value appended is {}",
                        describe(bad)
                    )));
                }
                self.slot(field, |slot| match Arc::make_mut(slot) {
                    Json::Array(list) => list.extend(items),
                    other => *other = Json::Array(items),
                });
            }
            Reducer::Add => {
                let Json::Number(n) = &value else {
                    return Err(fail(format!(
                        "adds numbers, and the value written is {}",
                        describe(&value)
                    )));
                };
                // An optional number that is none adds from zero.
                let current = match self.get(field) {
                    Json::Null => Json::from(0),
                    v => v.clone(),
                };
                let sum = match (current.as_i64(), n.as_i64()) {
                    (Some(a), Some(b)) if f.ty.base() == &FieldType::Int => {
                        a.checked_add(b).map(Json::from)
                    }
                    _ => serde_json::Number::from_f64(
                        current.as_f64().unwrap_or(0.0) + n.as_f64().unwrap_or(0.0),
                    )
                    .map(Json::Number),
                };
                let sum = sum.ok_or_else(|| fail("overflowed".to_string()))?;
                if checked && !f.ty.accepts(&sum) {
                    return Err(fail(format!(
                        "is `{}`, and the sum is {}",
                        f.ty,
                        describe(&sum)
                    )));
                }
                self.slot(field, |slot| *slot = Arc::new(sum));
            }
            Reducer::Merge => {
                let Json::Object(patch) = value else {
                    return Err(fail(format!(
                        "merges objects, and the value written is {}",
                        describe(&value)
                    )));
                };
                let mut merged = match self.get(field) {
                    Json::Object(m) => m.clone(),
                    _ => serde_json::Map::new(),
                };
                merged.extend(patch);
                let merged = Json::Object(merged);
                if checked && !f.ty.accepts(&merged) {
                    return Err(fail(format!(
                        "is `{}`, and the merged value is {}",
                        f.ty,
                        describe(&merged)
                    )));
                }
                self.slot(field, |slot| *slot = Arc::new(merged));
            }
            Reducer::Messages => {
                let items = match value {
                    Json::Array(items) => items,
                    other => vec![other],
                };
                if let Some(bad) = items.iter().find(|m| checked && !is_message(m)) {
                    return Err(fail(format!(
                        "holds messages with `role` and `content`, and the value written is {}",
                        describe(bad)
                    )));
                }
                // Messages without ids are appended without the index.
                if items.iter().any(|m| message_id(m).is_some()) {
                    self.index_messages(field);
                }
                let mut index = self.msg_index.remove(&field);
                self.slot(field, |slot| {
                    let value = Arc::make_mut(slot);
                    // An optional history that is none starts empty.
                    if !value.is_array() {
                        *value = Json::Array(Vec::new());
                        index = Some(HashMap::new());
                    }
                    let Json::Array(list) = value else {
                        return;
                    };
                    for m in items {
                        match (message_id(&m).map(str::to_string), index.as_mut()) {
                            (Some(id), Some(index)) => match index.get(&id) {
                                Some(&i) => list[i] = m,
                                None => {
                                    index.insert(id, list.len());
                                    list.push(m);
                                }
                            },
                            _ => list.push(m),
                        }
                    }
                });
                if let Some(index) = index {
                    self.msg_index.insert(field, index);
                }
            }
        }
        Ok(())
    }

    /// [`State::write`], noting in `undo` how to take the write back (see
    /// [`State::undo`]). Noting costs no copy: a replaced value is kept as the shared
    /// value it was, and a list that grows is noted by its length.
    pub(crate) fn write_undoable(
        &mut self,
        graph: &Graph,
        field: FieldId,
        value: Arc<Json>,
        undo: &mut Vec<Undo>,
    ) -> Result<(), WriteError> {
        let reducer = graph.field(field).reducer;
        let items = match &*value {
            Json::Array(items) => items.as_slice(),
            one => std::slice::from_ref(one),
        };
        if reducer == Reducer::Messages && items.iter().any(|m| message_id(m).is_some()) {
            self.index_messages(field);
        }
        // A replaced value is noted as it is held: one not parsed yet stays so.
        let grows = matches!(reducer, Reducer::Append | Reducer::Messages);
        let note = match (grows, grows.then(|| self.get(field))) {
            (true, Some(Json::Array(list))) => {
                // Messages written again by id replace their old selves in place.
                let mut replaced = Vec::new();
                if reducer == Reducer::Messages
                    && let Some(index) = self.msg_index.get(&field)
                {
                    for m in items {
                        if let Some(&i) = message_id(m).and_then(|id| index.get(id))
                            && i < list.len()
                        {
                            replaced.push((i, list[i].clone()));
                        }
                    }
                }
                Undo::Grown {
                    field,
                    len: list.len(),
                    replaced,
                }
            }
            _ => Undo::Was(field, self.values[field.0 as usize].clone()),
        };
        self.write(graph, field, value)?;
        undo.push(note);
        Ok(())
    }

    /// Takes back the writes noted in `undo`, latest first.
    pub(crate) fn undo(&mut self, undo: &mut Vec<Undo>) {
        while let Some(note) = undo.pop() {
            match note {
                Undo::Was(field, value) => {
                    self.put(field, value);
                    self.msg_index.remove(&field);
                }
                Undo::Grown {
                    field,
                    len,
                    replaced,
                } => {
                    self.slot(field, |slot| {
                        if let Json::Array(list) = Arc::make_mut(slot) {
                            list.truncate(len);
                            for (i, v) in replaced.into_iter().rev() {
                                list[i] = v;
                            }
                        }
                    });
                    self.msg_index.remove(&field);
                }
            }
        }
    }

    /// Changes a field's value in place (parsed first, if it is text).
    fn slot(&mut self, field: FieldId, f: impl FnOnce(&mut Arc<Json>)) {
        let slot = &mut Arc::make_mut(&mut self.values)[field.0 as usize];
        if let Slot::Text(_) = slot {
            let text = std::mem::replace(slot, Slot::Json(Arc::new(Json::Null)));
            *slot = Slot::Json(text.arc().clone());
        }
        if let Slot::Json(v) = slot {
            f(v);
        }
    }

    /// Sets a field's value, without looking at the one it replaces.
    fn put(&mut self, field: FieldId, value: Slot) {
        Arc::make_mut(&mut self.values)[field.0 as usize] = value;
    }

    /// Builds the index of messages field `field`, unless it is built: a state read
    /// from a snapshot leaves it to the first write of a message with an id, so that
    /// a resume does not walk the history.
    fn index_messages(&mut self, field: FieldId) {
        if self.msg_index.contains_key(&field) {
            return;
        }
        let index = match self.get(field) {
            Json::Array(list) => list
                .iter()
                .enumerate()
                .filter_map(|(i, m)| Some((message_id(m)?.to_string(), i)))
                .collect(),
            _ => HashMap::new(),
        };
        self.msg_index.insert(field, index);
    }
}

/// A message's id, when it has one (a string).
fn message_id(m: &Json) -> Option<&str> {
    m.get("id")?.as_str()
}

/// How deep a value written to a field may nest (objects and lists).
pub(super) const MAX_VALUE_DEPTH: usize = 64;
/// How large a value written to a field may be, in bytes of its JSON text (about).
pub(super) const MAX_VALUE_BYTES: usize = 16 << 20;

/// Whether a value fits [`MAX_VALUE_DEPTH`] and [`MAX_VALUE_BYTES`]: a deeper one
/// could not be read back from a checkpoint, a larger one would make every copy of
/// the state slow. Walks the value once, without recursion, and stops at the first
/// limit passed.
pub(crate) fn within_bounds(value: &Json) -> Result<(), String> {
    let too_deep = || {
        format!(
            "takes values nested at most {MAX_VALUE_DEPTH} levels deep, and the value written is nested deeper"
        )
    };
    // A scalar needs no walk (nor the walk's stack).
    match value {
        Json::String(s) if s.len() + 2 > MAX_VALUE_BYTES => {
            return Err(format!(
                "takes values of at most {} MiB, and the value written is larger",
                MAX_VALUE_BYTES >> 20
            ));
        }
        Json::Array(_) | Json::Object(_) => {}
        _ => return Ok(()),
    }
    // Containers with their depth (the outermost is 1).
    let mut stack: Vec<(&Json, usize)> = vec![(value, 1)];
    let mut bytes = 0usize;
    while let Some((v, depth)) = stack.pop() {
        match v {
            Json::Object(m) => {
                if depth > MAX_VALUE_DEPTH {
                    return Err(too_deep());
                }
                bytes += 2;
                for (k, v) in m {
                    bytes += k.len() + 4;
                    stack.push((v, depth + 1));
                }
            }
            Json::Array(a) => {
                if depth > MAX_VALUE_DEPTH {
                    return Err(too_deep());
                }
                bytes += 2 + a.len();
                stack.extend(a.iter().map(|v| (v, depth + 1)));
            }
            Json::String(s) => bytes += s.len() + 2,
            _ => bytes += 8,
        }
        if bytes > MAX_VALUE_BYTES {
            return Err(format!(
                "takes values of at most {} MiB, and the value written is larger",
                MAX_VALUE_BYTES >> 20
            ));
        }
    }
    Ok(())
}

/// A short description of a value for error messages: its JSON type and a preview.
pub(crate) fn describe(v: &Json) -> String {
    let kind = match v {
        Json::Null => return "none".into(),
        Json::Bool(_) => "a bool",
        Json::Number(n) if n.is_f64() => "a float",
        Json::Number(_) => "an int",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    };
    let mut text = v.to_string();
    if text.len() > 60 {
        let cut = (0..=57)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    format!("{kind} `{text}`")
}
