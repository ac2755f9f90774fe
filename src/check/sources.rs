//! Every expression and inline template a graph file holds, in the order written, for
//! the passes that read them all.

use crate::spec::{GraphSpec, KindSpec, Sp};

/// One expression or inline template of a graph file.
pub(crate) enum Source<'a> {
    /// An expression; `result` says whether it may read `result` (it runs after the
    /// node's work: `set`, an llm node's `fallback` and `cache.key`); `item` names the
    /// item of a mapped node's work, which its kind's own expressions may read.
    Expr {
        text: &'a Sp<String>,
        result: bool,
        item: Option<&'a str>,
    },
    Template {
        text: &'a Sp<String>,
        item: Option<&'a str>,
    },
}

pub(crate) fn sources(spec: &GraphSpec) -> Vec<Source<'_>> {
    let mut out = Vec::new();
    for node in &spec.nodes {
        // What the node's kind evaluates sees a mapped node's item; `only_if`, `set`
        // and the route are the node's own, evaluated once.
        let item = node.map.as_ref().map(|m| m.var.get_ref().as_str());
        let expr = |text, result| Source::Expr {
            text,
            result,
            item: None,
        };
        let kind_expr = |text, result| Source::Expr { text, result, item };
        let template = |text| Source::Template { text, item };
        out.extend(node.only_if.iter().map(|e| expr(e, false)));
        out.extend(
            node.map
                .iter()
                .filter_map(|m| m.over.as_ref())
                .map(|e| expr(e, false)),
        );
        out.extend(node.set.iter().map(|(_, e)| expr(e, true)));
        if let Some(route) = &node.route {
            let conds = route.on.iter().chain(route.when.iter().map(|w| &w.cond));
            out.extend(conds.map(|e| expr(e, false)));
        }
        match &node.body {
            KindSpec::Llm(l) => {
                let exprs = l.fallback.iter().chain(l.cache.as_ref().map(|c| &c.key));
                out.extend(exprs.map(|e| kind_expr(e, true)));
            }
            KindSpec::Mcp(m) => {
                for call in &m.calls {
                    out.push(template(&call.tool));
                    out.extend(
                        call.args
                            .iter()
                            .flat_map(|a| a.exprs())
                            .map(|e| kind_expr(e, false)),
                    );
                }
            }
            KindSpec::Policy(p) => {
                for rule in &p.rules {
                    out.push(expr(&rule.when, false));
                    out.extend(rule.reason.iter().map(template));
                }
                out.extend(p.default_reason.iter().map(template));
            }
            KindSpec::Interrupt(i) => {
                out.extend(
                    i.payload
                        .iter()
                        .flat_map(|p| p.exprs())
                        .map(|e| expr(e, false)),
                );
            }
            KindSpec::Finalize(f) => out.extend(f.response.iter().map(template)),
            KindSpec::Fail(f) => out.extend(f.message.iter().map(template)),
            KindSpec::Graph(g) => out.extend(g.input.iter().map(|(_, e)| expr(e, false))),
            KindSpec::Set => {}
        }
    }
    out
}
