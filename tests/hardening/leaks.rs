//! Secrets kept out of errors and files, an empty endpoint, stops during retries.

use super::{DEEP, deep_graph, state_of, store_flag};
use crate::llm::server::{Server, completion, failure};
use crate::util::{root, switchyard};
use serde_json::json;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard::llm::OpenAiClient;
use switchyard::run::Runner;
use switchyard::store::MemoryStore;

#[tokio::test]
async fn a_base_url_query_string_reaches_the_server_and_never_shows() {
    let server = Server::start(vec![failure(400, "bad", &[])]).await;
    let url = format!("{}?api-version=2024-10&sig=querysecret77", server.url());
    let llm = Arc::new(OpenAiClient::new(&url, "", "KEY").unwrap());
    let r = Runner::new(deep_graph(), Arc::new(MemoryStore::new())).with_llm(llm.clone());
    r.start("q", json!({ "via": "model" })).await.unwrap();
    let err = r.resume("q", Some(json!("go")), false).await.unwrap_err();
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].path,
        "/v1/chat/completions?api-version=2024-10&sig=querysecret77"
    );
    let shown = format!("{err} {err:?} {}", llm.base_url());
    assert!(!shown.contains("querysecret77"), "{shown}");

    // The same against a closed port, whose error quotes the URL it tried.
    let closed = "http://127.0.0.1:9/v1?sig=querysecret77";
    let llm = Arc::new(OpenAiClient::new(closed, "", "KEY").unwrap());
    let r = Runner::new(deep_graph(), Arc::new(MemoryStore::new())).with_llm(llm);
    r.start("q", json!({ "via": "model" })).await.unwrap();
    let err = r.resume("q", Some(json!("go")), false).await.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("querysecret77"), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
}

#[test]
fn an_empty_openai_base_url_is_an_error_not_the_public_endpoint() {
    let out = switchyard(&[
        "run",
        DEEP,
        "--input",
        r#"{"via": "model"}"#,
        "--store",
        "memory",
    ])
    .env("OPENAI_BASE_URL", "")
    .run()
    .code(1);
    assert_eq!(
        out.stderr,
        "error: `OPENAI_BASE_URL` is set but empty; set it to the endpoint's URL, or unset it for OpenAI's\n"
    );
}

/// `switchyard ARGS` in the background, its model at `llm`.
fn spawn_with_llm(args: &[&str], llm: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .env("OPENAI_BASE_URL", llm)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` without blocking the runtime the scripted server runs on; its exit
/// code, stdout and stderr, and how long it took.
async fn finish(
    mut child: std::process::Child,
    limit: Duration,
) -> (Option<i32>, String, String, Duration) {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < limit, "still running after {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let took = start.elapsed();
    let out = child.wait_with_output().unwrap();
    (
        status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        took,
    )
}

#[tokio::test]
async fn ctrl_c_during_a_retrying_node_stops_at_once_and_sends_no_more_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(&dir.path().join("s.db"));
    let server = Server::start(vec![
        failure(503, "busy", &[]),
        completion(r#"{"answer": "yes"}"#, 5, 5),
    ])
    .await;
    let graph = "tests/fixtures/hardening/retrying.toml";
    let child = spawn_with_llm(
        &["run", graph, "--thread", "r", "--store", &store],
        server.url(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.seen().is_empty() {
        assert!(Instant::now() < deadline, "no request came");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Now in its 30 s backoff before attempt 2.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let (code, _, stderr, took) = finish(child, Duration::from_secs(25)).await;
    assert_eq!(code, Some(5), "{stderr}");
    // Well inside the backoff: it did not wait it out.
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(server.seen().len(), 1, "a retry was sent after the stop");
    assert_eq!(state_of("r", &store)["status"], json!("stopped"));
    // The thread resumes: the node runs again, from its first attempt.
    let child = spawn_with_llm(
        &["resume", "--thread", "r", "--store", &store],
        server.url(),
    );
    let (code, stdout, stderr, _) = finish(child, Duration::from_secs(60)).await;
    assert_eq!((code, stdout.as_str()), (Some(0), "yes\n"), "{stderr}");
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn an_expanded_server_command_is_kept_out_of_errors_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let out = switchyard(&[
        "run",
        "tests/fixtures/hardening/secret_command.toml",
        "--thread",
        "s",
        "--store",
        &store_flag(&db),
    ])
    .env("SECRET_TOOL_CMD", "/nonexistent/hunter2-tool")
    .run()
    .code(1);
    assert_eq!(
        out.stderr.lines().last().unwrap(),
        "error: node `call` failed: `t`: cannot start server `srv`: `${SECRET_TOOL_CMD}` in `tests/fixtures/hardening`: No such file or directory (os error 2)"
    );
    assert!(!out.stderr.contains("hunter2") && !out.stdout.contains("hunter2"));
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(7).any(|w| w == b"hunter2"),
                "{} holds the expanded command",
                path.display()
            );
        }
    }
}
