//! The sampling keys an llm node and `[llm]` share: `max_tokens` (or its other name
//! `max_completion_tokens`), `reasoning_effort`, `seed`, `top_p`, `stop`.

use super::reader::Table;
use crate::diagnostic::Diagnostic;
use crate::spec::{SamplingSpec, Sp};

pub(super) const KEYS: [&str; 6] = [
    "max_tokens",
    "max_completion_tokens",
    "reasoning_effort",
    "seed",
    "top_p",
    "stop",
];

/// The efforts OpenAI's reasoning models take.
const EFFORTS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// OpenAI takes at most this many stop sequences.
const MAX_STOPS: usize = 4;

pub(super) fn read(t: &mut Table<'_, '_>, diags: &mut Vec<Diagnostic>) -> SamplingSpec {
    let file = t.file;
    let max_tokens = t.uint("max_tokens", 1, diags);
    let max_completion = t.uint("max_completion_tokens", 1, diags);
    let max_tokens = match (max_tokens, max_completion) {
        (Some(a), Some(b)) => {
            diags.push(
                Diagnostic::error(
                    "bad-value",
                    file,
                    b.span(),
                    "`max_tokens` and `max_completion_tokens` are both given",
                )
                .label("one limit, two names")
                .help(
                    "keep one: either is sent under the name the endpoint takes (`[llm] provider`)",
                ),
            );
            Some(a)
        }
        (a, b) => a.or(b),
    };
    let reasoning_effort = t.str("reasoning_effort", diags).filter(|e| {
        let ok = EFFORTS.contains(&e.get_ref().as_str());
        if !ok {
            diags.push(
                Diagnostic::error(
                    "bad-value",
                    file,
                    e.span(),
                    format!("`{}` is not a reasoning effort", e.get_ref()),
                )
                .label("unknown effort")
                .help(
                    crate::suggestion::help_for(e.get_ref(), EFFORTS)
                        .unwrap_or_else(|| format!("efforts are {}", EFFORTS.join(", "))),
                ),
            );
        }
        ok
    });
    let seed = t.uint("seed", 0, diags);
    let top_p = t.float("top_p", diags).filter(|p| {
        let ok = (0.0..=1.0).contains(p);
        if !ok {
            let span = t.key_span("top_p").unwrap_or_default();
            diags.push(
                Diagnostic::error("bad-value", file, span, format!("`top_p` is {p}"))
                    .label("expected a number from 0 to 1"),
            );
        }
        ok
    });
    let stop = match t.raw("stop").map(|v| v.get_ref().clone()) {
        Some(toml::de::DeValue::String(_)) => t.str("stop", diags).into_iter().collect(),
        Some(_) => t.strings("stop", diags),
        None => Vec::new(),
    };
    if stop.len() > MAX_STOPS {
        diags.push(
            Diagnostic::error(
                "bad-value",
                file,
                stop[MAX_STOPS].span(),
                format!("`stop` has {} sequences", stop.len()),
            )
            .label(format!("at most {MAX_STOPS} are taken")),
        );
    }
    SamplingSpec {
        max_tokens,
        reasoning_effort,
        seed,
        top_p,
        stop: stop
            .into_iter()
            .take(MAX_STOPS)
            .collect::<Vec<Sp<String>>>(),
    }
}
