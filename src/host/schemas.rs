//! A graph's state as JSON Schema, for clients that build forms from it
//! (`GET /assistants/{id}/schemas`): one property per state field, its type from the
//! field's type, or the field's own schema file when it names one.

use crate::spec::{FieldType, GraphSpec};
use serde_json::{Map, Value as Json, json};

/// The input schema (the fields the graph requires in every run's input; the rest
/// optional: a run's input names the fields it sets) and the state schema (every field
/// present).
pub(super) fn schemas(spec: &GraphSpec) -> (Json, Json) {
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
    let required: Vec<&String> = spec.state.iter().map(|f| f.name.get_ref()).collect();
    let mut input = json!({
        "title": format!("{title} input"),
        "type": "object",
        "properties": properties,
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
    let state = json!({
        "title": format!("{title} state"),
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    (input, state)
}

/// The graph's constants as a configuration takes them (`config_schema` and
/// `context_schema`: `config.configurable` and `context` each give their values), each
/// with its type and the graph's value as its default. `config.configurable` takes
/// other keys too; `context` only these.
pub(super) fn config_schema(spec: &GraphSpec) -> Json {
    let mut properties = Map::new();
    for f in spec.state.iter().filter(|f| f.constant) {
        let mut schema = of_type(f.ty.get_ref());
        schema["title"] = json!(f.name.get_ref());
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
    json!({
        "title": format!("{title} constants"),
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
