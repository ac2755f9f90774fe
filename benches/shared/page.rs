//! The agent loop's answers, shared by the benches that run it (`interpreter`'s
//! doubles and `watch`'s browser server): a page snapshot and a planned action.

use serde_json::{Value as Json, json};

/// The planner's answer: ~100 bytes of JSON.
pub(crate) fn plan() -> Json {
    json!({ "id": "e42", "kind": "click", "target": "Opening hours link", "reason": "the page lists them" })
}

/// A page snapshot: ~2 KB, 16 elements.
pub(crate) fn observation() -> Json {
    let elements: Vec<Json> = (0..16)
        .map(|i| {
            json!({
                "ref": format!("e{i}"),
                "role": if i % 3 == 0 { "link" } else { "button" },
                "name": format!("Element number {i} of the library page"),
                "enabled": true,
            })
        })
        .collect();
    json!({
        "url": "https://library.example.org/visit",
        "title": "Visit the City Library",
        "elements": elements,
    })
}
