use super::*;
use lsp_types::{CompletionItemKind, HoverContents, SymbolKind};

const DEMO: &str = r#"[graph]
name = "demo"
entry = "plan"

[consts]
LIMIT = 3

[state.count]
type = "int"
reducer = "add"
description = "How many steps ran."

[state.answer]
type = "string?"

[nodes.plan]
kind = "set"
description = "Count a step."
set = { count = "1" }
next = "check"

[nodes.check]
kind = "set"
next = "done"

[nodes.check.set]
answer = "'n=' ~ (count | string) if count < LIMIT else none"

[nodes.done]
kind = "finalize"
outcome = "done"
response = "{{ answer | upper }}"
"#;

fn demo() -> Analysis {
    Analysis::for_path(Path::new("/nowhere/demo.toml"), DEMO)
}

/// The position of the `^` in `marked`, a piece of `text` with a `^` added.
#[track_caller]
fn at(text: &str, marked: &str) -> Position {
    let cursor = marked.find('^').unwrap();
    let plain = marked.replacen('^', "", 1);
    let start = text
        .find(&plain)
        .unwrap_or_else(|| panic!("`{plain}` is not in the text"));
    LineIndex::new(text).position(start + cursor)
}

#[track_caller]
fn range_of(text: &str, marked: &str, len: usize) -> Range {
    let start = at(text, marked);
    Range::new(
        start,
        Position::new(start.line, start.character + len as u32),
    )
}

fn hover_text(a: &Analysis, pos: Position) -> String {
    match a.hover(pos).map(|h| h.contents) {
        Some(HoverContents::Markup(m)) => m.value,
        other => panic!("no markdown hover: {other:?}"),
    }
}

#[test]
fn a_valid_graph_has_no_diagnostics() {
    let d = demo().diagnostics();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].0.as_str(), "file:///nowhere/demo.toml");
    assert_eq!(d[0].1, Vec::new());
}

#[test]
fn diagnostics_carry_code_range_severity_and_help() {
    let text = DEMO.replace("next = \"done\"", "next = \"dnoe\"");
    let d = Analysis::for_path(Path::new("/nowhere/demo.toml"), &text).diagnostics();
    let first = &d[0].1[0];
    assert_eq!(first.range, range_of(&text, "next = ^\"dnoe\"", 6));
    assert_eq!(first.severity, Some(DiagnosticSeverity::ERROR));
    assert_eq!(
        first.code,
        Some(NumberOrString::String("unknown-node".into()))
    );
    assert_eq!(
        first.message,
        "unknown node `dnoe`\nno node has this name\nhelp: did you mean `done`?"
    );
    assert_eq!(
        d[0].1[1].code,
        Some(NumberOrString::String("unreachable".into()))
    );
}

#[test]
fn text_that_is_not_toml_gets_one_diagnostic_and_no_answers() {
    let text = "[graph]\nname = \"demo\nentry = \"plan\"\n";
    let a = Analysis::for_path(Path::new("/nowhere/demo.toml"), text);
    let d = a.diagnostics();
    assert_eq!(d[0].1.len(), 1);
    let syntax = &d[0].1[0];
    assert_eq!(
        syntax.code,
        Some(NumberOrString::String("toml-syntax".into()))
    );
    assert_eq!(syntax.range.start.line, 1);
    assert!(
        syntax.message.contains("invalid TOML"),
        "{}",
        syntax.message
    );
    assert_eq!(a.hover(Position::new(1, 9)), None);
    assert_eq!(a.definition(Position::new(2, 10)), None);
    assert!(a.symbols().is_empty());
}

#[test]
fn a_toml_file_that_is_no_graph_gets_no_diagnostics() {
    let a = Analysis::for_path(
        Path::new("/nowhere/Cargo.toml"),
        "[package]\nname = \"x\"\n",
    );
    assert_eq!(a.diagnostics(), vec![(a.uri().clone(), Vec::new())]);
}

