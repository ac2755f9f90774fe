//! The interpreter through the library: reducers, routing, limits, interrupts and
//! resume, stop, events; a thread across processes, stores and graph edits in
//! `run/threads.rs`. LLM and tools are scripted.

mod budget;
mod threads;

use crate::doubles::{ScriptedLlm, ScriptedTools, ok};
use crate::util::root;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::Duration;
use switchyard::run::{Event, Go, Outcome, RunError, Runner};
use switchyard::store::{MemoryStore, NoStore, Source, SqliteStore, Status, Store};
use switchyard::tool::ToolReply;

fn graph(name: &str) -> Arc<switchyard::graph::Graph> {
    let path = root()
        .join("tests/fixtures/run")
        .join(format!("{name}.toml"));
    Arc::new(switchyard::load_graph(&path).unwrap_or_else(|e| panic!("{name}: {e}")))
}

fn runner(name: &str) -> Runner {
    Runner::new(graph(name), Arc::new(MemoryStore::new()))
}

fn finished(outcome: &str, response: &str, steps: u64) -> Outcome {
    Outcome::Finished {
        outcome: outcome.into(),
        response: Some(response.into()),
        steps,
    }
}

async fn state_of(r: &Runner, thread: &str) -> Json {
    crate::util::without_made_ids(r.threads().state(thread, None).await.unwrap().0)
}

#[tokio::test]
async fn each_reducer_merges_writes_its_own_way() {
    let r = runner("reducers");
    let out = r.start("t", json!({})).await.unwrap();
    assert_eq!(out, finished("done", "ab x,y,z 3", 2));
    assert_eq!(
        state_of(&r, "t").await,
        json!({
            "name": "ab",
            "tags": ["x", "y", "z"],
            "count": 3,
            "ratio": 0.5,
            "meta": { "keep": 1, "change": 2, "new": 3 },
            "messages": [
                { "id": "m1", "role": "user", "content": "hi again" },
                { "id": "m2", "role": "assistant", "content": "hello" }
            ],
            "bad": 0
        })
    );
    // A second run on the same thread starts from the thread's state, like a chat.
    let out = r.start("t", json!({ "count": 10 })).await.unwrap();
    assert_eq!(out, finished("done", "abb x,y,z,y,z 15", 2));
}

#[tokio::test]
async fn routes_switch_on_values_and_take_the_first_true_condition() {
    let r = runner("routes");
    assert_eq!(
        r.start("big", json!({ "n": 20 })).await.unwrap(),
        finished("big", "20 is big", 2)
    );
    assert_eq!(
        r.start("small", json!({ "n": 2 })).await.unwrap(),
        finished("zero", "classify count_down:1 count_down:0", 4)
    );
    assert_eq!(
        r.start("zero", json!({ "n": 0 })).await.unwrap(),
        finished("zero", "classify", 2)
    );
}

#[tokio::test]
async fn events_tell_the_whole_run_in_order() {
    let mut r = runner("routes");
    let rx = r.events();
    r.start("t", json!({ "n": 1 })).await.unwrap();
    drop(r);
    let lines = event_lines(rx).await;
    assert_eq!(
        lines,
        [
            r#"{"event":"run_started","thread":"t","graph":"routes","run":0,"resumed":false}"#,
            r#"{"event":"node_started","node":"classify","step":1}"#,
            r#"{"event":"node_finished","node":"classify","step":1,"duration_us":0,"writes":["size","trail"],"skipped":false}"#,
            r#"{"event":"route_taken","from":"classify","to":"count_down","case":"small"}"#,
            r#"{"event":"node_started","node":"count_down","step":2}"#,
            r#"{"event":"node_finished","node":"count_down","step":2,"duration_us":0,"writes":["n","trail"],"skipped":false}"#,
            r#"{"event":"route_taken","from":"count_down","to":"zero","case":"done"}"#,
            r#"{"event":"node_started","node":"zero","step":3}"#,
            r#"{"event":"node_finished","node":"zero","step":3,"duration_us":0,"writes":[],"skipped":false}"#,
            r#"{"event":"run_finished","status":"finished","outcome":"zero","response":"classify count_down:0","steps":3,"tokens":0,"duration_ms":0}"#,
        ]
    );
}

