//! `[consts]` and `[configurable]`: named values a graph reads and no node writes,
//! the second kind given another value by a run's configuration within bounds; and
//! `[graph] input`/`output`, the lists of fields a run's input and result have.

use super::reader::{self, Table, to_json};
use super::{check_name, read_named};
use crate::diagnostic::Diagnostic;
use crate::source::FileId;
use crate::spec::{FieldSpec, FieldType, Sp};
use toml::de::DeValue;

/// `[consts]`: named values that expressions, routes and prompts read by name. Each
/// is kept as a field no node writes, of the type its value has, so a run's input can
/// give it another value and the thread's history shows the value the run used.
pub(super) fn read_consts(
    top: &mut Table<'_, '_>,
    state: &mut Vec<FieldSpec>,
    diags: &mut Vec<Diagnostic>,
) {
    let file = top.file;
    let Some(mut t) = top.table("consts", diags) else {
        return;
    };
    for (name, value) in t.drain() {
        check_name(file, &name, "consts", diags);
        if let Some(field) = state.iter().find(|f| f.name.get_ref() == name.get_ref()) {
            diags.push(
                Diagnostic::error(
                    "duplicate-name",
                    file,
                    name.span(),
                    format!("`{}` is both a constant and a state field", name.get_ref()),
                )
                .label("declared again here")
                .help(format!(
                    "rename one of them (the field is declared at `[state.{}]`)",
                    field.name.get_ref()
                )),
            );
            continue;
        }
        let json = to_json(value.get_ref());
        let ty = type_of(&json);
        state.push(FieldSpec {
            ty: Sp::new(value.span(), ty),
            default: Some(Sp::new(value.span(), json)),
            name,
            reducer: None,
            schema: None,
            description: String::new(),
            constant: true,
            configurable: None,
            required: false,
        });
    }
}

/// A list of field names (`[graph] input`, `output`), with the span of the whole list.
pub(super) fn names_list(
    t: &mut Table<'_, '_>,
    key: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<Sp<Vec<Sp<String>>>> {
    let span = t.key_span(key)?;
    Some(Sp::new(span, t.strings(key, diags)))
}

/// The type a constant's value gives it.
fn type_of(json: &serde_json::Value) -> FieldType {
    match json {
        serde_json::Value::Bool(_) => FieldType::Bool,
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => FieldType::Int,
        serde_json::Value::Number(_) => FieldType::Float,
        serde_json::Value::String(_) => FieldType::String,
        serde_json::Value::Array(_) => FieldType::List(Box::new(FieldType::Json)),
        serde_json::Value::Object(_) => FieldType::Object,
        serde_json::Value::Null => FieldType::Json,
    }
}

/// `[configurable.NAME]`: a constant a run's configuration may give another value,
/// within `min`/`max` (numbers) or `one_of`: `default`, `min`, `max`, `one_of`,
/// `description`. Kept as a constant is, marked with its bounds.
pub(super) fn read_configurable(
    top: &mut Table<'_, '_>,
    state: &mut Vec<FieldSpec>,
    diags: &mut Vec<Diagnostic>,
) {
    let file = top.file;
    for field in read_named(top, "configurable", diags, read_configurable_one) {
        if let Some(other) = state
            .iter()
            .find(|f| f.name.get_ref() == field.name.get_ref())
        {
            diags.push(
                Diagnostic::error(
                    "duplicate-name",
                    file,
                    field.name.span(),
                    format!(
                        "`{}` is declared twice: as configurable, and as {}",
                        field.name.get_ref(),
                        if other.constant {
                            "a constant"
                        } else {
                            "a state field"
                        }
                    ),
                )
                .label("declared again here")
                .help("rename one of them"),
            );
            continue;
        }
        state.push(field);
    }
}

fn read_configurable_one(
    file: FileId,
    name: Sp<String>,
    v: &reader::Value<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<FieldSpec> {
    let DeValue::Table(table) = v.get_ref() else {
        return None;
    };
    let what = format!("`[configurable.{}]`", name.get_ref());
    let mut t = Table::new(file, what.clone(), v.span(), table);
    let Some(default) = t
        .raw("default")
        .map(|d| Sp::new(d.span(), to_json(d.get_ref())))
    else {
        diags.push(
            Diagnostic::error(
                "missing-key",
                file,
                name.span(),
                format!("{what} has no `default`"),
            )
            .label("`default` is required")
            .help(
                "add the value a run gets when its configuration gives none, e.g. `default = 25`",
            ),
        );
        return None;
    };
    let one_of = t.raw("one_of").map(|v| {
        let list = match to_json(v.get_ref()) {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        };
        Sp::new(v.span(), list)
    });
    let min_span = t.key_span("min").unwrap_or_default();
    let max_span = t.key_span("max").unwrap_or_default();
    let bounds = crate::spec::Bounds {
        min: t.float("min", diags).map(|m| Sp::new(min_span, m)),
        max: t.float("max", diags).map(|m| Sp::new(max_span, m)),
        one_of,
    };
    let description = t
        .str("description", diags)
        .map(Sp::into_inner)
        .unwrap_or_default();
    t.finish(&["default", "min", "max", "one_of", "description"], diags);
    Some(FieldSpec {
        ty: Sp::new(default.span(), type_of(default.get_ref())),
        default: Some(default),
        name,
        reducer: None,
        schema: None,
        description,
        constant: true,
        configurable: Some(bounds),
        required: false,
    })
}
