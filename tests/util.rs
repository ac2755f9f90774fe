//! Helpers shared by the test modules.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository root; tests run with it as their working directory.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files in `dir` (relative to the root) whose names start with `prefix` and end with
/// `suffix`, sorted, as root-relative paths.
pub(crate) fn files(dir: &str, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("cannot list {dir}: {e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.ends_with(suffix))
        .map(|n| Path::new(dir).join(n))
        .collect();
    out.sort();
    out
}

/// The example graphs in `graphs/` (their tests, `*.test.toml`, left out).
pub(crate) fn examples() -> Vec<PathBuf> {
    let mut graphs = files("graphs", "", ".toml");
    graphs.retain(|p| !p.to_string_lossy().ends_with(".test.toml"));
    graphs
}

/// A `switchyard` invocation, run from the repository root.
#[must_use]
pub(crate) struct Cmd {
    args: Vec<String>,
    stdin: Option<String>,
    env: Vec<(String, String)>,
}

pub(crate) fn switchyard(args: &[&str]) -> Cmd {
    Cmd {
        args: args.iter().map(|a| a.to_string()).collect(),
        stdin: None,
        env: Vec::new(),
    }
}

pub(crate) struct Output {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Cmd {
    #[allow(dead_code)]
    pub(crate) fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.to_string());
        self
    }

    /// Sets an environment variable for the process.
    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub(crate) fn run(self) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(&self.args)
            // What the caller's shell sets must not change what a test sees: the help's
            // width, colour.
            .env_remove("COLUMNS")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR")
            .env_remove("CLICOLOR_FORCE")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("switchyard starts");
        let mut stdin = child.stdin.take().expect("piped stdin");
        if let Some(text) = &self.stdin {
            stdin.write_all(text.as_bytes()).expect("write stdin");
        }
        drop(stdin);
        let out = child.wait_with_output().expect("switchyard finishes");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Output {
    #[track_caller]
    pub(crate) fn code(self, expected: i32) -> Self {
        assert_eq!(
            self.code, expected,
            "exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs Graphviz on DOT text and returns the SVG; fails the test when `dot` rejects it.
#[track_caller]
pub(crate) fn graphviz_svg(dot: &str, what: &str) -> String {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run Graphviz `dot` ({e}); the README's test command installs it")
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(dot.as_bytes())
        .expect("write dot");
    let out = child.wait_with_output().expect("dot finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "dot rejected {what}:\n{stderr}\n{dot}"
    );
    String::from_utf8(out.stdout).expect("svg is utf-8")
}

/// One NDJSON event line of `run --json` / `resume --json`, checked against the
/// published format (`schemas/events.schema.json`): every event a test reads is.
#[track_caller]
pub(crate) fn event_line(line: &str) -> serde_json::Value {
    static SCHEMA: std::sync::LazyLock<jsonschema::Validator> =
        std::sync::LazyLock::new(|| events_schema("schemas/events.schema.json"));
    checked_line(&SCHEMA, line, "schemas/events.schema.json")
}

/// One line of `run --json=2`, checked against `schemas/events.v2.schema.json`.
#[track_caller]
pub(crate) fn event_line_v2(line: &str) -> serde_json::Value {
    static SCHEMA: std::sync::LazyLock<jsonschema::Validator> =
        std::sync::LazyLock::new(|| events_schema("schemas/events.v2.schema.json"));
    checked_line(&SCHEMA, line, "schemas/events.v2.schema.json")
}

fn events_schema(path: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join(path)).expect("events schema");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("events schema is JSON");
    jsonschema::draft202012::new(&schema).expect("events schema compiles")
}

#[track_caller]
fn checked_line(schema: &jsonschema::Validator, line: &str, path: &str) -> serde_json::Value {
    let value: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not an event ({e}): {line}"));
    let problems: Vec<String> = schema
        .iter_errors(&value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        problems.is_empty(),
        "event does not fit {path}: {line}\n{}",
        problems.join("\n")
    );
    value
}

/// An event line without what every line carries (`v`, `ts`, `thread`, `run`).
pub(crate) fn without_envelope(e: &serde_json::Value) -> serde_json::Value {
    let mut e = e.clone();
    if let Some(o) = e.as_object_mut() {
        for key in ["v", "ts", "thread", "run"] {
            o.shift_remove(key);
        }
    }
    e
}

/// `v` without the ids Switchyard made for messages (UUIDs of version 8, in objects
/// with a `role`): what a test that pins a state's messages compares, the ids being
/// pinned where they are the subject (`run::message_ids`). Ids a graph or an input
/// gave stay.
pub(crate) fn without_made_ids(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value as Json;
    match v {
        Json::Object(mut o) => {
            let made = o.contains_key("role")
                && o.get("id")
                    .and_then(Json::as_str)
                    .is_some_and(|id| id.len() == 36 && &id[14..15] == "8");
            if made {
                o.remove("id");
            }
            Json::Object(
                o.into_iter()
                    .map(|(k, v)| (k, without_made_ids(v)))
                    .collect(),
            )
        }
        Json::Array(items) => Json::Array(items.into_iter().map(without_made_ids).collect()),
        other => other,
    }
}
