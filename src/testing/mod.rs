//! Graph tests (`switchyard test`, docs/testing.md): cases beside a graph, each a run
//! with the model's replies, the tools' results and people's answers written down, and
//! what the run must do. A test file is read (`file.rs`) and checked against its graph
//! (`check.rs`) before anything runs; each case runs offline on a memory store
//! (`run.rs`, through the scripted clients of `doubles.rs`); its expectations are
//! compared with what it did (`compare.rs`), rewritten from it on request
//! (`update.rs`), and the runs together tell which routes no case took
//! (`coverage.rs`).

mod check;
mod compare;
mod coverage;
mod doubles;
mod file;
mod run;
mod update;

pub use check::Route;
pub use coverage::Coverage;
pub use file::is_test_file;
pub use run::Actual;

use crate::diagnostic::{self, Diagnostic};
use crate::graph::Graph;
use crate::source::{FileId, Sources};
use crate::spec::GraphSpec;
use crate::tool::ToolInfo;
use file::{FileSpec, ToolsSpec};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a test file cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The test file or its graph has problems: every diagnostic, in `sources`.
    #[error("`{path}` has {count} problem{s}", s = if *.count == 1 { "" } else { "s" })]
    Invalid {
        path: String,
        count: usize,
        diagnostics: Vec<Diagnostic>,
    },
    #[error(transparent)]
    Compile(#[from] crate::graph::CompileError),
}

/// A test file read and checked, with its graph compiled: ready to run its cases.
pub struct Suite {
    pub path: PathBuf,
    pub graph_path: PathBuf,
    text: String,
    spec: FileSpec,
    graph_spec: GraphSpec,
    graph: Arc<Graph>,
    listed: HashMap<String, Vec<ToolInfo>>,
}

/// A case's run and how it fared.
pub struct CaseResult {
    pub name: String,
    pub description: Option<String>,
    /// Every way the run differs from the case's expectations; none when it passed.
    pub failures: Vec<String>,
    pub actual: Actual,
    pub duration: Duration,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Checks a test file against its graph: the diagnostics of both (the graph's only
/// when it has problems), in the order `validate` prints them.
pub fn check_file(path: &Path, sources: &mut Sources) -> Result<Vec<Diagnostic>, SuiteError> {
    Ok(match read_checked(path, sources)? {
        Checked::Problems(d) => d,
        Checked::Fine(fine) => fine.warnings,
    })
}

enum Checked {
    Problems(Vec<Diagnostic>),
    Fine(Box<Fine>),
}

/// A test file that passed its checks, and what they found to run it with.
struct Fine {
    text: String,
    spec: FileSpec,
    graph_spec: GraphSpec,
    graph_path: PathBuf,
    listed: HashMap<String, Vec<ToolInfo>>,
    warnings: Vec<Diagnostic>,
}

/// Checks test-file text as if it were the file at `path` (an editor's unsaved
/// buffer): the diagnostics of the test file and of its graph, when it has problems.
pub fn check_text(path: &Path, text: &str, sources: &mut Sources) -> Vec<Diagnostic> {
    match checked(path, text.to_string(), sources) {
        Checked::Problems(d) => d,
        Checked::Fine(fine) => fine.warnings,
    }
}

fn read_checked(path: &Path, sources: &mut Sources) -> Result<Checked, SuiteError> {
    let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(checked(path, text, sources))
}

fn checked(path: &Path, text: String, sources: &mut Sources) -> Checked {
    let read = file::read(path, &text, sources);
    let Some(spec) = read.spec else {
        return Checked::Problems(read.diagnostics);
    };
    let graph_path = file::graph_path(path, &spec);
    let v = match crate::pipeline::validate_file(&graph_path, sources) {
        Ok(v) => v,
        Err(e) => {
            let span = spec.graph.as_ref().map_or(0..0, toml::Spanned::span);
            return Checked::Problems(vec![
                Diagnostic::error(
                    "test-graph",
                    read.file,
                    span,
                    match std::error::Error::source(&e) {
                        Some(why) => format!("the graph under test cannot be read: {e}: {why}"),
                        None => format!("the graph under test cannot be read: {e}"),
                    },
                )
                .label("this graph")
                .help("name it with `graph = \"FILE.toml\"`, relative to the test file"),
            ]);
        }
    };
    let valid = v.is_valid();
    let Some(graph_spec) = v.spec else {
        return Checked::Problems(v.diagnostics);
    };
    if !valid {
        let errors = v.diagnostics.iter().filter(|d| d.is_error()).count();
        let mut d = v.diagnostics;
        d.push(
            Diagnostic::error(
                "test-graph",
                read.file,
                spec.graph.as_ref().map_or(0..0, toml::Spanned::span),
                format!(
                    "the graph under test, `{}`, has {errors} error{}",
                    graph_path.display(),
                    if errors == 1 { "" } else { "s" }
                ),
            )
            .label("this graph")
            .help("its cases run once `switchyard validate` passes it"),
        );
        return Checked::Problems(d);
    }
    let mut diagnostics = check::check(read.file, path, &spec, &graph_spec);
    let listed = listed_tools(read.file, path, &spec, &mut diagnostics);
    diagnostic::sort(&mut diagnostics);
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Checked::Problems(diagnostics);
    }
    Checked::Fine(Box::new(Fine {
        text,
        spec,
        graph_spec,
        graph_path,
        listed,
        warnings: diagnostics,
    }))
}

/// The tools each `[servers.x]` lists, read from its file or table; a file that does
/// not read is a diagnostic.
fn listed_tools(
    file: FileId,
    path: &Path,
    spec: &FileSpec,
    out: &mut Vec<Diagnostic>,
) -> HashMap<String, Vec<ToolInfo>> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut listed = HashMap::new();
    for (name, server) in &spec.servers {
        let tools = match server.tools.get_ref() {
            ToolsSpec::Listed(t) => t.iter().map(tool_info).collect::<Result<Vec<_>, _>>(),
            ToolsSpec::File(f) => {
                tools_listed_in(&dir.join(f), Some(name.get_ref())).and_then(|t| {
                    if t.is_empty() {
                        Err(format!("it lists no tools of server `{}`", name.get_ref()))
                    } else {
                        Ok(t.into_iter().map(|(_, t)| t).collect())
                    }
                })
            }
        };
        let missing =
            matches!(server.tools.get_ref(), ToolsSpec::File(f) if !dir.join(f).is_file());
        match tools {
            Ok(t) => {
                listed.insert(name.get_ref().clone(), t);
            }
            // A missing file is reported by the checks already.
            Err(_) if missing => {}
            Err(e) => out.push(
                Diagnostic::error(
                    "test-tools",
                    file,
                    server.tools.span(),
                    format!("the tools of server `{}` do not read: {e}", name.get_ref()),
                )
                .label("these tools")
                .help("a list of `{ name, description, input_schema }`, as `switchyard tools --format json` prints"),
            ),
        }
    }
    listed
}

