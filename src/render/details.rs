use crate::spec::{GraphSpec, KindSpec, Sp};
use serde_json::{Map, Value as Json, json};

/// What the web page shows of each node when it is selected: its kind and description,
/// and the files it names as they read now (an LLM node's prompts and output schema, an
/// interrupt's resume schema, a policy's rules), by node name.
pub fn details(spec: &GraphSpec) -> Json {
    // A prompt as its text; a schema as JSON (as text when it is not JSON: `validate`
    // says what is wrong with it).
    let read = |path: &Option<Sp<String>>, as_json: bool| -> Json {
        let Some(p) = path else { return Json::Null };
        match std::fs::read_to_string(spec.resolve(p.get_ref())) {
            Ok(text) if as_json => {
                serde_json::from_str::<Json>(&text).unwrap_or(Json::String(text))
            }
            Ok(text) => Json::String(text),
            Err(e) => json!(format!("cannot read `{}`: {e}", p.get_ref())),
        }
    };
    let mut nodes = Map::new();
    for node in &spec.nodes {
        let mut d = json!({
            "kind": node.kind.get_ref().name(),
            "description": node.description,
        });
        match &node.body {
            KindSpec::Llm(l) => {
                d["model"] = json!(l.model.as_ref().map(|m| m.get_ref()));
                d["system"] = read(&l.system, false);
                d["prompt"] = read(&l.prompt, false);
                d["schema"] = read(&l.schema, true);
                d["output"] = json!(l.output.as_ref().map(|o| o.get_ref()));
            }
            KindSpec::Interrupt(i) => {
                d["resume_schema"] = read(&i.resume_schema, true);
                d["accept_any"] = json!(i.accept_any);
                d["output"] = json!(i.output.as_ref().map(|o| o.get_ref()));
            }
            KindSpec::Policy(p) => {
                d["rules"] = p
                    .rules
                    .iter()
                    .map(|r| {
                        json!({
                            "name": r.name.as_ref().map(|n| n.get_ref()),
                            "when": r.when.get_ref(),
                            "decision": crate::spec::Decision::NAMES[*r.decision.get_ref() as usize],
                            "reason": r.reason.as_ref().map(|n| n.get_ref()),
                        })
                    })
                    .collect();
            }
            KindSpec::Mcp(m) => {
                d["server"] = json!(m.server.as_ref().map(|s| s.get_ref()));
                d["tools"] = m.calls.iter().map(|c| json!(c.tool.get_ref())).collect();
                d["side_effects"] = json!(m.side_effects);
            }
            _ => {}
        }
        nodes.insert(node.name.get_ref().clone(), d);
    }
    json!({ "nodes": nodes })
}
