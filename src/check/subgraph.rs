//! `kind = "graph"` nodes, checked across files: the child graph is loaded and checked
//! (its problems reported in its own file), a graph that includes itself is refused,
//! the input names the child's fields with values of their types and gives every
//! field the child requires, and the output reads fields the child has into fields of
//! this graph that can hold them.

use super::set_types::{infer, refused};
use super::{Cx, DiagExt};
use crate::source::Sources;
use crate::spec::{FieldType, GraphSpec, KindSpec};
use crate::suggestion::help_for;
use std::cell::RefCell;
use std::path::PathBuf;

thread_local! {
    /// The graph files being checked, outermost first: a child already on it includes
    /// itself.
    static CHECKING: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
}

pub(super) fn check(cx: &mut Cx<'_>, sources: &mut Sources) {
    let spec = cx.spec;
    for node in &spec.nodes {
        let KindSpec::Graph(g) = &node.body else {
            continue;
        };
        let Some(path) = &g.graph else { continue };
        let file = spec.resolve(path.get_ref());
        let canonical = std::fs::canonicalize(&file).unwrap_or(file.clone());
        let me = std::fs::canonicalize(&spec.path).unwrap_or(spec.path.clone());
        let cycle = canonical == me || CHECKING.with(|c| c.borrow().contains(&canonical));
        if cycle {
            cx.error(
                "subgraph",
                path.span(),
                format!("`{}` includes the graph that includes it", path.get_ref()),
            )
            .with_label("a graph cannot run itself")
            .with_help("split the shared part into a graph of its own");
            continue;
        }
        // Read under the same rules as prompts and schemas (inside the root, a
        // regular file of bounded size), which report what they refuse.
        let Some((_, text)) = super::files::read(cx, path, "graph file") else {
            continue;
        };
        let loaded = crate::load::load_str(&file, &text, sources);
        cx.diags.extend(loaded.diagnostics);
        let Some(child) = loaded.spec else { continue };
        CHECKING.with(|c| c.borrow_mut().push(me.clone()));
        let child_diags = super::check(&child, sources);
        CHECKING.with(|c| c.borrow_mut().pop());
        let child_errors = child_diags.iter().any(|d| d.is_error());
        cx.diags.extend(child_diags);
        if child_errors {
            continue;
        }
        mappings(cx, node.name.get_ref(), g, &child);
    }
}

fn mappings(cx: &mut Cx<'_>, node: &str, g: &crate::spec::GraphNode, child: &GraphSpec) {
    let name = child
        .graph
        .name
        .as_ref()
        .map_or("the child", |n| n.get_ref());
    let fields = || child.state.iter().map(|f| f.name.get_ref().as_str());
    for (key, expr) in &g.input {
        let Some(field) = child.field(key.get_ref()) else {
            cx.error(
                "subgraph",
                key.span(),
                format!("graph `{name}` has no field `{}`", key.get_ref()),
            )
            .with_label("not a field of the child graph")
            .with_help_opt(help_for(key.get_ref(), fields()));
            continue;
        };
        // The child's contract holds for its parent as for any caller: no constant,
        // nothing its `[graph] input` leaves out.
        let listed = child
            .graph
            .input
            .as_ref()
            .is_none_or(|i| i.get_ref().iter().any(|n| n.get_ref() == key.get_ref()));
        if field.constant || !listed {
            cx.error(
                "input-constant",
                key.span(),
                format!(
                    "`{}` of graph `{name}` is {}",
                    key.get_ref(),
                    if field.configurable.is_some() {
                        "configurable, not an input: the parent's configuration gives it"
                    } else if field.constant {
                        "a constant: no caller sets it"
                    } else {
                        "not one of its inputs"
                    }
                ),
            )
            .with_label("the child does not take this as input")
            .with_help("remove it from `input`, or change the child's `[graph] input`");
            continue;
        }
        if let Ok(ast) = minijinja::machinery::parse_expr(expr.get_ref())
            && let Some(ty) = infer(&ast, &|n| cx.spec.field(n))
            && let Some(want) = refused(field, ty)
        {
            cx.error(
                "subgraph",
                expr.span(),
                format!(
                    "`{}` of graph `{name}` takes {want}, and this is {}",
                    key.get_ref(),
                    ty.name()
                ),
            )
            .with_label(format!("this is {}", ty.name()))
            .with_help("give it a value of the child field's type");
        }
    }
    let missing: Vec<String> = child
        .state
        .iter()
        .filter(|f| f.required && !g.input.iter().any(|(k, _)| k.get_ref() == f.name.get_ref()))
        .map(|f| format!("`{}`", f.name.get_ref()))
        .collect();
    if !missing.is_empty() {
        cx.error(
            "subgraph",
            g.graph.as_ref().map(|p| p.span()).unwrap_or_default(),
            format!(
                "graph `{name}` requires {} in its input",
                missing.join(", ")
            ),
        )
        .with_label("the node's `input` does not give it")
        .with_help("add it to `input = { ... }`");
    }
    for (to, from) in &g.output {
        let Some(source) = child.field(from.get_ref()) else {
            cx.error(
                "subgraph",
                from.span(),
                format!("graph `{name}` has no field `{}`", from.get_ref()),
            )
            .with_label("not a field of the child graph")
            .with_help_opt(help_for(from.get_ref(), fields()));
            continue;
        };
        let Some(target) = cx.spec.field(to.get_ref()) else {
            continue;
        };
        let (have, want) = (source.ty.get_ref(), target.ty.get_ref());
        let fits = have == want
            || matches!(want.base(), FieldType::Json)
            || (matches!(want, FieldType::Optional(_)) && want.base() == have.base());
        if !fits {
            cx.error(
                "output-type",
                from.span(),
                format!(
                    "`{}` of graph `{name}` is `{have}`, and `{}` of node `{node}` is `{want}`",
                    from.get_ref(),
                    to.get_ref()
                ),
            )
            .with_label("the types differ")
            .with_help("read a field of the same type, or make this graph's field `json`");
        }
    }
}
