//! Crons, as every store keeps them: what one connection wrote another reads, the due
//! ones come earliest first, and of many takers of one occurrence exactly one wins.

use serde_json::{Value as Json, json};
use std::sync::Arc;
use switchyard::store::{Cron, Store, Take, ThreadRecord};

fn cron(id: &str, thread: Option<&str>, next: Option<u64>, enabled: bool) -> Cron {
    Cron {
        id: id.into(),
        assistant: "g".into(),
        thread: thread.map(str::to_string),
        body: json!({"schedule": "* * * * *", "payload": {"input": {"n": 1}}})
            .as_object()
            .unwrap()
            .clone(),
        enabled,
        next_ms: next,
        created_ms: 5,
        updated_ms: 6,
    }
}

/// Takes one occurrence: whether this caller did.
async fn take(store: &dyn Store, id: &str, due_ms: u64, next_ms: Option<u64>) -> bool {
    let t = Take {
        id: id.into(),
        due_ms,
        next_ms,
    };
    store.take_occurrences(&[t]).await.unwrap() == [id]
}

fn ids(crons: &[Cron]) -> Vec<&str> {
    crons.iter().map(|c| c.id.as_str()).collect()
}

pub(crate) async fn crons_suite(open: &dyn Fn() -> Arc<dyn Store>) {
    let (a, b) = (open(), open());
    a.put_thread(&ThreadRecord {
        id: "t".into(),
        created_ms: 1,
        updated_ms: 1,
        metadata: Json::Null,
    })
    .await
    .unwrap();
    for c in [
        cron("c3", None, Some(300), true),
        cron("c1", Some("t"), Some(100), true),
        cron("c2", None, Some(200), false),
        cron("c4", None, None, true),
        cron("c5", None, Some(150), true),
    ] {
        a.put_cron(&c).await.unwrap();
    }
    // In the order they were made; read back whole by another connection.
    assert_eq!(
        ids(&b.crons().await.unwrap()),
        ["c3", "c1", "c2", "c4", "c5"]
    );
    assert_eq!(
        b.get_cron("c1").await.unwrap(),
        Some(cron("c1", Some("t"), Some(100), true))
    );
    assert_eq!(b.get_cron("nope").await.unwrap(), None);
    // Due: enabled, with a next occurrence at or before now, the earliest first.
    assert_eq!(ids(&b.due_crons(99, 10).await.unwrap()), Vec::<&str>::new());
    assert_eq!(
        ids(&b.due_crons(300, 10).await.unwrap()),
        ["c1", "c5", "c3"]
    );
    assert_eq!(ids(&b.due_crons(300, 2).await.unwrap()), ["c1", "c5"]);
    // An occurrence is taken once: the second taker finds it moved on.
    assert!(take(&*a, "c1", 100, Some(160)).await);
    assert!(!take(&*b, "c1", 100, Some(160)).await);
    assert_eq!(b.get_cron("c1").await.unwrap().unwrap().next_ms, Some(160));
    // Nor is a disabled cron's, or a cron's that is gone.
    assert!(!take(&*a, "c2", 200, Some(260)).await);
    assert!(!take(&*a, "nope", 1, None).await);
    // The last occurrence leaves none.
    assert!(take(&*a, "c5", 150, None).await);
    assert_eq!(
        ids(&b.due_crons(u64::MAX / 2, 10).await.unwrap()),
        ["c1", "c3"]
    );
    // Put again: replaced in its place.
    let mut changed = cron("c3", None, Some(50), false);
    changed.body.insert("schedule".into(), json!("0 * * * *"));
    a.put_cron(&changed).await.unwrap();
    assert_eq!(b.get_cron("c3").await.unwrap(), Some(changed.clone()));
    assert_eq!(
        ids(&b.crons().await.unwrap()),
        ["c3", "c1", "c2", "c4", "c5"]
    );
    // A change is written only over the cron as it was read: not once an occurrence
    // was taken meanwhile (it would put the occurrence back), nor over one that is gone.
    let mut edited = changed.clone();
    edited.body.insert("schedule".into(), json!("5 * * * *"));
    edited.updated_ms = 7;
    let taken = Cron {
        next_ms: Some(49),
        ..changed.clone()
    };
    let other_change = Cron {
        updated_ms: 5,
        ..changed.clone()
    };
    assert!(!a.replace_cron(&edited, &taken).await.unwrap());
    assert!(!a.replace_cron(&edited, &other_change).await.unwrap());
    assert_eq!(b.get_cron("c3").await.unwrap(), Some(changed.clone()));
    assert!(a.replace_cron(&edited, &changed).await.unwrap());
    assert_eq!(b.get_cron("c3").await.unwrap(), Some(edited.clone()));
    let c4 = cron("c4", None, None, true);
    let into = |id: &str| Cron {
        id: id.into(),
        next_ms: None,
        ..edited.clone()
    };
    assert!(a.replace_cron(&into("c4"), &c4).await.unwrap());
    let gone = cron("gone", None, None, true);
    assert!(!a.replace_cron(&into("gone"), &gone).await.unwrap());
    assert_eq!(b.get_cron("gone").await.unwrap(), None);
    a.put_cron(&c4).await.unwrap();
    a.put_cron(&changed).await.unwrap();
    // Many takers at once, each with its own connection: exactly one wins.
    a.put_cron(&cron("race", None, Some(1_000), true))
        .await
        .unwrap();
    let takers: Vec<_> = (0..8)
        .map(|_| {
            let s = open();
            tokio::spawn(async move { take(&*s, "race", 1_000, Some(2_000)).await })
        })
        .collect();
    let mut won = 0;
    for t in takers {
        won += usize::from(t.await.unwrap());
    }
    assert_eq!(won, 1);
    // Several in one write: those still due are taken, the others left.
    let batch = [
        ("race", 2_000, 3_000),
        ("c3", 50, 70),
        ("c1", 100, 170),
        ("c4", 1, 2),
    ]
    .map(|(id, due, next)| Take {
        id: id.into(),
        due_ms: due,
        next_ms: Some(next),
    });
    a.put_cron(&cron("c3", None, Some(50), true)).await.unwrap();
    assert_eq!(b.take_occurrences(&batch).await.unwrap(), ["race", "c3"]);
    assert_eq!(a.get_cron("c3").await.unwrap().unwrap().next_ms, Some(70));
    assert_eq!(a.get_cron("c1").await.unwrap().unwrap().next_ms, Some(160));
    assert_eq!(b.take_occurrences(&[]).await.unwrap(), Vec::<String>::new());
    // Deleted: once; a thread's crons go with the thread.
    assert!(a.delete_cron("c2").await.unwrap());
    assert!(!b.delete_cron("c2").await.unwrap());
    a.delete_thread("t").await.unwrap();
    assert_eq!(ids(&b.crons().await.unwrap()), ["c3", "c4", "c5", "race"]);
    for id in ["c3", "c4", "c5", "race"] {
        a.delete_cron(id).await.unwrap();
    }
}
