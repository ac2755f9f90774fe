//! Several `switchyard serve` processes on one Postgres database: a run created
//! through one is driven by whichever claims it, and followed, answered, cancelled
//! and refused through any; a worker killed mid-run loses nothing.

use super::server::{Serve, serve};
use serde_json::json;
use std::time::Duration;

const ASK: &str = r#"
[graph]
name = "ask"
entry = "ask"

[state.answer]
type = "json"

[nodes.ask]
kind = "interrupt"
accept_any = true
payload = { question = "'go on?'" }
output = "answer"
next = "done"

[nodes.done]
kind = "finalize"
outcome = "answered"
response = "{{ answer }}"
"#;

/// Two servers (three with `n = 3`) sharing `db`, with a short lease.
async fn workers(db: &str, n: usize, dir: &std::path::Path) -> Vec<Serve> {
    std::fs::write(dir.join("ask.toml"), ASK).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            serve(&[
                "tests/fixtures/serve/spin.toml",
                "tests/fixtures/serve/three.toml",
                dir.to_str().unwrap(),
            ])
            .store(db)
            .arg("--run-lease")
            .arg("1s")
            .start()
            .await,
        );
    }
    out
}

/// One value from the database, as text.
fn sql(db: &str, query: &str) -> String {
    let (db, query) = (db.to_string(), query.to_string());
    std::thread::spawn(move || {
        let row = crate::postgres::connect(&db)
            .query_one(&query, &[])
            .unwrap();
        row.get::<_, String>(0)
    })
    .join()
    .unwrap()
}

#[tokio::test]
async fn servers_on_one_database_share_runs_streams_answers_and_cancels() {
    let db = crate::postgres::database();
    let dir = tempfile::tempdir().unwrap();
    let w = workers(&db, 2, dir.path()).await;
    let (a, b) = (w[0].http(), w[1].http());

    // A run waited for through one server, whichever drives it.
    a.post("/threads", json!({ "thread_id": "t1" })).await;
    let done = b
        .post(
            "/threads/t1/runs/wait",
            json!({ "assistant_id": "three", "input": { "input": "x" } }),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert_eq!(done.json()["trail"], json!(["a:x", "b"]));

    // A run started through one pauses; the other joins it and answers it.
    let run = a
        .post(
            "/threads/t2/runs",
            json!({ "assistant_id": "ask", "input": {}, "if_not_exists": "create" }),
        )
        .await
        .json();
    let rid = run["run_id"].as_str().unwrap().to_string();
    let joined = b.get(&format!("/threads/t2/runs/{rid}/join")).await;
    assert_eq!(
        joined.json()["__interrupt__"][0]["value"],
        json!({ "question": "go on?" }),
        "{}",
        joined.text
    );
    let answered = b
        .post(
            "/threads/t2/runs/wait",
            json!({ "assistant_id": "ask", "command": { "resume": "yes" } }),
        )
        .await;
    assert_eq!(answered.json()["answer"], json!("yes"), "{}", answered.text);
    let state = a.get("/threads/t2/state").await.json();
    assert_eq!(state["metadata"]["outcome"], json!("answered"));

    // A long run: streamed and cancelled through the server it was not sent to, and
    // a second run on its thread refused by either.
    let run = a
        .post(
            "/threads/t3/runs",
            json!({ "assistant_id": "spin", "input": { "label": "s" }, "if_not_exists": "create" }),
        )
        .await
        .json();
    let rid = run["run_id"].as_str().unwrap().to_string();
    b.until(&format!("/threads/t3/runs/{rid}"), |r| {
        r["status"] == "running"
    })
    .await;
    let refused = b
        .post(
            "/threads/t3/runs",
            json!({ "assistant_id": "spin", "input": {} }),
        )
        .await;
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert!(refused.text.contains(&rid), "{}", refused.text);
    let cancel = {
        let b = b.clone();
        let rid = rid.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            b.post(&format!("/threads/t3/runs/{rid}/cancel"), json!({}))
                .await
        })
    };
    let stream = b
        .get(&format!(
            "/threads/t3/runs/{rid}/stream?stream_mode=updates"
        ))
        .await;
    assert_eq!(cancel.await.unwrap().status, 202);
    let events = stream.events();
    assert_eq!(events[0].0, "metadata", "{}", stream.text);
    let ticks = events
        .iter()
        .filter(|(name, _, _)| name == "updates")
        .count();
    assert!(ticks > 3, "{}", stream.text);
    let ended = a
        .until(&format!("/threads/t3/runs/{rid}"), |r| {
            r["status"] != "running"
        })
        .await;
    assert_eq!(ended["status"], "interrupted");
    // The thread is free again, through either server.
    let next = a
        .post(
            "/threads/t3/runs",
            json!({ "assistant_id": "spin", "input": {}, "multitask_strategy": "reject" }),
        )
        .await;
    assert_eq!(next.status, 200, "{}", next.text);
    let next = next.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        b.post(
            &format!("/threads/t3/runs/{next}/cancel?action=rollback"),
            json!({})
        )
        .await
        .status,
        202
    );
    b.until("/threads/t3/runs", |runs| {
        runs.as_array().is_some_and(|r| r.len() == 1)
    })
    .await;
}