/// A graph's test file (`X.test.toml`) gets the test checks' diagnostics, against the
/// graph beside it, as `switchyard validate X.test.toml` prints them.
#[test]
fn a_test_file_is_checked_against_its_graph() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testing/triage.test.toml");
    let text = "[[case]]\nname = \"a\"\n[[case.reply]]\nnode = \"clasify\"\njson = {}\n";
    let a = Analysis::for_path(&path, text);
    let d = a.diagnostics();
    assert_eq!(d.len(), 1);
    let messages: Vec<(&str, u32)> = d[0]
        .1
        .iter()
        .map(|d| (d.message.as_str(), d.range.start.line))
        .collect();
    assert_eq!(
        messages,
        [(
            "the graph has no node `clasify`\nno such node\nhelp: did you mean `classify`?",
            3
        )]
    );
    // A test file that does not parse: one diagnostic, no crash.
    let a = Analysis::for_path(&path, "[[case]\n");
    assert_eq!(a.diagnostics()[0].1.len(), 1);
    assert_eq!(a.hover(Position::new(0, 2)), None);
}

/// An `mcp_call`'s `tool` completes with its server's tools, from the listing
/// `switchyard tools --format json` wrote beside the graph (`NAME.tools.json`).
#[test]
fn a_tool_completes_from_the_listing_beside_the_graph() {
    let graph = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/tool_agent.toml");
    let text = std::fs::read_to_string(&graph)
        .unwrap()
        .replace("tool = \"{{ call.tool }}\"", "tool = \"read_\"");
    let a = Analysis::for_path(&graph, &text);
    let labels: Vec<String> = a
        .completion(at(&text, "tool = \"read_^"))
        .into_iter()
        .map(|i| i.label)
        .collect();
    assert!(labels.contains(&"read_text_file".to_string()), "{labels:?}");
    assert!(labels.contains(&"write_file".to_string()), "{labels:?}");
    // Without a listing beside the graph, nothing is offered.
    let a = Analysis::for_path(Path::new("/nowhere/tool_agent.toml"), &text);
    assert_eq!(a.completion(at(&text, "tool = \"read_^")), Vec::new());
}

#[test]
fn hover_names_nodes_fields_constants_kinds_and_filters() {
    let a = demo();
    assert_eq!(
        hover_text(&a, at(DEMO, "next = \"ch^eck\"")),
        "(node) `check`: `set`"
    );
    assert_eq!(
        hover_text(&a, at(DEMO, "entry = \"p^lan\"")),
        "(node) `plan`: `set`\n\nCount a step."
    );
    assert_eq!(
        hover_text(&a, at(DEMO, "if c^ount < LIMIT")),
        "(state field) `count`: `int`, reducer `add`\n\nHow many steps ran."
    );
    assert_eq!(
        hover_text(&a, at(DEMO, "< LI^MIT")),
        "(constant) `LIMIT`: `int` = `3`"
    );
    assert_eq!(
        hover_text(&a, at(DEMO, "answer | up^per")),
        "(filter) `upper`\n\nThe string in upper case."
    );
    assert!(
        hover_text(&a, at(DEMO, "kind = \"fin^alize\""))
            .starts_with("(node kind) `finalize`\n\nEnds the run")
    );
    let h = a.hover(at(DEMO, "next = \"ch^eck\"")).unwrap();
    assert_eq!(h.range, Some(range_of(DEMO, "next = \"^check\"", 5)));
    assert_eq!(a.hover(at(DEMO, "description = \"Count ^a step")), None);
}

