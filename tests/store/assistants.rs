//! Assistants, as every store keeps them: versions written only as the next one, the
//! current one chosen among them, and of many writers of one version exactly one wins.

use serde_json::json;
use std::sync::Arc;
use switchyard::store::{Assistant, Store};

fn version(id: &str, version: u32, name: &str, at: u64) -> Assistant {
    Assistant {
        id: id.into(),
        graph: "g".into(),
        version,
        body: json!({"name": name, "config": {"configurable": {"N": version}}})
            .as_object()
            .unwrap()
            .clone(),
        created_ms: at,
        updated_ms: at,
    }
}

fn summary(all: &[Assistant]) -> Vec<(String, u32, String, u64, u64)> {
    all.iter()
        .map(|a| {
            (
                a.id.clone(),
                a.version,
                a.body["name"].as_str().unwrap().to_string(),
                a.created_ms,
                a.updated_ms,
            )
        })
        .collect()
}

fn row(
    id: &str,
    v: u32,
    name: &str,
    created: u64,
    updated: u64,
) -> (String, u32, String, u64, u64) {
    (id.into(), v, name.into(), created, updated)
}

pub(crate) async fn assistants_suite(open: &dyn Fn() -> Arc<dyn Store>) {
    let (a, b) = (open(), open());
    assert!(
        a.add_assistant_version(&version("x", 1, "x1", 10))
            .await
            .unwrap()
    );
    assert!(
        a.add_assistant_version(&version("y", 1, "y1", 20))
            .await
            .unwrap()
    );
    // Version 1 of an id the store has, a version that is not the next, an unknown id.
    assert!(
        !b.add_assistant_version(&version("x", 1, "again", 30))
            .await
            .unwrap()
    );
    assert!(
        !b.add_assistant_version(&version("x", 3, "skips", 30))
            .await
            .unwrap()
    );
    assert!(
        !b.add_assistant_version(&version("z", 2, "none", 30))
            .await
            .unwrap()
    );
    assert!(
        b.add_assistant_version(&version("x", 2, "x2", 40))
            .await
            .unwrap()
    );
    // Read back whole by another connection: each at its current version, the
    // assistants in the order they were made, created when made, updated when the
    // current version last changed.
    let full = b.get_assistant("x").await.unwrap().unwrap();
    assert_eq!(full.graph, "g");
    assert_eq!(full.body["config"], json!({"configurable": {"N": 2}}));
    assert_eq!(
        summary(&a.assistants().await.unwrap()),
        [row("x", 2, "x2", 10, 40), row("y", 1, "y1", 20, 20)]
    );
    assert_eq!(
        summary(&a.assistant_versions("x").await.unwrap()),
        [row("x", 2, "x2", 40, 40), row("x", 1, "x1", 10, 10)]
    );
    assert!(a.assistant_versions("nope").await.unwrap().is_empty());
    assert_eq!(a.get_assistant("nope").await.unwrap(), None);

    // Back to version 1: the current one changes, the versions stay; the next version
    // written is still the one after the highest.
    assert!(b.set_assistant_version("x", 1, 50).await.unwrap());
    assert!(!b.set_assistant_version("x", 7, 60).await.unwrap());
    assert!(!b.set_assistant_version("nope", 1, 60).await.unwrap());
    assert_eq!(
        summary(&[a.get_assistant("x").await.unwrap().unwrap()]),
        [row("x", 1, "x1", 10, 50)]
    );
    assert!(
        !a.add_assistant_version(&version("x", 2, "late", 70))
            .await
            .unwrap()
    );
    assert!(
        a.add_assistant_version(&version("x", 3, "x3", 70))
            .await
            .unwrap()
    );
    assert_eq!(a.assistant_versions("x").await.unwrap().len(), 3);

    // Eight writers of version 4 at once: exactly one wins.
    let won = futures_util::future::join_all((0..8).map(|i| {
        let s = open();
        tokio::spawn(async move {
            s.add_assistant_version(&version("x", 4, &format!("w{i}"), 80))
                .await
                .unwrap()
        })
    }))
    .await;
    assert_eq!(won.into_iter().filter(|w| *w.as_ref().unwrap()).count(), 1);
    let versions = b.assistant_versions("x").await.unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        [4, 3, 2, 1]
    );
    assert_eq!(b.get_assistant("x").await.unwrap().unwrap().version, 4);

    // Deleted with its versions; its id can be made again from version 1.
    assert!(a.delete_assistant("x").await.unwrap());
    assert!(!a.delete_assistant("x").await.unwrap());
    assert_eq!(b.get_assistant("x").await.unwrap(), None);
    assert!(b.assistant_versions("x").await.unwrap().is_empty());
    assert!(
        !b.add_assistant_version(&version("x", 5, "gone", 90))
            .await
            .unwrap()
    );
    assert!(
        b.add_assistant_version(&version("x", 1, "anew", 90))
            .await
            .unwrap()
    );
    assert_eq!(
        summary(&a.assistants().await.unwrap()),
        [row("y", 1, "y1", 20, 20), row("x", 1, "anew", 90, 90)]
    );
    for id in ["x", "y"] {
        a.delete_assistant(id).await.unwrap();
    }
}
