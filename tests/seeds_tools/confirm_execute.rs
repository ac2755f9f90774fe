//! Seed 003, `graphs/confirm_execute.toml`: planner -> tool selection -> confirmation
//! gate (critical tools only) -> execution -> response synthesis, over the simulation
//! bridge of `tests/servers/simulation_bridge.mjs`. The bridge keeps its state in a file
//! per test (`SIMULATION_BRIDGE_STATE`), so it survives the restarts of a paused run,
//! and logs every call it received; `SIMULATION_BRIDGE_FAULTS` makes calls fail
//! transiently (the server exits without answering).

use super::harness::{Ran, Scenario, path, tool_calls, trace};
use serde_json::{Value as Json, json};
use std::path::PathBuf;

async fn scenario(name: &'static str, faults: Option<Json>) -> (Scenario, PathBuf) {
    let mut s = Scenario::new("confirm_execute", name).await;
    let bridge = s.dir.path().join("bridge.json");
    s.env("SIMULATION_BRIDGE_STATE", &bridge);
    if let Some(f) = faults {
        s.env("SIMULATION_BRIDGE_FAULTS", f.to_string());
    }
    (s, bridge)
}

/// The bridge's state file: its simulations and every call it received.
#[track_caller]
fn bridge(file: &PathBuf) -> Json {
    serde_json::from_str(&std::fs::read_to_string(file).expect("bridge state")).unwrap()
}

/// The calls the bridge received, in order: `tool outcome arguments`.
fn received(file: &PathBuf) -> Vec<String> {
    bridge(file)["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {} {}",
                c["tool"].as_str().unwrap(),
                c["outcome"].as_str().unwrap(),
                c["arguments"]
            )
        })
        .collect()
}

/// The interrupt a run paused at: its node and payload.
#[track_caller]
fn paused_at(ran: &Ran) -> (String, Json) {
    ran.code(4);
    let e = ran
        .events
        .iter()
        .find(|e| e["event"] == "interrupted")
        .expect("an interrupted event");
    (
        e["node"].as_str().unwrap().to_string(),
        e["payload"].clone(),
    )
}

/// The confirmation text a run paused with, after checking that it paused at the gate
/// for the call it shows.
#[track_caller]
fn confirmation(ran: &Ran) -> (String, String) {
    let (node, payload) = paused_at(ran);
    assert_eq!(node, "confirmation_gate");
    assert_eq!(payload["kind"], "confirm");
    assert_eq!(payload["reference"], payload["pending_tool_call"]["id"]);
    assert_eq!(
        payload["confirmation_text"],
        payload["pending_tool_call"]["summary"]
    );
    (
        payload["reference"].as_str().unwrap().to_string(),
        payload["confirmation_text"].as_str().unwrap().to_string(),
    )
}

async fn answer(s: &mut Scenario, reference: &str, approved: bool, feedback: Option<&str>) -> Ran {
    s.resume(
        Some(json!({ "approved": approved, "reference": reference, "feedback": feedback })),
        &[],
    )
    .await
}

/// The audit trail with its durations zeroed (they vary).
fn audit(state: &Json) -> Vec<Json> {
    state["state"]["intermediate_steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if let Some(d) = s.get_mut("duration_ms") {
                *d = json!(0);
            }
            s
        })
        .collect()
}

/// Every process's trace, one after the other.
struct Traces(Vec<String>);

impl Traces {
    fn add(&mut self, ran: &Ran) {
        if !self.0.is_empty() {
            self.0.push("---".into());
        }
        self.0.extend(trace(&ran.events));
    }
}

const LOAD_WARFARIN: &str =
    "Tool: load_simulation\nModel Path: models/warfarin.pkml\nApprove? (yes/no)";

