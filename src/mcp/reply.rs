//! A `tools/call` result turned into the value a node writes to state.
//!
//! `structuredContent` wins when present (with any image, audio or blob-resource
//! content object inside it replaced by a blob reference). Otherwise each content part becomes a value:
//! text is parsed as JSON when it is JSON and kept as a string when not; images, audio
//! and embedded blob resources go to the [`BlobStore`] and become a reference; an
//! embedded text resource becomes `{ uri, mime_type, text }`; a resource link becomes
//! `{ uri, name, mime_type, description }` (the keys it has). One part gives its value,
//! several give the list of their values in order, none gives null.

use super::blob_store::BlobStore;
use super::error::McpError;
use base64::Engine;
use serde_json::{Map, Value as Json, json};

/// The state value of a result, and whether the tool reported an error (`isError`).
pub(crate) fn reply_value(
    server: &str,
    mut result: Json,
    blobs: &BlobStore,
) -> Result<(Json, bool), McpError> {
    let is_error = result
        .get("isError")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    if !is_error
        && let Some(mut structured) = result
            .as_object_mut()
            .and_then(|o| o.remove("structuredContent"))
    {
        unblob(server, &mut structured, blobs)?;
        return Ok((structured, false));
    }
    let parts = match result.get("content") {
        Some(Json::Array(parts)) => parts.as_slice(),
        None | Some(Json::Null) => &[],
        Some(other) => {
            return Err(bad(
                server,
                format!("`content` is not a list but {}", kind_of(other)),
            ));
        }
    };
    let mut values = parts
        .iter()
        .map(|p| part_value(server, p, blobs))
        .collect::<Result<Vec<_>, _>>()?;
    let value = match values.len() {
        0 => Json::Null,
        1 => values.pop().expect("one value"),
        _ => Json::Array(values),
    };
    Ok((value, is_error))
}

/// What a `resources/read` (its `contents`: each as an embedded resource is, text or a
/// blob reference; one gives its value, several their list) or a `prompts/get` (its
/// `messages`, each `{role, content}` with text content as its text) gives the state.
pub(crate) fn read_value(
    server: &str,
    what: &str,
    result: Json,
    blobs: &BlobStore,
) -> Result<Json, McpError> {
    if what == "resources/read" {
        let contents: Vec<Json> = result
            .get("contents")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .map(|c| json!({ "type": "resource", "resource": c }))
            .collect();
        return Ok(reply_value(server, json!({ "content": contents }), blobs)?.0);
    }
    let messages = result
        .get("messages")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .map(|m| {
            let content = match m.get("content") {
                Some(part) if part.get("type").and_then(Json::as_str) == Some("text") => {
                    part.get("text").cloned().unwrap_or(Json::Null)
                }
                Some(part) => part_value(server, part, blobs)?,
                None => Json::Null,
            };
            Ok(json!({ "role": m.get("role"), "content": content }))
        })
        .collect::<Result<Vec<_>, McpError>>()?;
    Ok(Json::Array(messages))
}

