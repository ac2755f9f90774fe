//! Completion, from the text before the cursor: node names where a node is named
//! (`next`, `entry`, route targets), node kinds after `kind = "`, state fields in
//! expressions, templates and `output`, filters after `|`. Names come from the last
//! check and from the outline, which needs no valid TOML: a half-typed
//! `next = "mo` is not TOML, and is where completion is wanted.

use super::Analysis;
use super::docs;
use crate::spec::{END, NodeKind};
use lsp_types::{CompletionItem, CompletionItemKind, Documentation, Position};

/// Keys whose value names a node.
const NODE_KEYS: [&str; 7] = [
    "next",
    "entry",
    "default",
    "on_error",
    "on_timeout",
    "on_limit",
    "to",
];
/// Keys whose value names a state field.
const FIELD_KEYS: [&str; 6] = [
    "output",
    "history",
    "tool_calls",
    "audit",
    "input",
    "output_field",
];
/// Keys whose value is an expression.
const EXPR_KEYS: [&str; 7] = ["only_if", "on", "if", "when", "over", "fallback", "key"];
/// Keys whose value is a template.
const TEMPLATE_KEYS: [&str; 6] = [
    "response",
    "message",
    "reason",
    "default_reason",
    "tool",
    "model",
];
/// Tables whose every value is an expression.
const EXPR_TABLES: [&str; 4] = ["set", "args", "payload", "input"];

#[derive(Debug, PartialEq, Eq)]
enum Want {
    Node,
    Kind,
    Field,
    Filter,
    /// A key at the start of a line: those the table takes (the format's schema).
    Key,
    /// An `mcp_call`'s `tool`: the server's tools, as `switchyard tools` listed them.
    Tool,
}

impl Analysis {
    pub fn completion(&self, pos: Position) -> Vec<CompletionItem> {
        let offset = self.lines().offset(pos);
        let line_start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let Some(before) = self.text.get(line_start..offset) else {
            return Vec::new();
        };
        let table = self.outline.table_at(offset);
        let table_keys: Vec<&str> = table.map_or(Vec::new(), |h| {
            h.keys.iter().map(|(k, _)| k.as_str()).collect()
        });
        match want(before, &table_keys) {
            Some(Want::Node) => self.node_items(),
            Some(Want::Kind) => NodeKind::NAMES
                .iter()
                .filter_map(|n| NodeKind::parse(n))
                .map(|k| {
                    item(
                        k.name(),
                        CompletionItemKind::ENUM_MEMBER,
                        "node kind",
                        docs::kind(k),
                    )
                })
                .collect(),
            Some(Want::Field) => self.field_items(),
            Some(Want::Filter) => docs::FILTERS
                .iter()
                .map(|(name, doc)| item(name, CompletionItemKind::FUNCTION, "filter", doc))
                .collect(),
            Some(Want::Key) => {
                let written = table.map_or(Vec::new(), |h| self.written_keys(h));
                super::keys::keys(&table_keys)
                    .into_iter()
                    .filter(|(k, _)| !written.contains(k))
                    .map(|(k, doc)| item(k, CompletionItemKind::PROPERTY, "key", doc))
                    .collect()
            }
            Some(Want::Tool) => {
                self.tool_items(table.and_then(|h| h.named("nodes")).map(|(n, _)| n))
            }
            None => Vec::new(),
        }
    }

    /// The keys already written in the table under `header`.
    fn written_keys(&self, header: &super::outline::Header) -> Vec<&str> {
        let rest = &self.text[header.line.end.min(self.text.len())..];
        rest.lines()
            .skip(1)
            .take_while(|l| !l.trim_start().starts_with('['))
            .filter_map(|l| {
                let (k, _) = l.split_once('=')?;
                let k = k.trim();
                k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                    .then_some(k)
            })
            .collect()
    }

    /// The tools of the server the node `node` calls, from `NAME.tools.json` beside the
    /// graph: what `switchyard tools NAME.toml --format json` printed (the file a
    /// graph's tests read too). None when there is no such file.
    fn tool_items(&self, node: Option<&str>) -> Vec<CompletionItem> {
        let Ok(path) = self.uri.to_file_path() else {
            return Vec::new();
        };
        let server = node
            .and_then(|n| self.validation.spec.as_ref()?.node(n))
            .and_then(|n| match &n.body {
                crate::spec::KindSpec::Mcp(m) => m.server.as_ref().map(|s| s.get_ref().clone()),
                _ => None,
            });
        let listed = path.with_extension("tools.json");
        crate::testing::tools_listed_in(&listed, server.as_deref())
            .unwrap_or_default()
            .into_iter()
            .map(|(server, t)| {
                let detail = match server {
                    Some(s) => format!("tool of `{s}`"),
                    None => "tool".to_string(),
                };
                item(
                    &t.name,
                    CompletionItemKind::FUNCTION,
                    &detail,
                    &t.description,
                )
            })
            .collect()
    }

    fn node_items(&self) -> Vec<CompletionItem> {
        let spec = self.validation.spec.as_ref();
        let mut out: Vec<CompletionItem> = Vec::new();
        for name in self.outline.names("nodes") {
            let node = spec.and_then(|s| s.node(name));
            let kind = node
                .filter(|n| !n.kind_unknown)
                .map_or("node", |n| n.kind.get_ref().name());
            let doc = node.map_or("", |n| n.description.as_str());
            out.push(item(name, CompletionItemKind::CLASS, kind, doc));
        }
        out.push(item(
            END,
            CompletionItemKind::KEYWORD,
            "the end of the graph",
            "",
        ));
        out
    }