#[tokio::test]
async fn the_step_limit_counts_every_node_and_goes_to_on_limit() {
    let r = runner("loop");
    assert_eq!(
        r.start("t", json!({})).await.unwrap(),
        finished("limit", "stopped at 7 after 8 steps", 8)
    );
    // `--max-steps` overrides the graph's limit for one run.
    let r = runner("loop").with_max_steps(Some(3));
    assert_eq!(
        r.start("t", json!({})).await.unwrap(),
        finished("limit", "stopped at 3 after 4 steps", 4)
    );
}

#[tokio::test]
async fn the_wall_time_budget_ends_a_loop() {
    let mut r = runner("wall");
    let mut rx = r.events();
    let out = r.start("t", json!({})).await.unwrap();
    let Outcome::Finished { outcome, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(outcome, "late");
    drop(r);
    let mut limits = Vec::new();
    while let Some(e) = rx.recv().await {
        if let Event::LimitReached { limit, to } = e {
            limits.push((limit.to_string(), to.map(|t| t.to_string())));
        }
    }
    assert_eq!(
        limits,
        [("max_wall_time".to_string(), Some("late".to_string()))]
    );
}

#[tokio::test]
async fn the_token_budget_overrides_the_graphs_own_loop() {
    let llm = ScriptedLlm::new().script(
        "think",
        (0..10).map(|i| json!({ "idea": format!("idea {i}") })),
    );
    let r = runner("budget").with_llm(llm.clone());
    // Each scripted reply costs 15 tokens: the third crosses 40.
    assert_eq!(
        r.start("t", json!({ "goal": "plan" })).await.unwrap(),
        finished("budget", "45 tokens, 3 thoughts", 4)
    );
    assert_eq!(
        llm.requests.lock().unwrap()[0].messages,
        [json!({ "role": "user", "content": "Goal: plan\nSteps so far: 0" })]
    );
}

fn agent(llm: &Arc<ScriptedLlm>, tools: ScriptedTools, store: Arc<dyn Store>) -> Runner {
    Runner::new(graph("agent"), store)
        .with_llm(llm.clone())
        .with_tools(Arc::new(tools))
}

fn browser() -> ScriptedTools {
    ScriptedTools::new()
        .tool("browser_type", |_| ok(json!({ "typed": true })))
        .tool("browser_click", |_| ok(json!("clicked")))
}

fn typing_then_stop() -> Arc<ScriptedLlm> {
    ScriptedLlm::new().script(
        "plan",
        [
            json!({ "id": "a1", "kind": "type", "target": "search" }),
            json!({ "id": "a2", "kind": "stop", "target": "" }),
        ],
    )
}

#[tokio::test]
async fn an_interrupt_pauses_and_a_checked_answer_resumes_it() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let r = agent(&typing_then_stop(), browser(), store.clone());
    let out = r.start("s1", json!({ "goal": "find" })).await.unwrap();
    assert_eq!(
        out,
        Outcome::Interrupted {
            node: "confirm".into(),
            payload: json!({ "kind": "confirm", "reference": "a1", "reason": "type into search?" }),
        }
    );
    let paused = store.load("s1").await.unwrap();
    assert_eq!(paused.last().unwrap().status, Status::Interrupted);

    // An answer that does not fit the resume schema is refused; nothing changes.
    let err = r
        .resume("s1", Some(json!({ "reference": "a1" })), false)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the payload does not fit the resume schema of `confirm`: \"confirmed\" is a required property"
    );
    // So is an answer to another interrupt.
    let err = r
        .resume(
            "s1",
            Some(json!({ "reference": "a9", "confirmed": true })),
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the payload's reference `a9` does not match the pending interrupt's reference `a1`"
    );
    // And a thread that does not exist.
    let err = r.resume("nope", Some(json!({})), false).await.unwrap_err();
    assert_eq!(err.to_string(), "thread `nope` has no checkpoints");
    // Starting over while paused is refused too.
    let err = r.start("s1", json!({})).await.unwrap_err();
    assert!(matches!(err, RunError::Paused { .. }), "{err}");
    assert_eq!(store.load("s1").await.unwrap(), paused);

    let out = r
        .resume(
            "s1",
            Some(json!({ "reference": "a1", "confirmed": true })),
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        finished("done", "done after 1 tool steps: type:search", 6)
    );
    let state = state_of(&r, "s1").await;
    assert_eq!(
        state["confirmation"],
        json!({ "reference": "a1", "confirmed": true })
    );
    assert_eq!(state["last_result"], json!({ "typed": true }));
    assert_eq!(
        state["messages"],
        json!([
            { "role": "assistant", "content": "type search" },
            { "role": "assistant", "content": "stop " }
        ])
    );
    // The interrupt node ran once: no node runs twice because of a resume.
    let nodes: Vec<String> = store
        .load("s1")
        .await
        .unwrap()
        .iter()
        .filter_map(|c| c.node.as_deref().map(String::from))
        .collect();
    assert_eq!(
        nodes,
        [
            "plan",
            "gate",
            "confirm",
            "confirm",
            "act",
            "plan",
            "finalize_done"
        ]
    );

    // A second resume finds nothing to resume.
    let err = r
        .resume(
            "s1",
            Some(json!({ "reference": "a1", "confirmed": true })),
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "thread `s1` is finished; only a paused (interrupted or stopped) thread can be resumed"
    );
}

