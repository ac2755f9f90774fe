//! Routes cover every case: a route that switches on a closed set of values (an enum in
//! a schema, a bool, a policy decision) names each value or has a `default`; any other
//! route has a `default`.

use super::schema_path::{At, closed_values, resolve};
use super::{Cx, DiagExt};
use crate::spec::{FieldType, RouteSpec};
use crate::suggestion::help_for;
use serde_json::Value;
use std::collections::HashMap;

pub(super) fn check(cx: &mut Cx<'_>, schemas: &HashMap<String, Value>) {
    for node in &cx.spec.nodes {
        let Some(route) = &node.route else { continue };
        if route.on.is_some() {
            switch(cx, route, schemas);
        } else if !route.when.is_empty() && route.default.is_none() {
            cx.error(
                "route-default",
                route.span.clone(),
                format!("the route of `{}` has no `default`", node.name.get_ref()),
            )
            .with_label("no case may hold")
            .with_help("add `default = \"<node>\"` for when no `if` holds");
        }
    }
}

fn switch(cx: &mut Cx<'_>, route: &RouteSpec, schemas: &HashMap<String, Value>) {
    let Some(on) = &route.on else { return };
    let values = closed_set(cx, on.get_ref(), schemas);
    let Some(values) = values else {
        if route.default.is_none() {
            cx.error("route-default", on.span(), format!("route on `{}` has no `default`", on.get_ref()))
                .with_label("its values are not a closed set, so the cases may not cover them")
                .with_help("add `default = \"<node>\"`, or give the field a schema whose property is an `enum`");
        }
        return;
    };
    for (case, _) in &route.cases {
        if !values.contains(case.get_ref()) {
            let help = help_for(case.get_ref(), values.iter().map(String::as_str))
                .unwrap_or_else(|| format!("`{}` is one of {}", on.get_ref(), quoted(&values)));
            cx.error(
                "unknown-case",
                case.span(),
                format!("case `{}` is never taken", case.get_ref()),
            )
            .with_label(format!("not a value of `{}`", on.get_ref()))
            .with_help(help);
        }
    }
    if route.default.is_none() {
        let missing: Vec<String> = values
            .iter()
            .filter(|v| !route.cases.iter().any(|(c, _)| c.get_ref() == *v))
            .cloned()
            .collect();
        if !missing.is_empty() {
            cx.error(
                "route-coverage",
                on.span(),
                format!(
                    "route on `{}` does not cover {}",
                    on.get_ref(),
                    quoted(&missing)
                ),
            )
            .with_label(format!("can be {}", quoted(&values)))
            .with_help(format!(
                "add a case for {}, or a `default`",
                quoted(&missing)
            ));
        }
    }
}

/// The values a switch expression can take, when it reads a field (or a property of
/// one) whose values form a closed set.
fn closed_set(cx: &Cx<'_>, on: &str, schemas: &HashMap<String, Value>) -> Option<Vec<String>> {
    let segs: Vec<&str> = on.trim().split('.').collect();
    let ident = |s: &str| {
        let mut c = s.chars();
        c.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !segs.iter().all(|s| ident(s)) {
        return None;
    }
    let field = cx.spec.field(segs[0])?;
    if segs.len() == 1 && matches!(field.ty.get_ref().base(), FieldType::Bool) {
        let mut values = vec!["true".to_string(), "false".to_string()];
        // A `bool?` that is none switches to the case `none`.
        if field.ty.get_ref().is_optional() {
            values.push("none".into());
        }
        return Some(values);
    }
    match resolve(schemas.get(segs[0])?, &segs[1..]) {
        At::Schema(s) => closed_values(s),
        _ => None,
    }
}

fn quoted(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
