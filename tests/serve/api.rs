//! The HTTP API, request by request: exact statuses and bodies (snapshots), and the
//! state of a thread after every refused request, unchanged.

use super::Transcript;
use super::server::{Serve, serve};
use crate::llm::server::{Answer, Reply, Server as Llm};
use serde_json::{Value as Json, json};

/// The chat graph's model: one streamed reply per answer given.
async fn llm(replies: &[&str]) -> Llm {
    Llm::start(
        replies
            .iter()
            .map(|t| {
                Answer::Reply(Reply {
                    content: Some(json!({ "text": t }).to_string()),
                    tool_calls: Vec::new(),
                })
            })
            .collect(),
    )
    .await
}

/// A person's message, as a chat front end sends it.
fn say(text: &str) -> Json {
    json!({ "messages": [{ "type": "human", "content": text }] })
}

/// The texts of a state's `messages`.
fn contents(values: &Json) -> Vec<String> {
    values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

async fn chat_server(llm: &Llm) -> Serve {
    serve(&["tests/fixtures/serve"])
        .env("OPENAI_BASE_URL", llm.url())
        .start()
        .await
}

#[tokio::test]
async fn assistants_are_the_served_graphs() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    for (req, r) in [
        (
            "POST /assistants/search {}",
            h.post("/assistants/search", json!({})).await,
        ),
        (
            "POST /assistants/search {limit: 1, offset: 1}",
            h.post("/assistants/search", json!({ "limit": 1, "offset": 1 }))
                .await,
        ),
        (
            "POST /assistants/count {graph_id: chat}",
            h.post("/assistants/count", json!({ "graph_id": "chat" }))
                .await,
        ),
        ("GET /assistants/chat", h.get("/assistants/chat").await),
        (
            "GET /assistants/three/graph",
            h.get("/assistants/three/graph").await,
        ),
        (
            "GET /assistants/three/graph?format=mermaid",
            h.get("/assistants/three/graph?format=mermaid").await,
        ),
        (
            "GET /assistants/three/graph?format=svg",
            h.get("/assistants/three/graph?format=svg").await,
        ),
        (
            "GET /assistants/three/graph?format=png",
            h.get("/assistants/three/graph?format=png").await,
        ),
        (
            "GET /assistants/chat/details",
            h.get("/assistants/chat/details").await,
        ),
        (
            "GET /assistants/chat/schemas",
            h.get("/assistants/chat/schemas").await,
        ),
        (
            "GET /assistants/chat/subgraphs",
            h.get("/assistants/chat/subgraphs").await,
        ),
        ("GET /assistants/nope", h.get("/assistants/nope").await),
        (
            "POST /assistants {graph_id: chat}",
            h.post("/assistants", json!({ "graph_id": "chat" })).await,
        ),
        ("GET /ok", h.get("/ok").await),
        ("GET /info", h.get("/info").await),
        ("GET /nowhere", h.get("/nowhere").await),
    ] {
        t.note(req, &r);
    }
    let r = h.post("/assistants/search", json!({ "limit": 1 })).await;
    assert_eq!(r.header("x-pagination-next"), Some("1"));
    assert_eq!(r.header("x-pagination-total"), Some("4"));
    // The DOT drawing is Graphviz's to check.
    let dot = h.get("/assistants/chat/graph?format=dot").await;
    assert_eq!(
        dot.header("content-type"),
        Some("text/vnd.graphviz; charset=utf-8")
    );
    crate::util::graphviz_svg(&dot.text, "the served chat graph");
    insta::assert_snapshot!(t.text());
}

#[tokio::test]
async fn a_thread_pauses_at_an_interrupt_and_resumes_with_its_answer() {
    let llm = llm(&["2 + 2 is 4."]).await;
    let s = chat_server(&llm).await;
    let h = s.http();
    let mut t = Transcript::new();
    let r = h
        .post(
            "/threads",
            json!({ "thread_id": "chat-1", "metadata": { "user": "ann" } }),
        )
        .await;
    t.note(
        "POST /threads {thread_id: chat-1, metadata: {user: ann}}",
        &r,
    );
    t.note(
        "POST /threads {thread_id: chat-1} (again)",
        &h.post("/threads", json!({ "thread_id": "chat-1" })).await,
    );
    t.note(
        "POST /threads {thread_id: chat-1, if_exists: do_nothing}",
        &h.post(
            "/threads",
            json!({ "thread_id": "chat-1", "if_exists": "do_nothing" }),
        )
        .await,
    );
    t.note(
        "PATCH /threads/chat-1 {metadata: {topic: sums}}",
        &h.patch(
            "/threads/chat-1",
            json!({ "metadata": { "topic": "sums" } }),
        )
        .await,
    );
    t.note(
        "GET /threads/chat-1/state (no run yet)",
        &h.get("/threads/chat-1/state").await,
    );
    let r = h
        .post(
            "/threads/chat-1/runs/wait",
            json!({ "assistant_id": "chat", "input": { "question": "What is 2 + 2?" } }),
        )
        .await;
    t.note("POST /threads/chat-1/runs/wait {input: {question}}", &r);
    let paused = h.get("/threads/chat-1/state").await;
    t.note("GET /threads/chat-1/state", &paused);
    t.note("GET /threads/chat-1", &h.get("/threads/chat-1").await);

    // A wrong answer is refused with the diagnostic, and changes nothing.
    let r = h
        .post(
            "/threads/chat-1/runs/wait",
            json!({ "assistant_id": "chat", "command": { "resume": { "confirmed": "yes" } } }),
        )
        .await;
    t.note(
        "POST /threads/chat-1/runs/wait {command: {resume: {confirmed: \"yes\"}}}",
        &r,
    );
    // Answered by the interrupt's id, as LangGraph's clients may.
    let id = paused.json()["tasks"][0]["interrupts"][0]["id"].clone();
    let r = h
        .post(
            "/threads/chat-1/runs/wait",
            json!({ "assistant_id": "chat", "command": { "resume": { id.as_str().unwrap(): { "confirmed": true } } } }),
        )
        .await;
    t.note(
        "POST /threads/chat-1/runs/wait {command: {resume: {<interrupt id>: {confirmed: true}}}}",
        &r,
    );
    t.note(
        "GET /threads/chat-1/state",
        &h.get("/threads/chat-1/state").await,
    );
    t.note(
        "POST /threads/chat-1/history {limit: 2}",
        &h.post("/threads/chat-1/history", json!({ "limit": 2 }))
            .await,
    );
    t.note(
        "GET /threads/chat-1/history?limit=1&before=3",
        &h.get("/threads/chat-1/history?limit=1&before=3").await,
    );
    t.note(
        "GET /threads/chat-1/state/00000000-0000-7000-8000-000000000001",
        &h.get("/threads/chat-1/state/00000000-0000-7000-8000-000000000001")
            .await,
    );
    t.note(
        "GET /threads/chat-1/state/99",
        &h.get("/threads/chat-1/state/99").await,
    );
    t.note(
        "GET /threads/chat-1/runs",
        &h.get("/threads/chat-1/runs").await,
    );
    insta::assert_snapshot!(t.text());
    assert_eq!(llm.seen().len(), 1);
}

#[tokio::test]
async fn a_person_updates_the_state_through_the_reducers() {
    let llm = llm(&["Hello."]).await;
    let s = chat_server(&llm).await;
    let h = s.http();
    let mut t = Transcript::new();
    h.post("/threads", json!({ "thread_id": "u" })).await;
    h.post(
        "/threads/u/runs/wait",
        json!({ "assistant_id": "chat", "input": { "question": "Hi?" } }),
    )
    .await;
    let before = h.get("/threads/u/state").await.text;
    for (req, body) in [
        (
            "{values: {question: 7}}",
            json!({ "values": { "question": 7 } }),
        ),
        ("{values: {nope: 1}}", json!({ "values": { "nope": 1 } })),
        (
            "{values: {messages: [{content: hi}]}}",
            json!({ "values": { "messages": [{ "content": "hi" }] } }),
        ),
        (
            "{values: {}, as_node: missing}",
            json!({ "values": {}, "as_node": "missing" }),
        ),
        (
            "{values: {}, checkpoint_id: <unknown>}",
            json!({ "values": {}, "checkpoint_id": "00000000-0000-7000-8000-000000000063" }),
        ),
    ] {
        t.note(
            &format!("POST /threads/u/state {req}"),
            &h.post("/threads/u/state", body).await,
        );
    }
    assert_eq!(
        h.get("/threads/u/state").await.text,
        before,
        "refused updates change nothing"
    );
    // LangChain's message shape is taken; the messages reducer appends.
    let r = h
        .post(
            "/threads/u/state",
            json!({ "values": { "messages": [{ "type": "human", "content": "One more thing." }], "question": "edited" } }),
        )
        .await;
    t.note(
        "POST /threads/u/state {values: {messages: [{type: human, ...}], question: edited}}",
        &r,
    );
    t.note("GET /threads/u/state", &h.get("/threads/u/state").await);
    // As the confirm node: the thread now stands before the node its route picks.
    let r = h
        .post(
            "/threads/u/state",
            json!({ "values": { "decision": { "confirmed": false } }, "as_node": "confirm" }),
        )
        .await;
    t.note(
        "POST /threads/u/state {values: {decision: {confirmed: false}}, as_node: confirm}",
        &r,
    );
    let r = h.get("/threads/u/state").await;
    t.note("GET /threads/u/state", &r);
    // Going on from there, with no input: the route's choice runs.
    let r = h
        .post("/threads/u/runs/wait", json!({ "assistant_id": "chat" }))
        .await;
    t.note("POST /threads/u/runs/wait {assistant_id: chat}", &r);
    t.note(
        "POST /threads/u/history {limit: 4}",
        &h.post("/threads/u/history", json!({ "limit": 4 })).await,
    );
    insta::assert_snapshot!(t.text());
}

