//! What one run of a node may cost: model replies, tool calls, side-effecting tool
//! calls, tokens and dollars.
//!
//! Tokens are bounded as a byte-level tokenizer counts them: text the graph holds
//! (a template's text, a schema file, a constant) is at most one token per byte; a
//! value a model wrote reads back in at most the tokens it was written in (its node's
//! `max_tokens`). Anything else sent to a model (a run's input, a tool's result, a
//! server's tool list) has no bound, and the report names it.

use super::loops::Loops;
use super::{Amount, Costs};
use crate::spec::{FieldType, GraphSpec, KindSpec, LlmNode, NodeSpec, Price, Reducer};
use std::collections::HashMap;

/// Tokens of a message's role and framing.
const PER_MESSAGE: f64 = 8.0;
/// What a corrected reply adds to the next request besides the reply and its schema's
/// errors: the words around the problem.
const CORRECTION: f64 = 64.0;
/// The parameters offered for a pseudo tool without a schema.
const NO_SCHEMA: f64 = 64.0;

pub(super) struct Units<'s> {
    pub spec: &'s GraphSpec,
    pub loops: &'s Loops,
    pub prices: Option<&'s HashMap<String, Price>>,
    /// The worst case of each subgraph node's child run, by node index.
    pub children: HashMap<usize, Costs>,
}

