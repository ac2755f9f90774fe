//! Crons through `switchyard serve`: made, listed, changed and deleted as on
//! LangGraph's server (exact answers), every refusal changing nothing; their runs made
//! at each occurrence, once, across a restart and across servers sharing Postgres.

use super::server::{Serve, serve};
use crate::serve::{Transcript, note_paged};
use serde_json::{Value as Json, json};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test]
async fn crons_are_made_listed_changed_and_deleted_as_on_langgraphs_server() {
    let s = serve(&["tests/fixtures/serve/three.toml"]).start().await;
    let h = s.http();
    let mut t = Transcript::new();
    let thread = h.post("/threads", json!({})).await.json()["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    let made = [
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "0 0 1 1 *", "input": {"input": "a"},
                   "metadata": {"team": "x", "cron_id": "mine", "run_id": "r"}}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "0 9 * * 1-5", "timezone": "America/New_York",
                   "input": {"input": "b"}, "on_run_completed": "keep", "enabled": false,
                   "end_time": "2030-01-01T00:00:00Z", "config": {"tags": ["t1"]}}),
        ),
        (
            format!("/threads/{thread}/runs/crons"),
            json!({"assistant_id": "three", "schedule": "@hourly", "input": {"input": "c"},
                   "on_run_completed": "keep", "multitask_strategy": "enqueue"}),
        ),
    ];
    let mut ids = Vec::new();
    for (path, body) in made {
        let r = h.post(&path, body.clone()).await;
        ids.push(r.json()["cron_id"].as_str().unwrap().to_string());
        t.note(&format!("POST {path} {body}"), &r);
    }
    t.note(
        &format!("GET /runs/crons/{}", ids[0]),
        &h.get(&format!("/runs/crons/{}", ids[0])).await,
    );
    for body in [
        json!({"select": ["cron_id", "thread_id", "enabled"]}),
        json!({"select": ["cron_id"], "limit": 2}),
        json!({"select": ["cron_id"], "limit": 2, "offset": 2}),
        json!({"select": ["cron_id", "next_run_date"], "sort_by": "cron_id", "sort_order": "asc"}),
        json!({"thread_id": thread, "select": ["cron_id"]}),
        json!({"enabled": false, "select": ["cron_id"]}),
        json!({"metadata": {"team": "x"}, "select": ["cron_id", "metadata"]}),
        json!({"assistant_id": "nope", "select": ["cron_id"]}),
    ] {
        note_paged(
            &mut t,
            &format!("POST /runs/crons/search {body}"),
            &h.post("/runs/crons/search", body).await,
        );
    }
    for body in [json!({}), json!({"thread_id": thread})] {
        t.note(
            &format!("POST /runs/crons/count {body}"),
            &h.post("/runs/crons/count", body).await,
        );
    }
    // Changed: the cron's own keys in place, metadata merged, the rest into the run
    // request; the next occurrence computed again when the schedule changes.
    let one = format!("/runs/crons/{}", ids[0]);
    for body in [
        json!({"schedule": "30 12 * * *", "metadata": {"more": 1}}),
        json!({"input": {"input": "z"}, "enabled": false, "end_time": "2031-06-01T12:00:00+02:00"}),
        json!({"end_time": null, "enabled": true}),
        json!({"metadata": {"run_id": "mine", "k": 2}}),
    ] {
        t.note(&format!("PATCH {one} {body}"), &h.patch(&one, body).await);
    }
    // Refused, each changing nothing.
    let refusals = [
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "not a cron"}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "61 * * * *"}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "0 0 31 2 *", "input": {"input": "a"}}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": 5}),
        ),
        ("/runs/crons".to_string(), json!({"assistant_id": "three"})),
        ("/runs/crons".to_string(), json!({"schedule": "* * * * *"})),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "nope", "schedule": "bad"}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "* * * * *", "timezone": "Mars/Olympus"}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "* * * * *", "on_run_completed": "purge"}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "* * * * *", "enabled": "yes"}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "* * * * *", "end_time": "tomorrow"}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "* * * * *", "input": {"other": 1}}),
        ),
        (
            "/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "* * * * *", "input": {"input": "a"}, "multitask_strategy": "bogus"}),
        ),
        (
            "/threads/nope/runs/crons".to_string(),
            json!({"assistant_id": "three", "schedule": "* * * * *", "input": {"input": "a"}}),
        ),
        (
            format!("/threads/{thread}/runs/crons"),
            json!({"assistant_id": "three", "schedule": "* * * * *", "input": {"other": 1}}),
        ),
        ("/runs/crons/search".to_string(), json!({"limit": 0})),
        ("/runs/crons/search".to_string(), json!({"limit": 1001})),
        (
            "/runs/crons/search".to_string(),
            json!({"sort_by": "schedule"}),
        ),
        (
            "/runs/crons/search".to_string(),
            json!({"sort_order": "ASC"}),
        ),
        (
            "/runs/crons/search".to_string(),
            json!({"select": ["bogus"]}),
        ),
    ];
    for (path, body) in refusals {
        t.note(&format!("POST {path} {body}"), &h.post(&path, body).await);
    }
    for body in [
        json!({}),
        json!({"schedule": "61 * * * *"}),
        json!({"schedule": "0 0 31 2 *"}),
        json!({"timezone": "Nowhere/Land"}),
        json!({"enabled": "x"}),
        json!({"input": {"other": 1}}),
    ] {
        t.note(&format!("PATCH {one} {body}"), &h.patch(&one, body).await);
    }
    t.note(&format!("GET {one}"), &h.get(&one).await);
    let nope = "/runs/crons/0190aaaa-0000-7000-8000-000000000000";
    t.note(&format!("GET {nope}"), &h.get(nope).await);
    t.note(
        &format!("PATCH {nope}"),
        &h.patch(nope, json!({"enabled": false})).await,
    );
    // Deleted: once; a thread's crons go with the thread.
    for _ in 0..2 {
        t.note(&format!("DELETE {one}"), &h.delete(&one).await);
    }
    t.note(
        &format!("DELETE /threads/{thread}"),
        &h.delete(&format!("/threads/{thread}")).await,
    );
    note_paged(
        &mut t,
        "POST /runs/crons/search {\"select\": [\"cron_id\"]}",
        &h.post("/runs/crons/search", json!({"select": ["cron_id"]}))
            .await,
    );
    insta::assert_snapshot!(t.text());
}

