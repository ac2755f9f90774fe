//! A tool as a server lists it, with its `inputSchema` (and `outputSchema`) compiled
//! once and kept.

use super::error::{ArgumentProblem, McpError};
use crate::tool::ToolInfo;
use serde_json::Value as Json;
use std::sync::OnceLock;

/// A listed tool and its argument and result validators, compiled on first use.
pub struct ToolSchema {
    pub info: ToolInfo,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
    output: OnceLock<Option<Result<jsonschema::Validator, String>>>,
}

impl ToolSchema {
    pub fn new(info: ToolInfo) -> Self {
        ToolSchema {
            info,
            validator: OnceLock::new(),
            output: OnceLock::new(),
        }
    }

    /// Checks a result's `structuredContent` against the tool's `outputSchema`, as the
    /// MCP spec asks of clients: a server that breaks its own promise fails the node
    /// rather than writing a value the graph was told it would not get.
    pub fn check_result(&self, server: &str, structured: &Json) -> Result<(), McpError> {
        let Some(validator) = self
            .output
            .get_or_init(|| self.info.output_schema.as_ref().map(compile))
        else {
            return Ok(());
        };
        let validator = validator.as_ref().map_err(|message| McpError::BadSchema {
            server: server.to_string(),
            tool: self.info.name.clone(),
            message: format!("(its outputSchema) {message}"),
        })?;
        let problems: Vec<ArgumentProblem> = validator
            .iter_errors(structured)
            .map(|e| ArgumentProblem {
                path: e.instance_path().to_string(),
                message: e.to_string(),
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(McpError::InvalidResult {
                server: server.to_string(),
                tool: self.info.name.clone(),
                problems,
            })
        }
    }

    /// The arguments as the call sends them, where they differ from what was given
    /// (none: they stand as they are, not copied):
    ///
    /// - each required top-level property left out that has a `default` in the
    ///   schema is given it. Servers list such properties as required
    ///   (@playwright/mcp's `browser_take_screenshot` its `type`) and fill them in
    ///   themselves; the check would otherwise refuse a call that leaves them out.
    /// - each optional top-level property given as null whose schema's `type` does not
    ///   take null is left out: null is how a template or a model says "not given"
    ///   (the MCP spec's custom headers, SEP-2243, treat null and absent alike), and
    ///   the check would otherwise refuse the call.
    pub fn as_sent(&self, arguments: &Json) -> Option<Json> {
        let given = arguments.as_object()?;
        let props = self.info.input_schema.get("properties")?.as_object()?;
        let required: Vec<&str> = self
            .info
            .input_schema
            .get("required")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        let missing: Vec<(&str, &Json)> = required
            .iter()
            .filter(|name| !given.contains_key(**name))
            .filter_map(|name| Some((*name, props.get(*name)?.get("default")?)))
            .collect();
        let takes_no_null = |name: &str| {
            props
                .get(name)
                .and_then(|p| p.get("type"))
                .is_some_and(|t| match t {
                    Json::String(t) => t != "null",
                    Json::Array(ts) => !ts.iter().any(|t| t == "null"),
                    _ => false,
                })
        };
        let nulls: Vec<&String> = given
            .iter()
            .filter(|(name, v)| {
                v.is_null() && !required.contains(&name.as_str()) && takes_no_null(name)
            })
            .map(|(name, _)| name)
            .collect();
        if missing.is_empty() && nulls.is_empty() {
            return None;
        }
        let mut sent = given.clone();
        for name in nulls {
            sent.shift_remove(name);
        }
        for (name, default) in missing {
            sent.insert(name.to_string(), default.clone());
        }
        Some(Json::Object(sent))
    }

    /// Checks arguments against the tool's `inputSchema`.
    pub fn check(&self, server: &str, arguments: &Json) -> Result<(), McpError> {
        let validator = self
            .validator
            .get_or_init(|| compile(&self.info.input_schema))
            .as_ref()
            .map_err(|message| McpError::BadSchema {
                server: server.to_string(),
                tool: self.info.name.clone(),
                message: message.clone(),
            })?;
        let problems = problems(validator, arguments);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(McpError::InvalidArguments {
                server: server.to_string(),
                tool: self.info.name.clone(),
                problems,
            })
        }
    }
}

