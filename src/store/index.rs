//! Semantic search of the long-term store, as LangGraph's `store.index` does it: a put
//! embeds the texts at some paths of an item's value (the whole value by default)
//! through an embeddings endpoint ([`Embed`]), the item keeps their vectors, and a
//! search with a `query` ranks the items that fit its filter by the cosine similarity
//! of the query's vector with the closest of theirs.

use super::Item;
use async_trait::async_trait;
use serde_json::{Map, Value as Json};
use std::sync::Arc;

/// An embeddings endpoint: one vector per text, in order.
#[async_trait]
pub trait Embed: Send + Sync {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String>;
}

/// How a store's items are embedded: through `embed`, the texts at `fields` (paths
/// into a value, `$` the whole value) unless a put names its own.
#[derive(Clone)]
pub struct Index {
    pub embed: Arc<dyn Embed>,
    pub fields: Vec<String>,
}

/// What a put embeds (LangGraph's `index`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Fields {
    /// The index's fields.
    #[default]
    Default,
    /// Nothing: the item is found by filters, never ranked (`index: false`).
    None,
    /// These paths instead of the index's.
    These(Vec<String>),
}

impl Index {
    /// The vectors of `value` as `fields` asks, none when nothing is to be embedded.
    pub(crate) async fn vectors(
        &self,
        value: &Map<String, Json>,
        fields: &Fields,
    ) -> Result<Vec<Vec<f32>>, String> {
        let paths = match fields {
            Fields::None => return Ok(Vec::new()),
            Fields::Default => &self.fields,
            Fields::These(paths) => paths,
        };
        let value = Json::Object(value.clone());
        let mut texts = Vec::new();
        for path in paths {
            texts.extend(texts_at(&value, path)?);
        }
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.embed.embed(&texts).await?;
        if vectors.iter().flatten().any(|x| !x.is_finite()) {
            return Err(
                "the embeddings endpoint answered a vector with a number that is not finite".into(),
            );
        }
        if vectors.len() != texts.len() {
            return Err(format!(
                "the embeddings endpoint answered {} vectors for {} texts",
                vectors.len(),
                texts.len()
            ));
        }
        Ok(vectors)
    }

    /// The vector of a search's query.
    pub(crate) async fn query(&self, query: &str) -> Result<Vec<f32>, String> {
        let mut v = self.embed.embed(&[query.to_string()]).await?;
        v.pop()
            .ok_or_else(|| "the embeddings endpoint answered no vector for the query".into())
    }
}

/// Each item with its score: the cosine similarity of `query` with its closest vector
/// (none for an item without vectors); the ranked first, highest first (a tie keeps
/// the items' order), then the others in their order.
pub(crate) fn rank(items: Vec<Item>, query: &[f32]) -> Vec<(Item, Option<f64>)> {
    let mut scored: Vec<(Item, Option<f64>)> = items
        .into_iter()
        .map(|i| {
            let score = i
                .vectors
                .iter()
                .map(|v| cosine(query, v))
                .fold(None, |best: Option<f64>, s| {
                    Some(best.map_or(s, |b| b.max(s)))
                });
            (i, score)
        })
        .collect();
    // Stable: equal scores, and the unranked, keep the order they came in.
    scored.sort_by(|a, b| match (a.1, b.1) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    scored
}

/// Cosine similarity, 0 when either vector is all zeros; vectors of different lengths
/// are compared over the shorter, as LangGraph's in-memory store does.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let (na, nb) = (norm(a), norm(b));
    if na > 0.0 && nb > 0.0 {
        dot / (na * nb)
    } else {
        0.0
    }
}

/// Why one of `paths` is not a path into a value, if one is not: a put's `index`
/// and a server's fields are checked before anything is embedded or written.
pub fn check_paths(paths: &[String]) -> Result<(), String> {
    for p in paths {
        let p = p.trim();
        if p != "$" && !p.is_empty() {
            steps(p)?;
        }
    }
    Ok(())
}

/// The texts at `path` in `value`, as LangGraph's `get_text_at_path` finds them: `$`
/// the whole value; `a.b` a field of a field; `a[0]`, `a[-1]` an element of a list;
/// `a[*]` (or `a.*`) every element of a list or every field of an object;
/// `{a,b.c}` several paths. A path that finds nothing (a missing field, a null) gives
/// no text.
pub(crate) fn texts_at(value: &Json, path: &str) -> Result<Vec<String>, String> {
    let path = path.trim();
    if path == "$" || path.is_empty() {
        return Ok(vec![text_of(value)].into_iter().flatten().collect());
    }
    let steps = steps(path)?;
    let mut found = Vec::new();
    walk(value, &steps, &mut found);
    Ok(found)
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Every,
    /// `{a,b.c}`: each of these paths from here.
    Any(Vec<Vec<Step>>),
}

fn steps(path: &str) -> Result<Vec<Step>, String> {
    let bad = |why: &str| format!("`{path}` is not a path into a value: {why}");
    let mut steps = Vec::new();
    let chars: Vec<char> = path.chars().collect();
    let mut i = 0;
    let mut name = String::new();
    let end_name = |name: &mut String, steps: &mut Vec<Step>| {
        if !name.is_empty() {
            steps.push(if name == "*" {
                Step::Every
            } else {
                Step::Field(std::mem::take(name))
            });
            name.clear();
        }
    };
    while i < chars.len() {
        match chars[i] {
            '.' => end_name(&mut name, &mut steps),
            '[' => {
                end_name(&mut name, &mut steps);
                let close = chars[i..]
                    .iter()
                    .position(|c| *c == ']')
                    .ok_or_else(|| bad("a `[` is not closed"))?;
                let inside: String = chars[i + 1..i + close].iter().collect();
                steps.push(if inside.trim() == "*" {
                    Step::Every
                } else {
                    Step::Index(
                        inside
                            .trim()
                            .parse()
                            .map_err(|_| bad("between `[` and `]` is a number or `*`"))?,
                    )
                });
                i += close;
            }
            '{' => {
                end_name(&mut name, &mut steps);
                let close = chars[i..]
                    .iter()
                    .position(|c| *c == '}')
                    .ok_or_else(|| bad("a `{` is not closed"))?;
                let inside: String = chars[i + 1..i + close].iter().collect();
                let mut any = Vec::new();
                for p in inside.split(',') {
                    any.push(steps_of_part(p.trim(), path)?);
                }
                steps.push(Step::Any(any));
                i += close;
            }
            c => name.push(c),
        }
        i += 1;
    }
    end_name(&mut name, &mut steps);
    Ok(steps)
}

