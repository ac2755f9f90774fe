//! `[budget]` and `[llm] prices`: what a run may cost, and what a model's tokens cost.

use super::reader::{Table, to_json};
use crate::diagnostic::Diagnostic;
use crate::spec::{Budget, Prices, Sp, price_of};
use toml::de::DeValue;

pub(super) fn read_budget(top: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> Budget {
    let Some(mut t) = top.table("budget", diags) else {
        return Budget::default();
    };
    t.what = "`[budget]`".into();
    let file = t.file;
    let usd = t
        .raw("usd")
        .and_then(|v| match to_json(v.get_ref()).as_f64() {
            Some(n) if n.is_finite() && n > 0.0 => Some(Sp::new(v.span(), n)),
            _ => {
                diags.push(
                    Diagnostic::error(
                        "bad-value",
                        file,
                        v.span(),
                        "`usd` in `[budget]` must be a number of dollars above 0",
                    )
                    .label("expected a number > 0"),
                );
                None
            }
        });
    let budget = Budget {
        span: t.span.clone(),
        tokens: t.uint("tokens", 1, diags),
        model_calls: t.uint("model_calls", 1, diags),
        tool_calls: t.uint("tool_calls", 1, diags),
        usd,
    };
    t.finish(&["tokens", "model_calls", "tool_calls", "usd"], diags);
    budget
}

/// `prices`: a table of model -> `{ input, output }`, or the path of a file of one.
pub(super) fn read_prices(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> Option<Prices> {
    let v = t.raw("prices")?;
    match v.get_ref() {
        DeValue::String(path) => Some(Prices::File(Sp::new(v.span(), path.to_string()))),
        DeValue::Table(entries) => {
            let mut prices = Vec::new();
            for (model, price) in entries.iter() {
                let json = to_json(price.get_ref());
                let parsed = serde_json::from_value::<toml::Value>(json)
                    .map_err(|e| e.to_string())
                    .and_then(|p| price_of(&p));
                match parsed {
                    Ok(p) => prices.push((Sp::new(model.span(), model.get_ref().to_string()), p)),
                    Err(why) => diags.push(
                        Diagnostic::error(
                            "bad-value",
                            t.file,
                            price.span(),
                            format!("the price of `{}` is not valid", model.get_ref()),
                        )
                        .label(why)
                        .help("write `\"<model>\" = { input = 0.15, output = 0.60 }`: US dollars per million tokens"),
                    ),
                }
            }
            Some(Prices::Table(prices))
        }
        other => {
            diags.push(t.wrong_type("prices", v.span(), "a table or a file path", other));
            None
        }
    }
}