/// Compiles a tool's `inputSchema`, whatever draft it declares (draft 2020-12 when it
/// declares none). References to other documents are not fetched: the parts they
/// stand for go unchecked ([`remote_refs`] names them, for `validate --online`),
/// rather than the whole tool being refused.
pub fn compile(schema: &Json) -> Result<jsonschema::Validator, String> {
    if !schema.is_object() {
        return Err(format!("expected an object, got `{schema}`"));
    }
    let mut local = schema.clone();
    let mut dropped = Vec::new();
    drop_remote_refs(&mut local, &mut dropped);
    jsonschema::validator_for(&local).map_err(|e| e.to_string())
}

/// The references of a schema to other documents (`"$ref":
/// "https://example.com/place.json"`), which are not fetched.
pub(super) fn remote_refs(schema: &Json) -> Vec<String> {
    let mut local = schema.clone();
    let mut dropped = Vec::new();
    drop_remote_refs(&mut local, &mut dropped);
    dropped
}

/// Takes out every `$ref` that names another document (one not starting with `#`),
/// keeping what stands beside it.
fn drop_remote_refs(schema: &mut Json, dropped: &mut Vec<String>) {
    match schema {
        Json::Object(o) => {
            if let Some(Json::String(r)) = o.get("$ref")
                && !r.starts_with('#')
            {
                dropped.push(r.clone());
                o.remove("$ref");
            }
            for v in o.values_mut() {
                drop_remote_refs(v, dropped);
            }
        }
        Json::Array(items) => {
            for v in items {
                drop_remote_refs(v, dropped);
            }
        }
        _ => {}
    }
}

