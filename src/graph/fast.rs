//! A fast path for the simple expressions most nodes write: `counter + 1`,
//! `planned_action.kind`, `tool_steps >= loops`, `'I ' ~ action.kind`, a list or a map of
//! those. minijinja's evaluator sets up a whole machine for each expression, which costs
//! more than a simple one's work; these are evaluated straight from their syntax tree.
//!
//! The fast path either gives exactly what minijinja would (the same operations, on
//! minijinja's own values, with its own equality, ordering, truthiness and formatting)
//! or gives up, and minijinja evaluates the expression as always: on anything outside
//! the plain cases below (floats, big or negative numbers, undefined values, objects
//! in `~`, long strings, filters, tests, calls), it gives up.

use super::FieldId;
use crate::value::PathSeg;
use minijinja::machinery::ast::{BinOpKind, Expr, UnaryOpKind};
use minijinja::value::{ObjectRepr, Value, ValueKind};
use std::sync::Arc;

/// Strings longer than this go to minijinja, which charges them to the fuel limit.
pub(super) const MAX_FAST_STRING: usize = 64 * 1024;

pub(crate) enum Fast {
    Var(Arc<str>),
    /// A state field, by id (and name, for roots that look names up).
    Field(FieldId, Arc<str>),
    /// A path into a state field (`planned_action.kind`, `items[0]`): walked once,
    /// from the field's value, without a value for each step of the way.
    Path(FieldId, Arc<str>, Vec<PathSeg>),
    Const(Value),
    Attr(Box<Fast>, Arc<str>),
    Item(Box<Fast>, Box<Fast>),
    Not(Box<Fast>),
    Neg(Box<Fast>),
    Bin(Op, Box<Fast>, Box<Fast>),
    And(Box<Fast>, Box<Fast>),
    Or(Box<Fast>, Box<Fast>),
    If(Box<Fast>, Box<Fast>, Box<Fast>),
    List(Vec<Fast>),
    Map(Vec<(Arc<str>, Fast)>),
}

#[derive(Clone, Copy)]
pub(crate) enum Op {
    Add,
    Sub,
    Rem,
    Concat,
    Eq,
    Ne,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
}

/// The fast form of an expression, if it has one. `field` names the state fields, so
/// that a field is read by its id rather than looked up by name at every step.
pub(crate) fn compile(source: &str, field: &dyn Fn(&str) -> Option<FieldId>) -> Option<Fast> {
    let ast = minijinja::machinery::parse_expr(source).ok()?;
    from_ast(&ast, field)
}

