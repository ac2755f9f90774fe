//! A fast path for templates that write only text and simple expressions:
//! `browser_{{ planned_action.kind }}`, a policy's reason, a finalize's response, a
//! prompt file of text and values.
//! minijinja renders any template with a machine of its own (a stack of frames
//! allocated for each render), which costs more than such a template's work; these are
//! written from their parts.
//!
//! As with `fast.rs`, the parts write exactly what minijinja would, or the template
//! goes to minijinja as always: only text, strings, integers and booleans are written
//! here (minijinja formats them with `Display`, as these are), and only for templates
//! minijinja would not escape.

use super::FieldId;
use super::fast::{Fast, MAX_FAST_STRING, Root, from_ast};
use minijinja::machinery::ast::Stmt;
use minijinja::value::ValueKind;
use std::fmt::Write;

pub(crate) struct FastTemplate(Vec<Part>);

enum Part {
    Text(Box<str>),
    Expr(Fast),
}

/// The fast form of template `name`, if it has one.
pub(crate) fn compile(
    name: &str,
    source: &str,
    field: &dyn Fn(&str) -> Option<FieldId>,
) -> Option<FastTemplate> {
    if minijinja::default_auto_escape_callback(name) != minijinja::AutoEscape::None {
        return None;
    }
    // Parsed as the environment parses it (its syntax is the default one): the text
    // parts are what minijinja writes, a trailing newline dropped.
    let ast = minijinja::machinery::parse(source, name, Default::default()).ok()?;
    let Stmt::Template(t) = ast else {
        return None;
    };
    let parts = t
        .children
        .iter()
        .map(|s| match s {
            Stmt::EmitRaw(r) => Some(Part::Text(r.raw.into())),
            Stmt::EmitExpr(e) => Some(Part::Expr(from_ast(&e.expr, field)?)),
            _ => None,
        })
        .collect::<Option<_>>()?;
    Some(FastTemplate(parts))
}

impl FastTemplate {
    /// The template written in `root`, or none when minijinja should render it.
    pub(crate) fn render(&self, root: &dyn Root) -> Option<String> {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Expr(e) => {
                    let v = e.eval(root)?;
                    match v.kind() {
                        ValueKind::String => out.push_str(v.as_str()?),
                        ValueKind::Bool => write!(out, "{v}").ok()?,
                        ValueKind::Number if v.is_integer() => write!(out, "{v}").ok()?,
                        _ => return None,
                    }
                }
            }
            // Long output is charged to the fuel limit by minijinja.
            if out.len() > MAX_FAST_STRING {
                return None;
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::fast::tests::{Rng, contexts, expr, field, json_roots};

    const TEXTS: &[&str] = &["", "a", " ", "x: ", "}}", "{ a }", "\n", "é ", "-"];

    fn template(rng: &mut Rng) -> String {
        let mut t = String::new();
        for _ in 0..rng.below(4) {
            t.push_str(TEXTS[rng.below(TEXTS.len())]);
            let depth = rng.below(2) as u32;
            let e = expr(rng, depth);
            t.push_str(&format!("{{{{ {e} }}}}"));
        }
        t.push_str(TEXTS[rng.below(TEXTS.len())]);
        if rng.below(4) == 0 {
            t.push('\n');
        }
        t
    }

    #[test]
    fn the_fast_path_writes_what_minijinja_writes_or_nothing() {
        let env = crate::jinja::environment();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut fast_taken = 0;
        for _ in 0..5_000 {
            let source = template(&mut rng);
            let Some(fast) = compile("inline:n:t", &source, &field) else {
                continue;
            };
            let slow = env.template_from_named_str("inline:n:t", &source).unwrap();
            for (ctx, json) in contexts().into_iter().zip(json_roots()) {
                let got = fast.render(&ctx);
                assert_eq!(got, fast.render(&json), "`{source}` in {ctx}");
                let Some(got) = got else {
                    continue;
                };
                fast_taken += 1;
                let want = slow
                    .render(ctx.clone())
                    .unwrap_or_else(|e| panic!("`{source}`: fast {got:?}, minijinja failed: {e}"));
                assert_eq!(got, want, "`{source}` in {ctx}");
            }
        }
        assert!(fast_taken > 2_000, "{fast_taken}");
    }

    #[test]
    fn a_graphs_templates_of_text_and_values_take_the_fast_path() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/graphs/agent_loop.toml"
        );
        let graph = crate::pipeline::load_graph(std::path::Path::new(path)).unwrap();
        let mut fast: Vec<&str> = graph.fast_templates.keys().map(String::as_str).collect();
        fast.sort();
        // The tool's name, the policy's reasons, the responses of the finalize nodes that
        // give one; not the prompt file, which uses a filter.
        assert_eq!(
            fast,
            [
                "inline:execute:tool0",
                "inline:finalize_denied:response",
                "inline:finalize_done:response",
                "inline:policy_gate:default_reason",
                "inline:policy_gate:reason0",
                "inline:policy_gate:reason1",
            ]
        );
    }

    #[test]
    fn templates_minijinja_would_escape_or_that_do_more_are_left_to_it() {
        let field = |_: &str| None;
        assert!(compile("inline:n:t", "a {{ x }}", &field).is_some());
        assert!(compile("file:page.html", "a {{ x }}", &field).is_none());
        assert!(compile("inline:n:t", "{% if x %}a{% endif %}", &field).is_none());
        assert!(compile("inline:n:t", "{{ x | upper }}", &field).is_none());
        assert!(compile("inline:n:t", "{{ x ", &field).is_none());
    }
}
