//! What expressions and templates see: state fields, `run` and `result`, exposed to
//! minijinja lazily. Fields are shared, not copied: a field's JSON is wrapped in a view
//! that resolves attribute and index lookups on demand, so an expression that reads
//! `planned_action.kind` costs the same whatever the size of the rest of the state.

use super::slot::Slot;
use crate::graph::Graph;
use crate::spec::RUN_KEYS;
use crate::value::{JsonView, json_path, view_shared};
use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use serde_json::Value as Json;
use std::sync::Arc;

/// The root context of an evaluation as minijinja sees it (see [`ScopeRef`] for the
/// runner's borrowed one).
#[derive(Clone)]
pub(crate) struct Scope {
    pub(crate) graph: Arc<Graph>,
    pub(crate) values: Arc<Vec<Slot>>,
    /// `run`, made into a value when an expression reads it.
    pub(crate) run: RunInfo,
    pub(crate) result: Option<Value>,
    /// A mapped node's item, by the name the map gives it.
    pub(crate) item: Option<(Arc<str>, Arc<Json>)>,
}

impl Scope {
    /// What `name` names at the root: a field, `run` or `result`.
    fn lookup(&self, key: &str) -> Option<Value> {
        self.borrowed().lookup(key)
    }

    fn borrowed(&self) -> ScopeRef<'_> {
        ScopeRef {
            graph: &self.graph,
            values: &self.values,
            run: &self.run,
            result: self.result.as_ref(),
            item: self.item.as_ref().map(|(n, v)| (&**n, v)),
        }
    }

    pub(crate) fn into_value(self) -> Value {
        Value::from_object(self)
    }
}

/// A scope borrowed from the runner, as expressions are evaluated: the fast path
/// reads it in place (no reference counts touched); only when minijinja evaluates is
/// it copied into a [`Scope`].
pub(crate) struct ScopeRef<'a> {
    pub(crate) graph: &'a Arc<Graph>,
    pub(crate) values: &'a Arc<Vec<Slot>>,
    pub(crate) run: &'a RunInfo,
    pub(crate) result: Option<&'a Value>,
    pub(crate) item: Option<(&'a str, &'a Arc<Json>)>,
}

impl ScopeRef<'_> {
    fn lookup(&self, key: &str) -> Option<Value> {
        match key {
            "run" => Some(Value::from_object(self.run.clone())),
            "result" => self.result.cloned(),
            _ if self.item.is_some_and(|(name, _)| name == key) => {
                self.item.map(|(_, v)| view_shared(v))
            }
            _ => {
                let id = self.graph.field_id(key)?;
                Some(view_shared(self.values[id.0 as usize].arc()))
            }
        }
    }

    /// Evaluates expression `id` in this scope.
    pub(crate) fn eval(&self, id: crate::graph::ExprId) -> Result<Value, minijinja::Error> {
        self.graph.eval_in(id, self, || {
            Value::from_object(Scope {
                graph: self.graph.clone(),
                values: self.values.clone(),
                run: self.run.clone(),
                result: self.result.cloned(),
                item: self.item.map(|(n, v)| (Arc::from(n), v.clone())),
            })
        })
    }
}

impl crate::graph::Root for ScopeRef<'_> {
    fn var(&self, name: &str) -> Option<Value> {
        self.lookup(name)
    }

    fn field(&self, id: crate::graph::FieldId, _name: &str) -> Option<Value> {
        Some(view_shared(self.values.get(id.0 as usize)?.arc()))
    }

    fn path(
        &self,
        id: crate::graph::FieldId,
        _name: &str,
        path: &[crate::value::PathSeg],
    ) -> Option<Value> {
        json_path(self.values.get(id.0 as usize)?.arc(), path)
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("graph", &self.graph.name)
            .finish_non_exhaustive()
    }
}

impl Object for Scope {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.lookup(key.as_str()?)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<Value> = self
            .graph
            .fields
            .iter()
            .map(|f| Value::from(&*f.name))
            .collect();
        keys.push(Value::from("run"));
        Enumerator::Values(keys)
    }
}

