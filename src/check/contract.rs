//! A graph's contract with whoever runs it: the fields a run's input may set
//! (`[graph] input`), those its result gives (`[graph] output`), and the values a
//! run's configuration may choose (`[configurable]`, each within declared bounds, so
//! that a loop counted against one is bounded by its most).

use super::{Cx, DiagExt};
use crate::spec::{Bounds, FieldSpec, FieldType, Sp};

pub(super) fn check(cx: &mut Cx<'_>) {
    let spec = cx.spec;
    if let Some(input) = &spec.graph.input {
        for name in input.get_ref() {
            match spec.field(name.get_ref()) {
                None => unknown(cx, name, "input"),
                Some(f) if f.configurable.is_some() => {
                    cx.error(
                        "input-constant",
                        name.span(),
                        format!("`{}` is configurable, not an input", name.get_ref()),
                    )
                    .with_label("a run's configuration gives it")
                    .with_help(
                        "remove it from `input`: a run sets it through `config.configurable` or `context` (`switchyard run --context`)",
                    );
                }
                Some(f) if f.constant => {
                    cx.error(
                        "input-constant",
                        name.span(),
                        format!("`{}` is a constant, not an input", name.get_ref()),
                    )
                    .with_label("no run sets a constant")
                    .with_help(
                        "remove it from `input`, or declare it under `[configurable]` with its bounds to let a run choose it",
                    );
                }
                Some(_) => {}
            }
        }
        for f in spec.state.iter().filter(|f| f.required) {
            if !input
                .get_ref()
                .iter()
                .any(|n| n.get_ref() == f.name.get_ref())
            {
                cx.error(
                    "required-not-input",
                    f.name.span(),
                    format!(
                        "`{}` is required in every run's input, and `input` does not list it",
                        f.name.get_ref()
                    ),
                )
                .with_label("required here")
                .with_help(format!(
                    "add `{}` to `[graph] input`, or make it not required",
                    f.name.get_ref()
                ));
            }
        }
    }
    if let Some(output) = &spec.graph.output {
        for name in output.get_ref() {
            if spec.field(name.get_ref()).is_none() {
                unknown(cx, name, "output");
            }
        }
    }
    for f in &spec.state {
        if let Some(bounds) = &f.configurable {
            check_bounds(cx, f, bounds);
        }
    }
    let models = spec
        .llm
        .model
        .iter()
        .chain(spec.nodes.iter().filter_map(|n| match &n.body {
            crate::spec::KindSpec::Llm(l) => l.model.as_ref(),
            _ => None,
        }));
    for model in models {
        check_model_ref(cx, model);
    }
}

/// A model written `{{ NAME }}` reads a string constant: a `[configurable]` one lets a
/// run choose its model among those it lists.
fn check_model_ref(cx: &mut Cx<'_>, model: &Sp<String>) {
    let Some(name) = crate::spec::model_ref(model.get_ref()) else {
        return;
    };
    let found = cx.spec.field(name);
    let fits = found.is_some_and(|f| f.constant && matches!(f.ty.get_ref(), FieldType::String));
    if !fits {
        let hint = crate::suggestion::help_for(
            name,
            cx.spec
                .state
                .iter()
                .filter(|f| f.constant)
                .map(|f| f.name.get_ref().as_str()),
        );
        cx.error(
            "bad-model",
            model.span(),
            format!("model `{}` names `{name}`, which is no string constant", model.get_ref()),
        )
        .with_label("a model named by a constant reads a string `[consts]` or `[configurable]` value")
        .with_help(match found {
            Some(f) if f.constant => format!(
                "`{name}` is a constant of type `{}`; a model's name is a string",
                f.ty.get_ref()
            ),
            _ => hint.unwrap_or_else(|| {
                format!("declare `[configurable.{name}]` with `default = \"gpt-4o-mini\"` and the models a run may choose in `one_of`")
            }),
        });
    }
}

fn unknown(cx: &mut Cx<'_>, name: &Sp<String>, list: &str) {
    let hint = crate::suggestion::help_for(name.get_ref(), cx.field_names());
    cx.error(
        "unknown-field",
        name.span(),
        format!(
            "`[graph] {list}` names `{}`, which is no field",
            name.get_ref()
        ),
    )
    .with_label("not declared")
    .with_help(hint.unwrap_or_else(|| "declare it under `[state]`, or remove it".into()));
}

/// A configurable value's bounds fit its type and its default, and a number has a
/// most (else no loop counted against it could be proved to end).
fn check_bounds(cx: &mut Cx<'_>, f: &FieldSpec, b: &Bounds) {
    let name = f.name.get_ref();
    let numeric = matches!(f.ty.get_ref(), FieldType::Int | FieldType::Float);
    if !numeric {
        for bound in [&b.min, &b.max].into_iter().flatten() {
            cx.error(
                "bad-bounds",
                bound.span(),
                format!(
                    "`{name}` is a {}, and only a number has a `min` or a `max`",
                    f.ty.get_ref()
                ),
            )
            .with_label("not a number's")
            .with_help("use `one_of` to list the values a run may choose");
        }
    }
    if numeric && b.max.is_none() && b.one_of.is_none() {
        cx.error(
            "unbounded-configurable",
            f.name.span(),
            format!("configurable `{name}` has no `max`"),
        )
        .with_label("a run could give it any number")
        .with_help(
            "add the most a run may choose (`max = 50`), so that what a run may be given is bounded",
        );
    }
    if let (Some(min), Some(max)) = (&b.min, &b.max)
        && min.get_ref() > max.get_ref()
    {
        cx.error(
            "bad-bounds",
            min.span(),
            format!("`{name}`'s `min` is above its `max`"),
        )
        .with_label("no value fits");
    }
    if let Some(one_of) = &b.one_of {
        for v in one_of.get_ref() {
            if !f.ty.get_ref().accepts(v) {
                cx.error(
                    "bad-bounds",
                    one_of.span(),
                    format!("`{name}` is a {}, and `one_of` lists {v}", f.ty.get_ref()),
                )
                .with_label("not of its type");
            }
        }
    }
    if let Some(default) = &f.default
        && let Some(why) = b.refuse(default.get_ref())
    {
        cx.error(
            "bad-default",
            default.span(),
            format!("`{name}`'s default does not fit its bounds: {why}"),
        )
        .with_label("out of bounds");
    }
}
