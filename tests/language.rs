//! The graph language's additions, run: constants read by expressions and templates,
//! configurable ones given per run through the run's configuration and never by its
//! input, required inputs refused before anything is
//! saved, a `fail` node that fails the run with its own outcome, and mapped nodes.

use crate::util::root;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use switchyard::graph::Server;
use switchyard::run::{Outcome, RunError, Runner};
use switchyard::store::{MemoryStore, Status};
use switchyard::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};

fn runner() -> Runner {
    let path = root().join("tests/fixtures/run/language.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    Runner::new(graph, Arc::new(MemoryStore::new()))
}

fn finished(response: &str, steps: u64) -> Outcome {
    Outcome::Finished {
        outcome: "done".into(),
        response: Some(response.into()),
        steps,
    }
}

#[tokio::test]
async fn constants_are_read_by_routes_expressions_and_templates() {
    let r = runner();
    let out = r.start("t", json!({ "goal": "tea" })).await.unwrap();
    assert_eq!(out, finished("3/3: goal: tea, step 1, step 2, step 3", 5));
    // The state shows the value the run used.
    assert_eq!(
        r.threads().state("t", None).await.unwrap().0,
        json!({
            "goal": "tea",
            "steps": 3,
            "log": ["goal: tea", "step 1", "step 2", "step 3"],
            "MAX_TOOL_STEPS": 3,
            "PREFIX": "step"
        })
    );
}

#[tokio::test]
async fn a_runs_configuration_gives_a_configurable_value_and_no_input_sets_a_constant() {
    let store: Arc<dyn switchyard::store::Store> = Arc::new(MemoryStore::new());
    let path = root().join("tests/fixtures/run/language.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    let configured = |values: Json| {
        Runner::new(graph.clone(), store.clone())
            .with_configuration(values.as_object().unwrap().clone())
    };
    let out = configured(json!({ "MAX_TOOL_STEPS": 1 }))
        .start("t", json!({ "goal": "tea" }))
        .await
        .unwrap();
    assert_eq!(out, finished("1/1: goal: tea, step 1", 3));
    // Refused before anything is saved: a value of the wrong type or out of bounds,
    // a value for a constant or for no configurable; a constant or a configurable
    // value in the input.
    let refusals = [
        (
            json!({ "MAX_TOOL_STEPS": "many" }),
            json!({ "goal": "tea" }),
        ),
        (json!({ "MAX_TOOL_STEPS": 50 }), json!({ "goal": "tea" })),
        (json!({ "MAX_TOOL_STEPS": 0 }), json!({ "goal": "tea" })),
        (json!({ "PREFIX": "x" }), json!({ "goal": "tea" })),
        (json!({ "MAX_TOOL_STEP": 2 }), json!({ "goal": "tea" })),
        (json!({}), json!({ "goal": "tea", "MAX_TOOL_STEPS": 1 })),
        (json!({}), json!({ "goal": "tea", "PREFIX": "x" })),
    ];
    let mut said = Vec::new();
    for (configuration, input) in refusals {
        let err = configured(configuration)
            .start("u", input)
            .await
            .unwrap_err();
        said.push(err.to_string());
    }
    assert_eq!(
        said,
        [
            "the configuration is refused: `MAX_TOOL_STEPS` is a configurable `int` of graph `language`, and \"many\" is not one",
            "the configuration is refused: `MAX_TOOL_STEPS` of graph `language`: 50 is above its most, 10",
            "the configuration is refused: `MAX_TOOL_STEPS` of graph `language`: 0 is below its least, 1",
            "the configuration is refused: `PREFIX` is a constant of graph `language`, not configurable (declare it under `[configurable]` to let a run choose it)",
            "the configuration is refused: graph `language` has no configurable `MAX_TOOL_STEP`; did you mean `MAX_TOOL_STEPS`? (its configurable values: `MAX_TOOL_STEPS`)",
            "the input is refused: `MAX_TOOL_STEPS` is configurable: a run's configuration gives it (`context` or `config.configurable`; `switchyard run --context`), not its input",
            "the input is refused: `PREFIX` is a constant of graph `language`: no run sets it (declare it under `[configurable]` to let a run choose it)",
        ]
    );
    let r = configured(json!({}));
    assert!(matches!(
        r.threads().state("u", None).await,
        Err(RunError::UnknownThread(_))
    ));
    // A person's edit cannot change one in the middle of a thread.
    let err = r
        .threads()
        .update("t", json!({ "MAX_TOOL_STEPS": 9 }), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the update is refused: `MAX_TOOL_STEPS` is a constant of the graph: no update sets it (a run's configuration gives a configurable one)"
    );
    // The input checkpoint, the input's record and three nodes': nothing of the
    // refused update.
    assert_eq!(r.threads().history("t").await.unwrap().len(), 5);
    // The next run without a configuration has the graph's value again.
    let out = r.start("t", json!({ "goal": "tea" })).await.unwrap();
    assert_eq!(
        out,
        finished("3/3: goal: tea, step 1, goal: tea, step 2, step 3", 4)
    );
    assert_eq!(
        r.threads().state("t", None).await.unwrap().0["MAX_TOOL_STEPS"],
        json!(3)
    );
}

#[tokio::test]
async fn a_missing_required_input_is_refused_before_anything_is_saved() {
    let r = runner();
    let err = r.start("t", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the input is refused: the graph requires a field in every run's input, and it has no `goal` (string)"
    );
    assert!(matches!(
        r.check("t", switchyard::run::Go::Start(json!({}))).await,
        Err(RunError::Input(_))
    ));
    assert!(matches!(
        r.threads().state("t", None).await,
        Err(RunError::UnknownThread(_))
    ));
    // Every run, not only the first: a chat's next message is an input too.
    r.start("t", json!({ "goal": "tea" })).await.unwrap();
    let err = r.start("t", json!({ "steps": 0 })).await.unwrap_err();
    assert!(matches!(err, RunError::Input(_)), "{err}");
    // The first run's seven records (its input checkpoint, its input's and five
    // nodes'), nothing of the second.
    assert_eq!(r.threads().history("t").await.unwrap().len(), 7);
}

#[tokio::test]
async fn a_fail_node_fails_the_run_with_its_outcome_and_message() {
    let mut r = runner();
    let mut events = r.events();
    let err = r.start("t", json!({ "goal": "" })).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the run failed at `refuse` (no_goal): the goal is empty (after 0 of 3 steps)"
    );
    assert!(matches!(
        &err,
        RunError::Failed { node, outcome, .. } if node == "refuse" && outcome == "no_goal"
    ));
    let (state, last) = r.threads().state("t", None).await.unwrap();
    assert_eq!(state["log"], json!(["goal: ", "refused"]));
    assert_eq!(
        (last.status, last.outcome.as_deref(), last.node.as_deref()),
        (Status::Failed, Some("no_goal"), Some("refuse"))
    );
    assert_eq!(
        last.error.as_deref(),
        Some(&json!({ "node": "refuse", "message": "the goal is empty (after 0 of 3 steps)" }))
    );
    drop(r);
    let mut finished = None;
    while let Some(e) = events.recv().await {
        let line = serde_json::to_value(&e).unwrap();
        if line["event"] == "run_finished" {
            finished = Some(line);
        }
    }
    let finished = finished.expect("a run_finished event");
    assert_eq!(
        (&finished["status"], &finished["outcome"]),
        (&json!("failed"), &json!("no_goal"))
    );
}

/// File tools that answer after a delay that shrinks with the path's position, so later
/// items finish first, counting how many calls are in flight at once.
struct SlowFiles {
    in_flight: AtomicUsize,
    most: AtomicUsize,
    /// Every call's idempotency key.
    keys: std::sync::Mutex<Vec<String>>,
    /// Delays drawn from this seed when set, else later paths are quicker.
    seed: Option<u64>,
}

impl SlowFiles {
    fn new(seed: Option<u64>) -> Arc<Self> {
        Arc::new(SlowFiles {
            in_flight: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            keys: std::sync::Mutex::default(),
            seed,
        })
    }
}

#[async_trait::async_trait]
impl ToolClient for SlowFiles {
    async fn list_tools(&self, _server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        Ok(Vec::new())
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        let path = request.arguments["path"].as_str().unwrap_or("").to_string();
        self.keys
            .lock()
            .unwrap()
            .push(request.idempotency_key.clone());
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let rank = path.bytes().map(u64::from).sum::<u64>();
        let delay = match self.seed {
            Some(seed) => (seed.wrapping_mul(6364136223846793005).wrapping_add(rank) >> 33) % 7,
            None => 30u64.saturating_sub(rank % 30),
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if path == "missing" {
            return Err(ToolError {
                message: format!("no file `{path}`"),
                transient: false,
                asked: None,
                unsent: false,
            });
        }
        Ok(ToolReply {
            content: match request.tool.as_str() {
                "read_file" => json!({ "path": path, "text": format!("text of {path}") }),
                _ => json!(path.len()),
            },
            is_error: false,
            ..Default::default()
        })
    }
}

fn map_runner(tools: Arc<SlowFiles>) -> Runner {
    let path = root().join("tests/fixtures/run/map.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    Runner::new(graph, Arc::new(MemoryStore::new())).with_tools(tools)
}

#[tokio::test]
async fn a_map_runs_once_per_item_and_keeps_the_items_order() {
    let tools = SlowFiles::new(None);
    let r = map_runner(tools.clone());
    let out = r
        .start("t", json!({ "paths": ["a", "bb", "ccc", "dddd"] }))
        .await
        .unwrap();
    assert_eq!(out, finished("4 read, sizes 1,2,3,4", 3));
    let state = r.threads().state("t", None).await.unwrap().0;
    assert_eq!(
        state["contents"],
        json!([
            { "path": "a", "text": "text of a" },
            { "path": "bb", "text": "text of bb" },
            { "path": "ccc", "text": "text of ccc" },
            { "path": "dddd", "text": "text of dddd" },
        ])
    );
    // Each item's audit record, in item order too.
    let audited: Vec<&Json> = state["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["arguments"]["path"])
        .collect();
    assert_eq!(
        audited,
        [&json!("a"), &json!("bb"), &json!("ccc"), &json!("dddd")]
    );
    // `read` two at a time, `stat` three: never more.
    assert_eq!(tools.most.load(Ordering::SeqCst), 3);
    // Each call's idempotency key names its thread, run, step, call and item.
    let mut keys = tools.keys.lock().unwrap().clone();
    keys.sort();
    assert_eq!(
        keys,
        [
            "t/0/1/0/0",
            "t/0/1/0/1",
            "t/0/1/0/2",
            "t/0/1/0/3",
            "t/0/2/0/0",
            "t/0/2/0/1",
            "t/0/2/0/2",
            "t/0/2/0/3"
        ]
    );
    // One step (and one record) per mapped node.
    let nodes: Vec<Option<String>> = r
        .threads()
        .history("t")
        .await
        .unwrap()
        .iter()
        .map(|c| c.node.as_deref().map(str::to_string))
        .collect();
    assert_eq!(
        nodes,
        [
            None,
            None,
            Some("read".into()),
            Some("stat".into()),
            Some("done".into())
        ]
    );
}

#[tokio::test]
async fn a_failed_item_is_kept_or_fails_the_node_as_the_map_says() {
    let r = map_runner(SlowFiles::new(None));
    let out = r
        .start("t", json!({ "paths": ["a", "missing", "c"] }))
        .await
        .unwrap();
    // `stat` fails the node on its second item, and takes its `on_error` route.
    assert_eq!(
        out,
        Outcome::Finished {
            outcome: "failed".into(),
            response: Some("item 2 of 3: `stat_file`: no file `missing`".into()),
            steps: 3,
        }
    );
    // `read` kept the failure in its place.
    assert_eq!(
        r.threads().state("t", None).await.unwrap().0["contents"],
        json!([
            { "path": "a", "text": "text of a" },
            { "error": "`read_file`: no file `missing`" },
            { "path": "c", "text": "text of c" },
        ])
    );
    // An empty list maps to an empty list, with no call.
    let out = r.start("u", json!({ "paths": [] })).await.unwrap();
    assert_eq!(out, finished("0 read, sizes ", 3));
}

#[tokio::test]
async fn a_map_gives_the_same_state_and_history_whatever_order_items_finish_in() {
    let paths = json!({ "paths": ["a", "bb", "missing", "dddd", "e", "ff"] });
    let mut first: Option<(Json, Vec<Json>)> = None;
    for seed in 0..100u64 {
        let r = map_runner(SlowFiles::new(Some(seed)));
        r.start("t", paths.clone()).await.unwrap();
        let state = r.threads().state("t", None).await.unwrap().0;
        let history: Vec<Json> = r
            .threads().history("t")
            .await.unwrap()
            .iter()
            .map(|c| json!({ "node": c.node.as_deref(), "next": c.next.as_deref(), "writes": c.writes.iter().map(|w| json!([&*w.field, &*w.value])).collect::<Vec<_>>() }))
            .collect();
        // Audit records hold each call's duration: compared without it.
        let scrub = |mut v: Json| {
            if let Some(a) = v.get_mut("audit").and_then(Json::as_array_mut) {
                for r in a {
                    r["duration_ms"] = json!(0);
                }
            }
            v
        };
        let state = scrub(state);
        let history: Vec<Json> = history
            .into_iter()
            .map(|mut h| {
                for w in h["writes"].as_array_mut().unwrap() {
                    if w[0] == "audit" {
                        w[1]["duration_ms"] = json!(0);
                    }
                }
                h
            })
            .collect();
        match &first {
            None => first = Some((state, history)),
            Some((s, h)) => {
                assert_eq!(&state, s, "seed {seed}");
                assert_eq!(&history, h, "seed {seed}");
            }
        }
    }
}

/// Search tools for the parallel graph: `web` and `docs` answer after a delay drawn
/// from `seed` (the docs search first, when none is given), and the first call can
/// ask the run to stop.
struct Search {
    seed: Option<u64>,
    stop: std::sync::Mutex<Option<switchyard::run::StopHandle>>,
}

#[async_trait::async_trait]
impl ToolClient for Search {
    async fn list_tools(&self, _server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        Ok(Vec::new())
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        if let Some(stop) = self.stop.lock().unwrap().take() {
            stop.stop();
        }
        let q = request.arguments["q"].as_str().unwrap_or("").to_string();
        let rank = q.bytes().map(u64::from).sum::<u64>() + request.tool.len() as u64;
        let delay = match self.seed {
            Some(seed) => (seed.wrapping_mul(6364136223846793005).wrapping_add(rank) >> 33) % 5,
            None if request.tool == "web" => 20,
            None => 1,
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        Ok(ToolReply {
            content: match request.tool.as_str() {
                "web" => json!({ "title": format!("Web about {q}") }),
                _ => json!({ "q": q, "hits": q.len() }),
            },
            is_error: false,
            ..Default::default()
        })
    }
}

fn parallel_runner(seed: Option<u64>) -> Runner {
    let path = root().join("tests/fixtures/run/parallel.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    Runner::new(graph, Arc::new(MemoryStore::new())).with_tools(Arc::new(Search {
        seed,
        stop: std::sync::Mutex::new(None),
    }))
}

const PARALLEL_DONE: &str = "plan tea; counted; web: Web about tea; merged 2 docs (count 2)";

#[tokio::test]
async fn parallel_branches_merge_in_declaration_order_and_meet_at_the_join() {
    let mut r = parallel_runner(None);
    let mut events = r.events();
    let out = r.start("t", json!({ "topic": "tea" })).await.unwrap();
    assert_eq!(out, finished(PARALLEL_DONE, 7));
    let state = r.threads().state("t", None).await.unwrap().0;
    assert_eq!(
        state["docs"],
        json!([{ "q": "tea guide", "hits": 9 }, { "q": "tea api", "hits": 7 }])
    );
    // One record per node, in declaration order within each superstep; inside the
    // branches each names every branch's next node and the join.
    let records: Vec<(Option<String>, Option<String>, u64)> = r
        .threads()
        .history("t")
        .await
        .unwrap()
        .iter()
        .map(|c| {
            (
                c.node.as_deref().map(str::to_string),
                c.next.as_deref().map(str::to_string),
                c.step,
            )
        })
        .collect();
    let at = |n: Option<&str>, next: &str, step: u64| {
        (n.map(str::to_string), Some(next.to_string()), step)
    };
    assert_eq!(
        records,
        [
            at(None, "plan", 0),
            at(None, "plan", 0),
            at(Some("plan"), "search_web,search_docs,count;merge", 1),
            at(
                Some("search_web"),
                "summarize_web,search_docs,count;merge",
                2
            ),
            at(Some("search_docs"), "summarize_web,count;merge", 3),
            at(Some("count"), "summarize_web;merge", 4),
            at(Some("summarize_web"), "merge", 5),
            at(Some("merge"), "done", 6),
            (Some("done".into()), None, 7),
        ]
    );
    drop(r);
    let mut started = Vec::new();
    while let Some(e) = events.recv().await {
        let e = serde_json::to_value(&e).unwrap();
        if e["event"] == "node_started" {
            started.push(format!("{}@{}", e["node"].as_str().unwrap(), e["step"]));
        }
    }
    assert_eq!(
        started,
        [
            "plan@1",
            "search_web@2",
            "search_docs@3",
            "count@4",
            "summarize_web@5",
            "merge@6",
            "done@7"
        ]
    );
}

#[tokio::test]
async fn a_stop_between_supersteps_resumes_every_branch_where_it_stood() {
    let path = root().join("tests/fixtures/run/parallel.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    let store = Arc::new(MemoryStore::new());
    let r = Runner::new(graph.clone(), store.clone());
    let tools = Search {
        seed: None,
        stop: std::sync::Mutex::new(Some(r.stop_handle())),
    };
    let r = r.with_tools(Arc::new(tools));
    // The stop is asked during the first superstep: it completes, and the run stops
    // before the next.
    let out = r.start("t", json!({ "topic": "tea" })).await.unwrap();
    assert!(matches!(out, Outcome::Stopped { .. }), "{out:?}");
    let (_, last) = r.threads().state("t", None).await.unwrap();
    assert_eq!(
        (last.status, last.next.as_deref()),
        (Status::Stopped, Some("summarize_web;merge"))
    );
    let r = Runner::new(graph, store).with_tools(Arc::new(Search {
        seed: None,
        stop: std::sync::Mutex::new(None),
    }));
    let out = r.resume("t", None, false).await.unwrap();
    assert_eq!(out, finished(PARALLEL_DONE, 7));
}

#[tokio::test]
async fn branches_and_a_map_give_the_same_state_and_history_over_100_runs() {
    let mut first: Option<(Json, Vec<Json>)> = None;
    for seed in 0..100u64 {
        let r = parallel_runner(Some(seed));
        r.start("t", json!({ "topic": "tea" })).await.unwrap();
        let state = r.threads().state("t", None).await.unwrap().0;
        let history: Vec<Json> = r
            .threads().history("t")
            .await.unwrap()
            .iter()
            .map(|c| {
                json!({
                    "node": c.node.as_deref(),
                    "next": c.next.as_deref(),
                    "step": c.step,
                    "writes": c.writes.iter().map(|w| json!([&*w.field, &*w.value])).collect::<Vec<_>>(),
                })
            })
            .collect();
        match &first {
            None => first = Some((state, history)),
            Some((s, h)) => {
                assert_eq!(&state, s, "seed {seed}");
                assert_eq!(&history, h, "seed {seed}");
            }
        }
    }
}

#[tokio::test]
async fn interrupts_inside_branches_are_listed_together_each_answered_by_its_reference() {
    let path = root().join("tests/fixtures/run/parallel_ask.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    let store = Arc::new(MemoryStore::new());
    let r = Runner::new(graph, store);
    // Both questions of the superstep are pending, listed in one pause, once the
    // other branch's step is applied.
    let out = r.start("t", json!({})).await.unwrap();
    assert_eq!(
        out,
        Outcome::Interrupted {
            node: "ask_first".into(),
            payload: json!({ "question": "first?", "reference": "q1" }),
        }
    );
    let (state, last) = r.threads().state("t", None).await.unwrap();
    assert_eq!(state["log"], json!(["plan", "worked"]));
    assert_eq!(
        (last.status, last.next.as_deref()),
        (Status::Interrupted, Some("ask_first,ask_second;join"))
    );
    let pending = last.pending.unwrap();
    assert_eq!(
        pending
            .others
            .iter()
            .map(|o| (o.node.to_string(), o.reference.clone()))
            .collect::<Vec<_>>(),
        [("ask_second".to_string(), Some("q2".to_string()))]
    );
    // An answer with a reference no pending interrupt has is refused; nothing changes.
    let err = r
        .resume(
            "t",
            Some(json!({ "reference": "q9", "confirmed": true })),
            false,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::WrongReference { .. }), "{err}");
    // The second answered first, by its reference: its branch reaches the join, and
    // the first asks again, alone.
    let out = r
        .resume(
            "t",
            Some(json!({ "reference": "q2", "confirmed": false })),
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        Outcome::Interrupted {
            node: "ask_first".into(),
            payload: json!({ "question": "first?", "reference": "q1" }),
        }
    );
    assert!(
        r.threads()
            .state("t", None)
            .await
            .unwrap()
            .1
            .pending
            .unwrap()
            .others
            .is_empty()
    );
    let out = r
        .resume(
            "t",
            Some(json!({ "reference": "q1", "confirmed": true })),
            false,
        )
        .await
        .unwrap();
    // Six node executions: plan; ask_first, work and ask_second; ask_first again;
    // join.
    assert_eq!(
        out,
        finished("plan, worked, second answered, first answered", 6)
    );
    let state = r.threads().state("t", None).await.unwrap().0;
    assert_eq!(
        (&state["first"], &state["second"]),
        (
            &json!({ "reference": "q1", "confirmed": true }),
            &json!({ "reference": "q2", "confirmed": false })
        )
    );
}

#[tokio::test]
async fn a_subgraph_runs_on_its_own_thread_and_its_interrupt_pauses_the_parent() {
    let path = root().join("tests/fixtures/run/parent.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    let store = Arc::new(MemoryStore::new());
    let mut r = Runner::new(graph, store.clone());
    // The child's thread, read with the child's graph.
    let child_graph = root().join("tests/fixtures/run/child.toml");
    let child_runner = Runner::new(
        Arc::new(switchyard::load_graph(&child_graph).unwrap()),
        store,
    );
    let mut events = r.events();
    let out = r.start("t", json!({ "subject": "tea" })).await.unwrap();
    // The child's question, at the parent's graph node.
    assert_eq!(
        out,
        Outcome::Interrupted {
            node: "delegate".into(),
            payload: json!({ "question": "write about tea!?", "reference": "c1" }),
        }
    );
    // The child's checkpoints are its thread's, named by the path.
    let (child, last) = child_runner
        .threads()
        .state("t/delegate", None)
        .await
        .unwrap();
    assert_eq!(
        child,
        json!({ "topic": "tea!", "answer": null, "summary": "" })
    );
    assert_eq!(
        (last.status, last.node.as_deref()),
        (Status::Interrupted, Some("ask"))
    );
    // A wrong answer is refused by the child, and nothing changes.
    let err = r
        .resume("t", Some(json!({ "reference": "c1" })), false)
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::InvalidPayload { .. }), "{err}");
    let out = r
        .resume(
            "t",
            Some(json!({ "reference": "c1", "confirmed": true })),
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        finished("about tea! (confirmed) (prepare, delegated)", 3)
    );
    assert_eq!(
        r.threads().state("t", None).await.unwrap().0["report"],
        json!("about tea! (confirmed)")
    );
    assert_eq!(
        child_runner
            .threads()
            .state("t/delegate", None)
            .await
            .unwrap()
            .1
            .status,
        Status::Finished
    );
    drop(r);
    // The child's events come wrapped, naming the node.
    let mut wrapped = Vec::new();
    while let Some(e) = events.recv().await {
        let e = serde_json::to_value(&e).unwrap();
        if e["event"] == "subgraph" {
            assert_eq!(e["node"], "delegate");
            wrapped.push(e["inner"]["event"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(wrapped.first().map(String::as_str), Some("run_started"));
    assert!(
        wrapped.iter().filter(|e| *e == "run_finished").count() == 2,
        "{wrapped:?}"
    );
}

#[tokio::test]
async fn a_stop_inside_a_subgraph_stops_both_and_a_resume_goes_on_in_the_child() {
    let path = root().join("tests/fixtures/run/parent_search.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    let store = Arc::new(MemoryStore::new());
    let r = Runner::new(graph.clone(), store.clone());
    let tools = Search {
        seed: None,
        stop: std::sync::Mutex::new(Some(r.stop_handle())),
    };
    let r = r.with_tools(Arc::new(tools));
    // The stop is asked during the child's search: the child stops after it, and the
    // parent before its graph node.
    let out = r.start("t", json!({ "topic": "tea" })).await.unwrap();
    assert!(
        matches!(&out, Outcome::Stopped { next: Some(n), .. } if n == "delegate"),
        "{out:?}"
    );
    let r = Runner::new(graph, store.clone()).with_tools(Arc::new(Search {
        seed: None,
        stop: std::sync::Mutex::new(None),
    }));
    let out = r.resume("t", None, false).await.unwrap();
    assert_eq!(out, finished("found: Web about tea", 2));
    // The child went on from where it stood: one search in its history, not two.
    let child_graph = root().join("tests/fixtures/run/child_search.toml");
    let child = Runner::new(
        Arc::new(switchyard::load_graph(&child_graph).unwrap()),
        store,
    );
    let searches = child
        .threads()
        .history("t/delegate")
        .await
        .unwrap()
        .iter()
        .filter(|c| c.node.as_deref() == Some("search"))
        .count();
    assert_eq!(searches, 1);
}

#[tokio::test]
async fn a_route_case_that_names_several_nodes_forks() {
    let path = root().join("tests/fixtures/run/parallel_route.toml");
    let graph = Arc::new(switchyard::load_graph(&path).unwrap());
    let r = Runner::new(graph, Arc::new(MemoryStore::new()));
    assert_eq!(
        r.start("w", json!({ "wide": true })).await.unwrap(),
        finished("decide, left, right", 4)
    );
    let forked = r.threads().history("w").await.unwrap()[2].clone();
    assert_eq!(
        (forked.node.as_deref(), forked.next.as_deref()),
        (Some("decide"), Some("left,right;join"))
    );
    assert_eq!(
        r.start("n", json!({ "wide": false })).await.unwrap(),
        finished("decide, narrow", 3)
    );
}
