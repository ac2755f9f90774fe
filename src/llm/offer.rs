//! [`Offer`]: what an llm node lets the model answer with, and the judgement of a
//! reply against it.

use super::{LlmReply, ToolChoice, ToolSpec};
use crate::json_schema::check;
use crate::tool::ToolInfo;
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The shapes a reply may take: JSON text that fits the node's schema, a call of one of
/// the server's tools (arguments checked against its `inputSchema`), or a call of one
/// of the graph's pseudo tools (arguments checked against its `schema`).
pub(crate) struct Offer {
    schema: Option<(Arc<Json>, Arc<jsonschema::Validator>)>,
    tools: Vec<Offered>,
    /// Several server tools may be called in one reply; the output is then
    /// `{ calls: [{ tool, arguments }], text }`, however many were called.
    parallel: bool,
}

struct Offered {
    spec: ToolSpec,
    validator: Option<Arc<jsonschema::Validator>>,
    /// Index of the pseudo tool in the node's `pseudo_tools`; none for a server tool.
    pseudo: Option<usize>,
}

/// Schemas compiled before, by their JSON text: an llm node offers the same tools at
/// every step, and compiling their schemas would cost more than the step.
static COMPILED: std::sync::LazyLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> =
    std::sync::LazyLock::new(Default::default);
/// Past this many schemas, the cache starts again (tool lists that keep changing).
const COMPILED_MAX: usize = 512;

/// `schema` compiled, or the one compiled before from the same text.
fn compiled(schema: &Json) -> Result<Arc<jsonschema::Validator>, String> {
    let key = schema.to_string();
    let cache = || COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = cache().get(&key) {
        return Ok(v.clone());
    }
    let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string())?);
    let mut cache = cache();
    if cache.len() >= COMPILED_MAX {
        cache.clear();
    }
    cache.insert(key, validator.clone());
    Ok(validator)
}

/// An accepted reply: the value for the node's `output`, and the pseudo tool chosen.
#[derive(Debug, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) output: Json,
    pub(crate) pseudo: Option<usize>,
}

/// A pseudo tool as offered: name, description and arguments schema.
pub(crate) struct PseudoSpec<'a> {
    pub(crate) name: &'a str,
    pub(crate) description: &'a str,
    pub(crate) schema: Option<&'a Json>,
}

