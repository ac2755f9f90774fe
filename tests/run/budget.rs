//! `[budget]`: the worst case `validate --cost` proves is never below what a run on the
//! worst path does, and the runner ends a run that goes past a budget it could not
//! prove, through `on_limit`, with what it used kept in its records.

use super::{finished, graph};
use crate::doubles::{ScriptedLlm, ScriptedTools, ok};
use crate::util::root;
use serde_json::json;
use std::sync::Arc;
use switchyard::run::{Event, Runner};
use switchyard::store::{Checkpoints, MemoryStore, Usage};

fn worst(name: &str) -> Vec<(String, Option<f64>)> {
    let path = root().join(format!("tests/fixtures/run/{name}.toml"));
    let mut sources = switchyard::Sources::new();
    let v = switchyard::validate_file(&path, &mut sources).unwrap();
    let spec = v.spec.as_ref().unwrap();
    switchyard::cost(spec, &mut sources)
        .measures
        .into_iter()
        .map(|w| (w.measure.to_string(), w.worst))
        .collect()
}

#[tokio::test]
async fn a_run_on_the_worst_path_stays_within_the_proved_bound() {
    let bound = worst("cost_loop");
    assert_eq!(
        bound[..3],
        [
            ("model_calls".into(), Some(4.0)),
            ("tool_calls".into(), Some(4.0)),
            ("side_effect_calls".into(), Some(4.0)),
        ]
    );
    let llm = ScriptedLlm::new().script(
        "plan",
        (0..3).map(|i| json!({ "idea": format!("idea {i}") })),
    );
    let tools =
        ScriptedTools::new().tool("save", |args| ok(json!({ "saved": args["note"].clone() })));
    let tools = Arc::new(tools);
    let store = Arc::new(MemoryStore::new());
    let r = Runner::new(graph("cost_loop"), store.clone())
        .with_llm(llm.clone())
        .with_tools(tools.clone());
    assert_eq!(
        r.start("t", json!({ "goal": "g" })).await.unwrap(),
        finished("done", "3 attempts", 10)
    );
    let calls = llm.requests.lock().unwrap().len() as f64;
    let tool_calls = tools.calls.lock().unwrap().len() as f64;
    assert_eq!((calls, tool_calls), (3.0, 3.0));
    assert!(calls <= bound[0].1.unwrap() && tool_calls <= bound[1].1.unwrap());
    // The scripted replies' tokens (15 each) against the tokens bound.
    let last = store.load("t").await.unwrap().pop().unwrap();
    assert!(
        last.tokens as f64 <= bound[3].1.unwrap(),
        "{} tokens",
        last.tokens
    );
    assert_eq!(last.tokens, 45);
    // What the run used is recorded: 3 replies of 10 tokens in and 5 out at $1 and $4
    // a million, 3 calls.
    assert_eq!(last.usage.model_calls, 3);
    assert_eq!(last.usage.tool_calls, 3);
    assert!(
        (last.usage.usd - 3.0 * (10.0 * 1.0 + 5.0 * 4.0) / 1e6).abs() < 1e-12,
        "{:?}",
        last.usage
    );
    assert!(last.usage.usd <= bound[4].1.unwrap());
}

#[tokio::test]
async fn a_budget_passed_ends_the_run_through_on_limit_and_holds_across_a_new_process() {
    assert_eq!(
        worst("budget_calls")[0].1,
        None,
        "the loop's counter is an input"
    );
    let llm = ScriptedLlm::new().script(
        "think",
        (0..10).map(|i| json!({ "idea": format!("idea {i}") })),
    );
    let store = Arc::new(MemoryStore::new());
    let mut r = Runner::new(graph("budget_calls"), store.clone()).with_llm(llm.clone());
    let mut rx = r.events();
    // The third reply goes past `model_calls = 2`; the run stops before the next node.
    assert_eq!(
        r.start("t", json!({})).await.unwrap(),
        finished("budget", "stopped after 3 thoughts", 4)
    );
    drop(r);
    let mut limits = Vec::new();
    while let Some(e) = rx.recv().await {
        if let Event::LimitReached { limit, to } = e {
            limits.push((limit.to_string(), to.map(|t| t.to_string())));
        }
    }
    assert_eq!(
        limits,
        [(
            "budget.model_calls".to_string(),
            Some("out_of_budget".to_string())
        )]
    );
    assert_eq!(llm.requests.lock().unwrap().len(), 3);
    let records = store.load("t").await.unwrap();
    assert_eq!(
        records.last().unwrap().usage,
        Usage {
            model_calls: 3,
            tool_calls: 0,
            usd: 0.0,
        }
    );
    // A new run of the thread starts with nothing used.
    let r = Runner::new(graph("budget_calls"), store.clone()).with_llm(llm.clone());
    assert_eq!(
        r.start("t", json!({ "attempts": 8 })).await.unwrap(),
        finished("done", "10 attempts", 3)
    );
    assert_eq!(
        store
            .load("t")
            .await
            .unwrap()
            .last()
            .unwrap()
            .usage
            .model_calls,
        2
    );
}

#[tokio::test]
async fn branches_a_mapped_node_and_a_subgraph_stay_within_the_bound_and_count_in_the_run() {
    let bound = worst("cost_fork");
    assert_eq!(
        bound[..3],
        [
            ("model_calls".into(), Some(6.0)),
            ("tool_calls".into(), Some(7.0)),
            ("side_effect_calls".into(), Some(4.0)),
        ]
    );
    let llm = ScriptedLlm::new()
        .script("think", [json!({ "idea": "sum" })])
        .script(
            "plan",
            (0..3).map(|i| json!({ "idea": format!("idea {i}") })),
        );
    let tools = ScriptedTools::new()
        .tool("lookup", |args| ok(json!({ "about": args["q"].clone() })))
        .tool("save", |args| ok(json!({ "saved": args["note"].clone() })));
    let tools = Arc::new(tools);
    let store = Arc::new(MemoryStore::new());
    let r = Runner::new(graph("cost_fork"), store.clone())
        .with_llm(llm.clone())
        .with_tools(tools.clone());
    let out = r.start("t", json!({ "goal": "g" })).await.unwrap();
    assert!(
        matches!(&out, switchyard::run::Outcome::Finished { outcome, .. } if outcome == "done"),
        "{out:?}"
    );
    let calls = llm.requests.lock().unwrap().len() as u64;
    let tool_calls = tools.calls.lock().unwrap().len() as u64;
    assert_eq!((calls, tool_calls), (4, 6));
    assert!(calls as f64 <= bound[0].1.unwrap() && tool_calls as f64 <= bound[1].1.unwrap());
    // The run counts its subgraph's replies and calls as its own, and its tokens.
    let last = store.load("t").await.unwrap().pop().unwrap();
    assert_eq!((last.usage.model_calls, last.usage.tool_calls), (4, 6));
    assert_eq!(last.tokens, 4 * 15);
    assert!(last.tokens as f64 <= bound[3].1.unwrap());
    // Dollars by the price file: 4 replies of 10 tokens in and 5 out at $1 and $4.
    assert!(
        (last.usage.usd - 4.0 * 30.0 / 1e6).abs() < 1e-12,
        "{:?}",
        last.usage
    );
    assert!(last.usage.usd <= bound[4].1.unwrap());
}
