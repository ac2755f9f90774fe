//! A message's content as the chat API takes it. Messages in a thread's state may
//! hold LangChain's content blocks (what LangGraph's front ends send: an image as a
//! URL or as base64 data, a PDF as a file); the model is sent the chat API's content
//! parts for them. A block the API has no part for is refused by name, before any
//! call, and a server refuses it when the input arrives.

use serde_json::{Map, Value as Json, json};

/// `content` as the chat API's content: text as it is, a list of blocks as content
/// parts; the problem with the first block that has none.
pub(crate) fn content_parts(content: &Json) -> Result<Json, String> {
    let Json::Array(blocks) = content else {
        return Ok(content.clone());
    };
    blocks
        .iter()
        .enumerate()
        .map(|(i, b)| part(b).map_err(|why| format!("content block {} {why}", i + 1)))
        .collect::<Result<Vec<_>, _>>()
        .map(Json::Array)
}

/// Every message of `messages` with its content checked: the first problem, naming
/// the message (from 1) and the block.
pub(crate) fn check_messages<'a>(
    messages: impl IntoIterator<Item = &'a Json>,
) -> Result<(), String> {
    for (i, m) in messages.into_iter().enumerate() {
        if let Some(content) = m.get("content") {
            content_parts(content).map_err(|e| format!("message {}: {e}", i + 1))?;
        }
    }
    Ok(())
}

fn part(block: &Json) -> Result<Json, String> {
    let Json::Object(b) = block else {
        // A plain string in a list is text, as LangChain takes it.
        if let Json::String(text) = block {
            return Ok(json!({ "type": "text", "text": text }));
        }
        return Err(format!("is {block}, not an object"));
    };
    let kind = b.get("type").and_then(Json::as_str).unwrap_or("");
    let text = |k: &str| b.get(k).and_then(Json::as_str);
    match kind {
        "text" => Ok(json!({ "type": "text", "text": text("text").unwrap_or("") })),
        // The chat API's own image part, as it is (a bare URL made an object).
        "image_url" => match b.get("image_url") {
            Some(Json::String(url)) => {
                Ok(json!({ "type": "image_url", "image_url": { "url": url } }))
            }
            Some(Json::Object(o)) if o.get("url").is_some_and(Json::is_string) => {
                Ok(json!({ "type": "image_url", "image_url": o }))
            }
            _ => Err("(`image_url`) has no `image_url.url`".into()),
        },
        "image" => {
            let url = source(b, "image")?;
            let mut image = Map::new();
            image.insert("url".into(), Json::String(url));
            if let Some(detail) = b.get("detail").filter(|d| d.is_string()) {
                image.insert("detail".into(), detail.clone());
            }
            Ok(json!({ "type": "image_url", "image_url": image }))
        }
        "file" => {
            if b.get("file").is_some_and(Json::is_object) {
                // The chat API's own file part.
                return Ok(block.clone());
            }
            let data = source(b, "file")?;
            if !data.starts_with("data:") {
                return Err(
                    "(`file`) is a URL: the chat API takes a file as base64 data only".into(),
                );
            }
            let name = b
                .get("metadata")
                .and_then(|m| m.get("filename").or_else(|| m.get("name")))
                .or_else(|| b.get("filename"))
                .and_then(Json::as_str)
                .unwrap_or("file");
            Ok(json!({ "type": "file", "file": { "filename": name, "file_data": data } }))
        }
        "" => Err("has no `type`".into()),
        other => Err(format!(
            "(`{other}`) is not a kind the chat API takes (text, image, image_url, file)"
        )),
    }
}

/// Where an image or file block's bytes are: its URL, or its base64 data as a
/// `data:` URL. LangChain writes them `{url}` or `{base64, mime_type}`, and before
/// that `{source_type: "url" | "base64", url | data, mime_type}`.
fn source(b: &Map<String, Json>, kind: &str) -> Result<String, String> {
    let text = |k: &str| b.get(k).and_then(Json::as_str);
    let base64 = text("base64").or_else(|| {
        (text("source_type") == Some("base64"))
            .then(|| text("data"))
            .flatten()
    });
    if let Some(data) = base64 {
        let mime = text("mime_type").ok_or_else(|| {
            format!("(`{kind}`) has base64 data and no `mime_type` to say what it is")
        })?;
        return Ok(format!("data:{mime};base64,{data}"));
    }
    if let Some(url) = text("url") {
        return Ok(url.to_string());
    }
    match text("source_type") {
        Some(other) if other != "url" => Err(format!(
            "(`{kind}`) has source_type `{other}`: the chat API takes a URL or base64 data"
        )),
        _ => Err(format!("(`{kind}`) has neither `url` nor base64 data")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn langchain_blocks_become_the_chat_apis_parts() {
        let content = json!([
            "plain",
            { "type": "text", "text": "what is this?" },
            { "type": "image", "source_type": "base64", "mime_type": "image/png", "data": "iVBO", "metadata": { "name": "a.png" } },
            { "type": "image", "url": "https://x.test/a.png" },
            { "type": "image", "base64": "R0lG", "mime_type": "image/gif" },
            { "type": "image_url", "image_url": "https://x.test/b.png" },
            { "type": "file", "source_type": "base64", "mime_type": "application/pdf", "data": "JVBE", "metadata": { "filename": "a.pdf" } },
        ]);
        assert_eq!(
            content_parts(&content).unwrap(),
            json!([
                { "type": "text", "text": "plain" },
                { "type": "text", "text": "what is this?" },
                { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBO" } },
                { "type": "image_url", "image_url": { "url": "https://x.test/a.png" } },
                { "type": "image_url", "image_url": { "url": "data:image/gif;base64,R0lG" } },
                { "type": "image_url", "image_url": { "url": "https://x.test/b.png" } },
                { "type": "file", "file": { "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE" } },
            ])
        );
        assert_eq!(content_parts(&json!("text")).unwrap(), json!("text"));
    }

    #[test]
    fn a_block_the_chat_api_cannot_take_is_named() {
        let refused = |block: Json| content_parts(&json!(["hi", block])).unwrap_err();
        assert_eq!(
            refused(json!({ "type": "audio", "source_type": "base64", "data": "UklG" })),
            "content block 2 (`audio`) is not a kind the chat API takes (text, image, image_url, file)"
        );
        assert_eq!(
            refused(json!({ "type": "image", "source_type": "base64", "data": "iVBO" })),
            "content block 2 (`image`) has base64 data and no `mime_type` to say what it is"
        );
        assert_eq!(
            refused(json!({ "type": "file", "url": "https://x.test/a.pdf" })),
            "content block 2 (`file`) is a URL: the chat API takes a file as base64 data only"
        );
        assert_eq!(
            refused(json!({ "type": "image", "source_type": "id", "id": "file-1" })),
            "content block 2 (`image`) has source_type `id`: the chat API takes a URL or base64 data"
        );
        assert_eq!(refused(json!(3)), "content block 2 is 3, not an object");
    }
}