#[tokio::test]
async fn a_run_streams_its_modes_and_a_dropped_stream_picks_up_where_it_was() {
    let llm = llm(&["Four, as always."]).await;
    let s = chat_server(&llm).await;
    let h = s.http();
    let mut t = Transcript::new();
    h.post("/threads", json!({ "thread_id": "s" })).await;
    let r = h
        .post(
            "/threads/s/runs/stream",
            json!({
                "assistant_id": "chat",
                "input": { "question": "2 + 2?" },
                "stream_mode": ["values", "updates", "messages-tuple", "custom"],
                "stream_resumable": true,
            }),
        )
        .await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    t.note(
        "POST /threads/s/runs/stream {stream_mode: [values, updates, messages-tuple, custom]}",
        &r,
    );
    let events = r.events();
    let run = r
        .header("content-location")
        .expect("content-location")
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    // A page that reloads after the fifth event asks for what came after it.
    let fifth = events[5].2.clone().expect("an id");
    let r = h
        .get_with(
            &format!("/threads/s/runs/{run}/stream"),
            &[("last-event-id", &fifth)],
        )
        .await;
    let shown = fifth.split('.').next().unwrap();
    t.note(
        &format!("GET /threads/s/runs/{run}/stream (Last-Event-ID: {shown})"),
        &r,
    );
    let rest = r.events();
    assert_eq!(rest[0].0, "metadata");
    assert_eq!(
        rest[1..],
        events[6..],
        "the rest of the stream, as the first reader had it"
    );
    // From the start, in other modes.
    let r = h
        .get_with(
            &format!("/threads/s/runs/{run}/stream?stream_mode=%5B%22updates%22%5D"),
            &[("last-event-id", "-1")],
        )
        .await;
    t.note(
        &format!("GET /threads/s/runs/{run}/stream?stream_mode=[\"updates\"] (Last-Event-ID: -1)"),
        &r,
    );
    // Joined after it ended: its result.
    t.note(
        &format!("GET /threads/s/runs/{run}/join"),
        &h.get(&format!("/threads/s/runs/{run}/join")).await,
    );
    insta::assert_snapshot!(t.text());
}

/// Readers following one run at once share the frames one of them made: each gets
/// the stream it would have had alone, ids included, and a reader of other modes
/// gets only its own.
#[tokio::test]
async fn readers_of_one_run_at_once_each_get_their_whole_stream() {
    // The model answers after the three readers follow the run.
    let llm = Llm::start(vec![Answer::Slow(
        std::time::Duration::from_millis(500),
        Box::new(Answer::Reply(Reply {
            content: Some(json!({ "text": "Four, as always." }).to_string()),
            tool_calls: Vec::new(),
        })),
    )])
    .await;
    let s = chat_server(&llm).await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "s" })).await;
    let run = h
        .post(
            "/threads/s/runs",
            json!({ "assistant_id": "chat", "input": { "question": "2 + 2?" } }),
        )
        .await
        .json();
    let run = run["run_id"].as_str().expect("run_id").to_string();
    let both =
        format!("/threads/s/runs/{run}/stream?stream_mode=%5B%22values%22%2C%22updates%22%5D");
    let updates = format!("/threads/s/runs/{run}/stream?stream_mode=%5B%22updates%22%5D");
    let (a, b, c) = tokio::join!(h.get(&both), h.get(&both), h.get(&updates));
    let (a, b, c) = (a.events(), b.events(), c.events());
    let names = |e: &[(String, Json, Option<String>)]| -> Vec<String> {
        e.iter().map(|(n, _, _)| n.clone()).collect()
    };
    assert_eq!(
        names(&a),
        [
            "metadata", "values", "updates", "values", "updates", "values", "updates", "values"
        ],
    );
    assert_eq!(a, b, "two readers in the same modes");
    let a_updates: Vec<_> = a.iter().filter(|e| e.0 != "values").cloned().collect();
    assert_eq!(a_updates.len(), 4);
    assert_eq!(c, a_updates, "a reader of updates alone");
    assert_eq!(
        a.last().unwrap().1["draft"],
        json!({ "text": "Four, as always." })
    );
}

#[tokio::test]
async fn runs_on_one_thread_are_refused_queued_or_cancelled_as_asked() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    h.post("/threads", json!({ "thread_id": "q" })).await;
    let first = h
        .post(
            "/threads/q/runs",
            json!({ "assistant_id": "spin", "input": { "label": "first" } }),
        )
        .await;
    t.note(
        "POST /threads/q/runs {assistant_id: spin, input: {label: first}}",
        &first,
    );
    let first = first.json()["run_id"].as_str().unwrap().to_string();
    h.until(&format!("/threads/q/runs/{first}"), |r| {
        r["status"] == "running"
    })
    .await;
    t.note(
        "POST /threads/q/runs {input: {label: second}, multitask_strategy: reject}",
        &h.post(
            "/threads/q/runs",
            json!({ "assistant_id": "spin", "input": { "label": "second" }, "multitask_strategy": "reject" }),
        )
        .await,
    );
    let second = h
        .post(
            "/threads/q/runs",
            json!({ "assistant_id": "spin", "input": { "label": "second" }, "multitask_strategy": "enqueue" }),
        )
        .await;
    t.note(
        "POST /threads/q/runs {input: {label: second}, multitask_strategy: enqueue}",
        &second,
    );
    let second = second.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(h.get("/threads/q").await.json()["status"], "busy");
    t.note(
        "POST /threads/q/state {values: {label: x}} (busy)",
        &h.post("/threads/q/state", json!({ "values": { "label": "x" } }))
            .await,
    );
    t.note("DELETE /threads/q (busy)", &h.delete("/threads/q").await);
    // The stop button: the first run stops at its next node boundary.
    t.note(
        "POST /threads/q/runs/<first>/cancel?wait=1",
        &h.post(
            &format!("/threads/q/runs/{first}/cancel?wait=1"),
            Json::Null,
        )
        .await,
    );
    let stopped = h.get(&format!("/threads/q/runs/{first}")).await.json();
    assert_eq!(stopped["status"], "interrupted");
    h.until(&format!("/threads/q/runs/{second}"), |r| {
        r["status"] == "running"
    })
    .await;
    // Interrupting it: a third run takes over, the second stops where it is.
    let third = h
        .post(
            "/threads/q/runs",
            json!({ "assistant_id": "spin", "input": { "label": "third" }, "multitask_strategy": "interrupt" }),
        )
        .await
        .json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    h.until(&format!("/threads/q/runs/{second}"), |r| {
        r["status"] == "interrupted"
    })
    .await;
    h.until(&format!("/threads/q/runs/{third}"), |r| {
        r["status"] == "running"
    })
    .await;
    // Once it has written a checkpoint of its own (a run is `running` a moment before).
    h.until("/threads/q/state", |st| st["values"]["label"] == "third")
        .await;
    let before_rollback = h.get("/threads/q/history?limit=1000").await.json();
    // Rolled back: the third run and every checkpoint it wrote are gone.
    t.note(
        "POST /threads/q/runs/<third>/cancel?wait=1&action=rollback",
        &h.post(
            &format!("/threads/q/runs/{third}/cancel?wait=1&action=rollback"),
            Json::Null,
        )
        .await,
    );
    t.note(
        "GET /threads/q/runs/<third>",
        &h.get(&format!("/threads/q/runs/{third}")).await,
    );
    let after = h.get("/threads/q/history?limit=1000").await.json();
    let after = after.as_array().unwrap();
    // The newest checkpoint before was the third run's; it is gone. (Counts would not
    // tell: the runs before it may have written more than a page of checkpoints.)
    let newest = |h: &[Json]| h[0]["checkpoint"]["checkpoint_id"].clone();
    assert_eq!(before_rollback[0]["values"]["label"], "third");
    assert!(
        !after.iter().any(
            |c| c["checkpoint"]["checkpoint_id"] == newest(before_rollback.as_array().unwrap())
        ),
        "the rollback removed records"
    );
    assert_eq!(
        after[0]["values"]["label"], "second",
        "the state is the second run's"
    );
    assert_eq!(after[0]["metadata"]["status"], "stopped");
    t.note(
        "POST /threads/q/runs/<first>/cancel (ended)",
        &h.post(&format!("/threads/q/runs/{first}/cancel"), Json::Null)
            .await,
    );
    let runs = h.get("/threads/q/runs").await.json();
    let statuses = super::server::statuses(&runs);
    assert_eq!(statuses, ["interrupted", "interrupted"], "newest first");
    t.note(
        "DELETE /threads/q/runs/<first>",
        &h.delete(&format!("/threads/q/runs/{first}")).await,
    );
    t.note(
        "GET /threads/q/runs/<first>",
        &h.get(&format!("/threads/q/runs/{first}")).await,
    );
    t.note("DELETE /threads/q", &h.delete("/threads/q").await);
    t.note("GET /threads/q", &h.get("/threads/q").await);
    insta::assert_snapshot!(t.text());
}

#[tokio::test]
async fn stateless_runs_use_a_thread_of_their_own() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    let r = h
        .post(
            "/runs/wait",
            json!({ "assistant_id": "three", "input": { "input": "x" } }),
        )
        .await;
    t.note(
        "POST /runs/wait {assistant_id: three, input: {input: x}}",
        &r,
    );
    let thread = r
        .header("content-location")
        .expect("content-location")
        .to_string();
    assert!(thread.starts_with("/runs/"));
    let r = h
        .post(
            "/runs/stream",
            json!({ "assistant_id": "three", "input": { "input": "y" }, "stream_mode": "updates", "on_completion": "keep" }),
        )
        .await;
    t.note(
        "POST /runs/stream {input: {input: y}, stream_mode: updates, on_completion: keep}",
        &r,
    );
    t.note(
        "POST /threads/search {metadata: {graph_id: three}}",
        &h.post(
            "/threads/search",
            json!({ "metadata": { "graph_id": "three" } }),
        )
        .await,
    );
    t.note(
        "POST /runs/wait {command: {resume: 1}}",
        &h.post(
            "/runs/wait",
            json!({ "assistant_id": "three", "command": { "resume": 1 } }),
        )
        .await,
    );
    insta::assert_snapshot!(t.text());
}

