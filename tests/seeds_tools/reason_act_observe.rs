//! Seed 004, `graphs/reason_act_observe.toml`: the strict reason -> act -> observe loop
//! over the reference "everything" server, with per-phase events, max iterations per
//! run, stop and a new message, the `request_input` pause and its timeout, and malformed
//! control JSON.

use super::harness::{Ran, Scenario, path, tool_calls, trace};
use crate::util::root;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use switchyard::llm::{DeltaSink, LlmClient, LlmError, LlmReply, LlmRequest};
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::run::{Outcome, Runner, StopHandle};
use switchyard::store::SqliteStore;

async fn scenario(name: &'static str) -> Scenario {
    Scenario::new("reason_act_observe", name).await
}

/// The text each phase streamed, joined per node execution: `node: text`.
fn streamed(events: &[Json]) -> Vec<String> {
    trace(events)
        .into_iter()
        .filter_map(|l| l.strip_prefix("text ").map(str::to_string))
        .collect()
}

/// Each step runs reason, act (the model's choice, then the tool) and observe, in that
/// order, with an event for each phase; the loop ends when observe says it is done.
#[tokio::test]
async fn phases_run_in_order_with_an_event_each() {
    let mut s = scenario("phases").await;
    let ran = s
        .run(
            json!({ "user_message": "What is 17 + 25? Echo the answer back to me." }),
            &["--stream"],
        )
        .await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "completed", "response": "17 + 25 = 42" })
    );
    assert_eq!(
        path(&ran.events),
        [
            "ingest_user_input",
            "agent_reason",
            "agent_act",
            "agent_tool",
            "agent_observe",
            "agent_reason",
            "agent_act",
            "agent_tool",
            "agent_observe",
            "agent_completion"
        ]
    );
    assert_eq!(
        tool_calls(&ran.events),
        [
            ("get-sum".into(), json!({ "a": 17, "b": 25 }), 1, false),
            (
                "echo".into(),
                json!({ "message": "17 + 25 = 42" }),
                1,
                false
            ),
        ]
    );
    // What each phase wrote, streamed as it was written (reason and observe stream their
    // JSON; act streams the words it sends along with its call).
    assert_eq!(
        streamed(&ran.events),
        [
            r#"agent_reason: {"text":"17 + 25 is a sum, and get-sum computes it exactly. Then the answer has to be echoed back, as asked.","plan":"Add 17 and 25 with get-sum.","tools_to_consider":["get-sum","echo"],"finish":false}"#,
            "agent_act: Adding 17 and 25.",
            r#"agent_observe: {"observation":"get-sum says 17 + 25 = 42. The answer still has to be echoed back.","should_continue":true,"final_answer":null}"#,
            r#"agent_reason: {"text":"The sum is 42; echoing it is what is left.","plan":"Echo the answer with echo.","tools_to_consider":["echo"],"finish":false}"#,
            r#"agent_observe: {"observation":"echo returned the answer, so the request is done.","should_continue":false,"final_answer":"17 + 25 = 42"}"#,
        ]
    );
    let state = s.state().await;
    let st = &state["state"];
    assert_eq!(st["iteration"], 2);
    assert_eq!(st["tool_result"], "Echo: 17 + 25 = 42");
    assert_eq!(
        st["messages"].as_array().unwrap()[..5],
        [
            json!({ "role": "user", "content": "What is 17 + 25? Echo the answer back to me." }),
            json!({ "role": "assistant", "content": "Reasoning: 17 + 25 is a sum, and get-sum computes it exactly. Then the answer has to be echoed back, as asked." }),
            json!({ "role": "assistant", "content": "Adding 17 and 25.\nCalling get-sum with {\"a\": 17, \"b\": 25}" }),
            json!({ "role": "user", "content": "Result of get-sum: The sum of 17 and 25 is 42." }),
            json!({ "role": "assistant", "content": "Observation: get-sum says 17 + 25 = 42. The answer still has to be echoed back." }),
        ]
    );
    insta::assert_snapshot!(s.report(&trace(&ran.events)).await);
    s.finish();
}

/// `max_iterations` in the run's input caps the steps of that run: after the second
/// observe still wants to go on, the run ends with its own outcome.
#[tokio::test]
async fn max_iterations_is_set_per_run() {
    let mut s = scenario("max_iterations").await;
    let ran = s
        .run(
            json!({ "user_message": "Keep echoing 'ping' until I say stop.", "max_iterations": 2 }),
            &[],
        )
        .await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "limit", "response": "Stopped after 2 steps without a final answer. Last observation: Echoed ping; the user has not said stop." })
    );
    let t = trace(&ran.events);
    assert!(
        t.contains(&"agent_observe -> agent_completion_limit (max_iterations)".to_string()),
        "{t:#?}"
    );
    assert_eq!(tool_calls(&ran.events).len(), 2);
    insta::assert_snapshot!(s.report(&t).await);
    s.finish();
}

