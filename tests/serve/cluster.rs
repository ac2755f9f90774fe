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

/// Runs asked of two servers at once for one idle thread, `reject` each: one is taken,
/// the others refused naming it, whichever server each went to.
#[tokio::test]
async fn a_thread_takes_one_run_however_many_servers_are_asked_at_once() {
    let db = crate::postgres::database();
    let dir = tempfile::tempdir().unwrap();
    let w = workers(&db, 2, dir.path()).await;
    let (a, b) = (w[0].http(), w[1].http());
    a.post("/threads", json!({ "thread_id": "race" })).await;
    let asks = (0..8).map(|i| {
        let h = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move {
            h.post(
                "/threads/race/runs",
                json!({ "assistant_id": "spin", "input": { "label": "r" }, "multitask_strategy": "reject" }),
            )
            .await
        }
    });
    let answers = futures_util::future::join_all(asks).await;
    let taken: Vec<String> = answers
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.json()["run_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        taken.len(),
        1,
        "{:?}",
        answers.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    for r in answers.iter().filter(|r| r.status != 200) {
        assert_eq!(r.status, 409, "{}", r.text);
        assert!(r.text.contains(&taken[0]), "{}", r.text);
    }
    let runs = a.get("/threads/race/runs").await.json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    a.post(
        &format!("/threads/race/runs/{}/cancel", taken[0]),
        json!({}),
    )
    .await;
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
    // A person's edit through one server is the state the other shows.
    let updated = b
        .post(
            "/threads/t2/state",
            json!({ "values": { "answer": "edited" } }),
        )
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(
        a.get("/threads/t2/state").await.json()["values"]["answer"],
        json!("edited")
    );

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
            json!({ "assistant_id": "spin", "input": {}, "multitask_strategy": "reject" }),
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
    let killed = w.remove(driver_of(&db, &rid, &w));
    signal(killed.pid(), "-KILL");
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

/// A request that may find its server killed: the status and JSON body, or None.
async fn try_send(
    client: &reqwest::Client,
    url: &str,
    body: Option<serde_json::Value>,
) -> Option<(u16, serde_json::Value)> {
    let req = match body {
        Some(b) => client
            .post(url)
            .header("content-type", "application/json")
            .body(b.to_string()),
        None => client.get(url),
    };
    let r = tokio::time::timeout(Duration::from_secs(10), req.send())
        .await
        .ok()?
        .ok()?;
    let status = r.status().as_u16();
    let text = tokio::time::timeout(Duration::from_secs(10), r.text())
        .await
        .ok()?
        .ok()?;
    Some((status, serde_json::from_str(&text).unwrap_or_default()))
}

/// The servers a load balancer would send to: any live one, changing as they die.
#[derive(Clone)]
struct Balancer {
    urls: std::sync::Arc<std::sync::RwLock<Vec<String>>>,
    client: reqwest::Client,
}

impl Balancer {
    /// Sends to server `pick` (modulo how many there are), trying the next one while
    /// a server does not answer.
    async fn send(
        &self,
        pick: usize,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        for attempt in 0..400 {
            let url = {
                let urls = self.urls.read().unwrap();
                format!("{}{path}", urls[(pick + attempt) % urls.len()])
            };
            if let Some(r) = try_send(&self.client, &url, body.clone()).await {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no server answered {path}");
    }

    /// Polls `path` until `done` holds (30 s at most).
    async fn until(&self, pick: usize, path: &str, done: impl Fn(&serde_json::Value) -> bool) {
        for i in 0..1_000 {
            let (status, body) = self.send(pick + i, path, None).await;
            if status == 200 && done(&body) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        panic!(
            "{path} never got there: {:?}",
            self.send(pick, path, None).await
        );
    }
}

/// One thread of the fault test: started, paused at its question, answered, done;
/// each request sent again (to whichever server answers) until it took, and never
/// twice: a run is created only when the thread does not show it yet.
async fn drive_steps(lb: &Balancer, i: usize) {
    let t = format!("f{i}");
    let runs_path = format!("/threads/{t}/runs");
    lb.send(
        i,
        "/threads",
        Some(json!({ "thread_id": t, "if_exists": "do_nothing" })),
    )
    .await;
    let runs = |n: usize| {
        let lb = lb.clone();
        let path = runs_path.clone();
        async move {
            let (status, body) = lb.send(i, &path, None).await;
            status == 200 && body.as_array().is_some_and(|r| r.len() >= n)
        }
    };
    while !runs(1).await {
        lb.send(
            i,
            &runs_path,
            Some(json!({ "assistant_id": "steps", "input": { "input": t } })),
        )
        .await;
    }
    lb.until(i, &format!("/threads/{t}/state"), |s| {
        s["next"] == json!(["ask"])
    })
    .await;
    while !runs(2).await {
        lb.send(
            i + 1,
            &runs_path,
            Some(json!({ "assistant_id": "steps", "command": { "resume": format!("yes-{t}") } })),
        )
        .await;
    }
    lb.until(i, &format!("/threads/{t}/state"), |s| {
        s["metadata"]["outcome"] == json!("done")
    })
    .await;
}

/// A thread's checkpoints as `node:status` in order, from the database.
fn history_line(db: &str, thread: &str) -> String {
    sql(
        db,
        &format!(
            "SELECT string_agg(coalesce(node, '-') || ':' || status || ':' || source, ' ' ORDER BY seq) FROM switchyard.checkpoints WHERE thread = '{thread}'"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_killed_at_random_finish_every_run_once() {
    const THREADS: usize = 300;
    let db = crate::postgres::database();
    // The balancer sends a request again when its server died before answering: the
    // strict rules refuse the copy that comes after the first went through, where
    // LangGraph's would start the thread over or answer it twice.
    let start = || {
        serve(&["tests/fixtures/serve_cluster/steps.toml"])
            .store(&db)
            .arg("--run-lease")
            .arg("1s")
            .arg("--strict-runs")
            .start()
    };
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(start().await);
    }
    let lb = Balancer {
        urls: std::sync::Arc::new(std::sync::RwLock::new(
            workers.iter().map(|w| w.http().url("")).collect(),
        )),
        client: reqwest::Client::new(),
    };
    // The same thread in a single process, undisturbed: what every thread must match.
    drive_steps(&lb, 100_000).await;
    let reference = history_line(&db, "f100000");

    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let (done, lb) = (done.clone(), lb.clone());
        let db = db.clone();
        tokio::spawn(async move {
            let mut kills = 0;
            let mut graveyard = Vec::new();
            let mut seed: u64 = 0x5eed;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                tokio::time::sleep(Duration::from_millis(300 + (seed >> 33) % 500)).await;
                let victim = ((seed >> 40) % 3) as usize;
                let pid = workers[victim].pid();
                std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .unwrap();
                kills += 1;
                let fresh = serve(&["tests/fixtures/serve_cluster/steps.toml"])
                    .store(&db)
                    .arg("--run-lease")
                    .arg("1s")
                    .arg("--strict-runs")
                    .start()
                    .await;
                lb.urls.write().unwrap()[victim] = fresh.http().url("");
                graveyard.push(std::mem::replace(&mut workers[victim], fresh));
            }
            graveyard.extend(workers);
            (kills, graveyard)
        })
    };
    use futures_util::StreamExt;
    futures_util::stream::iter(0..THREADS)
        .for_each_concurrent(24, |i| {
            let lb = lb.clone();
            async move { drive_steps(&lb, i).await }
        })
        .await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (kills, all) = killer.await.unwrap();
    assert!(kills >= 3, "only {kills} workers were killed");
    // Runs were taken over from the killed: the test tried what it says.
    let taken_over = all
        .iter()
        .flat_map(|w| w.log_json())
        .filter(|n| n["notice"] == "run_recovered")
        .count();
    assert!(taken_over > 0, "no run was taken over in {kills} kills");
    eprintln!("{kills} workers killed, {taken_over} runs taken over");

    // Every thread: two runs, each ended once, the same state and history as the one
    // that ran undisturbed.
    for i in 0..THREADS {
        let t = format!("f{i}");
        let (_, runs) = lb.send(i, &format!("/threads/{t}/runs"), None).await;
        let statuses = super::server::statuses(&runs);
        // The first paused at its interrupt: a run that did what it was asked.
        assert_eq!(statuses, ["success", "success"], "{t}: {runs}");
        let (_, state) = lb.send(i, &format!("/threads/{t}/state"), None).await;
        assert_eq!(
            state["values"]["trail"],
            json!([format!("a:{t}"), "b", format!("c:yes-{t}")]),
            "{t}"
        );
        assert_eq!(history_line(&db, &t), reference, "{t}");
    }
}

/// A spin run on one worker goes on through `cut` (its connections dropped, or the
/// database restarted): n keeps counting, and the run ends only when cancelled.
async fn goes_on_through(db: &str, cut: impl FnOnce()) {
    let dir = tempfile::tempdir().unwrap();
    let w = workers(db, 1, dir.path()).await;
    let h = w[0].http();
    let run = h
        .post(
            "/threads/c/runs",
            json!({ "assistant_id": "spin", "input": { "label": "c" }, "if_not_exists": "create" }),
        )
        .await
        .json();
    let rid = run["run_id"].as_str().unwrap().to_string();
    h.until("/threads/c/state", |s| {
        s["values"]["n"].as_u64().unwrap_or(0) > 20
    })
    .await;
    cut();
    let after = h.get("/threads/c/state").await.json()["values"]["n"]
        .as_u64()
        .unwrap();
    h.until("/threads/c/state", |s| {
        s["values"]["n"].as_u64().unwrap_or(0) > after + 50
    })
    .await;
    let r = h.get(&format!("/threads/c/runs/{rid}")).await.json();
    assert_eq!(r["status"], "running", "{r}");
    h.post(&format!("/threads/c/runs/{rid}/cancel"), json!({}))
        .await;
    let ended = h
        .until(&format!("/threads/c/runs/{rid}"), |r| {
            r["status"] != "running"
        })
        .await;
    assert_eq!(ended["status"], "interrupted");
    let n = h.get("/threads/c/state").await.json()["values"]["n"]
        .as_u64()
        .unwrap();
    let steps = sql(
        db,
        "SELECT (count(*) FILTER (WHERE node = 'tick'))::text FROM switchyard.checkpoints WHERE thread = 'c'",
    );
    assert_eq!(steps, n.to_string(), "one record per tick, none twice");
}

#[tokio::test]
async fn a_worker_whose_connections_are_cut_mid_run_goes_on() {
    let db = crate::postgres::database();
    let cut_db = db.clone();
    goes_on_through(&db, move || {
        let killed = sql(
            &cut_db,
            "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        );
        assert_ne!(killed, "0");
    })
    .await;
}

#[tokio::test]
async fn a_worker_goes_on_when_postgres_restarts_mid_run() {
    let (cluster, db) = crate::postgres::own_database();
    goes_on_through(&db, || crate::postgres::restart(&cluster)).await;
}

/// The same answer sent to three servers at once, round after round, under the strict
/// rules: one is taken, the others refused (409) whichever server each went to, also
/// when the taken one already went through before another was written (it was
/// checked against the thread paused, and finds it answered); the thread is answered
/// once.
#[tokio::test]
async fn the_same_answer_sent_to_three_servers_at_once_is_taken_once() {
    const ROUNDS: usize = 40;
    let db = crate::postgres::database();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ask.toml"), ASK).unwrap();
    let mut w = Vec::new();
    for _ in 0..3 {
        w.push(
            serve(&[dir.path().to_str().unwrap()])
                .store(&db)
                .arg("--strict-runs")
                .start()
                .await,
        );
    }
    let h: Vec<_> = w.iter().map(|s| s.http()).collect();
    for round in 0..ROUNDS {
        let thread = format!("r{round}");
        h[0].post("/threads", json!({ "thread_id": thread })).await;
        let paused = h[round % 3]
            .post(
                &format!("/threads/{thread}/runs/wait"),
                json!({ "assistant_id": "ask", "input": {} }),
            )
            .await;
        assert_eq!(paused.status, 200, "{}", paused.text);
        let answers = futures_util::future::join_all(h.iter().map(|h| {
            let h = h.clone();
            let url = format!("/threads/{thread}/runs");
            async move {
                h.post(
                    &url,
                    json!({ "assistant_id": "ask", "command": { "resume": "yes" } }),
                )
                .await
            }
        }))
        .await;
        let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
        assert_eq!(
            statuses.iter().filter(|s| **s == 200).count(),
            1,
            "round {round}: {:?}",
            answers.iter().map(|a| &a.text).collect::<Vec<_>>()
        );
        assert!(
            statuses.iter().all(|s| *s == 200 || *s == 409),
            "round {round}: {:?}",
            answers.iter().map(|a| &a.text).collect::<Vec<_>>()
        );
        let taken = answers.iter().find(|a| a.status == 200).unwrap().json();
        let run = taken["run_id"].as_str().unwrap();
        let joined = h[0]
            .get(&format!("/threads/{thread}/runs/{run}/join"))
            .await;
        assert_eq!(joined.json()["answer"], "yes", "{}", joined.text);
        // Any server's list says so at once (one that follows the run reads the
        // store, not its copy a few milliseconds behind).
        for server in &h {
            let runs = server.get(&format!("/threads/{thread}/runs")).await.json();
            let statuses = super::server::statuses(&runs);
            assert_eq!(statuses, ["success", "success"], "round {round}: {runs}");
        }
    }
}

/// A graph that calls a tool with a side effect at every step (`tests/servers/tally.mjs`
/// appends `CALLER KEY` to `file`), for as long as it is let.
fn tally(file: &std::path::Path) -> String {
    format!(
        r#"
[graph]
name = "tally"
entry = "mark"
root = "{root}"
max_steps = 10000000

[servers.tally]
command = "node_modules/.bin/node"
args = ["tests/servers/tally.mjs", "{file}"]

[state.n]
type = "int"

[state.marked]
type = "json"

[nodes.mark]
kind = "mcp_call"
server = "tally"
tool = "mark"
args = {{ key = "n" }}
output = "marked"
next = "tick"

[nodes.tick]
kind = "set"
set = {{ n = "n + 1" }}
[nodes.tick.route]
when = [{{ case = "never", if = "n < 0", to = "done" }}]
default = "mark"

[nodes.done]
kind = "finalize"
outcome = "done"
"#,
        root = crate::util::root().display(),
        file = file.display()
    )
}

/// The calls `tally.mjs` recorded: (caller pid, key).
fn calls(file: &std::path::Path) -> Vec<(u32, u64)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (pid, key) = l.split_once(' ').unwrap();
            (pid.parse().unwrap(), key.parse().unwrap())
        })
        .collect()
}

/// Which of `servers` drives run `rid` (the store names its worker).
fn driver_of(db: &str, rid: &str, servers: &[Serve]) -> usize {
    let worker = sql(
        db,
        &format!("SELECT worker FROM switchyard.runs WHERE id = '{rid}'"),
    );
    servers
        .iter()
        .position(|s| worker.contains(&format!(":{}:", s.pid())))
        .unwrap_or_else(|| panic!("no server is {worker}"))
}

fn signal(pid: u32, sig: &str) {
    let done = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(done.success());
}

/// The worker driving a run stops (SIGSTOP) mid-run, round after round, with Postgres
/// restarted while it is stopped in every other round. Stopped alone, it keeps its
/// thread (its presence holds, however long it is stopped past its lease): nobody
/// takes the run over and no tool is called meanwhile. Stopped through a restart, its
/// presence goes: the other worker takes the run over after the lease, and when the
/// stopped one wakes it calls no tool and writes nothing (its claim's token is not
/// the thread's any more). Either way every step is recorded once, and each call is
/// made once but for, at most, the one the stopped worker had in flight: sent before
/// the stop, or stopped in the instant between its last look at the clock and the
/// call leaving it.
#[tokio::test]
async fn a_worker_stopped_past_its_lease_never_calls_a_tool_another_calls_too() {
    let rounds: usize = std::env::var("SWITCHYARD_FAULT_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let (cluster, db) = crate::postgres::own_database();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("calls");
    std::fs::write(dir.path().join("tally.toml"), tally(&file)).unwrap();
    let mut w = Vec::new();
    for _ in 0..2 {
        w.push(
            serve(&[dir.path().to_str().unwrap()])
                .store(&db)
                .arg("--run-lease")
                .arg("1s")
                .start()
                .await,
        );
    }
    let (mut doubled, mut taken_over) = (0, 0);
    for round in 0..rounds {
        let restart = round % 2 == 1;
        let thread = format!("s{round}");
        let h = w[0].http();
        let run = h
            .post(
                &format!("/threads/{thread}/runs"),
                json!({ "assistant_id": "tally", "input": {}, "if_not_exists": "create" }),
            )
            .await
            .json();
        let rid = run["run_id"].as_str().unwrap().to_string();
        h.until(&format!("/threads/{thread}/state"), |s| {
            s["values"]["n"].as_u64().unwrap_or(0) > 10
        })
        .await;
        let driver = driver_of(&db, &rid, &w);
        let (stopped, other) = (w[driver].pid(), w[1 - driver].http());
        signal(stopped, "-STOP");
        // A call it had sent lands meanwhile (its tool server is not stopped).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = calls(&file).iter().filter(|c| c.0 == stopped).count();
        let at_stop = other.get(&format!("/threads/{thread}/state")).await.json()["values"]["n"]
            .as_u64()
            .unwrap();
        if restart {
            crate::postgres::restart(&cluster);
            // Taken over once the lease ran out: the other worker goes on.
            other
                .until(&format!("/threads/{thread}/state"), |s| {
                    s["values"]["n"].as_u64().unwrap_or(0) > at_stop + 20
                })
                .await;
            taken_over += 1;
        } else {
            // Three leases: nobody takes the thread of a stopped (not dead) worker.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let n = other.get(&format!("/threads/{thread}/state")).await.json()["values"]["n"]
                .as_u64()
                .unwrap();
            assert_eq!(
                n, at_stop,
                "round {round}: the stopped worker's run was taken over"
            );
        }
        signal(stopped, "-CONT");
        // Awake: it learns what happened at its next heartbeat or call.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let h = w[1 - driver].http();
        h.until(&format!("/threads/{thread}/state"), |s| {
            s["values"]["n"].as_u64().unwrap_or(0) > at_stop + 30
        })
        .await;
        h.post(&format!("/threads/{thread}/runs/{rid}/cancel"), json!({}))
            .await;
        let ended = h
            .until(&format!("/threads/{thread}/runs/{rid}"), |r| {
                r["status"] != "running" && r["status"] != "pending"
            })
            .await;
        assert_eq!(ended["status"], "interrupted", "round {round}: {ended}");
        let all = calls(&file);
        let theirs: Vec<u64> = all.iter().filter(|c| c.0 == stopped).map(|c| c.1).collect();
        if restart {
            // Its calls since the stop: none, or the one it was making then (key
            // `at_stop`, the step after the last written; a call the tool recorded late
            // or one sent in the instant after its last look at the clock, which no
            // check can take back), and nothing after it.
            assert!(
                theirs.len() == before
                    || (theirs.len() == before + 1 && theirs.last() == Some(&at_stop)),
                "round {round}: the stopped worker called a tool after its thread was taken over (n was {at_stop} at the stop, it had made {before} calls; its calls: {theirs:?})"
            );
        }
        // Every step once; every call once but the one in flight at the stop.
        let n = h.get(&format!("/threads/{thread}/state")).await.json()["values"]["n"]
            .as_u64()
            .unwrap();
        let steps = sql(
            &db,
            &format!(
                "SELECT (count(*) FILTER (WHERE node = 'mark'))::text FROM switchyard.checkpoints WHERE thread = '{thread}'"
            ),
        );
        assert!(
            steps == n.to_string() || steps == (n + 1).to_string(),
            "round {round}: {steps} marks for n = {n}"
        );
        std::fs::write(&file, "").unwrap();
        let mut keys: Vec<u64> = all.iter().map(|c| c.1).collect();
        keys.sort_unstable();
        let total = keys.len();
        keys.dedup();
        assert_eq!(
            keys,
            (0..keys.len() as u64).collect::<Vec<_>>(),
            "round {round}: a call is missing"
        );
        assert!(
            total - keys.len() <= 1,
            "round {round}: {} calls made twice",
            total - keys.len()
        );
        doubled += total - keys.len();
    }
    eprintln!(
        "{rounds} rounds: {taken_over} taken over through a restart, {doubled} calls in flight at a stop made again"
    );
}
