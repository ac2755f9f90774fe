//! Values fit their types: defaults, reducers, and the fields each node kind writes.

use super::schema_path::top_types;
use super::{Cx, DiagExt};
use crate::spec::{FieldSpec, FieldType, KindSpec, Reducer, Sp};
use serde_json::{Value, json};
use std::collections::HashMap;

pub(super) fn check(cx: &mut Cx<'_>) {
    let spec = cx.spec;
    for field in &spec.state {
        let name = field.name.get_ref();
        let ty = field.ty.get_ref();
        if let Some(default) = &field.default {
            if !ty.accepts(default.get_ref()) {
                cx.error(
                    "bad-default",
                    default.span(),
                    format!("the default of `{name}` is not of type `{ty}`"),
                )
                .with_label(format!("expected a value of type `{ty}`"))
                .with_help("write a value of that type, or change `type`");
            } else if let Some(schema) = field.schema.as_ref().and_then(|s| cx.schema(s))
                && let Err(err) = jsonschema::draft202012::validate(schema, default.get_ref())
            {
                let msg = format!("the default of `{name}` does not fit its schema");
                cx.error("bad-default", default.span(), msg)
                    .with_label(err.to_string());
            }
        }
        if let Some(reducer) = &field.reducer
            && !reducer_fits(*reducer.get_ref(), ty)
        {
            let r = reducer.get_ref().name();
            cx.error(
                "bad-reducer",
                reducer.span(),
                format!("reducer `{r}` does not fit field `{name}` of type `{ty}`"),
            )
            .with_label(format!("`{r}` needs {}", reducer_needs(*reducer.get_ref())))
            .with_help("use `replace`, or change the field's type");
        }
        if field.schema.is_some()
            && !matches!(
                ty.base(),
                FieldType::Json | FieldType::Object | FieldType::Map(_) | FieldType::List(_)
            )
        {
            let span = field.schema.as_ref().map(Sp::span).unwrap_or_default();
            cx.error(
                "schema-on-scalar",
                span,
                format!("field `{name}` of type `{ty}` cannot have a schema"),
            )
            .with_label("schemas describe json, object, map and list fields")
            .with_help("make the field `json` (or `object`), or drop `schema`");
        }
    }
    for node in &spec.nodes {
        let written = node.set.iter().map(|(f, _)| f).chain(node.output_fields());
        for field in written {
            if spec.field(field.get_ref()).is_some_and(|f| f.constant) {
                cx.error(
                    "const-write",
                    field.span(),
                    format!(
                        "node `{}` writes `{}`, a constant",
                        node.name.get_ref(),
                        field.get_ref()
                    ),
                )
                .with_label("constants are read, never written")
                .with_help(
                    "declare a `[state]` field instead; a run's configuration can give a `[configurable]` value another value",
                );
            }
        }
        match &node.body {
            KindSpec::Llm(l) if l.chat => {
                if let Some(out) = &l.output
                    && let Some(field) = spec.field(out.get_ref())
                    && !matches!(field.ty.get_ref().base(), FieldType::Messages)
                {
                    cx.error(
                        "output-type",
                        out.span(),
                        format!(
                            "`llm_chat` node `{}` adds its reply to a conversation, and field `{}` is `{}`",
                            node.name.get_ref(),
                            out.get_ref(),
                            field.ty.get_ref()
                        ),
                    )
                    .with_label("not a `messages` field")
                    .with_help(
                        "give it a field declared `type = \"messages\"`, or use `llm_structured` for other output",
                    );
                }
            }
            KindSpec::Llm(l) => {
                if let Some(field) = &l.stream_field {
                    let schema = l.schema.as_ref().and_then(|s| cx.schema(s)).cloned();
                    let ty = schema
                        .as_ref()
                        .and_then(|s| s.get("properties")?.get(field.get_ref())?.get("type"));
                    let is_string = match ty {
                        Some(Value::String(t)) => t == "string",
                        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                        _ => false,
                    };
                    if !is_string && (schema.is_some() || l.schema.is_none()) {
                        cx.error(
                            "stream-field",
                            field.span(),
                            format!(
                                "`stream` of node `{}` names `{}`, which is not a string property of its schema",
                                node.name.get_ref(),
                                field.get_ref()
                            ),
                        )
                        .with_label("only a top-level string property streams as text")
                        .with_help(
                            "name a property the schema declares `\"type\": \"string\"`, or write `stream = true` to stream the reply's JSON",
                        );
                    }
                }
                // A mapped node writes the list of its outputs: each item must fit.
                let written = |f: &'_ FieldSpec| -> FieldType {
                    match (&node.map, f.ty.get_ref().base()) {
                        (Some(_), FieldType::List(item)) => item.base().clone(),
                        (Some(_), _) => FieldType::Json,
                        (None, _) => written_type(f).clone(),
                    }
                };
                if let (Some(out), Some(schema_path)) = (&l.output, &l.schema)
                    && let (Some(field), Some(schema)) =
                        (spec.field(out.get_ref()), cx.schema(schema_path).cloned())
                    && let Some(types) = top_types(&schema)
                    && !types.iter().any(|t| json_type_fits(&written(field), t))
                {
                    let ty = written(field);
                    cx.error(
                        "output-type",
                        out.span(),
                        format!(
                            "field `{}` of type `{ty}` cannot hold the output of `{}`",
                            out.get_ref(),
                            schema_path.get_ref()
                        ),
                    )
                    .with_label(format!(
                        "the schema's top-level type is `{}`",
                        types.join("` or `")
                    ))
                    .with_help("change the field's type, or the schema's `type`");
                }
                if let Some(h) = &l.history {
                    expect_type(
                        cx,
                        h,
                        "`history`",
                        |t| matches!(t, FieldType::Messages),
                        "`messages`",
                    );
                }
            }
            KindSpec::Mcp(m) => {
                if let Some(f) = &m.tool_calls {
                    expect_type(
                        cx,
                        f,
                        "`tool_calls`",
                        |t| matches!(t, FieldType::Messages),
                        "`messages`",
                    );
                }
                if let Some(a) = &m.audit {
                    expect_type(
                        cx,
                        a,
                        "`audit`",
                        |t| matches!(t, FieldType::List(_) | FieldType::Json),
                        "`list<T>`",
                    );
                }
            }
            KindSpec::Interrupt(i) if i.resume_schema.is_none() && !i.accept_any => {
                cx.error(
                    "no-resume-schema",
                    node.name.span(),
                    format!("interrupt `{}` has no `resume_schema`", node.name.get_ref()),
                )
                .with_label("any answer would be taken, one the graph cannot use included")
                .with_help(
                    "add `resume_schema = \"schemas/<graph>/<answer>.json\"`, or `accept_any = true` to take any JSON on purpose",
                );
            }
            KindSpec::Policy(p) => {
                if let Some(o) = &p.output {
                    expect_type(
                        cx,
                        o,
                        "a policy's `output`",
                        |t| matches!(t, FieldType::Json | FieldType::Object),
                        "`json` or `object`",
                    );
                }
            }
            KindSpec::Finalize(f) => {
                if let Some(o) = &f.output {
                    expect_type(
                        cx,
                        o,
                        "a finalize node's `output`",
                        |t| matches!(t, FieldType::String | FieldType::Json),
                        "`string`",
                    );
                }
            }
            _ => {}
        }
    }
}

