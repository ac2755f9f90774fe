//! Expressions and templates too deep for the parser's stack, and evaluations that
//! would never end or build values larger than a field holds.

use super::json_of;
use crate::util::switchyard;
use serde_json::json;
use std::path::Path;
use switchyard::{Sources, validate_str};

/// Graph text setting `b` to `expr`, and answering with `template`.
fn graph_with(expr: &str, template: &str) -> String {
    format!(
        r#"[graph]
name = "g"
entry = "a"

[state.b]
type = "json?"

[nodes.a]
kind = "set"
set = {{ b = {expr:?} }}
next = "done"

[nodes.done]
kind = "finalize"
outcome = "done"
response = {template:?}
"#
    )
}

/// The diagnostics of validating `text`, as `code: message (label)`, checked on a
/// thread with the stack a test thread has (2 MiB), smaller than a CLI's main thread.
fn diagnose(text: String) -> Vec<String> {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let mut sources = Sources::new();
            let v = validate_str(Path::new("g.toml"), &text, &mut sources);
            v.diagnostics
                .iter()
                .map(|d| {
                    let j = serde_json::to_value(d.to_json(&sources)).unwrap();
                    format!(
                        "{}: {} ({})",
                        j["code"].as_str().unwrap_or(""),
                        j["message"].as_str().unwrap_or(""),
                        j["label"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap()
        .join()
        .expect("the checker does not crash")
}

#[test]
fn expressions_nested_tens_of_thousands_deep_are_diagnosed_not_a_stack_overflow() {
    let n = 20_000;
    let cases = [
        ("not", format!("{}true", "not ".repeat(n))),
        ("+", format!("1{}", " + 1".repeat(n))),
        ("~", format!("'a'{}", " ~ 'a'".repeat(n))),
        ("filters", format!("1{}", " | abs".repeat(n))),
        ("attributes", format!("run{}", ".a".repeat(n))),
        ("if/else", format!("{}1", "1 if true else ".repeat(n))),
        (
            "parentheses",
            format!("{}1{}", "(".repeat(n), ")".repeat(n)),
        ),
        ("lists", format!("{}1{}", "[".repeat(n), "]".repeat(n))),
        ("unary minus", format!("{}1", "-".repeat(n))),
    ];
    for (what, expr) in cases {
        let diags = diagnose(graph_with(&expr, "ok"));
        assert_eq!(diags.len(), 1, "{what}: {diags:?}");
        assert!(
            diags[0].starts_with(
                "too-complex: this expression is too complex to check (the expression has "
            ),
            "{what}: {diags:?}"
        );
    }
}

#[test]
fn templates_nested_tens_of_thousands_deep_are_diagnosed_not_a_stack_overflow() {
    let n = 20_000;
    let cases = [
        (
            "if blocks",
            format!("{}x{}", "{% if true %}".repeat(n), "{% endif %}".repeat(n)),
        ),
        (
            "for blocks",
            format!(
                "{}x{}",
                "{% for i in [1] %}".repeat(n),
                "{% endfor %}".repeat(n)
            ),
        ),
        ("a deep tag", format!("{{{{ {}1 }}}}", "not ".repeat(n))),
        ("filters", format!("{{{{ 1{} }}}}", " | abs".repeat(n))),
    ];
    for (what, template) in cases {
        let diags = diagnose(graph_with("1", &template));
        assert_eq!(diags.len(), 1, "{what}: {diags:?}");
        assert!(
            diags[0].starts_with("too-complex: this template is too complex to check ("),
            "{what}: {diags:?}"
        );
    }
}

#[test]
fn sources_at_the_limits_are_parsed_without_crashing() {
    // Just under the limits, each goes through minijinja's parser on a 2 MiB stack.
    let n = switchyard::spec::MAX_OPERATORS;
    for expr in [
        format!("{}true", "not ".repeat(n)),
        format!("1{}", " + 1".repeat(n)),
        format!("1{}", " | abs".repeat(n)),
        format!("{}1{}", "(".repeat(n), ")".repeat(n)),
        format!("{}1", "-".repeat(n)),
        format!("run{}", ".a".repeat(n)),
    ] {
        let _ = diagnose(graph_with(&expr, "ok"));
    }
    let d = switchyard::spec::MAX_BLOCK_DEPTH;
    let _ = diagnose(graph_with(
        "1",
        &format!("{}x{}", "{% if true %}".repeat(d), "{% endif %}".repeat(d)),
    ));
}

#[test]
fn validate_render_and_run_end_a_deep_expression_with_a_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.toml");
    std::fs::write(
        &file,
        graph_with(&format!("{}true", "not ".repeat(30_000)), "ok"),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let validate = switchyard(&["validate", path, "--format", "json"])
        .run()
        .code(3);
    let diags = json_of(&validate.stdout);
    let d = &diags[0]["diagnostics"][0];
    assert_eq!(d["code"], json!("too-complex"));
    assert_eq!(
        d["label"],
        json!("the expression has 30000 operators; at most 1000 are taken")
    );
    // The span is the expression's string: line 10, from after `set = { b = `.
    assert_eq!(
        (&d["line"], &d["column"], &d["end_line"]),
        (&json!(10), &json!(13), &json!(10))
    );
    let render = switchyard(&["render", path]).run().code(0);
    assert!(
        render.stdout.starts_with("digraph \"g\" {"),
        "{}",
        render.stdout
    );
    assert!(render.stderr.contains("has 1 problem"), "{}", render.stderr);
    let run = switchyard(&["run", path, "--store", "memory"])
        .run()
        .code(3);
    // The source line is cut, its label kept.
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines[0], "error: this expression is too complex to check");
    assert!(
        lines[3].starts_with("10 | set = { b = \"not not "),
        "{}",
        lines[3]
    );
    assert!(lines[3].ends_with(" ..."), "{}", lines[3]);
    assert!(
        lines[4].ends_with("^^^ ... the expression has 30000 operators; at most 1000 are taken"),
        "{}",
        lines[4]
    );
    assert!(run.stderr.len() < 1000, "{}", run.stderr.len());
}

#[test]
fn a_prompt_file_nested_too_deep_is_diagnosed_in_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("deep.j2"),
        format!(
            "{}x{}",
            "{% if true %}".repeat(20_000),
            "{% endif %}".repeat(20_000)
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("object.json"),
        r#"{ "type": "object", "properties": {}, "additionalProperties": false }"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("g.toml"),
        r#"[graph]
name = "g"
entry = "think"

[llm]
model = "m"

[state.reply]
type = "json?"

[nodes.think]
kind = "llm_structured"
prompt = "deep.j2"
schema = "object.json"
output = "reply"
next = "END"
"#,
    )
    .unwrap();
    let out = switchyard(&["validate", dir.path().join("g.toml").to_str().unwrap()])
        .run()
        .code(3);
    let prompt = dir.path().join("deep.j2");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines[..2],
        [
            format!(
                "error: prompt `{}` is too complex to check",
                prompt.display()
            ),
            format!("  --> {}:1:1", prompt.display()),
        ],
        "{}",
        &out.stderr[..out.stderr.len().min(2000)]
    );
    assert!(
        lines[4].ends_with("^ the template's blocks nest more than 100 deep"),
        "{}",
        lines[4]
    );
    assert_eq!(lines[6], "  = note: named by `deep.j2` in the graph");
}

/// The last line `switchyard run FIXTURE` writes to stderr, failing.
fn failure_of(fixture: &str) -> String {
    let path = format!("tests/fixtures/hardening/{fixture}.toml");
    let out = switchyard(&["run", &path, "--store", "memory"])
        .run()
        .code(1);
    out.stderr.lines().last().unwrap().to_string()
}

#[test]
fn a_template_that_never_ends_runs_out_of_fuel() {
    assert_eq!(
        failure_of("fuel"),
        "error: node `done` failed: response: it did more work than one evaluation may (20000000 instructions); a loop this long belongs in a tool"
    );
}

#[test]
fn an_expression_that_builds_a_huge_string_is_bounded() {
    assert_eq!(
        failure_of("huge_string"),
        "error: node `a` failed: field `t` takes values of at most 16 MiB, and the value written is larger"
    );
}
