//! A test file checked against its graph before any case runs: every node, field,
//! server and route it names exists, and each entry says one thing. A mistake is a
//! diagnostic in the test file, as the graph checker's are in the graph file.

use super::file::{CaseSpec, ExpectSpec, FileSpec, ToolsSpec};
use crate::diagnostic::Diagnostic;
use crate::source::FileId;
use crate::spec::{END, GraphSpec, NodeKind};
use crate::suggestion::help_for;
use serde_json::Value as Json;
use std::collections::HashSet;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

/// A route as a test writes it: `from -> to`, or `from -> to [case]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    pub from: String,
    pub to: String,
    pub case: Option<String>,
}

impl Route {
    pub(crate) fn parse(text: &str) -> Option<Route> {
        let (from, rest) = text.split_once("->")?;
        let rest = rest.trim();
        let (to, case) = match rest.split_once('[') {
            Some((to, case)) => (to.trim(), Some(case.strip_suffix(']')?.trim().to_string())),
            None => (rest, None),
        };
        let from = from.trim();
        (!from.is_empty() && !to.is_empty() && !to.contains(char::is_whitespace)).then(|| Route {
            from: from.to_string(),
            to: to.to_string(),
            case,
        })
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", self.from, self.to)?;
        if let Some(c) = &self.case {
            write!(f, " [{c}]")?;
        }
        Ok(())
    }
}

struct Checker<'a> {
    file: FileId,
    graph: &'a GraphSpec,
    out: Vec<Diagnostic>,
}

/// Every problem of `spec` (read from the file `file` at `path`) against `graph`.
pub(crate) fn check(
    file: FileId,
    path: &Path,
    spec: &FileSpec,
    graph: &GraphSpec,
) -> Vec<Diagnostic> {
    let mut c = Checker {
        file,
        graph,
        out: Vec::new(),
    };
    let dir = path.parent().unwrap_or(Path::new(""));
    for (name, server) in &spec.servers {
        c.server(name);
        if let ToolsSpec::File(f) = server.tools.get_ref()
            && !dir.join(f).is_file()
        {
            c.error(
                "test-missing-file",
                server.tools.span(),
                format!("the tools file `{f}` does not exist"),
                "run `switchyard tools GRAPH --server NAME --format json > FILE` to write it",
            );
        }
    }
    let mut names = HashSet::new();
    if spec.cases.is_empty() {
        c.out.push(Diagnostic::warning(
            "test-no-case",
            file,
            0..0,
            "the test file has no `[[case]]`",
        ));
    }
    for case in &spec.cases {
        let name = case.name.get_ref();
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        {
            c.error(
                "test-case-name",
                case.name.span(),
                format!("the case name `{name}` is not ASCII letters, digits, `_` and `-`"),
                "a case name is how `--case` and the reports name it",
            );
        } else if !names.insert(name.as_str()) {
            c.error(
                "test-case-name",
                case.name.span(),
                format!("a case named `{name}` comes earlier in the file"),
                "give each case a name of its own",
            );
        }
        c.case(dir, case);
    }
    c.out
}

impl<'a> Checker<'a> {
    fn error(&mut self, code: &'static str, span: Range<usize>, message: String, help: &str) {
        self.out.push(
            Diagnostic::error(code, self.file, span, message)
                .label("here")
                .help(help),
        );
    }

    fn unknown(&mut self, what: &str, name: &Spanned<String>, known: Vec<&str>) {
        let hint = help_for(name.get_ref(), known.iter().copied());
        let message = format!("the graph has no {what} `{}`", name.get_ref());
        self.out.push(
            Diagnostic::error("test-unknown-name", self.file, name.span(), message)
                .label(format!("no such {what}"))
                .help_opt(hint),
        );
    }

