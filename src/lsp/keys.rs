//! The keys a table of a graph file takes, read from the format's JSON Schema (the one
//! taplo and tombi check graph files against, `schemas/graph-file.schema.json`), so that
//! completion offers what the format allows and the schema stays the one list of keys.

use serde_json::Value as Json;
use std::sync::OnceLock;

fn schema() -> &'static Json {
    static SCHEMA: OnceLock<Json> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::from_str(include_str!("../../schemas/graph-file.schema.json"))
            .unwrap_or(Json::Null)
    })
}

/// The keys of the table `[a.b.c]` (`path` its dotted header), each with its
/// description; none for a table whose keys are names (`[nodes.x.set]`, `[consts]`).
pub(crate) fn keys(path: &[&str]) -> Vec<(&'static str, &'static str)> {
    let root = schema();
    let mut at = root;
    for seg in path {
        at = resolve(root, at);
        at = match at.get("properties").and_then(|p| p.get(*seg)) {
            Some(p) => p,
            None => match at.get("additionalProperties") {
                Some(a) if a.is_object() => a,
                _ => return Vec::new(),
            },
        };
    }
    resolve(root, at)
        .get("properties")
        .and_then(Json::as_object)
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let doc = resolve(root, v)
                        .get("description")
                        .or_else(|| v.get("description"))
                        .and_then(Json::as_str)
                        .unwrap_or("");
                    (k.as_str(), doc)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `v`, or what its `$ref` (`#/definitions/node`) points at.
fn resolve<'a>(root: &'a Json, v: &'a Json) -> &'a Json {
    v.get("$ref")
        .and_then(Json::as_str)
        .and_then(|r| r.strip_prefix("#/"))
        .and_then(|p| p.split('/').try_fold(root, |at, seg| at.get(seg)))
        .unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::keys;

    fn names(path: &[&str]) -> Vec<&'static str> {
        keys(path).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn each_table_takes_the_keys_the_schema_gives_it() {
        assert!(names(&["graph"]).contains(&"entry"));
        let node = names(&["nodes", "model"]);
        assert!(node.contains(&"kind") && node.contains(&"next") && node.contains(&"prompt"));
        assert_eq!(
            names(&["nodes", "model", "route"]),
            ["on", "cases", "when", "default"]
        );
        assert!(names(&["state", "goal"]).contains(&"reducer"));
        assert!(names(&["servers", "fs"]).contains(&"command"));
        // Tables whose keys are names.
        assert_eq!(names(&["nodes", "model", "set"]), Vec::<&str>::new());
        assert_eq!(names(&["consts"]), Vec::<&str>::new());
        assert_eq!(names(&["nowhere"]), Vec::<&str>::new());
    }
}