#[tokio::test]
async fn bad_requests_are_refused_clearly_and_change_nothing() {
    let llm = llm(&["Sure."]).await;
    let s = serve(&["tests/fixtures/serve"])
        .env("OPENAI_BASE_URL", llm.url())
        .env("SERVE_TEST_KEY", "sekrit")
        .arg("--api-key-env")
        .arg("SERVE_TEST_KEY")
        .arg("--max-body")
        .arg("2kB")
        .start()
        .await;
    let anon = s.http();
    let h = s.http().with_key("sekrit");
    let mut t = Transcript::new();
    t.note("GET /threads/x (no key)", &anon.get("/threads/x").await);
    t.note(
        "GET /threads/x (wrong key)",
        &s.http().with_key("guess").get("/threads/x").await,
    );
    let bearer = super::server::client()
        .get(anon.url("/assistants/chat"))
        .header("authorization", "Bearer sekrit")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status().as_u16(), 200, "a bearer token is a key too");
    t.note("GET /ok (no key)", &anon.get("/ok").await);
    h.post("/threads", json!({ "thread_id": "b" })).await;
    h.post(
        "/threads/b/runs/wait",
        json!({ "assistant_id": "chat", "input": { "question": "Go?" } }),
    )
    .await;
    let state = h.get("/threads/b/state").await.text;
    let history = h
        .post("/threads/b/history", json!({ "limit": 100 }))
        .await
        .text;
    let runs = h.get("/threads/b/runs").await.json();
    for (req, r) in [
        ("POST /threads/b/runs {assistant_id: nope}", h.post("/threads/b/runs", json!({ "assistant_id": "nope" })).await),
        ("POST /threads/nope/runs {assistant_id: chat}", h.post("/threads/nope/runs", json!({ "assistant_id": "chat", "input": {} })).await),
        ("POST /threads/b/runs (no assistant_id)", h.post("/threads/b/runs", json!({ "input": {} })).await),
        ("POST /threads/b/runs {malformed", h.post_raw("/threads/b/runs", "{\"assistant_id\": \"chat\",").await),
        ("POST /threads/b/runs {assistant_id: 7}", h.post("/threads/b/runs", json!({ "assistant_id": 7 })).await),
        ("POST /threads/b/runs {command: {resume: {confirmed: 1}}}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "command": { "resume": { "confirmed": 1 } } })).await),
        ("POST /threads/b/runs {command: {resume: {confirmed: true, extra: 1}}}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "command": { "resume": { "confirmed": true, "extra": 1 } } })).await),
        ("POST /threads/b/runs {stream_mode: [values, sideways]}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "command": { "resume": { "confirmed": true } }, "stream_mode": ["values", "sideways"] })).await),
        ("POST /threads/b/runs {interrupt_before: [draft]}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "command": { "resume": { "confirmed": true } }, "interrupt_before": ["draft"] })).await),
        ("POST /threads/b/runs {config: {recursion_limit: -1}}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "command": { "resume": { "confirmed": true } }, "config": { "recursion_limit": -1 } })).await),
        ("POST /threads/b/runs {multitask_strategy: later}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "command": { "resume": { "confirmed": true } }, "multitask_strategy": "later" })).await),
        ("POST /threads/b/runs {if_not_exists: maybe}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "if_not_exists": "maybe" })).await),
        ("POST /threads/b/runs {on_disconnect: hang_up}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "on_disconnect": "hang_up" })).await),
        ("POST /threads/b/runs {on_completion: archive}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "on_completion": "archive" })).await),
        ("POST /threads/b/runs {interrupt_after: [draft]}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "interrupt_after": ["draft"] })).await),
        ("POST /threads/b/runs {after_seconds: 5}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "after_seconds": 5 })).await),
        ("POST /threads/b/runs {webhook: ...}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "webhook": "http://hook.test/" })).await),
        ("POST /threads/b/runs {command: {goto: nowhere}}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "command": { "goto": "nowhere" } })).await),
        ("POST /runs {command: {resume: yes}} (no thread)", h.post("/runs", json!({ "assistant_id": "chat", "command": { "resume": "yes" } })).await),
        ("POST /threads/b/runs {checkpoint_id: <unknown>}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "checkpoint_id": "00000000-0000-7000-8000-000000000063" })).await),
        ("POST /threads/b/runs {checkpoint: {checkpoint_id: not-a-uuid}}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "checkpoint": { "checkpoint_id": "not-a-uuid" } })).await),
        ("POST /threads/b/runs {max_steps: 0}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "max_steps": 0 })).await),
        ("POST /threads/b/runs {metadata: [1]}", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "metadata": [1] })).await),
        ("POST /threads/b/runs {multitask_strategy: later, if_not_exists: maybe} (the first refusal)", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": {}, "multitask_strategy": "later", "if_not_exists": "maybe", "webhook": "x" })).await),
        ("POST /threads/b/runs {assistant_id: three} (another graph's thread)", h.post("/threads/b/runs", json!({ "assistant_id": "three", "input": {} })).await),
        ("POST /runs/wait {assistant_id: three, input: {}} (no required input)", h.post("/runs/wait", json!({ "assistant_id": "three", "input": {} })).await),
        ("POST /threads/b2/runs {assistant_id: three, input: {input: 3}}", h.post("/threads/b2/runs", json!({ "assistant_id": "three", "input": { "input": 3 }, "if_not_exists": "create" })).await),
        ("POST /threads/b/runs (a 3 kB body)", h.post("/threads/b/runs", json!({ "assistant_id": "chat", "input": { "question": "x".repeat(3000) } })).await),
        ("POST /threads {thread_id: \"a/b\"}", h.post("/threads", json!({ "thread_id": "a/b" })).await),
        ("POST /threads/search {status: asleep}", h.post("/threads/search", json!({ "status": "asleep" })).await),
        ("GET /threads/b/runs?limit=ten", h.get("/threads/b/runs?limit=ten").await),
        ("GET /threads/b/runs?offset=-5", h.get("/threads/b/runs?offset=-5").await),
        ("GET /threads/b/history?limit=-1", h.get("/threads/b/history?limit=-1").await),
        ("GET /assistants/three/graph?xray=maybe", h.get("/assistants/three/graph?xray=maybe").await),
        ("GET /threads/b/runs/nope", h.get("/threads/b/runs/nope").await),
        ("POST /threads/b/runs/nope/cancel", h.post("/threads/b/runs/nope/cancel", Json::Null).await),
    ] {
        t.note(req, &r);
    }
    assert_eq!(h.get("/threads/b/state").await.text, state);
    assert_eq!(
        h.post("/threads/b/history", json!({ "limit": 100 }))
            .await
            .text,
        history
    );
    assert_eq!(h.get("/threads/b/runs").await.json(), runs);
    // The refused inputs left no thread behind.
    assert_eq!(h.get("/threads/b2/state").await.status, 404);
    insta::assert_snapshot!(t.text());
}

#[tokio::test]
async fn every_stream_mode_has_its_events() {
    let s = serve(&["tests/fixtures/serve/three.toml"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    h.post("/threads", json!({ "thread_id": "m" })).await;
    let r = h
        .post(
            "/threads/m/runs/stream",
            json!({
                "assistant_id": "three",
                "input": { "input": "x" },
                "stream_mode": ["events", "debug", "tasks", "checkpoints"],
            }),
        )
        .await;
    t.note(
        "POST /threads/m/runs/stream {stream_mode: [events, debug, tasks, checkpoints]}",
        &r,
    );
    insta::assert_snapshot!(t.text());
}

#[tokio::test]
async fn a_stream_that_goes_away_cancels_its_run_when_asked() {
    let s = serve(&["tests/fixtures/serve/spin.toml"]).start().await;
    let h = s.http();
    for (thread, on_disconnect, after) in
        [("c", "cancel", "interrupted"), ("k", "continue", "running")]
    {
        h.post("/threads", json!({ "thread_id": thread })).await;
        let mut r = super::server::client()
            .post(h.url(&format!("/threads/{thread}/runs/stream")))
            .body(
                json!({ "assistant_id": "spin", "input": {}, "stream_mode": "updates", "on_disconnect": on_disconnect })
                    .to_string(),
            )
            .send()
            .await
            .unwrap();
        let run = r.headers()["content-location"]
            .to_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        // A few events, then the page goes away.
        for _ in 0..3 {
            r.chunk().await.unwrap();
        }
        drop(r);
        let run = h
            .until(&format!("/threads/{thread}/runs/{run}"), |r| {
                r["status"] != "pending" && (r["status"] != "running" || after == "running")
            })
            .await;
        if after == "running" {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let again = h
                .get(&format!(
                    "/threads/{thread}/runs/{}",
                    run["run_id"].as_str().unwrap()
                ))
                .await
                .json();
            assert_eq!(
                again["status"], "running",
                "on_disconnect continue: the run goes on"
            );
            h.post(
                &format!(
                    "/threads/{thread}/runs/{}/cancel?wait=1",
                    run["run_id"].as_str().unwrap()
                ),
                Json::Null,
            )
            .await;
        } else {
            assert_eq!(run["status"], after);
        }
    }
}

#[tokio::test]
async fn the_interrupts_of_parallel_branches_are_listed_and_answered_by_id() {
    let s = serve(&["tests/fixtures/run/parallel_ask.toml"])
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "p" })).await;
    let paused = h
        .post(
            "/threads/p/runs/wait",
            json!({ "assistant_id": "parallel_ask", "input": {} }),
        )
        .await
        .json();
    // Both questions, each with an id of its own.
    let pending = paused["__interrupt__"].as_array().unwrap().clone();
    let values: Vec<&Json> = pending.iter().map(|i| &i["value"]).collect();
    assert_eq!(
        values,
        [
            &json!({ "question": "first?", "reference": "q1" }),
            &json!({ "question": "second?", "reference": "q2" })
        ]
    );
    let second = pending[1]["id"].as_str().unwrap().to_string();
    assert_ne!(pending[0]["id"], pending[1]["id"]);
    // The second, answered by its id (its reference is given to the answer), first.
    let after = h
        .post(
            "/threads/p/runs/wait",
            json!({ "assistant_id": "parallel_ask", "command": { "resume": { second: { "confirmed": false } } } }),
        )
        .await
        .json();
    let left: Vec<&Json> = after["__interrupt__"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["value"]["reference"])
        .collect();
    assert_eq!(left, [&json!("q1")]);
    assert_eq!(
        after["second"],
        json!({ "confirmed": false, "reference": "q2" })
    );
}

/// The runs a chat front end makes, as LangGraph's server takes them (observed side by
/// side with `langgraph dev` 0.16.7): a pause is a successful run on an interrupted
/// thread; a new input to a paused thread starts over and drops the interrupt; a run
/// with nothing to do runs nothing; a limit no route takes is an error; a second run
/// waits its turn; a cancelled run leaves its thread interrupted.
#[tokio::test]
async fn runs_on_a_thread_go_as_on_langgraphs_server() {
    let s = serve(&[
        "tests/fixtures/serve_cluster/steps.toml",
        "tests/fixtures/serve/spin.toml",
    ])
    .start()
    .await;
    let h = s.http();
    let wait = |body: Json| {
        let h = &h;
        async move { h.post("/threads/p/runs/wait", body).await }
    };
    let runs = || async { h.get("/threads/p/runs").await.json() };
    let thread_status = |t: &'static str| {
        let h = &h;
        async move { h.get(&format!("/threads/{t}")).await.json()["status"].clone() }
    };
    let history_len = || async {
        h.get("/threads/p/history?limit=1000")
            .await
            .json()
            .as_array()
            .map(Vec::len)
    };
    h.post("/threads", json!({ "thread_id": "p" })).await;

    // Paused: the run succeeded, the thread is interrupted.
    let paused = wait(json!({ "assistant_id": "steps", "input": { "input": "one" } })).await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    let first_interrupt = paused.json()["__interrupt__"][0]["id"].clone();
    assert_eq!(paused.json()["trail"], json!(["a:one", "b"]));
    assert_eq!(runs().await[0]["status"], "success");
    assert_eq!(thread_status("p").await, "interrupted");

    // A new input while paused: a new run from the entry, the interrupt dropped.
    let again = wait(json!({ "assistant_id": "steps", "input": { "input": "two" } })).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["trail"], json!(["a:one", "b", "a:two", "b"]));
    let second_interrupt = again.json()["__interrupt__"][0]["id"].clone();
    assert_ne!(second_interrupt, first_interrupt, "asked again");
    assert_eq!(thread_status("p").await, "interrupted");

    // Nothing to go on with: the run stands where the thread is, writing nothing.
    let before = history_len().await;
    let stay = wait(json!({ "assistant_id": "steps" })).await;
    assert_eq!(stay.status, 200, "{}", stay.text);
    assert_eq!(stay.json()["__interrupt__"][0]["id"], second_interrupt);
    assert_eq!(history_len().await, before);

    // Answered, then answered again: the second answer runs nothing.
    let done = wait(json!({ "assistant_id": "steps", "command": { "resume": "yes" } })).await;
    assert_eq!(
        done.json()["trail"],
        json!(["a:one", "b", "a:two", "b", "c:yes"])
    );
    assert_eq!(thread_status("p").await, "idle");
    let before = history_len().await;
    for body in [
        json!({ "assistant_id": "steps", "command": { "resume": "again" } }),
        json!({ "assistant_id": "steps", "input": null }),
    ] {
        let r = wait(body).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json()["trail"], done.json()["trail"]);
    }
    assert_eq!(history_len().await, before);
    let statuses: Vec<Json> = runs()
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, vec![json!("success"); 6], "newest first");

    // `command.goto`: an answer goes there instead of along the interrupt's edges; a
    // new run starts there; `__end__` writes the input and runs nothing.
    let g = |body: Json| {
        let h = &h;
        async move { h.post("/threads/g/runs/wait", body).await }
    };
    h.post("/threads", json!({ "thread_id": "g" })).await;
    g(json!({ "assistant_id": "steps", "input": { "input": "g" } })).await;
    let stay = g(json!({ "assistant_id": "steps", "command": { "goto": "c" } })).await;
    assert_eq!(stay.json()["trail"], json!(["a:g", "b"]), "still paused");
    assert!(stay.json()["__interrupt__"].is_array(), "{}", stay.text);
    let skipped =
        g(json!({ "assistant_id": "steps", "command": { "resume": "yes", "goto": "done" } })).await;
    assert_eq!(
        (&skipped.json()["trail"], &skipped.json()["answer"]),
        (&json!(["a:g", "b"]), &json!("yes")),
        "c skipped: {}",
        skipped.text
    );
    let at_c = g(
        json!({ "assistant_id": "steps", "input": { "input": "h" }, "command": { "goto": ["c"] } }),
    )
    .await;
    assert_eq!(at_c.json()["trail"], json!(["a:g", "b", "c:yes"]));
    let ended = g(json!({ "assistant_id": "steps", "input": { "input": "z" }, "command": { "goto": "__end__" } })).await;
    assert_eq!(
        (&ended.json()["input"], &ended.json()["trail"]),
        (&json!("z"), &json!(["a:g", "b", "c:yes"]))
    );
    let refused = g(json!({ "assistant_id": "steps", "command": { "goto": "cc" } })).await;
    assert_eq!(
        (refused.status, refused.json()),
        (
            422,
            json!({ "detail": "command.goto is refused: `cc` is not a node of the graph; did you mean `c`?" })
        )
    );
    let refused =
        g(json!({ "assistant_id": "steps", "command": { "goto": { "node": "c" } } })).await;
    assert_eq!(
        (refused.status, refused.json()),
        (
            422,
            json!({ "detail": "command.goto is a node's name (or `__end__`), not `{\"node\":\"c\"}`: a run goes to one node at a time" })
        )
    );

    // A limit no `on_limit` route takes: the run and the thread are in error.
    let limited = h
        .post(
            "/threads/l/runs/wait",
            json!({ "assistant_id": "steps", "input": { "input": "x" }, "config": { "recursion_limit": 1 }, "if_not_exists": "create" }),
        )
        .await;
    assert_eq!(
        limited.json(),
        json!({ "__error__": { "error": "RunError", "message": "the run reached its step limit (`max_steps`, `config.recursion_limit`) or another limit of the graph without finishing, and the graph has no `on_limit` route" } })
    );
    assert_eq!(h.get("/threads/l/runs").await.json()[0]["status"], "error");
    assert_eq!(thread_status("l").await, "error");
    assert_eq!(
        h.get("/threads/l").await.json()["error"],
        limited.json()["__error__"]
    );
    // A stateless run, which keeps no checkpoint, all the same.
    let stateless = h
        .post(
            "/runs/wait",
            json!({ "assistant_id": "steps", "input": { "input": "x" }, "config": { "recursion_limit": 1 } }),
        )
        .await;
    assert_eq!(stateless.json(), limited.json());

    // A second run on a busy thread waits its turn (`enqueue`); a cancelled run leaves
    // its thread interrupted, to go on from where it stopped.
    let first = h
        .post(
            "/threads/q/runs",
            json!({ "assistant_id": "spin", "input": { "label": "first" }, "if_not_exists": "create" }),
        )
        .await
        .json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    h.until(&format!("/threads/q/runs/{first}"), |r| {
        r["status"] == "running"
    })
    .await;
    let second = h
        .post(
            "/threads/q/runs",
            json!({ "assistant_id": "spin", "input": { "label": "second" } }),
        )
        .await;
    assert_eq!(second.status, 200, "{}", second.text);
    assert_eq!(
        (
            &second.json()["status"],
            &second.json()["multitask_strategy"]
        ),
        (&json!("pending"), &json!("enqueue"))
    );
    let second = second.json()["run_id"].as_str().unwrap().to_string();
    h.post(
        &format!("/threads/q/runs/{first}/cancel?wait=1"),
        Json::Null,
    )
    .await;
    assert_eq!(
        h.get(&format!("/threads/q/runs/{first}")).await.json()["status"],
        "interrupted"
    );
    h.until(&format!("/threads/q/runs/{second}"), |r| {
        r["status"] == "running"
    })
    .await;
    h.post(
        &format!("/threads/q/runs/{second}/cancel?wait=1"),
        Json::Null,
    )
    .await;
    assert_eq!(thread_status("q").await, "interrupted");
    // Named as LangGraph's server names a cancel, word for word.
    assert_eq!(
        h.get("/threads/q").await.json()["error"],
        json!({ "error": "UserInterrupt", "message": "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel" })
    );
}

/// `--strict-runs` refuses what LangGraph's server lets through, and changes nothing.
#[tokio::test]
async fn strict_runs_refuse_what_would_start_a_thread_over_or_answer_it_twice() {
    let s = serve(&["tests/fixtures/serve_cluster/steps.toml"])
        .arg("--strict-runs")
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "p" })).await;
    let wait = |body: Json| {
        let h = &h;
        async move { h.post("/threads/p/runs/wait", body).await }
    };
    wait(json!({ "assistant_id": "steps", "input": { "input": "one" } })).await;
    let paused = h.get("/threads/p/state").await.text;
    let refused = |r: super::server::Resp| (r.status, r.json()["detail"].clone());
    assert_eq!(
        refused(wait(json!({ "assistant_id": "steps", "input": { "input": "two" } })).await),
        (
            409,
            json!("thread `p` is paused at `ask`; resume it instead of starting a new run")
        )
    );
    assert_eq!(
        refused(wait(json!({ "assistant_id": "steps" })).await),
        (
            409,
            json!("thread `p` is paused at `ask`; answer it with `command: {\"resume\": ...}`")
        )
    );
    assert_eq!(
        refused(
            wait(json!({ "assistant_id": "steps", "input": { "input": "two" }, "command": { "goto": "b" } }))
                .await
        ),
        (
            409,
            json!("thread `p` is paused at `ask`; resume it instead of starting a new run")
        )
    );
    assert_eq!(h.get("/threads/p/state").await.text, paused);
    wait(json!({ "assistant_id": "steps", "command": { "resume": "yes" } })).await;
    assert_eq!(
        refused(wait(json!({ "assistant_id": "steps", "command": { "resume": "again" } })).await),
        (
            409,
            json!(
                "thread `p` is finished; only a paused (interrupted or stopped) thread can be resumed"
            )
        )
    );
    assert_eq!(
        h.get("/threads/p/runs")
            .await
            .json()
            .as_array()
            .map(Vec::len),
        Some(2),
        "refused runs are not recorded"
    );
}

/// An image attached in a chat front end (a LangChain content block) reaches the model
/// as the chat API's image part; a block the API has no part for is refused when the
/// input arrives, naming it, and nothing is recorded.
#[tokio::test]
async fn an_attached_image_reaches_the_model_and_an_unknown_block_is_refused() {
    let model = llm(&["A cat."]).await;
    let s = chat_server(&model).await;
    let h = s.http();
    let ask = |blocks: Json| {
        let h = &h;
        async move {
            h.post(
                "/threads/i/runs/wait",
                json!({
                    "assistant_id": "chat",
                    "if_not_exists": "create",
                    "input": {
                        "question": "What is in it?",
                        "messages": [{ "type": "human", "content": blocks }],
                    },
                }),
            )
            .await
        }
    };
    let refused = ask(json!([
        { "type": "text", "text": "Listen:" },
        { "type": "audio", "source_type": "base64", "mime_type": "audio/wav", "data": "UklG" },
    ]))
    .await;
    assert_eq!(
        (refused.status, refused.json()),
        (
            422,
            json!({ "detail": "input: field `messages`: message 1: content block 2 (`audio`) is not a kind the chat API takes (text, image, image_url, file)" })
        )
    );
    assert_eq!(h.get("/threads/i").await.status, 404, "nothing was made");
    let paused = ask(json!([
        { "type": "text", "text": "Look:" },
        { "type": "image", "source_type": "base64", "mime_type": "image/png", "data": "iVBORw0KGgo=", "metadata": { "name": "cat.png" } },
    ]))
    .await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    let sent = &model.seen()[0].body["messages"];
    assert_eq!(
        sent[0],
        json!({ "role": "user", "content": [
            { "type": "text", "text": "Look:" },
            { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0KGgo=" } },
        ] })
    );
    // The state keeps the blocks as the front end sent them, to show them back.
    assert_eq!(
        paused.json()["messages"][0]["content"][1]["metadata"],
        json!({ "name": "cat.png" })
    );
}

/// An `llm_chat` node's reply streams as text (never JSON) in `AIMessageChunk`s whose
/// id is the id of the AI message that then joins the conversation, with the model's
/// metadata and token counts, as LangChain's chat models write them.
#[tokio::test]
async fn a_chat_node_streams_its_reply_as_text_and_the_message_keeps_the_chunks_id() {
    let model = Llm::start(vec![Answer::Reply(Reply {
        content: Some("Paris is the capital of France.".into()),
        tool_calls: Vec::new(),
    })])
    .await;
    let s = serve(&["tests/fixtures/llm_chat/talk.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .start()
        .await;
    let h = s.http();
    let r = h
        .post(
            "/runs/stream",
            json!({
                "assistant_id": "talk",
                "input": { "messages": [{ "type": "human", "content": "Capital of France?" }] },
                "stream_mode": ["messages-tuple", "values"],
            }),
        )
        .await;
    let events = r.events();
    let chunks: Vec<&Json> = events
        .iter()
        .filter(|(e, _, _)| e == "messages")
        .map(|(_, d, _)| &d[0])
        .filter(|m| m["type"] == "AIMessageChunk")
        .collect();
    assert!(chunks.len() > 1, "streamed in pieces: {events:?}");
    let text: String = chunks
        .iter()
        .map(|c| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Paris is the capital of France.");
    let last = &events
        .iter()
        .rfind(|(e, _, _)| e == "values")
        .expect("values")
        .1["messages"];
    let reply = &last[1];
    assert!(chunks.iter().all(|c| c["id"] == reply["id"]), "{events:?}");
    assert_eq!(
        crate::util::without_made_ids(last.clone()),
        json!([
            { "role": "user", "content": "Capital of France?", "type": "human" },
            {
                "role": "assistant",
                "content": "Paris is the capital of France.",
                "additional_kwargs": {},
                "name": null,
                "tool_calls": [],
                "invalid_tool_calls": [],
                "response_metadata": { "model_name": "scripted", "finish_reason": "stop" },
                "usage_metadata": { "input_tokens": 26, "output_tokens": 8, "total_tokens": 34 },
                "type": "ai",
            },
        ])
    );
    // The model was sent the system prompt, rendered, and the conversation.
    assert_eq!(
        model.seen()[0].body["messages"],
        json!([
            { "role": "system", "content": "You are a brief assistant." },
            { "role": "user", "content": "Capital of France?" },
        ])
    );
}

/// The way `useStream` finds where a message was first seen in a thread's history and
/// the checkpoint before it (which its regenerate and edit run from).
fn parent_of_first_seen(history: &Json, content: &str) -> Json {
    let states = history.as_array().unwrap();
    let first = states
        .iter()
        .rev()
        .find(|s| {
            s["values"]["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["content"] == content))
        })
        .unwrap_or_else(|| panic!("`{content}` in no state"));
    first["parent_checkpoint"].clone()
}

#[tokio::test]
async fn regenerate_and_edit_fork_the_thread_where_the_message_was_first_seen() {
    let model = Llm::start(
        ["One.", "Two.", "Three.", "Four."]
            .into_iter()
            .map(|t| {
                Answer::Reply(Reply {
                    content: Some(t.into()),
                    tool_calls: Vec::new(),
                })
            })
            .collect(),
    )
    .await;
    let s = serve(&["tests/fixtures/llm_chat/talk.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "c" })).await;
    for text in ["Hi", "And?"] {
        let r = h
            .post(
                "/threads/c/runs/wait",
                json!({ "assistant_id": "talk", "input": say(text) }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let history = || async {
        h.post("/threads/c/history", json!({ "limit": 100 }))
            .await
            .json()
    };
    let before = history().await;
    let two_id = before[0]["values"]["messages"][3]["id"].clone();
    // Regenerate the second answer: from the checkpoint before it, no input.
    let from = parent_of_first_seen(&before, "Two.");
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "talk", "checkpoint": from }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(contents(&r.json()), ["Hi", "One.", "And?", "Three."]);
    let state = h.get("/threads/c/state").await.json();
    assert_eq!(contents(&state["values"]), ["Hi", "One.", "And?", "Three."]);
    assert_ne!(state["values"]["messages"][3]["id"], two_id, "a new reply");
    // Edit the first message: from the thread's first checkpoint (step -1, nothing
    // in it yet), a new input.
    let from = parent_of_first_seen(&history().await, "Hi");
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "talk", "input": say("Hello"), "checkpoint_id": from["checkpoint_id"] }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(contents(&r.json()), ["Hello", "Four."]);
    // Every branch stays, each checkpoint with its real parent, newest first.
    let after = history().await;
    let id = |v: &Json| -> String {
        v.as_str().map_or("-".into(), |s| {
            u64::from_str_radix(&s[24..], 16).unwrap().to_string()
        })
    };
    let tree: Vec<String> = after
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} <- {} {} {} {:?}",
                id(&s["checkpoint_id"]),
                id(&s["parent_checkpoint_id"]),
                s["metadata"]["source"].as_str().unwrap(),
                s["metadata"]["step"],
                contents(&s["values"]),
            )
        })
        .collect();
    assert_eq!(
        tree,
        [
            // The edit: a new input from the first checkpoint.
            r#"9 <- 8 loop 1 ["Hello", "Four."]"#,
            r#"8 <- 7 loop 0 ["Hello"]"#,
            r#"7 <- 0 input 0 []"#,
            // The regenerated answer: from before the model's step.
            r#"6 <- 4 loop 1 ["Hi", "One.", "And?", "Three."]"#,
            r#"5 <- 4 loop 1 ["Hi", "One.", "And?", "Two."]"#,
            r#"4 <- 3 loop 0 ["Hi", "One.", "And?"]"#,
            r#"3 <- 2 input 0 ["Hi", "One."]"#,
            r#"2 <- 1 loop 1 ["Hi", "One."]"#,
            r#"1 <- 0 loop 0 ["Hi"]"#,
            r#"0 <- - input -1 []"#,
        ],
    );
    // An earlier branch's state can still be read, and updated: the update forks.
    let two_end = after
        .as_array()
        .unwrap()
        .iter()
        .find(|s| contents(&s["values"]).last().map(String::as_str) == Some("Two."))
        .unwrap()["checkpoint_id"]
        .clone();
    let old = h
        .get(&format!("/threads/c/state/{}", two_end.as_str().unwrap()))
        .await
        .json();
    assert_eq!(contents(&old["values"]), ["Hi", "One.", "And?", "Two."]);
    let r = h
        .post(
            "/threads/c/state",
            json!({ "values": say("Noted"), "checkpoint_id": two_end }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let state = h.get("/threads/c/state").await.json();
    assert_eq!(
        contents(&state["values"]),
        ["Hi", "One.", "And?", "Two.", "Noted"]
    );
    assert_eq!(state["parent_checkpoint"]["checkpoint_id"], two_end);
    assert_eq!(state["metadata"]["source"], "update");
    // A run from the latest checkpoint is no fork: as any run without input on an
    // ended thread, it writes nothing.
    let latest = state["checkpoint_id"].clone();
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "talk", "checkpoint_id": latest }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(h.get("/threads/c/state").await.json(), state);
    assert_eq!(model.seen().len(), 4);
    // A command's update from an earlier checkpoint is written there first, and the
    // run goes on from it: the first answer's branch, a note, no model call (the
    // thread there had ended).
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "talk", "checkpoint_id": two_end, "command": { "update": say("Also noted") } }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let state = h.get("/threads/c/state").await.json();
    assert_eq!(
        contents(&state["values"]),
        ["Hi", "One.", "And?", "Two.", "Also noted"]
    );
    assert_eq!(state["parent_checkpoint"]["checkpoint_id"], two_end);
    assert_eq!(model.seen().len(), 4);
}

#[tokio::test]
async fn the_legacy_messages_mode_sends_whole_messages_as_langgraph_does() {
    let llm = llm(&["Four, as always."]).await;
    let s = chat_server(&llm).await;
    let h = s.http();
    let r = h
        .post(
            "/runs/stream",
            json!({ "assistant_id": "chat", "input": { "question": "2 + 2?" }, "stream_mode": "messages" }),
        )
        .await;
    let events: Vec<(String, Json)> = r.events().into_iter().map(|(e, d, _)| (e, d)).collect();
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    // The node `take` writes the question whole; `draft` streams its reply (the text
    // only), which LangGraph's server sends whole at each piece and never completes.
    assert_eq!(
        names,
        [
            "metadata",
            "messages/metadata",
            "messages/complete",
            "messages/metadata",
            "messages/partial",
        ]
    );
    let question = &events[2].1[0];
    assert_eq!(
        (&question["type"], &question["content"], &question["role"]),
        (&json!("human"), &json!("2 + 2?"), &json!("user"))
    );
    let question_id = question["id"].as_str().unwrap();
    assert_eq!(
        events[1].1[question_id]["metadata"]["langgraph_node"],
        "take"
    );
    let reply = &events[4].1[0];
    let reply_id = reply["id"].as_str().unwrap();
    assert_eq!(events[3].1[reply_id]["metadata"]["langgraph_node"], "draft");
    assert_eq!(
        reply,
        &json!({
            "content": "Four, as always.",
            "additional_kwargs": {},
            "response_metadata": {},
            "type": "ai",
            "name": null,
            "id": reply_id,
            "tool_calls": [],
            "invalid_tool_calls": [],
            "usage_metadata": null,
        })
    );
}

#[tokio::test]
async fn the_chat_agent_reads_freely_and_writes_with_an_agent_inbox_approval() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "Ship on Friday.").unwrap();
    let path = |f: &str| ws.path().join(f).display().to_string();
    let reply = |content: Option<&str>, calls: Vec<(String, String)>| {
        Answer::Reply(Reply {
            content: content.map(str::to_string),
            tool_calls: calls,
        })
    };
    let model = Llm::start(vec![
        reply(
            None,
            vec![(
                "read_text_file".into(),
                json!({ "path": path("notes.txt") }).to_string(),
            )],
        ),
        reply(Some("Your notes say: ship on Friday."), Vec::new()),
        reply(
            None,
            vec![(
                "write_file".into(),
                json!({ "path": path("plan.txt"), "content": "Friday" }).to_string(),
            )],
        ),
        reply(Some("Saved."), Vec::new()),
        reply(
            None,
            vec![(
                "write_file".into(),
                json!({ "path": path("other.txt"), "content": "x" }).to_string(),
            )],
        ),
        reply(Some("Then I will not write it."), Vec::new()),
    ])
    .await;
    let s = serve(&["graphs/chat_agent.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .env("OPENAI_API_KEY", "test")
        .env("CHAT_AGENT_WORKSPACE", ws.path().to_str().unwrap())
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "c" })).await;
    let run = |body: Json| {
        let h = &h;
        async move {
            let mut body = body;
            body["assistant_id"] = json!("chat_agent");
            let r = h.post("/threads/c/runs/wait", body).await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()
        }
    };
    // A read needs no approval: the tool's result joins the conversation, the model
    // answers from it.
    let out = run(json!({ "input": say("What do my notes say?") })).await;
    let messages = out["messages"].as_array().unwrap();
    let types: Vec<&str> = messages
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["human", "ai", "tool", "ai"]);
    assert_eq!(messages[1]["tool_calls"][0]["name"], "read_text_file");
    assert_eq!(
        messages[2]["tool_call_id"],
        messages[1]["tool_calls"][0]["id"]
    );
    // The server's text for the model, its structured result as the artifact (as
    // LangChain's MCP adapters write a tool message).
    assert_eq!(messages[2]["content"], "Ship on Friday.");
    assert_eq!(
        messages[2]["artifact"],
        json!({ "structured_content": { "content": "Ship on Friday." } })
    );
    assert_eq!(messages[2]["status"], "success");
    assert_eq!(messages[3]["content"], "Your notes say: ship on Friday.");
    // A write pauses with the call in the Agent Inbox's shape.
    let out = run(json!({ "input": say("Save 'Friday' to plan.txt") })).await;
    assert_eq!(
        out["__interrupt__"][0]["value"],
        json!({
            "action_requests": [{
                "name": "write_file",
                "args": { "path": path("plan.txt"), "content": "Friday" },
                "description": format!("Write {}", path("plan.txt")),
            }],
            "review_configs": [{ "action_name": "write_file", "allowed_decisions": ["approve", "edit", "reject"] }],
        })
    );
    assert!(!ws.path().join("plan.txt").exists(), "nothing written yet");
    // A decision that is not one is refused, and the thread still waits.
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "chat_agent", "command": { "resume": { "decisions": [{ "type": "maybe" }] } } }),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "chat_agent", "command": { "resume": { "decisions": [{ "type": "edit" }] } } }),
        )
        .await;
    assert_eq!(r.status, 422, "an edit says what: {}", r.text);
    // Edited, then made: the file holds the person's text.
    let out = run(json!({ "command": { "resume": { "decisions": [{
        "type": "edit",
        "edited_action": { "name": "write_file", "args": { "path": path("plan.txt"), "content": "Friday, 10:00" } },
    }] } } }))
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("plan.txt")).unwrap(),
        "Friday, 10:00"
    );
    let messages = out["messages"].as_array().unwrap();
    let last: Vec<&str> = messages[4..]
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(last, ["human", "ai", "tool", "ai"]);
    // The AI message kept its id and took the edited arguments.
    assert_eq!(
        messages[5]["tool_calls"][0]["args"]["content"],
        "Friday, 10:00"
    );
    assert_eq!(messages[7]["content"], "Saved.");
    // A message typed while the approval waits drops it (as on LangGraph's server):
    // the call it asked about is answered as not made when the model is asked again,
    // as the chat API wants every call answered.
    let out = run(json!({ "input": say("Write other.txt") })).await;
    assert!(out["__interrupt__"].is_array(), "{out}");
    let out = run(json!({ "input": say("No, leave it.") })).await;
    assert_eq!(
        out["messages"].as_array().unwrap().last().unwrap()["content"],
        "Then I will not write it."
    );
    assert!(!ws.path().join("other.txt").exists());
    let seen = model.seen();
    assert_eq!(seen.len(), 6);
    let sent = seen[5].body["messages"].as_array().unwrap();
    let n = sent.len();
    assert_eq!(
        sent[n - 3]["tool_calls"][0]["function"]["name"],
        "write_file"
    );
    assert_eq!(
        sent[n - 2],
        json!({ "role": "tool", "content": "This call was not made.", "tool_call_id": sent[n - 3]["tool_calls"][0]["id"] })
    );
    assert_eq!(
        sent[n - 1],
        json!({ "role": "user", "content": "No, leave it." })
    );
}

