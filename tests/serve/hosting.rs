//! What a long-lived server does besides answering requests: it keeps a paused thread's
//! MCP servers, reloads edited graphs, caps and queues runs, stops cleanly on SIGTERM
//! and resumes what it left after a restart.

use super::server::{Http, Start, serve};
use crate::util::root;
use serde_json::{Value as Json, json};
use std::time::Duration;

/// The custom events of a streamed run (Switchyard's own), by name.
fn custom(events: &[(String, Json, Option<String>)]) -> Vec<Json> {
    events
        .iter()
        .filter(|(e, _, _)| e == "custom")
        .map(|(_, d, _)| d.clone())
        .collect()
}

fn pids(events: &[Json]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["event"] == "server_started")
        .filter_map(|e| e["pid"].as_u64())
        .collect()
}

fn alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
}

async fn stream(h: &Http, thread: &str, body: Json) -> Vec<(String, Json, Option<String>)> {
    let r = h
        .post(&format!("/threads/{thread}/runs/stream"), body)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.events()
}

#[tokio::test]
async fn a_paused_thread_keeps_its_mcp_server_until_it_is_idle_too_long() {
    let s = serve(&["tests/fixtures/serve_tools"])
        .arg("--mcp-idle")
        .arg("1500ms")
        .start()
        .await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "kept" })).await;
    let first = custom(
        &stream(
            &h,
            "kept",
            json!({ "assistant_id": "tools", "input": {}, "stream_mode": "custom" }),
        )
        .await,
    );
    let started = pids(&first);
    assert_eq!(started.len(), 1, "{first:?}");
    assert!(
        alive(started[0]),
        "the server runs on while the thread is paused"
    );
    // Resumed at once: the same server process answers the second call.
    let second = custom(
        &stream(&h, "kept", json!({ "assistant_id": "tools", "command": { "resume": true }, "stream_mode": "custom" }))
            .await,
    );
    assert_eq!(
        pids(&second),
        Vec::<u64>::new(),
        "no new server: {second:?}"
    );
    assert!(
        second
            .iter()
            .any(|e| e["event"] == "tool_call" && e["tool"] == "echo")
    );
    let said = h.get("/threads/kept/state").await.json()["values"]["said"].to_string();
    assert!(
        said.contains("Echo: before") && said.contains("Echo: after"),
        "{said}"
    );
    // The thread ended: its server stops with it.
    for _ in 0..100 {
        if !alive(started[0]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(started[0]), "a finished thread's server stops");

    // Paused longer than --mcp-idle: the server stops, and a new one answers the resume.
    h.post("/threads", json!({ "thread_id": "idle" })).await;
    let first = custom(
        &stream(
            &h,
            "idle",
            json!({ "assistant_id": "tools", "input": {}, "stream_mode": "custom" }),
        )
        .await,
    );
    let old = pids(&first)[0];
    for _ in 0..100 {
        if !alive(old) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(old), "an idle thread's server stops");
    let second = custom(
        &stream(&h, "idle", json!({ "assistant_id": "tools", "command": { "resume": true }, "stream_mode": "custom" }))
            .await,
    );
    let new = pids(&second);
    assert_eq!(new.len(), 1, "a new server for the resume: {second:?}");
    assert_ne!(new[0], old);
    assert_eq!(
        h.get("/threads/idle/state").await.json()["metadata"]["outcome"],
        "done"
    );
}

const ASK: &str = r#"
[graph]
name = "ask"
entry = "ask"

[state.answer]
type = "json"

[nodes.ask]
kind = "interrupt"
accept_any = true
payload = { version = "'VERSION'" }
output = "answer"
next = "done"

[nodes.done]
kind = "finalize"
outcome = "VERSION"
"#;