/// The tools a listing file holds (what `switchyard tools --format json` prints, or a
/// plain list of tools), each with the server that lists it (none in a plain list):
/// those of `server` alone when it is named. An editor completes tool names from it.
pub fn tools_listed_in(
    path: &Path,
    server: Option<&str>,
) -> Result<Vec<(Option<String>, ToolInfo)>, String> {
    let json: Json = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))?;
    let Json::Array(items) = json else {
        return Err("it is not a JSON list".into());
    };
    let mut out = Vec::new();
    for item in &items {
        match item.get("server").and_then(Json::as_str) {
            Some(s) if server.is_none_or(|w| w == s) => {
                for t in item
                    .get("tools")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push((Some(s.to_string()), tool_info(t)?));
                }
            }
            Some(_) => {}
            None => out.push((None, tool_info(item)?)),
        }
    }
    Ok(out)
}

fn tool_info(t: &Json) -> Result<ToolInfo, String> {
    let name = t
        .get("name")
        .and_then(Json::as_str)
        .ok_or_else(|| format!("the tool {t} has no `name`"))?;
    Ok(ToolInfo {
        name: name.to_string(),
        description: t
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string(),
        input_schema: t
            .get("input_schema")
            .or_else(|| t.get("inputSchema"))
            .cloned()
            .unwrap_or_else(|| serde_json::json!({ "type": "object" })),
        output_schema: t
            .get("output_schema")
            .or_else(|| t.get("outputSchema"))
            .filter(|s| !s.is_null())
            .cloned(),
    })
}

impl Suite {
    /// Reads and checks a test file and compiles its graph.
    pub fn load(path: &Path, sources: &mut Sources) -> Result<Suite, SuiteError> {
        match read_checked(path, sources)? {
            Checked::Problems(diagnostics) => Err(SuiteError::Invalid {
                path: path.display().to_string(),
                count: diagnostics.iter().filter(|d| d.is_error()).count(),
                diagnostics,
            }),
            Checked::Fine(fine) => {
                let Fine {
                    text,
                    spec,
                    graph_spec,
                    graph_path,
                    listed,
                    ..
                } = *fine;
                let graph = crate::pipeline::compile(&graph_spec, sources)?;
                Ok(Suite {
                    path: path.to_path_buf(),
                    graph_path,
                    text,
                    spec,
                    graph_spec,
                    graph: Arc::new(graph),
                    listed,
                })
            }
        }
    }

    /// The cases' names, in file order.
    pub fn case_names(&self) -> Vec<&str> {
        self.spec
            .cases
            .iter()
            .map(|c| c.name.get_ref().as_str())
            .collect()
    }

    /// Runs the cases (those named `only`, when given), one after another.
    pub async fn run(&self, only: Option<&str>) -> Vec<CaseResult> {
        let dir = self.path.parent().unwrap_or(Path::new("")).to_path_buf();
        let mut out = Vec::new();
        for case in &self.spec.cases {
            if only.is_some_and(|o| o != case.name.get_ref()) {
                continue;
            }
            let start = Instant::now();
            let actual = run::run_case(&self.graph, case, &dir, self.listed.clone()).await;
            let failures = compare::compare(case.expect.as_ref(), &actual);
            out.push(CaseResult {
                name: case.name.get_ref().clone(),
                description: case.description.clone(),
                failures,
                actual,
                duration: start.elapsed(),
            });
        }
        out
    }

    /// What the runs of `results` covered of the graph.
    pub fn coverage(&self, results: &[CaseResult]) -> Coverage {
        let runs: Vec<&Actual> = results.iter().map(|r| &r.actual).collect();
        Coverage::of(&self.graph_spec, &runs)
    }

    /// The test file's text with each run case's expectations rewritten from its run
    /// (`--update`): path, routes, outcome, response and error, and the values of the
    /// state fields a case names (the events it names are its author's, kept); and the
    /// cases not rewritten because their script ran short.
    pub fn updated(&self, results: &[CaseResult]) -> (String, Vec<String>) {
        update::updated(&self.text, results)
    }
}