#[tokio::test]
async fn a_declined_confirmation_cancels_and_a_denied_action_never_runs() {
    let tools = browser();
    let r = agent(&typing_then_stop(), tools, Arc::new(MemoryStore::new()));
    r.start("s", json!({ "goal": "g" })).await.unwrap();
    let out = r
        .resume(
            "s",
            Some(json!({ "reference": "a1", "confirmed": false })),
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        Outcome::Finished {
            outcome: "cancelled".into(),
            response: None,
            steps: 4
        }
    );

    let llm = ScriptedLlm::new().script(
        "plan",
        [json!({ "id": "p", "kind": "click", "target": "pay now" })],
    );
    let tools = Arc::new(browser());
    let r = Runner::new(graph("agent"), Arc::new(MemoryStore::new()))
        .with_llm(llm)
        .with_tools(tools.clone());
    assert_eq!(
        r.start("d", json!({})).await.unwrap(),
        finished("denied", "payments are off limits", 3)
    );
    assert!(tools.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_wrong_write_fails_the_run_and_keeps_the_state_before_it() {
    let r = runner("wrong_write");
    let err = r.start("t", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `second` failed: field `count` is `int`, and the value written is a string `\"three\"`"
    );
    let (state, last) = r.threads().state("t", None).await.unwrap();
    assert_eq!(
        state,
        json!({ "count": 0, "label": "before", "raw": "three" })
    );
    assert_eq!(
        (last.status, last.node.as_deref()),
        (Status::Failed, Some("second"))
    );
}

#[tokio::test]
async fn an_optional_field_with_a_schema_can_be_cleared() {
    // Seed 003's synthesis clears `plan` (an `object?` with a schema); the schema is for
    // a value, not for none.
    let r = runner("clear_schema_field");
    let err = r.start("t", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `misthink` failed: field `thought` does not accept the value written: Additional properties are not allowed ('mood' was unexpected)"
    );
    let history = r.threads().history("t").await.unwrap();
    let writes: Vec<_> = history
        .iter()
        .flat_map(|c| c.writes.iter().map(|w| (&*w.field, (*w.value).clone())))
        .collect();
    assert_eq!(
        writes,
        [
            ("thought", json!({ "idea": "tea" })),
            ("thought", Json::Null)
        ]
    );
    assert_eq!(
        r.threads().state("t", None).await.unwrap().0,
        json!({ "thought": null })
    );
}

#[tokio::test]
async fn input_must_name_declared_fields_with_the_right_types() {
    let r = runner("routes");
    let err = r.start("t", json!({ "m": 3 })).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the input is refused: `m` is not a state field; did you mean `n`?"
    );
    let err = r.start("t", json!({ "n": "3" })).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the input is refused: field `n` is `int`, and the value written is a string `\"3\"`"
    );
    let err = r.start("t", json!([1])).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the input is refused: expected an object, got a list `[1]`"
    );
    assert!(
        r.threads().history("t").await.is_err(),
        "refused input leaves no checkpoint"
    );
}

