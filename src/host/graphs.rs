//! [`Graphs`]: the graphs a host serves, by id (`[graph] name`), reloaded when their
//! files change.
//!
//! A reload reads every graph file (and, for a directory, every `*.toml` in it) and the
//! prompt and schema files each names, and compares their contents with what was read
//! last; only a graph whose files changed is loaded and checked again. One that
//! validates becomes the version new threads get; one that does not leaves the
//! previous version serving, with its diagnostics kept for clients to read. Every
//! version ever loaded stays loaded, by hash, so a thread that started on one goes on
//! on it until it ends.
//!
//! Polling, rather than file-system notifications: editors save by writing a new file
//! and renaming it over the old one, which notification watchers lose track of, and
//! reading a few graphs' files once a second costs next to nothing.

use super::{Notice, lock};
use crate::diagnostic::Diagnostic;
use crate::graph::Graph;
use crate::source::Sources;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// What a graph file's last check found wrong.
#[derive(Clone, Debug)]
pub struct Problems {
    /// Every diagnostic as `validate` prints it.
    pub rendered: String,
    /// Every diagnostic as `validate --format json` prints it.
    pub diagnostics: Vec<serde_json::Value>,
    pub errors: usize,
    /// Unix milliseconds of the check.
    pub at_ms: u64,
}

/// How a version is drawn and described for clients, made when it is loaded.
pub struct Drawing {
    /// Nodes and edges as the LangGraph API gives them.
    pub json: serde_json::Value,
    pub mermaid: String,
    pub dot: String,
    /// Laid out here, for the web page (no Graphviz on the server).
    pub svg: String,
    /// Each node's prompts and schemas, for the web page.
    pub details: serde_json::Value,
    /// JSON Schemas of a run's input and of the state.
    pub input_schema: serde_json::Value,
    /// JSON Schema of a run's result (`[graph] output`).
    pub output_schema: serde_json::Value,
    pub state_schema: serde_json::Value,
    /// JSON Schema of a configuration: the graph's constants.
    pub config_schema: serde_json::Value,
}

/// One served graph.
#[derive(Clone)]
pub struct Served {
    pub id: String,
    pub path: PathBuf,
    /// The version new threads get; none when the file never validated.
    pub current: Option<Arc<Graph>>,
    /// Set while the file on disk does not validate.
    pub problems: Option<Problems>,
    /// The graph's `[graph] description`.
    pub description: String,
    /// Unix milliseconds: first loaded, and last loaded.
    pub created_ms: u64,
    pub updated_ms: u64,
    /// Versions loaded so far (1 for the first).
    pub version: u64,
    /// The current version's drawing and schemas.
    pub drawing: Option<Arc<Drawing>>,
    /// What the current version changed from the one it replaced (none for the first),
    /// as `switchyard diff` prints it.
    pub changes: Vec<String>,
}

/// The graphs of a host. Cheap to clone; clones share the graphs.
#[derive(Clone)]
pub struct Graphs {
    inner: Arc<Mutex<State>>,
    notices: Arc<Mutex<Option<UnboundedSender<Notice>>>>,
}

struct State {
    /// Files and directories as given on the command line.
    roots: Vec<PathBuf>,
    by_id: BTreeMap<String, Served>,
    /// Every version loaded, by hash.
    versions: HashMap<String, Arc<Graph>>,
    /// Per graph file: the digest of its files when last read, the files it read,
    /// and the id it serves under.
    files: HashMap<PathBuf, FileState>,
    /// Counts the changes to what is served: a run's course decided at one count
    /// holds while it is the same.
    generation: u64,
}

struct FileState {
    /// Of the files it read and the files it names that were missing (so that one
    /// appearing is a change); ends with `:taken` for a file whose graph name another
    /// file serves, checked at every poll (it serves once the other goes). Any other
    /// file, valid or not, is checked again only when its files change.
    digest: String,
    deps: Vec<PathBuf>,
    id: String,
    /// The problems last logged for the file, so a file that stays broken is logged
    /// once, not at every poll.
    logged: Option<String>,
    /// The file gives its id as its `[graph] name` (one that cannot be read serves
    /// under its file's stem).
    named: bool,
}

impl Graphs {
    /// Loads the graphs at `roots` (graph files, or directories whose `*.toml` files are
    /// graphs). A file that does not validate is kept with its problems; an id served
    /// by two files is a problem of the second.
    pub fn load(roots: Vec<PathBuf>) -> Graphs {
        let graphs = Graphs {
            inner: Arc::new(Mutex::new(State {
                roots,
                by_id: BTreeMap::new(),
                versions: HashMap::new(),
                files: HashMap::new(),
                generation: 0,
            })),
            notices: Arc::new(Mutex::new(None)),
        };
        graphs.reload();
        graphs
    }

