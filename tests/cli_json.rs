//! `run --json=2`: NDJSON format 2 says what format 1 says, in about half the bytes
//! (`schemas/events.v2.schema.json`). Each graph is run twice on one thread name,
//! once in each format; format 2's lines, filled back out by the rules the schema
//! states, are format 1's lines (times and durations aside).

use crate::util::{event_line, event_line_v2, switchyard};
use serde_json::{Map, Value as Json, json};

/// Runs `args` with `--json=FORMAT` added; its standard output and exit code.
fn run(args: &[&str], format: &str) -> (String, i32) {
    run_with(args, format, &[])
}

/// `run`, with `env` set.
fn run_with(args: &[&str], format: &str, env: &[(&str, &str)]) -> (String, i32) {
    let flag = format!("--json={format}");
    let mut all = args.to_vec();
    all.extend(["--thread", "j", "--store", "none", &flag]);
    let mut cmd = switchyard(&all);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let out = cmd.run();
    (out.stdout, out.code)
}

/// Runs `args` in both formats and checks that format 2, filled back out, is
/// format 1 (times and durations aside); both exit `code`. Format 2's lines.
#[track_caller]
fn same_in_both(args: &[&str], code: i32, env: &[(&str, &str)]) -> Vec<Json> {
    let (one, code_one) = run_with(args, "1", env);
    let (two, code_two) = run_with(args, "2", env);
    assert_eq!((code_one, code_two), (code, code), "{args:?}\n{one}\n{two}");
    let one: Vec<Json> = one.lines().map(|l| steady(event_line(l))).collect();
    let two: Vec<Json> = two.lines().map(event_line_v2).collect();
    let filled: Vec<Json> = filled_out(&two).into_iter().map(steady).collect();
    assert_eq!(filled, one, "{args:?}");
    two
}

/// Format 2's lines as format 1 writes them: the envelope on every line, the
/// defaults written, a route carried on its `node_finished` a line of its own.
fn filled_out(lines: &[Json]) -> Vec<Json> {
    let mut out = Vec::new();
    let (mut base, mut thread, mut run) = (0, Json::Null, Json::Null);
    for line in lines {
        let mut e = line.as_object().expect("an object").clone();
        if e["event"] == "run_started" {
            assert_eq!(e["v"], json!(2), "{line}");
            base = e["ts"].as_u64().expect("ts");
            thread = e["thread"].clone();
            run = e["run"].clone();
        } else {
            assert!(
                !e.contains_key("v") && !e.contains_key("thread") && !e.contains_key("run"),
                "{line}"
            );
            let t = e.shift_remove("t").expect("t").as_u64().expect("t");
            e.insert("ts".into(), json!(base + t));
            e.insert("thread".into(), thread.clone());
            e.insert("run".into(), run.clone());
        }
        e.insert("v".into(), json!(1));
        let default = |e: &mut Map<String, Json>, key: &str, value: Json| {
            assert_ne!(e.get(key), Some(&value), "a default written out: {line}");
            e.entry(key).or_insert(value);
        };
        let mut route = None;
        match e["event"].as_str().expect("event") {
            "node_finished" => {
                default(&mut e, "skipped", json!(false));
                if let Some(to) = e.shift_remove("to") {
                    let case = e.shift_remove("case").unwrap_or(Json::Null);
                    let mut r = Map::new();
                    for key in ["v", "ts", "thread", "run"] {
                        r.insert(key.into(), e[key].clone());
                    }
                    r.insert("event".into(), json!("route_taken"));
                    r.insert("from".into(), e["node"].clone());
                    r.insert("to".into(), to);
                    r.insert("case".into(), case);
                    route = Some(Json::Object(r));
                }
            }
            "route_taken" => default(&mut e, "case", Json::Null),
            "tool_call" => {
                default(&mut e, "attempt", json!(1));
                default(&mut e, "is_error", json!(false));
            }
            "llm_invocation" => {
                default(&mut e, "attempt", json!(1));
                default(&mut e, "cache_hit", json!(false));
            }
            _ => {}
        }
        out.push(Json::Object(e));
        out.extend(route);
    }
    out
}

/// A line with what moves from run to run (the clock, durations, pids) set to 0.
fn steady(mut e: Json) -> Json {
    for key in ["ts", "duration_us", "duration_ms", "latency_ms", "pid"] {
        if let Some(v) = e.get_mut(key)
            && v.is_u64()
        {
            *v = json!(0);
        }
    }
    e
}