#[tokio::test]
async fn an_edited_graph_serves_new_threads_and_running_threads_keep_their_version() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ask.toml");
    write_whole(&file, ASK.replace("VERSION", "one")).unwrap();
    let s = serve(&[dir.path().to_str().unwrap()])
        .arg("--watch")
        .arg("50ms")
        .start()
        .await;
    let h = s.http();
    let wait = |t: &str| {
        let t = t.to_string();
        let h = h.clone();
        async move {
            h.post("/threads", json!({ "thread_id": t })).await;
            h.post(
                &format!("/threads/{t}/runs/wait"),
                json!({ "assistant_id": "ask", "input": {} }),
            )
            .await
            .json()
        }
    };
    assert_eq!(
        wait("old").await["__interrupt__"][0]["value"],
        json!({ "version": "one" })
    );
    let hash = |a: &Json| a["metadata"]["hash"].clone();
    let v1 = h.get("/assistants/ask").await.json();
    write_whole(&file, ASK.replace("VERSION", "two")).unwrap();
    let v2 = h.until("/assistants/ask", |a| a["version"] == 2).await;
    assert_ne!(hash(&v1), hash(&v2));
    assert_eq!(
        wait("new").await["__interrupt__"][0]["value"],
        json!({ "version": "two" })
    );
    let resume = |t: &str| {
        let t = t.to_string();
        let h = h.clone();
        async move {
            h.post(
                &format!("/threads/{t}/runs/wait"),
                json!({ "assistant_id": "ask", "command": { "resume": "yes" } }),
            )
            .await;
            h.get(&format!("/threads/{t}/state")).await.json()["metadata"]["outcome"].clone()
        }
    };
    assert_eq!(
        resume("old").await,
        "one",
        "a thread goes on on the version it started on"
    );
    assert_eq!(resume("new").await, "two");

    // A broken edit: the previous version serves on, and the assistant says why.
    write_whole(
        &file,
        ASK.replace("VERSION", "three")
            .replace("next = \"done\"", "next = \"gone\""),
    )
    .unwrap();
    let broken = h
        .until("/assistants/ask", |a| a["metadata"]["valid"] == false)
        .await;
    let problems = broken["metadata"]["problems"]
        .as_str()
        .unwrap()
        .replace(&dir.path().display().to_string(), "[dir]");
    insta::assert_snapshot!(problems, @r#"
    error: unknown node `gone`
       --> [dir]/ask.toml:14:8
       |
    14 | next = "gone"
       |        ^^^^^^ no node has this name
       |
       = help: did you mean `done`?

    error: node `done` is unreachable
       --> [dir]/ask.toml:16:8
       |
    16 | [nodes.done]
       |        ^^^^ no path from the entry `ask` leads here
       |
       = help: route to it from another node, or remove it
    "#);
    assert_eq!(broken["version"], 2);
    assert_eq!(hash(&broken), hash(&v2), "the last good version serves");
    assert_eq!(broken["diagnostics"][0]["message"], "unknown node `gone`");
    assert_eq!(
        wait("third").await["__interrupt__"][0]["value"],
        json!({ "version": "two" })
    );
    let notices = s.log_json();
    assert!(
        notices
            .iter()
            .any(|n| n["notice"] == "graph_invalid" && n["errors"] == 2),
        "the broken edit is logged: {notices:?}"
    );
    // Removed: no new threads.
    std::fs::remove_file(&file).unwrap();
    for _ in 0..200 {
        if h.get("/assistants/ask").await.status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(h.get("/assistants/ask").await.status, 404);
}

#[tokio::test]
async fn sigterm_stops_runs_at_a_boundary_and_a_restart_resumes_them() {
    let start = serve(&["tests/fixtures/serve/spin.toml"]);
    let store = format!("sqlite:{}", start.dir().join("store.db").display());
    let _dir = stop_and_restart(start, &store).await;

    // A restart that no longer serves the graph: the run fails, saying why. (With a
    // store servers share, it waits for a server that serves the graph instead.)
    let s = serve(&["tests/fixtures/serve/three.toml"])
        .store(&store)
        .start()
        .await;
    let runs = s.http().get("/threads/long/runs").await.json();
    assert_eq!(runs[0]["status"], "error");
    assert_eq!(
        runs[0]["error"],
        "the server restarted and no longer serves graph `spin`"
    );
}

#[tokio::test]
async fn a_server_on_postgres_resumes_after_a_restart_what_it_left() {
    let store = crate::postgres::database();
    let start = serve(&["tests/fixtures/serve/spin.toml"]).store(&store);
    stop_and_restart(start, &store).await;
}

/// A run stopped by SIGTERM, taken up by the next server on `store`; the first
/// server's directory, which holds a SQLite store.
async fn stop_and_restart(start: Start, store: &str) -> tempfile::TempDir {
    let s = start.start().await;
    let h = s.http();
    h.post("/threads", json!({ "thread_id": "long" })).await;
    let run = h
        .post(
            "/threads/long/runs",
            json!({ "assistant_id": "spin", "input": { "label": "x" } }),
        )
        .await
        .json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    h.until(&format!("/threads/long/runs/{run}"), |r| {
        r["status"] == "running"
    })
    .await;
    // Begun: it has checkpoints to go on from.
    h.until("/threads/long/state", |st| {
        st["values"]["n"].as_u64().unwrap_or(0) > 0
    })
    .await;
    let (code, log, dir) = s.terminate().await;
    assert_eq!(code, 0, "{log:?}");
    assert!(
        log.iter().any(|l| l.contains("\"notice\":\"stopped\"")),
        "{log:?}"
    );

    // The same store, a new process: the run goes on from its last checkpoint.
    let s = serve(&["tests/fixtures/serve/spin.toml"])
        .store(store)
        .start()
        .await;
    let h = s.http();
    let stopped_at = h.get("/threads/long/history?limit=1").await.json()[0]["values"]["n"]
        .as_u64()
        .unwrap();
    let resumed = h
        .until(&format!("/threads/long/runs/{run}"), |r| {
            r["status"] == "running"
        })
        .await;
    assert_eq!(resumed["kwargs"]["resumed_after_restart"], true);
    h.until("/threads/long/state", |st| {
        st["values"]["n"].as_u64().unwrap_or(0) > stopped_at
    })
    .await;
    assert!(
        s.log_json()
            .iter()
            .any(|n| n["notice"] == "run_recovered" && n["how"] == "resumed"),
        "{:?}",
        s.log_json()
    );
    let (code, _, _dir2) = s.terminate().await;
    assert_eq!(code, 0);
    dir
}

/// Threads `a` and `b`, and a `spin` run on `a` that holds a server's one slot (run
/// with `--max-runs 1`) until cancelled: its id.
async fn spin_in_the_one_slot(h: &super::server::Http) -> String {
    h.post("/threads", json!({ "thread_id": "a" })).await;
    h.post("/threads", json!({ "thread_id": "b" })).await;
    let a = h
        .post(
            "/threads/a/runs",
            json!({ "assistant_id": "spin", "input": {} }),
        )
        .await
        .json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    h.until(&format!("/threads/a/runs/{a}"), |r| {
        r["status"] == "running"
    })
    .await;
    a
}

#[tokio::test]
async fn runs_past_the_cap_wait_for_a_slot() {
    let s = serve(&["tests/fixtures/serve"])
        .arg("--max-runs")
        .arg("1")
        .start()
        .await;
    let h = s.http();
    let a = spin_in_the_one_slot(&h).await;
    let b = h
        .post(
            "/threads/b/runs",
            json!({ "assistant_id": "three", "input": { "input": "b" } }),
        )
        .await
        .json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.get(&format!("/threads/b/runs/{b}")).await.json()["status"],
        "pending",
        "no slot yet"
    );
    h.post(&format!("/threads/a/runs/{a}/cancel"), Json::Null)
        .await;
    let done = h
        .until(&format!("/threads/b/runs/{b}"), |r| {
            r["status"] == "success"
        })
        .await;
    assert_eq!(done["status"], "success");
}

