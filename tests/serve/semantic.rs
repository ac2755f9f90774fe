//! Semantic search of the store through `switchyard serve --embeddings`, against a
//! scripted embeddings endpoint whose vectors (`[a's, b's, c's, length]`) are those
//! the comparison with LangGraph's server used: the same puts and searches give the
//! scores LangGraph's gave.

use super::server::{Serve, serve};
use crate::llm::server::{Answer, Server as Llm};
use crate::serve::Transcript;
use serde_json::json;

/// A server embedding through `llm`'s `test-embed`.
async fn embedding(llm: &Llm) -> Serve {
    serve(&["tests/fixtures/serve/three.toml"])
        .env("OPENAI_BASE_URL", llm.url())
        .arg("--embeddings")
        .arg("test-embed")
        .start()
        .await
}

#[tokio::test]
async fn a_store_search_with_a_query_ranks_items_by_meaning() {
    let llm = Llm::start((0..20).map(|_| Answer::Embeddings).collect()).await;
    let s = embedding(&llm).await;
    let h = s.http();
    let mut t = Transcript::new();
    for body in [
        json!({"namespace": ["docs"], "key": "k_default", "value": {"text": "aaa", "n": 1}}),
        json!({"namespace": ["docs"], "key": "k_false", "value": {"text": "aaa bbb"}, "index": false}),
        json!({"namespace": ["docs"], "key": "k_field", "value": {"text": "ccc", "other": "aaaa"}, "index": ["text"]}),
        json!({"namespace": ["docs"], "key": "k_missing", "value": {"text": "ab"}, "index": ["missing_field"]}),
        json!({"namespace": ["docs"], "key": "k_null", "value": {"text": "bc"}, "index": null}),
        json!({"namespace": ["docs", "sub"], "key": "tags", "value": {"tags": ["aaaa", "cc"]}, "index": ["tags[*]"]}),
        json!({"namespace": ["docs"], "key": "k_true", "value": {"text": "x"}, "index": true}),
        json!({"namespace": ["docs"], "key": "k_bad", "value": {"text": "x"}, "index": ["tags[x]"]}),
    ] {
        t.note(
            &format!("PUT /store/items {body}"),
            &h.put("/store/items", body.clone()).await,
        );
    }
    for body in [
        json!({"namespace_prefix": ["docs"], "query": "a"}),
        json!({"namespace_prefix": ["docs"], "query": "a", "offset": 2, "limit": 2}),
        json!({"namespace_prefix": ["docs"], "query": "a", "filter": {"text": "aaa bbb"}}),
        json!({"namespace_prefix": ["docs", "sub"], "query": "cc"}),
        json!({"namespace_prefix": ["docs"], "query": ""}),
        json!({"namespace_prefix": ["nothing"], "query": "a"}),
    ] {
        t.note(
            &format!("POST /store/items/search {body}"),
            &h.post("/store/items/search", body).await,
        );
    }
    // Put again: embedded again, its old vectors gone (LangGraph keeps them).
    let again = json!({"namespace": ["docs"], "key": "k_default", "value": {"text": "cccc"}, "index": false});
    t.note(
        &format!("PUT /store/items {again}"),
        &h.put("/store/items", again).await,
    );
    let body = json!({"namespace_prefix": ["docs"], "query": "a", "limit": 3});
    t.note(
        &format!("POST /store/items/search {body}"),
        &h.post("/store/items/search", body).await,
    );
    // What the endpoint was asked: each put's texts in one request, each query alone.
    let asked: Vec<_> = llm
        .seen()
        .iter()
        .map(|r| json!([r.path, r.body["model"], r.body["input"]]))
        .collect();
    t.lines.push(format!(
        "embeddings requests:\n{}",
        serde_json::to_string_pretty(&asked).unwrap()
    ));
    insta::assert_snapshot!(t.text());
}

/// An endpoint that fails: the put is refused saying why (502), nothing is written;
/// a search with a query likewise.
#[tokio::test]
async fn a_failing_embeddings_endpoint_refuses_the_put_and_writes_nothing() {
    let llm = Llm::start(vec![
        Answer::Body {
            status: 500,
            headers: Vec::new(),
            body: r#"{"error":{"message":"the model is down"}}"#.into(),
        },
        Answer::Body {
            status: 401,
            headers: Vec::new(),
            body: r#"{"error":{"message":"bad key"}}"#.into(),
        },
    ])
    .await;
    let s = embedding(&llm).await;
    let h = s.http();
    let mut t = Transcript::new();
    let put = json!({"namespace": ["docs"], "key": "k", "value": {"text": "aaa"}});
    t.note(
        &format!("PUT /store/items {put}"),
        &h.put("/store/items", put).await,
    );
    t.note(
        "GET /store/items?namespace=docs&key=k",
        &h.get("/store/items?namespace=docs&key=k").await,
    );
    let body = json!({"namespace_prefix": ["docs"], "query": "a"});
    t.note(
        &format!("POST /store/items/search {body}"),
        &h.post("/store/items/search", body).await,
    );
    insta::assert_snapshot!(t.text().replace(llm.url(), "[llm]"));
}
