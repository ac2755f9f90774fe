//! The command line: exit codes, output streams and formats.

use crate::util::switchyard;

#[test]
fn validate_clean_graph_exits_zero() {
    let out = switchyard(&["validate", "tests/fixtures/render/showcase_valid.toml"])
        .run()
        .code(0);
    assert_eq!(
        out.stdout,
        "tests/fixtures/render/showcase_valid.toml: ok (3 nodes, 1 state fields)\n"
    );
    assert_eq!(out.stderr, "");
}

#[test]
fn validate_invalid_graph_exits_three_with_diagnostics() {
    let out = switchyard(&["validate", "tests/fixtures/check/err_dead_end.toml"])
        .run()
        .code(3);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "error: node `a` has no outgoing edge
  --> tests/fixtures/check/err_dead_end.toml:9:8
  |
9 | [nodes.a]
  |        ^ dead end
  |
  = help: add `next = \"<node>\"` (or `next = \"END\"`), or a `route`

tests/fixtures/check/err_dead_end.toml: 1 error
"
    );
}

#[test]
fn validate_reports_every_file() {
    let out = switchyard(&[
        "validate",
        "tests/fixtures/render/showcase_valid.toml",
        "tests/fixtures/check/err_empty_set.toml",
    ])
    .run()
    .code(3);
    assert!(
        out.stdout.contains("showcase_valid.toml: ok"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("err_empty_set.toml: 1 error"),
        "{}",
        out.stderr
    );
}

#[test]
fn validate_json_format() {
    let out = switchyard(&[
        "validate",
        "--format",
        "json",
        "tests/fixtures/check/err_empty_set.toml",
    ])
    .run()
    .code(3);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json on stdout");
    assert_eq!(
        v,
        serde_json::json!([{
            "file": "tests/fixtures/check/err_empty_set.toml",
            "valid": false,
            "diagnostics": [{
                "severity": "error",
                "code": "empty-set",
                "message": "`set` node `a` sets nothing",
                "file": "tests/fixtures/check/err_empty_set.toml",
                "line": 6,
                "column": 8,
                "end_line": 6,
                "end_column": 9,
                "label": "a `set` node does nothing but its `set`",
                "help": "add `set = { field = \"expression\" }`"
            }]
        }])
    );
}

#[test]
fn validate_cost_prints_each_worst_case_with_its_path() {
    let out = switchyard(&[
        "validate",
        "--cost",
        "tests/fixtures/run/cost_loop.toml",
        "tests/fixtures/run/budget_calls.toml",
    ])
    .run()
    .code(0);
    insta::assert_snapshot!("validate_cost_text", out.stdout);
    let out = switchyard(&[
        "validate",
        "--cost",
        "--format",
        "json",
        "tests/fixtures/run/cost_loop.toml",
    ])
    .run()
    .code(0);
    let mut v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json on stdout");
    // 4 requests of at most 280 tokens in at $1 a million and 20 out at $4.
    let usd = v[0]["cost"]["measures"][4]["worst"]
        .take()
        .as_f64()
        .unwrap();
    assert_eq!((usd * 1e6).round(), 1440.0);
    let path = "(plan, save, count) x 4 -> done";
    assert_eq!(
        v[0]["cost"],
        serde_json::json!({
            "graph": "cost_loop",
            "measures": [
                { "measure": "model_calls", "worst": 4.0, "path": path, "budget": 4.0 },
                { "measure": "tool_calls", "worst": 4.0, "path": path, "budget": 4.0 },
                { "measure": "side_effect_calls", "worst": 4.0, "path": path },
                { "measure": "tokens", "worst": 1200.0, "path": path, "budget": 2000.0 },
                { "measure": "usd", "worst": null, "path": path, "budget": 0.01 },
            ],
            "loops": [{ "nodes": ["plan", "save", "count"], "times": 4.0, "guard": "attempts >= 3" }],
        })
    );
    // A graph with errors has no worst case to show.
    let out = switchyard(&[
        "validate",
        "--cost",
        "--format",
        "json",
        "tests/fixtures/check/err_over_budget.toml",
    ])
    .run()
    .code(3);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json on stdout");
    assert_eq!(v[0].get("cost"), None);
}

#[test]
fn toml_syntax_errors_show_as_toml_formats_them() {
    let out = switchyard(&["validate", "tests/fixtures/check/err_toml_syntax.toml"])
        .run()
        .code(3);
    assert!(
        out.stderr.starts_with(
            "error: invalid TOML in `tests/fixtures/check/err_toml_syntax.toml`\nTOML parse error at line 3, column 15\n"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn unreadable_file_exits_one_with_cause() {
    let out = switchyard(&["validate", "graphs/no_such_graph.toml"])
        .run()
        .code(1);
    assert_eq!(
        out.stderr,
        "error: cannot read `graphs/no_such_graph.toml`\ncaused by: No such file or directory (os error 2)\n"
    );
    // The files after it are still checked.
    let out = switchyard(&[
        "validate",
        "graphs/no_such_graph.toml",
        "tests/fixtures/render/showcase_valid.toml",
    ])
    .run()
    .code(1);
    assert_eq!(
        out.stdout,
        "tests/fixtures/render/showcase_valid.toml: ok (3 nodes, 1 state fields)\n"
    );
}

#[test]
fn usage_errors_exit_two() {
    switchyard(&["validate"]).run().code(2);
    switchyard(&["render", "x.toml", "--format", "png"])
        .run()
        .code(2);
}

#[test]
fn render_writes_to_a_file() {
    let dir = std::env::temp_dir().join(format!("switchyard-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.mmd");
    let out = switchyard(&[
        "render",
        "tests/fixtures/render/showcase_valid.toml",
        "--format",
        "mermaid",
        "-o",
        file.to_str().unwrap(),
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("---\ntitle: tiny\n---\nflowchart TD\n"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn render_of_invalid_graph_warns_and_still_draws() {
    let out = switchyard(&["render", "tests/fixtures/render/showcase.toml"])
        .run()
        .code(0);
    assert!(
        out.stdout.starts_with("digraph \"showcase\" {"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .starts_with("warning: `tests/fixtures/render/showcase.toml` has "),
        "{}",
        out.stderr
    );
}

#[test]
fn render_into_closed_pipe_exits_zero() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["render", "graphs/browser_agent.toml"])
        .current_dir(crate::util::root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_command_definitions() {
    for (shell, start) in [
        ("bash", "_switchyard() {\n"),
        ("zsh", "#compdef switchyard\n"),
        ("fish", "# Print an optspec for argparse"),
        ("elvish", "\nuse builtin;\n"),
        (
            "powershell",
            "\nusing namespace System.Management.Automation\n",
        ),
    ] {
        let out = switchyard(&["completions", shell]).run().code(0);
        assert!(
            out.stdout.starts_with(start),
            "{shell}: {}",
            &out.stdout[..80]
        );
        // Every command is there.
        for command in ["validate", "run", "resume", "state", "serve", "man"] {
            assert!(out.stdout.contains(command), "{shell}: {command}");
        }
    }
    let out = switchyard(&["completions", "tcsh"]).run().code(2);
    assert!(
        out.stderr
            .contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{}",
        out.stderr
    );

    let page = switchyard(&["man"]).run().code(0).stdout;
    assert!(page.contains(".TH switchyard 1"), "{page}");
    assert!(page.contains("switchyard\\-run(1)"), "{page}");
    let dir = tempfile::tempdir().unwrap();
    let man_dir = dir.path().join("man1");
    let out = switchyard(&["man", "--dir", man_dir.to_str().unwrap()])
        .run()
        .code(0);
    let listed: Vec<String> = out.stdout.lines().map(str::to_string).collect();
    let names: Vec<&str> = listed
        .iter()
        .map(|p| p.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "switchyard-completions.1",
            "switchyard-diff.1",
            "switchyard-fork.1",
            "switchyard-history.1",
            "switchyard-lsp.1",
            "switchyard-man.1",
            "switchyard-new.1",
            "switchyard-prune.1",
            "switchyard-render.1",
            "switchyard-resume.1",
            "switchyard-run.1",
            "switchyard-serve.1",
            "switchyard-state-set.1",
            "switchyard-state.1",
            "switchyard-test.1",
            "switchyard-tools.1",
            "switchyard-validate.1",
            "switchyard.1",
        ]
    );
    // A command's page has its arguments' descriptions and its examples.
    let run = std::fs::read_to_string(man_dir.join("switchyard-run.1")).unwrap();
    assert!(run.contains(".TH switchyard-run 1"), "{run}");
    assert!(run.contains("\nThe graph file to run\n"), "{run}");
    assert!(
        run.contains("switchyard run graph.toml \\-\\-store none \\-\\-max\\-steps 20"),
        "{run}"
    );
}

#[test]
fn validate_reads_a_graph_from_standard_input() {
    let text = std::fs::read_to_string("graphs/remember.toml").unwrap();
    let out = switchyard(&["validate", "-"]).stdin(&text).run().code(0);
    assert_eq!(out.stdout, "<stdin>: ok (3 nodes, 3 state fields)\n");
    let out = switchyard(&["validate", "-"])
        .stdin("[graph]\nname = \"x\"\n")
        .run()
        .code(3);
    assert!(
        out.stderr
            .starts_with("error: `[graph]` has no `entry`\n  --> <stdin>:1:1\n"),
        "{}",
        out.stderr
    );
}

#[test]
fn help_is_wrapped_to_the_terminal_and_the_manual_has_exit_status_and_environment() {
    for (columns, widest) in [("60", 60), ("200", 200)] {
        let out = switchyard(&["run", "--help"])
            .env("COLUMNS", columns)
            .run()
            .code(0);
        let longest = out.stdout.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(longest <= widest, "{longest} > {widest}:\n{}", out.stdout);
    }
    let narrow = switchyard(&["run", "--help"])
        .env("COLUMNS", "60")
        .run()
        .code(0)
        .stdout;
    let wide = switchyard(&["run", "--help"])
        .env("COLUMNS", "200")
        .run()
        .code(0)
        .stdout;
    assert!(narrow.lines().count() > wide.lines().count());
    let page = switchyard(&["man"]).run().code(0).stdout;
    for section in [
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        "\\fBCLICOLOR_FORCE\\fR",
        "\\fBSWITCHYARD_STORE\\fR",
    ] {
        assert!(page.contains(section), "{section} is missing:\n{page}");
    }
}

#[test]
fn help_shows_examples() {
    let out = switchyard(&["state", "set", "--help"]).run().code(0);
    assert!(
        out.stdout.ends_with(
            "Examples:\n  switchyard state set --thread t1 --values '{\"goal\": \"Find the opening hours\"}'\n  switchyard state set --thread t1 --values @fix.json --as-node validate\n"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn color_is_for_terminals_or_when_asked() {
    let plain = switchyard(&["validate", "tests/fixtures/check/err_dead_end.toml"])
        .run()
        .code(3)
        .stderr;
    // Not a terminal here: `auto` (the default) and `never` print plain text.
    for args in [&["--color", "auto"][..], &["--color", "never"]] {
        let mut all = vec!["validate", "tests/fixtures/check/err_dead_end.toml"];
        all.extend_from_slice(args);
        assert_eq!(switchyard(&all).run().code(3).stderr, plain);
    }
    // `always` paints the same text, even with NO_COLOR (which only `auto` reads).
    let painted = switchyard(&[
        "validate",
        "tests/fixtures/check/err_dead_end.toml",
        "--color",
        "always",
    ])
    .env("NO_COLOR", "1")
    .run()
    .code(3)
    .stderr;
    assert!(
        painted.starts_with(
            "\x1b[1;31merror\x1b[0m\x1b[1m: node `a` has no outgoing edge\x1b[0m\n  \x1b[1;34m-->\x1b[0m tests/fixtures/check/err_dead_end.toml:9:8\n"
        ),
        "{painted:?}"
    );
    let stripped = painted
        .split('\x1b')
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part
            } else {
                part.split_once('m').map_or(part, |(_, rest)| rest)
            }
        })
        .collect::<String>();
    assert_eq!(stripped, plain);
    // CLICOLOR_FORCE paints off a terminal too, unless NO_COLOR says otherwise;
    // CLICOLOR=0 alone changes nothing off a terminal.
    let with = |vars: &[(&str, &str)]| {
        let mut cmd = switchyard(&["validate", "tests/fixtures/check/err_dead_end.toml"]);
        for (k, v) in vars {
            cmd = cmd.env(k, v);
        }
        cmd.run().code(3).stderr
    };
    assert_eq!(with(&[("CLICOLOR_FORCE", "1")]), painted);
    assert_eq!(with(&[("CLICOLOR_FORCE", "0")]), plain);
    assert_eq!(with(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]), plain);
    assert_eq!(with(&[("CLICOLOR", "0")]), plain);
    // The command's own error line too.
    let out = switchyard(&[
        "state", "--thread", "nope", "--store", "memory", "--color", "always",
    ])
    .run()
    .code(1);
    assert_eq!(
        out.stderr,
        "\x1b[1;31merror\x1b[0m: thread `nope` has no checkpoints in this store\n"
    );
}

/// The builtin `store` server's tools are listed by `switchyard tools` and checked by
/// `validate --online` like any server's, without starting anything.
#[test]
fn the_builtin_store_is_listed_and_checked_online_like_any_server() {
    let out = switchyard(&["tools", "graphs/remember.toml", "--format", "json"])
        .run()
        .code(0);
    let listed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> = listed[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        (listed[0]["server"].as_str(), names),
        (
            Some("memory"),
            vec!["put", "get", "search", "delete", "list_namespaces"]
        )
    );
    let out = switchyard(&["validate", "--online", "graphs/remember.toml"])
        .run()
        .code(0);
    assert_eq!(
        out.stdout,
        "graphs/remember.toml: ok (3 nodes, 3 state fields)\n"
    );
}
