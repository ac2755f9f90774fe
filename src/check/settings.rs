//! Settings the model's server refuses: OpenAI's reasoning models (o1, o3, o4-mini,
//! gpt-5) answer 400 to a `temperature` or `top_p`, and its other models to a
//! `reasoning_effort`, so a run would fail at its first request. Warned at `validate`
//! (not refused: a proxy in between may drop the setting, and the names are OpenAI's
//! today); only a model written out is judged, not one a template chooses.

use super::Cx;
use crate::diagnostic::Diagnostic;
use crate::spec::{KindSpec, Provider};

pub(super) fn check(cx: &mut Cx<'_>) {
    let llm = &cx.spec.llm;
    // A provider that is no provider is reported by the loader.
    let provider = match &llm.provider {
        Some(p) => match Provider::parse(p.get_ref()) {
            Some(p) => p,
            None => return,
        },
        None => Provider::default(),
    };
    // Only OpenAI's own servers (and Azure's, which serve the same models) are known.
    if !matches!(provider, Provider::OpenAi | Provider::Azure) {
        return;
    }
    let mut found = Vec::new();
    for node in &cx.spec.nodes {
        let KindSpec::Llm(l) = &node.body else {
            continue;
        };
        let Some(model) = l.model.as_ref().or(llm.model.as_ref()) else {
            continue;
        };
        if model.get_ref().contains("{{") {
            continue;
        }
        let sampling = l.sampling.or(&llm.sampling);
        let reasoning = reasoning_model(model.get_ref());
        let refused: Vec<&str> = if reasoning {
            [
                ("temperature", l.temperature.or(llm.temperature).is_some()),
                ("top_p", sampling.top_p.is_some()),
            ]
            .into_iter()
            .filter_map(|(name, set)| set.then_some(name))
            .collect()
        } else if sampling.reasoning_effort.is_some() && chat_model(model.get_ref()) {
            vec!["reasoning_effort"]
        } else {
            Vec::new()
        };
        for setting in refused {
            let (what, help) = if reasoning {
                (
                    "a reasoning model",
                    format!("remove `{setting}`: reasoning models take only its default"),
                )
            } else {
                (
                    "not a reasoning model",
                    "remove `reasoning_effort`, or choose a reasoning model (o3, o4-mini, gpt-5)"
                        .to_string(),
                )
            };
            found.push(
                Diagnostic::warning(
                    "refused-setting",
                    cx.file,
                    model.span(),
                    format!(
                        "`{}` refuses `{setting}` (set for node `{}`)",
                        model.get_ref(),
                        node.name.get_ref()
                    ),
                )
                .label(format!("{what}: OpenAI answers 400 to `{setting}`"))
                .help(help),
            );
        }
    }
    // A model set once in `[llm]` for many nodes is warned of once per setting.
    found.dedup_by(|a, b| a.span == b.span && a.label == b.label);
    cx.diags.extend(found);
}

/// OpenAI's reasoning models: o1, o3, o4-mini and the gpt-5 family (but its chat
/// model), with or without a date or a size after the name.
fn reasoning_model(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    let family = |prefix: &str| {
        name == prefix
            || name
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('-'))
    };
    (family("o1") || family("o3") || family("o4-mini") || family("gpt-5"))
        && !name.starts_with("gpt-5-chat")
}

/// OpenAI's chat models that do not reason: the gpt-4 and gpt-3.5 families, and gpt-5's
/// chat model. (A name nobody knows, a fine-tune or a local model, is not judged.)
fn chat_model(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    ["gpt-4", "gpt-3.5", "chatgpt-4o", "gpt-5-chat"]
        .iter()
        .any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reasoning_models_are_told_by_name() {
        for m in [
            "o1",
            "o1-mini",
            "o3",
            "o3-mini-2025-01-31",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "openai/o3",
        ] {
            assert!(super::reasoning_model(m), "{m}");
        }
        for m in [
            "gpt-4o",
            "gpt-4.1-mini",
            "o10",
            "gpt-5-chat-latest",
            "llama3",
            "o3x",
        ] {
            assert!(!super::reasoning_model(m), "{m}");
        }
        for m in [
            "gpt-4o",
            "gpt-4.1-mini",
            "gpt-5-chat-latest",
            "gpt-3.5-turbo",
        ] {
            assert!(super::chat_model(m), "{m}");
        }
        for m in ["m", "llama3", "o3", "my-fine-tune"] {
            assert!(!super::chat_model(m), "{m}");
        }
    }
}
