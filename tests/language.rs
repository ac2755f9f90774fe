//! The graph language's additions, run: constants read by expressions and templates
//! and given per run through the input, required inputs refused before anything is
//! saved, and a `fail` node that fails the run with its own outcome.

use crate::util::root;
use serde_json::json;
use std::sync::Arc;
use switchyard::run::{MemoryStore, Outcome, RunError, Runner, Status};

fn runner() -> Runner {
    let path = root().join("tests/fixtures/run/language.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    Runner::new(graph, Arc::new(MemoryStore::new()))
}

fn finished(response: &str, steps: u64) -> Outcome {
    Outcome::Finished {
        outcome: "done".into(),
        response: Some(response.into()),
        steps,
    }
}

#[tokio::test]
async fn constants_are_read_by_routes_expressions_and_templates() {
    let r = runner();
    let out = r.start("t", json!({ "goal": "tea" })).await.unwrap();
    assert_eq!(out, finished("3/3: goal: tea, step 1, step 2, step 3", 5));
    // The state shows the value the run used.
    assert_eq!(
        r.state("t", None).unwrap().0,
        json!({
            "goal": "tea",
            "steps": 3,
            "log": ["goal: tea", "step 1", "step 2", "step 3"],
            "MAX_TOOL_STEPS": 3,
            "PREFIX": "step"
        })
    );
}

#[tokio::test]
async fn a_runs_input_gives_a_constant_another_value_for_that_run() {
    let r = runner();
    let out = r
        .start("t", json!({ "goal": "tea", "MAX_TOOL_STEPS": 1 }))
        .await
        .unwrap();
    assert_eq!(out, finished("1/1: goal: tea, step 1", 3));
    // Of the wrong type, it is refused like any input.
    let err = r
        .start("u", json!({ "goal": "tea", "MAX_TOOL_STEPS": "many" }))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the input is refused: field `MAX_TOOL_STEPS` is `int`, and the value written is a string `\"many\"`"
    );
    assert!(matches!(
        r.state("u", None),
        Err(RunError::UnknownThread(_))
    ));
    // A person's edit cannot change one in the middle of a thread.
    let err = r
        .update("t", json!({ "MAX_TOOL_STEPS": 9 }), None)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the update is refused: `MAX_TOOL_STEPS` is a constant of the graph; a run's input can give it another value"
    );
    // The input's record and three nodes': nothing of the refused update.
    assert_eq!(r.history("t").unwrap().len(), 4);
    // The next run without it has the graph's value again.
    let out = r.start("t", json!({ "goal": "tea" })).await.unwrap();
    assert_eq!(
        out,
        finished("3/3: goal: tea, step 1, goal: tea, step 2, step 3", 4)
    );
    assert_eq!(r.state("t", None).unwrap().0["MAX_TOOL_STEPS"], json!(3));
}

#[tokio::test]
async fn a_missing_required_input_is_refused_before_anything_is_saved() {
    let r = runner();
    let err = r.start("t", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the input is refused: the graph requires a field in every run's input, and it has no `goal` (string)"
    );
    assert!(matches!(
        r.check_start("t", json!({})),
        Err(RunError::Input(_))
    ));
    assert!(matches!(
        r.state("t", None),
        Err(RunError::UnknownThread(_))
    ));
    // Every run, not only the first: a chat's next message is an input too.
    r.start("t", json!({ "goal": "tea" })).await.unwrap();
    let err = r.start("t", json!({ "steps": 0 })).await.unwrap_err();
    assert!(matches!(err, RunError::Input(_)), "{err}");
    // The first run's six records (its input's and five nodes'), nothing of the second.
    assert_eq!(r.history("t").unwrap().len(), 6);
}

#[tokio::test]
async fn a_fail_node_fails_the_run_with_its_outcome_and_message() {
    let mut r = runner();
    let mut events = r.events();
    let err = r.start("t", json!({ "goal": "" })).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the run failed at `refuse` (no_goal): the goal is empty (after 0 of 3 steps)"
    );
    assert!(matches!(
        &err,
        RunError::Failed { node, outcome, .. } if node == "refuse" && outcome == "no_goal"
    ));
    let (state, last) = r.state("t", None).unwrap();
    assert_eq!(state["log"], json!(["goal: ", "refused"]));
    assert_eq!(
        (last.status, last.outcome.as_deref(), last.node.as_deref()),
        (Status::Failed, Some("no_goal"), Some("refuse"))
    );
    assert_eq!(
        last.error,
        Some(json!({ "node": "refuse", "message": "the goal is empty (after 0 of 3 steps)" }))
    );
    drop(r);
    let mut finished = None;
    while let Some(e) = events.recv().await {
        let line = serde_json::to_value(&e).unwrap();
        if line["event"] == "run_finished" {
            finished = Some(line);
        }
    }
    let finished = finished.expect("a run_finished event");
    assert_eq!(
        (&finished["status"], &finished["outcome"]),
        (&json!("failed"), &json!("no_goal"))
    );
}