/// The text parts of a result's `content`, joined by newlines, as a model reads a
/// tool's answer; none when it has no text part.
pub(crate) fn text_of(result: &Json) -> Option<String> {
    let texts: Vec<&str> = result
        .get("content")?
        .as_array()?
        .iter()
        .filter(|p| p.get("type").and_then(Json::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Json::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

fn part_value(server: &str, part: &Json, blobs: &BlobStore) -> Result<Json, McpError> {
    let kind = part.get("type").and_then(Json::as_str).unwrap_or("");
    let str_of = |key: &str| part.get(key).and_then(Json::as_str);
    match kind {
        "text" => {
            let text = str_of("text").ok_or_else(|| bad(server, "a text part has no `text`"))?;
            Ok(crate::value::text_value(text))
        }
        "image" | "audio" => {
            let data = str_of("data")
                .ok_or_else(|| bad(server, format!("an {kind} part has no `data`")))?;
            let mime = str_of("mimeType").unwrap_or("application/octet-stream");
            blobs.put(&decode(server, data, kind)?, mime)
        }
        "resource" => {
            let resource = part
                .get("resource")
                .and_then(Json::as_object)
                .ok_or_else(|| bad(server, "a resource part has no `resource` object"))?;
            let field = |k: &str| resource.get(k).and_then(Json::as_str);
            let uri = field("uri").unwrap_or_default();
            let mime = field("mimeType");
            if let Some(blob) = field("blob") {
                let mime = mime.unwrap_or("application/octet-stream");
                let mut reference = blobs.put(&decode(server, blob, "resource")?, mime)?;
                reference["uri"] = json!(uri);
                Ok(reference)
            } else if let Some(text) = field("text") {
                Ok(json!({ "uri": uri, "mime_type": mime, "text": text }))
            } else {
                Err(bad(
                    server,
                    format!("the resource `{uri}` has neither `text` nor `blob`"),
                ))
            }
        }
        "resource_link" => {
            let mut link = Map::new();
            for (from, to) in [
                ("uri", "uri"),
                ("name", "name"),
                ("mimeType", "mime_type"),
                ("description", "description"),
            ] {
                if let Some(v) = part.get(from) {
                    link.insert(to.into(), v.clone());
                }
            }
            Ok(Json::Object(link))
        }
        // A content type from a later protocol version: kept as the server sent it.
        _ => Ok(part.clone()),
    }
}

/// structuredContent with every binary MCP content object inside it (an image or audio
/// part, an embedded blob resource; some servers mirror their content there) replaced
/// by its blob reference, so no bytes reach the state.
fn unblob(server: &str, v: &mut Json, blobs: &BlobStore) -> Result<(), McpError> {
    match v {
        Json::Object(o) => {
            let kind = o.get("type").and_then(Json::as_str);
            let binary_part = matches!(kind, Some("image" | "audio"))
                && o.get("data").is_some_and(Json::is_string);
            let blob_resource = kind == Some("resource")
                && o.get("resource")
                    .is_some_and(|r| r.get("blob").is_some_and(Json::is_string));
            if binary_part || blob_resource {
                *v = part_value(server, v, blobs)?;
            } else {
                for value in o.values_mut() {
                    unblob(server, value, blobs)?;
                }
            }
        }
        Json::Array(items) => {
            for item in items {
                unblob(server, item, blobs)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn decode(server: &str, data: &str, what: &str) -> Result<Vec<u8>, McpError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| {
            bad(
                server,
                format!("the data of an {what} part is not base64: {e}"),
            )
        })
}

fn bad(server: &str, message: impl Into<String>) -> McpError {
    McpError::BadReply {
        server: server.to_string(),
        message: message.into(),
    }
}

fn kind_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> BlobStore {
        BlobStore::new(
            std::env::temp_dir().join(format!("switchyard-reply-{}", std::process::id())),
        )
    }

    #[test]
    fn structured_content_wins_over_text() {
        let r = json!({ "content": [{ "type": "text", "text": "{\"a\":1}" }], "structuredContent": { "b": 2 } });
        assert_eq!(
            reply_value("s", r.clone(), &store()).unwrap(),
            (json!({ "b": 2 }), false)
        );
    }

    #[test]
    fn images_inside_structured_content_become_references() {
        let r = json!({ "structuredContent": { "content": [{ "type": "image", "data": "aGk=", "mimeType": "image/png" }], "n": 1 } });
        let hash = "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4";
        assert_eq!(
            reply_value("s", r.clone(), &store()).unwrap().0,
            json!({ "content": [{ "blob": format!("sha256:{hash}"), "mime_type": "image/png", "bytes": 2 }], "n": 1 })
        );
    }

    #[test]
    fn text_is_json_when_it_parses_and_a_string_when_not() {
        let r = json!({ "content": [{ "type": "text", "text": " [1, 2] " }] });
        assert_eq!(
            reply_value("s", r.clone(), &store()).unwrap().0,
            json!([1, 2])
        );
        let r = json!({ "content": [{ "type": "text", "text": "Echo: hi" }] });
        assert_eq!(
            reply_value("s", r.clone(), &store()).unwrap().0,
            json!("Echo: hi")
        );
        let r = json!({ "content": [{ "type": "text", "text": "{not json" }] });
        assert_eq!(
            reply_value("s", r.clone(), &store()).unwrap().0,
            json!("{not json")
        );
    }

    #[test]
    fn several_parts_make_a_list_and_none_make_null() {
        let r = json!({ "content": [{ "type": "text", "text": "a" }, { "type": "text", "text": "2" }] });
        assert_eq!(
            reply_value("s", r.clone(), &store()).unwrap().0,
            json!(["a", 2])
        );
        assert_eq!(
            reply_value("s", json!({ "content": [] }), &store())
                .unwrap()
                .0,
            Json::Null
        );
    }

    #[test]
    fn bad_base64_and_bad_content_are_clear_errors() {
        let r = json!({ "content": [{ "type": "image", "data": "!!!", "mimeType": "image/png" }] });
        let e = reply_value("s", r.clone(), &store())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("server `s` sent a reply Switchyard cannot use: the data of an image part is not base64"),
            "{e}"
        );
        let e = reply_value("s", json!({ "content": 3 }), &store()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "server `s` sent a reply Switchyard cannot use: `content` is not a list but a number"
        );
    }

    #[test]
    fn is_error_keeps_the_text() {
        let r = json!({ "content": [{ "type": "text", "text": "boom" }], "isError": true });
        assert_eq!(
            reply_value("s", r.clone(), &store()).unwrap(),
            (json!("boom"), true)
        );
    }
}