    pub(super) fn set_notices(&self, tx: UnboundedSender<Notice>) {
        *lock(&self.notices) = Some(tx);
    }

    pub(super) fn close_notices(&self) {
        *lock(&self.notices) = None;
    }

    fn notice(&self, n: Notice) {
        if let Some(tx) = &*lock(&self.notices) {
            let _ = tx.send(n);
        }
    }

    /// How many times what is served has changed: equal counts, the same graphs.
    pub(crate) fn generation(&self) -> u64 {
        lock(&self.inner).generation
    }

    /// Every served graph, by id.
    pub fn list(&self) -> Vec<Served> {
        lock(&self.inner).by_id.values().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<Served> {
        lock(&self.inner).by_id.get(id).cloned()
    }

    /// The version with this hash, if it was ever loaded.
    pub fn version(&self, hash: &str) -> Option<Arc<Graph>> {
        lock(&self.inner).versions.get(hash).cloned()
    }

    /// The served graph whose file is `path` (absolute), for a thread whose version
    /// is no longer loaded.
    pub fn by_path(&self, path: &str) -> Option<Served> {
        lock(&self.inner)
            .by_id
            .values()
            .find(|s| std::path::absolute(&s.path).is_ok_and(|p| p.as_os_str() == path))
            .cloned()
    }

    /// Each graph name two files declare: the name, the file that serves it and the
    /// other. `serve` refuses to start with any; on a reload the one serving goes on
    /// serving and the other is reported.
    pub fn duplicates(&self) -> Vec<(String, PathBuf, PathBuf)> {
        let s = lock(&self.inner);
        let mut found: Vec<(String, PathBuf, PathBuf)> = s
            .files
            .iter()
            .filter(|(_, f)| f.named)
            .filter_map(|(path, f)| {
                let serving = s.by_id.get(&f.id)?;
                (serving.path != *path).then(|| (f.id.clone(), serving.path.clone(), path.clone()))
            })
            .collect();
        found.sort();
        found
    }

    /// The served graphs' names as messages list them: "`a`, `b`", or "none".
    pub fn names(&self) -> String {
        let s = lock(&self.inner);
        if s.by_id.is_empty() {
            return "none".into();
        }
        s.by_id
            .keys()
            .map(|id| format!("`{id}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The id of the graph a version belongs to.
    pub fn id_of(&self, graph: &Graph) -> String {
        graph.name.clone()
    }

    /// Reads the graph files again and loads those whose files changed. Returns how
    /// many graphs changed (loaded, broken or removed).
    pub fn reload(&self) -> usize {
        // Per file: the digest of what it read last, and what it read.
        type Known = HashMap<PathBuf, (String, Vec<PathBuf>)>;
        let (roots, known): (Vec<PathBuf>, Known) = {
            let s = lock(&self.inner);
            (
                s.roots.clone(),
                s.files
                    .iter()
                    .map(|(p, f)| (p.clone(), (f.digest.clone(), f.deps.clone())))
                    .collect(),
            )
        };
        let files = graph_files(&roots);
        let mut changed = 0;
        for file in &files {
            let deps = known
                .get(file)
                .map(|(_, d)| d.clone())
                .unwrap_or_else(|| vec![file.clone()]);
            let digest = digest(&deps);
            if known.get(file).is_some_and(|(d, _)| *d == digest) {
                continue;
            }
            changed += 1;
            self.load_file(file);
        }
        // Files that went away: their graphs serve no new threads.
        let gone: Vec<PathBuf> = known
            .keys()
            .filter(|p| !files.contains(p))
            .cloned()
            .collect();
        for path in gone {
            changed += 1;
            let mut s = lock(&self.inner);
            s.generation += 1;
            if let Some(f) = s.files.remove(&path) {
                if s.by_id.get(&f.id).is_some_and(|g| g.path == path) {
                    s.by_id.remove(&f.id);
                }
                drop(s);
                self.notice(Notice::GraphRemoved {
                    graph: f.id,
                    path: path.display().to_string(),
                });
            }
        }
        changed
    }

    fn load_file(&self, path: &Path) {
        let mut sources = Sources::new();
        let now = super::now_ms();
        let validation = crate::pipeline::validate_file(path, &mut sources);
        // What the file reads, for the next comparison: itself, then its prompts and
        // schemas, as far as they were read.
        let mut deps: Vec<PathBuf> = sources.names().iter().map(PathBuf::from).collect();
        if deps.is_empty() {
            deps.push(path.to_path_buf());
        }
        // Every file it names, read or not (missing, refused, a subgraph's own): one
        // that appears or changes is a change to check it again for.
        if let Ok(v) = &validation
            && let Some(spec) = &v.spec
        {
            for file in named_files(spec, 0) {
                if !deps.contains(&file) {
                    deps.push(file);
                }
            }
        }
        // The digest of the bytes that were checked, not of a second read: an edit
        // between the two would otherwise never be loaded.
        let digest = digest_of(&sources, &deps);
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (named, outcome) = match validation {
            Err(e) => (None, Err(problems_of_error(&e.to_string(), now))),
            Ok(v) => {
                let name = v
                    .spec
                    .as_ref()
                    .and_then(|s| s.graph.name.as_ref().map(|n| n.get_ref().clone()));
                let description = v
                    .spec
                    .as_ref()
                    .map(|s| s.graph.description.clone())
                    .unwrap_or_default();
                match (&v.spec, v.is_valid()) {
                    (Some(spec), true) => match crate::pipeline::compile(spec, &sources) {
                        Ok(g) => {
                            let (input_schema, output_schema, state_schema) =
                                super::schemas::schemas(spec);
                            let drawing = Drawing {
                                json: crate::render::json(spec),
                                mermaid: crate::render::mermaid(spec),
                                svg: crate::render::svg(spec),
                                details: crate::render::details(spec),
                                dot: crate::render::dot(spec),
                                input_schema,
                                output_schema,
                                state_schema,
                                config_schema: super::schemas::config_schema(spec),
                            };
                            (name, Ok((Arc::new(g), description, Arc::new(drawing))))
                        }
                        Err(e) => (name, Err(problems_of_error(&e.to_string(), now))),
                    },
                    _ => (name, Err(problems_of(&v.diagnostics, &sources, now))),
                }
            }
        };
        let mut s = lock(&self.inner);
        s.generation += 1;
        let gives_name = named.is_some();
        // The id: the name the file gives, else the one it served under, else its stem.
        let id = named
            .or_else(|| s.files.get(path).map(|f| f.id.clone()))
            .unwrap_or(stem);
        // A file that now names another graph no longer serves its old id.
        if let Some(old) = s.files.get(path).map(|f| f.id.clone())
            && old != id
            && s.by_id.get(&old).is_some_and(|g| g.path == path)
        {
            s.by_id.remove(&old);
        }
        let taken = s
            .by_id
            .get(&id)
            .filter(|g| g.path != path)
            .map(|g| g.path.clone());
        let logged = s.files.get(path).and_then(|f| f.logged.clone());
        let problems = match (&outcome, &taken) {
            (_, Some(other)) => Some(problems_of_error(
                &format!(
                    "error: graph `{id}` is already served from `{}`; give this graph another `[graph] name`\n",
                    other.display()
                ),
                now,
            )),
            (Err(p), None) => Some(p.clone()),
            (Ok(_), None) => None,
        };
        let repeated = problems.as_ref().map(|p| &p.rendered) == logged.as_ref();
        s.files.insert(
            path.to_path_buf(),
            FileState {
                digest: if taken.is_some() {
                    digest + ":taken"
                } else {
                    digest
                },
                deps,
                id: id.clone(),
                logged: problems.as_ref().map(|p| p.rendered.clone()),
                named: gives_name,
            },
        );
        if taken.is_some() {
            drop(s);
            if let (Some(problems), false) = (problems, repeated) {
                self.notice(Notice::GraphInvalid {
                    graph: id,
                    path: path.display().to_string(),
                    errors: 1,
                    rendered: problems.rendered,
                    serving: None,
                });
            }
            return;
        }
        match outcome {
            Ok((graph, description, drawing)) => {
                let hash = graph.hash.clone();
                s.versions.insert(hash.clone(), graph.clone());
                let entry = s.by_id.entry(id.clone()).or_insert_with(|| Served {
                    id: id.clone(),
                    path: path.to_path_buf(),
                    current: None,
                    problems: None,
                    description: String::new(),
                    created_ms: now,
                    updated_ms: now,
                    version: 0,
                    drawing: None,
                    changes: Vec::new(),
                });
                entry.changes = match &entry.current {
                    Some(old) => crate::graph::diff(&old.shape, &graph.shape)
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                    None => Vec::new(),
                };
                entry.current = Some(graph);
                entry.drawing = Some(drawing);
                entry.problems = None;
                entry.description = description;
                entry.updated_ms = now;
                entry.version += 1;
                drop(s);
                self.notice(Notice::GraphLoaded {
                    graph: id,
                    path: path.display().to_string(),
                    hash,
                });
            }
            Err(problems) => {
                let entry = s.by_id.entry(id.clone()).or_insert_with(|| Served {
                    id: id.clone(),
                    path: path.to_path_buf(),
                    current: None,
                    problems: None,
                    description: String::new(),
                    created_ms: now,
                    updated_ms: now,
                    version: 0,
                    drawing: None,
                    changes: Vec::new(),
                });
                if repeated {
                    // Checked again (it may lack a file that has appeared), as broken.
                    return;
                }
                entry.problems = Some(problems.clone());
                entry.updated_ms = now;
                let serving = entry.current.as_ref().map(|g| g.hash.clone());
                drop(s);
                self.notice(Notice::GraphInvalid {
                    graph: id,
                    path: path.display().to_string(),
                    errors: problems.errors,
                    rendered: problems.rendered,
                    serving,
                });
            }
        }
    }
}

/// The graph files under `roots`, sorted, each once.
fn graph_files(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        if root.is_dir() {
            if let Ok(entries) = std::fs::read_dir(root) {
                let mut found: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
                    // A graph's tests beside it are no graph.
                    .filter(|p| !crate::testing::is_test_file(p))
                    .collect();
                found.sort();
                out.extend(found);
            }
        } else {
            out.push(root.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// [`digest`] of the files as `sources` holds them (a file it lacks was missing).
fn digest_of(sources: &Sources, files: &[PathBuf]) -> String {
    let mut h = Sha256::new();
    for (i, f) in files.iter().enumerate() {
        h.update(f.as_os_str().as_encoded_bytes());
        // A file the check read is hashed as it read it; one it did not (missing,
        // refused) as the disk has it now, as a poll hashes it, so the two agree.
        let read = sources
            .names()
            .get(i)
            .filter(|n| Path::new(n) == f.as_path());
        match read {
            Some(_) => {
                h.update(b"\x01");
                h.update(sources.text(i).as_bytes());
            }
            None => match std::fs::read(f) {
                Ok(bytes) => {
                    h.update(b"\x01");
                    h.update(&bytes);
                }
                Err(_) => h.update(b"\x00"),
            },
        }
    }
    format!("{:x}", h.finalize())
}

/// The files a graph names, resolved, and those its subgraphs name in turn (a few
/// levels down: a graph that includes itself is refused by the checker).
fn named_files(spec: &crate::spec::GraphSpec, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for named in spec.named_files() {
        let file = spec.resolve(named);
        let is_graph = spec.nodes.iter().any(|n| {
            matches!(&n.body, crate::spec::KindSpec::Graph(g) if g.graph.as_ref().is_some_and(|p| p.get_ref() == named))
        });
        if is_graph
            && depth < 8
            && let Ok(text) = std::fs::read_to_string(&file)
            && let Some(child) = crate::load::load_str(&file, &text, &mut Sources::new()).spec
        {
            out.extend(named_files(&child, depth + 1));
        }
        out.push(file);
    }
    out
}

/// A digest of the files' contents (a missing file counts as missing).
fn digest(files: &[PathBuf]) -> String {
    let mut h = Sha256::new();
    for f in files {
        h.update(f.as_os_str().as_encoded_bytes());
        match std::fs::read(f) {
            Ok(bytes) => {
                h.update(b"\x01");
                h.update(&bytes);
            }
            Err(_) => h.update(b"\x00"),
        }
    }
    format!("{:x}", h.finalize())
}

fn problems_of(diagnostics: &[Diagnostic], sources: &Sources, at_ms: u64) -> Problems {
    Problems {
        rendered: diagnostics
            .iter()
            .map(|d| d.render(sources))
            .collect::<Vec<_>>()
            .join("\n"),
        diagnostics: diagnostics
            .iter()
            .map(|d| serde_json::to_value(d.to_json(sources)).unwrap_or_default())
            .collect(),
        errors: diagnostics.iter().filter(|d| d.is_error()).count(),
        at_ms,
    }
}

fn problems_of_error(message: &str, at_ms: u64) -> Problems {
    let rendered = if message.starts_with("error:") {
        message.to_string()
    } else {
        format!("error: {message}\n")
    };
    Problems {
        diagnostics: vec![
            serde_json::json!({ "severity": "error", "message": message.trim_start_matches("error: ").trim_end() }),
        ],
        rendered,
        errors: 1,
        at_ms,
    }
}
