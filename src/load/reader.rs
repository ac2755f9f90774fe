//! Reads a parsed TOML table key by key, recording a diagnostic for every wrong type
//! and, at the end, for every key nobody asked for. Reading never stops at the first
//! problem, so one `validate` shows them all.

use crate::diagnostic::Diagnostic;
use crate::source::FileId;
use crate::spec::{Sp, parse_duration};
use crate::suggestion::help_for;
use std::ops::Range;
use std::time::Duration;
use toml::de::{DeTable, DeValue};

pub(crate) type Value<'i> = toml::Spanned<DeValue<'i>>;

pub(crate) struct Table<'a, 'i> {
    pub(crate) file: FileId,
    /// How messages name this table: `[nodes.plan_action]`.
    pub(crate) what: String,
    pub(crate) span: Range<usize>,
    entries: Vec<(&'a str, Range<usize>, &'a Value<'i>, bool)>,
}

impl<'a, 'i> Table<'a, 'i> {
    pub(crate) fn new(
        file: FileId,
        what: impl Into<String>,
        span: Range<usize>,
        table: &'a DeTable<'i>,
    ) -> Self {
        let entries = table
            .iter()
            .map(|(k, v)| (k.get_ref().as_ref(), k.span(), v, false))
            .collect();
        Self {
            file,
            what: what.into(),
            span,
            entries,
        }
    }

    /// Every entry, marking all as read: for tables of user-chosen names.
    pub(crate) fn drain(&mut self) -> Vec<(Sp<String>, &'a Value<'i>)> {
        self.entries
            .iter_mut()
            .map(|(k, span, v, used)| {
                *used = true;
                (Sp::new(span.clone(), k.to_string()), *v)
            })
            .collect()
    }