/// `--max-steps` bounds the node executions of one run besides: the limit is reached
/// at a node boundary and the run ends through `agent_completion_limit`.
#[tokio::test]
async fn max_steps_bounds_a_run_from_the_command_line() {
    let mut s = scenario("max_steps").await;
    let ran = s
        .run(
            json!({ "user_message": "Keep echoing 'ping' until I say stop." }),
            &["--max-steps", "6"],
        )
        .await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "limit", "response": "Stopped after 2 steps without a final answer. Last observation: Echoed ping; the user has not said stop." })
    );
    assert_eq!(
        path(&ran.events),
        [
            "ingest_user_input",
            "agent_reason",
            "agent_act",
            "agent_tool",
            "agent_observe",
            "agent_reason",
            "agent_completion_limit"
        ]
    );
    let t = trace(&ran.events);
    assert!(
        t.contains(&"limit_reached max_steps -> agent_completion_limit".to_string()),
        "{t:#?}"
    );
    insta::assert_snapshot!(s.report(&t).await);
    s.finish();
}

/// Asks the wrapped client, and asks the run to stop when `node` makes a request: the
/// stop then lands at the boundary after that node, whatever the timing.
struct StopWhenAsked {
    inner: Arc<dyn LlmClient>,
    node: &'static str,
    stop: StopHandle,
}

#[async_trait::async_trait]
impl LlmClient for StopWhenAsked {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        if &*request.node == self.node {
            self.stop.stop();
        }
        self.inner.complete(request, deltas).await
    }
}

/// The user stops the loop while act is choosing a call (the library's `StopHandle`,
/// which Ctrl-C triggers in the command): act finishes, the run stops at the next phase
/// boundary, before the tool runs. A new message on the thread (`switchyard run`)
/// continues the conversation.
#[tokio::test]
async fn stop_lands_at_the_next_phase_boundary_and_a_new_message_continues() {
    let mut s = scenario("stop_then_new_message").await;
    let graph = Arc::new(
        switchyard::load_graph(&root().join("graphs/reason_act_observe.toml")).expect("graph"),
    );
    let store = Arc::new(SqliteStore::open(&s.store_file()).expect("store"));
    let mut runner = Runner::new(graph.clone(), store);
    let stop = runner.stop_handle();
    let llm = Arc::new(StopWhenAsked {
        inner: s.llm(),
        node: "agent_act",
        stop,
    });
    let mut rx = runner.events();
    let tools = McpClient::new(&graph.root, BlobStore::new(s.dir.path().join("blobs")))
        .with_events(runner.event_sender().expect("events"));
    let runner = runner.with_llm(llm).with_tools(Arc::new(tools));
    let outcome = runner
        .start(
            &s.thread.clone(),
            json!({ "user_message": "Add 2 and 3, then echo the sum." }),
        )
        .await
        .expect("the run stops");
    assert_eq!(
        outcome,
        Outcome::Stopped {
            next: Some("agent_tool".into()),
            steps: 3
        }
    );
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(serde_json::to_value(&e).unwrap());
    }
    s.count_replies(&events);
    let stopped = trace(&events);
    assert_eq!(
        stopped[stopped.len() - 8..],
        [
            "> agent_act",
            "server_started everything restart=0",
            "llm agent_act attempt=1 tokens=300+6",
            "< agent_act [action]",
            "agent_act -> agent_tool",
            "stopped next=agent_tool step=3",
            "server_stopped everything",
            "run_finished stopped outcome=null steps=3 tokens=632",
        ]
    );
    assert_eq!(tool_calls(&events), []);
    let state = s.state().await;
    assert_eq!(state["status"], "stopped");
    assert_eq!(state["next"], "agent_tool");
    assert_eq!(
        state["state"]["action"],
        json!({ "tool": "get-sum", "arguments": { "a": 2, "b": 3 }, "text": null })
    );

    // A new message starts a new run on the thread, with the conversation so far.
    let ran = s
        .run(
            json!({ "user_message": "Never mind the sum; just say hello." }),
            &[],
        )
        .await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "completed", "response": "Hello!" })
    );
    assert_eq!(
        path(&ran.events),
        [
            "ingest_user_input",
            "agent_reason",
            "agent_act",
            "agent_observe",
            "agent_completion"
        ]
    );
    assert_eq!(tool_calls(&ran.events), []);
    let state = s.state().await;
    assert_eq!(state["run"], 1);
    assert_eq!(
        state["state"]["messages"],
        json!([
            { "role": "user", "content": "Add 2 and 3, then echo the sum." },
            { "role": "assistant", "content": "Reasoning: First the sum of 2 and 3, then echo it." },
            { "role": "user", "content": "Never mind the sum; just say hello." },
            { "role": "assistant", "content": "Reasoning: The user changed their mind: they only want a greeting, which needs no tool." },
            { "role": "assistant", "content": "Observation: Nothing to call; the greeting is the answer." },
        ])
    );
    assert_eq!(
        state["state"]["action"],
        json!({ "reason": "A greeting needs no tool." })
    );
    let mut t = stopped;
    t.push("---".into());
    t.extend(trace(&ran.events));
    insta::assert_snapshot!(s.report(&t).await);
    s.finish();
}