/// `run` as expressions see it: `{ thread_id, step, max_steps, tokens, elapsed_ms,
/// error }`, read field by field when an expression asks, so a step whose expressions
/// never read `run` pays one allocation for it and nothing else.
#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    pub(crate) thread: Arc<str>,
    /// Which run of the thread this is (its checkpoints' `run`).
    pub(crate) run: u64,
    pub(crate) step: u64,
    pub(crate) max_steps: Option<u64>,
    pub(crate) tokens: u64,
    /// Wall time before this segment of the run, and when the segment started.
    pub(crate) elapsed_before: std::time::Duration,
    pub(crate) started: std::time::Instant,
    pub(crate) error: Arc<Json>,
}

impl RunInfo {
    fn elapsed_ms(&self) -> u64 {
        (self.elapsed_before + self.started.elapsed()).as_millis() as u64
    }

    /// The whole object as JSON, as `run` renders and converts.
    fn to_json(&self) -> Json {
        let mut m = serde_json::Map::new();
        m.insert("thread_id".into(), Json::from(&*self.thread));
        m.insert("step".into(), Json::from(self.step));
        m.insert(
            "max_steps".into(),
            self.max_steps.map_or(Json::Null, Json::from),
        );
        m.insert("tokens".into(), Json::from(self.tokens));
        m.insert("elapsed_ms".into(), Json::from(self.elapsed_ms()));
        m.insert("error".into(), (*self.error).clone());
        Json::Object(m)
    }
}

impl Object for RunInfo {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        Some(match key.as_str()? {
            "thread_id" => Value::from(&*self.thread),
            "step" => Value::from(self.step),
            "max_steps" => self.max_steps.map_or(Value::from(()), Value::from),
            "tokens" => Value::from(self.tokens),
            "elapsed_ms" => Value::from(self.elapsed_ms()),
            "error" => view_shared(&self.error),
            _ => return None,
        })
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&RUN_KEYS)
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(RUN_KEYS.len())
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

/// Converts an evaluation result to JSON. Views are copied straight from their JSON;
/// undefined becomes null.
pub(crate) fn to_json(v: &Value) -> Result<Json, String> {
    use minijinja::value::ValueKind;
    if let Some(view) = v.downcast_object_ref::<JsonView>() {
        return Ok(view.get().clone());
    }
    if let Some(run) = v.downcast_object_ref::<RunInfo>() {
        return Ok(run.to_json());
    }
    // The common shapes directly, as minijinja's `Serialize` would give them: serde's
    // detour through a serializer allocates at every level.
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => return Ok(Json::Null),
        ValueKind::Bool => return Ok(Json::Bool(v.is_true())),
        ValueKind::String => {
            if let Some(s) = v.as_str() {
                return Ok(Json::from(s));
            }
        }
        ValueKind::Number if v.is_integer() => {
            if let Some(i) = v.as_i64() {
                return Ok(Json::from(i));
            }
        }
        ValueKind::Seq | ValueKind::Iterable => {
            if let Some(items) = v.as_object().and_then(|o| o.try_iter()) {
                return items
                    .map(|item| to_json(&item))
                    .collect::<Result<_, _>>()
                    .map(Json::Array);
            }
        }
        ValueKind::Map => {
            if let Some(pairs) = v.as_object().and_then(|o| o.try_iter_pairs()) {
                let mut map = serde_json::Map::new();
                for (k, item) in pairs {
                    // Keys other than strings take serde's way (it writes numbers as
                    // strings, refuses others).
                    let Some(k) = k.as_str() else {
                        return serde_json::to_value(v).map_err(|e| e.to_string());
                    };
                    map.insert(k.to_string(), to_json(&item)?);
                }
                return Ok(Json::Object(map));
            }
        }
        _ => {}
    }
    serde_json::to_value(v).map_err(|e| e.to_string())
}