    fn field_items(&self) -> Vec<CompletionItem> {
        let spec = self.validation.spec.as_ref();
        let mut out: Vec<CompletionItem> = Vec::new();
        let names = self
            .outline
            .names("state")
            .into_iter()
            .map(|n| (n, false))
            .chain(self.outline.consts.iter().map(|(n, _)| (n.as_str(), true)));
        for (name, constant) in names {
            if out.iter().any(|i| i.label == name) {
                continue;
            }
            let field = spec.and_then(|s| s.field(name));
            let detail = field.map_or(String::new(), |f| f.ty.get_ref().to_string());
            let doc = field.map_or("", |f| f.description.as_str());
            let kind = if constant {
                CompletionItemKind::CONSTANT
            } else {
                CompletionItemKind::FIELD
            };
            out.push(item(name, kind, &detail, doc));
        }
        out.push(item(
            "run",
            CompletionItemKind::VARIABLE,
            "built-in",
            "The run: `thread_id`, `step`, `max_steps`, `tokens`, `elapsed_ms`, `error`.",
        ));
        out
    }
}

fn item(label: &str, kind: CompletionItemKind, detail: &str, doc: &str) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: (!detail.is_empty()).then(|| detail.to_string()),
        documentation: (!doc.is_empty()).then(|| Documentation::String(doc.to_string())),
        ..Default::default()
    }
}

/// What the cursor at the end of `before` (its line so far) wants, in a table whose
/// header has `table` keys.
fn want(before: &str, table: &[&str]) -> Option<Want> {
    // Where the string the cursor is in opened, if it is in one.
    let mut open: Option<(usize, char)> = None;
    let mut escaped = false;
    for (i, c) in before.char_indices() {
        match open {
            Some(_) if escaped => escaped = false,
            Some((_, '"')) if c == '\\' => escaped = true,
            Some((_, q)) if c == q => open = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => open = Some((i, c)),
            None if c == '#' => return None,
            None => {}
        }
    }
    let Some((quote, _)) = open else {
        // A key at the start of a line of `[nodes.x.set]`: the field it writes; of
        // another table, a key the table takes.
        let key = before.trim_start();
        let is_key = key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_key || table.is_empty() {
            return None;
        }
        return Some(
            if table.last() == Some(&"set") && table.first() == Some(&"nodes") {
                Want::Field
            } else {
                Want::Key
            },
        );
    };
    let typed = &before[quote + 1..];
    let prefix = before[..quote].trim_end();
    let key = prefix
        .rfind('=')
        .map(|eq| {
            let k = prefix[..eq].trim_end();
            &k[word_start(k)..]
        })
        .unwrap_or("");
    let first_key = before
        .trim_start()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    let in_cases = first_key == "cases" || table.last() == Some(&"cases");
    if NODE_KEYS.contains(&key) || (in_cases && key != "on") {
        return Some(Want::Node);
    }
    if key == "kind" {
        return Some(Want::Kind);
    }
    // A tool named as it is (a template picks one from the state).
    if key == "tool" && !typed.contains('{') {
        return Some(Want::Tool);
    }
    if FIELD_KEYS.contains(&key) && table.first() != Some(&"servers") {
        return Some(Want::Field);
    }
    let expr = EXPR_KEYS.contains(&key)
        || table.first() == Some(&"nodes") && table.last().is_some_and(|t| EXPR_TABLES.contains(t))
        || ["set", "args", "payload"].contains(&first_key);
    let template = TEMPLATE_KEYS.contains(&key);
    let code = if expr {
        typed
    } else if template {
        // Only inside an open `{{ ` or `{% `.
        let open = typed.rfind("{{").max(typed.rfind("{%"))?;
        let close = typed.rfind("}}").max(typed.rfind("%}"));
        if close.is_some_and(|c| c > open) {
            return None;
        }
        &typed[open + 2..]
    } else {
        return None;
    };
    // The word being typed, and what stands before it.
    let lead = code[..word_start(code)].trim_end();
    if lead.ends_with('|') {
        Some(Want::Filter)
    } else if lead.ends_with(['.', '\'', '"']) {
        None
    } else {
        Some(Want::Field)
    }
}

/// Where the name that `s` ends with starts (its length when it ends otherwise).
fn word_start(s: &str) -> usize {
    s.char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wants_by_key_table_and_what_was_typed() {
        let node = ["nodes", "a"];
        assert_eq!(want("next = \"mo", &node), Some(Want::Node));
        assert_eq!(want("entry = \"", &["graph"]), Some(Want::Node));
        assert_eq!(
            want("cases = { ok = \"do", &["nodes", "a", "route"]),
            Some(Want::Node)
        );
        assert_eq!(
            want(
                "  { case = \"x\", if = \"n > 1\", to = \"",
                &["nodes", "a", "route"]
            ),
            Some(Want::Node)
        );
        assert_eq!(want("kind = \"", &node), Some(Want::Kind));
        assert_eq!(
            want("only_if = \"count > 1 and ta", &node),
            Some(Want::Field)
        );
        assert_eq!(want("only_if = \"items | le", &node), Some(Want::Filter));
        assert_eq!(want("only_if = \"a.b", &node), None);
        assert_eq!(want("response = \"Done: {{ fi", &node), Some(Want::Field));
        assert_eq!(want("response = \"Done: {{ x }} and", &node), None);
        assert_eq!(
            want("messages = \"hist", &["nodes", "a", "set"]),
            Some(Want::Field)
        );
        assert_eq!(want("mess", &["nodes", "a", "set"]), Some(Want::Field));
        assert_eq!(want("output = \"", &node), Some(Want::Field));
        assert_eq!(want("description = \"the ", &node), None);
        assert_eq!(want("next = \"a\" # \"", &node), None);
        // Regression: a name after a multi-byte character was cut inside it.
        assert_eq!(want("only_if = \"é", &node), Some(Want::Field));
        assert_eq!(want("nëxt = \"", &node), None);
    }
}