/// The runs a server's log says crons made: (cron, occurrence, run, thread).
fn fired(s: &Serve) -> Vec<(String, u64, String, String)> {
    s.log_json()
        .into_iter()
        .filter(|l| l["notice"] == "cron_fired")
        .map(|l| {
            (
                l["cron"].as_str().unwrap().to_string(),
                l["at_ms"].as_u64().unwrap(),
                l["run"].as_str().unwrap().to_string(),
                l["thread"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Waits until `done` holds of the servers' logs, 20 s at most.
async fn until(servers: &[&Serve], done: impl Fn(&[&Serve]) -> bool) {
    for _ in 0..200 {
        if done(servers) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "not done in time: {:?}",
        servers.iter().map(|s| s.log_json()).collect::<Vec<_>>()
    );
}

/// Every second (croniter's sixth field is seconds): each occurrence a run, on the
/// cron's thread or on a thread of its own that is kept or deleted as asked; a
/// disabled cron makes none; a deleted one no more.
#[tokio::test]
async fn a_cron_makes_a_run_at_each_occurrence() {
    let s = serve(&["tests/fixtures/serve/three.toml"]).start().await;
    let h = s.http();
    let thread = h
        .post("/threads", json!({"metadata": {"mine": 1}}))
        .await
        .json()["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    let every_second = |extra: Json| {
        let mut b = json!({"assistant_id": "three", "schedule": "* * * * * *", "input": {"input": "i"}, "metadata": {"from": "cron"}});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let id = |r: super::server::Resp| r.json()["cron_id"].as_str().unwrap().to_string();
    let on_thread = id(h
        .post(
            &format!("/threads/{thread}/runs/crons"),
            every_second(json!({})),
        )
        .await);
    let keep = id(h
        .post(
            "/runs/crons",
            every_second(json!({"on_run_completed": "keep"})),
        )
        .await);
    let delete = id(h.post("/runs/crons", every_second(json!({}))).await);
    let off = id(h
        .post("/runs/crons", every_second(json!({"enabled": false})))
        .await);
    let of = |cron: &str, s: &Serve| -> Vec<(u64, String, String)> {
        fired(s)
            .into_iter()
            .filter(|f| f.0 == cron)
            .map(|f| (f.1, f.2, f.3))
            .collect()
    };
    until(&[&s], |s| {
        [&on_thread, &keep, &delete]
            .iter()
            .all(|c| of(c, s[0]).len() >= 2)
    })
    .await;
    for c in [&on_thread, &keep, &delete] {
        h.delete(&format!("/runs/crons/{c}")).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fires: Vec<_> = [&on_thread, &keep, &delete].map(|c| of(c, &s)).into();
    assert_eq!(of(&off, &s), []);
    // Each occurrence once, a second apart, on whole seconds.
    for f in &fires {
        let at: Vec<u64> = f.iter().map(|x| x.0).collect();
        assert!(at.iter().all(|ms| ms % 1000 == 0), "{at:?}");
        assert!(at.windows(2).all(|w| w[1] > w[0]), "{at:?}");
    }
    // On the cron's thread: its runs, with the cron's metadata and id.
    assert!(fires[0].iter().all(|x| x.2 == thread));
    let runs = h.get(&format!("/threads/{thread}/runs")).await.json();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), fires[0].len());
    for r in runs {
        assert_eq!(r["metadata"]["from"], "cron");
        assert_eq!(
            r["kwargs"]["config"]["configurable"]["cron_id"],
            on_thread.as_str()
        );
    }
    // Kept: a thread each, with its run's result; deleted: gone once the run ended.
    for (_, run, t) in &fires[1] {
        let waited = h.get(&format!("/threads/{t}/runs/{run}/join")).await.json();
        assert_eq!(waited["trail"], json!(["a:i", "b"]));
    }
    for (_, run, t) in &fires[2] {
        h.get(&format!("/threads/{t}/runs/{run}/join")).await;
        let mut gone = false;
        for _ in 0..50 {
            if h.get(&format!("/threads/{t}")).await.status == 404 {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(gone, "the thread of a run that ended is deleted: {t}");
    }
    // Deleted crons make no more runs.
    let before: usize = fires.iter().map(Vec::len).sum();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let after: usize = [&on_thread, &keep, &delete]
        .iter()
        .map(|c| of(c, &s).len())
        .sum();
    assert_eq!(before, after);
}

/// A cron made before a restart goes on firing after it: the store keeps it.
#[tokio::test]
async fn a_cron_goes_on_after_the_server_restarts() {
    let first = serve(&["tests/fixtures/serve/three.toml"]).start().await;
    let cron = first
        .http()
        .post(
            "/runs/crons",
            json!({"assistant_id": "three", "schedule": "* * * * * *", "input": {"input": "r"}}),
        )
        .await
        .json()["cron_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, _, dir) = first.terminate().await;
    let db = format!("sqlite:{}", dir.path().join("store.db").display());
    let second = serve(&["tests/fixtures/serve/three.toml"])
        .store(&db)
        .start()
        .await;
    until(&[&second], |s| fired(s[0]).iter().any(|f| f.0 == cron)).await;
    let listed = second
        .http()
        .post("/runs/crons/search", json!({"select": ["cron_id"]}))
        .await
        .json();
    assert_eq!(listed, json!([{ "cron_id": cron }]));
    drop(dir);
}

/// Three servers on one Postgres database, one cron every second: each occurrence
/// made into a run by one of them, never by two. (One that every server was too busy
/// to take within its second is folded into the next, as on LangGraph's server, so
/// the test does not count them.)
#[tokio::test]
async fn servers_sharing_a_store_fire_each_occurrence_once() {
    let db = crate::postgres::database();
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(
            serve(&["tests/fixtures/serve/three.toml"])
                .store(&db)
                .start()
                .await,
        );
    }
    let cron = servers[0]
        .http()
        .post(
            "/runs/crons",
            json!({"assistant_id": "three", "schedule": "* * * * * *", "input": {"input": "c"}, "on_run_completed": "keep"}),
        )
        .await
        .json()["cron_id"]
        .as_str()
        .unwrap()
        .to_string();
    let all = |s: &[&Serve]| -> Vec<(u64, String)> {
        s.iter()
            .flat_map(|s| fired(s))
            .filter(|f| f.0 == cron)
            .map(|f| (f.1, f.2))
            .collect()
    };
    let refs: Vec<&Serve> = servers.iter().collect();
    until(&refs, |s| all(s).len() >= 5).await;
    servers[1]
        .http()
        .delete(&format!("/runs/crons/{cron}"))
        .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let fires = all(&refs);
    let at: BTreeSet<u64> = fires.iter().map(|f| f.0).collect();
    assert_eq!(
        at.len(),
        fires.len(),
        "an occurrence fired twice: {fires:?}"
    );
    // Each a run of its own, somewhere in the shared store.
    let runs: BTreeSet<&String> = fires.iter().map(|f| &f.1).collect();
    assert_eq!(runs.len(), fires.len());
}
