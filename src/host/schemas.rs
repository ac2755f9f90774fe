//! A graph's state as JSON Schema, for clients that build forms from it
//! (`GET /assistants/{id}/schemas`): one property per state field, its type from the
//! field's type, or the field's own schema file when it names one.

use crate::spec::{FieldType, GraphSpec};
use serde_json::{Map, Value as Json, json};

/// The input schema (the fields a run's input may set: `[graph] input`, else every
/// state field; those the graph requires required), the output schema (the fields a
/// run's result gives: `[graph] output`, else every field) and the state schema (every
/// field present).
pub(super) fn schemas(spec: &GraphSpec) -> (Json, Json, Json) {
    let mut properties = Map::new();
    for f in &spec.state {
        let mut schema = f
            .schema
            .as_ref()
            .and_then(|p| std::fs::read_to_string(spec.resolve(p.get_ref())).ok())
            .and_then(|t| serde_json::from_str::<Json>(&t).ok())
            .filter(Json::is_object)
            .unwrap_or_else(|| of_type(f.ty.get_ref()));
        if !f.description.is_empty() {
            schema["description"] = json!(f.description);
        }
        if let Some(d) = &f.default {
            schema["default"] = d.get_ref().clone();
        }
        properties.insert(f.name.get_ref().clone(), schema);
    }
    let title = spec
        .graph
        .name
        .as_ref()
        .map_or_else(String::new, |n| n.get_ref().clone());
    let listed = |list: &Option<crate::spec::Sp<Vec<crate::spec::Sp<String>>>>, name: &str| {
        list.as_ref()
            .is_none_or(|l| l.get_ref().iter().any(|n| n.get_ref() == name))
    };
    let only = |keep: &dyn Fn(&crate::spec::FieldSpec) -> bool| -> Map<String, Json> {
        spec.state
            .iter()
            .filter(|f| keep(f))
            .filter_map(|f| {
                let name = f.name.get_ref();
                properties.get(name).map(|p| (name.clone(), p.clone()))
            })
            .collect()
    };
    let mut input = json!({
        "title": format!("{title} input"),
        "type": "object",
        "properties": only(&|f| !f.constant && listed(&spec.graph.input, f.name.get_ref())),
        "additionalProperties": false,
    });
    let inputs: Vec<&String> = spec
        .state
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name.get_ref())
        .collect();
    if !inputs.is_empty() {
        input["required"] = json!(inputs);
    }
    let output_props = only(&|f| listed(&spec.graph.output, f.name.get_ref()));
    let output_required: Vec<&String> = output_props.keys().collect();
    // Open: a result carries `__interrupt__` at a pause, `__error__` after a failure.
    let output = json!({
        "title": format!("{title} output"),
        "type": "object",
        "properties": output_props,
        "required": output_required,
    });
    let required: Vec<&String> = spec.state.iter().map(|f| f.name.get_ref()).collect();
    let state = json!({
        "title": format!("{title} state"),
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    (input, output, state)
}

/// The graph's `[configurable]` values as a configuration takes them (`config_schema`
/// and `context_schema`: `config.configurable` and `context` each give them), each
/// with its type, its bounds and its default. `config.configurable` takes other keys
/// too; `context` only these.
pub(super) fn config_schema(spec: &GraphSpec) -> Json {
    let mut properties = Map::new();
    for f in &spec.state {
        let Some(bounds) = &f.configurable else {
            continue;
        };
        let mut schema = of_type(f.ty.get_ref());
        schema["title"] = json!(f.name.get_ref());
        if !f.description.is_empty() {
            schema["description"] = json!(f.description);
        }
        if let Some(d) = &f.default {
            schema["default"] = d.get_ref().clone();
        }
        // An `int`'s bounds are written as integers (`10`, not `10.0`).
        let number = |n: f64| match f.ty.get_ref() {
            FieldType::Int if n.fract() == 0.0 && n.abs() < 9e15 => json!(n as i64),
            _ => json!(n),
        };
        if let Some(min) = &bounds.min {
            schema["minimum"] = number(*min.get_ref());
        }
        if let Some(max) = &bounds.max {
            schema["maximum"] = number(*max.get_ref());
        }
        if let Some(one_of) = &bounds.one_of {
            schema["enum"] = json!(one_of.get_ref());
        }
        properties.insert(f.name.get_ref().clone(), schema);
    }
    let title = spec
        .graph
        .name
        .as_ref()
        .map_or_else(String::new, |n| n.get_ref().clone());
    json!({
        "title": format!("{title} configuration"),
        "type": "object",
        "properties": properties,
    })
}

fn of_type(t: &FieldType) -> Json {
    match t {
        FieldType::String => json!({ "type": "string" }),
        FieldType::Int => json!({ "type": "integer" }),
        FieldType::Float => json!({ "type": "number" }),
        FieldType::Bool => json!({ "type": "boolean" }),
        FieldType::Json => json!({}),
        FieldType::Object => json!({ "type": "object" }),
        FieldType::Messages => json!({
            "type": "array",
            "items": {
                "type": "object",
                "properties": { "role": { "type": "string" }, "content": {} },
                "required": ["role", "content"],
            },
        }),
        FieldType::List(item) => json!({ "type": "array", "items": of_type(item) }),
        FieldType::Map(item) => json!({ "type": "object", "additionalProperties": of_type(item) }),
        FieldType::Optional(inner) => json!({ "anyOf": [of_type(inner), { "type": "null" }] }),
    }
}