/// Load -> list (read-only, not confirmed) -> set -> run -> results: three critical
/// calls, each shown with its deterministic confirmation text and run only once
/// approved; the audit trail ends the reply.
#[tokio::test]
async fn happy_path_confirms_each_critical_call() {
    let (mut s, bridge_file) = scenario("happy_path", None).await;
    let mut traces = Traces(Vec::new());
    let ran = s
        .run(
            json!({ "user_message": "Load models/warfarin.pkml, set the liver clearance to 0.25 L/h, run it and tell me the AUC." }),
            &[],
        )
        .await;
    traces.add(&ran);
    let mut shown = Vec::new();
    let (mut reference, text) = confirmation(&ran);
    shown.push(text);
    // Nothing reached the service before the approval.
    assert!(!bridge_file.exists());
    for _ in 0..2 {
        let ran = answer(&mut s, &reference, true, None).await;
        traces.add(&ran);
        let (r, text) = confirmation(&ran);
        reference = r;
        shown.push(text);
    }
    assert_eq!(
        shown,
        [
            LOAD_WARFARIN,
            "Tool: set_parameter_value\nSimulation ID: sim-1\nParameter Path: Liver|Clearance\nNew Value: 0.25 L/h\nApprove? (yes/no)",
            "Tool: run_simulation\nSimulation ID: sim-1\nApprove? (yes/no)",
        ]
    );
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    ran.code(0);
    let reply = "Loaded models/warfarin.pkml as sim-1, changed Liver|Clearance from 0.2 to 0.25 L/h and ran it (run-1). The AUC is 20 mg*h/L (Cmax 0.5 mg/L, half-life 27.726 h).";
    let response = format!(
        "{reply}\n\nAudit trail:\n\
         1. approval: load_simulation {{\"model_path\": \"models/warfarin.pkml\"}} (user: yes)\n\
         2. call: load_simulation {{\"model_path\": \"models/warfarin.pkml\"}}, attempt 1: {{\"simulation_id\": \"sim-1\", \"model_path\": \"models/warfarin.pkml\", \"parameters\": 3}}\n\
         3. call: list_parameters {{\"simulation_id\": \"sim-1\"}}, attempt 1: {{\"simulation_id\": \"sim-1\", \"parameters\": [{{\"path\": \"Applications|Dose\", \"value\": 5, \"unit\": \"mg\"}}, {{\"path\": \"Liver|Clearance\", \"value\": 0.2, \"unit\": \"L/h\"}}, {{\"path\": \"Organism|Volume\", \"value\": 10, \"unit\": \"L\"}}]}}\n\
         4. approval: set_parameter_value {{\"simulation_id\": \"sim-1\", \"parameter_path\": \"Liver|Clearance\", \"value\": 0.25, \"unit\": \"L/h\"}} (user: yes)\n\
         5. call: set_parameter_value {{\"simulation_id\": \"sim-1\", \"parameter_path\": \"Liver|Clearance\", \"value\": 0.25, \"unit\": \"L/h\"}}, attempt 1: {{\"simulation_id\": \"sim-1\", \"parameter_path\": \"Liver|Clearance\", \"old_value\": 0.2, \"value\": 0.25, \"unit\": \"L/h\"}}\n\
         6. approval: run_simulation {{\"simulation_id\": \"sim-1\"}} (user: yes)\n\
         7. call: run_simulation {{\"simulation_id\": \"sim-1\"}}, attempt 1: {{\"simulation_id\": \"sim-1\", \"run_id\": \"run-1\", \"status\": \"completed\"}}\n\
         8. call: get_results {{\"simulation_id\": \"sim-1\"}}, attempt 1: {{\"simulation_id\": \"sim-1\", \"run_id\": \"run-1\", \"auc\": 20, \"cmax\": 0.5, \"half_life\": 27.726, \"units\": {{\"auc\": \"mg*h/L\", \"cmax\": \"mg/L\", \"half_life\": \"h\"}}}}\n"
    );
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "done", "response": response })
    );
    assert_eq!(
        received(&bridge_file),
        [
            r#"load_simulation ok {"model_path":"models/warfarin.pkml"}"#,
            r#"list_parameters ok {"simulation_id":"sim-1"}"#,
            r#"set_parameter_value ok {"simulation_id":"sim-1","parameter_path":"Liver|Clearance","value":0.25,"unit":"L/h"}"#,
            r#"run_simulation ok {"simulation_id":"sim-1"}"#,
            r#"get_results ok {"simulation_id":"sim-1"}"#,
        ]
    );
    // The read-only tools went straight from the policy gate to execution.
    let t = traces.0.join("\n");
    assert_eq!(
        t.matches("policy_gate -> tool_execution (allow)").count(),
        2
    );
    assert_eq!(
        t.matches("policy_gate -> confirmation_gate (confirm)")
            .count(),
        3
    );

    let state = s.state().await;
    assert_eq!(state["status"], "finished");
    let st = &state["state"];
    assert_eq!(
        st["simulation_context"],
        json!({ "simulation_id": "sim-1", "model_path": "models/warfarin.pkml", "loaded": { "simulation_id": "sim-1", "model_path": "models/warfarin.pkml", "parameters": 3 } })
    );
    assert_eq!(st["awaiting_confirmation"], false);
    assert_eq!(st["pending_tool_call"], Json::Null);
    assert_eq!(st["plan"], Json::Null);
    assert_eq!(st["final_response"], json!(response));
    assert_eq!(
        audit(&state)[0],
        json!({ "event": "approval", "call_id": "call-3", "tool": "load_simulation", "arguments": { "model_path": "models/warfarin.pkml" }, "confirmation_text": LOAD_WARFARIN, "feedback": "yes", "step": 6 })
    );
    // Every confirmation prompt and answer is in the conversation too.
    let messages = st["messages"].as_array().unwrap();
    let i = messages
        .iter()
        .position(|m| m["content"] == LOAD_WARFARIN)
        .unwrap();
    assert_eq!(messages[i + 1], json!({ "role": "user", "content": "yes" }));
    insta::assert_snapshot!(s.report(&traces.0).await);
    s.finish();
}

