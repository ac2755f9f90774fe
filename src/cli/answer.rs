//! Turns what a person typed at an interrupt into a resume payload, guided by the
//! interrupt's resume schema, so a terminal user answers `yes` or types a sentence
//! instead of writing JSON by hand. The runner still validates the result.

use serde_json::{Map, Value as Json};

/// The kind of answer a resume schema asks for, to tell the person what to type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AnswerShape {
    /// An object with a required boolean property (`confirmed`): yes or no.
    YesNo { property: String },
    /// A string, or an object with one required string property: free text.
    Text { property: Option<String> },
    /// Anything else: JSON.
    Json,
}

impl AnswerShape {
    /// What the person is asked to type.
    pub(crate) fn hint(&self) -> &'static str {
        match self {
            AnswerShape::YesNo { .. } => "answer yes or no (or JSON)",
            AnswerShape::Text { .. } => "type your answer (or JSON)",
            AnswerShape::Json => "type the answer as JSON",
        }
    }
}

/// Reads the shape of answer from a resume schema (none: free text or JSON).
pub(crate) fn shape(schema: Option<&Json>) -> AnswerShape {
    let Some(schema) = schema else {
        return AnswerShape::Text { property: None };
    };
    let branches = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Json::as_array))
        .flatten();
    if accepts_type(schema, "string") || branches.clone().any(|b| accepts_type(b, "string")) {
        return AnswerShape::Text { property: None };
    }
    let props = schema.get("properties").and_then(Json::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| r.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let Some(props) = props else {
        return AnswerShape::Json;
    };
    let of_type = |t: &str| {
        required
            .iter()
            .filter(|name| **name != "reference")
            .filter(|name| props.get(**name).is_some_and(|p| accepts_type(p, t)))
            .map(|name| name.to_string())
            .collect::<Vec<_>>()
    };
    let bools = of_type("boolean");
    let strings = of_type("string");
    let others = required
        .iter()
        .filter(|n| **n != "reference")
        .count()
        .saturating_sub(bools.len() + strings.len());
    match (bools.as_slice(), strings.as_slice(), others) {
        ([b], [], 0) => AnswerShape::YesNo {
            property: b.clone(),
        },
        ([], [s], 0) => AnswerShape::Text {
            property: Some(s.clone()),
        },
        _ => AnswerShape::Json,
    }
}

fn accepts_type(schema: &Json, t: &str) -> bool {
    match schema.get("type") {
        Some(Json::String(s)) => s == t,
        Some(Json::Array(ts)) => ts.iter().any(|x| x.as_str() == Some(t)),
        _ => false,
    }
}

/// Builds a payload from a typed line. JSON that the line parses as is taken as is
/// (except a bare word, which is text); otherwise the shape decides. `reference` is the
/// pending interrupt's reference, filled in when the schema has that property.
pub(crate) fn payload(
    shape: &AnswerShape,
    schema: Option<&Json>,
    reference: Option<&str>,
    line: &str,
) -> Result<Json, String> {
    let line = line.trim();
    if let Ok(value @ (Json::Object(_) | Json::Array(_))) = serde_json::from_str::<Json>(line) {
        return Ok(value);
    }
    let with_reference = |mut obj: Map<String, Json>| {
        let wants_reference = schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get("reference"))
            .is_some();
        if let (true, Some(r)) = (wants_reference, reference) {
            obj.insert("reference".into(), Json::String(r.to_string()));
        }
        Json::Object(obj)
    };
    match shape {
        AnswerShape::YesNo { property } => {
            let yes = match line.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => true,
                "n" | "no" | "false" => false,
                // Other JSON is taken as written; the resume schema judges it.
                _ => {
                    return serde_json::from_str(line)
                        .map_err(|_| format!("`{line}` is not yes or no"));
                }
            };
            let mut obj = Map::new();
            obj.insert(property.clone(), Json::Bool(yes));
            Ok(with_reference(obj))
        }
        AnswerShape::Text { property: None } => Ok(Json::String(line.to_string())),
        AnswerShape::Text {
            property: Some(property),
        } => {
            let mut obj = Map::new();
            obj.insert(property.clone(), Json::String(line.to_string()));
            Ok(with_reference(obj))
        }
        AnswerShape::Json => serde_json::from_str(line).map_err(|e| format!("not JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn confirmations_take_yes_or_no_and_carry_the_reference() {
        let schema = json!({
            "type": "object",
            "properties": { "reference": { "type": "string" }, "confirmed": { "type": "boolean" } },
            "required": ["reference", "confirmed"]
        });
        let s = shape(Some(&schema));
        assert_eq!(
            s,
            AnswerShape::YesNo {
                property: "confirmed".into()
            }
        );
        assert_eq!(
            payload(&s, Some(&schema), Some("a1"), " Yes ").unwrap(),
            json!({ "confirmed": true, "reference": "a1" })
        );
        assert_eq!(
            payload(&s, Some(&schema), Some("a1"), "n").unwrap(),
            json!({ "confirmed": false, "reference": "a1" })
        );
        assert_eq!(
            payload(&s, Some(&schema), Some("a1"), "maybe").unwrap_err(),
            "`maybe` is not yes or no"
        );
    }

    #[test]
    fn one_string_property_takes_free_text() {
        let schema = json!({
            "type": "object",
            "properties": { "answer": { "type": "string" } },
            "required": ["answer"]
        });
        let s = shape(Some(&schema));
        assert_eq!(
            payload(&s, Some(&schema), None, "blue").unwrap(),
            json!({ "answer": "blue" })
        );
        // JSON is taken as written.
        assert_eq!(
            payload(&s, Some(&schema), None, r#"{"answer": "red"}"#).unwrap(),
            json!({ "answer": "red" })
        );
    }

    #[test]
    fn no_schema_takes_text_and_mixed_schemas_take_json() {
        assert_eq!(shape(None), AnswerShape::Text { property: None });
        assert_eq!(
            payload(&shape(None), None, None, "hello").unwrap(),
            json!("hello")
        );
        let schema = json!({
            "type": "object",
            "properties": { "done": { "type": "boolean" }, "message": { "type": "string" } },
            "required": ["done", "message"]
        });
        let s = shape(Some(&schema));
        assert_eq!(s, AnswerShape::Json);
        assert!(
            payload(&s, Some(&schema), None, "done")
                .unwrap_err()
                .starts_with("not JSON")
        );
        // Seed 000's manual step: any text, or `{ done, message }`.
        let manual = json!({ "anyOf": [{ "type": "string" }, { "type": "object" }] });
        let s = shape(Some(&manual));
        assert_eq!(
            payload(&s, Some(&manual), None, "logged in").unwrap(),
            json!("logged in")
        );
        assert_eq!(
            payload(&s, Some(&manual), None, r#"{"done": true}"#).unwrap(),
            json!({ "done": true })
        );
    }
}
