//! `switchyard run`, `resume`, `state`, `history` and `fork` as a user runs them:
//! exit codes, what goes to stdout and stderr, durable threads across processes,
//! SIGKILL and Ctrl-C mid-run, answering interrupts at a terminal.

use crate::util::{root, switchyard};
use serde_json::{Value as Json, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn store_flag(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("checkpoints.db").display())
}

#[track_caller]
fn json_of(text: &str) -> Json {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[test]
fn run_prints_the_response_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        r#"{"n": 2}"#,
        "--thread",
        "r",
        "--store",
        &store,
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "classify count_down:1 count_down:0\n");
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "started routes (thread r, run 0)"
    );
    assert!(
        out.stderr
            .contains("      classify -> count_down (small)\n"),
        "{}",
        out.stderr
    );
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("finished: zero after 4 steps, 0 tokens, "),
        "{last}"
    );
}

#[test]
fn json_mode_prints_every_event_as_one_line() {
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        r#"{"n": 20}"#,
        "--store",
        "memory",
        "--json",
    ])
    .run()
    .code(0);
    let events: Vec<Json> = out.stdout.lines().map(crate::util::event_line).collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "run_started",
            "node_started",
            "node_finished",
            "route_taken",
            "node_started",
            "node_finished",
            "run_finished"
        ]
    );
    assert_eq!(events[6]["response"], json!("20 is big"));
    assert_eq!(events[6]["outcome"], json!("big"));
    assert_eq!(out.stderr, "");
}

#[test]
fn input_comes_inline_or_from_a_file_and_bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.json");
    std::fs::write(&input, r#"{"n": 20}"#).unwrap();
    let at = format!("@{}", input.display());
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        &at,
        "--store",
        "memory",
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "20 is big\n");

    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        "{n: 1}",
        "--store",
        "memory",
    ])
    .run()
    .code(1);
    assert_eq!(
        out.stderr,
        "error: --input is not JSON\ncaused by: key must be a string at line 1 column 2\n"
    );
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        r#"{"size": 1}"#,
        "--store",
        "memory",
    ])
    .run()
    .code(2);
    assert_eq!(
        out.stderr,
        "error: the input is refused: field `size` is `string`, and the value written is an int `1`\n"
    );
}

