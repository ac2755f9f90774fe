//! [`Amount`]: a worst case that is a number, or unbounded for a reason the report names.

use serde::Serialize;
use std::sync::Arc;

/// An upper bound of one measure of a run's cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Amount {
    At(f64),
    /// No bound can be proved; the text says which field, node or loop makes it so.
    Unbounded(Arc<str>),
}

impl Amount {
    pub const ZERO: Amount = Amount::At(0.0);

    pub(super) fn unbounded(why: impl Into<String>) -> Self {
        Amount::Unbounded(Arc::from(why.into()))
    }

    pub fn value(&self) -> Option<f64> {
        match self {
            Amount::At(n) => Some(*n),
            Amount::Unbounded(_) => None,
        }
    }

    pub(super) fn plus(&self, other: &Amount) -> Amount {
        match (self, other) {
            (Amount::At(a), Amount::At(b)) => Amount::At(a + b),
            (Amount::Unbounded(w), _) | (_, Amount::Unbounded(w)) => Amount::Unbounded(w.clone()),
        }
    }

    /// `self` done `times` times; nothing done any number of times is nothing.
    pub(super) fn times(&self, times: &Amount) -> Amount {
        match (self, times) {
            (Amount::At(a), _) if *a == 0.0 => Amount::ZERO,
            (_, Amount::At(t)) if *t == 0.0 => Amount::ZERO,
            (Amount::At(a), Amount::At(t)) => Amount::At(a * t),
            (Amount::Unbounded(w), _) | (_, Amount::Unbounded(w)) => Amount::Unbounded(w.clone()),
        }
    }

    /// The larger; unbounded wins.
    pub(super) fn max(&self, other: &Amount) -> Amount {
        match (self, other) {
            (Amount::At(a), Amount::At(b)) => Amount::At(a.max(*b)),
            (Amount::Unbounded(w), _) | (_, Amount::Unbounded(w)) => Amount::Unbounded(w.clone()),
        }
    }

    pub(super) fn is_more_than(&self, other: &Amount) -> bool {
        match (self, other) {
            (Amount::At(a), Amount::At(b)) => a > b,
            (Amount::Unbounded(_), Amount::At(_)) => true,
            _ => false,
        }
    }
}