fn steps_of_part(part: &str, whole: &str) -> Result<Vec<Step>, String> {
    if part.is_empty() {
        return Err(format!(
            "`{whole}` is not a path into a value: an empty path in `{{}}`"
        ));
    }
    steps(part)
}

fn walk(value: &Json, steps: &[Step], found: &mut Vec<String>) {
    let Some((step, rest)) = steps.split_first() else {
        found.extend(text_of(value));
        return;
    };
    match (step, value) {
        (Step::Field(f), Json::Object(o)) => {
            if let Some(v) = o.get(f) {
                walk(v, rest, found);
            }
        }
        (Step::Index(i), Json::Array(a)) => {
            let at = if *i < 0 { a.len() as i64 + i } else { *i };
            if let Some(v) = usize::try_from(at).ok().and_then(|at| a.get(at)) {
                walk(v, rest, found);
            }
        }
        (Step::Every, Json::Array(a)) => a.iter().for_each(|v| walk(v, rest, found)),
        (Step::Every, Json::Object(o)) => o.values().for_each(|v| walk(v, rest, found)),
        (Step::Any(paths), v) => {
            for p in paths {
                walk(v, p, found);
            }
            // What follows the braces applies to none: LangGraph's paths end there.
            let _ = rest;
        }
        _ => {}
    }
}

/// A value as the text LangGraph embeds: a string itself, a number or a boolean as
/// Python writes it, an object or a list as Python's `json.dumps(sort_keys=True)`;
/// null nothing.
fn text_of(value: &Json) -> Option<String> {
    match value {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        Json::Bool(b) => Some(if *b { "True" } else { "False" }.into()),
        Json::Number(n) => Some(n.to_string()),
        other => {
            let mut out = String::new();
            dumps(other, &mut out);
            Some(out)
        }
    }
}

/// Python's `json.dumps(v, sort_keys=True, ensure_ascii=False)`: `", "` and `": "`
/// between items, keys sorted.
fn dumps(v: &Json, out: &mut String) {
    match v {
        Json::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Json::String(k.clone()).to_string());
                out.push_str(": ");
                dumps(&o[k], out);
            }
            out.push('}');
        }
        Json::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                dumps(x, out);
            }
            out.push(']');
        }
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The texts LangGraph's server embedded for the same values and paths.
    #[test]
    fn texts_are_those_langgraph_embeds() {
        let v = json!({"text": "aaa", "n": 1, "ok": true, "none": null, "tags": ["aaaa", "cc"],
                       "nested": {"b": "bb", "a": "a", "c": {"x": "é"}},
                       "list": [1, "ab", {"c": "c"}, [2, 3]], "f": 1.5});
        let at = |p: &str| texts_at(&v, p).unwrap();
        assert_eq!(
            at("$"),
            [
                r#"{"f": 1.5, "list": [1, "ab", {"c": "c"}, [2, 3]], "n": 1, "nested": {"a": "a", "b": "bb", "c": {"x": "é"}}, "none": null, "ok": true, "tags": ["aaaa", "cc"], "text": "aaa"}"#
            ]
        );
        assert_eq!(at("text"), ["aaa"]);
        assert_eq!(at("n"), ["1"]);
        assert_eq!(at("f"), ["1.5"]);
        assert_eq!(at("ok"), ["True"]);
        assert_eq!(at("none"), Vec::<String>::new());
        assert_eq!(at("missing"), Vec::<String>::new());
        assert_eq!(at("nested"), [r#"{"a": "a", "b": "bb", "c": {"x": "é"}}"#]);
        assert_eq!(at("nested.c.x"), ["é"]);
        assert_eq!(at("tags[*]"), ["aaaa", "cc"]);
        assert_eq!(at("tags[-1]"), ["cc"]);
        assert_eq!(at("tags[5]"), Vec::<String>::new());
        assert_eq!(at("list[*]"), ["1", "ab", r#"{"c": "c"}"#, "[2, 3]"]);
        assert_eq!(at("list[*].c"), ["c"]);
        assert_eq!(at("nested.*"), ["bb", "a", r#"{"x": "é"}"#]);
        assert_eq!(at("{text,nested.b}"), ["aaa", "bb"]);
        assert!(texts_at(&v, "tags[x]").unwrap_err().contains("`tags[x]`"));
        assert!(texts_at(&v, "tags[0").unwrap_err().contains("not closed"));
    }

    #[test]
    fn cosine_is_langgraphs() {
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert!((cosine(&[3.0, 0.0, 0.0, 3.0], &[4.0, 0.0, 0.0, 4.0]) - 1.0).abs() < 1e-12);
        // LangGraph's: cos([3,0,0,3],[0,0,2,2]) = 0.5 (its capture's query "aaa" against "cc").
        assert!((cosine(&[3.0, 0.0, 0.0, 3.0], &[0.0, 0.0, 2.0, 2.0]) - 0.5).abs() < 1e-12);
    }
}
