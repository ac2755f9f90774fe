//! `--update`: a test file's expectations rewritten from its cases' runs, the rest of
//! the file (comments, order, the scripted replies) left as written.

use super::CaseResult;
use serde_json::Value as Json;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

/// `text` with the expectations of every case in `results` made what its run did, and
/// the cases left as they were because their script ran short (a run that failed for
/// want of a scripted reply says nothing of the graph: it is the script to mend).
pub(crate) fn updated(text: &str, results: &[CaseResult]) -> (String, Vec<String>) {
    let mut skipped: Vec<String> = results
        .iter()
        .filter(|r| !r.actual.overruns.is_empty())
        .map(|r| r.name.clone())
        .collect();
    let Ok(mut doc) = text.parse::<DocumentMut>() else {
        // The file was read before it ran, so it parses; nothing to rewrite otherwise.
        return (text.to_string(), skipped);
    };
    let Some(cases) = doc.get_mut("case").and_then(Item::as_array_of_tables_mut) else {
        return (text.to_string(), skipped);
    };
    for case in cases.iter_mut() {
        let name = case.get("name").and_then(Item::as_str).map(str::to_string);
        let Some(result) = results.iter().find(|r| Some(&r.name) == name.as_ref()) else {
            continue;
        };
        if !result.actual.overruns.is_empty() {
            continue;
        }
        if !case.contains_key("expect") {
            let mut t = Table::new();
            t.set_implicit(false);
            case.insert("expect", Item::Table(t));
        }
        let Some(expect) = case.get_mut("expect").and_then(|e| e.as_table_like_mut()) else {
            continue;
        };
        let a = &result.actual;
        set(expect, "outcome", a.outcome.as_str().into());
        set_or_remove(expect, "response", a.response.as_deref());
        set_or_remove(expect, "error", a.error.as_deref());
        set(
            expect,
            "path",
            Value::Array(lines(a.path.iter().map(String::as_str))),
        );
        let routes: Vec<String> = a.routes.iter().map(ToString::to_string).collect();
        set(
            expect,
            "routes",
            Value::Array(lines(routes.iter().map(String::as_str))),
        );
        let mut cleared: Vec<String> = Vec::new();
        if let Some(state) = expect.get_mut("state").and_then(|s| s.as_table_like_mut()) {
            let fields: Vec<String> = state.iter().map(|(k, _)| k.to_string()).collect();
            for f in fields {
                match a.state.get(&f).and_then(value_of) {
                    Some(v) => set(state, &f, one_per_line(v)),
                    // TOML has no null: a field the run left empty moves to `cleared`.
                    None => {
                        state.remove(&f);
                        cleared.push(f);
                    }
                }
            }
        }
        let mut kept: Vec<String> = expect
            .get("cleared")
            .and_then(Item::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        // A field named cleared that the run filled moves to `state`.
        let mut filled = Vec::new();
        kept.retain(|f| match a.state.get(f).and_then(value_of) {
            Some(v) => {
                filled.push((f.clone(), v));
                false
            }
            None => true,
        });
        if !filled.is_empty() {
            if !expect.contains_key("state") {
                expect.insert("state", Item::Value(Value::InlineTable(InlineTable::new())));
            }
            if let Some(state) = expect.get_mut("state").and_then(|s| s.as_table_like_mut()) {
                for (f, v) in filled {
                    state.insert(&f, Item::Value(v));
                }
            }
        }
        kept.extend(cleared);
        if kept.is_empty() {
            expect.remove("cleared");
        } else {
            expect.insert(
                "cleared",
                Item::Value(Value::Array(kept.iter().map(String::as_str).collect())),
            );
        }
        // The expectations in the order a reader follows a run: how it ended, the way
        // it went, then what it left (comments on a key stay with it).
        if let Some(t) = case.get_mut("expect").and_then(Item::as_table_mut) {
            let order = ["outcome", "response", "error", "path", "routes"];
            let mut moved = Vec::new();
            for k in order {
                if let Some(entry) = t.remove_entry(k) {
                    moved.push(entry);
                }
            }
            let rest: Vec<String> = t.iter().map(|(k, _)| k.to_string()).collect();
            for k in &rest {
                if let Some(entry) = t.remove_entry(k) {
                    moved.push(entry);
                }
            }
            for (k, v) in moved {
                t.insert_formatted(&k, v);
            }
        }
    }
    skipped.sort();
    (doc.to_string(), skipped)
}

/// Sets `key` to `value`, keeping the comments around the value it had.
fn set(t: &mut dyn toml_edit::TableLike, key: &str, mut value: Value) {
    if let Some(old) = t.get(key).and_then(Item::as_value) {
        *value.decor_mut() = old.decor().clone();
    }
    t.insert(key, Item::Value(value));
}

fn set_or_remove(t: &mut dyn toml_edit::TableLike, key: &str, value: Option<&str>) {
    match value {
        Some(v) => set(t, key, v.into()),
        None => {
            t.remove(key);
        }
    }
}

/// A long list (a conversation's messages) with an item to a line, as a person would
/// write it; a short one as it is.
fn one_per_line(v: Value) -> Value {
    match v {
        Value::Array(mut a) if a.len() > 1 && a.to_string().len() > 80 => {
            for item in a.iter_mut() {
                item.decor_mut().set_prefix("\n  ");
            }
            a.set_trailing("\n");
            a.set_trailing_comma(true);
            Value::Array(a)
        }
        other => other,
    }
}

/// An array of strings, one to a line.
fn lines<'a>(items: impl Iterator<Item = &'a str>) -> Array {
    let mut a: Array = items.collect();
    for v in a.iter_mut() {
        v.decor_mut().set_prefix("\n  ");
    }
    a.set_trailing("\n");
    a.set_trailing_comma(true);
    a
}

/// A JSON value as TOML (none for null, which TOML cannot say; an object's null
/// fields are left out).
fn value_of(j: &Json) -> Option<Value> {
    Some(match j {
        Json::Null => return None,
        Json::Bool(b) => (*b).into(),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        Json::String(s) => s.as_str().into(),
        Json::Array(items) => Value::Array(items.iter().filter_map(value_of).collect()),
        Json::Object(fields) => {
            let mut t = InlineTable::new();
            for (k, v) in fields {
                if let Some(v) = value_of(v) {
                    t.insert(k, v);
                }
            }
            Value::InlineTable(t)
        }
    })
}
