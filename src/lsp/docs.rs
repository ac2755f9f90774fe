//! The short texts hover shows for node kinds and template filters, and completion
//! offers beside their names (docs/graph-format.md says the same at length).

use crate::spec::NodeKind;

pub(crate) fn kind(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::LlmStructured => {
            "Renders a prompt from state, asks the model for JSON that fits a schema (or for one call of the tools it offers), validates the reply and writes it to `output`."
        }
        NodeKind::LlmChat => {
            "A chat model's turn: the plain-text answer joins a `messages` field as an AI message."
        }
        NodeKind::McpCall => "Calls one tool (or several, in order) on an MCP server.",
        NodeKind::Policy => {
            "Ordered rules decide `allow`, `confirm` or `deny`, with a reason; the first rule whose `when` holds decides."
        }
        NodeKind::Interrupt => {
            "Pauses the run for a person; `switchyard resume` continues with a payload that must fit `resume_schema`."
        }
        NodeKind::Finalize => {
            "Ends the run with an outcome and a response. It has no `next` or `route`."
        }
        NodeKind::Fail => "Fails the run on purpose, with a message and an outcome of its own.",
        NodeKind::Graph => {
            "Runs another graph file to its end (a subgraph) on a thread of its own, then goes on."
        }
        NodeKind::Set => "Does nothing but its `set` (which must not be empty).",
    }
}

/// Every filter an expression or template may use: Switchyard's own first, then
/// minijinja's built-ins, each with one line about it.
pub(crate) const FILTERS: &[(&str, &str)] = &[
    (
        "sha256",
        "The SHA-256 of a value's text (strings as they are, others as JSON), in hex. Switchyard's own.",
    ),
    (
        "fromjson",
        "Parses a JSON string into a value; none when it is not JSON; any other value as it is. Switchyard's own.",
    ),
    ("abs", "The absolute value of a number."),
    (
        "attr",
        "An attribute of a value by name: `x | attr('name')`.",
    ),
    ("batch", "A list cut into lists of `n` items."),
    ("bool", "The value as a boolean."),
    (
        "capitalize",
        "The first character upper case, the rest lower case.",
    ),
    ("chain", "Several lists or maps read as one."),
    ("count", "The number of items (as `length`)."),
    (
        "d",
        "A value, or the default given when it is undefined (as `default`).",
    ),
    (
        "default",
        "A value, or the default given when it is undefined.",
    ),
    ("dictsort", "A map's items as pairs sorted by key."),
    ("e", "The value escaped (as `escape`)."),
    ("escape", "The value escaped for the output format."),
    (
        "first",
        "The first item of a list or the first character of a string.",
    ),
    ("float", "The value as a float."),
    (
        "format",
        "`printf`-style formatting: `'%s: %d' | format(name, n)`.",
    ),
    ("groupby", "Items grouped by an attribute."),
    ("indent", "Every line but the first indented by `n` spaces."),
    ("int", "The value as an integer."),
    ("items", "A map's (key, value) pairs."),
    ("join", "The items joined into a string by a separator."),
    (
        "last",
        "The last item of a list or the last character of a string.",
    ),
    (
        "length",
        "The number of items of a list or map, or characters of a string.",
    ),
    ("lines", "A string's lines."),
    ("list", "The value as a list."),
    ("lower", "The string in lower case."),
    (
        "map",
        "Each item passed through a filter, or an attribute of each: `map(attribute='x')`.",
    ),
    ("max", "The largest item."),
    ("min", "The smallest item."),
    ("pprint", "The value pretty-printed."),
    ("reject", "The items that fail a test."),
    ("rejectattr", "The items whose attribute fails a test."),
    (
        "replace",
        "A string with every occurrence of one text replaced by another.",
    ),
    ("reverse", "The items or characters in reverse order."),
    ("round", "A number rounded to a precision."),
    ("safe", "The value marked safe (not escaped)."),
    ("select", "The items that pass a test."),
    (
        "selectattr",
        "The items whose attribute passes a test: `selectattr('type', 'equalto', 'text')`.",
    ),
    ("slice", "The items cut into `n` slices."),
    (
        "sort",
        "The items sorted (`attribute=`, `reverse=`, `case_sensitive=`).",
    ),
    (
        "split",
        "A string split by a separator (whitespace by default).",
    ),
    ("string", "The value as a string."),
    ("sum", "The sum of the items."),
    ("title", "Every word capitalised."),
    ("tojson", "The value as JSON text."),
    (
        "trim",
        "A string without leading and trailing whitespace (or the characters given).",
    ),
    ("unique", "The items with duplicates removed."),
    ("upper", "The string in upper case."),
    ("zip", "Lists paired item by item."),
];

pub(crate) fn filter(name: &str) -> Option<&'static str> {
    FILTERS.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_switchyard_filter_is_described() {
        for f in crate::jinja::FILTERS {
            assert!(super::filter(f).is_some(), "{f}");
        }
    }
}
