//! A case's expectations against what its run did: each difference said once, at the
//! first place the run went another way.

use super::check::Route;
use super::file::ExpectSpec;
use super::run::Actual;
use serde_json::Value as Json;

/// Every way `actual` differs from `expect`, for people: the first divergence of the
/// path and of the routes, the outcome, the response, each state field that differs.
pub(crate) fn compare(expect: Option<&ExpectSpec>, actual: &Actual) -> Vec<String> {
    let mut out = Vec::new();
    let default = ExpectSpec::default();
    let expect = expect.unwrap_or(&default);
    let expected_outcome = expect.outcome.as_deref();
    // Where the script ran short: always a failure, said first; a run that failed of
    // it says no more.
    out.extend(
        actual
            .overruns
            .iter()
            .map(|o| format!("against the script: {o}")),
    );
    let of_script = actual
        .error
        .as_ref()
        .is_some_and(|e| actual.overruns.iter().any(|o| e.contains(o.as_str())));
    if of_script {
        // Said above.
    } else if actual.error.is_some() && expected_outcome != Some("error") {
        out.push(format!(
            "the run failed: {}",
            actual.error.as_deref().unwrap_or("(no message)")
        ));
    } else if let Some(o) = expected_outcome
        && o != actual.outcome
    {
        out.push(format!(
            "outcome: expected `{o}`, got `{}`{}",
            actual.outcome,
            actual
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    if let Some(path) = &expect.path {
        let path: Vec<&str> = path.iter().map(|s| s.get_ref().as_str()).collect();
        let got: Vec<&str> = actual.path.iter().map(String::as_str).collect();
        if let Some(d) = divergence("path", &path, &got) {
            out.push(d);
        }
    }
    if let Some(routes) = &expect.routes {
        let expected: Vec<String> = routes
            .iter()
            .map(|r| {
                Route::parse(r.get_ref()).map_or_else(|| r.get_ref().clone(), |r| r.to_string())
            })
            .collect();
        let got: Vec<String> = actual.routes.iter().map(Route::to_string).collect();
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        let got: Vec<&str> = got.iter().map(String::as_str).collect();
        if let Some(d) = divergence("routes", &expected, &got) {
            out.push(d);
        }
    }
    if let Some(r) = &expect.response
        && actual.response.as_deref() != Some(r.as_str())
    {
        out.push(format!(
            "response: expected {}, got {}",
            Json::String(r.clone()),
            actual
                .response
                .as_ref()
                .map_or_else(|| "none".into(), |s| Json::String(s.clone()).to_string())
        ));
    }
    if let Some(e) = expect.error.as_ref().map(toml::Spanned::get_ref)
        && actual.error.as_deref() != Some(e.as_str())
    {
        out.push(format!(
            "error: expected {}, got {}",
            Json::String(e.clone()),
            actual
                .error
                .as_ref()
                .map_or_else(|| "none".into(), |s| Json::String(s.clone()).to_string())
        ));
    }
    for (field, expected) in &expect.state {
        // TOML has no null: an object's field written nowhere is one the run left null.
        let got = without_nulls(actual.state.get(field.get_ref()).unwrap_or(&Json::Null));
        if &got != expected {
            out.push(format!(
                "state `{}`:\n{}",
                field.get_ref(),
                value_diff(expected, &got)
            ));
        }
    }
    for field in &expect.cleared {
        let got = actual.state.get(field.get_ref()).unwrap_or(&Json::Null);
        if !got.is_null() {
            out.push(format!(
                "state `{}`: expected it cleared (null), got {got}",
                field.get_ref()
            ));
        }
    }
    if let Some(events) = &expect.events {
        let mut at = 0;
        for (i, e) in events.iter().map(toml::Spanned::get_ref).enumerate() {
            match actual.events[at..].iter().position(|a| fits(e, a)) {
                Some(p) => at += p + 1,
                None => {
                    out.push(format!(
                        "events: expected event {} of {}, {e}, {}",
                        i + 1,
                        events.len(),
                        if i == 0 {
                            "and no event of the run matches it".to_string()
                        } else {
                            "and no event after the previous one's match matches it".to_string()
                        }
                    ));
                    break;
                }
            }
        }
    }
    out.extend(actual.unused.iter().cloned());
    out
}

/// `v` with every null left out, of objects and lists alike: what a TOML expectation
/// (which cannot hold one) can say of it, and what `--update` writes.
pub(crate) fn without_nulls(v: &Json) -> Json {
    match v {
        Json::Object(fields) => Json::Object(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(
            items
                .iter()
                .filter(|v| !v.is_null())
                .map(without_nulls)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Where `got` first leaves `expected`: the step, both sides' nodes, and a few steps of
/// context before it.
fn divergence(what: &str, expected: &[&str], got: &[&str]) -> Option<String> {
    let i = expected.iter().zip(got).position(|(e, g)| e != g);
    let i = match i {
        Some(i) => i,
        None if expected.len() == got.len() => return None,
        None => expected.len().min(got.len()),
    };
    let before = &expected[i.saturating_sub(3)..i];
    let lead = if before.is_empty() {
        String::new()
    } else {
        format!(
            " after {}{}",
            if i > 3 { "... " } else { "" },
            before.join(", ")
        )
    };
    let side = |s: &[&str]| match s.get(i) {
        Some(x) => format!("`{x}`"),
        None => "the end".into(),
    };
    Some(format!(
        "{what} differs at step {}{lead}: expected {}, got {}\n  expected: {}\n  actual:   {}",
        i + 1,
        side(expected),
        side(got),
        window(expected, i),
        window(got, i)
    ))
}

/// The steps around `i`, as a short line.
fn window(steps: &[&str], i: usize) -> String {
    let from = i.saturating_sub(3);
    let to = (i + 3).min(steps.len());
    let mut s = String::new();
    if from > 0 {
        s.push_str("... ");
    }
    s.push_str(&steps[from..to].join(", "));
    if to < steps.len() {
        s.push_str(" ...");
    }
    if steps.len() <= i {
        s.push_str(" (end)");
    }
    s
}

/// A value's difference, line by line of its pretty JSON (`-` expected, `+` actual),
/// for values small enough to read; the two values whole otherwise.
fn value_diff(expected: &Json, got: &Json) -> String {
    let e = serde_json::to_string_pretty(expected).unwrap_or_default();
    let g = serde_json::to_string_pretty(got).unwrap_or_default();
    let e: Vec<&str> = e.lines().collect();
    let g: Vec<&str> = g.lines().collect();
    let common_start = e.iter().zip(&g).take_while(|(a, b)| a == b).count();
    let common_end = e[common_start..]
        .iter()
        .rev()
        .zip(g[common_start..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = Vec::new();
    for l in &e[common_start.saturating_sub(2)..common_start] {
        out.push(format!("    {l}"));
    }
    for l in &e[common_start..e.len() - common_end] {
        out.push(format!("  - {l}"));
    }
    for l in &g[common_start..g.len() - common_end] {
        out.push(format!("  + {l}"));
    }
    let tail = e.len() - common_end;
    for l in &e[tail..(tail + 2).min(e.len())] {
        out.push(format!("    {l}"));
    }
    out.join("\n")
}

/// Whether `actual` has every field `expected` names, equal (objects: the fields they
/// name, recursively; anything else: equal).
pub(crate) fn fits(expected: &Json, actual: &Json) -> bool {
    match (expected, actual) {
        (Json::Object(e), Json::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| fits(v, av))),
        (e, a) => e == a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_divergence_is_named_with_its_context() {
        let d = divergence("path", &["a", "b", "c", "d"], &["a", "b", "x", "d"]).unwrap();
        assert_eq!(
            d,
            "path differs at step 3 after a, b: expected `c`, got `x`\n  expected: a, b, c, d\n  actual:   a, b, x, d"
        );
        let d = divergence("path", &["a", "b"], &["a", "b", "c"]).unwrap();
        assert_eq!(
            d,
            "path differs at step 3 after a, b: expected the end, got `c`\n  expected: a, b (end)\n  actual:   a, b, c"
        );
        assert_eq!(divergence("path", &["a"], &["a"]), None);
    }

    #[test]
    fn a_state_difference_shows_the_lines_that_differ() {
        let d = value_diff(
            &json!({"a": 1, "b": [1, 2], "c": 3}),
            &json!({"a": 1, "b": [1, 5], "c": 3}),
        );
        assert_eq!(
            d,
            "      \"b\": [\n        1,\n  -     2\n  +     5\n      ],\n      \"c\": 3"
        );
    }

    #[test]
    fn an_expected_event_fits_on_the_fields_it_names() {
        let actual = json!({"event": "tool_call", "tool": "w", "arguments": {"p": 1, "q": 2}});
        assert!(fits(
            &json!({"event": "tool_call", "arguments": {"p": 1}}),
            &actual
        ));
        assert!(!fits(&json!({"event": "tool_call", "tool": "x"}), &actual));
    }
}