fn expect_type(
    cx: &mut Cx<'_>,
    field: &Sp<String>,
    what: &str,
    ok: impl Fn(&FieldType) -> bool,
    want: &str,
) {
    let Some(f) = cx.spec.field(field.get_ref()) else {
        return;
    };
    let ty = f.ty.get_ref();
    if !ok(ty.base()) {
        cx.error(
            "output-type",
            field.span(),
            format!(
                "{what} must be a {want} field, and `{}` is `{ty}`",
                field.get_ref()
            ),
        )
        .with_label(format!("expected a {want} field"))
        .with_help(format!("change the type of `{}`", field.get_ref()));
    }
}

pub(super) fn reducer_fits(r: Reducer, ty: &FieldType) -> bool {
    match r {
        Reducer::Replace => true,
        Reducer::Append => matches!(ty.base(), FieldType::List(_) | FieldType::Messages),
        Reducer::Add => matches!(ty.base(), FieldType::Int | FieldType::Float),
        Reducer::Merge => matches!(
            ty.base(),
            FieldType::Object | FieldType::Map(_) | FieldType::Json
        ),
        Reducer::Messages => matches!(ty.base(), FieldType::Messages),
    }
}

fn reducer_needs(r: Reducer) -> &'static str {
    match r {
        Reducer::Replace => "any type",
        Reducer::Append => "a `list<T>` field",
        Reducer::Add => "an `int` or `float` field",
        Reducer::Merge => "an `object`, `map<T>` or `json` field",
        Reducer::Messages => "a `messages` field",
    }
}

