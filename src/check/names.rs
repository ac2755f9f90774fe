//! Every name a graph uses refers to something declared: nodes, fields, servers.

use super::{Cx, DiagExt};
use crate::spec::{END, KindSpec, STORE_TOOLS, Sp, Transport};
use crate::suggestion::help_for;
use std::collections::HashMap;

pub(super) fn check(cx: &mut Cx<'_>) {
    let spec = cx.spec;
    match &spec.graph.entry {
        Some(entry) if entry.get_ref() == END => {
            cx.error("bad-entry", entry.span(), "the entry cannot be `END`")
                .with_label("a run must start at a node")
                .with_help("name the first node to run");
        }
        Some(entry) => node_ref(cx, entry, "entry node"),
        None => {}
    }
    if let Some(on_limit) = &spec.graph.on_limit {
        node_ref(cx, on_limit, "`on_limit` target");
        if !spec.has_limits() {
            cx.error(
                "unused-on-limit",
                on_limit.span(),
                "`on_limit` is never taken: the graph sets no limit",
            )
            .with_label("no `max_steps`, `max_wall_time` or `max_tokens`")
            .with_help(
                "add `max_steps = 50` (or another limit) to `[graph]`, or remove `on_limit`",
            );
        }
    }
    for node in &spec.nodes {
        for edge in node.edges() {
            node_ref(cx, edge.target, "node");
        }
        edge_shape(cx, node);
        for (field, _) in &node.set {
            field_ref(cx, field);
        }
        for out in node.output_fields() {
            field_ref(cx, out);
        }
        match &node.body {
            KindSpec::Llm(l) => {
                if let Some(h) = &l.history {
                    field_ref(cx, h);
                }
                if let Some(t) = &l.tools {
                    server_ref(cx, &t.server);
                }
                duplicates(cx, l.pseudo_tools.iter().map(|p| &p.name), "pseudo tool");
            }
            KindSpec::Mcp(m) => {
                if let Some(s) = &m.server {
                    server_ref(cx, s);
                    if cx
                        .spec
                        .server(s.get_ref())
                        .is_some_and(|s| matches!(s.transport, Transport::Store))
                    {
                        for c in &m.calls {
                            store_tool_ref(cx, s.get_ref(), &c.tool);
                        }
                    }
                }
                duplicates(
                    cx,
                    m.calls.iter().filter_map(|c| c.output.as_ref()),
                    "call output",
                );
            }
            KindSpec::Policy(p) => duplicates(
                cx,
                p.rules.iter().filter_map(|r| r.name.as_ref()),
                "rule name",
            ),
            _ => {}
        }
        if let Some(route) = &node.route {
            duplicates(
                cx,
                route.when.iter().filter_map(|w| w.case.as_ref()),
                "case name",
            );
        }
    }
}

/// A node has exactly one way on (`next` or `route`), except finalize and fail, which
/// have none; a fail node has no `on_error` either (it fails on purpose).
fn edge_shape(cx: &mut Cx<'_>, node: &crate::spec::NodeSpec) {
    if node.kind_unknown {
        // Without a kind we cannot tell whether the node may end the run.
        return;
    }
    let n = node.name.get_ref();
    let finalize = node.kind.get_ref().ends_run() && !node.kind_unknown;
    if !node.fork.is_empty() && (node.next.is_some() || node.route.is_some() || finalize) {
        let span = node.fork[0].span();
        cx.error(
            "edge-shape",
            span,
            format!("node `{n}` forks and has another way on"),
        )
        .with_label("branches beside a route or an end")
        .with_help("keep `next = [...]` alone");
        return;
    }
    if !node.fork.is_empty() {
        return;
    }
    match (&node.next, &node.route) {
        (Some(next), Some(_)) => {
            cx.error(
                "edge-shape",
                next.span(),
                format!("node `{n}` has both `next` and `route`"),
            )
            .with_label("unconditional edge beside a route")
            .with_help("keep `route` and give it a `default`, or keep `next` alone");
        }
        (next, route) if finalize && (next.is_some() || route.is_some()) => {
            let span = next.as_ref().map_or_else(
                || route.as_ref().map(|r| r.span.clone()).unwrap_or_default(),
                |n| n.span(),
            );
            let kind = node.kind.get_ref().name();
            cx.error(
                "edge-shape",
                span,
                format!("{kind} node `{n}` has an outgoing edge"),
            )
            .with_label(format!("never taken: a {kind} node ends the run"))
            .with_help("remove it; use a `set` node to record something and go on");
        }
        (None, None) if !finalize => {
            cx.error(
                "dead-end",
                node.name.span(),
                format!("node `{n}` has no outgoing edge"),
            )
            .with_label("dead end")
            .with_help("add `next = \"<node>\"` (or `next = \"END\"`), or a `route`");
        }
        _ => {}
    }
    if *node.kind.get_ref() == crate::spec::NodeKind::Fail
        && let Some(on_error) = &node.on_error
    {
        cx.error(
            "edge-shape",
            on_error.span(),
            format!("fail node `{n}` has an `on_error`"),
        )
        .with_label("never taken: a fail node fails the run on purpose")
        .with_help("remove it; to recover instead, route to the recovery node directly");
    }
}

