//! An answer to what an MCP server asked mid-call (an elicitation), as a person gives it
//! (`resume --payload`, `command.resume`): `{"action": "accept", "content": {...}}`,
//! `{"action": "decline"}`, `{"action": "cancel"}`, or the content alone (accepted).
//! Read once here for the resume's check and the answer sent back to the server.

use serde_json::{Value as Json, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Accept,
    Decline,
    Cancel,
}

/// The action, and the content of an accepted answer (`{}` when it gives none).
pub(crate) fn parse(answer: &Json) -> Result<(Action, Option<Json>), String> {
    match answer.get("action").and_then(Json::as_str) {
        Some("accept") => Ok((
            Action::Accept,
            Some(answer.get("content").cloned().unwrap_or(json!({}))),
        )),
        Some("decline") => Ok((Action::Decline, None)),
        Some("cancel") => Ok((Action::Cancel, None)),
        Some(other) => Err(format!(
            "`action` is `{other}`; it is `accept`, `decline` or `cancel`"
        )),
        None => Ok((Action::Accept, Some(answer.clone()))),
    }
}

/// Fields an accepted answer leaves out take the defaults the server's schema gives
/// them (SEP-1034), so "accept" with nothing filled in means "the defaults".
pub(crate) fn fill_defaults(content: &mut Json, schema: &Json) {
    let (Json::Object(fields), Some(Json::Object(properties))) =
        (content, schema.get("properties"))
    else {
        return;
    };
    for (name, property) in properties {
        if let Some(default) = property.get("default")
            && !fields.contains_key(name)
        {
            fields.insert(name.clone(), default.clone());
        }
    }
}