#[tokio::test]
async fn a_run_without_input_on_a_paused_thread_tells_its_state_then_its_interrupt() {
    let llm = llm(&["Hello."]).await;
    let s = chat_server(&llm).await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "p" })).await;
    let r = h
        .post(
            "/threads/p/runs/wait",
            json!({ "assistant_id": "chat", "input": { "question": "Hi?" } }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let before = h.get("/threads/p/state").await.json();
    let r = h
        .post(
            "/threads/p/runs/stream",
            json!({ "assistant_id": "chat", "input": null, "stream_mode": ["values"] }),
        )
        .await;
    let values: Vec<Json> = r
        .events()
        .into_iter()
        .filter(|(e, _, _)| e == "values")
        .map(|(_, d, _)| d)
        .collect();
    // As LangGraph's server sends them: the state, then the state with the interrupt
    // still waiting; nothing is written.
    assert_eq!(values.len(), 2, "{values:?}");
    assert_eq!(values[0], before["values"]);
    let mut with = before["values"].clone();
    with["__interrupt__"] = before["interrupts"].clone();
    assert_eq!(values[1], with);
    assert_eq!(h.get("/threads/p/state").await.json(), before);
}

/// A fork (a run from an earlier checkpoint, as regenerate sends it) while another run
/// is busy on the thread follows the multitask strategy like any run: refused without
/// a trace, queued behind the busy run and then forked, or taking over from it.
#[tokio::test]
async fn a_fork_while_the_thread_is_busy_follows_the_multitask_strategy() {
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let reply = |t: &str| {
        Answer::Reply(Reply {
            content: Some(t.into()),
            tool_calls: Vec::new(),
        })
    };
    let model = Llm::start(vec![
        reply("One."),
        Answer::Held(gate.clone(), Box::new(reply("Two."))),
        reply("Three."),
        Answer::Held(gate.clone(), Box::new(reply("Never sent."))),
        reply("Four."),
    ])
    .await;
    let s = serve(&["tests/fixtures/llm_chat/talk.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "c" })).await;
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "talk", "input": say("Hi") }),
        )
        .await;
    assert_eq!(contents(&r.json()), ["Hi", "One."]);
    let history = || async {
        h.post("/threads/c/history", json!({ "limit": 100 }))
            .await
            .json()
    };
    let regenerate = parent_of_first_seen(&history().await, "One.");
    // A second turn, held at the model.
    // Waits until the run has asked the model for its `asked`th answer.
    let busy = |text: &str, asked: usize| {
        let body = json!({ "assistant_id": "talk", "input": say(text) });
        let (h, model) = (&h, &model);
        async move {
            let run = h.post("/threads/c/runs", body).await.json()["run_id"]
                .as_str()
                .unwrap()
                .to_string();
            h.until(&format!("/threads/c/runs/{run}"), |r| {
                r["status"] == "running"
            })
            .await;
            while model.seen().len() < asked {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            run
        }
    };
    let second = busy("And?", 2).await;
    let fork = |strategy: &str| json!({ "assistant_id": "talk", "checkpoint": regenerate, "multitask_strategy": strategy });
    // Refused: nothing written, the busy run untouched.
    let before = history().await;
    let r = h.post("/threads/c/runs", fork("reject")).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["detail"],
        format!(
            "thread `c` is already running a task (run `{second}`); wait for it to finish, or choose another multitask_strategy (enqueue, interrupt, rollback)"
        )
    );
    assert_eq!(history().await, before);
    // Queued: it waits for the busy run, then regenerates from before "One.".
    let queued = h.post("/threads/c/runs", fork("enqueue")).await.json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        h.get(&format!("/threads/c/runs/{queued}")).await.json()["status"],
        "pending"
    );
    gate.notify_one();
    let out = h
        .get(&format!("/threads/c/runs/{queued}/join"))
        .await
        .json();
    assert_eq!(contents(&out), ["Hi", "Three."]);
    let second = h.get(&format!("/threads/c/runs/{second}")).await.json();
    assert_eq!(second["status"], "success");
    // Both branches stay: the busy run's turn, and the regenerated answer at the head.
    let after = history().await;
    assert!(
        after
            .as_array()
            .unwrap()
            .iter()
            .any(|s| contents(&s["values"]) == ["Hi", "One.", "And?", "Two."])
    );
    assert_eq!(contents(&after[0]["values"]), ["Hi", "Three."]);
    // Interrupting: the busy run stops, the fork goes from before "Three.".
    let regenerate = parent_of_first_seen(&after, "Three.");
    let third = busy("More?", 4).await;
    let r = h
        .post(
            "/threads/c/runs/wait",
            json!({ "assistant_id": "talk", "checkpoint": regenerate, "multitask_strategy": "interrupt" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(contents(&r.json()), ["Hi", "Four."]);
    let third = h.get(&format!("/threads/c/runs/{third}")).await.json();
    assert_eq!(third["status"], "interrupted");
    assert_eq!(model.seen().len(), 5);
}

/// On `messages-tuple`, as `useStream` reads it: a reply that calls a tool comes as
/// chunks of one id, its text then its calls (a whole message after the chunks would
/// be joined to them, its text said twice), the tool's answer as a tool message, then
/// the answer after it in chunks of text.
#[tokio::test]
async fn a_tool_calling_turn_streams_its_call_its_result_and_its_answer() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "Ship on Friday.").unwrap();
    let path = ws.path().join("notes.txt").display().to_string();
    let model = Llm::start(vec![
        Answer::Reply(Reply {
            content: Some("Let me look.".into()),
            tool_calls: vec![("read_text_file".into(), json!({ "path": path }).to_string())],
        }),
        Answer::Reply(Reply {
            content: Some("Your notes say: ship on Friday.".into()),
            tool_calls: Vec::new(),
        }),
    ])
    .await;
    let s = serve(&["graphs/chat_agent.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .env("OPENAI_API_KEY", "test")
        .env("CHAT_AGENT_WORKSPACE", ws.path().to_str().unwrap())
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "s" })).await;
    let r = h
        .post(
            "/threads/s/runs/stream",
            json!({ "assistant_id": "chat_agent", "input": say("What do my notes say?"), "stream_mode": ["messages-tuple"] }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Joined by LangGraph's own SDK as `useStream` joins them: the reply's text once,
    // with its call.
    let tuples: Vec<Json> = r
        .events()
        .into_iter()
        .filter(|(event, ..)| event == "messages")
        .map(|(_, data, _)| data)
        .collect();
    let joined = crate::serve::sdk::node_script("message_tuples.cjs", &Json::from(tuples)).await;
    let joined: Vec<Json> = joined
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            json!([
                m["type"],
                m["content"],
                m["tool_calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| json!([c["name"], c["args"]]))
                    .collect::<Vec<_>>()
            ])
        })
        .collect();
    assert_eq!(
        joined,
        [
            json!(["ai", "Let me look.", [["read_text_file", { "path": path }]]]),
            json!(["tool", "Ship on Friday.", []]),
            json!(["ai", "Your notes say: ship on Friday.", []]),
        ]
    );
    // Each message event: its type, its text, its calls' names, its id.
    let seen: Vec<(String, String, Vec<String>, String)> = r
        .events()
        .into_iter()
        .filter(|(event, ..)| event == "messages")
        .map(|(_, data, _)| {
            let m = &data[0];
            let calls = m["tool_calls"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .map(|c| c["name"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            (
                m["type"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
                calls,
                m["id"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let kinds: Vec<(&str, &str, Vec<&str>)> = seen
        .iter()
        .map(|(t, c, calls, _)| {
            (
                t.as_str(),
                c.as_str(),
                calls.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("AIMessageChunk", "Let me look.", vec![]),
            ("AIMessageChunk", "", vec!["read_text_file"]),
            ("tool", "Ship on Friday.", vec![]),
            ("AIMessageChunk", "Your notes say: ship ", vec![]),
            ("AIMessageChunk", "on Friday.", vec![]),
        ]
    );
    // The whole call message has the id its chunk had; the answer's chunks share one.
    assert_eq!(seen[0].3, seen[1].3);
    assert_eq!(seen[3].3, seen[4].3);
    assert_ne!(seen[1].3, seen[3].3);
    // The state holds the same messages under the same ids.
    let state = h.get("/threads/s/state").await.json();
    let ids: Vec<&str> = state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids[1], seen[1].3);
    assert_eq!(ids[3], seen[3].3);
}

/// The store API: items in namespaces, shared by every thread, as LangGraph's server
/// takes and answers them (`langgraph dev`, langgraph-api 0.16.7, observed side by
/// side): 204 for a put or a delete, `null` for a missing item, searches in the order
/// the items were made with `score: null`, namespaces sorted and cut to a depth.
#[tokio::test]
async fn the_store_keeps_items_in_namespaces_across_threads() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    let puts = [
        json!({"namespace": ["users", "u1"], "key": "prefs", "value": {"theme": "dark", "n": 3}}),
        json!({"namespace": ["users", "u1", "notes"], "key": "a", "value": {"text": "hi"}, "ttl": 5}),
        json!({"namespace": ["users", "u2"], "key": "prefs", "value": {"theme": "light", "n": 1}}),
        json!({"namespace": ["docs"], "key": "k10", "value": {"i": 10}, "index": false}),
    ];
    for body in puts {
        t.note(
            &format!("PUT /store/items {body}"),
            &h.put("/store/items", body.clone()).await,
        );
    }
    for (req, body) in [
        ("GET /store/items?namespace=users.u1&key=prefs", None),
        ("GET /store/items?namespace=users.u1&key=nope", None),
        ("GET /store/items?namespace=users.u1", None),
        ("GET /store/items?namespace=a..b&key=k", None),
        (
            "POST /store/items/search",
            Some(json!({"namespace_prefix": ["users"]})),
        ),
        (
            "POST /store/items/search",
            Some(
                json!({"namespace_prefix": ["users"], "filter": {"n": {"$gte": 2}, "theme": "dark"}, "limit": 1}),
            ),
        ),
        (
            "POST /store/items/search",
            Some(json!({"namespace_prefix": ["users"], "limit": 1, "offset": 1, "query": "notes"})),
        ),
        ("POST /store/items/search", Some(json!({}))),
        (
            "POST /store/items/search",
            Some(json!({"namespace_prefix": ["us"]})),
        ),
        (
            "POST /store/items/search",
            Some(json!({"filter": {"i": {"$in": [10]}}})),
        ),
        ("POST /store/namespaces", Some(json!({}))),
        (
            "POST /store/namespaces",
            Some(json!({"prefix": ["users"], "max_depth": 2})),
        ),
        (
            "POST /store/namespaces",
            Some(json!({"prefix": ["users", "*"], "suffix": ["notes"]})),
        ),
        (
            "POST /store/namespaces",
            Some(json!({"limit": 1, "offset": 1})),
        ),
    ] {
        let path = req.split_once(' ').unwrap().1;
        let r = match body.clone() {
            None => h.get(path).await,
            Some(b) => h.post(path, b).await,
        };
        let shown = body.map_or(req.to_string(), |b| format!("{req} {b}"));
        t.note(&shown, &r);
    }
    // Deleted, and deleted again: no error; the item is gone.
    let gone = json!({"namespace": ["users", "u2"], "key": "prefs"});
    for _ in 0..2 {
        t.note(
            &format!("DELETE /store/items {gone}"),
            &h.delete_with("/store/items", gone.clone()).await,
        );
    }
    t.note(
        "GET /store/items?namespace=users.u2&key=prefs",
        &h.get("/store/items?namespace=users.u2&key=prefs").await,
    );
    // Refused, with nothing written.
    for body in [
        json!({"namespace": ["a.b"], "key": "k", "value": {}}),
        json!({"namespace": [], "key": "k", "value": {}}),
        json!({"namespace": ["x", ""], "key": "k", "value": {}}),
        json!({"namespace": ["x"], "key": "k", "value": 3}),
        json!({"namespace": ["x"], "value": {}}),
        json!({"namespace": ["x"], "key": "k", "value": {}, "ttl": -1}),
    ] {
        t.note(
            &format!("PUT /store/items {body}"),
            &h.put("/store/items", body.clone()).await,
        );
    }
    t.note(
        "POST /store/namespaces {}",
        &h.post("/store/namespaces", json!({})).await,
    );
    // An item kept for 6 ms is gone 50 ms later.
    let brief = json!({"namespace": ["brief"], "key": "k", "value": {}, "ttl": 0.0001});
    t.note(
        &format!("PUT /store/items {brief}"),
        &h.put("/store/items", brief).await,
    );
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    t.note(
        "GET /store/items?namespace=brief&key=k",
        &h.get("/store/items?namespace=brief&key=k").await,
    );
    insta::assert_snapshot!(t.text());
}

/// A served graph's builtin `store` server and the store API are the same items: what a
/// run stores, a client reads, and what a client puts, the next run recalls.
#[tokio::test]
async fn a_graphs_builtin_store_and_the_store_api_share_their_items() {
    let s = serve(&["graphs/remember.toml"]).start().await;
    let h = s.http();
    let wait = |input: Json| {
        let h = h.clone();
        async move {
            h.post(
                "/runs/wait",
                json!({ "assistant_id": "remember", "input": input }),
            )
            .await
            .json()
        }
    };
    wait(json!({"user": "ann", "colour": "teal"})).await;
    let item = h
        .get("/store/items?namespace=users.ann&key=favourite_colour")
        .await
        .json();
    assert_eq!(
        (&item["namespace"], &item["value"]),
        (&json!(["users", "ann"]), &json!({"colour": "teal"}))
    );
    let put = h
        .put(
            "/store/items",
            json!({"namespace": ["users", "ann"], "key": "favourite_colour", "value": {"colour": "amber"}}),
        )
        .await;
    assert_eq!(put.status, 204);
    let recalled = wait(json!({"user": "ann"})).await;
    assert_eq!(recalled["known"], json!({"colour": "amber"}));
}

/// `POST /runs/cancel` and `POST /threads/prune`, as LangGraph's server answers them
/// (observed side by side): a cancel of runs by id or by status is 204 once they are
/// asked to stop, 404 when none is in flight; a prune deletes the threads that exist
/// (their runs cancelled first) or keeps only their latest checkpoint, and counts them.
#[tokio::test]
async fn runs_are_cancelled_and_threads_pruned_many_at_once() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    let start = |thread: &'static str, strategy: &'static str| {
        let h = h.clone();
        async move {
            h.post(
                &format!("/threads/{thread}/runs"),
                json!({ "assistant_id": "spin", "input": { "label": thread }, "if_not_exists": "create", "multitask_strategy": strategy }),
            )
            .await
            .json()["run_id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let status = |thread: &'static str, run: String| {
        let h = h.clone();
        async move {
            h.until(&format!("/threads/{thread}/runs/{run}"), |r| {
                r["status"] != "running" && r["status"] != "pending"
            })
            .await["status"]
                .clone()
        }
    };
    // By id: the running run and the one queued behind it, on their thread.
    let (a1, a2) = (start("a", "reject").await, start("a", "enqueue").await);
    let body = json!({ "thread_id": "a", "run_ids": [a2, "no-such-run"] });
    t.note(
        "POST /runs/cancel {thread_id: a, run_ids: [the queued run, no-such-run]}",
        &h.post("/runs/cancel", body).await,
    );
    assert_eq!(status("a", a2.clone()).await, "interrupted");
    // By status: every run running, whatever its thread.
    let b1 = start("b", "reject").await;
    // Running (not still pending) when the cancel of running runs comes.
    h.until(&format!("/threads/b/runs/{b1}"), |r| {
        r["status"] == "running"
    })
    .await;
    t.note(
        "POST /runs/cancel {status: running}",
        &h.post("/runs/cancel", json!({ "status": "running" })).await,
    );
    assert_eq!(status("a", a1.clone()).await, "interrupted");
    assert_eq!(status("b", b1).await, "interrupted");
    // Nothing in flight, and requests that choose no runs.
    for (req, body) in [
        (
            "POST /runs/cancel {status: all}",
            json!({ "status": "all" }),
        ),
        (
            "POST /runs/cancel {thread_id: a, run_ids: [the first run]}",
            json!({ "thread_id": "a", "run_ids": [a1] }),
        ),
        ("POST /runs/cancel {}", json!({})),
        (
            "POST /runs/cancel {status: bogus}",
            json!({ "status": "bogus" }),
        ),
        (
            "POST /runs/cancel {status: all, thread_id: a}",
            json!({ "status": "all", "thread_id": "a" }),
        ),
    ] {
        t.note(req, &h.post("/runs/cancel", body).await);
    }
    t.note(
        "POST /runs/cancel?action=bogus {status: all}",
        &h.post("/runs/cancel?action=bogus", json!({ "status": "all" }))
            .await,
    );
    // Prune: `a` down to its latest checkpoint; `b` (a run of it in flight) and a
    // thread that does not exist, deleted.
    let history = h.get("/threads/a/history?limit=100").await.json();
    assert!(history.as_array().unwrap().len() > 1);
    let values = h.get("/threads/a/state").await.json()["values"].clone();
    t.note(
        "POST /threads/prune {thread_ids: [a], strategy: keep_latest}",
        &h.post(
            "/threads/prune",
            json!({ "thread_ids": ["a"], "strategy": "keep_latest" }),
        )
        .await,
    );
    let history = h.get("/threads/a/history?limit=100").await.json();
    assert_eq!(history.as_array().unwrap().len(), 1);
    assert_eq!(h.get("/threads/a/state").await.json()["values"], values);
    start("b", "enqueue").await;
    for (req, body) in [
        (
            "POST /threads/prune {thread_ids: [b, nope]}",
            json!({ "thread_ids": ["b", "nope"] }),
        ),
        (
            "POST /threads/prune {thread_ids: []}",
            json!({ "thread_ids": [] }),
        ),
        ("POST /threads/prune {}", json!({})),
        (
            "POST /threads/prune {thread_ids: [a], strategy: bogus}",
            json!({ "thread_ids": ["a"], "strategy": "bogus" }),
        ),
    ] {
        t.note(req, &h.post("/threads/prune", body).await);
    }
    t.note("GET /threads/b", &h.get("/threads/b").await);
    insta::assert_snapshot!(t.text());
}

/// `POST /runs/batch`: stateless runs made in the background, as `POST /runs` makes
/// one; a batch with one run refused makes none, and the refusal names the run.
#[tokio::test]
async fn a_batch_of_runs_is_made_whole_or_not_at_all() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    let made = h
        .post(
            "/runs/batch",
            json!([
                { "assistant_id": "three", "input": { "input": "a" } },
                { "assistant_id": "three", "input": { "input": "b" }, "metadata": { "n": 2 } }
            ]),
        )
        .await;
    t.note("POST /runs/batch [three a, three b]", &made);
    let made = made.json();
    for run in made.as_array().unwrap_or_else(|| panic!("{made}")) {
        let id = run["run_id"].as_str().unwrap();
        let joined = h.get(&format!("/runs/{id}/join")).await.json();
        assert!(joined.get("__error__").is_none(), "{joined}");
    }
    for (req, body) in [
        ("POST /runs/batch []", json!([])),
        ("POST /runs/batch {}", json!({})),
        (
            "POST /runs/batch [spin, nope]",
            json!([{ "assistant_id": "spin", "input": {} }, { "assistant_id": "nope", "input": {} }]),
        ),
        (
            "POST /runs/batch [spin, spin with a field it does not have]",
            json!([{ "assistant_id": "spin", "input": {} }, { "assistant_id": "spin", "input": { "nope": 1 } }]),
        ),
        (
            "POST /runs/batch [spin, no assistant]",
            json!([{ "assistant_id": "spin", "input": {} }, { "input": {} }]),
        ),
        (
            "POST /runs/batch [spin, a body that does not fit]",
            json!([{ "assistant_id": "spin", "input": {} }, { "assistant_id": 3 }]),
        ),
    ] {
        t.note(req, &h.post("/runs/batch", body).await);
    }
    // None of the refused batches' runs was made: no spin is running.
    t.note(
        "POST /runs/cancel {status: all}",
        &h.post("/runs/cancel", json!({ "status": "all" })).await,
    );
    insta::assert_snapshot!(t.text());
}

/// `GET /threads/{id}/stream`: every run of the thread from then on, one after the
/// other, each in the stream modes it was made with and closed by a `run_done`
/// metadata event, as LangGraph's server streams a thread (observed side by side).
#[tokio::test]
async fn a_threads_stream_follows_each_of_its_runs_in_turn() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "t" })).await;
    assert_eq!(h.get("/threads/nope/stream").await.status, 404);
    let mut r = super::server::client()
        .get(h.url("/threads/t/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut ids = Vec::new();
    for (input, modes) in [("one", json!(["values", "updates"])), ("two", json!(null))] {
        let done = h
            .post(
                "/threads/t/runs/wait",
                json!({ "assistant_id": "three", "input": { "input": input }, "stream_mode": modes }),
            )
            .await;
        assert_eq!(done.status, 200);
    }
    for run in h.get("/threads/t/runs").await.json().as_array().unwrap() {
        ids.push(run["run_id"].as_str().unwrap().to_string());
    }
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while text.matches("run_done").count() < 2 {
        let chunk = tokio::time::timeout_at(deadline, r.chunk())
            .await
            .unwrap_or_else(|_| panic!("no two runs in the thread's stream: {text}"))
            .unwrap()
            .expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let mut scrub = super::server::Scrub::new();
    let events: Vec<String> = super::server::parse_sse(&text)
        .into_iter()
        .map(|(event, data, _)| format!("{event} {}", scrub.json(&data)))
        .collect();
    // Runs newest first in the list; the stream has the older first.
    let at = |id: &str| {
        text.find(id)
            .unwrap_or_else(|| panic!("run {id} not streamed"))
    };
    assert!(at(&ids[1]) < at(&ids[0]), "{text}");
    // The thread deleted, its stream ends.
    assert_eq!(h.delete("/threads/t").await.status, 204);
    let end = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while r.chunk().await.unwrap().is_some() {}
    })
    .await;
    assert!(end.is_ok(), "the stream of a deleted thread goes on");
    insta::assert_snapshot!(events.join("\n"));
}

/// A count in a body that is not one is refused in words, not in Rust's names for
/// integer types; a method an endpoint does not take is refused with a `detail` too.
#[tokio::test]
async fn a_negative_count_or_a_wrong_method_is_refused_in_words() {
    let s = serve(&["tests/fixtures/serve"]).start().await;
    let h = s.http();
    // A method an endpoint does not take: 405 with a detail, as LangGraph answers
    // `PATCH /threads/{id}/state` (its body: `{"detail": "Method Not Allowed"}`).
    let r = h.patch("/threads/t/state", json!({ "metadata": {} })).await;
    assert_eq!(
        (
            r.status,
            r.header("allow"),
            r.json()["detail"].as_str().unwrap()
        ),
        (
            405,
            Some("GET,HEAD,POST"),
            "`/threads/t/state` does not take PATCH; docs/server.md lists what each endpoint takes"
        )
    );
    let r = h.post("/threads/search", json!({ "offset": -5 })).await;
    assert_eq!(
        (r.status, r.json()["detail"].as_str().unwrap()),
        (
            422,
            "the request body does not fit: at `offset`: invalid value: integer `-5`, expected a whole number of 0 or more at line 1 column 12"
        )
    );
}

/// A reply whose stream breaks off is asked for again: on `messages-tuple` the text the
/// dead attempt streamed is taken back (a `remove` of its message id, as LangChain
/// takes a message back), so `useStream`, joining the chunks with LangGraph's own SDK,
/// ends with the second attempt's reply alone; the `custom` stream says `llm_retry`.
#[tokio::test]
async fn a_reply_streamed_again_after_a_cut_never_shows_the_dead_attempts_text() {
    let chunk = |content: &str| {
        json!({
            "id": "chatcmpl-cut", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{ "index": 0, "delta": { "role": "assistant", "content": content }, "finish_reason": null }]
        })
        .to_string()
    };
    let model = Llm::start(vec![
        Answer::Stream(vec![chunk("Your notes s"), chunk("ay: ship on")]),
        Answer::Reply(Reply {
            content: Some("Nothing to read.".into()),
            tool_calls: Vec::new(),
        }),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let s = serve(&["graphs/chat_agent.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .env("OPENAI_API_KEY", "test")
        .env("CHAT_AGENT_WORKSPACE", ws.path().to_str().unwrap())
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "r" })).await;
    let r = h
        .post(
            "/threads/r/runs/stream",
            json!({ "assistant_id": "chat_agent", "input": say("What do my notes say?"), "stream_mode": ["messages-tuple", "custom"] }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let events = r.events();
    let tuples: Vec<Json> = events
        .iter()
        .filter(|(event, ..)| event == "messages")
        .map(|(_, data, _)| data.clone())
        .collect();
    // What was sent: the dead attempt's two chunks, their removal, the new reply.
    let sent: Vec<(String, String)> = tuples
        .iter()
        .map(|t| {
            (
                t[0]["type"].as_str().unwrap().to_string(),
                t[0]["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let id = tuples[0][0]["id"].clone();
    assert!(tuples.iter().all(|t| t[0]["id"] == id), "{tuples:#?}");
    assert_eq!(
        sent[..3],
        [
            ("AIMessageChunk".to_string(), "Your notes s".to_string()),
            ("AIMessageChunk".to_string(), "ay: ship on".to_string()),
            ("remove".to_string(), String::new()),
        ]
    );
    let joined = crate::serve::sdk::node_script("message_tuples.cjs", &Json::from(tuples)).await;
    assert_eq!(
        joined,
        json!([{ "id": id, "type": "ai", "content": "Nothing to read.", "tool_calls": [] }])
    );
    let retries: Vec<Json> = events
        .iter()
        .filter(|(event, data, _)| event == "custom" && data["event"] == "llm_retry")
        .map(|(_, data, _)| {
            json!([
                data["node"],
                data["attempt"],
                data["discard"],
                data["error"]
            ])
        })
        .collect();
    assert_eq!(
        retries,
        [json!([
            "agent",
            1,
            true,
            "the connection to the server failed: the stream ended before the reply was complete"
        ])]
    );
    // The thread holds the reply once, under the id it streamed with.
    let state = h.get("/threads/r/state").await.json();
    let last = state["values"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (&last["content"], &last["id"]),
        (&json!("Nothing to read."), &id)
    );
}