pub(super) fn from_ast(e: &Expr<'_>, field: &dyn Fn(&str) -> Option<FieldId>) -> Option<Fast> {
    let boxed = |e: &Expr<'_>| from_ast(e, field).map(Box::new);
    Some(match e {
        // `run` and `result` are the scope's own, whatever the fields are called.
        Expr::Var(v) => match field(v.id) {
            Some(id) if !matches!(v.id, "run" | "result") => Fast::Field(id, Arc::from(v.id)),
            _ => Fast::Var(Arc::from(v.id)),
        },
        Expr::Const(c) => Fast::Const(c.value.clone()),
        Expr::GetAttr(_) | Expr::GetItem(_) if path(e, field).is_some() => path(e, field)?,
        Expr::GetAttr(g) => Fast::Attr(boxed(&g.expr)?, Arc::from(g.name)),
        Expr::GetItem(g) => Fast::Item(boxed(&g.expr)?, boxed(&g.subscript_expr)?),
        Expr::UnaryOp(u) => match u.op {
            UnaryOpKind::Not => Fast::Not(boxed(&u.expr)?),
            UnaryOpKind::Neg => Fast::Neg(boxed(&u.expr)?),
        },
        Expr::BinOp(b) => {
            let (l, r) = (boxed(&b.left)?, boxed(&b.right)?);
            let op = match b.op {
                BinOpKind::ScAnd => return Some(Fast::And(l, r)),
                BinOpKind::ScOr => return Some(Fast::Or(l, r)),
                BinOpKind::Add => Op::Add,
                BinOpKind::Sub => Op::Sub,
                BinOpKind::Rem => Op::Rem,
                BinOpKind::Concat => Op::Concat,
                BinOpKind::Eq => Op::Eq,
                BinOpKind::Ne => Op::Ne,
                BinOpKind::Lt => Op::Lt,
                BinOpKind::Lte => Op::Lte,
                BinOpKind::Gt => Op::Gt,
                BinOpKind::Gte => Op::Gte,
                BinOpKind::In => Op::In,
                _ => return None,
            };
            Fast::Bin(op, l, r)
        }
        // Without `else`, minijinja gives a silent undefined: left to it.
        Expr::IfExpr(i) => Fast::If(
            boxed(&i.test_expr)?,
            boxed(&i.true_expr)?,
            boxed(i.false_expr.as_ref()?)?,
        ),
        Expr::List(l) => Fast::List(
            l.items
                .iter()
                .map(|i| from_ast(i, field))
                .collect::<Option<_>>()?,
        ),
        Expr::Map(m) => Fast::Map(
            m.keys
                .iter()
                .zip(&m.values)
                .map(|(k, v)| match k {
                    Expr::Const(c) => Some((Arc::from(c.value.as_str()?), from_ast(v, field)?)),
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

/// A value the fast path takes as it is: not undefined.
fn defined(v: Value) -> Option<Value> {
    (!v.is_undefined()).then_some(v)
}

/// `e` as a path into a state field, when it is one: attributes, and subscripts that
/// are string or integer literals, on a field's name.
fn path(e: &Expr<'_>, field: &dyn Fn(&str) -> Option<FieldId>) -> Option<Fast> {
    let mut segs = Vec::new();
    let mut here = e;
    loop {
        match here {
            Expr::GetAttr(g) => {
                segs.push(PathSeg::Key(Arc::from(g.name)));
                here = &g.expr;
            }
            Expr::GetItem(g) => {
                let Expr::Const(c) = &g.subscript_expr else {
                    return None;
                };
                segs.push(match c.value.as_str() {
                    Some(k) => PathSeg::Key(Arc::from(k)),
                    // A negative subscript counts from the end: left to `Fast::Item`.
                    None if c.value.is_integer() => {
                        PathSeg::Index(usize::try_from(c.value.as_i64()?).ok()?)
                    }
                    None => return None,
                });
                here = &g.expr;
            }
            Expr::Var(v) if !matches!(v.id, "run" | "result") => {
                segs.reverse();
                return Some(Fast::Path(field(v.id)?, Arc::from(v.id), segs));
            }
            _ => return None,
        }
    }
}

/// A plain `i64` (minijinja computes integers in `i128` and gives back an `i64` when
/// the result fits; the cases here always fit or give up).
fn int(v: &Value) -> Option<i64> {
    if v.kind() == ValueKind::Number && v.is_integer() {
        v.as_i64()
    } else {
        None
    }
}

/// A string short enough to handle here.
fn short_str(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| s.len() <= MAX_FAST_STRING)
}

/// Where an expression's names are looked up: the runner's scope, read in place
/// (`run::scope::ScopeRef`).
pub(crate) trait Root {
    /// A name at the root: `run`, `result`, or a name the graph does not declare.
    fn var(&self, name: &str) -> Option<Value>;
    /// State field `id`, called `name`.
    fn field(&self, id: FieldId, name: &str) -> Option<Value>;
    /// `path` into state field `id`, as the attribute and item lookups it stands for
    /// would give it; none where they would give undefined, or meet none on the way.
    fn path(&self, id: FieldId, name: &str, path: &[PathSeg]) -> Option<Value>;
}

impl Fast {
    /// The expression's value in `root` (the scope of state fields, `run`, `result`),
    /// or none when minijinja should evaluate it.
    pub(crate) fn eval(&self, root: &dyn Root) -> Option<Value> {
        match self {
            Fast::Var(name) => defined(root.var(name)?),
            Fast::Field(id, name) => defined(root.field(*id, name)?),
            Fast::Path(id, name, path) => root.path(*id, name, path),
            Fast::Const(v) => Some(v.clone()),
            Fast::Attr(base, name) => {
                let base = self::Fast::eval(base, root)?;
                if base.is_none() {
                    return None;
                }
                defined(base.get_attr(name).ok()?)
            }
            Fast::Item(base, key) => {
                let base = base.eval(root)?;
                let key = key.eval(root)?;
                // Only lookups, not slices or negative indexes' edge cases on strings.
                base.as_object()?;
                defined(base.get_item(&key).ok()?)
            }
            Fast::Not(x) => Some(Value::from(!x.eval(root)?.is_true())),
            Fast::Neg(x) => int(&x.eval(root)?)?.checked_neg().map(Value::from),
            Fast::And(l, r) => {
                let l = l.eval(root)?;
                if l.is_true() { r.eval(root) } else { Some(l) }
            }
            Fast::Or(l, r) => {
                let l = l.eval(root)?;
                if l.is_true() { Some(l) } else { r.eval(root) }
            }
            Fast::If(test, yes, no) => {
                if test.eval(root)?.is_true() {
                    yes.eval(root)
                } else {
                    no.eval(root)
                }
            }
            Fast::List(items) => Some(Value::from(
                items
                    .iter()
                    .map(|i| i.eval(root))
                    .collect::<Option<Vec<_>>>()?,
            )),
            Fast::Map(entries) => {
                let pairs = entries
                    .iter()
                    .map(|(k, v)| Some((Value::from(&**k), v.eval(root)?)))
                    .collect::<Option<Vec<_>>>()?;
                Some(Value::from_pairs(pairs))
            }
            Fast::Bin(op, l, r) => binary(*op, l.eval(root)?, r.eval(root)?),
        }
    }
}

fn binary(op: Op, a: Value, b: Value) -> Option<Value> {
    Some(match op {
        Op::Add => Value::from(int(&a)?.checked_add(int(&b)?)?),
        Op::Sub => Value::from(int(&a)?.checked_sub(int(&b)?)?),
        // minijinja's remainder follows the floor of the division, as Python's does;
        // for these it is Rust's.
        Op::Rem => {
            let (a, b) = (int(&a)?, int(&b)?);
            if a < 0 || b <= 0 {
                return None;
            }
            Value::from(a % b)
        }
        Op::Concat => {
            // Objects are formatted (and charged for) by minijinja.
            if a.as_object().is_some() || b.as_object().is_some() {
                return None;
            }
            // Strings are pushed as they are; only numbers and the like go through
            // their `Display` (a `format!` of both cost ~900 instructions).
            let mut text = String::with_capacity(
                a.as_str().map_or(16, str::len) + b.as_str().map_or(16, str::len),
            );
            for v in [&a, &b] {
                match v.as_str() {
                    Some(s) => text.push_str(s),
                    None => {
                        use std::fmt::Write;
                        let _ = write!(text, "{v}");
                    }
                }
            }
            if text.len() > MAX_FAST_STRING {
                return None;
            }
            Value::from(text)
        }
        Op::Eq => Value::from(a == b),
        Op::Ne => Value::from(a != b),
        Op::Lt => Value::from(a < b),
        Op::Lte => Value::from(a <= b),
        Op::Gt => Value::from(a > b),
        Op::Gte => Value::from(a >= b),
        // `a in b`, as minijinja's containment check.
        Op::In => {
            if let Some(hay) = short_str(&b) {
                let needle = short_str(&a)?;
                return Some(Value::from(hay.contains(needle)));
            }
            let obj = b.as_object()?;
            match obj.repr() {
                ObjectRepr::Map => Value::from(obj.get_value(&a).is_some()),
                ObjectRepr::Seq => {
                    let items = obj.try_iter()?;
                    let mut found = false;
                    for (i, item) in items.enumerate() {
                        // Long sequences are charged to the fuel limit by minijinja.
                        if i >= 1024 {
                            return None;
                        }
                        if item == a {
                            found = true;
                            break;
                        }
                    }
                    Value::from(found)
                }
                _ => return None,
            }
        }
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// States as JSON: numbers of every kind, strings, none, lists and maps, nested;
    /// the same fields in the same order.
    const STATES: [&str; 2] = [
        r#"{"n": 3, "m": -7, "big": 9223372036854775807, "f": 2.5, "s": "ab", "t": "", "z": null, "b": true,
            "l": [1, "ab", null, [2]], "o": {"kind": "click", "n": 0, "in": {"x": 1}, "l": [{"k": 1}]}, "e": [], "eo": {}}"#,
        r#"{"n": 0, "m": 4, "big": -9223372036854775808, "f": -0.0, "s": "pay here", "t": "pay", "z": null, "b": false,
            "l": [], "o": {"kind": "type", "n": 2, "l": []}, "e": [0], "eo": {"a": null}}"#,
    ];

    /// The field names of [`STATES`], in order.
    fn names() -> Vec<String> {
        let state: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(STATES[0]).unwrap();
        state.keys().cloned().collect()
    }

    /// The id of a field of [`STATES`].
    pub(crate) fn field(name: &str) -> Option<FieldId> {
        static NAMES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(names);
        NAMES
            .iter()
            .position(|n| n == name)
            .map(|i| FieldId(i as u32))
    }

    /// Each state as a minijinja value, looked up by name.
    pub(crate) fn contexts() -> Vec<Value> {
        STATES
            .iter()
            .map(|j| crate::value::from_json(serde_json::from_str(j).unwrap()))
            .collect()
    }

    /// A minijinja value as the root, looked up as minijinja itself would: the
    /// reference the runner's scope is held to.
    impl Root for Value {
        fn var(&self, name: &str) -> Option<Value> {
            self.get_attr(name).ok()
        }

        fn field(&self, _id: FieldId, name: &str) -> Option<Value> {
            self.var(name)
        }

        fn path(&self, id: FieldId, name: &str, path: &[PathSeg]) -> Option<Value> {
            let mut here = self.field(id, name)?;
            for seg in path {
                here = match seg {
                    PathSeg::Key(k) => {
                        if here.is_none() {
                            return None;
                        }
                        defined(here.get_attr(k).ok()?)?
                    }
                    PathSeg::Index(i) => {
                        here.as_object()?;
                        defined(here.get_item(&Value::from(*i as u64)).ok()?)?
                    }
                };
            }
            Some(here)
        }
    }

    /// Each state as the runner's scope holds it: fields by id, paths walked over the
    /// JSON.
    pub(crate) struct JsonRoot {
        names: Vec<String>,
        values: Vec<Arc<serde_json::Value>>,
    }

    impl Root for JsonRoot {
        fn var(&self, name: &str) -> Option<Value> {
            let i = self.names.iter().position(|n| n == name)?;
            Some(crate::value::view_of(self.values[i].clone()))
        }

        fn field(&self, id: FieldId, _name: &str) -> Option<Value> {
            Some(crate::value::view_of(
                self.values.get(id.0 as usize)?.clone(),
            ))
        }

        fn path(&self, id: FieldId, _name: &str, path: &[PathSeg]) -> Option<Value> {
            crate::value::json_path(self.values.get(id.0 as usize)?, path)
        }
    }

    pub(crate) fn json_roots() -> Vec<JsonRoot> {
        STATES
            .iter()
            .map(|j| {
                let state: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(j).unwrap();
                JsonRoot {
                    names: state.keys().cloned().collect(),
                    values: state.into_iter().map(|(_, v)| Arc::new(v)).collect(),
                }
            })
            .collect()
    }

    const ATOMS: &[&str] = &[
        "n",
        "m",
        "big",
        "f",
        "s",
        "t",
        "z",
        "b",
        "l",
        "o",
        "e",
        "eo",
        "o.kind",
        "o.n",
        "o.in.x",
        "o.l[0].k",
        "o['l'][-1]",
        "o.l[1]",
        "l[3][0]",
        "l[1].x",
        "o.kind.x",
        "o.missing",
        "l[1]",
        "l[-1]",
        "l[9]",
        "o['kind']",
        "1",
        "0",
        "-1",
        "2.0",
        "'ab'",
        "''",
        "none",
        "true",
        "false",
        "[1, 'ab']",
        "{'a': n}",
        "nope",
        "z.x",
    ];
    const OPS: &[&str] = &[
        "+", "-", "%", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "or",
    ];

    /// xorshift: deterministic picks.
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    pub(crate) fn expr(rng: &mut Rng, depth: u32) -> String {
        if depth == 0 {
            return ATOMS[rng.below(ATOMS.len())].to_string();
        }
        let a = expr(rng, depth - 1);
        let b = expr(rng, depth - 1);
        match rng.below(6) {
            0 => format!("not {a}"),
            1 => format!("({a} if {b} else {})", expr(rng, depth - 1)),
            2 => format!("[{a}, {b}]"),
            3 => format!("{{'k': {a}, 'j': {b}}}"),
            _ => format!("({a} {} {b})", OPS[rng.below(OPS.len())]),
        }
    }

    #[test]
    fn the_fast_path_gives_what_minijinja_gives_or_nothing() {
        let env = crate::jinja::environment();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut fast_taken = 0;
        for i in 0..20_000 {
            let source = expr(&mut rng, 1 + (i % 3));
            let Some(fast) = compile(&source, &field) else {
                continue;
            };
            let slow = env.compile_expression(&source).unwrap();
            for (ctx, json) in contexts().into_iter().zip(json_roots()) {
                // The runner's scope and a plain value give the same, or both nothing.
                let got = fast.eval(&ctx);
                let by_json = fast.eval(&json);
                assert_eq!(
                    got.as_ref().map(|v| (v.kind(), v.to_string())),
                    by_json.as_ref().map(|v| (v.kind(), v.to_string())),
                    "`{source}` in {ctx}"
                );
                let Some(got) = got else {
                    continue;
                };
                fast_taken += 1;
                let want = slow
                    .eval(ctx.clone())
                    .unwrap_or_else(|e| panic!("`{source}`: fast {got:?}, minijinja failed: {e}"));
                assert_eq!(
                    (
                        got.kind(),
                        got.to_string(),
                        serde_json::to_string(&got).ok()
                    ),
                    (
                        want.kind(),
                        want.to_string(),
                        serde_json::to_string(&want).ok()
                    ),
                    "`{source}` in {ctx}"
                );
                assert_eq!(got.is_true(), want.is_true(), "`{source}`");
            }
        }
        // The path is taken often enough for this to test something.
        assert!(fast_taken > 10_000, "{fast_taken}");
    }
}
