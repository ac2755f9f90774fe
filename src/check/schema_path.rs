//! Following a dotted path (`planned_action.kind`) through a JSON Schema.

use serde_json::Value;

/// What a schema says about the value at `path` below it.
pub(crate) enum At<'a> {
    /// The schema describes the value here.
    Schema(&'a Value),
    /// The schema is closed and has no such property: the name that failed and the
    /// properties it does have.
    NoProperty { name: String, known: Vec<String> },
    /// The schema does not say (open object, `$ref`, combinators): assume nothing.
    Unknown,
}

/// Resolves `path` (property names) in `schema`.
pub(crate) fn resolve<'a>(schema: &'a Value, path: &[&str]) -> At<'a> {
    let mut here = schema;
    for name in path {
        let Some(props) = here.get("properties").and_then(Value::as_object) else {
            return At::Unknown;
        };
        match props.get(*name) {
            Some(next) => here = next,
            None if here.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return At::NoProperty {
                    name: (*name).to_string(),
                    known: props.keys().cloned().collect(),
                };
            }
            None => return At::Unknown,
        }
    }
    At::Schema(here)
}

/// The values a schema allows when it is a closed set: `enum`, `const`, or `boolean`.
/// Values are written as a route's case names are: strings bare, others as JSON.
pub(crate) fn closed_values(schema: &Value) -> Option<Vec<String>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().map(case_name).collect());
    }
    if let Some(c) = schema.get("const") {
        return Some(vec![case_name(c)]);
    }
    if schema.get("type").and_then(Value::as_str) == Some("boolean") {
        return Some(vec!["true".into(), "false".into()]);
    }
    None
}

pub(crate) fn case_name(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// The non-null JSON types a schema's top level declares, if it declares any.
pub(crate) fn top_types(schema: &Value) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(
            ts.iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect(),
        ),
        _ => None,
    }
}
