//! A mapped node (`map = { over = ... }`) does an `llm_structured` or `mcp_call` node's
//! work once per item: its list is a list, its item's name is free, and its `output`
//! field holds the list of the results.

use super::set_types::{Ty, infer};
use super::{Cx, DiagExt};
use crate::spec::{FieldType, KindSpec, NodeSpec};

pub(super) fn check(cx: &mut Cx<'_>) {
    let spec = cx.spec;
    for node in &spec.nodes {
        let Some(map) = &node.map else { continue };
        let n = node.name.get_ref();
        let kind = node.kind.get_ref().name();
        let why_not = match &node.body {
            KindSpec::Llm(l) if !l.pseudo_tools.is_empty() => {
                Some("a pseudo tool picks the next node, and the items of a map would pick several")
            }
            KindSpec::Mcp(m) if m.multi => {
                Some("a mapped `mcp_call` makes one call per item: give it `tool`, not `calls`")
            }
            KindSpec::Llm(_) | KindSpec::Mcp(_) => None,
            _ => Some("only `llm_structured` and `mcp_call` nodes do their work once per item"),
        };
        if let Some(why) = why_not {
            cx.error(
                "map-kind",
                map.span.clone(),
                format!("`{kind}` node `{n}` cannot have a `map`"),
            )
            .with_label(why)
            .with_help("do the work in a mapped `llm_structured` or `mcp_call` node");
            continue;
        }
        let var = map.var.get_ref();
        let identifier = var
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !identifier {
            cx.error(
                "bad-name",
                map.var.span(),
                format!("`{var}` is not a valid name"),
            )
            .with_label("not an identifier")
            .with_help("the item is read by this name: letters, digits and `_`");
        }
        if matches!(var.as_str(), "run" | "result") || spec.field(var).is_some() {
            cx.error(
                "duplicate-name",
                map.var.span(),
                format!("the item of `{n}`'s map is called `{var}`, a name already taken"),
            )
            .with_label(if spec.field(var).is_some() {
                "a state field (or constant) has this name"
            } else {
                "a built-in variable has this name"
            })
            .with_help("name the item something else: `as = \"call\"`");
        }
        if let Some(over) = &map.over
            && let Ok(ast) = minijinja::machinery::parse_expr(over.get_ref())
            && let Some(ty) = infer(&ast, &|name| spec.field(name))
            && ty != Ty::List
        {
            cx.error(
                "map-over",
                over.span(),
                format!("`{n}` maps over {}, not a list", ty.name()),
            )
            .with_label(format!("this is {}", ty.name()))
            .with_help("map over a `list<…>` field, or an expression that gives a list");
        }
        output(cx, node, map.collect_errors);
    }
}

/// The output field receives the list of the items' results.
fn output(cx: &mut Cx<'_>, node: &NodeSpec, collect_errors: bool) {
    let out = match &node.body {
        KindSpec::Llm(l) => l.output.as_ref(),
        KindSpec::Mcp(m) => m.calls.first().and_then(|c| c.output.as_ref()),
        _ => None,
    };
    let Some(out) = out else { return };
    let Some(field) = cx.spec.field(out.get_ref()) else {
        return;
    };
    let ty = field.ty.get_ref();
    if !matches!(
        ty.base(),
        FieldType::List(_) | FieldType::Messages | FieldType::Json
    ) {
        cx.error(
            "output-type",
            out.span(),
            format!(
                "mapped node `{}` writes the list of its results, and `{}` is `{ty}`",
                node.name.get_ref(),
                out.get_ref()
            ),
        )
        .with_label("expected a `list<…>` or `json` field")
        .with_help(format!(
            "make `{}` a list (`type = \"list<json>\"`)",
            out.get_ref()
        ));
    } else if collect_errors
        && !matches!(ty.base(), FieldType::Json)
        && !matches!(ty.base(), FieldType::List(item) if matches!(item.base(), FieldType::Json))
    {
        cx.error(
            "output-type",
            out.span(),
            format!(
                "`{}` keeps failed items as `{{ error }}`, and `{}` is `{ty}`",
                node.name.get_ref(),
                out.get_ref()
            ),
        )
        .with_label("a failed item's `{ error }` would not fit it")
        .with_help(format!(
            "make `{}` a `list<json>`, or let a failed item fail the node (`errors = \"fail\"`)",
            out.get_ref()
        ));
    }
}