/// A denied call does not run; the denial (with the user's words) goes back to the
/// planner, which proposes something else, which is confirmed in turn.
#[tokio::test]
async fn a_denial_goes_back_to_the_planner() {
    let (mut s, bridge_file) = scenario("denial", None).await;
    let mut traces = Traces(Vec::new());
    let ran = s
        .run(
            json!({ "user_message": "Load models/warfarin.pkml and set the dose to 500 mg." }),
            &[],
        )
        .await;
    traces.add(&ran);
    let (reference, _) = confirmation(&ran);
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    let (reference, text) = confirmation(&ran);
    assert_eq!(
        text,
        "Tool: set_parameter_value\nSimulation ID: sim-1\nParameter Path: Applications|Dose\nNew Value: 500 mg\nApprove? (yes/no)"
    );
    // An answer for another call is refused and changes nothing.
    let refused = answer(&mut s, "call-1", false, None).await;
    refused.code(1);
    assert_eq!(
        refused.stderr,
        format!(
            "error: the payload's reference `call-1` does not match the pending interrupt's reference `{reference}`\n"
        )
    );
    let ran = answer(
        &mut s,
        &reference,
        false,
        Some("500 mg is far too high; use 10 mg"),
    )
    .await;
    traces.add(&ran);
    assert_eq!(
        path(&ran.events)[..4],
        [
            "confirmation_gate",
            "record_denial",
            "planner",
            "tool_selection"
        ]
    );
    let (reference, text) = confirmation(&ran);
    assert_eq!(
        text,
        "Tool: set_parameter_value\nSimulation ID: sim-1\nParameter Path: Applications|Dose\nNew Value: 10 mg\nApprove? (yes/no)"
    );
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    ran.code(0);
    // The denied call never reached the service.
    assert_eq!(
        received(&bridge_file),
        [
            r#"load_simulation ok {"model_path":"models/warfarin.pkml"}"#,
            r#"set_parameter_value ok {"simulation_id":"sim-1","parameter_path":"Applications|Dose","value":10,"unit":"mg"}"#,
        ]
    );
    assert_eq!(
        bridge(&bridge_file)["simulations"]["sim-1"]["parameters"][0],
        json!({ "path": "Applications|Dose", "value": 10, "unit": "mg" })
    );
    let state = s.state().await;
    let denial = audit(&state)
        .into_iter()
        .find(|a| a["event"] == "denial")
        .unwrap();
    assert_eq!(
        denial,
        json!({
            "event": "denial", "call_id": "call-9", "tool": "set_parameter_value",
            "arguments": { "simulation_id": "sim-1", "parameter_path": "Applications|Dose", "value": 500, "unit": "mg" },
            "confirmation_text": "Tool: set_parameter_value\nSimulation ID: sim-1\nParameter Path: Applications|Dose\nNew Value: 500 mg\nApprove? (yes/no)",
            "feedback": "no: 500 mg is far too high; use 10 mg", "step": 12
        })
    );
    // What the planner was told.
    let messages = state["state"]["messages"].as_array().unwrap();
    let i = messages
        .iter()
        .position(|m| m["content"] == "no: 500 mg is far too high; use 10 mg")
        .unwrap();
    assert_eq!(
        messages[i + 1],
        json!({ "role": "user", "content": "I did not approve set_parameter_value; it was not run. Propose an alternative or ask me what to do." })
    );
    let response = state["state"]["final_response"].as_str().unwrap();
    assert!(
        response.contains("\n2. call: load_simulation {\"model_path\": \"models/warfarin.pkml\"}, attempt 1: ")
            && response.contains("\n3. denial: set_parameter_value {\"simulation_id\": \"sim-1\", \"parameter_path\": \"Applications|Dose\", \"value\": 500, \"unit\": \"mg\"} (user: no: 500 mg is far too high; use 10 mg)\n4. approval: set_parameter_value "),
        "{response}"
    );
    insta::assert_snapshot!(s.report(&traces.0).await);
    s.finish();
}

