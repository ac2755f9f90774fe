//! Data flow: every variable an expression, inline template or prompt file reads is a
//! declared state field or a built-in, and properties read from a field with a closed
//! schema exist.

use super::files::jinja_message;
use super::schema_path::{At, resolve};
use super::sources::Source;
use super::{Cx, DiagExt};
use crate::diagnostic::Diagnostic;
use crate::source::FileId;
use crate::spec::RUN_KEYS;
use crate::spec::Sp;
use crate::suggestion::help_for;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

/// minijinja's global functions, which look like variables to the analysis.
const GLOBALS: [&str; 4] = ["range", "dict", "namespace", "loop"];

/// Whether `result` may be read where the expression stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    State,
    WithResult,
}

struct Flow<'a, 'c, 's> {
    cx: &'c mut Cx<'s>,
    schemas: &'a HashMap<String, Value>,
    env: minijinja::Environment<'static>,
}

pub(super) fn check(cx: &mut Cx<'_>, schemas: &HashMap<String, Value>) {
    let spec = cx.spec;
    let templates = std::mem::take(&mut cx.templates);
    let mut flow = Flow {
        cx,
        schemas,
        env: crate::jinja::environment(),
    };
    for source in super::sources::sources(spec) {
        match source {
            Source::Expr { text, result, item } => flow.expr(
                text,
                if result {
                    Scope::WithResult
                } else {
                    Scope::State
                },
                item,
            ),
            Source::Template { text, item } => flow.template(text, item),
        }
    }
    for t in &templates {
        flow.template_file(t);
    }
    flow.cx.templates = templates;
}