/// `request_input` pauses the loop and asks the user (exit 4, the question as the
/// payload); the answer joins the conversation before observe.
#[tokio::test]
async fn request_input_pauses_and_the_answer_goes_to_observe() {
    let mut s = scenario("request_input").await;
    let ran = s
        .run(json!({ "user_message": "Greet me by name." }), &[])
        .await;
    let payload = paused(&ran);
    assert_eq!(
        payload,
        json!({ "kind": "request_input", "question": "What is your name?", "step": 1 })
    );
    let waiting = s.state().await;
    assert_eq!(waiting["status"], "interrupted");
    assert_eq!(waiting["pending"]["node"], "agent_request_input");
    assert!(waiting["pending"]["deadline_ms"].as_u64().is_some());

    let ran = s.resume(Some(json!({ "answer": "Ada" })), &[]).await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "completed", "response": "Hello, Ada!" })
    );
    assert_eq!(
        path(&ran.events),
        [
            "agent_request_input",
            "agent_observe",
            "agent_reason",
            "agent_act",
            "agent_tool",
            "agent_observe",
            "agent_completion"
        ]
    );
    let state = s.state().await;
    assert_eq!(
        state["state"]["messages"].as_array().unwrap()[2..5],
        [
            json!({ "role": "assistant", "content": "What is your name?" }),
            json!({ "role": "user", "content": "Ada" }),
            json!({ "role": "assistant", "content": "Observation: The user's name is Ada." }),
        ]
    );
    insta::assert_snapshot!(s.report(&trace(&ran.events)).await);
    s.finish();
}

#[track_caller]
fn paused(ran: &Ran) -> Json {
    ran.code(4);
    ran.events
        .iter()
        .find(|e| e["event"] == "interrupted")
        .expect("interrupted")["payload"]
        .clone()
}

/// Nobody answers `request_input` in time: the run ends with its own outcome, and a
/// late answer does not bring it back. The graph's timeout is 10 minutes; this test runs
/// a copy with 1 second (the same prompts and schemas, so the same recording).
#[tokio::test]
async fn request_input_times_out_with_its_own_outcome() {
    let mut s = scenario("request_input_timeout").await;
    s.edit_graph("timeout = \"10m\"", "timeout = \"1s\"");
    let ran = s
        .run(json!({ "user_message": "Greet me by name." }), &[])
        .await;
    assert_eq!(
        paused(&ran),
        json!({ "kind": "request_input", "question": "What is your name?", "step": 1 })
    );
    let deadline = s.state().await["pending"]["deadline_ms"].as_u64().unwrap();
    // Past the deadline, with a margin: the outcome does not depend on timing.
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    while now() <= deadline + 100 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let ran = s.resume(Some(json!({ "answer": "Ada" })), &[]).await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "input_timeout", "response": "Stopped: no answer to \"What is your name?\" in time." })
    );
    assert_eq!(
        trace(&ran.events),
        [
            "run_started run=0 resumed=true",
            "resumed agent_request_input timed_out=true",
            "agent_request_input -> agent_request_input_timeout (timeout)",
            "> agent_request_input_timeout",
            "< agent_request_input_timeout [final_response]",
            "run_finished finished outcome=input_timeout steps=5 tokens=620",
        ]
    );
    let state = s.state().await;
    assert_eq!(state["state"]["user_input"], Json::Null);
    insta::assert_snapshot!(s.report(&trace(&ran.events)).await);
    s.finish();
}

/// Control JSON that is malformed (reason) or partial (observe) is taken as free text,
/// and the loop goes on; a later `finish` from reason skips act.
#[tokio::test]
async fn malformed_control_json_is_taken_as_free_text() {
    let mut s = scenario("malformed_control").await;
    let ran = s
        .run(json!({ "user_message": "What is 2 + 3?" }), &[])
        .await;
    ran.code(0);
    assert_eq!(
        ran.ended(),
        json!({ "status": "finished", "outcome": "completed", "response": "2 + 3 = 5." })
    );
    assert_eq!(
        path(&ran.events),
        [
            "ingest_user_input",
            "agent_reason",
            "agent_act",
            "agent_tool",
            "agent_observe",
            "agent_reason",
            "agent_observe",
            "agent_completion"
        ]
    );
    let state = s.state().await;
    let messages = state["state"]["messages"].as_array().unwrap();
    assert_eq!(
        messages[1],
        json!({ "role": "assistant", "content": "Reasoning: I should add 2 and 3 with get-sum. {plan: add" })
    );
    assert_eq!(
        messages[4],
        json!({ "role": "assistant", "content": "Observation: 2 + 3 = 5." })
    );
    let t = trace(&ran.events);
    // No second try: the first reply, valid or not, is taken.
    assert_eq!(t.iter().filter(|l| l.starts_with("llm ")).count(), 5);
    assert!(
        t.contains(&"agent_reason -> agent_observe (finish)".to_string()),
        "{t:#?}"
    );
    assert!(
        t.contains(&"agent_observe -> agent_completion (answered)".to_string()),
        "{t:#?}"
    );
    insta::assert_snapshot!(s.report(&t).await);
    s.finish();
}