    pub(crate) fn raw(&mut self, key: &str) -> Option<&'a Value<'i>> {
        let entry = self.entries.iter_mut().find(|(k, ..)| *k == key)?;
        entry.3 = true;
        Some(entry.2)
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, ..)| *k == key)
    }

    pub(crate) fn key_span(&self, key: &str) -> Option<Range<usize>> {
        self.entries
            .iter()
            .find(|(k, ..)| *k == key)
            .map(|e| e.1.clone())
    }

    pub(crate) fn str(&mut self, key: &str, diags: &mut Vec<Diagnostic>) -> Option<Sp<String>> {
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(Sp::new(v.span(), s.to_string())),
            other => {
                diags.push(self.wrong_type(key, v.span(), "a string", other));
                None
            }
        }
    }

    pub(crate) fn bool(&mut self, key: &str, diags: &mut Vec<Diagnostic>) -> Option<bool> {
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                diags.push(self.wrong_type(key, v.span(), "a boolean", other));
                None
            }
        }
    }

    /// A whole number >= `min`.
    pub(crate) fn uint(
        &mut self,
        key: &str,
        min: u64,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Sp<u64>> {
        let v = self.raw(key)?;
        let n = match v.get_ref() {
            DeValue::Integer(i) => {
                i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok()
            }
            other => {
                diags.push(self.wrong_type(key, v.span(), "an integer", other));
                return None;
            }
        };
        match n {
            Some(n) if n >= 0 && n as u64 >= min => Some(Sp::new(v.span(), n as u64)),
            _ => {
                diags.push(
                    Diagnostic::error(
                        "bad-value",
                        self.file,
                        v.span(),
                        format!("`{key}` in {} must be at least {min}", self.what),
                    )
                    .label(format!("expected an integer >= {min}")),
                );
                None
            }
        }
    }

    pub(crate) fn float(&mut self, key: &str, diags: &mut Vec<Diagnostic>) -> Option<f64> {
        let v = self.raw(key)?;
        match to_json(v.get_ref()) {
            serde_json::Value::Number(n) => n.as_f64(),
            _ => {
                diags.push(self.wrong_type(key, v.span(), "a number", v.get_ref()));
                None
            }
        }
    }

    pub(crate) fn duration(
        &mut self,
        key: &str,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Sp<Duration>> {
        let s = self.str(key, diags)?;
        match parse_duration(s.get_ref()) {
            Ok(d) => Some(Sp::new(s.span(), d)),
            Err(why) => {
                diags.push(
                    Diagnostic::error(
                        "bad-duration",
                        self.file,
                        s.span(),
                        format!("`{key}` in {} is not a duration", self.what),
                    )
                    .label(why)
                    .help("write a number and a unit, or several: `500ms`, `30s`, `10m`, `1h30m` or `7d`"),
                );
                None
            }
        }
    }

    pub(crate) fn table(
        &mut self,
        key: &str,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Table<'a, 'i>> {
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some(Table::new(
                self.file,
                format!("`{key}` of {}", self.what),
                v.span(),
                t,
            )),
            other => {
                diags.push(self.wrong_type(key, v.span(), "a table", other));
                None
            }
        }
    }

    pub(crate) fn array(
        &mut self,
        key: &str,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<&'a [Value<'i>]> {
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::Array(a) => Some(a.as_ref()),
            other => {
                diags.push(self.wrong_type(key, v.span(), "an array", other));
                None
            }
        }
    }

    /// A table of strings (`env`, `headers`): its entries in order, each one that is not
    /// a string a diagnostic.
    pub(crate) fn string_map(
        &mut self,
        key: &str,
        diags: &mut Vec<Diagnostic>,
    ) -> Vec<(String, String)> {
        let Some(mut table) = self.table(key, diags) else {
            return Vec::new();
        };
        table
            .drain()
            .into_iter()
            .filter_map(|(k, v)| match v.get_ref() {
                DeValue::String(s) => Some((k.into_inner(), s.to_string())),
                other => {
                    diags.push(table.wrong_type(k.get_ref(), v.span(), "a string", other));
                    None
                }
            })
            .collect()
    }

    /// An array of strings.
    pub(crate) fn strings(&mut self, key: &str, diags: &mut Vec<Diagnostic>) -> Vec<Sp<String>> {
        let Some(items) = self.array(key, diags) else {
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|v| match v.get_ref() {
                DeValue::String(s) => Some(Sp::new(v.span(), s.to_string())),
                other => {
                    diags.push(self.wrong_type(key, v.span(), "a string", other));
                    None
                }
            })
            .collect()
    }

    pub(crate) fn wrong_type(
        &self,
        key: &str,
        span: Range<usize>,
        expected: &str,
        found: &DeValue<'_>,
    ) -> Diagnostic {
        Diagnostic::error(
            "wrong-type",
            self.file,
            span,
            format!(
                "`{key}` in {} must be {expected}, not {}",
                self.what,
                article(found.type_str())
            ),
        )
        .label(format!("expected {expected}"))
    }

    /// Reports every key that was never read, suggesting the closest allowed one.
    pub(crate) fn finish(&self, allowed: &[&str], diags: &mut Vec<Diagnostic>) {
        for (key, span, _, used) in &self.entries {
            if !used {
                let help = help_for(key, allowed.iter().copied()).unwrap_or_else(|| {
                    format!(
                        "{} takes {}",
                        self.what,
                        allowed
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                });
                diags.push(
                    Diagnostic::error(
                        "unknown-key",
                        self.file,
                        span.clone(),
                        format!("unknown key `{key}` in {}", self.what),
                    )
                    .label("unknown key")
                    .help(help),
                );
            }
        }
    }
}

/// `a thing` or `an item`.
pub(crate) fn article(type_str: &str) -> String {
    match type_str.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {type_str}"),
        _ => format!("a {type_str}"),
    }
}

/// Converts a TOML value to JSON: dates become strings, non-finite floats null.
pub(crate) fn to_json(v: &DeValue<'_>) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        DeValue::String(s) => J::String(s.to_string()),
        DeValue::Integer(i) => i64::from_str_radix(&i.as_str().replace('_', ""), i.radix())
            .map(J::from)
            .unwrap_or(J::Null),
        DeValue::Float(f) => f
            .as_str()
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(J::Null, J::Number),
        DeValue::Boolean(b) => J::Bool(*b),
        DeValue::Datetime(d) => J::String(d.to_string()),
        DeValue::Array(a) => J::Array(a.iter().map(|i| to_json(i.get_ref())).collect()),
        DeValue::Table(t) => J::Object(
            t.iter()
                .map(|(k, v)| (k.get_ref().to_string(), to_json(v.get_ref())))
                .collect(),
        ),
    }
}