/// When no top-level type of `schema` fits what one write to `field` may be: the
/// field's written type and the schema's types, for the message.
pub(crate) fn misfit(
    field: &FieldSpec,
    schema: &Value,
    mapped: bool,
) -> Option<(FieldType, Vec<String>)> {
    let types = top_types(schema)?;
    // A mapped node writes the list of its results: each item must fit.
    let written = match (mapped, field.ty.get_ref().base()) {
        (true, FieldType::List(item)) => item.base(),
        (true, _) => &FieldType::Json,
        (false, _) => written_type(field),
    };
    (!types.iter().any(|t| json_type_fits(written, t))).then(|| {
        (
            written.clone(),
            types.iter().map(|t| t.to_string()).collect(),
        )
    })
}

/// The type a single write to the field must have: the item type for appending
/// reducers, else the field's own type.
fn written_type(field: &FieldSpec) -> &FieldType {
    match (field.reducer(), field.ty.get_ref().base()) {
        (Reducer::Append, FieldType::List(item)) => item.base(),
        (Reducer::Messages | Reducer::Append, FieldType::Messages) => &FieldType::Object,
        (_, t) => t,
    }
}

fn json_type_fits(ty: &FieldType, json_type: &str) -> bool {
    match ty.base() {
        FieldType::Json => true,
        FieldType::Object | FieldType::Map(_) => json_type == "object",
        FieldType::List(_) | FieldType::Messages => json_type == "array",
        FieldType::String => json_type == "string",
        FieldType::Int => json_type == "integer",
        FieldType::Float => matches!(json_type, "number" | "integer"),
        FieldType::Bool => json_type == "boolean",
        FieldType::Optional(_) => unreachable!("base() strips optional"),
    }
}

/// The schema that describes each field's value: its own `schema`, else the schema of
/// the one node kind that writes it whole (an llm node's output schema, an interrupt's
/// resume schema, the fixed shape of a policy decision).
pub(super) fn field_schemas(cx: &Cx<'_>) -> HashMap<String, Value> {
    let spec = cx.spec;
    let mut out: HashMap<String, Value> = HashMap::new();
    let mut inferred: HashMap<String, Vec<Value>> = HashMap::new();
    for node in &spec.nodes {
        let (field, schema) = match &node.body {
            KindSpec::Llm(l) => (
                l.output.as_ref(),
                l.schema.as_ref().and_then(|s| cx.schema(s)).cloned(),
            ),
            KindSpec::Interrupt(i) => (
                i.output.as_ref(),
                i.resume_schema.as_ref().and_then(|s| cx.schema(s)).cloned(),
            ),
            KindSpec::Policy(p) => (p.output.as_ref(), Some(policy_schema())),
            _ => (None, None),
        };
        if let (Some(field), Some(schema)) = (field, schema)
            && spec
                .field(field.get_ref())
                .is_some_and(|f| f.reducer() == Reducer::Replace)
        {
            inferred
                .entry(field.get_ref().clone())
                .or_default()
                .push(schema);
        }
    }
    for field in &spec.state {
        let name = field.name.get_ref();
        if let Some(schema) = field.schema.as_ref().and_then(|s| cx.schema(s)) {
            out.insert(name.clone(), schema.clone());
        } else if let Some(mut schemas) = inferred.remove(name)
            && schemas.iter().all(|s| *s == schemas[0])
        {
            out.insert(name.clone(), schemas.swap_remove(0));
        }
    }
    out
}

/// The shape of what a policy node writes.
pub(crate) fn policy_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": { "enum": ["allow", "confirm", "deny"] },
            "reason": { "type": "string" },
            "rule": { "type": ["string", "null"] }
        },
        "required": ["decision", "reason", "rule"],
        "additionalProperties": false
    })
}
