//! Compiled minijinja expressions, kept next to the environment they borrow.
//!
//! An `Expression` borrows its `Environment`; `self_cell` keeps both in one value so a
//! [`super::Graph`] owns its expressions and evaluates them without parsing them again
//! on every step.

use minijinja::{Environment, Expression, Value};

/// Index of a compiled expression in a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExprId(pub(crate) u32);

pub(crate) struct ExprList<'env>(Vec<Expression<'env, 'static>>);

self_cell::self_cell!(
    pub(crate) struct Exprs {
        owner: Environment<'static>,
        #[covariant]
        dependent: ExprList,
    }
);

impl Exprs {
    /// Compiles every source in order; ids are positions in `sources`.
    pub(crate) fn build(
        env: Environment<'static>,
        sources: Vec<String>,
    ) -> Result<Exprs, (usize, minijinja::Error)> {
        Exprs::try_new(env, |env| {
            sources
                .into_iter()
                .enumerate()
                .map(|(i, src)| env.compile_expression_owned(src).map_err(|e| (i, e)))
                .collect::<Result<Vec<_>, _>>()
                .map(ExprList)
        })
    }

    pub(crate) fn eval(&self, id: ExprId, ctx: Value) -> Result<Value, minijinja::Error> {
        self.borrow_dependent().0[id.0 as usize].eval(ctx)
    }

    pub(crate) fn env(&self) -> &Environment<'static> {
        self.borrow_owner()
    }
}
