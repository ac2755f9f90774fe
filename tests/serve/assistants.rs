//! Assistants through `switchyard serve`: made, changed, versioned and deleted as on
//! LangGraph's server (exact answers), each refusal changing nothing; a run of one
//! runs its graph with its constants' values, the run's own over them, every wrong
//! value refused naming the field; they outlive a restart.

use super::server::serve;
use crate::serve::{Transcript, note_paged};
use serde_json::{Value as Json, json};

const FIXTURES: &str = "tests/fixtures/serve_assistants";

#[tokio::test]
async fn assistants_are_made_changed_versioned_and_deleted_as_on_langgraphs_server() {
    let s = serve(&[FIXTURES]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    t.note(
        "GET /assistants/greet/schemas",
        &h.get("/assistants/greet/schemas").await,
    );
    let made = [
        json!({"graph_id": "greet", "context": {"GREETING": "Hi"}, "metadata": {"team": "a"},
               "name": "mine", "description": "d"}),
        json!({"graph_id": "greet", "config": {"configurable": {"MAX_STEPS": 3, "user": "u1"},
               "tags": ["t1"]}}),
        json!({"graph_id": "plain", "assistant_id": "11111111222233334444555555555555"}),
        json!({"graph_id": "plain", "assistant_id": "11111111-2222-3333-4444-555555555555",
               "if_exists": "do_nothing", "name": "ignored"}),
    ];
    let mut ids = Vec::new();
    for body in made {
        let r = h.post("/assistants", body.clone()).await;
        ids.push(r.json()["assistant_id"].as_str().unwrap().to_string());
        t.note(&format!("POST /assistants {body}"), &r);
    }
    let mine = format!("/assistants/{}", ids[0]);
    t.note(&format!("GET {mine}"), &h.get(&mine).await);
    // Each change a new version: the configuration replaced, the metadata merged.
    for body in [
        json!({"context": {"GREETING": "Yo"}, "metadata": {"x": 1}}),
        json!({"name": "n2", "config": {"configurable": {"MAX_STEPS": 4}}}),
        json!({}),
    ] {
        t.note(&format!("PATCH {mine} {body}"), &h.patch(&mine, body).await);
    }
    for body in [
        json!({}),
        json!({"metadata": {"x": 1}, "limit": 1}),
        json!({"limit": 2, "offset": 1}),
    ] {
        t.note(
            &format!("POST {mine}/versions {body}"),
            &h.post(&format!("{mine}/versions"), body).await,
        );
    }
    // Back to version 1, whose configuration runs use again.
    t.note(
        &format!("POST {mine}/latest {{\"version\": 1}}"),
        &h.post(&format!("{mine}/latest"), json!({"version": 1}))
            .await,
    );
    for body in [
        json!({"select": ["assistant_id", "name", "version"]}),
        json!({"graph_id": "greet", "select": ["assistant_id"]}),
        json!({"name": "MIN", "select": ["assistant_id", "name"]}),
        json!({"metadata": {"team": "a"}, "select": ["assistant_id"]}),
        json!({"sort_by": "name", "sort_order": "asc", "select": ["name"], "limit": 2}),
        json!({"sort_by": "name", "select": ["name"], "limit": 2, "offset": 2}),
    ] {
        note_paged(
            &mut t,
            &format!("POST /assistants/search {body}"),
            &h.post("/assistants/search", body).await,
        );
    }
    t.note(
        "POST /assistants/count {\"graph_id\": \"plain\"}",
        &h.post("/assistants/count", json!({"graph_id": "plain"}))
            .await,
    );
    // Refused, each changing nothing.
    let refusals = [
        ("POST", "/assistants".to_string(), json!({"name": "x"})),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "nope"}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "greet", "context": {"MAX_STEPS": "x"}}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "greet", "context": {"MAX_STEP": 2}}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "greet", "config": {"configurable": {"GREETING": 7}}}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "greet", "context": {"GREETING": "a"},
                   "config": {"configurable": {"MAX_STEPS": 1}}}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "greet", "context": "str"}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "plain", "assistant_id": "11111111-2222-3333-4444-555555555555"}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "plain", "assistant_id": "not-a-uuid"}),
        ),
        (
            "POST",
            "/assistants".to_string(),
            json!({"graph_id": "plain", "if_exists": "update"}),
        ),
        (
            "PATCH",
            mine.clone(),
            json!({"context": {"GREETING": false}}),
        ),
        ("PATCH", mine.clone(), json!({"graph_id": "nope"})),
        // Its configuration does not fit the other graph, which has no constants.
        ("PATCH", mine.clone(), json!({"graph_id": "plain"})),
        (
            "PATCH",
            "/assistants/greet".to_string(),
            json!({"name": "x"}),
        ),
        (
            "PATCH",
            "/assistants/00000000-0000-4000-8000-000000000000".to_string(),
            json!({"name": "x"}),
        ),
        ("POST", format!("{mine}/latest"), json!({"version": 99})),
        ("POST", format!("{mine}/latest"), json!({})),
        ("POST", format!("{mine}/latest"), json!({"version": "1"})),
        ("POST", format!("{mine}/versions"), json!({"limit": 0})),
        (
            "POST",
            format!("{mine}/versions"),
            json!({"metadata": {"nomatch": true}}),
        ),
        (
            "POST",
            "/assistants/search".to_string(),
            json!({"sort_by": "version"}),
        ),
        (
            "POST",
            "/assistants/search".to_string(),
            json!({"graph_id": "nope"}),
        ),
        (
            "POST",
            "/assistants/search".to_string(),
            json!({"select": ["bogus"]}),
        ),
    ];
    for (method, path, body) in refusals {
        let r = match method {
            "POST" => h.post(&path, body.clone()).await,
            _ => h.patch(&path, body.clone()).await,
        };
        t.note(&format!("{method} {path} {body}"), &r);
    }
    t.note(&format!("GET {mine}"), &h.get(&mine).await);
    t.note(
        &format!("POST {mine}/versions {{\"limit\": 1}}"),
        &h.post(&format!("{mine}/versions"), json!({"limit": 1}))
            .await,
    );
    // Deleted once; the graph files' are the files'.
    for path in [mine.clone(), mine.clone(), "/assistants/greet".to_string()] {
        t.note(&format!("DELETE {path}"), &h.delete(&path).await);
    }
    t.note(&format!("GET {mine}"), &h.get(&mine).await);
    insta::assert_snapshot!(t.text());
}

