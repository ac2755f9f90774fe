//! A test file as written (`X.test.toml`, docs/testing.md), read with the spans of its
//! names so that the checks against the graph point into it.

use crate::diagnostic::Diagnostic;
use crate::source::{FileId, Sources};
use serde::Deserialize;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The file as read: its cases and the tools its servers list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileSpec {
    pub graph: Option<Spanned<String>>,
    #[serde(default)]
    pub servers: std::collections::BTreeMap<Spanned<String>, ServerSpec>,
    #[serde(default, rename = "case")]
    pub cases: Vec<CaseSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerSpec {
    pub tools: Spanned<ToolsSpec>,
}

/// A server's tools: listed in place, or the file `switchyard tools --format json` wrote.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ToolsSpec {
    File(String),
    Listed(Vec<Json>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaseSpec {
    pub name: Spanned<String>,
    pub description: Option<String>,
    #[serde(default)]
    pub input: Option<Spanned<Json>>,
    #[serde(default)]
    pub context: Option<Spanned<Json>>,
    pub max_steps: Option<u64>,
    /// Inputs of later runs on the same thread, each started when the run before has
    /// ended (or waits with no answer left): a chat's next messages.
    #[serde(default)]
    pub turns: Vec<Spanned<Json>>,
    pub recording: Option<Spanned<String>>,
    #[serde(default)]
    pub reply: Vec<ReplySpec>,
    #[serde(default)]
    pub tool: Vec<ToolSpec>,
    #[serde(default)]
    pub answer: Vec<AnswerSpec>,
    pub expect: Option<ExpectSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplySpec {
    pub node: Spanned<String>,
    pub json: Option<Json>,
    pub text: Option<String>,
    pub tool_calls: Option<Vec<CallSpec>>,
    pub refusal: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallSpec {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Json,
}

fn empty_object() -> Json {
    Json::Object(Default::default())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolSpec {
    pub tool: Spanned<String>,
    pub server: Option<Spanned<String>>,
    pub arguments: Option<Json>,
    pub result: Option<Json>,
    pub error: Option<String>,
    /// With `error`: the call fails as a dropped connection or a 503 does, which the
    /// node's `retry` tries again (else the tool answers with an error, never retried).
    #[serde(default)]
    pub transient: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerSpec {
    pub node: Option<Spanned<String>>,
    pub payload: Option<Json>,
    /// No answer comes: the interrupt's wait runs out (its `on_timeout` route).
    #[serde(default)]
    pub timeout: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExpectSpec {
    pub path: Option<Vec<Spanned<String>>>,
    pub routes: Option<Vec<Spanned<String>>>,
    pub outcome: Option<String>,
    pub response: Option<String>,
    pub error: Option<Spanned<String>>,
    #[serde(default)]
    pub state: std::collections::BTreeMap<Spanned<String>, Json>,
    /// State fields that must be empty (null), which TOML cannot write in `state`.
    #[serde(default)]
    pub cleared: Vec<Spanned<String>>,
    pub events: Option<Vec<Spanned<Json>>>,
}

/// A test file read: where it is, its text's id in the sources, and what it says (none
/// when it is not a test file at all; the diagnostics say why).
pub(crate) struct Read {
    pub file: FileId,
    pub spec: Option<FileSpec>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads a test file's text (a TOML or shape error is a diagnostic at its place).
pub(crate) fn read(path: &Path, text: &str, sources: &mut Sources) -> Read {
    let file = sources.add(path.display().to_string(), text);
    match toml::from_str::<FileSpec>(text) {
        Ok(spec) => Read {
            file,
            spec: Some(spec),
            diagnostics: Vec::new(),
        },
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let message = e.message().trim_end().to_string();
            Read {
                file,
                spec: None,
                diagnostics: vec![
                    Diagnostic::error("test-file", file, span, message)
                        .label("here")
                        .help("the test file format is in docs/testing.md"),
                ],
            }
        }
    }
}

/// The graph a test file tests: its `graph` key (relative to the file), else the file
/// beside it with `.test.toml` replaced by `.toml`.
pub(crate) fn graph_path(test_path: &Path, spec: &FileSpec) -> PathBuf {
    let dir = test_path.parent().unwrap_or(Path::new(""));
    match &spec.graph {
        Some(g) => dir.join(g.get_ref()),
        None => graph_beside(test_path),
    }
}

/// `x.test.toml` -> `x.toml`.
pub(crate) fn graph_beside(test_path: &Path) -> PathBuf {
    let name = test_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".test.toml").unwrap_or(&name);
    test_path.with_file_name(format!("{stem}.toml"))
}

/// Whether a path names a test file rather than a graph.
pub fn is_test_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".test.toml"))
}