/// A run created on an idle thread is checked, and what it will do decided, when it is
/// created; one that then waits for a slot while its graph is edited runs the version
/// served when its turn comes, as one decided at its turn would.
#[tokio::test]
async fn a_run_waiting_for_a_slot_runs_the_graph_served_when_its_turn_comes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ask.toml");
    write_whole(&file, ASK.replace("VERSION", "one")).unwrap();
    std::fs::copy(
        "tests/fixtures/serve/spin.toml",
        dir.path().join("spin.toml"),
    )
    .unwrap();
    let s = serve(&[dir.path().to_str().unwrap()])
        .arg("--max-runs")
        .arg("1")
        .arg("--watch")
        .arg("50ms")
        .start()
        .await;
    let h = s.http();
    let run_id = |r: Json| r["run_id"].as_str().unwrap().to_string();
    let a = spin_in_the_one_slot(&h).await;
    let b = run_id(
        h.post(
            "/threads/b/runs",
            json!({ "assistant_id": "ask", "input": {} }),
        )
        .await
        .json(),
    );
    write_whole(&file, ASK.replace("VERSION", "two")).unwrap();
    h.until("/assistants/ask", |a| a["version"] == 2).await;
    assert_eq!(
        h.get(&format!("/threads/b/runs/{b}")).await.json()["status"],
        "pending",
        "no slot yet"
    );
    h.post(&format!("/threads/a/runs/{a}/cancel"), Json::Null)
        .await;
    h.until(&format!("/threads/b/runs/{b}"), |r| {
        r["status"] == "success"
    })
    .await;
    assert_eq!(
        h.get("/threads/b/state").await.json()["tasks"][0]["interrupts"][0]["value"],
        json!({ "version": "two" })
    );
}