/// What a run answers: `answer` of the state at its end.
async fn answer(h: &super::server::Http, body: Json) -> (u16, Json) {
    let r = h.post("/runs/wait", body).await;
    let j = r.json();
    (r.status, j.get("answer").cloned().unwrap_or(j))
}

#[tokio::test]
async fn a_run_of_an_assistant_uses_its_configuration_and_the_runs_own_over_it() {
    let s = serve(&[FIXTURES]).start().await;
    let h = s.http();
    let made = h
        .post(
            "/assistants",
            json!({"graph_id": "greet", "context": {"GREETING": "Hi"},
                   "metadata": {"team": "a"}}),
        )
        .await
        .json();
    let id = made["assistant_id"].as_str().unwrap().to_string();
    let q = |more: Json| {
        let mut body = json!({"assistant_id": id, "input": {"question": "q"}});
        body.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        body
    };
    let cases = [
        (json!({}), json!("Hi q 5")),
        (json!({"context": {"MAX_STEPS": 9}}), json!("Hi q 9")),
        (json!({"context": {"GREETING": "Run"}}), json!("Run q 5")),
        (
            json!({"config": {"configurable": {"MAX_STEPS": 7, "user": "u"}}}),
            json!("Hi q 7"),
        ),
        // No input sets a configurable value, nor a constant, nor a field the graph
        // does not take as input.
        (
            json!({"input": {"question": "q", "GREETING": "Hi"}}),
            json!({"detail": "the input is refused: `GREETING` is configurable: a run's configuration gives it (`context` or `config.configurable`; `switchyard run --context`), not its input"}),
        ),
        (
            json!({"input": {"question": "q", "SEPARATOR": "-"}}),
            json!({"detail": "the input is refused: `SEPARATOR` is a constant of graph `greet`: no run sets it (declare it under `[configurable]` to let a run choose it)"}),
        ),
        (
            json!({"input": {"question": "q", "answr": "-"}}),
            json!({"detail": "the input is refused: `answr` is not an input of graph `greet` (its inputs: `question`)"}),
        ),
        (
            json!({"context": {"MAX_STEPS": "x"}}),
            json!({"detail": "context.MAX_STEPS: `MAX_STEPS` is a configurable `int` of graph `greet`, and \"x\" is not one"}),
        ),
        (
            json!({"context": {"MAX_STEPS": 50}}),
            json!({"detail": "context.MAX_STEPS: `MAX_STEPS` of graph `greet`: 50 is above its most, 10"}),
        ),
        (
            json!({"context": {"GREETING": "Howdy"}}),
            json!({"detail": "context.GREETING: `GREETING` of graph `greet`: \"Howdy\" is not one of \"Hello\", \"Hi\", \"Yo\", \"Run\", \"Kept\", \"Kept2\""}),
        ),
        (
            json!({"context": {"MAX_STEP": 1}}),
            json!({"detail": "context.MAX_STEP: graph `greet` has no configurable `MAX_STEP`; did you mean `MAX_STEPS`? (its configurable values: `GREETING`, `MAX_STEPS`)"}),
        ),
        (
            json!({"context": {"SEPARATOR": "-"}}),
            json!({"detail": "context.SEPARATOR: `SEPARATOR` is a constant of graph `greet`, not configurable (declare it under `[configurable]` to let a run choose it)"}),
        ),
        (
            json!({"config": {"configurable": {"GREETING": 1}}}),
            json!({"detail": "config.configurable.GREETING: `GREETING` is a configurable `string` of graph `greet`, and 1 is not one"}),
        ),
        (
            json!({"context": {"MAX_STEPS": 1}, "config": {"configurable": {"GREETING": "C"}}}),
            json!({"detail": "Cannot specify both configurable and context. Prefer setting context alone. Context was introduced in LangGraph 0.6.0 and is the long term planned replacement for configurable."}),
        ),
    ];
    let mut got = Vec::new();
    for (more, _) in &cases {
        got.push(answer(&h, q(more.clone())).await.1);
    }
    let want: Vec<Json> = cases.iter().map(|(_, w)| w.clone()).collect();
    assert_eq!(got, want);
    // A run's result is the graph's output alone.
    assert_eq!(
        h.post(
            "/runs/wait",
            json!({"assistant_id": id, "input": {"question": "q"}})
        )
        .await
        .json(),
        json!({"answer": "Hi q 5"})
    );
    // The graph's own assistant runs with the graph's values.
    assert_eq!(
        answer(
            &h,
            json!({"assistant_id": "greet", "input": {"question": "q"}})
        )
        .await,
        (200, json!("Hello q 5"))
    );
    // On a thread: the run and the thread name the assistant; the run's metadata
    // starts from the assistant's; a thread's next run takes the configuration again.
    let thread = h.post("/threads", json!({})).await.json()["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    let run = h
        .post(
            &format!("/threads/{thread}/runs/wait"),
            json!({"assistant_id": id, "input": {"question": "t"}, "context": {"MAX_STEPS": 2}}),
        )
        .await;
    assert_eq!(run.json()["answer"], json!("Hi t 2"));
    let runs = h.get(&format!("/threads/{thread}/runs")).await.json();
    assert_eq!(runs[0]["assistant_id"], json!(id));
    assert_eq!(runs[0]["metadata"]["team"], json!("a"));
    assert_eq!(
        runs[0]["kwargs"]["config"]["configurable"],
        json!({"GREETING": "Hi", "MAX_STEPS": 2})
    );
    let meta = h.get(&format!("/threads/{thread}")).await.json()["metadata"].clone();
    assert_eq!(
        (&meta["graph_id"], &meta["assistant_id"]),
        (&json!("greet"), &json!(id))
    );
    let again = h
        .post(
            &format!("/threads/{thread}/runs/wait"),
            json!({"assistant_id": id, "input": {"question": "u"}}),
        )
        .await;
    assert_eq!(again.json()["answer"], json!("Hi u 5"));
    // A refused run leaves the thread as it was.
    let before = h.get(&format!("/threads/{thread}/state")).await.json();
    let refused = h
        .post(
            &format!("/threads/{thread}/runs"),
            json!({"assistant_id": id, "input": {"question": "v"}, "context": {"GREETING": 3}}),
        )
        .await;
    assert_eq!(refused.status, 422);
    assert_eq!(
        h.get(&format!("/threads/{thread}/state")).await.json(),
        before
    );
    // Deleted with its threads.
    let gone = h
        .delete(&format!("/assistants/{id}?delete_threads=true"))
        .await;
    assert_eq!(gone.status, 204);
    assert_eq!(h.get(&format!("/threads/{thread}")).await.status, 404);
    let (status, _) = answer(&h, q(json!({}))).await;
    assert_eq!(status, 404);
}

/// Made assistants are the store's: a restarted server serves them as they were.
#[tokio::test]
async fn assistants_outlive_a_restart() {
    let first = serve(&[FIXTURES]).start().await;
    let h = first.http();
    let id = h
        .post(
            "/assistants",
            json!({"graph_id": "greet", "context": {"GREETING": "Kept"}}),
        )
        .await
        .json()["assistant_id"]
        .as_str()
        .unwrap()
        .to_string();
    h.patch(
        &format!("/assistants/{id}"),
        json!({"context": {"GREETING": "Kept2"}}),
    )
    .await;
    let before = h.get(&format!("/assistants/{id}")).await.json();
    let (_, _, dir) = first.terminate().await;
    let db = format!("sqlite:{}", dir.path().join("store.db").display());
    let second = serve(&[FIXTURES]).store(&db).start().await;
    let h = second.http();
    assert_eq!(h.get(&format!("/assistants/{id}")).await.json(), before);
    assert_eq!(
        answer(&h, json!({"assistant_id": id, "input": {"question": "q"}})).await,
        (200, json!("Kept2 q 5"))
    );
    let versions = h
        .post(&format!("/assistants/{id}/versions"), json!({}))
        .await
        .json();
    assert_eq!(versions.as_array().map(Vec::len), Some(2));
    drop(dir);
}

/// A cron of a made assistant, with a configuration of its own: each run uses the
/// assistant's values with the cron's over them (the cron's `cron_id` in
/// `config.configurable` configures nothing, so it does not clash with `context`); a
/// change to the cron is taken; deleting the assistant deletes its crons.
#[tokio::test]
async fn a_cron_of_a_made_assistant_runs_with_its_configuration() {
    let s = serve(&[FIXTURES]).start().await;
    let h = s.http();
    let id = h
        .post(
            "/assistants",
            json!({"graph_id": "greet", "context": {"GREETING": "Yo"}}),
        )
        .await
        .json()["assistant_id"]
        .as_str()
        .unwrap()
        .to_string();
    let cron = h
        .post(
            "/runs/crons",
            json!({"assistant_id": id, "schedule": "* * * * * *", "input": {"question": "cron"},
                   "context": {"MAX_STEPS": 2}, "on_run_completed": "keep"}),
        )
        .await;
    assert_eq!(cron.status, 200, "{}", cron.text);
    let cron_id = cron.json()["cron_id"].as_str().unwrap().to_string();
    let changed = h
        .patch(
            &format!("/runs/crons/{cron_id}"),
            json!({"metadata": {"by": "test"}}),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    let mut fired = None;
    for _ in 0..100 {
        fired = s
            .log_json()
            .into_iter()
            .find(|l| l["notice"] == "cron_fired" || l["notice"] == "cron_failed");
        if fired.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let fired = fired.expect("the cron fired");
    assert_eq!(fired["notice"], "cron_fired", "{fired}");
    let thread = fired["thread"].as_str().unwrap();
    let run = fired["run"].as_str().unwrap();
    let result = h
        .get(&format!("/threads/{thread}/runs/{run}/join"))
        .await
        .json();
    assert_eq!(result, json!({"answer": "Yo cron 2"}));
    assert_eq!(h.delete(&format!("/assistants/{id}")).await.status, 204);
    assert_eq!(h.get(&format!("/runs/crons/{cron_id}")).await.status, 404);
}

/// An input the graph's contract refuses is refused when the run is asked for, even
/// when the run would write an update first or wait behind another: nothing written.
#[tokio::test]
async fn a_refused_input_is_refused_before_an_update_is_written() {
    let s = serve(&[FIXTURES]).start().await;
    let h = s.http();
    let thread = h.post("/threads", json!({})).await.json()["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    h.post(
        &format!("/threads/{thread}/runs/wait"),
        json!({"assistant_id": "greet", "input": {"question": "a"}}),
    )
    .await;
    let before = h.get(&format!("/threads/{thread}/history")).await.json();
    let refused = h
        .post(
            &format!("/threads/{thread}/runs"),
            json!({"assistant_id": "greet", "input": {"question": "b", "SEPARATOR": "-"},
                   "command": {"update": {"question": "c"}}}),
        )
        .await;
    assert_eq!(refused.status, 422);
    assert_eq!(
        refused.json()["detail"],
        "the input is refused: `SEPARATOR` is a constant of graph `greet`: no run sets it (declare it under `[configurable]` to let a run choose it)"
    );
    assert_eq!(
        h.get(&format!("/threads/{thread}/history")).await.json(),
        before
    );
}

/// The `values` mode streams the graph's output, as LangGraph streams its output
/// schema: no part for a step that writes none of it (the input's here), and the
/// output fields alone; `updates` still tells each node's writes.
#[tokio::test]
async fn the_values_mode_streams_the_graphs_output() {
    let s = serve(&[FIXTURES]).start().await;
    let r = s
        .http()
        .post(
            "/runs/stream",
            json!({"assistant_id": "greet", "input": {"question": "q"},
                   "stream_mode": ["values", "updates"]}),
        )
        .await;
    let parts: Vec<(String, Json)> = r
        .events()
        .into_iter()
        .filter(|(event, _, _)| event != "metadata")
        .map(|(event, data, _)| (event, data))
        .collect();
    assert_eq!(
        parts,
        [
            (
                "updates".to_string(),
                json!({"answer": {"answer": "Hello q 5", "seen": 1}})
            ),
            ("values".to_string(), json!({"answer": "Hello q 5"})),
        ]
    );
}
