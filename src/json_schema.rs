//! Checking a JSON value against a compiled JSON Schema, with every problem in one
//! message a person (or a model being corrected) can act on.

use serde_json::Value as Json;

/// Every way `value` misses the schema, joined with `; `, each with the JSON pointer of
/// where it is (`at `/target`: ...`) unless it is the value itself.
pub(crate) fn check(validator: &jsonschema::Validator, value: &Json) -> Result<(), String> {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at `{at}`: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}
