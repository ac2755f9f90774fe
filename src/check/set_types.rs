//! A `set` expression whose type can be told from its text (a literal, a field of a
//! known type, arithmetic, a comparison, `~`, a filter of known result) is checked
//! against the field it writes, through the field's reducer: `count = "'3'"` into an
//! `int` field fails every run that reaches it, so it fails `validate` instead.

use super::{Cx, DiagExt};
use crate::spec::{FieldSpec, FieldType, Reducer};
use minijinja::machinery::ast::{BinOpKind, Expr, UnaryOpKind};
use minijinja::value::ValueKind;

/// What an expression is known to give; an expression whose type cannot be told
/// (an attribute of a `json` field, `default`, a call) is not checked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Ty {
    Str,
    Int,
    Float,
    Bool,
    List,
    Map,
    None,
}

impl Ty {
    pub(super) fn name(self) -> &'static str {
        match self {
            Ty::Str => "a string",
            Ty::Int => "an integer",
            Ty::Float => "a float",
            Ty::Bool => "a boolean",
            Ty::List => "a list",
            Ty::Map => "a map",
            Ty::None => "none",
        }
    }
}

pub(super) fn check(cx: &mut Cx<'_>) {
    let spec = cx.spec;
    for node in &spec.nodes {
        for (field, expr) in &node.set {
            // A reducer that does not fit its field is reported already.
            let Some(f) = spec
                .field(field.get_ref())
                .filter(|f| super::types::reducer_fits(f.reducer(), f.ty.get_ref()))
            else {
                continue;
            };
            let Ok(ast) = minijinja::machinery::parse_expr(expr.get_ref()) else {
                continue;
            };
            let Some(ty) = infer(&ast, &|name| spec.field(name)) else {
                continue;
            };
            if let Some(want) = refused(f, ty) {
                cx.error(
                    "set-type",
                    expr.span(),
                    format!(
                        "`{}` of node `{}` writes {} to `{}`, which takes {want}",
                        field.get_ref(),
                        node.name.get_ref(),
                        ty.name(),
                        f.name.get_ref(),
                    ),
                )
                .with_label(format!("this is {}", ty.name()))
                .with_help(help(f, ty));
            }
        }
    }
}

/// What the field takes, when a write of `ty` does not fit it.
pub(super) fn refused(f: &FieldSpec, ty: Ty) -> Option<String> {
    let field_ty = f.ty.get_ref();
    let fits = |t: &FieldType| fits(t, ty);
    let ok = match (f.reducer(), field_ty.base()) {
        // One item or a list of items.
        (Reducer::Append, FieldType::List(item)) => ty == Ty::List || fits(item),
        (Reducer::Append | Reducer::Messages, FieldType::Messages) => {
            matches!(ty, Ty::List | Ty::Map)
        }
        (Reducer::Add, _) => matches!(ty, Ty::Int | Ty::Float) && fits(field_ty),
        (Reducer::Merge, _) => ty == Ty::Map,
        _ => fits(field_ty),
    };
    (!ok).then(|| match f.reducer() {
        Reducer::Append if matches!(field_ty.base(), FieldType::List(_)) => {
            let FieldType::List(item) = field_ty.base() else {
                unreachable!()
            };
            format!("`{item}` items or a list of them (it appends)")
        }
        Reducer::Append | Reducer::Messages => "messages or a list of them".into(),
        Reducer::Merge => "a map (it merges)".into(),
        _ => format!("`{field_ty}`"),
    })
}

fn fits(t: &FieldType, ty: Ty) -> bool {
    match t {
        FieldType::Optional(inner) => ty == Ty::None || fits(inner, ty),
        FieldType::Json => true,
        FieldType::String => ty == Ty::Str,
        FieldType::Int => ty == Ty::Int,
        FieldType::Float => matches!(ty, Ty::Int | Ty::Float),
        FieldType::Bool => ty == Ty::Bool,
        FieldType::Object | FieldType::Map(_) => ty == Ty::Map,
        FieldType::List(_) | FieldType::Messages => ty == Ty::List,
    }
}

fn help(f: &FieldSpec, ty: Ty) -> String {
    let base = f.ty.get_ref().base();
    match (base, ty) {
        (FieldType::Int, Ty::Str) => {
            "a quoted number is a string: write `3`, not `'3'`, or `value | int`".into()
        }
        (FieldType::Int, Ty::Float) => {
            "`/` always gives a float: use `//` for whole numbers, or `| int`".into()
        }
        (FieldType::String, _) => "make it text with `~` (`'' ~ value`) or `| string`".into(),
        (_, Ty::None) => format!("make the field optional: `type = \"{}?\"`", f.ty.get_ref()),
        _ => "write a value of the field's type, or change the field's `type`".into(),
    }
}

