//! [`Shape`]: a version of a graph as it was written (each table as parsed, each file
//! it reads by its hash), kept with the compiled graph so that two versions can be
//! compared when the text of the older is gone (a server's reload, an edited file);
//! [`diff`] says what changed between two, part by part.

use serde::Serialize;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;

/// A graph version's parts as written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shape {
    /// `[graph]`, `[llm]`, `[budget]`: the graph's own settings.
    pub settings: BTreeMap<String, Json>,
    pub servers: BTreeMap<String, Json>,
    /// `[state.x]`, and constants as `{ "const": value }` or `{ "configurable": {...} }`.
    pub fields: BTreeMap<String, Json>,
    pub nodes: BTreeMap<String, Json>,
    /// Each file the version reads (prompts, schemas, prices), by its path as written:
    /// the SHA-256 of its text.
    pub files: BTreeMap<String, String>,
}

impl Shape {
    /// The shape of a graph file's `text` that read `files` (path, text).
    pub(crate) fn of(text: &str, files: &[(String, String)]) -> Shape {
        let doc: toml::Table = toml::from_str(text).unwrap_or_default();
        let json = |v: &toml::Value| serde_json::to_value(v).unwrap_or(Json::Null);
        let table = |key: &str| -> BTreeMap<String, Json> {
            doc.get(key)
                .and_then(toml::Value::as_table)
                .map(|t| t.iter().map(|(k, v)| (k.clone(), json(v))).collect())
                .unwrap_or_default()
        };
        let mut settings = BTreeMap::new();
        for key in ["graph", "llm", "budget"] {
            if let Some(v) = doc.get(key) {
                settings.insert(key.to_string(), json(v));
            }
        }
        let mut fields = table("state");
        for (name, v) in table("consts") {
            fields.insert(name, serde_json::json!({ "const": v }));
        }
        for (name, v) in table("configurable") {
            fields.insert(name, serde_json::json!({ "configurable": v }));
        }
        let files = files
            .iter()
            .map(|(path, text)| (path.clone(), hex::encode(Sha256::digest(text.as_bytes()))))
            .collect();
        Shape {
            settings,
            servers: table("servers"),
            fields,
            nodes: table("nodes"),
            files,
        }
    }
}

/// One part of a graph that an edit changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// `settings` (`[graph]`, `[llm]`, `[budget]`), `server`, `field`, `node` or `file`.
    pub part: &'static str,
    pub name: String,
    /// `added`, `removed` or `edited`.
    pub change: &'static str,
    /// For an edit, each key that changed: `route.when[0].to: "a" -> "b"`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = match self.change {
            "added" => '+',
            "removed" => '-',
            _ => '~',
        };
        if self.part == "settings" {
            write!(f, "{sign} `[{}]`", self.name)?;
        } else {
            write!(f, "{sign} {} `{}`", self.part, self.name)?;
        }
        if !self.details.is_empty() {
            write!(f, ": {}", self.details.join("; "))?;
        }
        Ok(())
    }
}

/// What changed from `old` to `new`: settings, servers, fields, nodes, then files, each
/// part by name.
pub fn diff(old: &Shape, new: &Shape) -> Vec<Change> {
    let mut out = Vec::new();
    parts(&mut out, "settings", &old.settings, &new.settings);
    parts(&mut out, "server", &old.servers, &new.servers);
    parts(&mut out, "field", &old.fields, &new.fields);
    parts(&mut out, "node", &old.nodes, &new.nodes);
    for (path, hash) in &new.files {
        match old.files.get(path) {
            None => out.push(change("file", path, "added", Vec::new())),
            Some(h) if h != hash => {
                let readers: Vec<String> = new
                    .nodes
                    .iter()
                    .chain(new.fields.iter())
                    .filter(|(_, v)| mentions(v, path))
                    .map(|(n, _)| format!("`{n}`"))
                    .collect();
                let said = match readers.as_slice() {
                    [] => "its text changed".to_string(),
                    r => format!("its text changed (read by {})", r.join(", ")),
                };
                out.push(change("file", path, "edited", vec![said]));
            }
            Some(_) => {}
        }
    }
    for path in old.files.keys().filter(|p| !new.files.contains_key(*p)) {
        out.push(change("file", path, "removed", Vec::new()));
    }
    out
}

fn change(part: &'static str, name: &str, change: &'static str, details: Vec<String>) -> Change {
    Change {
        part,
        name: name.to_string(),
        change,
        details,
    }
}

fn parts(
    out: &mut Vec<Change>,
    part: &'static str,
    old: &BTreeMap<String, Json>,
    new: &BTreeMap<String, Json>,
) {
    for (name, n) in new {
        match old.get(name) {
            None => out.push(change(
                part,
                name,
                "added",
                vec![summary(part, n)].into_iter().flatten().collect(),
            )),
            Some(o) if o != n => {
                let mut details = Vec::new();
                values(&mut details, "", o, n);
                out.push(change(part, name, "edited", details));
            }
            Some(_) => {}
        }
    }
    for (name, o) in old.iter().filter(|(n, _)| !new.contains_key(*n)) {
        out.push(change(
            part,
            name,
            "removed",
            vec![summary(part, o)].into_iter().flatten().collect(),
        ));
    }
}

/// What an added or removed part is, in a word: a node's kind, a field's type.
fn summary(part: &str, v: &Json) -> Option<String> {
    let key = match part {
        "node" => "kind",
        "field" => "type",
        _ => return None,
    };
    v.get(key)
        .and_then(Json::as_str)
        .map(|s| format!("{key} {s}"))
}

/// Each difference between two values, by the path of keys that leads to it.
fn values(out: &mut Vec<String>, at: &str, old: &Json, new: &Json) {
    let here = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    match (old, new) {
        (Json::Object(o), Json::Object(n)) => {
            let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                match (o.get(k), n.get(k)) {
                    (Some(a), Some(b)) if a != b => values(out, &here(k), a, b),
                    (None, Some(b)) => out.push(format!("{} added: {}", here(k), short(b))),
                    (Some(a), None) => out.push(format!("{} removed (was {})", here(k), short(a))),
                    _ => {}
                }
            }
        }
        (Json::Array(o), Json::Array(n)) if o.len() == n.len() => {
            for (i, (a, b)) in o.iter().zip(n).enumerate() {
                if a != b {
                    values(out, &format!("{at}[{i}]"), a, b);
                }
            }
        }
        _ => out.push(format!(
            "{}: {} -> {}",
            if at.is_empty() { "value" } else { at },
            short(old),
            short(new)
        )),
    }
}

/// Whether `v` names `path` anywhere in it.
fn mentions(v: &Json, path: &str) -> bool {
    match v {
        Json::String(s) => s == path,
        Json::Array(items) => items.iter().any(|i| mentions(i, path)),
        Json::Object(map) => map.values().any(|i| mentions(i, path)),
        _ => false,
    }
}

/// A value as a change shows it: its JSON, cut after 80 characters.
fn short(v: &Json) -> String {
    let text = v.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}