impl Flow<'_, '_, '_> {
    fn expr(&mut self, e: &Sp<String>, scope: Scope, item: Option<&str>) {
        let vars = match self.env.compile_expression(e.get_ref()) {
            Ok(expr) => expr.undeclared_variables(true),
            Err(err) => {
                self.cx
                    .error("bad-expression", e.span(), "invalid expression")
                    .with_label(jinja_message(&err))
                    .with_help("expressions use minijinja syntax: `count >= 3`, `action.kind in ['a', 'b']`");
                return;
            }
        };
        self.vars(vars, scope, self.cx.file, e.span(), None, item);
        self.callables(e.get_ref(), true, self.cx.file, e.span(), None);
    }

    fn template(&mut self, t: &Sp<String>, item: Option<&str>) {
        let vars = match self.env.template_from_str(t.get_ref()) {
            Ok(tmpl) => tmpl.undeclared_variables(true),
            Err(err) => {
                self.cx
                    .error("bad-template", t.span(), "invalid template")
                    .with_label(jinja_message(&err))
                    .with_help("templates use minijinja syntax: `Hello {{ name }}`");
                return;
            }
        };
        self.vars(vars, Scope::State, self.cx.file, t.span(), None, item);
        self.callables(t.get_ref(), false, self.cx.file, t.span(), None);
    }

    fn template_file(&mut self, t: &super::TemplateFile) {
        let Ok(tmpl) = self.env.template_from_str(&t.text) else {
            return;
        };
        let vars = tmpl.undeclared_variables(true);
        self.vars(
            vars,
            Scope::State,
            t.file,
            0..t.text.len(),
            Some(&t.text),
            t.item.as_deref(),
        );
        self.callables(&t.text, false, t.file, 0..t.text.len(), Some(&t.text));
    }

    /// Filters (`x | name`) and tests (`x is name`) that minijinja does not have. They
    /// are looked up only when a template renders, so without this a misspelt filter
    /// would pass `validate` and fail the run.
    fn callables(
        &mut self,
        source: &str,
        in_expr: bool,
        file: FileId,
        span: Range<usize>,
        text: Option<&str>,
    ) {
        for (kind, name) in callables(source, in_expr) {
            let probe = match kind {
                Callable::Filter => format!("{{{{ none | {name} }}}}"),
                Callable::Test => format!("{{{{ none is {name} }}}}"),
                Callable::Load => {
                    let hay = text.unwrap_or(&self.cx.text);
                    let at = narrow(hay, &span, &name, &name);
                    self.cx.diags.push(
                        Diagnostic::error(
                            "template-load",
                            file,
                            at,
                            format!("a template cannot `{name}` another file"),
                        )
                        .label("templates are loaded one by one, without a loader")
                        .help(
                            "write the shared text into each prompt, or pass it in through a state field",
                        ),
                    );
                    continue;
                }
            };
            let unknown = match self.env.render_str(&probe, ()) {
                Err(e) => matches!(
                    e.kind(),
                    minijinja::ErrorKind::UnknownFilter | minijinja::ErrorKind::UnknownTest
                ),
                Ok(_) => false,
            };
            if !unknown {
                continue;
            }
            let (what, known): (&str, Vec<&str>) = match kind {
                Callable::Filter => (
                    "filter",
                    FILTERS
                        .iter()
                        .chain(&crate::jinja::FILTERS)
                        .copied()
                        .collect(),
                ),
                _ => ("test", TESTS.to_vec()),
            };
            let hay = text.unwrap_or(&self.cx.text);
            let at = narrow(hay, &span, &name, &name);
            let mut d = Diagnostic::error(
                "unknown-filter",
                file,
                at,
                format!("minijinja has no {what} `{name}`"),
            )
            .label(format!("unknown {what}"))
            .help_opt(help_for(&name, known.iter().copied()));
            if file != self.cx.file {
                d = d.note("prompt templates may use minijinja's built-in filters and tests");
            }
            self.cx.diags.push(d);
        }
    }

    /// Checks each variable read inside `span` of `file`. `text` is the file's text when
    /// it is a template file; for the graph file the TOML text is used.
    fn vars(
        &mut self,
        vars: std::collections::HashSet<String>,
        scope: Scope,
        file: FileId,
        span: Range<usize>,
        text: Option<&str>,
        item: Option<&str>,
    ) {
        let vars: BTreeSet<String> = vars.into_iter().collect();
        for var in vars {
            let segs: Vec<&str> = var.split('.').collect();
            if Some(segs[0]) == item {
                continue;
            }
            let Some(problem) = self.problem(&segs, scope) else {
                continue;
            };
            let hay = text.unwrap_or(&self.cx.text);
            let at = narrow(hay, &span, &var, segs[0]);
            let mut d = Diagnostic::error(problem.code, file, at, problem.message)
                .label(problem.label)
                .help_opt(problem.help);
            if file != self.cx.file {
                d = d.note("prompt templates read state fields and `run`");
            }
            self.cx.diags.push(d);
        }
    }

    fn problem(&self, segs: &[&str], scope: Scope) -> Option<Problem> {
        let first = segs[0];
        if GLOBALS.contains(&first) {
            return None;
        }
        if first == "run" {
            let key = segs.get(1)?;
            if RUN_KEYS.contains(key) {
                return None;
            }
            return Some(Problem {
                code: "unknown-variable",
                message: format!("`run` has no `{key}`"),
                label: "not a key of `run`".into(),
                help: Some(
                    help_for(key, RUN_KEYS)
                        .unwrap_or_else(|| format!("`run` has {}", list(&RUN_KEYS))),
                ),
            });
        }
        if first == "result" {
            return (scope == Scope::State).then(|| Problem {
                code: "result-scope",
                message: "`result` is not available here".into(),
                label: "read outside `set`, `fallback` and `cache.key`".into(),
                help: Some("read the node's output from the state field it was written to".into()),
            });
        }
        if self.cx.spec.field(first).is_none() {
            let candidates: Vec<&str> = self.cx.field_names().chain(["run"]).collect();
            let help = help_for(first, candidates.iter().copied()).unwrap_or_else(|| {
                format!("declare `[state.{first}]`, or read one of the declared fields")
            });
            return Some(Problem {
                code: "unknown-variable",
                message: format!("`{first}` is not a state field"),
                label: "undeclared variable".into(),
                help: Some(help),
            });
        }
        let schema = self.schemas.get(first)?;
        match resolve(schema, &segs[1..]) {
            At::NoProperty { name, known } => Some(Problem {
                code: "unknown-property",
                message: {
                    let owner = segs
                        .iter()
                        .take_while(|s| **s != name)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(".");
                    format!("`{owner}` has no property `{name}`")
                },
                label: "not in the field's schema".into(),
                help: Some(
                    help_for(&name, known.iter().map(String::as_str)).unwrap_or_else(|| {
                        format!(
                            "its schema has {}",
                            list(&known.iter().map(String::as_str).collect::<Vec<_>>())
                        )
                    }),
                ),
            }),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Callable {
    Filter,
    Test,
    /// `{% include %}`, `{% import %}`, `{% from %}` or `{% extends %}`: a template
    /// that loads another file, which graphs do not have.
    Load,
}

/// The filters and tests a template or expression applies, by name, in order of first
/// use. Reads minijinja's own tokens, so `|` inside a string literal is not a filter.
fn callables(source: &str, in_expr: bool) -> Vec<(Callable, String)> {
    use minijinja::machinery::{Token, tokenize};
    let mut out: Vec<(Callable, String)> = Vec::new();
    let mut prev: [Option<Token<'_>>; 2] = [None, None];
    for token in tokenize(source, in_expr, Default::default()) {
        // A template that does not tokenize is reported by the syntax check.
        let Ok((token, _)) = token else { break };
        let found = match (&prev, &token) {
            ([_, Some(Token::BlockStart)], Token::Ident(tag))
                if ["include", "import", "from", "extends"].contains(tag) =>
            {
                Some((Callable::Load, *tag))
            }
            ([_, Some(Token::Pipe)], Token::Ident(name)) => Some((Callable::Filter, *name)),
            ([_, Some(Token::Ident("is"))], Token::Ident(name)) if *name != "not" => {
                Some((Callable::Test, *name))
            }
            ([Some(Token::Ident("is")), Some(Token::Ident("not"))], Token::Ident(name)) => {
                Some((Callable::Test, *name))
            }
            _ => None,
        };
        if let Some((kind, name)) = found
            && !out.iter().any(|(k, n)| *k == kind && n == name)
        {
            out.push((kind, name.to_string()));
        }
        prev = [prev[1].take(), Some(token)];
    }
    out
}

/// minijinja's built-in filters and tests, for did-you-mean hints.
const FILTERS: [&str; 47] = [
    "abs",
    "attr",
    "batch",
    "bool",
    "capitalize",
    "chain",
    "count",
    "default",
    "dictsort",
    "escape",
    "first",
    "float",
    "format",
    "groupby",
    "indent",
    "int",
    "items",
    "join",
    "last",
    "length",
    "lines",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "split",
    "string",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
    "urlencode",
    "zip",
];
const TESTS: [&str; 26] = [
    "boolean",
    "defined",
    "divisibleby",
    "endingwith",
    "eq",
    "equalto",
    "even",
    "false",
    "filter",
    "float",
    "ge",
    "gt",
    "in",
    "integer",
    "iterable",
    "le",
    "lower",
    "lt",
    "mapping",
    "ne",
    "none",
    "number",
    "odd",
    "safe",
    "sameas",
    "sequence",
];

struct Problem {
    code: &'static str,
    message: String,
    label: String,
    help: Option<String>,
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The span of `var` (or its first segment) as a whole word inside `span`, so the caret
/// sits under the name rather than the whole string.
fn narrow(text: &str, span: &Range<usize>, var: &str, first: &str) -> Range<usize> {
    let Some(hay) = text.get(span.clone()) else {
        return span.clone();
    };
    for word in [var, first] {
        if let Some(at) = find_word(hay, word) {
            return span.start + at..span.start + at + word.len();
        }
    }
    span.clone()
}

fn find_word(hay: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = hay[from..].find(word) {
        let at = from + i;
        let before = hay[..at].chars().next_back();
        let after = hay[at + word.len()..].chars().next();
        if !before.is_some_and(|c| is_ident(c) || c == '.') && !after.is_some_and(is_ident) {
            return Some(at);
        }
        from = at + word.len().max(1);
    }
    None
}