#[tokio::test]
async fn a_stop_request_pauses_at_a_node_boundary_and_resume_finishes_the_same() {
    let whole = runner("count");
    let expected = whole.start("t", json!({ "goal": 30 })).await.unwrap();
    let expected_state = state_of(&whole, "t").await;

    let mut r = runner("count");
    let mut rx = r.events();
    let stop = r.stop_handle();
    let watcher = tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if matches!(e, Event::NodeFinished { step: 20, .. }) {
                stop.stop();
            }
        }
    });
    let out = r.start("t", json!({ "goal": 30 })).await.unwrap();
    let Outcome::Stopped {
        next: Some(_),
        steps,
    } = out
    else {
        panic!("{out:?}")
    };
    assert!((20..=21).contains(&steps), "stopped after {steps} steps");
    assert_eq!(
        r.threads()
            .history("t")
            .await
            .unwrap()
            .last()
            .unwrap()
            .status,
        Status::Stopped
    );
    // A stopped thread goes on without a payload.
    let err = r.resume("t", Some(json!({})), false).await.unwrap_err();
    assert!(matches!(err, RunError::UnexpectedPayload { .. }), "{err}");
    let out = r.resume("t", None, false).await.unwrap();
    assert_eq!(out, expected);
    assert_eq!(state_of(&r, "t").await, expected_state);
    drop(r);
    watcher.await.unwrap();
    assert_eq!(
        expected,
        finished("done", "n=30 total=465 checks=30 evens=15", 76)
    );
}

fn pauses(tools: ScriptedTools) -> Runner {
    Runner::new(graph("pauses"), Arc::new(MemoryStore::new())).with_tools(Arc::new(tools))
}

fn failing_fetch() -> ScriptedTools {
    ScriptedTools::new().tool("fetch", |_| {
        Ok(ToolReply {
            content: json!("boom"),
            is_error: true,
            ..Default::default()
        })
    })
}

#[tokio::test]
async fn breakpoints_pause_before_and_after_and_errors_take_on_error() {
    let r = pauses(failing_fetch());
    assert_eq!(
        r.start("t", json!({})).await.unwrap(),
        Outcome::Interrupted {
            node: "prepare".into(),
            payload: json!({ "breakpoint": "after", "node": "prepare" })
        }
    );
    let err = r.resume("t", Some(json!("go")), false).await.unwrap_err();
    assert!(matches!(err, RunError::UnexpectedPayload { .. }), "{err}");
    assert_eq!(
        r.resume("t", None, false).await.unwrap(),
        Outcome::Interrupted {
            node: "fetch".into(),
            payload: json!({ "breakpoint": "before", "node": "fetch" })
        }
    );
    assert_eq!(
        r.resume("t", None, false).await.unwrap(),
        Outcome::Interrupted {
            node: "ask".into(),
            payload: json!({ "question": "go on?" })
        }
    );
    assert_eq!(
        state_of(&r, "t").await["failure"],
        json!({ "node": "fetch", "message": "`fetch` reported an error: boom" })
    );
    assert_eq!(
        r.resume("t", Some(json!("yes")), false).await.unwrap(),
        finished("done", "prepare recover answered", 5)
    );
    assert_eq!(state_of(&r, "t").await["answer"], json!("yes"));
}

#[tokio::test]
async fn an_unanswered_interrupt_times_out_along_its_route() {
    let r = pauses(ScriptedTools::new().tool("fetch", |_| ok(json!("page"))));
    r.start("t", json!({})).await.unwrap();
    r.resume("t", None, false).await.unwrap();
    let out = r.resume("t", None, false).await.unwrap();
    assert!(
        matches!(&out, Outcome::Interrupted { node, .. } if node == "ask"),
        "{out:?}"
    );
    // Before the deadline an answer is needed...
    let err = r.resume("t", None, false).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the interrupt `ask` needs a payload to resume"
    );
    // ...after it, the run takes `on_timeout`, answer or not.
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    assert_eq!(
        r.resume("t", None, false).await.unwrap(),
        finished("timeout", "prepare fetch", 4)
    );
}

