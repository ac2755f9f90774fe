//! Load: graph file text -> [`GraphSpec`], keeping every position.
//!
//! TOML syntax errors stop loading (there is no tree to read); every other problem of
//! shape (unknown keys, wrong value types, missing required keys) is collected and the
//! rest of the file is still read, so the checker can report its own findings too.

mod budget;
mod consts;
mod node;
mod reader;
pub(crate) use reader::article;
mod sampling;
mod server;

use crate::diagnostic::Diagnostic;
use crate::source::{FileId, Sources};
use crate::spec::{
    FieldSpec, FieldType, GraphHeader, GraphSpec, LlmDefaults, Reducer, Sp, TYPE_NAMES,
    parse_field_type,
};
use crate::suggestion::help_for;
use reader::{Table, to_json};
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

/// The outcome of loading one file: the spec when the TOML parsed, and every problem.
pub(crate) struct Loaded {
    pub spec: Option<GraphSpec>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Why a graph file could not be read at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot read `{path}`")]
pub struct ReadError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Reads and loads a graph file.
pub(crate) fn load_file(path: &Path, sources: &mut Sources) -> Result<Loaded, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(load_str(path, &text, sources))
}

/// Loads graph text as if it were the file at `path` (which decides the root).
pub(crate) fn load_str(path: &Path, text: &str, sources: &mut Sources) -> Loaded {
    let file = sources.add(path.display().to_string(), text);
    let mut diags = Vec::new();
    let doc = match DeTable::parse(text) {
        Ok(doc) => doc,
        Err(mut err) => {
            err.set_input(Some(text));
            let span = err.span().unwrap_or(0..0);
            let mut d =
                Diagnostic::error("toml-syntax", file, span, err.message().trim().to_string())
                    .label("invalid TOML");
            d.preformatted = Some(format!(
                "error: invalid TOML in `{}`\n{err}",
                path.display()
            ));
            return Loaded {
                spec: None,
                diagnostics: vec![d],
            };
        }
    };
    let mut top = Table::new(file, "the graph file", doc.span(), doc.get_ref());
    let header = read_header(&mut top, &mut diags);
    let llm = read_llm(&mut top, &mut diags);
    let servers = read_named(&mut top, "servers", &mut diags, server::read_server);
    let mut state = read_named(&mut top, "state", &mut diags, read_field);
    consts::read_consts(&mut top, &mut state, &mut diags);
    consts::read_configurable(&mut top, &mut state, &mut diags);
    let nodes = read_named(&mut top, "nodes", &mut diags, node::read_node);
    let budget = budget::read_budget(&mut top, &mut diags);
    top.finish(
        &[
            "graph",
            "llm",
            "budget",
            "consts",
            "configurable",
            "servers",
            "state",
            "nodes",
        ],
        &mut diags,
    );

    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let root = match &header.root {
        Some(r) => base.join(r.get_ref()),
        None => base.to_path_buf(),
    };
    let spec = GraphSpec::new(
        file,
        path.to_path_buf(),
        root,
        header,
        llm,
        servers,
        state,
        nodes,
        budget,
    );
    Loaded {
        spec: Some(spec),
        diagnostics: diags,
    }
}