/// Every way `arguments` misses the schema, each with its JSON pointer. Arguments must
/// also be an object, as MCP sends them.
pub fn problems(validator: &jsonschema::Validator, arguments: &Json) -> Vec<ArgumentProblem> {
    if !arguments.is_object() {
        return vec![ArgumentProblem {
            path: String::new(),
            message: format!("arguments must be an object, got `{arguments}`"),
        }];
    }
    let mut out: Vec<ArgumentProblem> = validator
        .iter_errors(arguments)
        .map(|e| ArgumentProblem {
            path: e.instance_path().to_string(),
            message: e.to_string(),
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Arguments that fill every required property of an object schema with a plain value
/// of its type (`1`, `"switchyard"`, `true`, `[]`, `{}`, or the first `enum` value):
/// enough to call a tool from a smoke test such as the conformance client.
pub fn example_arguments(schema: &Json) -> Json {
    let mut out = serde_json::Map::new();
    let props = schema.get("properties").and_then(Json::as_object);
    let required = schema.get("required").and_then(Json::as_array);
    for name in required.into_iter().flatten().filter_map(Json::as_str) {
        let prop = props.and_then(|p| p.get(name)).unwrap_or(&Json::Null);
        let value = if let Some(first) = prop.get("enum").and_then(|e| e.get(0)) {
            first.clone()
        } else {
            match prop.get("type").and_then(Json::as_str) {
                Some("number" | "integer") => Json::from(1),
                Some("boolean") => Json::Bool(true),
                Some("array") => Json::Array(Vec::new()),
                Some("object") => example_arguments(prop),
                _ => Json::from("switchyard"),
            }
        };
        out.insert(name.to_string(), value);
    }
    Json::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn echo() -> ToolSchema {
        ToolSchema::new(ToolInfo {
            name: "echo".into(),
            description: String::new(),
            input_schema: json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": { "message": { "type": "string" } },
                "required": ["message"],
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": { "echo": { "type": "string" } },
                "required": ["echo"],
            })),
        })
    }

    #[test]
    fn example_arguments_fill_required_properties() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "enum": ["x", "y"] }, "c": { "type": "string" } },
            "required": ["a", "b"],
        });
        assert_eq!(example_arguments(&schema), json!({ "a": 1, "b": "x" }));
    }

    #[test]
    fn a_wrong_type_names_the_path() {
        let e = echo().check("s", &json!({ "message": 42 })).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the arguments of `echo` do not fit its inputSchema: at `/message`: 42 is not of type \"string\""
        );
        assert!(!e.is_transient());
    }

    #[test]
    fn a_missing_property_and_a_non_object() {
        let e = echo().check("s", &json!({})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the arguments of `echo` do not fit its inputSchema: at `/`: \"message\" is a required property"
        );
        let e = echo().check("s", &json!([1])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the arguments of `echo` do not fit its inputSchema: at `/`: arguments must be an object, got `[1]`"
        );
        echo().check("s", &json!({ "message": "hi" })).unwrap();
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        echo().check_result("s", &json!({ "echo": "hi" })).unwrap();
        assert_eq!(
            echo()
                .check_result("s", &json!({ "echo": 1 }))
                .unwrap_err()
                .to_string(),
            "the result of `echo` does not fit its outputSchema: at `/echo`: 1 is not of type \"string\""
        );
        let untyped = ToolSchema::new(ToolInfo {
            output_schema: None,
            ..echo().info
        });
        untyped.check_result("s", &json!(42)).unwrap();
    }

    #[test]
    fn required_properties_with_defaults_are_filled_optional_nulls_left_out_and_remote_refs_left_unchecked()
     {
        let shot = ToolSchema::new(ToolInfo {
            name: "shot".into(),
            description: String::new(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "type": { "enum": ["png", "jpeg"], "default": "png" },
                    "name": { "type": "string" },
                },
                "required": ["type"],
            }),
            output_schema: None,
        });
        assert_eq!(shot.as_sent(&json!({})), Some(json!({ "type": "png" })));
        assert_eq!(shot.as_sent(&json!({ "type": "jpeg" })), None);
        // An optional property given as null where its type takes none: left out.
        assert_eq!(
            shot.as_sent(&json!({ "type": "jpeg", "name": null })),
            Some(json!({ "type": "jpeg" }))
        );
        let nullable = ToolSchema::new(ToolInfo {
            name: "n".into(),
            description: String::new(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "a": { "type": ["string", "null"] },
                    "b": { "anyOf": [{ "type": "string" }] },
                    "c": { "type": "string" },
                },
                "required": ["c"],
            }),
            output_schema: None,
        });
        // Null where the type takes it, where no `type` says, and where required:
        // sent as given, for the check to judge.
        assert_eq!(
            nullable.as_sent(&json!({ "a": null, "b": null, "c": null })),
            None
        );
        let remote = json!({
            "type": "object",
            "properties": {
                "where": { "$ref": "https://schemas.example.com/place.json" },
                "back": { "$ref": "#/properties/where" },
                "n": { "type": "integer" },
            },
        });
        assert_eq!(
            remote_refs(&remote),
            ["https://schemas.example.com/place.json"]
        );
        let v = compile(&remote).unwrap();
        assert!(v.is_valid(&json!({ "where": { "anything": 1 }, "n": 2 })));
        assert!(!v.is_valid(&json!({ "n": "two" })));
    }

    #[test]
    fn a_schema_that_is_not_one_is_a_clear_error() {
        let t = ToolSchema::new(ToolInfo {
            name: "odd".into(),
            description: String::new(),
            input_schema: json!({ "type": 12 }),
            output_schema: None,
        });
        let e = t.check("s", &json!({})).unwrap_err().to_string();
        assert!(
            e.starts_with("the inputSchema of `odd` on server `s` is not a valid JSON Schema: "),
            "{e}"
        );
    }
}