    fn node_names(&self) -> Vec<&'a str> {
        let graph: &'a GraphSpec = self.graph;
        graph
            .nodes
            .iter()
            .map(|n| n.name.get_ref().as_str())
            .collect()
    }

    /// A node name the test gives: known, else an error. A reply may also answer a
    /// node of a subgraph's child graph (`children`: the graph has subgraph nodes);
    /// the path, the routes and the answers are the graph's own nodes'.
    fn node(&mut self, name: &Spanned<String>, children: bool) -> Option<NodeKind> {
        if let Some(n) = self.graph.node(name.get_ref()) {
            return Some(*n.kind.get_ref());
        }
        let subgraphs = children
            && self
                .graph
                .nodes
                .iter()
                .any(|n| *n.kind.get_ref() == NodeKind::Graph);
        if !subgraphs {
            let known = self.node_names();
            self.unknown("node", name, known);
        }
        None
    }

    fn field(&mut self, name: &Spanned<String>) {
        if self.graph.field(name.get_ref()).is_none() {
            let graph: &'a GraphSpec = self.graph;
            let known = graph
                .state
                .iter()
                .map(|f| f.name.get_ref().as_str())
                .collect();
            self.unknown("state field", name, known);
        }
    }

    fn server(&mut self, name: &Spanned<String>) {
        if self.graph.server(name.get_ref()).is_none() {
            let graph: &'a GraphSpec = self.graph;
            let known = graph
                .servers
                .iter()
                .map(|s| s.name.get_ref().as_str())
                .collect();
            self.unknown("server", name, known);
        }
    }

    /// An input (of the case, or of a later turn): a table of declared state fields.
    fn input(&mut self, input: &Spanned<Json>) {
        match input.get_ref() {
            Json::Object(fields) => {
                for k in fields.keys() {
                    if self.graph.field(k).is_none() {
                        let known: Vec<&str> = self
                            .graph
                            .state
                            .iter()
                            .map(|f| f.name.get_ref().as_str())
                            .collect();
                        let hint = help_for(k, known.iter().copied());
                        self.out.push(
                            Diagnostic::error(
                                "test-unknown-name",
                                self.file,
                                input.span(),
                                format!(
                                    "the input names `{k}`, and the graph has no such state field"
                                ),
                            )
                            .label("this input")
                            .help_opt(hint),
                        );
                    }
                }
            }
            _ => self.error(
                "test-input",
                input.span(),
                "the input is not a table of state fields".into(),
                "write `input = { field = value }`",
            ),
        }
    }

    fn case(&mut self, dir: &Path, case: &CaseSpec) {
        for input in case.input.iter().chain(&case.turns) {
            self.input(input);
        }
        if let Some(context) = &case.context
            && !context.get_ref().is_object()
        {
            self.error(
                "test-input",
                context.span(),
                "the context is not a table of configurable values".into(),
                "write `context = { NAME = value }`",
            );
        }
        if let Some(r) = &case.recording {
            if !dir.join(r.get_ref()).is_file() {
                self.error(
                    "test-missing-file",
                    r.span(),
                    format!("the recording `{}` does not exist", r.get_ref()),
                    "record one with `switchyard run GRAPH --record FILE`",
                );
            }
            if !case.reply.is_empty() {
                self.error(
                    "test-reply",
                    r.span(),
                    "a case answers the model from a recording or from `[[case.reply]]`, not both"
                        .into(),
                    "keep one of them",
                );
            }
        }
        for reply in &case.reply {
            let kind = self.node(&reply.node, true);
            if let Some(kind) = kind
                && !matches!(kind, NodeKind::LlmStructured | NodeKind::LlmChat)
            {
                self.error(
                    "test-reply",
                    reply.node.span(),
                    format!(
                        "node `{}` is {} node, which asks the model nothing",
                        reply.node.get_ref(),
                        crate::load::article(kind.name())
                    ),
                    "a reply answers an llm_structured or llm_chat node",
                );
            }
            let said = [
                reply.json.is_some(),
                reply.text.is_some(),
                reply.tool_calls.is_some(),
                reply.refusal.is_some(),
            ];
            let n = said.iter().filter(|s| **s).count();
            // A reply may carry text beside its tool calls, as a model's may.
            let text_and_calls = n == 2 && reply.text.is_some() && reply.tool_calls.is_some();
            if n == 0 || (n > 1 && !text_and_calls) {
                self.error(
                    "test-reply",
                    reply.node.span(),
                    "a reply is one of `json`, `text`, `tool_calls` (with `text` if you like) or `refusal`".into(),
                    "say what the model answers in one of those keys",
                );
            }
        }
        for tool in &case.tool {
            if let Some(s) = &tool.server {
                self.server(s);
            }
            if tool.result.is_some() == tool.error.is_some() {
                self.error(
                    "test-tool",
                    tool.tool.span(),
                    format!(
                        "the result of `{}` needs one of `result` or `error`",
                        tool.tool.get_ref()
                    ),
                    "`result` is what the tool answers, `error` the error it answers with",
                );
            }
        }
        for answer in &case.answer {
            if let Some(node) = &answer.node {
                self.node(node, false);
                let timed = self.graph.node(node.get_ref()).is_some_and(|n| {
                    matches!(&n.body, crate::spec::KindSpec::Interrupt(i) if i.on_timeout.is_some())
                });
                if answer.timeout && self.graph.node(node.get_ref()).is_some() && !timed {
                    self.error(
                        "test-answer",
                        node.span(),
                        format!(
                            "`{}` has no `on_timeout`: its wait cannot run out",
                            node.get_ref()
                        ),
                        "a `timeout = true` answer lets an interrupt's `on_timeout` route be taken",
                    );
                }
            }
            if answer.timeout && answer.payload.is_some() {
                let span = answer.node.as_ref().map_or(0..0, Spanned::span);
                self.error(
                    "test-answer",
                    span,
                    "an answer is a `payload` or a `timeout`, not both".into(),
                    "`timeout = true` says no answer came",
                );
            }
        }
        if let Some(expect) = &case.expect {
            self.expect(expect);
        }
    }

    fn expect(&mut self, expect: &ExpectSpec) {
        for step in expect.path.iter().flatten() {
            self.node(step, false);
        }
        for route in expect.routes.iter().flatten() {
            match Route::parse(route.get_ref()) {
                None => self.error(
                    "test-route",
                    route.span(),
                    format!("`{}` is not a route", route.get_ref()),
                    "write a route as `from -> to`, or `from -> to [case]`",
                ),
                Some(r) => {
                    for (name, end_ok) in [(&r.from, false), (&r.to, true)] {
                        if (end_ok && name == END) || self.graph.node(name).is_some() {
                            continue;
                        }
                        let spanned = Spanned::new(route.span(), name.clone());
                        self.node(&spanned, false);
                    }
                }
            }
        }
        for field in expect.state.keys().chain(&expect.cleared) {
            self.field(field);
        }
        if let Some(error) = &expect.error
            && expect.outcome.as_deref() != Some("error")
        {
            self.error(
                "test-expect",
                error.span(),
                "an `error` is expected of a case whose outcome is `error`".into(),
                "add `outcome = \"error\"`, or leave `error` out",
            );
        }
        for e in expect.events.iter().flatten() {
            if !e.get_ref().get("event").is_some_and(Json::is_string) {
                self.error(
                    "test-expect",
                    e.span(),
                    "this expected event names no `event`".into(),
                    "name its type: `event = \"tool_call\"`, `\"interrupted\"`, `\"node_started\"`, ...",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_read_with_and_without_a_case() {
        assert_eq!(
            Route::parse("model -> tools [calls]"),
            Some(Route {
                from: "model".into(),
                to: "tools".into(),
                case: Some("calls".into())
            })
        );
        assert_eq!(Route::parse(" a->b ").unwrap().to_string(), "a -> b");
        assert_eq!(Route::parse("a b"), None);
        assert_eq!(Route::parse("a -> b [x"), None);
        assert_eq!(Route::parse("-> b"), None);
    }
}