#[tokio::test]
async fn a_worker_killed_mid_run_loses_nothing() {
    let db = crate::postgres::database();
    let dir = tempfile::tempdir().unwrap();
    let mut w = workers(&db, 2, dir.path()).await;
    let a = w[0].http();
    let run = a
        .post(
            "/threads/k/runs",
            json!({ "assistant_id": "spin", "input": { "label": "k" }, "if_not_exists": "create" }),
        )
        .await
        .json();
    let rid = run["run_id"].as_str().unwrap().to_string();
    a.until("/threads/k/state", |s| {
        s["values"]["n"].as_u64().unwrap_or(0) > 50
    })
    .await;
    // Which one drives it: killed without a chance to say anything.
    let worker = sql(
        &db,
        &format!("SELECT worker FROM switchyard.runs WHERE id = '{rid}'"),
    );
    let driver = w
        .iter()
        .position(|s| worker.contains(&format!(":{}:", s.pid())))
        .unwrap_or_else(|| panic!("no server is {worker}"));
    let killed = w.remove(driver);
    std::process::Command::new("kill")
        .args(["-KILL", &killed.pid().to_string()])
        .status()
        .unwrap();
    let survivor = w.remove(0);
    let h = survivor.http();
    let at_kill = h.get("/threads/k/state").await.json()["values"]["n"]
        .as_u64()
        .unwrap();
    // Its lease runs out and the survivor goes on from the last checkpoint.
    h.until("/threads/k/state", |s| {
        s["values"]["n"].as_u64().unwrap_or(0) > at_kill + 50
    })
    .await;
    assert!(
        survivor
            .log_json()
            .iter()
            .any(|n| n["notice"] == "run_recovered"
                && n["run"] == json!(rid)
                && n["how"] == "resumed"),
        "{:?}",
        survivor.log_json()
    );
    let worker = sql(
        &db,
        &format!("SELECT worker FROM switchyard.runs WHERE id = '{rid}'"),
    );
    assert!(
        worker.contains(&format!(":{}:", survivor.pid())),
        "{worker}"
    );
    // Every step once: the checkpoints count up without a gap or a repeat.
    h.post(&format!("/threads/k/runs/{rid}/cancel"), json!({}))
        .await;
    let ended = h
        .until(&format!("/threads/k/runs/{rid}"), |r| {
            r["status"] != "running"
        })
        .await;
    assert_eq!(ended["status"], "interrupted");
    let n = h.get("/threads/k/state").await.json()["values"]["n"]
        .as_u64()
        .unwrap();
    let steps = sql(
        &db,
        "SELECT (count(*) FILTER (WHERE node = 'tick'))::text FROM switchyard.checkpoints WHERE thread = 'k'",
    );
    assert_eq!(steps, n.to_string(), "one record per tick, none twice");
}
