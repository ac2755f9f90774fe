//! What a graph declares of its runs: the bounds of a `[configurable]` value, and a
//! model named by a constant (`{{ NAME }}`).

use super::Sp;

/// What values a `[configurable]` value may take besides its default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bounds {
    pub min: Option<Sp<f64>>,
    pub max: Option<Sp<f64>>,
    pub one_of: Option<Sp<Vec<serde_json::Value>>>,
}

impl Bounds {
    /// Why `v` is not one of the values these bounds allow, if it is not.
    pub fn refuse(&self, v: &serde_json::Value) -> Option<String> {
        // Numbers by value: a client's `1` is the `1.0` a float's list gives.
        let same = |a: &serde_json::Value| match (a.as_f64(), v.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => a == v,
        };
        if let Some(allowed) = &self.one_of
            && !allowed.get_ref().iter().any(same)
        {
            let list: Vec<String> = allowed.get_ref().iter().map(|a| a.to_string()).collect();
            return Some(format!("{v} is not one of {}", list.join(", ")));
        }
        let n = v.as_f64()?;
        if let Some(min) = &self.min
            && n < *min.get_ref()
        {
            return Some(format!("{v} is below its least, {}", min.get_ref()));
        }
        if let Some(max) = &self.max
            && n > *max.get_ref()
        {
            return Some(format!("{v} is above its most, {}", max.get_ref()));
        }
        None
    }
}

/// The constant a model name `{{ NAME }}` reads its model from, if it is one.
pub fn model_ref(model: &str) -> Option<&str> {
    let inner = model.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim();
    (!inner.is_empty() && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(inner)
}
