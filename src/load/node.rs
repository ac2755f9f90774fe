//! Reads `[nodes.<name>]`: the common keys, then the keys of the node's kind.

use super::reader::{Table, Value, to_json};
use crate::diagnostic::Diagnostic;
use crate::source::FileId;
use crate::spec::{
    Breakpoint, CacheSpec, Decision, FailNode, FinalizeNode, GraphNode, InterruptNode, KindSpec,
    LlmNode, MapSpec, McpNode, NodeKind, NodeSpec, PolicyNode, PolicyRule, PseudoTool, RetrySpec,
    RouteSpec, Sp, ToolCall, ToolsSpec, ValueTable, WhenCase,
};
use crate::suggestion::help_for;
use toml::de::DeValue;

const COMMON: [&str; 11] = [
    "kind",
    "description",
    "next",
    "route",
    "set",
    "only_if",
    "on_error",
    "breakpoint",
    "timeout",
    "retry",
    "map",
];

fn kind_keys(kind: NodeKind) -> &'static [&'static str] {
    match kind {
        NodeKind::LlmStructured => &[
            "prompt",
            "system",
            "schema",
            "output",
            "history",
            "model",
            "temperature",
            "retries",
            "fallback",
            "cache",
            "tools",
            "pseudo_tools",
            "stream",
            "strict",
            "parallel_tool_calls",
            "max_tokens",
            "max_completion_tokens",
            "reasoning_effort",
            "seed",
            "top_p",
            "stop",
        ],
        NodeKind::LlmChat => &[
            "prompt",
            "system",
            "output",
            "tools",
            "parallel_tool_calls",
            "model",
            "temperature",
            "retries",
            "stream",
            "max_tokens",
            "max_completion_tokens",
            "reasoning_effort",
            "seed",
            "top_p",
            "stop",
        ],
        NodeKind::McpCall => &[
            "server",
            "tool_calls",
            "tool",
            "args",
            "output",
            "calls",
            "side_effects",
            "audit",
        ],
        NodeKind::Policy => &["rules", "default", "default_reason", "output"],
        NodeKind::Interrupt => &[
            "payload",
            "resume_schema",
            "accept_any",
            "output",
            "timeout",
            "on_timeout",
        ],
        NodeKind::Finalize => &["outcome", "response", "output"],
        NodeKind::Fail => &["message", "outcome"],
        NodeKind::Graph => &["graph", "input", "output"],
        NodeKind::Set => &[],
    }
}

