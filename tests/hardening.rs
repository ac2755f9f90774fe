//! What trying to break Switchyard found (issue 12), each test named after what it
//! caught: values too deep to read back, sources too deep to parse, graph files outside
//! their root, stores under contention or not ours, and smaller leaks and hangs.

mod files;
mod leaks;
mod size;
mod sources;
mod stores;
mod values;

use crate::util::{root, switchyard};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::Arc;

pub(crate) const DEEP: &str = "tests/fixtures/hardening/deep.toml";

pub(crate) fn store_flag(db: &Path) -> String {
    format!("sqlite:{}", db.display())
}

/// Parses `text`, however deep it nests (the deep-record tests print such values).
#[track_caller]
pub(crate) fn json_of(text: &str) -> Json {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    Json::deserialize(&mut de).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// `switchyard state` of a thread that must exist, as JSON.
pub(crate) fn state_of(thread: &str, store: &str) -> Json {
    json_of(&state_text(thread, store))
}

pub(crate) fn state_text(thread: &str, store: &str) -> String {
    switchyard(&["state", "--thread", thread, "--store", store])
        .run()
        .code(0)
        .stdout
}

/// `[[[...]]]` as JSON text, `depth` arrays deep.
pub(crate) fn nested_text(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

pub(crate) fn deep_graph() -> Arc<switchyard::graph::Graph> {
    Arc::new(switchyard::load_graph(&root().join(DEEP)).unwrap())
}