/// A run that fails exits 1; an input or a configuration refused before the run starts
/// is the command line's mistake and exits 2, naming why and saving nothing.
#[test]
fn a_fail_node_exits_1_and_a_refused_input_or_configuration_2_naming_why() {
    let run = |input: &str, code: i32, more: &[&str]| {
        let mut args = vec![
            "run",
            "tests/fixtures/run/language.toml",
            "--input",
            input,
            "--store",
            "memory",
        ];
        args.extend_from_slice(more);
        switchyard(&args).run().code(code)
    };
    // The progress lines, then why.
    let failed = run(r#"{"goal": ""}"#, 1, &[]).stderr;
    let last: Vec<&str> = failed.lines().rev().take(2).collect();
    assert_eq!(
        last[0],
        "error: the run failed at `refuse` (no_goal): the goal is empty (after 0 of 3 steps)"
    );
    assert!(
        last[1].starts_with("failed: no_goal after 2 steps, 0 tokens, "),
        "{failed}"
    );
    // Refused before it started: nothing but why.
    assert_eq!(
        run("{}", 2, &[]).stderr,
        "error: the input is refused: the graph requires a field in every run's input, and it has no `goal` (string)\n"
    );
    assert_eq!(
        run(r#"{"goal": "tea", "PREFIX": "x"}"#, 2, &[]).stderr,
        "error: the input is refused: `PREFIX` is a constant of graph `language`: no run sets it (declare it under `[configurable]` to let a run choose it)\n"
    );
    assert_eq!(
        run(
            r#"{"goal": "tea"}"#,
            2,
            &["--context", r#"{"MAX_TOOL_STEPS": 99}"#]
        )
        .stderr,
        "error: the configuration is refused: `MAX_TOOL_STEPS` of graph `language`: 99 is above its most, 10\n"
    );
    assert_eq!(
        run(r#"{"goal": "tea"}"#, 2, &["--context", "[1]"]).stderr,
        "error: --context is a JSON object of the graph's configurable values, not `[1]`\n"
    );
    // A configuration the graph takes: the run uses it.
    let out = run(
        r#"{"goal": "tea"}"#,
        0,
        &["--context", r#"{"MAX_TOOL_STEPS": 1}"#],
    );
    assert_eq!(out.stdout, "1/1: goal: tea, step 1\n");
}

#[test]
fn an_invalid_graph_is_not_run() {
    let out = switchyard(&[
        "run",
        "tests/fixtures/check/err_dead_end.toml",
        "--store",
        "memory",
    ])
    .run()
    .code(3);
    // The same report as `validate`, and nothing ran: no checkpoint, no events.
    let validate = switchyard(&["validate", "tests/fixtures/check/err_dead_end.toml"])
        .run()
        .code(3);
    assert_eq!(out.stderr, validate.stderr);
    assert_eq!(out.stdout, "");
}

/// `pauses.toml` with a question that waits a minute instead of 30 ms.
fn patient_pauses(dir: &Path) -> String {
    let graph = dir.join("pauses.toml");
    let text = std::fs::read_to_string(root().join("tests/fixtures/run/pauses.toml")).unwrap();
    std::fs::write(
        &graph,
        text.replace("timeout = \"30ms\"", "timeout = \"1m\""),
    )
    .unwrap();
    graph.display().to_string()
}

#[test]
fn a_pause_exits_four_and_resume_state_history_continue_it() {
    let dir = tempfile::tempdir().unwrap();
    pause_resume_and_fork(&store_flag(dir.path()), &patient_pauses(dir.path()));
}

#[test]
fn a_thread_in_postgres_pauses_resumes_and_forks_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    pause_resume_and_fork(&crate::postgres::database(), &patient_pauses(dir.path()));
}

/// A thread paused, looked at, resumed, listed and forked, each by a new process.
fn pause_resume_and_fork(store_url: &str, file: &str) {
    let store = store_url.to_string();
    let quoted = if store.contains(['?', '&']) {
        format!("'{store}'")
    } else {
        store_url.to_string()
    };
    let out = switchyard(&["run", file, "--thread", "p", "--store", &store])
        .run()
        .code(4);
    assert_eq!(
        out.stdout,
        "{\"breakpoint\":\"after\",\"node\":\"prepare\"}\n"
    );
    assert!(
        out.stderr.ends_with(&format!(
            "paused at `prepare`; resume with:\n  switchyard resume {file} --thread p --store {quoted}\n"
        )),
        "{}",
        out.stderr
    );
    // The graph file is optional: the thread remembers it.
    let out = switchyard(&["resume", "--thread", "p", "--store", &store])
        .run()
        .code(4);
    assert_eq!(
        out.stdout,
        "{\"breakpoint\":\"before\",\"node\":\"fetch\"}\n"
    );
    let out = switchyard(&["resume", file, "--thread", "p", "--store", &store])
        .run()
        .code(4);
    assert_eq!(out.stdout, "{\"question\":\"go on?\"}\n");

    let state = json_of(
        &switchyard(&["state", "--thread", "p", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(state["status"], json!("interrupted"));
    assert_eq!(state["pending"]["node"], json!("ask"));
    assert_eq!(state["state"]["trail"], json!(["prepare", "recover"]));

    let out = switchyard(&[
        "resume",
        file,
        "--thread",
        "p",
        "--payload",
        r#""sure""#,
        "--store",
        &store,
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "prepare recover answered\n");
    let out = switchyard(&[
        "resume",
        file,
        "--thread",
        "p",
        "--payload",
        r#""again""#,
        "--store",
        &store,
    ])
    .run()
    .code(1);
    assert!(
        out.stderr.ends_with("error: thread `p` is finished; only a paused (interrupted or stopped) thread can be resumed\n"),
        "{}",
        out.stderr
    );

    let out = switchyard(&["history", "--thread", "p", "--store", &store])
        .run()
        .code(0);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim_end).collect();
    assert_eq!(
        lines,
        [
            " seq run  step  node -> next                 status       writes",
            "   0   0     0  (start) -> prepare           running",
            "   1   0     0  (input) -> prepare           running",
            "   2   0     1  prepare -> fetch             running      trail",
            "   3   0     1  prepare -> fetch             interrupted",
            "   4   0     1  fetch -> fetch               interrupted",
            "   5   0     2  fetch -> recover             running",
            "   6   0     3  recover -> ask               running      trail, failure",
            "   7   0     4  ask -> ask                   interrupted",
            "   8   0     4  ask -> done                  running      answer, trail",
            "   9   0     5  done                         finished:done",
        ]
    );
    let records = json_of(
        &switchyard(&["history", "--thread", "p", "--store", &store, "--json"])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(records.as_array().unwrap().len(), 10);
    assert_eq!(
        records[8]["writes"][0],
        json!({ "field": "answer", "value": "sure" })
    );

    // Fork at the question and answer it differently.
    let out = switchyard(&["fork", "--thread", "p", "--at", "7", "--store", &store])
        .run()
        .code(0);
    assert_eq!(out.stdout, "p@7\n");
    let out = switchyard(&[
        "resume",
        "--thread",
        "p@7",
        "--payload",
        r#""no""#,
        "--store",
        &store,
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "prepare recover answered\n");
    let state = json_of(
        &switchyard(&["state", "--thread", "p@7", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(state["state"]["answer"], json!("no"));
    // `resume --at` answers the question again on the thread itself: a branch from
    // there, the first answer's checkpoints kept on theirs.
    let out = switchyard(&[
        "resume",
        "--thread",
        "p",
        "--at",
        "7",
        "--payload",
        r#""maybe""#,
        "--store",
        &store,
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "prepare recover answered\n");
    let state = json_of(
        &switchyard(&["state", "--thread", "p", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(state["state"]["answer"], json!("maybe"));
    let state = json_of(
        &switchyard(&["state", "--thread", "p", "--at", "7", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(state["status"], json!("interrupted"));
    assert_eq!(state["state"]["answer"], json!(null));
    let out = switchyard(&["history", "--thread", "p", "--store", &store])
        .run()
        .code(0);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim_end).collect();
    assert_eq!(
        lines[10..],
        [
            "   9   0     5  done                         finished:done",
            "  10   1     4  ask -> done                  running      answer, trail  (follows 7)",
            "  11   1     5  done                         finished:done",
        ]
    );
}

#[test]
fn unknown_threads_and_stores_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    let out = switchyard(&["state", "--thread", "ghost", "--store", &store])
        .run()
        .code(1);
    assert_eq!(
        out.stderr,
        "error: thread `ghost` has no checkpoints in this store\n"
    );
    let out = switchyard(&["history", "--thread", "ghost", "--store", "redis:x"])
        .run()
        .code(2);
    assert!(
        out.stderr
            .contains("`redis:x` is not `sqlite:PATH`, `postgres://URL` or `memory`"),
        "{}",
        out.stderr
    );
}

fn rows(db: &Path) -> i64 {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return 0;
    };
    conn.query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
        .unwrap_or(0)
}

/// Starts a long count in a child and returns it once it has written `rows_before` checkpoints.
fn start_count(db: &Path, thread: &str, rows_before: i64) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "run",
            "tests/fixtures/run/count.toml",
            "--input",
            r#"{"goal": 3000}"#,
            "--thread",
            thread,
        ])
        .arg("--store")
        .arg(format!("sqlite:{}", db.display()))
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows(db) < rows_before {
        assert!(Instant::now() < deadline, "the child wrote no checkpoints");
        std::thread::sleep(Duration::from_millis(2));
    }
    child
}

const COUNT_DONE: &str = "n=3000 total=4501500 checks=3000 evens=1500\n";

#[test]
fn a_run_killed_mid_way_resumes_from_sqlite_to_the_same_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("checkpoints.db");
    let store = store_flag(dir.path());
    let mut child = start_count(&db, "k", 300);
    // While it runs, nobody else may drive the thread: the node would run twice.
    let out = switchyard(&["resume", "--thread", "k", "--store", &store])
        .run()
        .code(1);
    assert_eq!(
        out.stderr,
        format!(
            "error: thread `k` is being run by process {}; wait for it to pause or finish, or stop it (Ctrl-C) first\n",
            child.id()
        )
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Its claim died with it: the resume below takes it over.
    let state = json_of(
        &switchyard(&["state", "--thread", "k", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(
        state["status"],
        json!("running"),
        "killed before it finished"
    );
    let killed_at = state["state"]["n"].as_i64().unwrap();
    assert!(killed_at < 3000, "{killed_at}");

    let out = switchyard(&["resume", "--thread", "k", "--store", &store])
        .run()
        .code(0);
    assert_eq!(out.stdout, COUNT_DONE);
    let resumed = json_of(
        &switchyard(&["state", "--thread", "k", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );

    let out = switchyard(&[
        "run",
        "tests/fixtures/run/count.toml",
        "--input",
        r#"{"goal": 3000}"#,
        "--thread",
        "whole",
        "--store",
        &store,
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, COUNT_DONE);
    let whole = json_of(
        &switchyard(&["state", "--thread", "whole", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(resumed["state"], whole["state"]);
    assert_eq!(resumed["step"], whole["step"]);
}

#[test]
fn ctrl_c_stops_at_a_node_boundary_and_resume_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("checkpoints.db");
    let store = store_flag(dir.path());
    let child = start_count(&db, "i", 300);
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("stopping at the next node boundary"),
        "{stderr}"
    );
    assert!(
        stderr.ends_with(&format!(
            "resume with: switchyard resume tests/fixtures/run/count.toml --thread i --store {store}\n"
        )),
        "{stderr}"
    );
    let state = json_of(
        &switchyard(&["state", "--thread", "i", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(state["status"], json!("stopped"));
    let out = switchyard(&["resume", "--thread", "i", "--store", &store])
        .run()
        .code(0);
    assert_eq!(out.stdout, COUNT_DONE);
}

/// `switchyard ARGS` in a child whose standard output comes line by line through the
/// receiver, as it is written.
fn lines_of(
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// A run that waits shows what it did before it waited: buffered lines go out 20 ms
/// after the first of them, not only when the buffer fills or the run ends (here a
/// model endpoint that takes the request and never answers).
#[test]
fn events_are_printed_while_the_run_waits() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let connection = silent.accept().map(|(c, _)| c);
        std::thread::sleep(Duration::from_secs(30));
        drop(connection);
    });
    let (mut child, lines) = lines_of(
        &[
            "run",
            "tests/fixtures/llm/plan.toml",
            "--store",
            "none",
            "--json",
            "--input",
            r#"{"goal": "wait"}"#,
        ],
        &[("OPENAI_BASE_URL", &url), ("OPENAI_API_KEY", "sk-test")],
    );
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let line = lines
            .recv_timeout(Duration::from_secs(4))
            .expect("the events before the model call are printed while it waits");
        seen.push(json_of(&line)["event"].clone());
    }
    assert_eq!(seen, [json!("run_started"), json!("node_started")]);
    child.kill().unwrap();
    child.wait().unwrap();
    drop(held);
}

/// Lines are buffered, not held: a run that goes on for as long as it is let shows its
/// first events while it runs, and every event it printed before a stop is out when
/// the process ends.
#[test]
fn a_long_runs_events_are_printed_while_it_runs() {
    let (mut child, lines) = lines_of(
        &[
            "run",
            "tests/fixtures/serve/spin.toml",
            "--store",
            "none",
            "--json",
        ],
        &[],
    );
    let first = lines
        .recv_timeout(Duration::from_secs(10))
        .expect("no event printed while the run goes on");
    assert_eq!(json_of(&first)["event"], json!("run_started"));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(5));
    let rest: Vec<Json> = lines.iter().map(|l| json_of(&l)).collect();
    let last = rest.last().expect("more lines");
    assert_eq!(last["event"], json!("run_finished"));
    assert_eq!(last["status"], json!("stopped"));
    // Every line is whole and in order: steps count up without a gap.
    let steps: Vec<u64> = rest
        .iter()
        .filter(|e| e["event"] == "node_started")
        .map(|e| e["step"].as_u64().unwrap())
        .collect();
    assert!(steps.len() > 1, "{} steps", steps.len());
    assert!(steps.windows(2).all(|w| w[1] == w[0] + 1));
}

#[test]
fn max_steps_overrides_the_graph_for_one_run() {
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/loop.toml",
        "--max-steps",
        "2",
        "--store",
        "memory",
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "stopped at 2 after 3 steps\n");
}

#[test]
fn at_a_terminal_interrupts_are_answered_in_place() {
    // `script` gives the run a pseudo-terminal, as a person's shell would.
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    let graph = patient_pauses(dir.path());
    let out = run_in_pty(&graph, &store, &["\n", "\n", "not json {\n"]);
    assert!(
        out.contains("paused at breakpoint of `prepare`; press Enter to go on: "),
        "{out}"
    );
    assert!(
        out.contains("ask asks:\r\n{\r\n  \"question\": \"go on?\"\r\n}\r\n"),
        "{out}"
    );
    assert!(out.contains("type your answer (or JSON)> "), "{out}");
    assert!(out.ends_with("prepare recover answered\r\n"), "{out}");
    let state = json_of(
        &switchyard(&["state", "--thread", "tty", "--store", &store])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(state["state"]["answer"], json!("not json {"));
}

#[test]
fn at_a_terminal_an_unanswered_interrupt_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    // Nobody types at the question: its 30 ms run out first.
    let out = run_in_pty("tests/fixtures/run/pauses.toml", &store, &["\n", "\n"]);
    assert!(
        out.contains("type your answer (or JSON)> \r\nno answer in time\r\n"),
        "{out}"
    );
    assert!(out.contains("      ask -> gave_up (timeout)\r\n"), "{out}");
    assert!(out.ends_with("prepare recover\r\n"), "{out}");
}

/// `switchyard run GRAPH` on thread `tty` in a pseudo-terminal, as a person's shell
/// would run it, typing each of `lines` after a pause; what the terminal showed.
fn run_in_pty(graph: &str, store: &str, lines: &[&str]) -> String {
    use std::io::Write;
    let cmd = format!(
        "{} run {graph} --thread tty --store {store}",
        env!("CARGO_BIN_EXE_switchyard")
    );
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`script` (util-linux) runs");
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        std::thread::sleep(Duration::from_millis(200));
        // The run may have ended already (a timeout): then nobody reads.
        let _ = stdin.write_all(line.as_bytes());
        let _ = stdin.flush();
    }
    std::thread::sleep(Duration::from_millis(200));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn resume_at_a_checkpoint_can_be_retried_after_a_refused_answer() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    let file = "tests/fixtures/run/answer.toml";
    switchyard(&["run", file, "--thread", "a", "--store", &store])
        .run()
        .code(4);
    let resume = |args: &[&str], code: i32| {
        let mut all = vec!["resume", "--thread", "a", "--store", &store];
        all.extend_from_slice(args);
        switchyard(&all).run().code(code)
    };
    let out = resume(&["--payload", r#""Bo""#], 0);
    assert_eq!(out.stdout, "hello Bo\n");
    let history = |at: Option<&str>| {
        let mut args = vec!["state", "--thread", "a", "--store", &store];
        args.extend(at.map(|a| ["--at", a]).into_iter().flatten());
        json_of(&switchyard(&args).run().code(0).stdout)
    };
    let before = history(None);
    // The question (checkpoint 2) answered again, wrongly: refused, nothing written.
    let out = resume(&["--at", "2", "--payload", r#"{"name": 1}"#], 1);
    assert!(
        out.stderr.contains("the answer to `ask` cannot be taken"),
        "{}",
        out.stderr
    );
    assert_eq!(history(None), before);
    let out = resume(&["--at", "2", "--payload", r#""Al""#], 0);
    assert_eq!(out.stdout, "hello Al\n");
    assert_eq!(history(None)["state"]["name"], json!("Al"));
    // The first answer's branch is still there, and the question before both.
    assert_eq!(history(Some("2"))["status"], json!("interrupted"));
    let first_end = before["seq"].as_u64().map(|s| s.to_string());
    assert_eq!(history(first_end.as_deref())["state"]["name"], json!("Bo"));
}

#[test]
fn max_steps_must_be_at_least_one() {
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/loop.toml",
        "--max-steps",
        "0",
        "--store",
        "memory",
    ])
    .run()
    .code(2);
    assert!(out.stderr.contains("0 is not in 1.."), "{}", out.stderr);
}

#[test]
fn at_a_terminal_a_refused_answer_is_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    // An object for a `string` field: refused, and the question comes again.
    let out = run_in_pty(
        "tests/fixtures/run/answer.toml",
        &store,
        &["{\"name\": 1}\n", "Al\n"],
    );
    assert!(
        out.contains("error: the answer to `ask` cannot be taken: field `name` is `string`"),
        "{out}"
    );
    assert_eq!(out.matches("ask asks:").count(), 2, "{out}");
    assert!(out.ends_with("hello Al\r\n"), "{out}");
}

#[test]
fn store_none_runs_without_keeping_anything() {
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        r#"{"n": 2}"#,
        "--thread",
        "r",
        "--store",
        "none",
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "classify count_down:1 count_down:0\n");
    // A pause says plainly that nothing can resume it.
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/pauses.toml",
        "--thread",
        "p",
        "--store",
        "none",
    ])
    .run()
    .code(4);
    assert_eq!(
        out.stderr.lines().last().unwrap(),
        "paused at `prepare`; --store none keeps nothing, so the thread cannot be resumed (use --store sqlite:PATH)"
    );
    let out = switchyard(&["state", "--thread", "p", "--store", "none"])
        .run()
        .code(1);
    assert_eq!(
        out.stderr,
        "error: thread `p` has no checkpoints in this store\n"
    );
    // A server without threads would be no server.
    let out = switchyard(&["serve", "graphs", "--store", "none"])
        .run()
        .code(1);
    assert_eq!(
        out.stderr,
        "error: the server keeps threads and runs, and --store none keeps nothing; use --store memory or sqlite:PATH (stateless runs keep no checkpoints anyway)\n"
    );
}

#[test]
fn durability_is_normal_or_full() {
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        r#"{"n": 0}"#,
        "--store",
        "memory",
        "--durability",
        "eventually",
    ])
    .run()
    .code(2);
    assert!(
        out.stderr.contains(
            "invalid value 'eventually' for '--durability <normal|full>': `eventually` is not `normal` or `full`"
        ),
        "{}",
        out.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let out = switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        r#"{"n": 0}"#,
        "--store",
        &store_flag(dir.path()),
        "--durability",
        "full",
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "classify\n");
    // --compress reaches the store: a large value is kept as a compressed blob, and
    // without it as text.
    let page = json!({ "page": "a page of text ".repeat(200), "goal": 1 }).to_string();
    for (compress, want) in [(true, "blob"), (false, "text")] {
        let db = dir.path().join(format!("page-{compress}.db"));
        let store = format!("sqlite:{}", db.display());
        let mut args = vec![
            "run",
            "tests/fixtures/run/page.toml",
            "--input",
            &page,
            "--store",
            &store,
        ];
        if compress {
            args.push("--compress");
        }
        switchyard(&args).run().code(0);
        let kinds: Vec<String> = rusqlite::Connection::open(&db)
            .unwrap()
            .prepare("SELECT DISTINCT typeof(writes) FROM checkpoints WHERE length(writes) > 1000 OR typeof(writes) = 'blob'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(kinds, [want], "--compress {compress}");
    }
    // The environment says it as people write it.
    for on in ["1", "yes", "true", "0"] {
        let out = switchyard(&[
            "run",
            "tests/fixtures/run/routes.toml",
            "--input",
            r#"{"n": 0}"#,
            "--store",
            &store_flag(dir.path()),
        ])
        .env("SWITCHYARD_COMPRESS", on)
        .env("SWITCHYARD_DURABILITY", "full")
        .run()
        .code(0);
        assert_eq!(out.stdout, "classify\n", "{on}");
    }
}

#[test]
fn state_set_writes_through_the_reducers_as_a_step_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    switchyard(&[
        "run",
        "tests/fixtures/run/routes.toml",
        "--input",
        r#"{"n": 2}"#,
        "--thread",
        "r",
        "--store",
        &store,
    ])
    .run()
    .code(0);
    let history = || {
        switchyard(&["history", "--thread", "r", "--store", &store])
            .run()
            .code(0)
            .stdout
    };
    let before = history();

    // Refused writes change nothing, and say why.
    for (values, error) in [
        (
            r#"{"n": "seven"}"#,
            "error: the update is refused: field `n` is `int`, and the value written is a string `\"seven\"`\n",
        ),
        (
            r#"{"nn": 1}"#,
            "error: the update is refused: `nn` is not a state field; did you mean `n`?\n",
        ),
        (
            "[1]",
            "error: the update is refused: expected an object of state fields, got a list `[1]`\n",
        ),
    ] {
        let out = switchyard(&[
            "state", "set", "--thread", "r", "--values", values, "--store", &store,
        ])
        .run()
        .code(1);
        assert_eq!(out.stderr, error, "{values}");
    }
    assert_eq!(history(), before);

    // A write appends through the list's reducer; the thread stays finished.
    let out = switchyard(&[
        "state",
        "set",
        "--thread",
        "r",
        "--values",
        r#"{"n": 7, "trail": ["by hand"]}"#,
        "--store",
        &store,
    ])
    .run()
    .code(0);
    let doc = json_of(&out.stdout);
    assert_eq!(
        (&doc["seq"], &doc["status"], &doc["outcome"], &doc["state"]),
        (
            &json!(6),
            &json!("finished"),
            &json!("zero"),
            &json!({ "n": 7, "size": "small", "trail": ["classify", "count_down:1", "count_down:0", "by hand"] })
        )
    );
    assert_eq!(
        history().lines().last().unwrap(),
        "   6   0     4  (update)                     finished:zero n, trail"
    );

    // As a node: the thread stands stopped before the node that node's edges pick,
    // and a resume goes on from there.
    let out = switchyard(&[
        "state",
        "set",
        "--thread",
        "r",
        "--values",
        r#"{"n": 1}"#,
        "--as-node",
        "classify",
        "--store",
        &store,
    ])
    .run()
    .code(0);
    let doc = json_of(&out.stdout);
    assert_eq!(
        (&doc["status"], &doc["node"], &doc["next"]),
        (&json!("stopped"), &json!("classify"), &json!("count_down"))
    );
    let out = switchyard(&["resume", "--thread", "r", "--store", &store])
        .run()
        .code(0);
    assert_eq!(
        out.stdout,
        "classify count_down:1 count_down:0 by hand count_down:0\n"
    );
}

#[test]
fn prune_keeps_the_latest_checkpoint_and_the_thread_goes_on_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    let file = &patient_pauses(dir.path());
    // Two threads driven alike to the question; one of them is pruned there.
    for t in ["kept", "pruned"] {
        switchyard(&["run", file, "--thread", t, "--store", &store])
            .run()
            .code(4);
        for _ in 0..2 {
            switchyard(&["resume", "--thread", t, "--store", &store])
                .run()
                .code(4);
        }
    }
    let state = |t: &str| {
        json_of(
            &switchyard(&["state", "--thread", t, "--store", &store])
                .run()
                .code(0)
                .stdout,
        )
    };
    let before = state("pruned");
    let out = switchyard(&["prune", "--thread", "pruned", "--store", &store])
        .run()
        .code(0);
    assert_eq!(
        out.stdout,
        "thread `pruned`: 7 checkpoints removed; checkpoint 7 holds its state\n"
    );
    let after = state("pruned");
    assert_eq!(after["state"], before["state"]);
    assert_eq!(after["pending"], before["pending"]);
    assert_eq!(after["status"], json!("interrupted"));
    let out = switchyard(&["history", "--thread", "pruned", "--store", &store])
        .run()
        .code(0);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim_end).collect();
    assert_eq!(
        lines,
        [
            " seq run  step  node -> next                 status       writes",
            "   7   0     4  (pruned) -> ask              interrupted  trail, answer, failure",
        ]
    );
    let out = switchyard(&["fork", "--thread", "pruned", "--at", "2", "--store", &store])
        .run()
        .code(1);
    assert!(out.stderr.contains("has no checkpoint 2"), "{}", out.stderr);

    // Both go on to the same end.
    for t in ["kept", "pruned"] {
        let out = switchyard(&[
            "resume",
            "--thread",
            t,
            "--payload",
            r#""sure""#,
            "--store",
            &store,
        ])
        .run()
        .code(0);
        assert_eq!(out.stdout, "prepare recover answered\n");
    }
    assert_eq!(state("kept")["state"], state("pruned")["state"]);

    // Threads that ended: deleted once older than asked.
    let out = switchyard(&["prune", "--ended-before", "1h", "--store", &store])
        .run()
        .code(0);
    assert_eq!(out.stdout, "0 threads deleted\n");
    std::thread::sleep(Duration::from_millis(5));
    let out = switchyard(&["prune", "--ended-before", "1ms", "--store", &store])
        .run()
        .code(0);
    assert_eq!(
        out.stdout,
        "deleted thread `kept`\ndeleted thread `pruned`\n2 threads deleted\n"
    );
    let out = switchyard(&["state", "--thread", "kept", "--store", &store])
        .run()
        .code(1);
    assert_eq!(
        out.stderr,
        "error: thread `kept` has no checkpoints in this store\n"
    );
}

/// An MCP server's question at the terminal is answered with a plain line: its schema
/// (one text field) shapes the answer as an interrupt's resume schema does.
#[test]
fn at_a_terminal_a_servers_question_is_answered_with_a_line() {
    crate::mcp::need_npm_packages();
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    let out = run_in_pty("tests/fixtures/mcp/elicit.toml", &store, &["Ada\n"]);
    assert!(out.contains("greet asks:\r\n"), "{out}");
    assert!(out.ends_with("hello Ada [tty/0/1/0]\r\n"), "{out}");
}

/// `switchyard diff OLD NEW --store`: which threads OLD left paused can go on on NEW.
#[test]
fn diff_lists_the_changes_and_which_paused_threads_can_move() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(dir.path());
    let text = std::fs::read_to_string(root().join("tests/fixtures/diff/two_asks.toml")).unwrap();
    std::fs::create_dir_all(dir.path().join("old")).unwrap();
    std::fs::create_dir_all(dir.path().join("new")).unwrap();
    let old = dir.path().join("old/two_asks.toml");
    let new = dir.path().join("new/two_asks.toml");
    std::fs::write(&old, text.replace("VERSION", "one")).unwrap();
    std::fs::write(&new, text.replace("VERSION", "two")).unwrap();
    let (old, new) = (old.display().to_string(), new.display().to_string());
    for t in ["at-first", "at-second", "ended"] {
        switchyard(&["run", &old, "--thread", t, "--store", &store])
            .run()
            .code(4);
    }
    switchyard(&[
        "resume",
        &old,
        "--thread",
        "at-second",
        "--payload",
        "1",
        "--store",
        &store,
    ])
    .run()
    .code(4);
    for _ in 0..2 {
        let out = switchyard(&[
            "resume",
            &old,
            "--thread",
            "ended",
            "--payload",
            "1",
            "--store",
            &store,
        ])
        .run();
        assert!([0, 4].contains(&out.code), "{}", out.stderr);
    }
    let out = switchyard(&["diff", &old, &new, "--store", &store])
        .run()
        .code(0);
    let shown = out
        .stdout
        .replace(&dir.path().display().to_string(), "[dir]");
    insta::assert_snapshot!(shown, @r#"
    graph `two_asks`: 2 changes
    ~ node `done`: outcome: "one" -> "two"
    ~ node `second`: payload.q: "'second one'" -> "'second two'"
    2 threads waiting on [dir]/old/two_asks.toml:
      `at-first` (interrupted at `first`): can go on on [dir]/new/two_asks.toml
      `at-second` (interrupted at `second`): stays on the old version: the pending node `second` (its keys, edges, prompt or schema files) was edited
    "#);
    let out = switchyard(&["diff", &old, &new, "--store", &store, "--format", "json"])
        .run()
        .code(0);
    let v = json_of(&out.stdout);
    assert_eq!(
        v["threads"],
        json!([
            { "thread": "at-first", "status": "interrupted", "at": "first", "moves": true, "why": null },
            { "thread": "at-second", "status": "interrupted", "at": "second", "moves": false,
              "why": "the pending node `second` (its keys, edges, prompt or schema files) was edited" },
        ])
    );
    assert_eq!(
        v["changes"][0],
        json!({ "part": "node", "name": "done", "change": "edited", "details": ["outcome: \"one\" -> \"two\""] })
    );
    // What diff said holds for a resume: the first goes on on the new file, through its
    // edited question, to its outcome; the second is refused there.
    let out = switchyard(&[
        "resume",
        &new,
        "--thread",
        "at-first",
        "--payload",
        "1",
        "--store",
        &store,
        "--json",
    ])
    .run()
    .code(4);
    assert!(out.stdout.contains("second two"), "{}", out.stdout);
    let out = switchyard(&[
        "resume",
        &new,
        "--thread",
        "at-second",
        "--payload",
        "1",
        "--store",
        &store,
    ])
    .run();
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("the pending node `second`"),
        "{}",
        out.stderr
    );
}