#[test]
fn definition_goes_to_the_declaration() {
    let a = demo();
    let go = |marked| a.definition(at(DEMO, marked)).map(|l| l.range);
    assert_eq!(
        go("next = \"ch^eck\""),
        Some(range_of(DEMO, "[nodes.^check]", 5))
    );
    assert_eq!(
        go("[nodes.ch^eck.set]"),
        Some(range_of(DEMO, "[nodes.^check]", 5))
    );
    assert_eq!(
        go("entry = \"^plan\""),
        Some(range_of(DEMO, "[nodes.^plan]", 4))
    );
    assert_eq!(
        go("(co^unt | string)"),
        Some(range_of(DEMO, "[state.^count]", 5))
    );
    assert_eq!(go("{{ ans^wer"), Some(range_of(DEMO, "[state.^answer]", 6)));
    assert_eq!(
        go("set = { co^unt = "),
        Some(range_of(DEMO, "[state.^count]", 5))
    );
    assert_eq!(go("< LIM^IT"), Some(range_of(DEMO, "^LIMIT = 3", 5)));
    assert_eq!(go("kind = \"fin^alize\""), None);
    assert_eq!(
        a.definition(at(DEMO, "next = \"ch^eck\""))
            .unwrap()
            .uri
            .as_str(),
        "file:///nowhere/demo.toml"
    );
}

#[test]
fn references_list_every_use() {
    let a = demo();
    let refs = a.references(at(DEMO, "[state.co^unt]"), true);
    let lines: Vec<u32> = refs.iter().map(|l| l.range.start.line).collect();
    // The declaration, `set = { count = ...}`, and the two reads in `answer`.
    assert_eq!(lines, [7, 18, 26, 26]);
    assert_eq!(a.references(at(DEMO, "[state.co^unt]"), false).len(), 3);
}

#[test]
fn rename_changes_every_place_a_name_is_written() {
    let a = demo();
    let edit = a.rename(at(DEMO, "next = \"ch^eck\""), "verify").unwrap();
    let edits = &edit.changes.unwrap()[a.uri()];
    let ranges: Vec<Range> = edits.iter().map(|e| e.range).collect();
    assert_eq!(
        ranges,
        [
            range_of(DEMO, "next = \"^check\"", 5),
            range_of(DEMO, "[nodes.^check]", 5),
            range_of(DEMO, "[nodes.^check.set]", 5),
        ]
    );
    assert!(edits.iter().all(|e| e.new_text == "verify"));

    let edit = a.rename(at(DEMO, "if co^unt"), "steps").unwrap();
    assert_eq!(edit.changes.unwrap()[a.uri()].len(), 4);
    assert_eq!(
        a.prepare_rename(at(DEMO, "< LIM^IT")),
        Some(range_of(DEMO, "< ^LIMIT", 5))
    );
    assert_eq!(a.prepare_rename(at(DEMO, "kind = \"fin^alize\"")), None);
    assert_eq!(
        a.rename(at(DEMO, "if co^unt"), "answer"),
        Err(RenameError::Taken("answer".into()))
    );
    assert_eq!(
        a.rename(at(DEMO, "if co^unt"), "two words"),
        Err(RenameError::BadName("two words".into()))
    );
    assert_eq!(
        a.rename(at(DEMO, "next = \"ch^eck\""), "END"),
        Err(RenameError::Reserved("END".into()))
    );
}