impl Offer {
    /// `tools` are the server's (already narrowed to `only`), `pseudo` the graph's. A
    /// tool schema that is not a JSON Schema is an error: its arguments could not be
    /// checked.
    pub(crate) fn new(
        schema: Option<(Arc<Json>, Arc<jsonschema::Validator>)>,
        tools: Vec<ToolInfo>,
        pseudo: &[PseudoSpec<'_>],
    ) -> Result<Self, String> {
        let mut offered = Vec::with_capacity(tools.len() + pseudo.len());
        for t in tools {
            let validator = compiled(&t.input_schema)
                .map_err(|e| format!("the input schema of tool `{}` is not valid: {e}", t.name))?;
            offered.push(Offered {
                spec: ToolSpec {
                    name: t.name,
                    description: t.description,
                    parameters: t.input_schema,
                },
                validator: Some(validator),
                pseudo: None,
            });
        }
        for (i, p) in pseudo.iter().enumerate() {
            let validator =
                p.schema.map(compiled).transpose().map_err(|e| {
                    format!("the schema of pseudo tool `{}` is not valid: {e}", p.name)
                })?;
            offered.push(Offered {
                spec: ToolSpec {
                    name: p.name.to_string(),
                    description: p.description.to_string(),
                    parameters: p
                        .schema
                        .cloned()
                        .unwrap_or_else(|| json!({ "type": "object", "properties": {} })),
                },
                validator,
                pseudo: Some(i),
            });
        }
        Ok(Offer {
            schema,
            tools: offered,
            parallel: false,
        })
    }

    /// Takes several tool calls in one reply.
    pub(crate) fn parallel(mut self, parallel: bool) -> Self {
        self.parallel = parallel;
        self
    }

    pub(crate) fn schema(&self) -> Option<&Arc<Json>> {
        self.schema.as_ref().map(|(s, _)| s)
    }

    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    /// A node with tools and no schema must call a tool; with a schema too, the model
    /// may answer in JSON text instead.
    pub(crate) fn tool_choice(&self) -> ToolChoice {
        if self.schema.is_some() {
            ToolChoice::Auto
        } else {
            ToolChoice::Required
        }
    }

    /// Accepts a reply, or says what is wrong with it in words the model can act on.
    pub(crate) fn judge(&self, reply: &LlmReply) -> Result<Verdict, String> {
        if let Some(refusal) = &reply.refusal {
            return Err(format!("the model refused: {refusal}"));
        }
        match reply.finish_reason.as_deref() {
            Some("length") => {
                return Err(
                    "the reply was cut off at the token limit (finish_reason `length`)".into(),
                );
            }
            Some("content_filter") => {
                return Err("the server's content filter withheld the reply".into());
            }
            _ => {}
        }
        match reply.tool_calls.as_slice() {
            [] => {}
            [call] if !self.parallel => {
                return self.judge_call(&call.name, &call.arguments, reply);
            }
            calls if !self.parallel => {
                return Err(format!(
                    "the reply called {} tools; call exactly one",
                    calls.len()
                ));
            }
            calls => return self.judge_calls(calls, reply),
        }
        let Some((_, validator)) = &self.schema else {
            return Err(format!(
                "the reply called no tool; call exactly one of {}",
                self.names()
            ));
        };
        let text = reply.content.as_deref().unwrap_or("").trim();
        if text.is_empty() {
            return Err("the reply is empty".into());
        }
        let value = json_in(text).map_err(|e| format!("the reply is not JSON: {e}"))?;
        check(validator, &value).map_err(|e| format!("the reply does not fit the schema: {e}"))?;
        Ok(Verdict {
            output: value,
            pseudo: None,
        })
    }

    /// Several calls at once: each a server tool with fitting arguments, or one pseudo
    /// tool alone (it picks the next node, which several could not).
    fn judge_calls(&self, calls: &[super::ToolCall], reply: &LlmReply) -> Result<Verdict, String> {
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            let verdict = self.judge_call(&call.name, &call.arguments, reply)?;
            if verdict.pseudo.is_some() {
                if calls.len() > 1 {
                    return Err(format!(
                        "the reply called `{}` with other tools; call it alone",
                        call.name
                    ));
                }
                return Ok(verdict);
            }
            let Json::Object(mut one) = verdict.output else {
                unreachable!("a server tool's verdict is an object")
            };
            one.remove("text");
            out.push(Json::Object(one));
        }
        Ok(Verdict {
            output: json!({ "calls": out, "text": reply.content }),
            pseudo: None,
        })
    }