#[test]
fn json_format_2_says_what_format_1_says_in_half_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // A node whose `only_if` is false, so `skipped` is written.
    let skip = dir.path().join("skip.toml");
    std::fs::write(
        &skip,
        r#"[graph]
name = "skip"
entry = "maybe"

[state.n]
type = "int"

[nodes.maybe]
kind = "set"
only_if = "n > 5"
set = { n = "n + 1" }
next = "done"

[nodes.done]
kind = "finalize"
outcome = "done"
response = "{{ n }}"
"#,
    )
    .unwrap();
    let skip = skip.display().to_string();
    let graphs: [(&[&str], i32); 6] = [
        // Routes with cases, and a route's `default`.
        (
            &[
                "run",
                "tests/fixtures/run/routes.toml",
                "--input",
                r#"{"n": 20}"#,
            ],
            0,
        ),
        // Hundreds of steps.
        (&["run", "tests/fixtures/run/count.toml"], 0),
        // Step limits and `next` (a route with no case).
        (&["run", "tests/fixtures/run/loop.toml"], 0),
        // A fork (three routes from one node), a tool call that fails, a node failed.
        (
            &[
                "run",
                "tests/fixtures/run/parallel.toml",
                "--input",
                r#"{"topic": "x"}"#,
            ],
            1,
        ),
        // A pause: the run ends at an interrupt.
        (&["run", "tests/fixtures/run/answer.toml"], 4),
        (&["run", &skip, "--input", r#"{"n": 1}"#], 0),
    ];
    for (args, code) in graphs {
        same_in_both(args, code, &[]);
    }

    // Bytes: a long run of small steps, the case the format is for.
    let (one, _) = run(&["run", "tests/fixtures/run/count.toml"], "1");
    let (two, _) = run(&["run", "tests/fixtures/run/count.toml"], "2");
    let ratio = two.len() as f64 / one.len() as f64;
    assert!(ratio < 0.5, "format 2 is {ratio:.2} of format 1's bytes");
}

/// A model node's events (`llm_retry`, `llm_invocation`, whose defaults format 2
/// leaves out), against a scripted OpenAI-compatible server that fails the first
/// request of each run.
#[tokio::test]
async fn json_format_2_says_what_format_1_says_of_a_model_node() {
    use crate::llm::server::{Server, completion, failure};
    let reply = r#"{"id":"a1","kind":"click","target":"Search"}"#;
    let server = Server::start(vec![
        failure(503, "busy", &[]),
        completion(reply, 12, 7),
        failure(503, "busy", &[]),
        completion(reply, 12, 7),
    ])
    .await;
    let url = server.url().to_string();
    tokio::task::spawn_blocking(move || {
        let env = [("OPENAI_BASE_URL", url.as_str()), ("OPENAI_API_KEY", "k")];
        let args = [
            "run",
            "tests/fixtures/llm/plan.toml",
            "--input",
            r#"{"goal": "open the docs"}"#,
        ];
        let two = same_in_both(&args, 0, &env);
        // The transport's retry is its own line; the invocation (the node's first
        // try) leaves its defaults out.
        let of = |event: &str| two.iter().filter(|e| e["event"] == event).count();
        assert_eq!((of("llm_retry"), of("llm_invocation")), (1, 1));
        let invocation = two.iter().find(|e| e["event"] == "llm_invocation").unwrap();
        assert!(invocation.get("attempt").is_none() && invocation.get("cache_hit").is_none());
    })
    .await
    .unwrap();
    assert_eq!(server.seen().len(), 4);
}

#[test]
fn json_takes_format_1_or_2_and_nothing_else() {
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/loop.toml",
        "--store",
        "none",
        "--json=3",
    ])
    .run()
    .code(2);
    assert!(
        out.stderr
            .starts_with("error: invalid value '3' for '--json[=<FORMAT>]': 3 is not in 1..=2\n"),
        "{}",
        out.stderr
    );
    // `--json` with no value is format 1, and takes no value after a space.
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/loop.toml",
        "--store",
        "none",
        "--json",
    ])
    .run()
    .code(0);
    let first = event_line(out.stdout.lines().next().unwrap());
    assert_eq!(first["v"], json!(1));
}
