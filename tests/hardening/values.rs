//! Values nested too deep, or too large, to read back: refused where they come in.

use super::{DEEP, deep_graph, json_of, nested_text, state_of, state_text, store_flag};
use crate::doubles::{ScriptedTools, ok};
use crate::llm::server::{Server, completion};
use crate::store::nested;
use crate::util::switchyard;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use switchyard::llm::OpenAiClient;
use switchyard::run::Runner;
use switchyard::store::MemoryStore;

#[test]
fn deep_input_or_answers_are_refused_where_they_come_in_and_the_thread_stays_paused() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_flag(&dir.path().join("s.db"));
    let input = format!(r#"{{"data": {}}}"#, nested_text(100));
    let out = switchyard(&[
        "run", DEEP, "--input", &input, "--thread", "t", "--store", &store,
    ])
    .run()
    .code(2);
    assert_eq!(
        out.stderr,
        "error: the input is refused: field `data` takes values nested at most 64 levels deep, and the value written is nested deeper\n"
    );
    switchyard(&["state", "--thread", "t", "--store", &store])
        .run()
        .code(1);

    switchyard(&[
        "run", DEEP, "--input", "{}", "--thread", "t", "--store", &store,
    ])
    .run()
    .code(4);
    let before = state_text("t", &store);
    let out = switchyard(&[
        "resume",
        "--thread",
        "t",
        "--store",
        &store,
        "--payload",
        &nested_text(65),
    ])
    .run()
    .code(1);
    assert_eq!(
        out.stderr,
        "error: the answer to `ask` cannot be taken: field `answer` takes values nested at most 64 levels deep, and the value written is nested deeper; nothing changed, answer again\n"
    );
    let after = state_text("t", &store);
    assert_eq!(before, after);
    // At the limit it is taken, and reads back.
    switchyard(&[
        "resume",
        "--thread",
        "t",
        "--store",
        &store,
        "--payload",
        &nested_text(64),
    ])
    .run()
    .code(0);
    let state = state_of("t", &store);
    assert_eq!(state["state"]["answer"], nested(64));
}

#[test]
fn a_thread_holding_a_deep_record_from_an_older_version_reads_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = store_flag(&db);
    switchyard(&[
        "run", DEEP, "--input", "{}", "--thread", "old", "--store", &store,
    ])
    .run()
    .code(4);
    // What an older version accepted and saved: a value 300 levels deep.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let writes = json!([{ "field": "data", "value": nested(300) }]).to_string();
    let changed = conn
        .execute(
            "UPDATE checkpoints SET writes = ?1 WHERE thread = 'old' AND seq = 0",
            [&writes],
        )
        .unwrap();
    assert_eq!(changed, 1);
    // Older versions kept no snapshots either.
    conn.execute("DELETE FROM snapshots", []).unwrap();
    drop(conn);

    let state = state_of("old", &store);
    assert_eq!(state["state"]["data"], nested(300));
    let history = json_of(
        &switchyard(&["history", "--thread", "old", "--store", &store, "--json"])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(history.as_array().unwrap().len(), 3);
    let out = switchyard(&[
        "resume",
        "--thread",
        "old",
        "--store",
        &store,
        "--payload",
        "\"yes\"",
    ])
    .run()
    .code(0);
    assert_eq!(out.stdout, "ok\n");
}

#[tokio::test]
async fn a_deep_model_reply_fails_the_node_naming_the_field_and_keeps_the_state() {
    let reply = json!({ "deep": nested(80) }).to_string();
    let server = Server::start(vec![completion(&reply, 5, 5)]).await;
    let llm = Arc::new(OpenAiClient::new(server.url(), "", "KEY").unwrap());
    let r = Runner::new(deep_graph(), Arc::new(MemoryStore::new())).with_llm(llm);
    r.start("m", json!({ "via": "model" })).await.unwrap();
    let err = r.resume("m", Some(json!("go")), false).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `think` failed: field `reply` takes values nested at most 64 levels deep, and the value written is nested deeper"
    );
    let (state, at) = r.threads().state("m", None).await.unwrap();
    assert_eq!(state["reply"], Json::Null);
    assert_eq!(state["answer"], json!("go"));
    assert_eq!(at.status.name(), "failed");
}

#[tokio::test]
async fn a_deep_tool_result_fails_the_node_naming_the_field() {
    let tools = ScriptedTools::new().tool("fetch", |_| ok(nested(70)));
    let r = Runner::new(deep_graph(), Arc::new(MemoryStore::new())).with_tools(Arc::new(tools));
    r.start("m", json!({ "via": "tool" })).await.unwrap();
    let err = r.resume("m", Some(json!("go")), false).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `fetch` failed: field `fetched` takes values nested at most 64 levels deep, and the value written is nested deeper"
    );
    assert_eq!(
        r.threads().state("m", None).await.unwrap().0["fetched"],
        Json::Null
    );
}

#[tokio::test]
async fn an_input_over_sixteen_mib_is_refused() {
    let r = Runner::new(deep_graph(), Arc::new(MemoryStore::new()));
    let big = "x".repeat(17 << 20);
    let err = r.start("big", json!({ "data": big })).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the input is refused: field `data` takes values of at most 16 MiB, and the value written is larger"
    );
    assert!(matches!(
        r.threads().history("big").await,
        Err(switchyard::run::RunError::UnknownThread(t)) if t == "big"
    ));
}