    fn judge_call(&self, name: &str, arguments: &str, reply: &LlmReply) -> Result<Verdict, String> {
        if self.tools.is_empty() {
            return Err(format!(
                "the reply called `{name}`, and no tools are offered; answer with JSON that fits the schema"
            ));
        }
        let Some(tool) = self.tools.iter().find(|t| t.spec.name == name) else {
            return Err(format!(
                "`{name}` is not an offered tool; call exactly one of {}",
                self.names()
            ));
        };
        let arguments: Json = if arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(arguments)
                .map_err(|e| format!("the arguments of `{name}` are not JSON: {e}"))?
        };
        if let Some(v) = &tool.validator {
            check(v, &arguments)
                .map_err(|e| format!("the arguments of `{name}` do not fit its schema: {e}"))?;
        }
        Ok(match tool.pseudo {
            Some(i) => Verdict {
                output: arguments,
                pseudo: Some(i),
            },
            None => Verdict {
                output: json!({
                    "tool": name,
                    "arguments": arguments,
                    "text": reply.content,
                }),
                pseudo: None,
            },
        })
    }

    fn names(&self) -> String {
        self.tools
            .iter()
            .map(|t| format!("`{}`", t.spec.name))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The JSON a reply holds: the whole text, else the first fenced block (```json ...```)
/// that is JSON, else the text from its first `{` (or `[`) to its last `}` (or `]`).
/// Models that ignore `response_format` (Anthropic's OpenAI-compatible endpoint, many
/// local servers) answer with JSON in a fence or with words around it; what is found is
/// checked against the schema like any reply. The error is the whole text's.
pub(crate) fn json_in(text: &str) -> Result<Json, serde_json::Error> {
    let whole = match serde_json::from_str(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // The fence's info string (`json`) runs to the end of its line.
        let body = after.find('\n').map_or("", |n| &after[n + 1..]);
        let Some(close) = body.find("```") else {
            break;
        };
        if let Ok(v) = serde_json::from_str(&body[..close]) {
            return Ok(v);
        }
        rest = &body[close + 3..];
    }
    for (open, close) in [('{', '}'), ('[', ']')] {
        if let (Some(a), Some(b)) = (text.find(open), text.rfind(close))
            && a < b
            && let Ok(v) = serde_json::from_str(&text[a..=b])
        {
            return Ok(v);
        }
    }
    Err(whole)
}

#[cfg(test)]
mod tests {

    #[test]
    fn json_is_found_in_a_fence_or_among_words() {
        let found = |t: &str| json_in(t).ok();
        assert_eq!(found(r#"{"a": 1}"#), Some(json!({"a": 1})));
        assert_eq!(
            found("```json\n{\"answer\": \"yes\"}\n```"),
            Some(json!({"answer": "yes"}))
        );
        assert_eq!(
            found("Here it is:\n```\n[1, 2]\n```\nAnything else?"),
            Some(json!([1, 2]))
        );
        // A fence that is not JSON is passed over for the next.
        assert_eq!(
            found("```python\nprint(1)\n```\n```json\n{\"b\": true}\n```"),
            Some(json!({"b": true}))
        );
        assert_eq!(
            found(r#"Sure! {"kind": "click", "target": "Search"} Hope that helps."#),
            Some(json!({"kind": "click", "target": "Search"}))
        );
        assert_eq!(found("no JSON here"), None);
        assert_eq!(found("```json\n{\"cut\": \n```"), None);
        assert_eq!(
            json_in("nope").unwrap_err().to_string(),
            "expected ident at line 1 column 2"
        );
    }
    use super::*;
    use crate::llm::ToolCall;

    fn offer() -> Offer {
        let tools = vec![ToolInfo {
            name: "read_file".into(),
            description: "Read a file".into(),
            input_schema: json!({
                "type": "object",
                "properties": { "path": { "type": "string" } },
                "required": ["path"]
            }),
            output_schema: None,
        }];
        let ask = json!({
            "type": "object",
            "properties": { "question": { "type": "string" } },
            "required": ["question"]
        });
        Offer::new(
            None,
            tools,
            &[PseudoSpec {
                name: "ask_human",
                description: "Ask",
                schema: Some(&ask),
            }],
        )
        .unwrap()
    }

    fn call(name: &str, args: &str) -> LlmReply {
        LlmReply {
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: name.into(),
                arguments: args.into(),
            }],
            finish_reason: Some("tool_calls".into()),
            ..LlmReply::default()
        }
    }

    #[test]
    fn a_server_tool_call_is_written_with_its_arguments() {
        assert_eq!(
            offer().judge(&call("read_file", r#"{"path":"a.txt"}"#)),
            Ok(Verdict {
                output: json!({ "tool": "read_file", "arguments": { "path": "a.txt" }, "text": null }),
                pseudo: None
            })
        );
    }

    #[test]
    fn a_pseudo_tool_call_writes_its_arguments_and_routes() {
        assert_eq!(
            offer().judge(&call("ask_human", r#"{"question":"which?"}"#)),
            Ok(Verdict {
                output: json!({ "question": "which?" }),
                pseudo: Some(0)
            })
        );
    }

    #[test]
    fn bad_calls_are_refused_in_words() {
        let o = offer();
        assert_eq!(
            o.judge(&call("rm_rf", "{}")),
            Err(
                "`rm_rf` is not an offered tool; call exactly one of `read_file`, `ask_human`"
                    .into()
            )
        );
        assert_eq!(
            o.judge(&call("read_file", "{\"path\": 3}")),
            Err("the arguments of `read_file` do not fit its schema: at `/path`: 3 is not of type \"string\"".into())
        );
        assert!(
            o.judge(&call("read_file", "{\"path\""))
                .unwrap_err()
                .starts_with("the arguments of `read_file` are not JSON")
        );
        assert_eq!(
            o.judge(&LlmReply {
                content: Some("hi".into()),
                ..LlmReply::default()
            }),
            Err("the reply called no tool; call exactly one of `read_file`, `ask_human`".into())
        );
    }

    #[test]
    fn with_a_schema_too_the_model_may_answer_in_text() {
        let schema = Arc::new(json!({ "type": "object", "required": ["a"] }));
        let validator = Arc::new(jsonschema::validator_for(&schema).unwrap());
        let o = Offer::new(Some((schema, validator)), Vec::new(), &[]).unwrap();
        assert_eq!(o.tool_choice(), ToolChoice::Auto);
        let text = |t: &str| LlmReply {
            content: Some(t.into()),
            ..LlmReply::default()
        };
        assert_eq!(
            o.judge(&text(r#" {"a": 1} "#)),
            Ok(Verdict {
                output: json!({ "a": 1 }),
                pseudo: None
            })
        );
        assert_eq!(
            o.judge(&text("{}")),
            Err("the reply does not fit the schema: \"a\" is a required property".into())
        );
        assert_eq!(
            o.judge(&call("read_file", "{}")),
            Err("the reply called `read_file`, and no tools are offered; answer with JSON that fits the schema".into())
        );
        assert_eq!(offer().tool_choice(), ToolChoice::Required);
    }

    #[test]
    fn with_parallel_calls_every_call_is_kept_in_order() {
        let o = offer().parallel(true);
        let calls = |names: &[(&str, &str)]| LlmReply {
            tool_calls: names
                .iter()
                .enumerate()
                .map(|(i, (n, a))| ToolCall {
                    id: format!("c{i}"),
                    name: (*n).into(),
                    arguments: (*a).into(),
                })
                .collect(),
            content: Some("Reading both.".into()),
            finish_reason: Some("tool_calls".into()),
            ..LlmReply::default()
        };
        assert_eq!(
            o.judge(&calls(&[
                ("read_file", r#"{"path":"a"}"#),
                ("read_file", r#"{"path":"b"}"#)
            ])),
            Ok(Verdict {
                output: json!({
                    "calls": [
                        { "tool": "read_file", "arguments": { "path": "a" } },
                        { "tool": "read_file", "arguments": { "path": "b" } },
                    ],
                    "text": "Reading both."
                }),
                pseudo: None
            })
        );
        // One call has the same shape.
        assert_eq!(
            o.judge(&calls(&[("read_file", r#"{"path":"a"}"#)]))
                .unwrap()
                .output["calls"],
            json!([{ "tool": "read_file", "arguments": { "path": "a" } }])
        );
        // A pseudo tool alone routes as before; beside others it is refused.
        assert_eq!(
            o.judge(&calls(&[("ask_human", r#"{"question":"which?"}"#)])),
            Ok(Verdict {
                output: json!({ "question": "which?" }),
                pseudo: Some(0)
            })
        );
        assert_eq!(
            o.judge(&calls(&[
                ("read_file", r#"{"path":"a"}"#),
                ("ask_human", r#"{"question":"which?"}"#)
            ])),
            Err("the reply called `ask_human` with other tools; call it alone".into())
        );
        // Any bad call refuses the reply.
        assert_eq!(
            o.judge(&calls(&[
                ("read_file", r#"{"path":"a"}"#),
                ("read_file", r#"{"path":3}"#)
            ])),
            Err("the arguments of `read_file` do not fit its schema: at `/path`: 3 is not of type \"string\"".into())
        );
    }

    #[test]
    fn refusals_and_truncation_are_invalid() {
        let o = offer();
        let refused = LlmReply {
            refusal: Some("no".into()),
            ..LlmReply::default()
        };
        assert_eq!(o.judge(&refused), Err("the model refused: no".into()));
        let cut = LlmReply {
            content: Some("{\"a\":".into()),
            finish_reason: Some("length".into()),
            ..LlmReply::default()
        };
        assert_eq!(
            o.judge(&cut),
            Err("the reply was cut off at the token limit (finish_reason `length`)".into())
        );
    }
}