/// An ambiguous request makes the planner ask (an interrupt of its own, not the
/// confirmation gate); the answer joins the conversation and planning goes on.
#[tokio::test]
async fn an_ambiguous_request_makes_the_agent_ask() {
    let (mut s, bridge_file) = scenario("ambiguous", None).await;
    let mut traces = Traces(Vec::new());
    let ran = s
        .run(json!({ "user_message": "Change the dose." }), &[])
        .await;
    traces.add(&ran);
    let (node, payload) = paused_at(&ran);
    assert_eq!(node, "ask_user");
    assert_eq!(
        payload,
        json!({ "kind": "clarification", "question": "Which model should I load, and what should the dose be (with its unit)?" })
    );
    assert!(!bridge_file.exists());
    let ran = s
        .resume(
            Some(json!({ "answer": "models/midazolam.pkml, and set the dose to 5 mg" })),
            &[],
        )
        .await;
    traces.add(&ran);
    let (reference, text) = confirmation(&ran);
    assert_eq!(
        text,
        "Tool: load_simulation\nModel Path: models/midazolam.pkml\nApprove? (yes/no)"
    );
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    let (reference, text) = confirmation(&ran);
    assert_eq!(
        text,
        "Tool: set_parameter_value\nSimulation ID: sim-1\nParameter Path: Applications|Dose\nNew Value: 5 mg\nApprove? (yes/no)"
    );
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    ran.code(0);
    assert_eq!(
        received(&bridge_file),
        [
            r#"load_simulation ok {"model_path":"models/midazolam.pkml"}"#,
            r#"set_parameter_value ok {"simulation_id":"sim-1","parameter_path":"Applications|Dose","value":5,"unit":"mg"}"#,
        ]
    );
    let state = s.state().await;
    let st = &state["state"];
    assert_eq!(
        st["clarification"],
        json!({ "answer": "models/midazolam.pkml, and set the dose to 5 mg" })
    );
    assert_eq!(
        st["messages"].as_array().unwrap()[1..4],
        [
            json!({ "role": "assistant", "content": "Plan: ask (The request names neither the model nor the new dose.)" }),
            json!({ "role": "assistant", "content": "Which model should I load, and what should the dose be (with its unit)?" }),
            json!({ "role": "user", "content": "models/midazolam.pkml, and set the dose to 5 mg" }),
        ]
    );
    insta::assert_snapshot!(s.report(&traces.0).await);
    s.finish();
}

