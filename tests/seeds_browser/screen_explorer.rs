//! Seed 001, the screen explorer (`graphs/screen_explorer.toml`), on Pocket Notes: a
//! small multi-page web app (`tests/fixtures/seeds/screen_explorer/notes/`) standing in
//! for the phone app the seed explores, with a "Sync now" button that crashes it.

use super::scenario::{Ran, Scenario, assert_blob, sha256_hex, trace};
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
    // The servers are reported stopped before the run's last event.
    let last = events.last().unwrap();
    assert_eq!(last["event"], json!("run_finished"));
    assert_eq!(events[events.len() - 2]["event"], json!("server_stopped"));
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

/// The fields of a state that say how a run ended.
fn ending(state: &Json) -> Json {
    json!({
        "routing": state["routing"],
        "exhausted_budgets": state["exhausted_budgets"],
        "stop_reason": state["stop_reason"],
        "summary": state["summary"],
    })
}

/// Proves: the budgets override the model's routing. Four runs on one store, each asked
/// to continue by the model after the first loop (or stopped before it asks): the
/// action budget, the token budget (less left than a loop needs) and the time budget
/// turn the decision into budget_exhausted; the hard [graph] step limit (`--max-steps`)
/// goes to budget_stop through `on_limit`. The later runs also answer from the LLM
/// cache the earlier ones filled (it lives in the SQLite store).
#[test]
fn budgets_override_the_models_decision_to_continue() {
    let app = notes_app();
    let mut s = Scenario::new("screen_explorer", "budgets", app.port());
    let graph = s.graph();
    let runs = [
        ("steps", json!({ "max_steps": 1 }), None),
        (
            "tokens",
            json!({ "max_tokens": 1000, "tokens_per_loop": 800 }),
            None,
        ),
        (
            "time",
            json!({ "max_time_ms": 1000, "time_per_loop_ms": 500 }),
            None,
        ),
        ("hard", json!({}), Some("9")),
    ];
    let mut traces = Vec::new();
    for (thread, changes, max_steps) in runs {
        let mut changes = changes;
        if changes.get("max_steps").is_none() {
            changes["max_steps"] = json!(10);
        }
        let inp = input(&app, budgets(changes));
        let mut args = vec!["run", &graph, "--thread", thread, "--input", &inp];
        if let Some(n) = max_steps {
            args.extend(["--max-steps", n]);
        }
        let out = s.llm(&args).code(0);
        check_telemetry(&out);
        traces.push(s.portless(&trace(&out.events()).join("\n")));
    }
    insta::assert_snapshot!("budgets_traces", traces.join("\n\n"));

    let found = |screens: u32, transitions: u32, tokens: u32| {
        format!(
            "Found {screens} screens and {transitions} transitions in 1 actions (restarts: 0, errors: 0, last policy: breadth); {tokens} LLM tokens."
        )
    };
    let overridden = |budget: &str, reason: &str| {
        format!("budget exhausted ({budget}) instead of: continue, {reason}")
    };
    for (thread, budget, reason, screens, tokens) in [
        (
            "steps",
            "actions",
            "New screens keep turning up.",
            (2, 1),
            1360,
        ),
        ("tokens", "tokens", "There is more to explore.", (0, 0), 680),
        (
            "time",
            "time",
            "Settings and About are unexplored.",
            (0, 0),
            340,
        ),
    ] {
        let end = s.state(thread);
        assert_eq!(end["outcome"], json!("budget_exhausted"), "{thread}");
        let why = overridden(budget, reason);
        assert_eq!(
            ending(&end["state"]),
            json!({
                "routing": { "decision": "budget_exhausted", "reason": why },
                "exhausted_budgets": [budget],
                "stop_reason": why,
                "summary": format!(
                    "Budget exhausted: {}. {}",
                    why.trim_end_matches('.'),
                    found(screens.0, screens.1, tokens)
                ),
            }),
            "{thread}"
        );
    }
    // The steps run found both screens; the later runs found them in the knowledge graph
    // already, so nothing was new to them.
    assert_eq!(
        s.state("steps")["state"]["screens"],
        json!([screen(HOME), screen(NOTES)])
    );
    let hard = s.state("hard");
    assert_eq!(hard["outcome"], json!("budget_exhausted"));
    assert_eq!(
        hard["state"]["summary"],
        json!(format!(
            "Budget exhausted: a hard run limit was reached (10 steps). {}",
            found(0, 0, 0)
        ))
    );
    assert_eq!(hard["state"]["routing"], json!(null));
    s.finish();
}

