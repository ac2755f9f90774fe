//! The `events` stream mode as LangChain's `astream_events` v2 names them (compared
//! with LangGraph's server): the run's own start and end named after the graph, each
//! node's start, stream and end as its child, a model's start, token stream and end,
//! a tool's start and end as the node's children; Switchyard's other events as custom
//! events.

use super::server::serve;
use crate::llm::server::{Answer, Reply, Server as Llm};
use serde_json::json;

/// The `events` parts of a stream: each event's `event`, `name`, `run_id`,
/// `parent_ids`, `tags` and `data`, ids as the run's made them (the run id `[run]`,
/// a message's id, made from the run's new thread, `[idN]`).
fn lines(r: &super::server::Resp) -> String {
    let mut scrub = super::server::Scrub::new();
    let events = r.events();
    let run = events
        .iter()
        .find(|(e, _, _)| e == "metadata")
        .map(|(_, d, _)| d["run_id"].as_str().unwrap().to_string())
        .unwrap();
    events
        .iter()
        .filter(|(e, _, _)| e == "events")
        .map(|(_, d, _)| {
            let shown = json!([
                d["event"],
                d["name"],
                d["run_id"],
                d["parent_ids"],
                d["tags"],
                d["data"]
            ]);
            scrub.text(
                &serde_json::to_string(&shown)
                    .unwrap()
                    .replace(&run, "[run]"),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_model_and_tools_stream_as_langchain_events() {
    let model = Llm::start(vec![Answer::Reply(Reply {
        content: Some("Paris is the capital of France.".into()),
        tool_calls: Vec::new(),
    })])
    .await;
    let s = serve(&["tests/fixtures/llm_chat/talk.toml", "graphs/remember.toml"])
        .env("OPENAI_BASE_URL", model.url())
        .start()
        .await;
    let h = s.http();
    let talk = h
        .post(
            "/runs/stream",
            json!({
                "assistant_id": "talk",
                "input": { "messages": [{ "type": "human", "content": "Capital of France?", "id": "h1" }] },
                "stream_mode": "events",
            }),
        )
        .await;
    let remember = h
        .post(
            "/runs/stream",
            json!({
                "assistant_id": "remember",
                "input": { "user": "ann", "colour": "teal" },
                "stream_mode": "events",
            }),
        )
        .await;
    // Every event carries the run's metadata, and a node's its place in the graph.
    let first_node = talk
        .events()
        .into_iter()
        .find(|(e, d, _)| e == "events" && d["name"] == "reply")
        .map(|(_, d, _)| d["metadata"].clone())
        .unwrap();
    let keys: Vec<&String> = first_node.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "created_by",
            "graph_id",
            "assistant_id",
            "run_attempt",
            "thread_id",
            "run_id",
            "langgraph_step",
            "langgraph_node",
            "langgraph_triggers",
            "langgraph_path",
            "langgraph_checkpoint_ns"
        ]
    );
    insta::assert_snapshot!(format!(
        "talk:\n{}\n\nremember:\n{}\n",
        lines(&talk),
        lines(&remember)
    ));
}