/// A transient failure (the bridge drops the connection) is retried with backoff on a
/// restarted server; the retry succeeds. Both attempts are in the audit trail.
#[tokio::test]
async fn a_transient_failure_succeeds_on_retry() {
    let (mut s, bridge_file) =
        scenario("transient_failure", Some(json!({ "run_simulation": 1 }))).await;
    let mut traces = Traces(Vec::new());
    let ran = s
        .run(
            json!({ "user_message": "Load models/midazolam.pkml, run it and give me the results." }),
            &[],
        )
        .await;
    traces.add(&ran);
    let (reference, _) = confirmation(&ran);
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    let (reference, text) = confirmation(&ran);
    assert_eq!(
        text,
        "Tool: run_simulation\nSimulation ID: sim-1\nApprove? (yes/no)"
    );
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    ran.code(0);
    let run_calls: Vec<_> = tool_calls(&ran.events)
        .into_iter()
        .filter(|c| c.0 == "run_simulation")
        .map(|(_, _, attempt, error)| (attempt, error))
        .collect();
    assert_eq!(run_calls, [(1, true), (2, false)]);
    let t = trace(&ran.events);
    let from = t.iter().position(|l| l == "server_died sim").unwrap();
    // The call found the server gone (its event comes first), and the retry restarted it.
    assert_eq!(
        t[from..from + 4],
        [
            "server_died sim",
            r#"tool sim/run_simulation {"simulation_id":"sim-1"} attempt=1 error"#,
            "server_started sim restart=1",
            r#"tool sim/run_simulation {"simulation_id":"sim-1"} attempt=2"#,
        ]
    );
    // The retry waited for the backoff: 200 ms, scaled by a jitter of 50-100 %.
    let calls = bridge(&bridge_file)["calls"].as_array().unwrap().clone();
    let at = |i: usize| calls[i]["at_ms"].as_u64().unwrap();
    assert_eq!(
        received(&bridge_file),
        [
            r#"load_simulation ok {"model_path":"models/midazolam.pkml"}"#,
            r#"run_simulation crash {"simulation_id":"sim-1"}"#,
            r#"run_simulation ok {"simulation_id":"sim-1"}"#,
            r#"get_results ok {"simulation_id":"sim-1"}"#,
        ]
    );
    assert!(at(2) - at(1) >= 100, "retried after {} ms", at(2) - at(1));

    let state = s.state().await;
    let runs: Vec<Json> = audit(&state)
        .into_iter()
        .filter(|a| a["tool"] == "run_simulation" && a.get("event").is_none())
        .collect();
    assert_eq!(
        runs,
        [
            json!({ "tool": "run_simulation", "arguments": { "simulation_id": "sim-1" }, "result": { "error": "server `sim` is gone: the connection closed during `run_simulation` (Transport closed)" }, "is_error": true, "duration_ms": 0, "attempt": 1 }),
            json!({ "tool": "run_simulation", "arguments": { "simulation_id": "sim-1" }, "result": { "simulation_id": "sim-1", "run_id": "run-1", "status": "completed" }, "is_error": false, "duration_ms": 0, "attempt": 2 }),
        ]
    );
    assert_eq!(
        state["state"]["retry_counts"],
        json!({ "load_simulation": 0, "run_simulation": 0, "get_results": 0 })
    );
    insta::assert_snapshot!(s.report(&traces.0).await);
    s.finish();
}

/// A failure that outlasts the retries (three attempts, each waiting longer) escalates to
/// the planner, which tells the user instead of going on.
#[tokio::test]
async fn transient_failures_past_the_retries_escalate_to_the_planner() {
    let (mut s, bridge_file) =
        scenario("transient_escalates", Some(json!({ "run_simulation": 3 }))).await;
    let mut traces = Traces(Vec::new());
    let ran = s
        .run(
            json!({ "user_message": "Load models/warfarin.pkml and run it." }),
            &[],
        )
        .await;
    traces.add(&ran);
    let (reference, _) = confirmation(&ran);
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    let (reference, _) = confirmation(&ran);
    let ran = answer(&mut s, &reference, true, None).await;
    traces.add(&ran);
    ran.code(0);
    assert_eq!(
        path(&ran.events),
        [
            "confirmation_gate",
            "record_approval",
            "error_recovery",
            "planner",
            "response_synthesis",
            "finalize"
        ]
    );
    let calls = bridge(&bridge_file)["calls"].as_array().unwrap().clone();
    let at = |i: usize| calls[i]["at_ms"].as_u64().unwrap();
    assert_eq!(
        received(&bridge_file),
        [
            r#"load_simulation ok {"model_path":"models/warfarin.pkml"}"#,
            r#"run_simulation crash {"simulation_id":"sim-1"}"#,
            r#"run_simulation crash {"simulation_id":"sim-1"}"#,
            r#"run_simulation crash {"simulation_id":"sim-1"}"#,
        ]
    );
    // Exponential backoff: at least 50 % of 200 ms, then of 400 ms.
    assert!(at(2) - at(1) >= 100, "{} ms", at(2) - at(1));
    assert!(at(3) - at(2) >= 200, "{} ms", at(3) - at(2));
    let error =
        "server `sim` is gone: the connection closed during `run_simulation` (Transport closed)";
    let state = s.state().await;
    let st = &state["state"];
    assert_eq!(
        audit(&state).last().unwrap(),
        &json!({ "event": "error", "call_id": "call-9", "tool": "run_simulation", "arguments": { "simulation_id": "sim-1" }, "error": error, "step": 14 })
    );
    assert_eq!(
        st["retry_counts"],
        json!({ "load_simulation": 0, "run_simulation": 1 })
    );
    assert!(st["messages"]
        .as_array()
        .unwrap()
        .contains(&json!({ "role": "user", "content": format!("Tool run_simulation failed after retries: {error}") })));
    insta::assert_snapshot!(s.report(&traces.0).await);
    s.finish();
}