fn read_header(top: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> GraphHeader {
    let Some(mut t) = top.table("graph", diags) else {
        if !top.has("graph") {
            diags.push(
                Diagnostic::error("missing-graph", top.file, 0..0, "the file has no `[graph]` table")
                    .label("expected `[graph]` with `name` and `entry`")
                    .help("start the file with `[graph]`, `name = \"...\"` and `entry = \"<first node>\"`"),
            );
        }
        return GraphHeader::default();
    };
    t.what = "`[graph]`".into();
    let h = GraphHeader {
        span: t.span.clone(),
        name: t.str("name", diags),
        description: t
            .str("description", diags)
            .map(|s| s.into_inner())
            .unwrap_or_default(),
        entry: t.str("entry", diags),
        root: t.str("root", diags),
        max_steps: t.uint("max_steps", 1, diags),
        max_wall_time: t.duration("max_wall_time", diags),
        max_tokens: t.uint("max_tokens", 1, diags),
        on_limit: t.str("on_limit", diags),
        require_policy: t.bool("require_policy", diags).unwrap_or(false),
        allow_outside_root: t.bool("allow_outside_root", diags).unwrap_or(false),
        input: consts::names_list(&mut t, "input", diags),
        output: consts::names_list(&mut t, "output", diags),
    };
    for (key, present) in [("name", h.name.is_some()), ("entry", h.entry.is_some())] {
        if !present && !t.has(key) {
            diags.push(
                Diagnostic::error(
                    "missing-key",
                    t.file,
                    t.span.clone(),
                    format!("`[graph]` has no `{key}`"),
                )
                .label(format!("`{key}` is required")),
            );
        }
    }
    t.finish(
        &[
            "name",
            "description",
            "entry",
            "root",
            "max_steps",
            "max_wall_time",
            "max_tokens",
            "on_limit",
            "require_policy",
            "allow_outside_root",
        ],
        diags,
    );
    h
}

fn read_llm(top: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> LlmDefaults {
    let Some(mut t) = top.table("llm", diags) else {
        return LlmDefaults::default();
    };
    t.what = "`[llm]`".into();
    let llm = LlmDefaults {
        model: t.str("model", diags),
        base_url_env: t.str("base_url_env", diags).map(Sp::into_inner),
        api_key_env: t.str("api_key_env", diags).map(Sp::into_inner),
        temperature: t.float("temperature", diags),
        timeout: t.duration("timeout", diags),
        strict: t.bool("strict", diags),
        provider: t.str("provider", diags),
        sampling: sampling::read(&mut t, diags),
        prices: budget::read_prices(&mut t, diags),
    };
    if let Some(p) = &llm.provider
        && let Err(help) = crate::spec::parse_provider(p)
    {
        diags.push(
            Diagnostic::error(
                "bad-value",
                t.file,
                p.span(),
                format!("`{}` is not a provider", p.get_ref()),
            )
            .label("unknown provider")
            .help(help),
        );
    }
    let keys: Vec<&str> = [
        "model",
        "base_url_env",
        "api_key_env",
        "temperature",
        "timeout",
        "strict",
        "provider",
        "prices",
    ]
    .into_iter()
    .chain(sampling::KEYS)
    .collect();
    t.finish(&keys, diags);
    llm
}

/// Reads a table of user-named entries (`[nodes.x]`, `[state.y]`), each itself a table.
fn read_named<T>(
    top: &mut Table<'_, '_>,
    key: &str,
    diags: &mut Vec<Diagnostic>,
    read: impl Fn(FileId, Sp<String>, &reader::Value<'_>, &mut Vec<Diagnostic>) -> Option<T>,
) -> Vec<T> {
    let Some(mut t) = top.table(key, diags) else {
        return Vec::new();
    };
    let file = t.file;
    let mut out = Vec::new();
    for (name, value) in t.drain() {
        check_name(file, &name, key, diags);
        match value.get_ref() {
            DeValue::Table(_) => out.extend(read(file, name, value, diags)),
            other => diags.push(
                Diagnostic::error(
                    "wrong-type",
                    file,
                    value.span(),
                    format!(
                        "`{key}.{}` must be a table, not {}",
                        name.get_ref(),
                        other.type_str()
                    ),
                )
                .label("expected a table")
                .help(format!(
                    "write it as `[{key}.{}]` followed by its keys",
                    name.get_ref()
                )),
            ),
        }
    }
    out
}

/// Whether `name` may name a node, field or server: an identifier, so that it works
/// unquoted in expressions and templates.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` is kept for the language in `section` (`nodes`, `state`, ...):
/// `END` for a node, `run` and `result` for what expressions read.
pub(crate) fn is_reserved(section: &str, name: &str) -> bool {
    match section {
        "nodes" => name == crate::spec::END,
        "state" | "consts" | "configurable" => name == "run" || name == "result",
        _ => false,
    }
}

/// Names are identifiers so they work unquoted in expressions and templates.
fn check_name(file: FileId, name: &Sp<String>, section: &str, diags: &mut Vec<Diagnostic>) {
    let n = name.get_ref();
    if !is_identifier(n) {
        diags.push(
            Diagnostic::error("bad-name", file, name.span(), format!("`{n}` is not a valid name"))
                .label("not an identifier")
                .help("names start with a letter or `_` and hold only letters, digits and `_`, so expressions can read them"),
        );
    }
    if is_reserved(section, n) {
        diags.push(
            Diagnostic::error(
                "reserved-name",
                file,
                name.span(),
                format!("`{n}` is a reserved name"),
            )
            .label("reserved")
            .help(match section {
                "nodes" => {
                    "`END` is the end of the graph; name the node something else".to_string()
                }
                _ => format!(
                    "`{n}` is a built-in variable of expressions; name the field something else"
                ),
            }),
        );
    }
}

fn read_field(
    file: FileId,
    name: Sp<String>,
    v: &reader::Value<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<FieldSpec> {
    let DeValue::Table(table) = v.get_ref() else {
        return None;
    };
    let mut t = Table::new(
        file,
        format!("`[state.{}]`", name.get_ref()),
        v.span(),
        table,
    );
    let ty = match t.str("type", diags) {
        Some(s) => match parse_field_type(s.get_ref()) {
            Ok(ty) => Sp::new(s.span(), ty),
            Err(why) => {
                let word = s.get_ref().split(['<', '?', '>']).next().unwrap_or("");
                let help = help_for(word, TYPE_NAMES).unwrap_or_else(|| {
                    "types are string, int, float, bool, json, object, messages, list<T>, map<T>, with `?` for optional".into()
                });
                diags.push(
                    Diagnostic::error(
                        "bad-type",
                        file,
                        s.span(),
                        format!("field `{}` has an invalid type", name.get_ref()),
                    )
                    .label(why)
                    .help(help),
                );
                Sp::new(s.span(), FieldType::Json)
            }
        },
        None => {
            if !t.has("type") {
                diags.push(
                    Diagnostic::error(
                        "missing-key",
                        file,
                        name.span(),
                        format!("field `{}` has no `type`", name.get_ref()),
                    )
                    .label("`type` is required")
                    .help("add e.g. `type = \"string\"`"),
                );
            }
            Sp::new(name.span(), FieldType::Json)
        }
    };
    let default = t
        .raw("default")
        .map(|d| Sp::new(d.span(), to_json(d.get_ref())));
    let reducer = t
        .str("reducer", diags)
        .and_then(|r| match Reducer::parse(r.get_ref()) {
            Some(red) => Some(Sp::new(r.span(), red)),
            None => {
                diags.push(
                    Diagnostic::error(
                        "bad-reducer",
                        file,
                        r.span(),
                        format!("`{}` is not a reducer", r.get_ref()),
                    )
                    .label("unknown reducer")
                    .help(
                        help_for(r.get_ref(), Reducer::NAMES).unwrap_or_else(|| {
                            "reducers are replace, append, add, merge and messages".into()
                        }),
                    ),
                );
                None
            }
        });
    let schema = t.str("schema", diags);
    let description = t
        .str("description", diags)
        .map(Sp::into_inner)
        .unwrap_or_default();
    let required = t.bool("required", diags).unwrap_or(false);
    t.finish(
        &[
            "type",
            "default",
            "reducer",
            "schema",
            "description",
            "required",
        ],
        diags,
    );
    Some(FieldSpec {
        name,
        ty,
        default,
        reducer,
        schema,
        description,
        constant: false,
        configurable: None,
        required,
    })
}