#[test]
fn symbols_are_the_nodes_and_fields_in_file_order() {
    let s = demo().symbols();
    let found: Vec<(&str, SymbolKind, &str)> = s
        .iter()
        .map(|s| (s.name.as_str(), s.kind, s.detail.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        found,
        [
            ("LIMIT", SymbolKind::CONSTANT, "int"),
            ("count", SymbolKind::FIELD, "int"),
            ("answer", SymbolKind::FIELD, "string?"),
            ("plan", SymbolKind::FUNCTION, "set"),
            ("check", SymbolKind::FUNCTION, "set"),
            ("done", SymbolKind::FUNCTION, "finalize"),
        ]
    );
    // `check` covers its `.set` table too, up to `[nodes.done]`.
    let check = &s[4];
    assert_eq!(check.range.start, at(DEMO, "^[nodes.check]"));
    assert_eq!(check.range.end, at(DEMO, "^[nodes.done]"));
}

#[test]
fn completion_offers_what_the_place_takes() {
    let labels = |text: &str, marked: &str| -> Vec<String> {
        let a = Analysis::for_path(Path::new("/nowhere/demo.toml"), text);
        a.completion(at(text, marked))
            .into_iter()
            .map(|i| i.label)
            .collect()
    };
    // Half typed, the file is no TOML: the names come from the headers.
    let typing = DEMO.replace("next = \"done\"", "next = \"d");
    assert_eq!(
        labels(&typing, "next = \"d^"),
        ["plan", "check", "done", "END"]
    );
    let kinds = labels(DEMO, "kind = \"^set\"\ndescription");
    assert_eq!(kinds.len(), 9);
    assert!(kinds.contains(&"llm_structured".to_string()));
    assert_eq!(
        labels(DEMO, "if count < ^LIMIT"),
        ["count", "answer", "LIMIT", "run"]
    );
    assert!(labels(DEMO, "(count | ^string)").contains(&"fromjson".to_string()));
    assert_eq!(
        labels(DEMO, "description = \"Count a ^step"),
        Vec::<String>::new()
    );
    // A key at the start of a line: those the table takes, less those written.
    let typing = DEMO.replace("[nodes.done]\n", "[nodes.done]\non_\n");
    let keys = labels(&typing, "[nodes.done]\non_^");
    assert!(keys.contains(&"on_error".to_string()), "{keys:?}");
    assert!(keys.contains(&"prompt".to_string()), "{keys:?}");
    assert!(!keys.contains(&"kind".to_string()), "{keys:?}");
    let a = demo();
    let items = a.completion(at(DEMO, "if count < ^LIMIT"));
    assert_eq!(items[0].kind, Some(CompletionItemKind::FIELD));
    assert_eq!(items[2].kind, Some(CompletionItemKind::CONSTANT));
    assert_eq!(items[0].detail.as_deref(), Some("int"));
}

#[test]
fn did_you_mean_becomes_a_quick_fix() {
    let text = DEMO.replace("next = \"done\"", "next = \"dnoe\"");
    let a = Analysis::for_path(Path::new("/nowhere/demo.toml"), &text);
    let actions = a.code_actions(range_of(&text, "next = \"dn^oe\"", 0));
    assert_eq!(actions.len(), 1);
    let fix = &actions[0];
    assert_eq!(fix.title, "Replace `dnoe` with `done`");
    assert_eq!(fix.kind, Some(CodeActionKind::QUICKFIX));
    let edits = &fix.edit.as_ref().unwrap().changes.as_ref().unwrap()[a.uri()];
    assert_eq!(
        edits,
        &[TextEdit::new(
            range_of(&text, "next = \"^dnoe\"", 4),
            "done".into()
        )]
    );
    // Nowhere near it: nothing.
    assert!(a.code_actions(range_of(&text, "^[graph]", 0)).is_empty());
}

use lsp_types::CodeActionKind;

const ASK: &str = r#"[graph]
name = "ask"
entry = "ask"

[llm]
model = "gpt-4o-mini"

[state.topic]
type = "string"

[state.reply]
type = "object?"

[nodes.ask]
kind = "llm_structured"
prompt = "prompts/ask.j2"
schema = "schemas/out.json"
output = "reply"
next = "END"
"#;

/// A graph with its prompt and schema files in a directory of its own.
fn ask_dir(prompt: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::create_dir_all(dir.path().join("schemas")).unwrap();
    std::fs::write(dir.path().join("prompts/ask.j2"), prompt).unwrap();
    std::fs::write(
        dir.path().join("schemas/out.json"),
        r#"{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}"#,
    )
    .unwrap();
    dir
}

#[test]
fn problems_in_prompt_files_are_published_there_and_shown_at_the_path() {
    let dir = ask_dir("Say {{ topic | upper }} and {{ nope }}\n");
    let a = Analysis::for_path(&dir.path().join("ask.toml"), ASK);
    let d = a.diagnostics();
    assert_eq!(d.len(), 2, "{d:#?}");
    let prompt = Url::from_file_path(dir.path().join("prompts/ask.j2")).unwrap();
    assert_eq!(d[1].0, prompt);
    let there = &d[1].1[0];
    assert_eq!(
        there.range,
        Range::new(Position::new(0, 31), Position::new(0, 35))
    );
    assert_eq!(
        there.code,
        Some(NumberOrString::String("unknown-variable".into()))
    );
    let here = &d[0].1[0];
    assert_eq!(
        here.range,
        range_of(ASK, "prompt = \"^prompts/ask.j2\"", 14)
    );
    assert!(
        here.message
            .starts_with("in `prompts/ask.j2`: `nope` is not a state field")
    );
    let related = &here.related_information.as_ref().unwrap()[0];
    assert_eq!(related.location, Location::new(prompt, there.range));
}

#[test]
fn a_path_leads_to_its_file_and_a_field_rename_reaches_the_prompts() {
    let dir = ask_dir("Say {{ topic | upper }}, {{ topic }}\n");
    let a = Analysis::for_path(&dir.path().join("ask.toml"), ASK);
    assert_eq!(a.diagnostics()[0].1, Vec::new());
    let prompt = Url::from_file_path(dir.path().join("prompts/ask.j2")).unwrap();
    let def = a.definition(at(ASK, "prompts/a^sk.j2")).unwrap();
    assert_eq!(def, Location::new(prompt.clone(), Range::default()));
    assert!(hover_text(&a, at(ASK, "schemas/o^ut.json")).starts_with("(file) `"));
    let edit = a.rename(at(ASK, "[state.to^pic]"), "subject").unwrap();
    let changes = edit.changes.unwrap();
    let in_prompt: Vec<u32> = changes[&prompt]
        .iter()
        .map(|e| e.range.start.character)
        .collect();
    assert_eq!(in_prompt, [7, 28]);
}

#[test]
fn no_question_panics_on_any_prefix_of_a_graph() {
    // Every prefix of a graph (most of them no TOML, some cut inside a string), asked
    // everything at every few positions, with a multi-byte character in the way.
    let text = DEMO.replace("Count a step.", "Count a step ✓ é.");
    let cuts = (0..=text.len())
        .filter(|i| text.is_char_boundary(*i))
        .step_by(5);
    for cut in cuts {
        let part = &text[..cut];
        let a = Analysis::for_path(Path::new("/nowhere/demo.toml"), part);
        let _ = a.diagnostics();
        let _ = a.symbols();
        let lines = part.lines().count() as u32 + 1;
        for line in 0..lines {
            for character in [0, 3, 8, 12, 40, 200] {
                let pos = Position::new(line, character);
                let _ = a.hover(pos);
                let _ = a.definition(pos);
                let _ = a.completion(pos);
                let _ = a.references(pos, true);
                let _ = a.prepare_rename(pos);
                let _ = a.rename(pos, "x");
                let _ = a.code_actions(Range::new(pos, pos));
            }
        }
    }
}

#[test]
fn no_question_panics_at_any_position_among_multibyte_characters() {
    let text = DEMO
        .replace("'n='", "'n=é✓' ~ é")
        .replace("Count a step.", "Count ✓ é step.")
        .replace("[state.answer]", "[state.answer]\n# ✓é = \"é|é\"");
    let a = Analysis::for_path(Path::new("/nowhere/demo.toml"), &text);
    let lines = LineIndex::new(&text);
    for (offset, _) in text.char_indices() {
        let pos = lines.position(offset);
        let _ = a.hover(pos);
        let _ = a.definition(pos);
        let _ = a.completion(pos);
        let _ = a.prepare_rename(pos);
        let _ = a.code_actions(Range::new(pos, pos));
        // Past the end of the line, in UTF-16 units.
        let _ = a.completion(Position::new(pos.line, pos.character + 1));
    }
}