#[tokio::test]
async fn browsers_from_listed_origins_may_call_and_every_request_is_logged() {
    let s = serve(&["tests/fixtures/serve/three.toml"])
        .arg("--cors")
        .arg("http://page.test")
        .start()
        .await;
    let client = super::server::client();
    let preflight = |origin: &'static str| {
        client
            .request(reqwest::Method::OPTIONS, format!("{}/threads", s.url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type,x-api-key")
            .send()
    };
    let ok = preflight("http://page.test").await.unwrap();
    assert_eq!(
        ok.headers().get("access-control-allow-origin").unwrap(),
        "http://page.test"
    );
    let other = preflight("http://elsewhere.test").await.unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
    let r = client
        .post(format!("{}/threads", s.url))
        .header("origin", "http://page.test")
        .body("{}")
        .send()
        .await
        .unwrap();
    let exposed = r
        .headers()
        .get("access-control-expose-headers")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(exposed.contains("content-location"), "{exposed}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let access: Vec<Json> = s
        .log_json()
        .into_iter()
        .filter_map(|l| l.get("access").cloned())
        .filter(|a| a["path"] == "/threads")
        .collect();
    assert_eq!(access.len(), 3, "{access:?}");
    assert_eq!(access[2]["method"], "POST");
    assert_eq!(access[2]["status"], 200);
    assert!(access[2]["duration_us"].is_u64());
}

#[tokio::test]
async fn without_a_key_the_server_listens_only_on_loopback() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "serve",
            "tests/fixtures/serve/three.toml",
            "--listen",
            "0.0.0.0:0",
            "--store",
            "memory",
        ])
        .current_dir(root())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: refusing to listen on `0.0.0.0:0` without an API key: set one (--api-key-env or --api-key-file), listen on a loopback address, or pass --insecure\n"
    );
}

#[tokio::test]
async fn switchyard_run_stops_at_a_boundary_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "run",
            "tests/fixtures/serve/spin.toml",
            "--thread",
            "t",
            "--store",
            &store,
        ])
        .current_dir(root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("stopping at the next node boundary"),
        "{stderr}"
    );
    assert!(
        stderr.contains("resume with: switchyard resume tests/fixtures/serve/spin.toml --thread t"),
        "{stderr}"
    );
    let state = crate::util::switchyard(&["state", "--thread", "t", "--store", &store])
        .run()
        .code(0);
    let state: Json = serde_json::from_str(&state.stdout).unwrap();
    assert_eq!(state["status"], "stopped");
}

#[tokio::test]
async fn the_cap_on_mcp_servers_stops_the_idle_threads_and_sigterm_stops_them_all() {
    let s = serve(&["tests/fixtures/serve_tools"])
        .arg("--mcp-max-servers")
        .arg("1")
        .start()
        .await;
    let h = s.http();
    let mut pid = Vec::new();
    for thread in ["first", "second"] {
        h.post("/threads", json!({ "thread_id": thread })).await;
        let events = custom(
            &stream(
                &h,
                thread,
                json!({ "assistant_id": "tools", "input": {}, "stream_mode": "custom" }),
            )
            .await,
        );
        pid.push(pids(&events)[0]);
    }
    // The second thread's server took the only place: the first (idle) thread's went.
    assert!(
        !alive(pid[0]),
        "the idle thread's server was stopped for the cap"
    );
    assert!(alive(pid[1]));
    // The first thread goes on with a server of its own, fresh; the second's goes.
    let events = custom(
        &stream(&h, "first", json!({ "assistant_id": "tools", "command": { "resume": true }, "stream_mode": "custom" }))
            .await,
    );
    let again = pids(&events)[0];
    assert_ne!(again, pid[0]);
    assert!(!alive(pid[1]), "the second thread's idle server made room");
    h.post("/threads", json!({ "thread_id": "third" })).await;
    let events = custom(
        &stream(
            &h,
            "third",
            json!({ "assistant_id": "tools", "input": {}, "stream_mode": "custom" }),
        )
        .await,
    );
    let third = pids(&events)[0];
    let (code, log, _dir) = s.terminate().await;
    assert_eq!(code, 0, "{log:?}");
    assert!(
        !alive(third),
        "SIGTERM stops the paused thread's server too"
    );
}

