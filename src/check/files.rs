//! The files a graph names: prompt templates must parse, schema files must be JSON and
//! valid JSON Schema (draft 2020-12).

use super::{Cx, DiagExt, TemplateFile};
use crate::diagnostic::Diagnostic;
use crate::source::{FileProblem, Sources};
use crate::spec::{KindSpec, Sp};

pub(super) fn check(cx: &mut Cx<'_>, sources: &mut Sources) {
    let spec = cx.spec;
    let mut schema_paths: Vec<&Sp<String>> = spec
        .state
        .iter()
        .filter_map(|f| f.schema.as_ref())
        .collect();
    let mut prompt_paths: Vec<(&Sp<String>, Option<&str>)> = Vec::new();
    for node in &spec.nodes {
        match &node.body {
            KindSpec::Llm(l) => {
                schema_paths.extend(l.schema.iter());
                schema_paths.extend(l.pseudo_tools.iter().filter_map(|p| p.schema.as_ref()));
                let item = node.map.as_ref().map(|m| m.var.get_ref().as_str());
                prompt_paths.extend(l.system.iter().chain(l.prompt.iter()).map(|p| (p, item)));
            }
            KindSpec::Interrupt(i) => schema_paths.extend(i.resume_schema.iter()),
            _ => {}
        }
    }
    for path in schema_paths {
        if !cx.schemas.contains_key(path.get_ref()) {
            let loaded = load_schema(cx, sources, path);
            cx.schemas.insert(path.get_ref().clone(), loaded);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for &(path, item) in &prompt_paths {
        if seen.insert(path.get_ref().clone()) {
            // A prompt a mapped node renders may read its item.
            let item = item.or_else(|| {
                prompt_paths
                    .iter()
                    .find(|(p, i)| p.get_ref() == path.get_ref() && i.is_some())
                    .and_then(|(_, i)| *i)
            });
            load_template(cx, sources, path, item);
        }
    }
}

pub(super) fn read(cx: &mut Cx<'_>, path: &Sp<String>, what: &str) -> Option<(String, String)> {
    let spec = cx.spec;
    match crate::source::read_graph_file(&spec.root, path.get_ref(), spec.graph.allow_outside_root)
    {
        Ok((full, text)) => Some((full.display().to_string(), text)),
        Err(problem) => {
            let root = spec.root.display().to_string();
            let full = spec.resolve(path.get_ref());
            let (code, help) = match problem {
                FileProblem::Absolute | FileProblem::Escapes | FileProblem::Outside(_) => (
                    "outside-root",
                    format!(
                        "a graph reads only files under its root, `{root}`; to share files from elsewhere, set `allow_outside_root = true` in `[graph]`"
                    ),
                ),
                FileProblem::NotAFile | FileProblem::TooLarge(_) | FileProblem::Kernel(_) => (
                    "bad-file",
                    format!(
                        "prompts and schemas are regular files of at most {} bytes",
                        crate::source::MAX_FILE_BYTES
                    ),
                ),
                FileProblem::Io(_) => (
                    "missing-file",
                    format!(
                        "paths resolve against the graph's root, `{root}` (see `root` in `[graph]`)"
                    ),
                ),
            };
            cx.error(
                code,
                path.span(),
                format!("cannot read {what} `{}`", full.display()),
            )
            .with_label(problem.to_string())
            .with_help(help);
            None
        }
    }
}

fn load_schema(
    cx: &mut Cx<'_>,
    sources: &mut Sources,
    path: &Sp<String>,
) -> Option<serde_json::Value> {
    let (name, text) = read(cx, path, "schema file")?;
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(err) => {
            let offset = offset_of(&text, err.line(), err.column());
            let file = sources.add(name.clone(), text);
            let msg = err.to_string();
            let msg = msg.split(" at line").next().unwrap_or(&msg).to_string();
            cx.diags.push(
                Diagnostic::error(
                    "bad-json",
                    file,
                    offset..offset + 1,
                    format!("schema file `{name}` is not valid JSON"),
                )
                .label(msg)
                .note(format!("named by `{}` in the graph", path.get_ref())),
            );
            return None;
        }
    };
    if let Some(draft) = value.get("$schema").and_then(|s| s.as_str())
        && !draft.contains("2020-12")
    {
        cx.error("schema-draft", path.span(), format!("schema `{name}` declares `$schema` {draft}"))
            .with_label("not draft 2020-12")
            .with_help("set `\"$schema\": \"https://json-schema.org/draft/2020-12/schema\"`, the draft Switchyard validates with");
        return None;
    }
    let problem = match jsonschema::draft202012::meta::validate(&value) {
        Err(err) => Some(format!(
            "{err} (at `{}`)",
            pointer(err.instance_path().as_str())
        )),
        Ok(()) => jsonschema::draft202012::new(&value)
            .err()
            .map(|e| e.to_string()),
    };
    if let Some(problem) = problem {
        cx.error(
            "bad-schema",
            path.span(),
            format!("`{name}` is not a valid JSON Schema (draft 2020-12)"),
        )
        .with_label(problem)
        .with_help("check the schema against https://json-schema.org/draft/2020-12/schema");
        return None;
    }
    let file = sources.add(name, text.clone());
    cx.schema_files.insert(path.get_ref().clone(), (file, text));
    Some(value)
}

fn pointer(p: &str) -> &str {
    if p.is_empty() { "/" } else { p }
}

fn load_template(cx: &mut Cx<'_>, sources: &mut Sources, path: &Sp<String>, item: Option<&str>) {
    let Some((name, text)) = read(cx, path, "prompt file") else {
        return;
    };
    let file = sources.add(name.clone(), text.clone());
    // Measured before it is parsed: the parser recurses, and a template deep enough
    // would overflow its stack.
    if let Some(why) = crate::jinja::limits::too_complex(&text, true) {
        cx.diags.push(
            Diagnostic::error(
                "too-complex",
                file,
                0..text.len().min(1),
                format!("prompt `{name}` is too complex to check"),
            )
            .label(why)
            .note(format!("named by `{}` in the graph", path.get_ref())),
        );
        return;
    }
    let env = crate::jinja::environment();
    match env.template_from_named_str(&name, &text) {
        Ok(_) => cx.templates.push(TemplateFile {
            file,
            text,
            item: item.map(str::to_string),
        }),
        Err(err) => {
            let span = err.range().unwrap_or_else(|| {
                let start = offset_of(&text, err.line().unwrap_or(1), 1);
                start..start
            });
            cx.diags.push(
                Diagnostic::error(
                    "bad-template",
                    file,
                    span,
                    format!("prompt `{name}` is not a valid template"),
                )
                .label(jinja_message(&err))
                .note(format!("named by `{}` in the graph", path.get_ref())),
            );
        }
    }
}

/// The useful part of a minijinja error: its detail, else its kind.
pub(crate) fn jinja_message(err: &minijinja::Error) -> String {
    match err.detail() {
        Some(detail) => format!("{}: {detail}", err.kind()),
        None => err.kind().to_string(),
    }
}

/// Byte offset of a 1-based line and column.
pub(crate) fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + column.saturating_sub(1)).min(text.len())
}
