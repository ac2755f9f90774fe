//! An llm node's output schema goes to the model as a strict `response_format`, and
//! OpenAI refuses a schema strict mode cannot take with a 400 at the first request:
//! after the run has started and earlier nodes have been paid for. The rules are
//! checked here instead, pointing at the property in the schema file. A node (or
//! `[llm]`) with `strict = false` sends its schema without `strict` and is not checked.

use super::json_span::locate;
use super::{Cx, DiagExt};
use crate::diagnostic::Diagnostic;
use crate::spec::KindSpec;
use serde_json::Value;
use std::collections::HashSet;

/// Keywords strict structured outputs refuse (OpenAI's "supported schemas": strings
/// take `pattern` and `format`, numbers their bounds, arrays `minItems`/`maxItems`,
/// and `anyOf`, `enum`, `const`, `$ref` and `$defs` work; these do not).
const UNSUPPORTED: [&str; 19] = [
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "minLength",
    "maxLength",
];

/// More than this many problems in one schema are summed up in the last one.
const MAX_REPORTED: usize = 8;

pub(super) fn check(cx: &mut Cx<'_>) {
    let spec = cx.spec;
    let mut seen = HashSet::new();
    for node in &spec.nodes {
        let KindSpec::Llm(l) = &node.body else {
            continue;
        };
        let Some(path) = &l.schema else { continue };
        if !l.strict.or(spec.llm.strict).unwrap_or(true) || !seen.insert(path.get_ref()) {
            continue;
        }
        let (Some(schema), Some((file, text))) =
            (cx.schema(path), cx.schema_files.get(path.get_ref()))
        else {
            continue;
        };
        let (file, text) = (*file, text.clone());
        let mut problems = Vec::new();
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            problems.push((
                Vec::new(),
                "the top level is not `\"type\": \"object\"`".to_string(),
            ));
        }
        walk(schema, &mut Vec::new(), &mut problems);
        let total = problems.len();
        for (i, (at, why)) in problems.into_iter().take(MAX_REPORTED).enumerate() {
            let span = locate(&text, &at).unwrap_or(0..0);
            let more = if i + 1 == MAX_REPORTED && total > MAX_REPORTED {
                format!(" (and {} more)", total - MAX_REPORTED)
            } else {
                String::new()
            };
            let pointer = if at.is_empty() {
                "/".to_string()
            } else {
                format!("/{}", at.join("/"))
            };
            cx.diags.push(
                Diagnostic::error(
                    "strict-schema",
                    file,
                    span,
                    format!(
                        "`{}` cannot be a strict structured-output schema: {why}{more}",
                        path.get_ref()
                    ),
                )
                .label(format!("at `{pointer}`"))
                .note(format!(
                    "the output schema of node `{}`, sent with `strict: true`",
                    node.name.get_ref()
                )),
            );
            cx.diags
                .last_mut()
                .expect("just pushed")
                .with_help(help(&why));
        }
    }
}

fn help(why: &str) -> String {
    if why.contains("`required`") {
        "list every property in `required`; make an optional one nullable (`\"type\": [\"string\", \"null\"]`), or set `strict = false` on the node for an endpoint that does not need strict schemas".into()
    } else if why.contains("additionalProperties") {
        "add `\"additionalProperties\": false`, or set `strict = false` on the node for an endpoint that does not need strict schemas".into()
    } else {
        "write the schema without it, or set `strict = false` on the node for an endpoint that does not need strict schemas".into()
    }
}

/// The problems of the schema at `at`, each with where it is.
fn walk(schema: &Value, at: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    for key in obj.keys() {
        if UNSUPPORTED.contains(&key.as_str()) {
            let mut here = at.clone();
            here.push(key.clone());
            out.push((here, format!("`{key}` is not supported in strict mode")));
        }
    }
    let is_object = match obj.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => obj.contains_key("properties"),
    };
    if is_object {
        if obj.get("additionalProperties") != Some(&Value::Bool(false)) {
            out.push((
                at.clone(),
                "an object does not set `\"additionalProperties\": false`".into(),
            ));
        }
        let required: HashSet<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for name in props.keys() {
                if !required.contains(name.as_str()) {
                    let mut here = at.clone();
                    here.extend(["properties".to_string(), name.clone()]);
                    out.push((here, format!("property `{name}` is not in `required`")));
                }
            }
        }
    }
    let mut descend = |key: &str, sub: &Value, name: Option<&str>| {
        at.push(key.to_string());
        if let Some(n) = name {
            at.push(n.to_string());
        }
        walk(sub, at, out);
        at.pop();
        if name.is_some() {
            at.pop();
        }
    };
    for key in ["properties", "$defs", "definitions"] {
        if let Some(map) = obj.get(key).and_then(Value::as_object) {
            for (name, sub) in map {
                descend(key, sub, Some(name));
            }
        }
    }
    if let Some(items) = obj.get("items") {
        descend("items", items, None);
    }
    for key in ["anyOf", "prefixItems"] {
        if let Some(list) = obj.get(key).and_then(Value::as_array) {
            for (i, sub) in list.iter().enumerate() {
                descend(key, sub, Some(&i.to_string()));
            }
        }
    }
}