/// A stateless run keeps no checkpoints, so a server that stops (or dies) before it
/// ends cannot go on with it, and starting it again could repeat what it did: it fails,
/// saying so, and its thread goes.
#[tokio::test]
async fn a_stateless_run_the_server_stops_or_loses_fails_rather_than_starting_again() {
    const WHY: &str = "the server stopped before this stateless run ended; a stateless run keeps no checkpoints to go on from, so it was not resumed: start it again";
    for how in ["sigterm", "sigkill"] {
        let start = serve(&["tests/fixtures/serve/spin.toml"]);
        let store = format!("sqlite:{}", start.dir().join("store.db").display());
        let s = start.start().await;
        let h = s.http();
        let created = h
            .post(
                "/runs",
                json!({ "assistant_id": "spin", "input": { "label": how } }),
            )
            .await
            .json();
        let (run, thread) = (
            created["run_id"].as_str().unwrap().to_string(),
            created["thread_id"].as_str().unwrap().to_string(),
        );
        h.until(&format!("/threads/{thread}/runs/{run}"), |r| {
            r["status"] == "running"
        })
        .await;
        // No checkpoints: the thread has no state to show while it runs.
        let state = h.get(&format!("/threads/{thread}/state")).await.json();
        assert_eq!(
            (&state["values"], &state["checkpoint"]),
            (&json!({}), &json!(null)),
            "{how}: {state}"
        );
        let dir = if how == "sigterm" {
            let (code, log, dir) = s.terminate().await;
            assert_eq!(code, 0, "{how}");
            // The run ends as it stops, saying why.
            let finished: Vec<Json> = log
                .iter()
                .filter_map(|l| serde_json::from_str::<Json>(l).ok())
                .filter(|n| n["notice"] == "run_finished")
                .collect();
            assert_eq!(finished.len(), 1, "{log:?}");
            assert_eq!(
                (
                    &finished[0]["run"],
                    &finished[0]["status"],
                    &finished[0]["error"]
                ),
                (&json!(run), &json!("error"), &json!(WHY)),
            );
            dir
        } else {
            s.kill().await
        };
        let s = serve(&["tests/fixtures/serve/spin.toml"])
            .store(&store)
            .start()
            .await;
        let h = s.http();
        // Whichever way it stopped, the run is not going on: its thread is gone.
        for _ in 0..200 {
            if h.get(&format!("/threads/{thread}")).await.status == 404 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(
            h.get(&format!("/threads/{thread}")).await.status,
            404,
            "{how}"
        );
        if how == "sigkill" {
            // The new process says what became of it.
            let notices = s.log_json();
            assert!(
                notices.iter().any(|n| n["notice"] == "run_recovered"
                    && n["run"] == json!(run)
                    && n["how"] == "failed"),
                "{notices:?}"
            );
            assert!(
                notices.iter().any(|n| n["notice"] == "run_finished"
                    && n["run"] == json!(run)
                    && n["status"] == "error"
                    && n["error"] == WHY),
                "{notices:?}"
            );
        }
        let (code, _, _) = s.terminate().await;
        assert_eq!(code, 0);
        drop(dir);
    }
}

/// A stateless run writes no checkpoints, unless it writes an update first: then the
/// update is kept for the run to start from, as on any thread.
#[tokio::test]
async fn a_stateless_run_with_an_update_starts_from_it() {
    let s = serve(&["tests/fixtures/serve/three.toml"]).start().await;
    let h = s.http();
    let plain = h
        .post(
            "/runs/wait",
            json!({ "assistant_id": "three", "input": { "input": "x" } }),
        )
        .await
        .json();
    assert_eq!(plain, json!({ "input": "x", "trail": ["a:x", "b"] }));
    let updated = h
        .post(
            "/runs/wait",
            json!({
                "assistant_id": "three",
                "input": { "input": "x" },
                "command": { "update": { "trail": ["before"] } }
            }),
        )
        .await
        .json();
    assert_eq!(
        updated,
        json!({ "input": "x", "trail": ["before", "a:x", "b"] })
    );
}

#[tokio::test]
async fn threads_that_ended_longer_ago_than_the_ttl_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ask.toml"), ASK.replace("VERSION", "one")).unwrap();
    let s = serve(&[
        "tests/fixtures/serve/three.toml",
        dir.path().to_str().unwrap(),
    ])
    .arg("--thread-ttl")
    .arg("300ms")
    .start()
    .await;
    let h = s.http();
    for (t, assistant, input) in [
        ("done", "three", json!({ "input": "x" })),
        ("paused", "ask", json!({})),
    ] {
        h.post("/threads", json!({ "thread_id": t })).await;
        let r = h
            .post(
                &format!("/threads/{t}/runs/wait"),
                json!({ "assistant_id": assistant, "input": input }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    // The finished thread goes once its time is up; the paused one has not ended.
    for _ in 0..200 {
        if h.get("/threads/done").await.status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(h.get("/threads/done").await.status, 404);
    assert_eq!(h.get("/threads/done/state").await.status, 404);
    assert_eq!(
        h.get("/threads/paused/state").await.json()["next"],
        json!(["ask"])
    );
    let expired: Vec<Json> = s
        .log_json()
        .into_iter()
        .filter(|n| n["notice"] == "thread_expired")
        .collect();
    assert_eq!(
        expired,
        [json!({ "notice": "thread_expired", "thread": "done" })]
    );
}

/// Writes `text` to `path` as editors do, whole (a temporary file renamed over it): the
/// watcher must not read a half-written file and report what is not there.
fn write_whole(path: &std::path::Path, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Two files that declare one graph name: the server does not start, naming both; a
/// file that comes to declare a name another serves is refused, naming both, and the
/// one serving goes on.
#[tokio::test]
async fn two_files_with_one_graph_name_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.toml"), ASK.replace("VERSION", "a")).unwrap();
    std::fs::write(dir.path().join("b.toml"), ASK.replace("VERSION", "b")).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--store", "memory", "--listen", "127.0.0.1:0"])
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).replace(&dir.path().display().to_string(), "[dir]"),
        "error: graph `ask` is declared by both `[dir]/a.toml` and `[dir]/b.toml`; give one of them another `[graph] name`\n"
    );

    // On a reload, the one serving goes on.
    std::fs::remove_file(dir.path().join("b.toml")).unwrap();
    let s = serve(&[dir.path().to_str().unwrap()])
        .arg("--watch")
        .arg("50ms")
        .start()
        .await;
    let h = s.http();
    write_whole(&dir.path().join("b.toml"), ASK.replace("VERSION", "b")).unwrap();
    let mut said = None;
    for _ in 0..400 {
        said = s
            .log_json()
            .into_iter()
            .find(|n| n["notice"] == "graph_invalid");
        if said.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let said = said.expect("the second file is reported");
    assert_eq!(
        said["rendered"]
            .as_str()
            .unwrap()
            .replace(&dir.path().display().to_string(), "[dir]"),
        "error: graph `ask` is already served from `[dir]/a.toml`; give this graph another `[graph] name`\n"
    );
    assert!(said["path"].as_str().unwrap().ends_with("b.toml"));
    let a = h.get("/assistants/ask").await.json();
    assert!(a["metadata"]["file"].as_str().unwrap().ends_with("a.toml"));
    assert_eq!(a["metadata"]["valid"], true);
    let run = h
        .post("/runs/wait", json!({ "assistant_id": "ask", "input": {} }))
        .await
        .json();
    assert_eq!(run["__interrupt__"][0]["value"], json!({ "version": "a" }));
}

/// A reload moves a paused thread to the edited version when nothing where it stands
/// changed (it then meets the edit on its way on); one paused at an edited node stays
/// on its version. The edit's changes are served for the page.
#[tokio::test]
async fn a_reload_moves_the_threads_the_edit_leaves_alone_and_pins_the_others() {
    let text =
        std::fs::read_to_string(crate::util::root().join("tests/fixtures/diff/two_asks.toml"))
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two_asks.toml");
    write_whole(&file, text.replace("VERSION", "one")).unwrap();
    let s = serve(&[dir.path().to_str().unwrap()])
        .arg("--watch")
        .arg("50ms")
        .start()
        .await;
    let h = s.http();
    let run = |t: &str, body: Json| {
        let t = t.to_string();
        let h = h.clone();
        async move {
            h.post(&format!("/threads/{t}/runs/wait"), body)
                .await
                .json()
        }
    };
    let start = json!({ "assistant_id": "two_asks", "input": {} });
    let answer = json!({ "assistant_id": "two_asks", "command": { "resume": 1 } });
    for t in ["moves", "stays"] {
        h.post("/threads", json!({ "thread_id": t })).await;
        assert_eq!(
            run(t, start.clone()).await["__interrupt__"][0]["value"],
            json!({ "q": "first" })
        );
    }
    assert_eq!(
        run("stays", answer.clone()).await["__interrupt__"][0]["value"],
        json!({ "q": "second one" })
    );
    assert_eq!(
        h.get("/assistants/two_asks/details").await.json()["changes"],
        json!([])
    );
    write_whole(&file, text.replace("VERSION", "two")).unwrap();
    let details = h
        .until("/assistants/two_asks/details", |d| d["version"] == 2)
        .await;
    assert_eq!(
        details["changes"],
        json!([
            "~ node `done`: outcome: \"one\" -> \"two\"",
            "~ node `second`: payload.q: \"'second one'\" -> \"'second two'\"",
        ])
    );
    // At `first`, which the edit left alone: on to the edited `second`, and its outcome.
    assert_eq!(
        run("moves", answer.clone()).await["__interrupt__"][0]["value"],
        json!({ "q": "second two" })
    );
    run("moves", answer.clone()).await;
    assert_eq!(
        h.get("/threads/moves/state").await.json()["metadata"]["outcome"],
        "two"
    );
    // At `second`, which the edit changed: on the version it paused on.
    run("stays", answer.clone()).await;
    assert_eq!(
        h.get("/threads/stays/state").await.json()["metadata"]["outcome"],
        "one"
    );
}

/// A graph file that does not validate is checked again when a file it reads or names
/// changes (a missing prompt appearing), not at every poll.
#[test]
fn an_invalid_graph_is_checked_again_only_when_its_files_change() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("asks.toml"),
        r#"[graph]
name = "asks"
entry = "plan"

[state.note]
type = "object?"

[nodes.plan]
kind = "llm_structured"
prompt = "prompt.j2"
schema = "thought.json"
output = "note"
next = "END"
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("thought.json"),
        r#"{"type": "object", "properties": {"idea": {"type": "string"}}, "required": ["idea"], "additionalProperties": false}"#,
    )
    .unwrap();
    let graphs = switchyard::host::Graphs::load(vec![dir.path().to_path_buf()]);
    assert!(graphs.get("asks").unwrap().current.is_none());
    assert_eq!(graphs.reload(), 0, "nothing changed: not checked again");
    assert_eq!(graphs.reload(), 0);
    std::fs::write(dir.path().join("prompt.j2"), "Plan.\n").unwrap();
    assert_eq!(graphs.reload(), 1, "the missing prompt appeared");
    assert!(graphs.get("asks").unwrap().current.is_some());
    assert_eq!(graphs.reload(), 0);
    // A file it names that is there but refused (not JSON): mended, it is seen.
    std::fs::write(dir.path().join("thought.json"), "{ not json").unwrap();
    assert_eq!(graphs.reload(), 1);
    assert!(graphs.get("asks").unwrap().problems.is_some());
    assert_eq!(graphs.reload(), 0, "still broken, not checked again");
    std::fs::write(
        dir.path().join("thought.json"),
        r#"{"type": "object", "properties": {"idea": {"type": "string"}}, "required": ["idea"], "additionalProperties": false}"#,
    )
    .unwrap();
    assert_eq!(graphs.reload(), 1, "the schema was mended");
    assert!(graphs.get("asks").unwrap().problems.is_none());
}
