//! `switchyard test`: graph test files run offline, their failures, diagnostics,
//! `--update`, route coverage and the JUnit report (read by junitparser, as CI tools
//! read it).

use crate::util::{root, switchyard};

/// Output with each case's time (`(1.3 ms)`) made `(T ms)`: the one part that varies.
fn timeless(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for line in s.lines() {
        match (line.rfind(" ("), line.ends_with(" ms)")) {
            (Some(i), true) if line[i + 2..line.len() - 4].parse::<f64>().is_ok() => {
                out.push_str(&line[..i]);
                out.push_str(" (T ms)");
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[test]
fn every_case_of_every_graph_in_graphs_passes() {
    let out = switchyard(&["test", "graphs"]).run().code(0);
    assert_eq!(out.stderr, "");
    let stdout = timeless(&out.stdout);
    assert!(!stdout.contains("FAIL"), "{stdout}");
    // Every seed graph has tests of its own.
    for seed in [
        "tool_agent",
        "confirm_execute",
        "reason_act_observe",
        "browser_agent",
        "screen_explorer",
    ] {
        assert!(
            stdout.contains(&format!("graphs/{seed}.test.toml\n")),
            "{seed} has no tests:\n{stdout}"
        );
    }
    let last = stdout.lines().last().unwrap();
    assert!(last.ends_with(" passed, 0 failed"), "{last}");
}

#[test]
fn a_passing_file_reports_each_case_and_the_coverage() {
    let out = switchyard(&["test", "tests/fixtures/testing/triage.toml", "--coverage"])
        .run()
        .code(0);
    assert_eq!(out.stderr, "");
    assert_eq!(
        timeless(&out.stdout),
        "tests/fixtures/testing/triage.test.toml
  ok   bug_filed (T ms)
  ok   bug_declined (T ms)
  ok   question (T ms)
  ok   waits (T ms)
coverage of tests/fixtures/testing/triage.toml by 4 cases:
  nodes  6 of 6
  routes 5 of 6; never taken:
    classify -> drop [spam]
4 passed, 0 failed
"
    );
}

#[test]
fn a_failing_case_shows_where_the_run_went_another_way() {
    let out = switchyard(&["test", "tests/fixtures/testing/diverges.test.toml"])
        .run()
        .code(1);
    assert_eq!(out.stderr, "");
    insta::assert_snapshot!("testing_diverges", timeless(&out.stdout));
    // One case alone.
    let out = switchyard(&[
        "test",
        "tests/fixtures/testing/diverges.test.toml",
        "--case",
        "no_reply",
    ])
    .run()
    .code(1);
    assert_eq!(
        timeless(&out.stdout),
        "tests/fixtures/testing/diverges.test.toml
  FAIL no_reply (T ms)
    against the script: node `classify` asked the model, and the case scripts no reply for it (add a `[[case.reply]]` with `node = \"classify\"`)
0 passed, 1 failed
"
    );
}

#[test]
fn a_test_file_is_checked_against_its_graph_before_anything_runs() {
    let out = switchyard(&["test", "tests/fixtures/testing/mistakes.test.toml"])
        .run()
        .code(3);
    assert_eq!(out.stdout, "0 passed, 0 failed\n");
    insta::assert_snapshot!("testing_mistakes", out.stderr);
    // `validate` checks a test file the same way.
    let v = switchyard(&["validate", "tests/fixtures/testing/mistakes.test.toml"])
        .run()
        .code(3);
    assert_eq!(v.stderr, out.stderr);
    let v = switchyard(&[
        "validate",
        "tests/fixtures/testing/triage.test.toml",
        "--format",
        "json",
    ])
    .run()
    .code(0);
    let report: serde_json::Value = serde_json::from_str(&v.stdout).unwrap();
    assert_eq!(
        report,
        serde_json::json!([{
            "file": "tests/fixtures/testing/triage.test.toml",
            "valid": true,
            "diagnostics": [],
        }])
    );
}

#[test]
fn bad_input_is_a_clear_error_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("not_toml.test.toml", "[[case]\nname = 1"),
        ("wrong_type.test.toml", "[[case]]\nname = 3\n"),
        (
            "unknown_key.test.toml",
            "[[case]]\nname = \"a\"\ninputs = {}\n",
        ),
        (
            "no_graph.test.toml",
            "graph = \"nowhere.toml\"\n[[case]]\nname = \"a\"\n",
        ),
    ];
    let mut shown = String::new();
    for (name, text) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = switchyard(&["test", path.to_str().unwrap()]).run().code(3);
        shown.push_str(&out.stderr.replace(&dir.path().display().to_string(), "DIR"));
    }
    insta::assert_snapshot!("testing_bad_input", shown);
    let out = switchyard(&[
        "test",
        "tests/fixtures/testing/triage.toml",
        "--case",
        "nope",
    ])
    .run()
    .code(2);
    assert_eq!(out.stderr, "error: no case is named `nope`\n");
    let out = switchyard(&["test", "tests/fixtures/render/showcase_valid.toml"])
        .run()
        .code(2);
    assert_eq!(
        out.stderr,
        "error: `tests/fixtures/render/showcase_valid.toml` has no tests beside it (`tests/fixtures/render/showcase_valid.test.toml`)\n"
    );
}

#[test]
fn update_rewrites_the_expectations_from_the_runs_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = root().join("tests/fixtures/testing");
    let text = std::fs::read_to_string(fixture.join("diverges.test.toml"))
        .unwrap()
        .replace(
            "graph = \"triage.toml\"",
            &format!("graph = \"{}\"", fixture.join("triage.toml").display()),
        );
    let path = dir.path().join("diverges.test.toml");
    std::fs::write(&path, &text).unwrap();
    let p = path.to_str().unwrap();
    // Two cases cannot be rewritten (below) and still fail: exit 1.
    let out = switchyard(&["test", p, "--update"]).run().code(1);
    assert!(
        out.stdout
            .ends_with("0 passed, 4 failed (before the update)\n"),
        "{}",
        out.stdout
    );
    let updated = std::fs::read_to_string(&path).unwrap();
    insta::assert_snapshot!(
        "testing_updated",
        updated.replace(&fixture.display().to_string(), "FIXTURES")
    );
    // Each case now expects what its run did, except those whose run went against
    // their script (a reply missing, a call's arguments not the script's): the script
    // is to mend, so they are not rewritten and still fail; the events a case names and
    // the scripted parts a run leaves unused are the author's to mend too.
    assert!(
        out.stdout.contains("  not updated: no_reply (its run went against its script: mend the script first)\n  not updated: wrong_arguments (its run went against its script: mend the script first)\n"),
        "{}",
        out.stdout
    );
    let out = switchyard(&["test", p]).run().code(1);
    assert_eq!(
        timeless(&out.stdout).replace(p, "FILE"),
        "FILE
  FAIL wrong_way (T ms)
    events: expected event 1 of 1, {\"event\":\"tool_call\",\"tool\":\"create_issue\"}, and no event of the run matches it
  FAIL no_reply (T ms)
    against the script: node `classify` asked the model, and the case scripts no reply for it (add a `[[case.reply]]` with `node = \"classify\"`)
  FAIL left_over (T ms)
    1 of the 2 replies scripted for node `classify` was never asked for
    the result scripted for tool `create_issue` was never called for
    the answer was never asked for
  FAIL wrong_arguments (T ms)
    against the script: tool `create_issue` was called with {\"title\":\"Crash\"}, and the case expects {\"title\":\"Crash on save\"}
0 passed, 4 failed
"
    );
}

#[test]
fn the_junit_report_reads_in_junitparser() {
    let python = root().join("target/py/bin/python");
    assert!(
        python.exists(),
        "target/py is missing: run `bash .ci/setup` (it installs junitparser)"
    );
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("report.xml");
    switchyard(&[
        "test",
        "tests/fixtures/testing/triage.test.toml",
        "tests/fixtures/testing/diverges.test.toml",
        "tests/fixtures/testing/mistakes.test.toml",
        "--junit",
        xml.to_str().unwrap(),
    ])
    .run()
    .code(3);
    let script = r#"
import json, sys
from junitparser import JUnitXml, Failure, Error
xml = JUnitXml.fromfile(sys.argv[1])
out = {"tests": xml.tests, "failures": xml.failures, "errors": xml.errors, "suites": []}
for suite in xml:
    cases = []
    for case in suite:
        failures = [r for r in case.result if isinstance(r, (Failure, Error))]
        cases.append({
            "name": case.name,
            "classname": case.classname,
            "kind": type(failures[0]).__name__ if failures else None,
            "failure": failures[0].message if failures else None,
            "text": failures[0].text.splitlines()[-1] if failures else None,
        })
    out["suites"].append({"suite": suite.name, "tests": suite.tests, "failures": suite.failures, "errors": suite.errors, "cases": cases})
print(json.dumps(out, indent=1))
"#;
    let out = std::process::Command::new(&python)
        .args(["-c", script, xml.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!("testing_junit", String::from_utf8_lossy(&out.stdout));
}

/// `switchyard new` in a fresh folder: what it printed and the files it wrote.
fn new_graph(dir: &std::path::Path, name: &str, args: &[&str]) -> String {
    let d = dir.join(name);
    let mut all = vec!["new", name, "--dir", d.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = switchyard(&all).run().code(0);
    assert_eq!(out.stderr, "");
    out.stdout.replace(&dir.display().to_string(), "DIR")
}

#[test]
fn every_template_makes_a_graph_that_validates_and_passes_its_own_tests() {
    let dir = tempfile::tempdir().unwrap();
    let made = [
        new_graph(dir.path(), "support", &["--template", "chat"]),
        new_graph(dir.path(), "refunds", &["--template", "workflow"]),
        new_graph(dir.path(), "orders", &["--template", "tool-agent"]),
        new_graph(
            dir.path(),
            "orders-ts",
            &["--template", "tool-agent", "--lang", "ts"],
        ),
    ];
    insta::assert_snapshot!("new_printed", made.join("\n"));
    for name in ["support", "refunds", "orders", "orders-ts"] {
        let graph = dir.path().join(name).join(format!("{name}.toml"));
        let out = switchyard(&["validate", graph.to_str().unwrap()])
            .run()
            .code(0);
        // Not a warning either.
        assert_eq!(out.stderr, "", "{name}");
        let out = switchyard(&["test", graph.to_str().unwrap(), "--coverage"])
            .run()
            .code(0);
        let stdout = timeless(&out.stdout);
        assert!(
            !stdout.contains("never"),
            "{name} leaves routes untested:\n{stdout}"
        );
    }
    // The language is the one line that starts the server; the programs are executable.
    let graph =
        |n: &str| std::fs::read_to_string(dir.path().join(n).join(format!("{n}.toml"))).unwrap();
    assert!(graph("orders").contains("command = \"tools/server.py\""));
    assert!(graph("orders-ts").contains("command = \"tools/server.ts\""));
    assert!(!graph("orders").contains("{{name}}") && !graph("orders").contains("{{lang}}"));
    use std::os::unix::fs::PermissionsExt;
    for f in ["tools/server.py", "tools/server.ts"] {
        let mode = std::fs::metadata(dir.path().join("orders").join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{f} is not executable");
    }
    // Nothing is overwritten, and a name that cannot name files is refused.
    let d = dir.path().join("support");
    let out = switchyard(&[
        "new",
        "support",
        "--template",
        "chat",
        "--dir",
        d.to_str().unwrap(),
    ])
    .run()
    .code(1);
    assert!(
        out.stderr.contains("already there; nothing was written"),
        "{}",
        out.stderr
    );
    let out = switchyard(&["new", "../x"]).run().code(2);
    assert_eq!(
        out.stderr,
        "error: the name `../x` is not a letter followed by letters, digits, `_` and `-`: it names files, folders and the graph\n"
    );
}

/// The tool-agent template's servers, Python (FastMCP from PyPI's `mcp`) and
/// TypeScript (the MCP TypeScript SDK from npm), started by the graph for real: they
/// list the tools the template's tests script, and `validate --online` finds the
/// graph's calls among them.
#[test]
fn the_tool_agent_template_s_servers_run_for_real_in_both_languages() {
    let dir = tempfile::tempdir().unwrap();
    new_graph(dir.path(), "orders", &["--template", "tool-agent"]);
    new_graph(
        dir.path(),
        "orders-ts",
        &["--template", "tool-agent", "--lang", "ts"],
    );
    // The TypeScript server finds the SDK as an installed project would.
    std::os::unix::fs::symlink(
        root().join("node_modules"),
        dir.path().join("orders-ts/tools/node_modules"),
    )
    .unwrap();
    // Each server's `#!` line finds its interpreter on the PATH: target/py's python
    // (which has `mcp`), node_modules' Node 22 (which runs .ts as it is).
    let path = format!(
        "{}:{}:{}",
        root().join("target/py/bin").display(),
        root().join("node_modules/.bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for name in ["orders", "orders-ts"] {
        let graph = dir.path().join(name).join(format!("{name}.toml"));
        let out = switchyard(&["tools", graph.to_str().unwrap(), "--format", "json"])
            .env("PATH", &path)
            .run()
            .code(0);
        let listed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let names: Vec<&str> = listed[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["lookup_order", "track_shipment"], "{name}");
        let out = switchyard(&["validate", "--online", graph.to_str().unwrap()])
            .env("PATH", &path)
            .run()
            .code(0);
        assert_eq!(out.stderr, "", "{name}");
    }
}

/// The example of docs/testing.md, run as it is written there (its graph and tools file
/// named by their paths): what the docs show is what the command does.
#[test]
fn the_example_in_the_docs_passes() {
    let doc = std::fs::read_to_string(root().join("docs/testing.md")).unwrap();
    let start = doc.find("```toml\n").unwrap() + "```toml\n".len();
    let example = &doc[start..start + doc[start..].find("```").unwrap()];
    let graphs = root().join("graphs");
    let example = example
        .replace(
            "graph = \"tool_agent.toml\"",
            &format!("graph = \"{}\"", graphs.join("tool_agent.toml").display()),
        )
        .replace(
            "tools = \"tool_agent.tools.json\"",
            &format!(
                "tools = \"{}\"",
                graphs.join("tool_agent.tools.json").display()
            ),
        );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("example.test.toml");
    std::fs::write(&path, example).unwrap();
    let out = switchyard(&["test", path.to_str().unwrap()]).run();
    assert_eq!(
        timeless(&out.stdout).replace(path.to_str().unwrap(), "FILE"),
        "FILE\n  ok   writes_files (T ms)\n1 passed, 0 failed\n",
        "{}",
        out.stderr
    );
}

/// The scripted tools hold calls to what their listing says, as the real client does:
/// arguments the tool's schema refuses are the node's error before any scripted
/// result is spent. And an answer scripted for another node than the one the run
/// waits at is the script's mistake: the case fails and `--update` leaves it as
/// written.
#[test]
fn scripted_tools_refuse_what_the_listing_refuses_and_update_keeps_a_misaimed_answer() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = root().join("tests/fixtures/testing");
    std::fs::write(
        dir.path().join("tickets.tools.json"),
        r#"[{"server": "tickets", "tools": [{"name": "create_issue", "description": "",
            "input_schema": {"type": "object", "properties": {"title": {"type": "string", "minLength": 20}},
            "required": ["title"]}}]}]"#,
    )
    .unwrap();
    let case = |name: &str, answer_node: &str| {
        format!(
            r#"
[[case]]
name = "{name}"
input = {{ ticket = "The app crashes on save." }}

[[case.reply]]
node = "classify"
json = {{ kind = "bug", title = "Crash on save" }}

[[case.answer]]
node = "{answer_node}"
payload = {{ ok = true }}

[[case.tool]]
tool = "create_issue"
result = {{ id = "T-7" }}

[case.expect]
outcome = "filed"
"#
        )
    };
    let text = format!(
        "graph = {:?}\n\n[servers.tickets]\ntools = \"tickets.tools.json\"\n{}{}",
        fixture.join("triage.toml").display().to_string(),
        case("short_title", "approve"),
        case("misaimed", "classify"),
    );
    let path = dir.path().join("triage.test.toml");
    std::fs::write(&path, &text).unwrap();
    let p = path.to_str().unwrap();
    let out = switchyard(&["test", p]).run().code(1);
    // Without the file's name and the cases' times, which vary.
    let report: String = out
        .stdout
        .lines()
        .skip(1)
        .map(|l| match (l.starts_with("  FAIL"), l.find(" (")) {
            (true, Some(at)) => format!("{}\n", &l[..at]),
            _ => format!("{l}\n"),
        })
        .collect();
    assert_eq!(
        report,
        "  FAIL short_title\n    the run failed: node `file` failed: the arguments of `create_issue` do not fit its inputSchema: at `/title`: \"Crash on save\" is shorter than 20 characters\n    the result scripted for tool `create_issue` was never called for\n  FAIL misaimed\n    against the script: the run waits at `approve`, and the next answer is for `classify`\n    the result scripted for tool `create_issue` was never called for\n0 passed, 2 failed\n"
    );
    let update = switchyard(&["test", p, "--update"]).run().code(1);
    assert!(
        update.stdout.contains(
            "  not updated: misaimed (its run went against its script: mend the script first)\n"
        ),
        "{}",
        update.stdout
    );
    let updated = std::fs::read_to_string(&path).unwrap();
    assert!(
        !updated.contains("the run waits at"),
        "the misaimed answer's error was pinned:\n{updated}"
    );
}

/// Each expectation fails the case when the run does otherwise: the response, a field
/// that should be cleared, events out of their order, the error's text.
#[test]
fn a_case_fails_on_each_expectation_the_run_does_not_meet() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("triage.test.toml");
    let graph = root().join("tests/fixtures/testing/triage.toml");
    std::fs::write(
        &path,
        format!("graph = {:?}\n{}", graph.display().to_string(), CASES),
    )
    .unwrap();
    let out = switchyard(&["test", path.to_str().unwrap()]).run().code(1);
    assert_eq!(
        timeless(&out.stdout).replace(path.to_str().unwrap(), "FILE"),
        "FILE
  FAIL says_otherwise (T ms)
    response: expected \"Filed as T-8.\", got \"Filed as T-7.\"
    state `filed`: expected it cleared (null), got {\"id\":\"T-7\"}
    events: expected event 2 of 2, {\"event\":\"interrupted\",\"node\":\"approve\"}, and no event after the previous one's match matches it
  FAIL fails_otherwise (T ms)
    error: expected \"the tickets server is up\", got \"node `file` failed: `create_issue` reported an error: the tickets server is down\"
0 passed, 2 failed
"
    );
}

const CASES: &str = r#"
[[case]]
name = "says_otherwise"
input = { ticket = "The app crashes on save." }

[[case.reply]]
node = "classify"
json = { kind = "bug", title = "Crash on save" }

[[case.answer]]
node = "approve"
payload = { ok = true }

[[case.tool]]
tool = "create_issue"
result = { id = "T-7" }

[case.expect]
outcome = "filed"
response = "Filed as T-8."
cleared = ["filed"]
events = [
  { event = "tool_call", tool = "create_issue" },
  { event = "interrupted", node = "approve" },
]

[[case]]
name = "fails_otherwise"
input = { ticket = "The app crashes on save." }

[[case.reply]]
node = "classify"
json = { kind = "bug", title = "Crash on save" }

[[case.answer]]
node = "approve"
payload = { ok = true }

[[case.tool]]
tool = "create_issue"
error = "the tickets server is down"

[case.expect]
outcome = "error"
error = "the tickets server is up"
"#;
