//! The seed graphs through the server, with their recorded model answers replayed
//! (`--replay`): each is driven over HTTP as its front end would (a run started with
//! the user's message, every pause answered with `command.resume`), and each ends in
//! the very state the same scenario ends in from the command line (the final state in
//! that test's snapshot).

use super::server::{Http, Serve, serve};
use crate::util::root;
use serde_json::{Value as Json, json};

/// The final state a command-line seed test recorded in its snapshot.
fn cli_final_state(snapshot: &str) -> Json {
    let path = root().join("tests/seeds_tools/snapshots").join(snapshot);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let (_, state) = text
        .split_once("--- final state\n")
        .unwrap_or_else(|| panic!("{} has no final state", path.display()));
    serde_json::from_str(state).expect("the final state is JSON")
}

/// The server's values as the command line prints them: messages without the `type`
/// the API adds, durations zeroed as the seed tests zero them.
fn as_cli(v: &Json) -> Json {
    crate::util::without_made_ids(as_cli_typed(v))
}

fn as_cli_typed(v: &Json) -> Json {
    match v {
        Json::Object(o) => Json::Object(
            o.iter()
                .filter(|(k, v)| !(k.as_str() == "type" && o.contains_key("role") && v.is_string()))
                .map(|(k, v)| {
                    let v = if k == "duration_ms" {
                        json!(0)
                    } else {
                        as_cli(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.iter().map(as_cli).collect()),
        other => other.clone(),
    }
}

async fn seed(graph: &str, recording: &str, env: &[(&str, &str)]) -> Serve {
    let mut start = serve(&[&format!("graphs/{graph}.toml")])
        .arg("--replay")
        .arg(&format!(
            "tests/fixtures/seeds/{graph}/{recording}.llm.jsonl"
        ));
    for (k, v) in env {
        start = start.env(k, v);
    }
    start.start().await
}

/// Runs to the end or the next pause; the run's result.
async fn wait(h: &Http, thread: &str, assistant: &str, body: Json) -> Json {
    let mut body = body;
    body["assistant_id"] = json!(assistant);
    let r = h.post(&format!("/threads/{thread}/runs/wait"), body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let result = r.json();
    assert!(result.get("__error__").is_none(), "{result}");
    result
}

async fn final_values(h: &Http, thread: &str) -> Json {
    let state = h.get(&format!("/threads/{thread}/state")).await.json();
    assert_eq!(state["next"], json!([]), "the thread ended: {state}");
    as_cli(&state["values"])
}

#[tokio::test]
async fn seed_002_asks_the_human_through_the_server() {
    let ws = tempfile::tempdir().unwrap();
    let s = seed(
        "tool_agent",
        "ask_human",
        &[("TOOL_AGENT_WORKSPACE", ws.path().to_str().unwrap())],
    )
    .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "ask_human" }))
        .await;
    let paused = wait(
        &h,
        "ask_human",
        "tool_agent",
        json!({ "input": { "user_message": "Save my meeting notes to a file: 'Decided to ship on Friday.'" } }),
    )
    .await;
    assert_eq!(
        paused["__interrupt__"][0]["value"],
        json!({ "kind": "ask_human", "question": "Which file should I save the meeting notes to?" })
    );
    wait(
        &h,
        "ask_human",
        "tool_agent",
        json!({ "command": { "resume": { "answer": "meetings/2025-06-30.md" } } }),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("meetings/2025-06-30.md")).unwrap(),
        "# Meeting 2025-06-30\n\nDecided to ship on Friday.\n"
    );
    assert_eq!(
        final_values(&h, "ask_human").await,
        cli_final_state(
            "integration__seeds_tools__tool_agent__ask_human_pauses_and_resumes_with_the_answer.snap"
        )
    );
}

#[tokio::test]
async fn seed_003_confirms_each_critical_call_through_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = dir.path().join("bridge.json");
    let s = seed(
        "confirm_execute",
        "happy_path",
        &[("SIMULATION_BRIDGE_STATE", bridge.to_str().unwrap())],
    )
    .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "happy_path" }))
        .await;
    let mut result = wait(
        &h,
        "happy_path",
        "confirm_execute",
        json!({ "input": { "user_message": "Load models/warfarin.pkml, set the liver clearance to 0.25 L/h, run it and tell me the AUC." } }),
    )
    .await;
    let mut tools = Vec::new();
    while let Some(pending) = result["__interrupt__"].get(0) {
        let value = &pending["value"];
        tools.push(value["pending_tool_call"]["tool"].clone());
        result = wait(
            &h,
            "happy_path",
            "confirm_execute",
            json!({ "command": { "resume": { "approved": true, "reference": value["reference"], "feedback": null } } }),
        )
        .await;
    }
    assert_eq!(
        tools,
        [
            json!("load_simulation"),
            json!("set_parameter_value"),
            json!("run_simulation")
        ]
    );
    assert_eq!(
        final_values(&h, "happy_path").await,
        cli_final_state(
            "integration__seeds_tools__confirm_execute__happy_path_confirms_each_critical_call.snap"
        )
    );
}