pub(super) fn read_node(
    file: FileId,
    name: Sp<String>,
    v: &Value<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<NodeSpec> {
    let DeValue::Table(table) = v.get_ref() else {
        return None;
    };
    let n = name.get_ref().clone();
    let mut t = Table::new(file, format!("node `{n}`"), v.span(), table);
    let kind = match t.str("kind", diags) {
        Some(k) => match NodeKind::parse(k.get_ref()) {
            Some(kind) => Some(Sp::new(k.span(), kind)),
            None => {
                diags.push(
                    Diagnostic::error(
                        "bad-kind",
                        file,
                        k.span(),
                        format!("`{}` is not a node kind", k.get_ref()),
                    )
                    .label("unknown kind")
                    .help(
                        help_for(k.get_ref(), NodeKind::NAMES).unwrap_or_else(|| {
                            format!(
                                "kinds are {}",
                                NodeKind::NAMES.map(|k| format!("`{k}`")).join(", ")
                            )
                        }),
                    ),
                );
                None
            }
        },
        None => {
            if !t.has("kind") {
                diags.push(
                    Diagnostic::error(
                        "missing-key",
                        file,
                        name.span(),
                        format!("node `{n}` has no `kind`"),
                    )
                    .label("`kind` is required")
                    .help(format!(
                        "kinds are {}",
                        NodeKind::NAMES.map(|k| format!("`{k}`")).join(", ")
                    )),
                );
            }
            None
        }
    };
    // A node whose kind is unknown is still read for its edges, so that the rest of the
    // graph checks without a cascade of "unknown node" errors; its own keys are skipped.
    let Some(kind) = kind else {
        let mut node = common(file, &name, &mut t, NodeKind::Set, diags);
        node.body = KindSpec::Set;
        node.kind = Sp::new(name.span(), NodeKind::Set);
        node.kind_unknown = true;
        for key in t.drain() {
            let _ = key;
        }
        return Some(node);
    };
    let mut node = common(file, &name, &mut t, *kind.get_ref(), diags);
    node.kind = kind.clone();
    node.body = match kind.get_ref() {
        NodeKind::LlmStructured => KindSpec::Llm(Box::new(read_llm(&mut t, diags))),
        NodeKind::LlmChat => {
            // Keys of `llm_structured` that a chat node does not take: refused as
            // unknown, before they are read as the model node's.
            for key in [
                "schema",
                "history",
                "fallback",
                "cache",
                "pseudo_tools",
                "strict",
            ] {
                if let Some(span) = t.key_span(key) {
                    diags.push(
                        Diagnostic::error(
                            "unknown-key",
                            file,
                            span,
                            format!("unknown key `{key}` in node `{}`", name.get_ref()),
                        )
                        .label("not taken by an `llm_chat` node")
                        .help(format!(
                            "an `llm_chat` node answers in plain text, which joins its `output`; `{key}` is for `llm_structured`"
                        )),
                    );
                }
            }
            // The conversation it answers is the field its reply joins.
            let l = read_llm(&mut t, diags);
            if let Some(map) = &node.map {
                diags.push(
                    Diagnostic::error(
                        "unknown-key",
                        file,
                        map.span.clone(),
                        format!("node `{}` maps an `llm_chat` reply", name.get_ref()),
                    )
                    .label("one conversation, one reply")
                    .help("map an `llm_structured` node, or answer once"),
                );
            }
            if let Some(field) = &l.stream_field {
                diags.push(
                    Diagnostic::error(
                        "wrong-type",
                        file,
                        field.span(),
                        format!(
                            "`stream` of node `{}` names a property, and an `llm_chat` reply is text",
                            name.get_ref()
                        ),
                    )
                    .label("a property of what?")
                    .help("write `stream = true`: the reply's text streams as it comes"),
                );
            }
            // What was refused above is not read on (no cascade of errors about it).
            KindSpec::Llm(Box::new(LlmNode {
                chat: true,
                history: l.output.clone(),
                schema: None,
                fallback: None,
                cache: None,
                // `tools` stays: offered natively, the calls join its reply (see
                // `run::kinds::chat`).
                pseudo_tools: Vec::new(),
                strict: None,
                stream_field: None,
                ..l
            }))
        }
        NodeKind::McpCall => KindSpec::Mcp(read_mcp(&mut t, diags)),
        NodeKind::Policy => KindSpec::Policy(read_policy(&mut t, diags)),
        NodeKind::Interrupt => KindSpec::Interrupt(read_interrupt(&mut t, diags)),
        NodeKind::Finalize => KindSpec::Finalize(read_finalize(&mut t, diags)),
        NodeKind::Set => KindSpec::Set,
        NodeKind::Graph => KindSpec::Graph(read_graph_node(&mut t, diags)),
        NodeKind::Fail => KindSpec::Fail(FailNode {
            message: t.str("message", diags),
            outcome: t.str("outcome", diags),
        }),
    };
    required(&t, &node, diags);
    let allowed: Vec<&str> = COMMON
        .iter()
        .chain(kind_keys(*kind.get_ref()))
        .copied()
        .collect();
    t.finish(&allowed, diags);
    Some(node)
}

fn common(
    file: FileId,
    name: &Sp<String>,
    t: &mut Table<'_, '_>,
    kind: NodeKind,
    diags: &mut Vec<Diagnostic>,
) -> NodeSpec {
    let set = match t.table("set", diags) {
        Some(mut s) => s
            .drain()
            .into_iter()
            .filter_map(|(k, v)| match v.get_ref() {
                DeValue::String(e) => Some((k, Sp::new(v.span(), e.to_string()))),
                other => {
                    diags.push(
                        s.wrong_type(k.get_ref(), v.span(), "an expression string", other)
                            .help(format!(
                                "`set` values are expressions: write `{} = \"{}\"`",
                                k.get_ref(),
                                literal_expr(&to_json(other))
                            )),
                    );
                    None
                }
            })
            .collect(),
        None => Vec::new(),
    };
    let breakpoint = t
        .str("breakpoint", diags)
        .and_then(|b| match b.get_ref().as_str() {
            "before" => Some(Sp::new(b.span(), Breakpoint::Before)),
            "after" => Some(Sp::new(b.span(), Breakpoint::After)),
            other => {
                diags.push(
                    Diagnostic::error(
                        "bad-value",
                        file,
                        b.span(),
                        format!("`{other}` is not a breakpoint"),
                    )
                    .label("expected `before` or `after`"),
                );
                None
            }
        });
    // `timeout` on an interrupt is the interrupt's own wait, read with its other keys.
    let timeout = if kind == NodeKind::Interrupt {
        None
    } else {
        t.duration("timeout", diags)
    };
    NodeSpec {
        name: name.clone(),
        span: t.span.clone(),
        kind: Sp::new(name.span(), kind),
        kind_unknown: false,
        description: t
            .str("description", diags)
            .map(Sp::into_inner)
            .unwrap_or_default(),
        next: match t.raw("next").map(|v| v.get_ref()) {
            Some(DeValue::Array(_)) => None,
            _ => t.str("next", diags),
        },
        fork: match t.raw("next").map(|v| v.get_ref()) {
            Some(DeValue::Array(_)) => t.strings("next", diags),
            _ => Vec::new(),
        },
        route: t
            .table("route", diags)
            .map(|mut r| read_route(&mut r, diags)),
        set,
        only_if: t.str("only_if", diags),
        on_error: t.str("on_error", diags),
        breakpoint,
        timeout,
        retry: t
            .table("retry", diags)
            .map(|mut r| read_retry(&mut r, diags)),
        map: t.table("map", diags).map(|mut m| read_map(&mut m, diags)),
        body: KindSpec::Set,
    }
}

fn read_map(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> MapSpec {
    let file = t.file;
    let over = t.str("over", diags);
    if over.is_none() && !t.has("over") {
        diags.push(
            Diagnostic::error("missing-key", file, t.span.clone(), "`map` has no `over`")
                .label("`over` is required")
                .help("add `over = \"<list field or expression>\"`"),
        );
    }
    let var = t
        .str("as", diags)
        .unwrap_or_else(|| Sp::new(t.span.clone(), "item".to_string()));
    let concurrency = t.uint("concurrency", 1, diags);
    let collect_errors = match t.str("errors", diags) {
        Some(e) if e.get_ref() == "collect" => true,
        Some(e) if e.get_ref() == "fail" => false,
        Some(e) => {
            diags.push(
                Diagnostic::error(
                    "bad-value",
                    file,
                    e.span(),
                    format!("`{}` is not a way to take a failed item", e.get_ref()),
                )
                .label("expected `fail` or `collect`"),
            );
            false
        }
        None => false,
    };
    t.finish(&["over", "as", "concurrency", "errors"], diags);
    MapSpec {
        span: t.span.clone(),
        over,
        var,
        concurrency,
        collect_errors,
    }
}

/// How a literal would be written as an expression, for help text.
fn literal_expr(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => format!("'{s}'"),
        other => other.to_string().replace('"', "'"),
    }
}

fn read_route(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> RouteSpec {
    let file = t.file;
    let on = t.str("on", diags);
    let mut case_forks = Vec::new();
    let cases = match t.table("cases", diags) {
        Some(mut c) => c
            .drain()
            .into_iter()
            .filter_map(|(k, v)| match v.get_ref() {
                DeValue::String(s) => Some((k, Sp::new(v.span(), s.to_string()))),
                // Several nodes: the case starts parallel branches.
                DeValue::Array(items) => {
                    let targets: Vec<Sp<String>> = items
                        .iter()
                        .filter_map(|i| match i.get_ref() {
                            DeValue::String(s) => Some(Sp::new(i.span(), s.to_string())),
                            other => {
                                diags.push(c.wrong_type(
                                    k.get_ref(),
                                    i.span(),
                                    "a node name",
                                    other,
                                ));
                                None
                            }
                        })
                        .collect();
                    let first = targets.first()?.clone();
                    case_forks.push((k.clone(), targets));
                    Some((k, first))
                }
                other => {
                    diags.push(c.wrong_type(k.get_ref(), v.span(), "a node name", other));
                    None
                }
            })
            .collect(),
        None => Vec::new(),
    };
    let mut when = Vec::new();
    for item in t.array("when", diags).unwrap_or_default() {
        let DeValue::Table(wt) = item.get_ref() else {
            diags.push(t.wrong_type(
                "when",
                item.span(),
                "a table `{ if = ..., to = ... }`",
                item.get_ref(),
            ));
            continue;
        };
        let mut w = Table::new(file, "a `when` case", item.span(), wt);
        let case = w.str("case", diags);
        let cond = w.str("if", diags);
        let to = w.str("to", diags);
        for (key, v) in [("if", cond.is_some()), ("to", to.is_some())] {
            if !v && !w.has(key) {
                diags.push(
                    Diagnostic::error(
                        "missing-key",
                        file,
                        item.span(),
                        format!("a `when` case has no `{key}`"),
                    )
                    .label(format!("`{key}` is required"))
                    .help("write `{ case = \"name\", if = \"<expression>\", to = \"<node>\" }`"),
                );
            }
        }
        w.finish(&["case", "if", "to"], diags);
        if let (Some(cond), Some(to)) = (cond, to) {
            when.push(WhenCase { case, cond, to });
        }
    }
    let default = t.str("default", diags);
    let route = RouteSpec {
        span: t.span.clone(),
        on,
        cases,
        case_forks,
        when,
        default,
    };
    let shape = match (
        &route.on,
        route.cases.is_empty(),
        route.when.is_empty() && !t.has("when"),
    ) {
        (Some(_), _, false) => Some("a route has both `on` and `when`; use one"),
        (Some(_), true, true) if route.default.is_none() => Some("a route with `on` needs `cases`"),
        (None, false, _) => Some("`cases` needs `on`, the expression whose value picks the case"),
        (None, true, true) => Some("a route needs `on` with `cases`, or `when`"),
        _ => None,
    };
    if let Some(msg) = shape {
        diags.push(
            Diagnostic::error("route-shape", file, t.span.clone(), msg)
                .label("in this route")
                .help("switch on a value: `on = \"expr\"`, `cases = { a = \"node\" }`; or first true condition: `when = [{ if = \"expr\", to = \"node\" }]`"),
        );
    }
    t.finish(&["on", "cases", "when", "default"], diags);
    route
}

fn read_retry(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> RetrySpec {
    let r = RetrySpec {
        span: t.span.clone(),
        attempts: t.uint("attempts", 1, diags).map_or(1, Sp::into_inner),
        backoff: t.duration("backoff", diags).map(Sp::into_inner),
        max_backoff: t.duration("max_backoff", diags).map(Sp::into_inner),
        jitter: t.bool("jitter", diags).unwrap_or(true),
    };
    t.finish(&["attempts", "backoff", "max_backoff", "jitter"], diags);
    r
}

fn read_llm(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> LlmNode {
    let file = t.file;
    let cache = t.table("cache", diags).and_then(|mut c| {
        let key = c.str("key", diags);
        let ttl = c.duration("ttl", diags);
        let missing: Vec<&str> = [
            ("key", key.is_none() && !c.has("key")),
            ("ttl", ttl.is_none() && !c.has("ttl")),
        ]
        .into_iter()
        .filter_map(|(k, m)| m.then_some(k))
        .collect();
        if !missing.is_empty() {
            diags.push(
                Diagnostic::error(
                    "missing-key",
                    file,
                    c.span.clone(),
                    format!("`cache` has no `{}`", missing.join("` or `")),
                )
                .label("incomplete cache")
                .help("write `cache = { key = \"<expression>\", ttl = \"7d\" }`"),
            );
        }
        c.finish(&["key", "ttl"], diags);
        Some(CacheSpec {
            key: key?,
            ttl: ttl?,
        })
    });
    let tools = t.table("tools", diags).and_then(|mut c| {
        let server = c.str("server", diags);
        let only = c.strings("only", diags);
        if server.is_none() && !c.has("server") {
            diags.push(
                Diagnostic::error(
                    "missing-key",
                    file,
                    c.span.clone(),
                    "`tools` has no `server`",
                )
                .label("which server's tools?")
                .help("write `tools = { server = \"<name>\" }`"),
            );
        }
        c.finish(&["server", "only"], diags);
        Some(ToolsSpec {
            server: server?,
            only,
        })
    });
    let mut pseudo_tools = Vec::new();
    for item in t.array("pseudo_tools", diags).unwrap_or_default() {
        let DeValue::Table(pt) = item.get_ref() else {
            diags.push(t.wrong_type("pseudo_tools", item.span(), "a table", item.get_ref()));
            continue;
        };
        let mut p = Table::new(file, "a pseudo tool", item.span(), pt);
        let name = p.str("name", diags);
        let description = p
            .str("description", diags)
            .map(Sp::into_inner)
            .unwrap_or_default();
        let schema = p.str("schema", diags);
        let to = p.str("to", diags);
        if name.is_none() || to.is_none() {
            diags.push(
                Diagnostic::error("missing-key", file, item.span(), "a pseudo tool needs `name` and `to`")
                    .label("incomplete pseudo tool")
                    .help("write `{ name = \"ask_human\", schema = \"schemas/...\", to = \"<interrupt node>\" }`"),
            );
        }
        p.finish(&["name", "description", "schema", "to"], diags);
        if let (Some(name), Some(to)) = (name, to) {
            pseudo_tools.push(PseudoTool {
                name,
                description,
                schema,
                to,
            });
        }
    }
    let (stream, stream_field) = match t.raw("stream") {
        None => (false, None),
        Some(v) => match v.get_ref() {
            DeValue::Boolean(b) => (*b, None),
            DeValue::String(s) => (true, Some(Sp::new(v.span(), s.to_string()))),
            other => {
                diags.push(t.wrong_type(
                    "stream",
                    v.span(),
                    "a boolean, or the name of a string property of the schema",
                    other,
                ));
                (false, None)
            }
        },
    };
    LlmNode {
        prompt: t.str("prompt", diags),
        system: t.str("system", diags),
        schema: t.str("schema", diags),
        output: t.str("output", diags),
        history: t.str("history", diags),
        model: t.str("model", diags),
        temperature: t.float("temperature", diags),
        retries: t.uint("retries", 0, diags).map(Sp::into_inner),
        fallback: t.str("fallback", diags),
        cache,
        tools,
        pseudo_tools,
        stream,
        stream_field,
        strict: t.bool("strict", diags),
        parallel_tool_calls: t.bool("parallel_tool_calls", diags),
        sampling: super::sampling::read(t, diags),
        chat: false,
    }
}

fn read_value_table(v: &Value<'_>) -> ValueTable {
    match v.get_ref() {
        DeValue::String(s) => ValueTable::Expr(Sp::new(v.span(), s.to_string())),
        DeValue::Array(items) => ValueTable::Array(items.iter().map(read_value_table).collect()),
        DeValue::Table(t) => ValueTable::Table(
            t.iter()
                .map(|(k, v)| {
                    (
                        Sp::new(k.span(), k.get_ref().to_string()),
                        read_value_table(v),
                    )
                })
                .collect(),
        ),
        other => ValueTable::Literal(Sp::new(v.span(), to_json(other))),
    }
}

fn read_mcp(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> McpNode {
    let file = t.file;
    let server = t.str("server", diags);
    let tool_calls = t.str("tool_calls", diags);
    let tool = t.str("tool", diags);
    let args = t.raw("args").map(read_value_table);
    let output = t.str("output", diags);
    let mut calls = Vec::new();
    let multi = t.has("calls");
    for item in t.array("calls", diags).unwrap_or_default() {
        let DeValue::Table(ct) = item.get_ref() else {
            diags.push(t.wrong_type(
                "calls",
                item.span(),
                "a table `{ tool = ..., args = ... }`",
                item.get_ref(),
            ));
            continue;
        };
        let mut c = Table::new(file, "a call", item.span(), ct);
        let tool = c.str("tool", diags);
        let args = c.raw("args").map(read_value_table);
        let output = c.str("output", diags);
        if tool.is_none() && !c.has("tool") {
            diags.push(
                Diagnostic::error("missing-key", file, item.span(), "a call has no `tool`")
                    .label("which tool?")
                    .help("write `{ tool = \"<name>\", args = { ... } }`"),
            );
        }
        c.finish(&["tool", "args", "output"], diags);
        if let Some(tool) = tool {
            calls.push(ToolCall { tool, args, output });
        }
    }
    if let Some(from) = &tool_calls {
        // The model's calls are the node's: none of its own beside them.
        for key in ["tool", "calls", "args", "output"] {
            if let Some(span) = t.key_span(key) {
                diags.push(
                    Diagnostic::error(
                        "call-shape",
                        file,
                        span,
                        format!(
                            "a node that runs the tool calls in `{}` has `{key}` too",
                            from.get_ref()
                        ),
                    )
                    .label("the model's calls are this node's")
                    .help("drop it: each call's result joins the messages as a tool message"),
                );
            }
        }
        calls.clear();
    } else if multi {
        if let Some(tool) = &tool {
            diags.push(
                Diagnostic::error(
                    "call-shape",
                    file,
                    tool.span(),
                    "a node has both `tool` and `calls`",
                )
                .label("use one")
                .help("move this call into `calls`, or drop `calls`"),
            );
        }
        for key in ["args", "output"] {
            if let Some(span) = t.key_span(key) {
                diags.push(
                    Diagnostic::error(
                        "call-shape",
                        file,
                        span,
                        format!("`{key}` belongs inside each entry of `calls`"),
                    )
                    .label("ignored with `calls`"),
                );
            }
        }
    } else if let Some(tool) = tool {
        calls.push(ToolCall { tool, args, output });
    } else if !t.has("tool") {
        diags.push(
            Diagnostic::error(
                "missing-key",
                file,
                t.span.clone(),
                format!("{} has no `tool`", t.what),
            )
            .label("an `mcp_call` needs `tool` or `calls`")
            .help("add `tool = \"<tool name>\"` and its `args`"),
        );
    }
    McpNode {
        server,
        tool_calls,
        calls,
        multi,
        side_effects: t.bool("side_effects", diags).unwrap_or(false),
        audit: t.str("audit", diags),
    }
}

fn read_decision(file: FileId, s: Sp<String>, diags: &mut Vec<Diagnostic>) -> Option<Sp<Decision>> {
    match Decision::parse(s.get_ref()) {
        Some(d) => Some(Sp::new(s.span(), d)),
        None => {
            diags.push(
                Diagnostic::error(
                    "bad-decision",
                    file,
                    s.span(),
                    format!("`{}` is not a policy decision", s.get_ref()),
                )
                .label("expected `allow`, `confirm` or `deny`")
                .help_opt(help_for(s.get_ref(), Decision::NAMES)),
            );
            None
        }
    }
}

fn read_policy(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> PolicyNode {
    let file = t.file;
    let mut rules = Vec::new();
    for item in t.array("rules", diags).unwrap_or_default() {
        let DeValue::Table(rt) = item.get_ref() else {
            diags.push(t.wrong_type(
                "rules",
                item.span(),
                "a table `{ when = ..., decision = ... }`",
                item.get_ref(),
            ));
            continue;
        };
        let mut r = Table::new(file, "a policy rule", item.span(), rt);
        let name = r.str("name", diags);
        let when = r.str("when", diags);
        let decision = r
            .str("decision", diags)
            .and_then(|d| read_decision(file, d, diags));
        let reason = r.str("reason", diags);
        for (key, ok) in [("when", when.is_some()), ("decision", decision.is_some())] {
            if !ok && !r.has(key) {
                diags.push(
                    Diagnostic::error("missing-key", file, item.span(), format!("a policy rule has no `{key}`"))
                        .label(format!("`{key}` is required"))
                        .help("write `{ when = \"<expression>\", decision = \"confirm\", reason = \"...\" }`"),
                );
            }
        }
        r.finish(&["name", "when", "decision", "reason"], diags);
        if let (Some(when), Some(decision)) = (when, decision) {
            rules.push(PolicyRule {
                name,
                when,
                decision,
                reason,
            });
        }
    }
    PolicyNode {
        rules,
        default: t
            .str("default", diags)
            .and_then(|d| read_decision(file, d, diags)),
        default_reason: t.str("default_reason", diags),
        output: t.str("output", diags),
    }
}

fn read_interrupt(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> InterruptNode {
    InterruptNode {
        payload: t.raw("payload").map(read_value_table),
        resume_schema: t.str("resume_schema", diags),
        accept_any: t.bool("accept_any", diags).unwrap_or(false),
        output: t.str("output", diags),
        timeout: t.duration("timeout", diags),
        on_timeout: t.str("on_timeout", diags),
    }
}

/// `kind = "graph"`: the child's file and the two mappings, each a table of strings.
fn read_graph_node(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> GraphNode {
    let mut strings = |key: &str, what: &str| -> Vec<(Sp<String>, Sp<String>)> {
        match t.table(key, diags) {
            Some(mut m) => m
                .drain()
                .into_iter()
                .filter_map(|(k, v)| match v.get_ref() {
                    DeValue::String(s) => Some((k, Sp::new(v.span(), s.to_string()))),
                    other => {
                        diags.push(m.wrong_type(k.get_ref(), v.span(), what, other));
                        None
                    }
                })
                .collect(),
            None => Vec::new(),
        }
    };
    let input = strings("input", "an expression string");
    let output = strings("output", "the name of a field of the child graph");
    GraphNode {
        graph: t.str("graph", diags),
        input,
        output,
    }
}

fn read_finalize(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> FinalizeNode {
    FinalizeNode {
        outcome: t.str("outcome", diags),
        response: t.str("response", diags),
        output: t.str("output", diags),
    }
}

/// Keys a kind cannot do without, and keys that contradict each other.
fn required(t: &Table<'_, '_>, node: &NodeSpec, diags: &mut Vec<Diagnostic>) {
    let file = t.file;
    let n = node.name.get_ref();
    if let KindSpec::Llm(l) = &node.body
        && l.parallel_tool_calls.is_some()
        && l.tools.is_none()
    {
        let span = t
            .key_span("parallel_tool_calls")
            .unwrap_or(node.name.span());
        diags.push(
            Diagnostic::error(
                "missing-key",
                file,
                span,
                format!("node `{n}` sets `parallel_tool_calls` and offers no `tools`"),
            )
            .label("there are no tool calls to take several of")
            .help("add `tools = { server = \"<name>\" }`, or remove it"),
        );
    }
    let mut missing = |key: &str, help: &str| {
        if !t.has(key) {
            diags.push(
                Diagnostic::error(
                    "missing-key",
                    file,
                    node.name.span(),
                    format!("node `{n}` has no `{key}`"),
                )
                .label(format!(
                    "`{key}` is required for a `{}` node",
                    node.kind.get_ref().name()
                ))
                .help(help.to_string()),
            );
        }
    };
    match &node.body {
        KindSpec::Llm(l) if l.chat => {
            if l.output.is_none() {
                missing(
                    "output",
                    "add `output = \"messages\"`: the `messages` field the reply joins",
                );
            }
        }
        KindSpec::Llm(l) => {
            if l.prompt.is_none() {
                missing("prompt", "add `prompt = \"prompts/<graph>/<node>.j2\"`");
            }
            if l.output.is_none() {
                missing("output", "add `output = \"<state field>\"`");
            }
            if l.schema.is_none() && l.tools.is_none() {
                missing(
                    "schema",
                    "add `schema = \"schemas/<graph>/<output>.json\"`, or offer `tools`",
                );
            }
        }
        KindSpec::Mcp(m) => {
            if m.server.is_none() {
                missing("server", "add `server = \"<name of a [servers.*] entry>\"`");
            }
        }
        KindSpec::Policy(p) => {
            if p.output.is_none() {
                missing(
                    "output",
                    "add `output = \"<state field>\"` and route on `\"<field>.decision\"`",
                );
            }
        }
        KindSpec::Interrupt(i) => match (&i.timeout, &i.on_timeout) {
            (Some(timeout), None) => diags.push(
                Diagnostic::error(
                    "missing-key",
                    file,
                    timeout.span(),
                    format!("interrupt `{n}` has a `timeout` but no `on_timeout`"),
                )
                .label("where does the run go when nobody answers?")
                .help("add `on_timeout = \"<node>\"`"),
            ),
            (None, Some(on)) => diags.push(
                Diagnostic::error(
                    "missing-key",
                    file,
                    on.span(),
                    format!("interrupt `{n}` has `on_timeout` but no `timeout`"),
                )
                .label("never taken")
                .help("add `timeout = \"10m\"`, or remove `on_timeout`"),
            ),
            _ => {}
        },
        KindSpec::Finalize(f) => {
            if f.outcome.is_none() {
                missing("outcome", "add `outcome = \"done\"`");
            }
        }
        KindSpec::Graph(g) => {
            if g.graph.is_none() {
                missing("graph", "add `graph = \"graphs/<child>.toml\"`");
            }
        }
        KindSpec::Fail(f) => {
            if f.message.is_none() {
                missing(
                    "message",
                    "add `message = \"why the run cannot go on: {{ field }}\"`",
                );
            }
        }
        KindSpec::Set => {
            if node.set.is_empty() && !t.has("set") {
                diags.push(
                    Diagnostic::error(
                        "empty-set",
                        file,
                        node.name.span(),
                        format!("`set` node `{n}` sets nothing"),
                    )
                    .label("a `set` node does nothing but its `set`")
                    .help("add `set = { field = \"expression\" }`"),
                );
            }
        }
    }
}