/// The type of `e`, when its text tells it.
pub(super) fn infer<'s>(e: &Expr<'_>, field: &dyn Fn(&str) -> Option<&'s FieldSpec>) -> Option<Ty> {
    let go = |e: &Expr<'_>| infer(e, field);
    Some(match e {
        Expr::Const(c) => match c.value.kind() {
            ValueKind::String => Ty::Str,
            ValueKind::Number if c.value.is_integer() => Ty::Int,
            ValueKind::Number => Ty::Float,
            ValueKind::Bool => Ty::Bool,
            ValueKind::None => Ty::None,
            ValueKind::Seq => Ty::List,
            ValueKind::Map => Ty::Map,
            _ => return None,
        },
        Expr::List(_) => Ty::List,
        Expr::Map(_) => Ty::Map,
        Expr::Var(v) if matches!(v.id, "run" | "result") => return None,
        Expr::Var(v) => match field(v.id)?.ty.get_ref() {
            FieldType::String => Ty::Str,
            FieldType::Int => Ty::Int,
            FieldType::Float => Ty::Float,
            FieldType::Bool => Ty::Bool,
            FieldType::List(_) | FieldType::Messages => Ty::List,
            FieldType::Object | FieldType::Map(_) => Ty::Map,
            FieldType::Json | FieldType::Optional(_) => return None,
        },
        Expr::UnaryOp(u) => match u.op {
            UnaryOpKind::Not => Ty::Bool,
            UnaryOpKind::Neg => match go(&u.expr)? {
                t @ (Ty::Int | Ty::Float) => t,
                _ => return None,
            },
        },
        Expr::BinOp(b) => {
            let (l, r) = (go(&b.left), go(&b.right));
            match b.op {
                BinOpKind::Eq
                | BinOpKind::Ne
                | BinOpKind::Lt
                | BinOpKind::Lte
                | BinOpKind::Gt
                | BinOpKind::Gte
                | BinOpKind::In => Ty::Bool,
                BinOpKind::Concat => Ty::Str,
                // minijinja gives one operand, as Python does.
                BinOpKind::ScAnd | BinOpKind::ScOr => match (l?, r?) {
                    (a, b) if a == b => a,
                    _ => return None,
                },
                BinOpKind::Div => match (l?, r?) {
                    (Ty::Int | Ty::Float, Ty::Int | Ty::Float) => Ty::Float,
                    _ => return None,
                },
                BinOpKind::Add
                | BinOpKind::Sub
                | BinOpKind::Mul
                | BinOpKind::FloorDiv
                | BinOpKind::Rem
                | BinOpKind::Pow => match (l?, r?) {
                    (Ty::Int, Ty::Int) => Ty::Int,
                    (Ty::Int | Ty::Float, Ty::Int | Ty::Float) => Ty::Float,
                    (Ty::Str, Ty::Str) if matches!(b.op, BinOpKind::Add) => Ty::Str,
                    (Ty::List, Ty::List) if matches!(b.op, BinOpKind::Add) => Ty::List,
                    _ => return None,
                },
            }
        }
        Expr::IfExpr(i) => match (go(&i.true_expr)?, go(i.false_expr.as_ref()?)?) {
            (a, b) if a == b => a,
            _ => return None,
        },
        Expr::Test(_) => Ty::Bool,
        Expr::Filter(f) => match f.name {
            "length" | "count" | "int" => Ty::Int,
            "float" => Ty::Float,
            "string" | "lower" | "upper" | "trim" | "title" | "capitalize" | "join" | "tojson"
            | "sha256" | "replace" => Ty::Str,
            // `reverse`, `sort` and `unique` keep a string a string.
            "list" => Ty::List,
            "bool" => Ty::Bool,
            _ => return None,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(src: &str) -> Option<Ty> {
        infer(&minijinja::machinery::parse_expr(src).unwrap(), &|_| None)
    }

    #[test]
    fn literals_operators_and_filters_have_types() {
        assert_eq!(ty("'3'"), Some(Ty::Str));
        assert_eq!(ty("3"), Some(Ty::Int));
        assert_eq!(ty("3.5"), Some(Ty::Float));
        assert_eq!(ty("1 + 2"), Some(Ty::Int));
        assert_eq!(ty("1 + 2.0"), Some(Ty::Float));
        assert_eq!(ty("4 / 2"), Some(Ty::Float));
        assert_eq!(ty("4 // 2"), Some(Ty::Int));
        assert_eq!(ty("'a' ~ 1"), Some(Ty::Str));
        assert_eq!(ty("1 < 2"), Some(Ty::Bool));
        assert_eq!(ty("not x"), Some(Ty::Bool));
        assert_eq!(ty("[1]"), Some(Ty::List));
        assert_eq!(ty("{'a': 1}"), Some(Ty::Map));
        assert_eq!(ty("none"), Some(Ty::None));
        assert_eq!(ty("x | length"), Some(Ty::Int));
        assert_eq!(ty("1 if x else 2"), Some(Ty::Int));
        assert_eq!(ty("1 if x else 'a'"), None);
        assert_eq!(ty("x"), None);
        assert_eq!(ty("x.y"), None);
        assert_eq!(ty("x | default(1)"), None);
    }
}