#[tokio::test]
async fn seed_004_requests_input_and_streams_its_phases_through_the_server() {
    let s = seed("reason_act_observe", "request_input", &[]).await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "request_input" }))
        .await;
    let r = h
        .post(
            "/threads/request_input/runs/stream",
            json!({
                "assistant_id": "reason_act_observe",
                "input": { "user_message": "Greet me by name." },
                "stream_mode": ["updates", "custom"],
            }),
        )
        .await;
    let events = r.events();
    // The UI's phase events, in order, as the seed names them.
    let phases: Vec<String> = events
        .iter()
        .filter(|(e, d, _)| e == "custom" && d["event"] == "node_started")
        .map(|(_, d, _)| d["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        phases,
        [
            "ingest_user_input",
            "agent_reason",
            "agent_act",
            "agent_request_input"
        ]
    );
    let interrupt = events
        .iter()
        .find(|(e, d, _)| e == "updates" && d.get("__interrupt__").is_some())
        .expect("the run pauses for input");
    assert_eq!(
        interrupt.1["__interrupt__"][0]["value"],
        json!({ "kind": "request_input", "question": "What is your name?", "step": 1 })
    );
    let done = wait(
        &h,
        "request_input",
        "reason_act_observe",
        json!({ "command": { "resume": { "answer": "Ada" } } }),
    )
    .await;
    assert_eq!(done["final_response"], "Hello, Ada!");
    assert_eq!(
        final_values(&h, "request_input").await,
        cli_final_state(
            "integration__seeds_tools__reason_act_observe__request_input_pauses_and_the_answer_goes_to_observe.snap"
        )
    );
}

/// Seed 002 from a chat window: the task comes as the person's message in `messages`,
/// and the question it asks is answered by typing a message (a new run, as on
/// LangGraph's server), which the model reads after its question.
#[tokio::test]
async fn seed_002_takes_its_task_and_its_answer_as_chat_messages() {
    use crate::llm::server::{Answer, Reply, Server as Llm};
    let ws = tempfile::tempdir().unwrap();
    let call = |name: &str, args: Json| {
        Answer::Reply(Reply {
            content: None,
            tool_calls: vec![(name.into(), args.to_string())],
        })
    };
    let model = Llm::start(vec![
        call("ask_human", json!({ "question": "Which file?" })),
        call(
            "write_file",
            json!({ "path": "notes.md", "content": "Ship on Friday." }),
        ),
        call("final_answer", json!({ "answer": "Saved to notes.md." })),
        call("final_answer", json!({ "answer": "A red dot." })),
    ])
    .await;
    let s = serve(&["graphs/tool_agent.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .env("OPENAI_API_KEY", "test")
        .env("TOOL_AGENT_WORKSPACE", ws.path().to_str().unwrap())
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "chat" })).await;
    let say =
        |text: &str| json!({ "input": { "messages": [{ "type": "human", "content": text }] } });
    let paused = wait(
        &h,
        "chat",
        "tool_agent",
        say("Save my notes: 'Ship on Friday.'"),
    )
    .await;
    assert_eq!(
        paused["__interrupt__"][0]["value"],
        json!({ "kind": "ask_human", "question": "Which file?" })
    );
    let done = wait(&h, "chat", "tool_agent", say("notes.md")).await;
    assert_eq!(done["final_response"], "Saved to notes.md.");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.md")).unwrap(),
        "Ship on Friday."
    );
    // The model read the question, then the typed answer, still on the first task.
    let seen = model.seen();
    let sent = seen[1].body["messages"].as_array().unwrap();
    let sent: Vec<(&str, &str)> = sent[1..]
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        sent[..3],
        [
            ("user", "Save my notes: 'Ship on Friday.'"),
            ("assistant", "Which file?"),
            ("user", "notes.md"),
        ]
    );
    assert!(
        sent[3]
            .1
            .starts_with("Task: Save my notes: 'Ship on Friday.'\n\n"),
        "{}",
        sent[3].1
    );
    // The conversation as the chat window shows it.
    let state = h.get("/threads/chat/state").await.json();
    let shown: Vec<(String, String)> = state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["type"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let shown: Vec<(&str, &str)> = shown
        .iter()
        .map(|(t, c)| (t.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            ("human", "Save my notes: 'Ship on Friday.'"),
            ("ai", "Which file?"),
            ("human", "notes.md"),
            (
                "ai",
                "Calling write_file with [{\"path\": \"notes.md\", \"content\": \"Ship on Friday.\"}]"
            ),
            (
                "human",
                "Results, in order: [{\"content\": \"Successfully wrote to notes.md\"}]"
            ),
            ("ai", "Saved to notes.md."),
        ]
    );
    // A message of content blocks (text beside an image): the task is its text, the
    // model gets the image.
    assert_eq!(model.seen().len(), 3);
    h.post("/threads", json!({ "thread_id": "blocks" })).await;
    let blocks = json!({ "input": { "messages": [{ "type": "human", "content": [
        { "type": "text", "text": "What is in this picture?" },
        { "type": "image", "source_type": "url", "url": "https://example.com/dot.png" },
    ] }] } });
    let done = wait(&h, "blocks", "tool_agent", blocks).await;
    assert_eq!(done["final_response"], "A red dot.");
    let seen = model.seen();
    let sent = seen[3].body["messages"].as_array().unwrap();
    assert_eq!(
        sent[1]["content"][1],
        json!({ "type": "image_url", "image_url": { "url": "https://example.com/dot.png" } })
    );
    assert!(
        sent[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Task: What is in this picture?\n\n"),
        "{}",
        sent[2]
    );
}
