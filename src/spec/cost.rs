//! What a graph says its runs may cost: `[budget]`, and the prices (`[llm] prices`)
//! that turn a model's tokens into money.

use super::Sp;
use std::ops::Range;

/// `[budget]`: the most a run may use. `validate` fails when the worst case it proves
/// is above one; the runner ends a run that goes past one, as it does at a limit.
#[derive(Debug, Default)]
pub struct Budget {
    /// Span of the `[budget]` table.
    pub span: Range<usize>,
    pub tokens: Option<Sp<u64>>,
    pub model_calls: Option<Sp<u64>>,
    pub tool_calls: Option<Sp<u64>>,
    pub usd: Option<Sp<f64>>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none()
            && self.model_calls.is_none()
            && self.tool_calls.is_none()
            && self.usd.is_none()
    }
}

/// A model's price in US dollars per million tokens, as providers list them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Price {
    /// What `tokens_in` and `tokens_out` cost, in US dollars.
    pub fn usd(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        (tokens_in as f64 * self.input + tokens_out as f64 * self.output) / 1_000_000.0
    }
}

/// `[llm.prices]`: model -> price, written in the graph or kept in a file.
#[derive(Debug)]
pub enum Prices {
    Table(Vec<(Sp<String>, Price)>),
    /// `prices = "prices.toml"`: a file of the same table, relative to the root.
    File(Sp<String>),
}

/// Reads a price file: `"<model>" = { input = <usd>, output = <usd> }` per line, dollars
/// per million tokens. `Err` says what is wrong, naming the model.
pub fn parse_prices(text: &str) -> Result<Vec<(String, Price)>, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| e.message().to_string())?;
    table
        .into_iter()
        .map(|(model, v)| {
            let price = price_of(&v).map_err(|why| format!("`{model}`: {why}"))?;
            Ok((model, price))
        })
        .collect()
}

/// A price from a TOML value, for the file and the inline table alike.
pub fn price_of(v: &toml::Value) -> Result<Price, String> {
    let toml::Value::Table(t) = v else {
        return Err("expected `{ input = <usd>, output = <usd> }`".into());
    };
    if let Some(key) = t.keys().find(|k| *k != "input" && *k != "output") {
        return Err(format!(
            "unknown key `{key}` (a price has `input` and `output`)"
        ));
    }
    let number = |key: &str| -> Result<f64, String> {
        let n = match t.get(key) {
            Some(toml::Value::Float(f)) => *f,
            Some(toml::Value::Integer(i)) => *i as f64,
            Some(_) => return Err(format!("`{key}` must be a number of dollars")),
            None => return Err(format!("`{key}` is missing (dollars per million tokens)")),
        };
        if n.is_finite() && n >= 0.0 {
            Ok(n)
        } else {
            Err(format!("`{key}` must be at least 0"))
        }
    };
    Ok(Price {
        input: number("input")?,
        output: number("output")?,
    })
}
