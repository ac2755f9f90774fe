//! Seed 001, the screen explorer (`graphs/screen_explorer.toml`), on Pocket Notes: a
//! small multi-page web app (`tests/fixtures/seeds/screen_explorer/notes/`) standing in
//! for the phone app the seed explores, with a "Sync now" button that crashes it.

use super::browser_agent::sha256_hex;
use super::scenario::{Ran, Scenario, trace};
use super::web::{Request, Response, WebApp};
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;

fn notes_app() -> WebApp {
    WebApp::start("screen_explorer/notes", |r: &Request| {
        (r.path() == "/sync").then(|| {
            Response::Html(
                500,
                "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>Error</title></head>\n<body>\n<h1>Something went wrong</h1>\n<p>Pocket Notes stopped.</p>\n</body>\n</html>\n".into(),
            )
        })
    })
}

fn input(app: &WebApp, budgets: Json) -> String {
    json!({ "app_url": app.url(), "budgets": budgets }).to_string()
}

fn budgets(changes: Json) -> Json {
    let mut b = json!({
        "max_steps": 50, "max_tokens": 100000, "max_time_ms": 600000,
        "tokens_per_loop": 10000, "time_per_loop_ms": 60000, "node_steps_per_loop": 12,
        "max_restarts": 1, "max_consecutive_errors": 3, "stall_limit": 3
    });
    for (k, v) in changes.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

/// A screen's name in the knowledge graph: `screen:` and 16 hex digits of the SHA-256 of
/// its signature.
fn screen(signature: &str) -> String {
    format!("screen:{}", &sha256_hex(signature.as_bytes())[..16])
}

const HOME: &str = r#"/ | Pocket Notes | link "Notes"; link "Settings"; link "About""#;
const NOTES: &str = r#"/notes.html | Notes – Pocket Notes | link "Groceries"; link "Home""#;
const GROCERIES: &str = r#"/groceries.html | Groceries – Pocket Notes | link "All notes""#;
const SETTINGS: &str = r#"/settings.html | Settings – Pocket Notes | checkbox "Dark mode"; button "Sync now"; link "Home""#;
const CRASHED: &str = "/sync? | Error | ";

/// A screenshot reference names a PNG in the blob store with that hash and size.
#[track_caller]
fn assert_blob(s: &Scenario, reference: &Json) {
    let hex = reference["blob"]
        .as_str()
        .and_then(|b| b.strip_prefix("sha256:"))
        .unwrap_or_else(|| panic!("not a blob reference: {reference}"));
    assert_eq!(reference["mime_type"], json!("image/png"));
    let bytes = std::fs::read(s.blobs().join(format!("{hex}.png"))).expect("the blob is stored");
    assert_eq!(reference["bytes"], json!(bytes.len()));
    assert_eq!(sha256_hex(&bytes), hex);
    assert_eq!(&bytes[1..4], b"PNG");
}

/// No image bytes (base64 PNG starts with iVBORw0KGgo) in the text.
#[track_caller]
fn assert_no_image(what: &str, text: &str) {
    assert!(
        !text.contains("iVBORw0KGgo"),
        "an image is inline in {what}"
    );
}

/// The knowledge-graph server's file: entities by name, and relations.
fn knowledge_graph(s: &Scenario) -> (BTreeMap<String, Json>, Vec<Json>) {
    let text = std::fs::read_to_string(s.memory_file()).expect("the knowledge graph file");
    let mut entities = BTreeMap::new();
    let mut relations = Vec::new();
    for line in text.lines() {
        let mut v: Json = serde_json::from_str(line).expect("a JSON line");
        let kind = v.as_object_mut().unwrap().remove("type").unwrap();
        match kind.as_str() {
            Some("entity") => {
                entities.insert(v["name"].as_str().unwrap().to_string(), v);
            }
            Some("relation") => relations.push(v),
            other => panic!("unexpected record {other:?}"),
        }
    }
    (entities, relations)
}

/// Telemetry: every node start has its finish with a latency (or its failure), every LLM invocation its
/// tokens, cache flag and latency; returns the LLM invocations as (node, cache hit).
#[track_caller]
fn check_telemetry(out: &Ran) -> Vec<(String, bool)> {
    let events = out.events();
    let mut open: Option<String> = None;
    let mut llm = Vec::new();
    for e in &events {
        match e["event"].as_str().unwrap() {
            "node_started" => {
                assert!(open.is_none(), "{e}");
                open = Some(e["node"].as_str().unwrap().to_string());
            }
            "node_finished" => {
                assert_eq!(open.take().as_deref(), e["node"].as_str(), "{e}");
                assert!(e["duration_us"].is_u64(), "{e}");
            }
            "node_failed" => assert_eq!(open.take().as_deref(), e["node"].as_str(), "{e}"),
            "llm_invocation" => {
                assert!(e["latency_ms"].is_u64() && e["tokens_in"].is_u64(), "{e}");
                let hit = e["cache_hit"].as_bool().unwrap();
                if hit {
                    assert_eq!((&e["tokens_in"], &e["tokens_out"]), (&json!(0), &json!(0)));
                }
                llm.push((e["node"].as_str().unwrap().to_string(), hit));
            }
            "tool_call" => assert!(e["duration_ms"].is_u64(), "{e}"),
            _ => {}
        }
    }
    let last = events.last().unwrap();
    assert_eq!(last["event"], json!("server_stopped"));
    assert!(
        events
            .iter()
            .any(|e| e["event"] == json!("run_finished") && e["duration_ms"].is_u64())
    );
    llm
}

/// One exploration of Pocket Notes with the model deciding. Proves: the 17 nodes in
/// their phases (setup, the main loop with its five LLM decisions, a policy switch,
/// recovery from a failed action, a bounded restart after the app crashed, the stop);
/// persist writes every screen and transition to the knowledge-graph server, read back
/// here; screenshots are blob references, never inline, in state, events and
/// checkpoints; verify answers from its cache on a revisit; telemetry (node start and
/// finish with latency, LLM invocations with tokens and cache hits, the stop reason).
#[test]
fn an_exploration_maps_the_app_and_stops_when_no_restart_is_left() {
    let app = notes_app();
    let mut s = Scenario::new("screen_explorer", "explore", app.port());
    let graph = s.graph();
    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "explore-1",
            "--input",
            &input(&app, budgets(json!({ "max_steps": 10 }))),
        ])
        .code(0);
    let summary = "Stopped: no restart left (1 of 1 used): The app crashed on Sync now again. Found 5 screens and 6 transitions in 9 actions (restarts: 1, errors: 1, last policy: depth); 10880 LLM tokens.";
    // The whole run, event by event (durations, pids and screenshot hashes left out).
    insta::assert_snapshot!(
        "explore_trace",
        s.portless(&trace(&out.events()).join("\n"))
    );
    let llm = check_telemetry(&out);
    let hits: Vec<&str> = llm
        .iter()
        .filter(|(_, hit)| *hit)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(hits, ["verify", "verify"]);
    assert_eq!(llm.len(), 34, "32 requests and 2 cache hits");

    let end = s.state("explore-1");
    assert_eq!(end["outcome"], json!("stopped"));
    let state = &end["state"];
    let (home, notes, groceries, settings, crashed) = (
        screen(HOME),
        screen(NOTES),
        screen(GROCERIES),
        screen(SETTINGS),
        screen(CRASHED),
    );
    assert_eq!(
        state["screens"],
        json!([home, notes, groceries, settings, crashed])
    );
    let edge = |from: &str, label: &str, to: &str| format!("{from} --{label}--> {to}");
    let edges = [
        (home.as_str(), r#"link "Notes""#, notes.as_str()),
        (notes.as_str(), r#"link "Groceries""#, groceries.as_str()),
        (groceries.as_str(), "back", notes.as_str()),
        (notes.as_str(), r#"link "Home""#, home.as_str()),
        (home.as_str(), r#"link "Settings""#, settings.as_str()),
        (settings.as_str(), r#"button "Sync now""#, crashed.as_str()),
    ];
    assert_eq!(
        state["transitions"],
        json!(edges.map(|(f, l, t)| edge(f, l, t)))
    );
    let counters: Json = [
        "steps_total",
        "errors",
        "consecutive_errors",
        "restarts",
        "policy_switches",
        "no_progress",
        "policy",
    ]
    .iter()
    .map(|k| (k.to_string(), state[*k].clone()))
    .collect::<serde_json::Map<_, _>>()
    .into();
    assert_eq!(
        counters,
        json!({ "steps_total": 9, "errors": 1, "consecutive_errors": 0, "restarts": 1, "policy_switches": 1, "no_progress": 2, "policy": "depth" })
    );
    assert_eq!(
        state["failures"],
        json!([
            "act: `browser_click` reported an error: ### Error\nError: Ref f1e42 not found in the current page snapshot. Try capturing new snapshot."
        ])
    );
    assert_eq!(
        state["routing"],
        json!({ "decision": "stop", "reason": "no restart left (1 of 1 used): The app crashed on Sync now again." })
    );
    assert_eq!(
        state["stop_reason"],
        json!("no restart left (1 of 1 used): The app crashed on Sync now again.")
    );
    assert_eq!(state["summary"], json!(summary));
    assert_eq!(state["exhausted_budgets"], json!([]));
    assert_eq!(state["budget_remaining"]["steps"], json!(1));

    // Screenshots by reference: one per screen, each a PNG in the blob store.
    let shots = state["screenshots"].as_object().unwrap();
    let mut named: Vec<&String> = shots.keys().collect();
    named.sort();
    let mut want = vec![&home, &notes, &groceries, &settings, &crashed];
    want.sort();
    assert_eq!(named, want);
    for reference in shots
        .values()
        .chain([&state["screenshot"], &state["post_screenshot"]])
    {
        assert_blob(&s, reference);
    }
    assert_no_image("the state", &state.to_string());
    assert_no_image("the events", &out.stdout);
    let history = s
        .cli(&[
            "history",
            "--thread",
            "explore-1",
            "--json",
            "--store",
            &s.store(),
        ])
        .code(0);
    assert_no_image("the checkpoints", &history.stdout);

    // The screen graph, read back from the knowledge-graph server's file.
    let (entities, relations) = knowledge_graph(&s);
    let url = app.url();
    for (name, signature, path) in [
        (&home, HOME, ""),
        (&notes, NOTES, "notes.html"),
        (&groceries, GROCERIES, "groceries.html"),
        (&settings, SETTINGS, "settings.html"),
        (&crashed, CRASHED, "sync?"),
    ] {
        let e = &entities[name.as_str()];
        assert_eq!(e["entityType"], json!("screen"));
        let obs = e["observations"].as_array().unwrap();
        assert_eq!(obs[0], json!(format!("signature: {signature}")));
        assert_eq!(obs[1], json!(format!("url: {url}{path}")));
        let blob = obs[2]
            .as_str()
            .unwrap()
            .strip_prefix("screenshot: ")
            .unwrap();
        let file = format!("{}.png", blob.strip_prefix("sha256:").unwrap());
        assert!(s.blobs().join(file).is_file(), "{blob}");
    }
    assert_eq!(entities.len(), 5);
    assert_eq!(
        relations,
        edges
            .map(|(f, l, t)| json!({ "from": f, "to": t, "relationType": l }))
            .to_vec()
    );
    s.finish();
}
