//! `switchyard validate --online`: the checks that need the servers running. Every fixed
//! tool name an `mcp_call` or an llm node's `tools.only` names must be a tool of its
//! server, and arguments known before the run (literals, and expressions that read no
//! state, like `'fast'`) must fit the tool's `inputSchema`. A tool with an
//! `outputSchema` types the field its result is written to.

use super::tool_schema::{ToolSchema, compile, problems, remote_refs};
use crate::diagnostic::Diagnostic;
use crate::graph::Graph;
use crate::spec::{GraphSpec, KindSpec, Sp, ToolCall, ValueTable};
use crate::tool::{ToolClient, ToolInfo};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::ops::Range;

/// A tool name a node uses, and the call that passes it arguments (none for an llm
/// node's `tools.only`).
type NamedTool<'a> = (&'a Sp<String>, Option<&'a ToolCall>);

/// Starts (through `client`) every server a node uses and checks the nodes against the
/// tools they offer. `graph` is `spec` compiled; the diagnostics point into `spec`'s file.
pub async fn check_online(
    spec: &GraphSpec,
    graph: &Graph,
    client: &dyn ToolClient,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut listed: HashMap<String, Option<Vec<ToolInfo>>> = HashMap::new();
    for node in &spec.nodes {
        let (server, names): (&Sp<String>, Vec<NamedTool<'_>>) = match &node.body {
            KindSpec::Mcp(m) => match &m.server {
                Some(s) => (s, m.calls.iter().map(|c| (&c.tool, Some(c))).collect()),
                None => continue,
            },
            KindSpec::Llm(l) => match &l.tools {
                Some(t) => (&t.server, t.only.iter().map(|n| (n, None)).collect()),
                None => continue,
            },
            _ => continue,
        };
        let name = server.get_ref();
        if !listed.contains_key(name) {
            let tools = match graph.servers.iter().find(|s| &s.name == name) {
                Some(s) => match client.list_tools(s).await {
                    Ok(t) => Some(t),
                    Err(e) => {
                        out.push(
                            Diagnostic::error(
                                "server-unavailable",
                                spec.file,
                                server.span(),
                                format!("cannot list the tools of server `{name}`"),
                            )
                            .label(e.message)
                            .help("check the server's `command`, `args`, `cwd` and `env`, or its `url`"),
                        );
                        None
                    }
                },
                None => None,
            };
            listed.insert(name.clone(), tools);
        }
        let Some(Some(tools)) = listed.get(name) else {
            continue;
        };
        for (tool, call) in names {
            let t = tool.get_ref();
            // A template, or a resource or prompt read (no tool of the server's).
            if t.contains("{{") || t.contains("{%") || t == "resources/read" || t == "prompts/get" {
                continue;
            }
            let Some(info) = tools.iter().find(|i| &i.name == t) else {
                let candidates = tools.iter().map(|i| i.name.as_str());
                let help =
                    crate::suggestion::help_for(t, candidates.clone()).unwrap_or_else(|| {
                        format!(
                            "`{name}` offers {}",
                            candidates
                                .map(|c| format!("`{c}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    });
                out.push(
                    Diagnostic::error(
                        "unknown-tool",
                        spec.file,
                        tool.span(),
                        format!("server `{name}` has no tool `{t}`"),
                    )
                    .label("no tool has this name")
                    .help(help),
                );
                continue;
            };
            let remote = remote_refs(&info.input_schema);
            if !remote.is_empty() {
                out.push(
                    Diagnostic::warning(
                        "unchecked-ref",
                        spec.file,
                        tool.span(),
                        format!(
                            "the inputSchema of `{t}` refers to {}, which is not fetched",
                            remote
                                .iter()
                                .map(|r| format!("`{r}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                    .label("what it stands for is not checked before a call")
                    .help("the server checks it; the rest of the schema is checked as usual"),
                );
            }
            if let Some(call) = call {
                check_arguments(spec, tool, call, info, &mut out);
                check_output(spec, call, info, node.map.is_some(), &mut out);
            }
        }
    }
    out
}

/// A tool that declares an `outputSchema` answers with `structuredContent` of that
/// shape, which is what the call's `output` field receives: the field must hold it.
fn check_output(
    spec: &GraphSpec,
    call: &ToolCall,
    info: &ToolInfo,
    mapped: bool,
    out: &mut Vec<Diagnostic>,
) {
    let (Some(output), Some(schema)) = (&call.output, &info.output_schema) else {
        return;
    };
    let Some(field) = spec.field(output.get_ref()) else {
        return;
    };
    if let Some((written, types)) = crate::check::types::misfit(field, schema, mapped) {
        out.push(
            Diagnostic::error(
                "output-type",
                spec.file,
                output.span(),
                if mapped {
                    format!(
                        "field `{}` holds items of type `{written}`, which cannot hold a result of `{}`",
                        output.get_ref(),
                        info.name
                    )
                } else {
                    format!(
                        "field `{}` of type `{written}` cannot hold the result of `{}`",
                        output.get_ref(),
                        info.name
                    )
                },
            )
            .label(format!(
                "the tool's outputSchema has the top-level type `{}`",
                types.join("` or `")
            ))
            .help("change the field's type, or write the result to another field"),
        );
    }
}

/// Checks the arguments that are known before the run against the tool's schema.
fn check_arguments(
    spec: &GraphSpec,
    tool: &Sp<String>,
    call: &ToolCall,
    info: &ToolInfo,
    out: &mut Vec<Diagnostic>,
) {
    let Ok(validator) = compile(&info.input_schema) else {
        return;
    };
    // The arguments, or those of their top-level entries that are known; `complete`
    // tells whether every entry is known, so a missing property is a real problem.
    let mut spans: HashMap<String, Range<usize>> = HashMap::new();
    let (arguments, complete) = match &call.args {
        None => (Json::Object(Map::new()), true),
        Some(ValueTable::Table(entries)) => {
            let mut known = Map::new();
            let mut complete = true;
            for (key, value) in entries {
                match constant(value) {
                    Some(v) => {
                        spans.insert(
                            format!("/{}", escape(key.get_ref())),
                            span_of(value).unwrap_or_else(|| key.span()),
                        );
                        known.insert(key.get_ref().clone(), v);
                    }
                    None => complete = false,
                }
            }
            (Json::Object(known), complete)
        }
        Some(other) => match constant(other) {
            Some(v) => (v, true),
            None => return,
        },
    };
    // As a call is made: a required property left out that has a default is given it,
    // an optional one given as null where its type takes none is left out.
    let arguments = ToolSchema::new(info.clone())
        .as_sent(&arguments)
        .unwrap_or(arguments);
    for p in problems(&validator, &arguments) {
        let top = p
            .path
            .match_indices('/')
            .nth(1)
            .map_or(p.path.as_str(), |(i, _)| &p.path[..i]);
        let span = match spans.get(top) {
            Some(span) => span.clone(),
            None if complete => tool.span(),
            // A problem with the whole object (a missing property) may be solved by
            // the entries only known at run time.
            None => continue,
        };
        let at = if p.path.is_empty() { "/" } else { &p.path };
        out.push(
            Diagnostic::error(
                "tool-arguments",
                spec.file,
                span,
                format!(
                    "the arguments of `{}` do not fit its inputSchema",
                    tool.get_ref()
                ),
            )
            .label(format!("at `{at}`: {}", p.message)),
        );
    }
}

/// The value of a value table when it reads no state.
fn constant(v: &ValueTable) -> Option<Json> {
    match v {
        ValueTable::Literal(l) => Some(l.get_ref().clone()),
        ValueTable::Expr(e) => {
            let env = crate::jinja::environment();
            let expr = env.compile_expression(e.get_ref()).ok()?;
            if !expr.undeclared_variables(false).is_empty() {
                return None;
            }
            serde_json::to_value(expr.eval(()).ok()?).ok()
        }
        ValueTable::Array(items) => items
            .iter()
            .map(constant)
            .collect::<Option<_>>()
            .map(Json::Array),
        ValueTable::Table(entries) => entries
            .iter()
            .map(|(k, v)| Some((k.get_ref().clone(), constant(v)?)))
            .collect::<Option<Map<_, _>>>()
            .map(Json::Object),
    }
}

fn span_of(v: &ValueTable) -> Option<Range<usize>> {
    match v {
        ValueTable::Literal(l) => Some(l.span()),
        ValueTable::Expr(e) => Some(e.span()),
        _ => None,
    }
}

/// A JSON pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