pub(super) fn node_ref(cx: &mut Cx<'_>, name: &Sp<String>, what: &str) {
    let n = name.get_ref();
    if n == END || cx.spec.node(n).is_some() {
        return;
    }
    let help = help_for(n, cx.node_names().chain([END]));
    cx.error("unknown-node", name.span(), format!("unknown {what} `{n}`"))
        .with_label("no node has this name")
        .with_help_opt(help);
}

pub(super) fn field_ref(cx: &mut Cx<'_>, name: &Sp<String>) {
    let n = name.get_ref();
    if cx.spec.field(n).is_some() {
        return;
    }
    let help = help_for(n, cx.field_names())
        .unwrap_or_else(|| format!("declare it: `[state.{n}]` with a `type`"));
    cx.error(
        "unknown-field",
        name.span(),
        format!("unknown state field `{n}`"),
    )
    .with_label("not declared in `[state]`")
    .with_help(help);
}

fn server_ref(cx: &mut Cx<'_>, name: &Sp<String>) {
    let n = name.get_ref();
    if cx.spec.server(n).is_some() {
        return;
    }
    let help = help_for(n, cx.spec.servers.iter().map(|s| s.name.get_ref().as_str()))
        .unwrap_or_else(|| format!("declare it: `[servers.{n}]` with `command` or `url`"));
    cx.error(
        "unknown-server",
        name.span(),
        format!("unknown server `{n}`"),
    )
    .with_label("not declared in `[servers]`")
    .with_help(help);
}

/// A tool of a builtin `store` server: its names are known before the run, so a
/// name that is none of them is found here, not when the node runs. (A name rendered
/// from state is checked when it is called.)
fn store_tool_ref(cx: &mut Cx<'_>, server: &str, tool: &Sp<String>) {
    let t = tool.get_ref();
    if t.contains("{{") || t.contains("{%") || STORE_TOOLS.contains(&t.as_str()) {
        return;
    }
    let help = help_for(t, STORE_TOOLS).unwrap_or_else(|| {
        format!(
            "the builtin store offers {}",
            STORE_TOOLS.map(|n| format!("`{n}`")).join(", ")
        )
    });
    cx.error(
        "unknown-tool",
        tool.span(),
        format!("server `{server}` has no tool `{t}`"),
    )
    .with_label("not a tool of the builtin store")
    .with_help(help);
}

fn duplicates<'a>(cx: &mut Cx<'_>, names: impl Iterator<Item = &'a Sp<String>>, what: &str) {
    let mut seen: HashMap<&str, &Sp<String>> = HashMap::new();
    for name in names {
        if seen.contains_key(name.get_ref().as_str()) {
            cx.error(
                "duplicate-name",
                name.span(),
                format!("duplicate {what} `{}`", name.get_ref()),
            )
            .with_label("used before in the same node")
            .with_help(format!("give each {what} its own name"));
        } else {
            seen.insert(name.get_ref(), name);
        }
    }
}