impl Units<'_> {
    /// What one run of node `i` may cost.
    pub(super) fn of(&self, i: usize) -> Costs {
        let node = &self.spec.nodes[i];
        let mut c: Costs = std::array::from_fn(|_| Amount::ZERO);
        let items = self.items(node);
        match &node.body {
            KindSpec::Llm(l) => {
                let replies = (l.retries.unwrap_or(2) + 1) as f64;
                c[super::MODEL_CALLS] = Amount::At(replies).times(&items);
                let out = self.max_tokens(node, l);
                let input = self.prompt(node, l);
                // Reply k (from 0) also carries the k replies before it and what was
                // wrong with each.
                // (what was wrong quotes the reply and names the schema's rules it
                // broke)
                let schema = l
                    .schema
                    .as_ref()
                    .map_or(Amount::ZERO, |s| self.file(s.get_ref()));
                let again = out
                    .times(&Amount::At(2.0))
                    .plus(&Amount::At(CORRECTION))
                    .plus(&schema);
                let growth = replies * (replies - 1.0) / 2.0;
                let inputs = input
                    .times(&Amount::At(replies))
                    .plus(&again.times(&Amount::At(growth)));
                let outputs = out.times(&Amount::At(replies));
                c[super::TOKENS] = inputs.plus(&outputs).times(&items);
                if let Some(prices) = self.prices {
                    let price = self.price(node, l, prices);
                    c[super::USD] = match price {
                        Ok(p) => Amount::At(p.input / 1e6)
                            .times(&inputs)
                            .plus(&Amount::At(p.output / 1e6).times(&outputs))
                            .times(&items),
                        Err(why) => Amount::unbounded(why),
                    };
                }
            }
            KindSpec::Mcp(m) => {
                let attempts = node.retry.as_ref().map_or(1, |r| r.attempts.max(1)) as f64;
                let calls = match &m.tool_calls {
                    Some(field) => self.asked_calls(i, field.get_ref()),
                    None => Amount::At(m.calls.len() as f64),
                };
                let calls = calls.times(&Amount::At(attempts)).times(&items);
                if m.side_effects {
                    c[super::SIDE_EFFECTS] = calls.clone();
                }
                c[super::TOOL_CALLS] = calls;
            }
            KindSpec::Graph(_) => match self.children.get(&i) {
                Some(child) => c = child.clone(),
                None => {
                    let why = format!(
                        "the graph node `{}`'s graph could not be read",
                        node.name.get_ref()
                    );
                    c = std::array::from_fn(|_| Amount::unbounded(why.clone()));
                }
            },
            _ => {}
        }
        c
    }

    /// How many items a mapped node works on: 1 for one that is not mapped.
    fn items(&self, node: &NodeSpec) -> Amount {
        let Some(map) = &node.map else {
            return Amount::At(1.0);
        };
        let Some(over) = &map.over else {
            return Amount::At(1.0);
        };
        let over = over.get_ref().trim();
        if let Ok(serde_json::Value::Array(a)) = serde_json::from_str::<serde_json::Value>(over) {
            return Amount::At(a.len() as f64);
        }
        if let Some(f) = self
            .spec
            .field(over)
            .filter(|f| f.constant && f.configurable.is_none())
            && let Some(serde_json::Value::Array(a)) = f.default.as_ref().map(|d| d.get_ref())
        {
            return Amount::At(a.len() as f64);
        }
        Amount::unbounded(format!(
            "node `{}` runs once per item of `{over}`, a list nothing bounds",
            node.name.get_ref()
        ))
    }

    /// The calls a `tool_calls` node makes: one when every node before it is a chat
    /// model that writes `field` and may call one tool at a time.
    fn asked_calls(&self, i: usize, field: &str) -> Amount {
        let name = self.spec.nodes[i].name.get_ref();
        let before: Vec<&NodeSpec> = self
            .spec
            .nodes
            .iter()
            .filter(|n| n.edges().iter().any(|e| e.target.get_ref() == name))
            .collect();
        // Only a reply of theirs can be the last message: the node is no run's first
        // (nor the limit's), and each node before it wrote a reply whenever it went on
        // (no failure or skip leads on without one).
        let starts_here = [&self.spec.graph.entry, &self.spec.graph.on_limit]
            .into_iter()
            .flatten()
            .any(|t| t.get_ref() == name);
        let one_each = !before.is_empty()
            && !starts_here
            && before.iter().all(|n| match &n.body {
                KindSpec::Llm(l) => {
                    l.chat
                        && l.tools.is_some()
                        && l.parallel_tool_calls == Some(false)
                        && l.output.as_ref().is_some_and(|o| o.get_ref() == field)
                        && n.on_error.is_none()
                        && n.only_if.is_none()
                }
                _ => false,
            });
        if one_each {
            Amount::At(1.0)
        } else {
            Amount::unbounded(format!(
                "node `{name}` makes every call the last message of `{field}` asks for; give the chat node before it `parallel_tool_calls = false` to make that one"
            ))
        }
    }

    fn max_tokens(&self, node: &NodeSpec, l: &LlmNode) -> Amount {
        match l
            .sampling
            .max_tokens
            .as_ref()
            .or(self.spec.llm.sampling.max_tokens.as_ref())
        {
            Some(n) => Amount::At(*n.get_ref() as f64),
            None => Amount::unbounded(format!(
                "node `{}` sets no `max_tokens` (nor does `[llm]`), so a reply has no bound",
                node.name.get_ref()
            )),
        }
    }

    /// The tokens of one request's messages before any correction.
    fn prompt(&self, node: &NodeSpec, l: &LlmNode) -> Amount {
        let mut total = Amount::At(PER_MESSAGE);
        for path in [&l.system, &l.prompt].into_iter().flatten() {
            total = total
                .plus(&self.template(path.get_ref(), node))
                .plus(&Amount::At(PER_MESSAGE));
        }
        for field in [&l.history].into_iter().flatten() {
            total = total.plus(&self.field(field.get_ref()));
        }
        if l.chat
            && let Some(out) = &l.output
        {
            total = total.plus(&self.field(out.get_ref()));
        }
        if let Some(schema) = &l.schema {
            total = total.plus(&self.file(schema.get_ref()));
        }
        for p in &l.pseudo_tools {
            let text = (p.name.get_ref().len() + p.description.len()) as f64 + PER_MESSAGE;
            total = total.plus(&Amount::At(text));
            if p.schema.is_none() {
                total = total.plus(&Amount::At(NO_SCHEMA));
            }
            if let Some(schema) = &p.schema {
                total = total.plus(&self.file(schema.get_ref()));
            }
        }
        if let Some(tools) = &l.tools {
            total = total.plus(&Amount::unbounded(format!(
                "node `{}` sends the tools of server `{}`, whose size only the server knows",
                node.name.get_ref(),
                tools.server.get_ref()
            )));
        }
        total
    }

    fn file(&self, path: &str) -> Amount {
        match std::fs::metadata(self.spec.resolve(path)) {
            Ok(m) => Amount::At(m.len() as f64),
            Err(_) => Amount::unbounded(format!("`{path}` cannot be read")),
        }
    }

    /// A template's text and every value it reads.
    fn template(&self, path: &str, node: &NodeSpec) -> Amount {
        let Ok(text) = std::fs::read_to_string(self.spec.resolve(path)) else {
            return Amount::unbounded(format!("`{path}` cannot be read"));
        };
        let repeats = text.match_indices("{%").any(|(at, _)| {
            let tag = text[at + 2..].trim_start_matches(['-', '+']).trim_start();
            ["for ", "include ", "import ", "extends ", "from ", "macro "]
                .iter()
                .any(|k| tag.starts_with(k))
        }) || text.match_indices("{{").any(|(at, _)| {
            // Text a template makes longer than what it reads: `range`, padding,
            // indenting, repeating a string.
            let tag = &text[at + 2..];
            let tag = &tag[..tag.find("}}").unwrap_or(tag.len())];
            ["range", "indent", "center", "wordwrap", "*"]
                .iter()
                .any(|k| tag.contains(k))
        });
        if repeats {
            return Amount::unbounded(format!(
                "template `{path}` repeats its text for each item of a list (or takes another file's)"
            ));
        }
        let env = crate::jinja::environment();
        let Ok(t) = env.template_from_str(&text) else {
            return Amount::unbounded(format!("template `{path}` does not parse"));
        };
        let mut names: Vec<String> = t.undeclared_variables(false).into_iter().collect();
        names.sort();
        let mut total = Amount::At(text.len() as f64);
        for name in names {
            let read = if name == "run" {
                Amount::unbounded(format!(
                    "template `{path}` reads `run`, whose `error` holds a failure's text"
                ))
            } else if node.map.as_ref().is_some_and(|m| m.var.get_ref() == &name) {
                Amount::unbounded(format!(
                    "template `{path}` reads the item `{name}`, which nothing bounds"
                ))
            } else if self.spec.field(&name).is_some() {
                self.field(&name)
            } else {
                continue;
            };
            total = total.plus(&read);
        }
        total
    }

    /// The most tokens field `name` may hold as a model reads it.
    pub(super) fn field(&self, name: &str) -> Amount {
        let Some(f) = self.spec.field(name) else {
            return Amount::ZERO;
        };
        let scalar = match f.ty.get_ref().base() {
            FieldType::Bool => Some(5.0),
            FieldType::Int => Some(20.0),
            FieldType::Float => Some(32.0),
            _ => None,
        };
        if let Some(n) = scalar {
            return Amount::At(n);
        }
        let json_len = |v: &serde_json::Value| v.to_string().len() as f64;
        if f.constant {
            return match (&f.configurable, &f.default) {
                (Some(b), _) => match &b.one_of {
                    Some(all) => Amount::At(all.get_ref().iter().map(json_len).fold(0.0, f64::max)),
                    None => Amount::unbounded(format!(
                        "the configurable `{name}` may be any text (give it `one_of`)"
                    )),
                },
                (None, Some(d)) => Amount::At(json_len(d.get_ref())),
                (None, None) => Amount::At(4.0),
            };
        }
        let input = self
            .spec
            .graph
            .input
            .as_ref()
            .is_none_or(|i| i.get_ref().iter().any(|n| n.get_ref() == name));
        if input {
            return Amount::unbounded(format!(
                "field `{name}` may be set by a run's input, which nothing bounds"
            ));
        }
        let start = f.default.as_ref().map_or(4.0, |d| json_len(d.get_ref()));
        let piles = matches!(
            f.reducer(),
            Reducer::Append | Reducer::Merge | Reducer::Messages
        );
        let mut total = Amount::At(start);
        for (i, w) in self.spec.nodes.iter().enumerate() {
            let by_kind = w.output_fields().iter().any(|o| o.get_ref() == name);
            let by_set = w.set.iter().find(|(o, _)| o.get_ref() == name);
            if !by_kind && by_set.is_none() {
                continue;
            }
            let mut write = Amount::ZERO;
            if by_kind {
                write = write.plus(&match &w.body {
                    KindSpec::Llm(l) if l.fallback.is_some() => Amount::unbounded(format!(
                        "field `{name}` may hold what node `{}`'s `fallback` makes, which nothing bounds",
                        w.name.get_ref()
                    )),
                    // A mapped node writes one reply per item.
                    KindSpec::Llm(l) => self
                        .max_tokens(w, l)
                        .plus(&Amount::At(PER_MESSAGE))
                        .times(&self.items(w)),
                    KindSpec::Policy(p) => self.reasons(w, p, name),
                    KindSpec::Mcp(_) => Amount::unbounded(format!(
                        "field `{name}` holds what node `{}`'s tools return, which nothing bounds",
                        w.name.get_ref()
                    )),
                    KindSpec::Interrupt(_) => Amount::unbounded(format!(
                        "field `{name}` holds the answer to interrupt `{}`, which nothing bounds",
                        w.name.get_ref()
                    )),
                    _ => Amount::unbounded(format!(
                        "field `{name}` holds what node `{}` writes, which nothing bounds",
                        w.name.get_ref()
                    )),
                });
            }
            if let Some((_, e)) = by_set {
                write = write.plus(&match serde_json::from_str::<serde_json::Value>(e.get_ref()) {
                    Ok(v) => Amount::At(json_len(&v)),
                    Err(_) => Amount::unbounded(format!(
                        "node `{}` sets `{name}` to `{}`, whose size is not known before the run",
                        w.name.get_ref(),
                        e.get_ref()
                    )),
                });
            }
            total = if piles {
                total.plus(&write.times(self.loops.times(i)))
            } else {
                total.max(&write)
            };
        }
        total
    }

    /// What a policy node writes: its decision, rule and reason; a reason rendered
    /// from state has no bound.
    fn reasons(&self, w: &NodeSpec, p: &crate::spec::PolicyNode, name: &str) -> Amount {
        let reasons = p
            .rules
            .iter()
            .filter_map(|r| r.reason.as_ref())
            .chain(p.default_reason.iter());
        let mut longest = 0.0f64;
        for r in reasons {
            if r.get_ref().contains("{{") || r.get_ref().contains("{%") {
                return Amount::unbounded(format!(
                    "field `{name}` holds a reason of policy `{}` rendered from state",
                    w.name.get_ref()
                ));
            }
            longest = longest.max(r.get_ref().len() as f64);
        }
        Amount::At(128.0 + longest)
    }

    /// The price of the node's model: the dearest a configurable model may be.
    fn price(
        &self,
        node: &NodeSpec,
        l: &LlmNode,
        prices: &HashMap<String, Price>,
    ) -> Result<Price, String> {
        let Some(model) = l.model.as_ref().or(self.spec.llm.model.as_ref()) else {
            return Err(format!("node `{}` names no model", node.name.get_ref()));
        };
        let models: Vec<String> = match crate::spec::model_ref(model.get_ref()) {
            Some(name) => match self.spec.field(name) {
                Some(f) => match (&f.configurable, &f.default) {
                    (Some(b), _) => match &b.one_of {
                        Some(all) => all
                            .get_ref()
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect(),
                        None => {
                            return Err(format!(
                                "node `{}`'s model is the configurable `{name}`, which may be any model (give it `one_of`)",
                                node.name.get_ref()
                            ));
                        }
                    },
                    (None, Some(d)) => d
                        .get_ref()
                        .as_str()
                        .map(str::to_string)
                        .into_iter()
                        .collect(),
                    (None, None) => Vec::new(),
                },
                None => Vec::new(),
            },
            None => vec![model.get_ref().clone()],
        };
        let mut dearest: Option<Price> = None;
        for m in &models {
            let p = prices
                .get(m)
                .ok_or_else(|| format!("model `{m}` has no price in `[llm] prices`"))?;
            dearest = Some(match dearest {
                Some(d) => Price {
                    input: d.input.max(p.input),
                    output: d.output.max(p.output),
                },
                None => *p,
            });
        }
        dearest.ok_or_else(|| format!("node `{}` names no model", node.name.get_ref()))
    }
}