/// Proves: every LLM decision node has a deterministic fallback. One run where the
/// model answers nothing valid (each invalid reply is fed back once, then the fallback
/// is taken; detect_progress answers once so that the stall triggers should_continue's
/// switch_policy), and one where the model cannot be reached at all (connection
/// refused, retried, then the fallback): the exploration goes on through the fallbacks
/// and ends on its budget.
#[test]
fn when_the_model_fails_every_decision_takes_its_fallback() {
    let app = notes_app();
    let mut s = Scenario::new("screen_explorer", "fallbacks", app.port());
    let graph = s.graph();
    let out = s
        .llm(&[
            "run",
            &graph,
            "--thread",
            "garbage",
            "--input",
            &input(&app, budgets(json!({ "max_steps": 2, "stall_limit": 1 }))),
        ])
        .code(0);
    check_telemetry(&out);
    let garbage = s.portless(&trace(&out.events()).join("\n"));
    let state = s.state("garbage")["state"].clone();
    let fallback_choice = |candidate: &str| json!({ "candidate": candidate, "postcondition": "the screen changes", "reason": "fallback: the first candidate not yet tried on this screen", "plan": [], "confidence": 0.0 });
    assert_eq!(
        state["chosen_action"],
        fallback_choice(r#"link "Groceries" [ref=f1e5]"#)
    );
    assert_eq!(
        state["tried"],
        json!({ screen(HOME): [r#"link "Notes""#], screen(NOTES): [r#"link "Groceries""#] })
    );
    assert_eq!(
        state["verification"],
        json!({ "outcome": "success", "postcondition_met": true, "reason": "fallback: heuristic delta check of the screen signatures" })
    );
    assert_eq!(
        state["progress"],
        json!({ "label": "progressing", "reason": "fallback: heuristic from what persist added and whether the screen changed" })
    );
    assert_eq!(
        state["policy_switch"],
        json!({ "policy": "depth", "reason": "fallback: rotation after breadth" })
    );
    let why = "budget exhausted (actions) instead of: stop, fallback: the action budget is spent";
    assert_eq!(
        ending(&state),
        json!({
            "routing": { "decision": "budget_exhausted", "reason": why },
            "exhausted_budgets": ["actions"],
            "stop_reason": why,
            "summary": format!("Budget exhausted: {why}. Found 3 screens and 2 transitions in 2 actions (restarts: 0, errors: 0, last policy: depth); 5780 LLM tokens."),
        })
    );
    // The first loop's should_continue: the stall (no_progress 1 of stall_limit 1) made
    // its fallback switch the policy. Its invalid reply went back to the model first.
    let recording = std::fs::read_to_string(
        crate::util::root().join("tests/fixtures/seeds/screen_explorer/fallbacks.1.llm.jsonl"),
    )
    .unwrap();
    let second: Json = recording
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .filter(|e| e["node"] == json!("should_continue"))
        .nth(1)
        .unwrap();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[messages.len() - 2..],
        [
            json!({ "role": "assistant", "content": "continue" }),
            json!({ "role": "user", "content": "That reply is not valid: the reply is not JSON: expected value at line 1 column 1. Reply again, with the problem fixed." })
        ]
    );

    // The model cannot be reached: no reply, no recording, the same fallbacks.
    let store = s.store();
    let inp = input(&app, budgets(json!({ "max_steps": 1 })));
    let out = s
        .cli(&[
            "run", &graph, "--thread", "down", "--json", "--store", &store, "--input", &inp,
        ])
        .code(0);
    check_telemetry(&out);
    let down = s.portless(&trace(&out.events()).join("\n"));
    insta::assert_snapshot!("fallbacks_traces", format!("{garbage}\n\n{down}"));
    let state = s.state("down")["state"].clone();
    assert_eq!(
        state["chosen_action"],
        fallback_choice(r#"link "Notes" [ref=e4]"#)
    );
    assert_eq!(
        state["verification"]["reason"],
        json!("fallback: heuristic delta check of the screen signatures")
    );
    assert_eq!(
        state["progress"],
        json!({ "label": "plateau", "reason": "fallback: heuristic from what persist added and whether the screen changed" })
    );
    assert_eq!(state["routing"]["reason"], json!(why));
    s.finish();
}