// Regressions found in review: each names what it caught.

#[tokio::test]
async fn an_answer_the_output_field_cannot_take_is_refused_and_the_thread_stays_paused() {
    let r = runner("answer");
    r.start("t", json!({})).await.unwrap();
    let before = r.threads().history("t").await.unwrap();
    let err = r
        .resume("t", Some(json!({ "name": "Ann" })), false)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the answer to `ask` cannot be taken: field `name` is `string`, and the value written is an object `{\"name\":\"Ann\"}`; nothing changed, answer again"
    );
    assert_eq!(r.threads().history("t").await.unwrap(), before);
    assert_eq!(
        r.resume("t", Some(json!("Ann")), false).await.unwrap(),
        finished("done", "hello Ann", 2)
    );
}

#[tokio::test]
async fn a_pause_on_the_limit_path_resumes_to_the_end_with_outcome_limit() {
    let r = runner("limit_path");
    assert_eq!(
        r.start("t", json!({})).await.unwrap(),
        Outcome::Interrupted {
            node: "ask".into(),
            payload: json!({ "steps": 4 })
        }
    );
    // The limit was reached before the pause; the resume goes on along its path
    // instead of reaching the limit again and asking forever.
    let out = r.resume("t", Some(json!(true)), false).await.unwrap();
    assert_eq!(
        out,
        Outcome::Finished {
            outcome: "limit".into(),
            response: None,
            steps: 5
        }
    );
    assert_eq!(state_of(&r, "t").await, json!({ "n": 30, "ok": true }));
}

#[tokio::test]
async fn a_route_that_fails_takes_on_error_and_run_error_survives_a_pause() {
    let r = runner("failures");
    let out = r.start("t", json!({})).await.unwrap();
    assert_eq!(
        out,
        Outcome::Interrupted {
            node: "recover".into(),
            payload: json!({ "breakpoint": "before", "node": "recover" })
        }
    );
    // The write before the failed route stands.
    assert_eq!(state_of(&r, "t").await["n"], json!(1));
    let Outcome::Finished { response, .. } = r.resume("t", None, false).await.unwrap() else {
        panic!("not finished")
    };
    assert_eq!(
        response.unwrap(),
        "divide: route `(n // 0) > 1`: invalid operation: unable to calculate 1 // 0"
    );
}

#[tokio::test]
async fn reducers_on_optional_fields_start_from_empty_and_zero() {
    let r = runner("optional");
    r.start("t", json!({})).await.unwrap();
    assert_eq!(
        state_of(&r, "t").await,
        json!({
            "msgs": [
                { "role": "user", "content": "hi" },
                { "role": "assistant", "content": "hello" }
            ],
            "count": 5
        })
    );
}

/// The events of a run as JSON lines, durations (which vary from run to run) zeroed.
async fn event_lines(mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some(e) = rx.recv().await {
        let mut v = serde_json::to_value(&e).unwrap();
        for k in ["duration_us", "duration_ms"] {
            if let Some(d) = v.get_mut(k) {
                *d = json!(0);
            }
        }
        lines.push(v.to_string());
    }
    lines
}

/// A model named `{{ MODEL }}` is the run's configured one, else the default.
#[tokio::test]
async fn a_run_chooses_its_model_through_a_configurable_value() {
    let llm = ScriptedLlm::new().script("think", [json!({ "idea": "a" }), json!({ "idea": "b" })]);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let configured = |values: Json| {
        Runner::new(graph("chosen_model"), store.clone())
            .with_llm(llm.clone())
            .with_configuration(values.as_object().unwrap().clone())
    };
    configured(json!({}))
        .start("a", json!({ "goal": "g" }))
        .await
        .unwrap();
    configured(json!({ "MODEL": "large" }))
        .start("b", json!({ "goal": "g" }))
        .await
        .unwrap();
    let err = configured(json!({ "MODEL": "huge" }))
        .start("c", json!({ "goal": "g" }))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the configuration is refused: `MODEL` of graph `chosen_model`: \"huge\" is not one of \"small\", \"large\""
    );
    let models: Vec<String> = llm
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.model.clone())
        .collect();
    assert_eq!(models, ["small", "large"]);
}
