//! The one test suite every store passes: the memory, SQLite and Postgres stores are
//! run through the same checks, so a runner or a server behaves the same on either.
//! What only a file can do (other processes, foreign files, read-only mounts) is in
//! `hardening.rs`; the SQLite store's own behaviour in `store/sqlite.rs`.

mod assistants;
mod crons;
mod sqlite;

use serde_json::{Value as Json, json};
use std::sync::Arc;
use switchyard::store::{Checked, Checkpoints, Items, LlmCache, Refusal};
use switchyard::store::{Checkpoint, MemoryStore, NoStore, SqliteStore, Status, Store};
use switchyard::store::{
    Durability, PostgresStore, RunRecord, RunStatus, Snapshot, Source, SqliteOptions, StoreError,
    ThreadRecord, Write,
};

/// A record of `thread` at `seq` writing `value` to `field`.
pub(crate) fn record(thread: &str, seq: u64, field: &str, value: Json) -> Checkpoint {
    Checkpoint {
        thread: thread.into(),
        seq,
        run: 0,
        step: seq,
        node: (seq > 0).then(|| Arc::from("n")),
        next: Some("n".into()),
        writes: vec![Write {
            field: field.into(),
            value: Arc::new(value),
        }],
        status: Status::Running,
        pending: None,
        outcome: None,
        graph: "/g.toml".into(),
        graph_hash: "h".into(),
        limited: false,
        error: None,
        tokens: 0,
        // Some records carry what their run used of its budget, so that every store's
        // round trip shows it kept.
        usage: if seq % 3 == 2 {
            switchyard::store::Usage {
                model_calls: seq,
                tool_calls: 2 * seq,
                usd: 0.25,
            }
        } else {
            Default::default()
        },
        elapsed_ms: 0,
        at_ms: 1_000 + seq,
        source: if seq == 0 {
            Source::Input
        } else {
            Source::Loop
        },
        parent: seq.checked_sub(1),
    }
}

/// A snapshot of `thread` at `seq`, the value of `n` being `seq`, as [`record`] writes it.
pub(crate) fn snap(thread: &str, seq: u64) -> Snapshot {
    Snapshot {
        thread: thread.into(),
        seq,
        graph: "/g.toml".into(),
        graph_hash: "h".into(),
        values: vec![("n".into(), Arc::new(json!(seq)))],
    }
}

/// A value large enough to be stored once while it stays the same.
pub(crate) fn big() -> Json {
    json!({ "text": "x".repeat(2_000), "items": [1, 2, 3] })
}

/// `[[[...]]]`, `depth` arrays deep.
pub(crate) fn nested(depth: usize) -> Json {
    let mut v = json!([]);
    for _ in 1..depth {
        v = json!([v]);
    }
    v
}

async fn seqs(store: &dyn Store, thread: &str) -> Vec<u64> {
    store
        .load(thread)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect()
}

fn run_record(id: &str, thread: &str, status: RunStatus, at: u64) -> RunRecord {
    RunRecord {
        id: id.into(),
        thread: thread.into(),
        assistant: "g".into(),
        status,
        created_ms: at,
        updated_ms: at,
        metadata: json!({ "by": id }),
        kwargs: json!({ "input": { "n": 1 } }),
        multitask_strategy: "reject".into(),
        error: None,
        first_seq: Some(0),
    }
}

/// Every check, against the store `open` makes; `open` again must see the same store.
async fn suite(open: &dyn Fn() -> Arc<dyn Store>) {
    let store = open();

    // Records come back exactly as written, in order.
    let written: Vec<Checkpoint> = (0..3)
        .map(|seq| record("a", seq, "n", json!(seq)))
        .collect();
    for r in &written {
        store.append(r.clone()).await.unwrap();
    }
    assert_eq!(store.load("a").await.unwrap(), written);
    assert_eq!(store.latest("a").await.unwrap().as_ref(), written.last());
    assert_eq!(store.load("nobody").await.unwrap(), []);

    // A branch: records that follow an earlier record than the one before them keep
    // which (and a thread's first record follows none).
    let branched: Vec<Checkpoint> = (0..4)
        .map(|seq| Checkpoint {
            parent: [None, Some(0), Some(0), Some(2)][seq as usize],
            ..record("branched", seq, "n", json!(seq))
        })
        .collect();
    store.append_all(branched[..2].to_vec()).await.unwrap();
    for r in &branched[2..] {
        store.append(r.clone()).await.unwrap();
    }
    assert_eq!(store.load("branched").await.unwrap(), branched);
    assert_eq!(
        store.load_from("branched", 2).await.unwrap(),
        &branched[2..]
    );
    store.delete_thread("branched").await.unwrap();
    assert_eq!(store.latest("nobody").await.unwrap(), None);

    // A seq already taken is a conflict (two drivers of one thread), and changes nothing.
    match store.append(record("a", 2, "n", json!("other"))).await {
        Err(StoreError::Conflict { thread, seq }) => assert_eq!((&*thread, seq), ("a", 2)),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.load("a").await.unwrap(), written);

    // A fork or a copy is written whole or not at all.
    let copy = |thread: &str| -> Vec<Checkpoint> {
        written
            .iter()
            .map(|r| Checkpoint {
                thread: thread.into(),
                ..r.clone()
            })
            .collect()
    };
    let mut broken = copy("fork");
    broken.push(record("fork", 1, "n", json!("again")));
    assert!(matches!(
        store.append_all(broken).await,
        Err(StoreError::Conflict { seq: 1, .. })
    ));
    assert_eq!(
        store.load("fork").await.unwrap(),
        [],
        "a failed fork left records"
    );
    store.append_all(copy("fork")).await.unwrap();
    assert_eq!(store.load("fork").await.unwrap(), copy("fork"));
    // A fork onto a thread that has records already conflicts and leaves them be.
    assert!(matches!(
        store.append_all(copy("a")).await,
        Err(StoreError::Conflict { seq: 0, .. })
    ));
    assert_eq!(store.load("a").await.unwrap(), written);

    // Truncate keeps what came before; the thread then goes on from there.
    store.truncate("fork", 1).await.unwrap();
    assert_eq!(seqs(&*store, "fork").await, [0]);
    store
        .append(record("fork", 1, "n", json!("b")))
        .await
        .unwrap();
    assert_eq!(seqs(&*store, "fork").await, [0, 1]);
    store.truncate("fork", 0).await.unwrap();
    assert_eq!(seqs(&*store, "fork").await, Vec::<u64>::new());

    // Values nested deeper than a run accepts today (older versions accepted them)
    // still read back, so such a thread stays readable.
    let deep = record("deep", 0, "data", nested(300));
    store.append(deep.clone()).await.unwrap();
    assert_eq!(open().load("deep").await.unwrap(), [deep]);

    // Records from a position on.
    assert_eq!(store.load_from("a", 1).await.unwrap(), written[1..]);
    assert_eq!(store.load_from("a", 3).await.unwrap(), []);

    // A snapshot of the latest state: kept, replaced, gone with the records it is of.
    assert_eq!(store.snapshot("a").await.unwrap(), None);
    let snap = |seq: u64, n: Json| Snapshot {
        thread: "a".into(),
        seq,
        graph: "/g.toml".into(),
        graph_hash: "h".into(),
        values: vec![("n".into(), Arc::new(n)), ("big".into(), Arc::new(big()))],
    };
    store.put_snapshot(snap(1, json!(1))).await.unwrap();
    store.put_snapshot(snap(2, json!(2))).await.unwrap();
    assert_eq!(open().snapshot("a").await.unwrap(), Some(snap(2, json!(2))));
    store.append(record("a", 3, "n", json!(3))).await.unwrap();
    store.truncate("a", 3).await.unwrap();
    assert_eq!(store.snapshot("a").await.unwrap(), Some(snap(2, json!(2))));
    store.append(record("s", 0, "n", json!(0))).await.unwrap();
    store.append(record("s", 1, "n", json!(1))).await.unwrap();
    store
        .put_snapshot(Snapshot {
            thread: "s".into(),
            ..snap(1, json!(1))
        })
        .await
        .unwrap();
    store.truncate("s", 1).await.unwrap();
    assert_eq!(
        store.snapshot("s").await.unwrap(),
        None,
        "its record is gone"
    );
    store.delete_thread("s").await.unwrap();
    // A thread's first record: a snapshot a thread of the same name left (its records
    // removed by hand) is not this thread's state.
    store
        .put_snapshot(Snapshot {
            thread: "anew".into(),
            ..snap(1, json!("left"))
        })
        .await
        .unwrap();
    for seq in 0..2 {
        store
            .append(record("anew", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    assert_eq!(open().snapshot("anew").await.unwrap(), None);
    store.delete_thread("anew").await.unwrap();

    // A write that fails takes back the graph it named first with it: the next
    // record of that graph names it as it is.
    let other = |r: Checkpoint| Checkpoint {
        graph: "/other.toml".into(),
        graph_hash: "h2".into(),
        ..r
    };
    store.append(record("g1", 0, "n", json!(0))).await.unwrap();
    for failed in [
        store
            .append_all(vec![
                other(record("g2", 0, "n", json!(1))),
                other(record("g1", 0, "n", json!(2))),
            ])
            .await,
        store.append(other(record("g1", 0, "n", json!(3)))).await,
    ] {
        assert!(
            matches!(failed, Err(StoreError::Conflict { .. })),
            "{failed:?}"
        );
    }
    store
        .append(other(record("g3", 0, "n", json!(4))))
        .await
        .unwrap();
    let read = open().load("g3").await.unwrap();
    assert_eq!(
        (&*read[0].graph, &*read[0].graph_hash),
        ("/other.toml", "h2")
    );
    assert_eq!(store.load("g2").await.unwrap(), []);
    for thread in ["g1", "g3"] {
        store.delete_thread(thread).await.unwrap();
    }

    // A large value written again unchanged reads back the same, however it is kept.
    for seq in 0..4 {
        let value = if seq == 2 { json!("small") } else { big() };
        store.append(record("l", seq, "big", value)).await.unwrap();
    }
    let values: Vec<Json> = open()
        .load("l")
        .await
        .unwrap()
        .iter()
        .map(|r| (*r.writes[0].value).clone())
        .collect();
    assert_eq!(values, [big(), big(), json!("small"), big()]);
    assert_eq!(
        open().load_from("l", 3).await.unwrap()[0].writes[0]
            .value
            .as_ref(),
        &big()
    );

    // Pruning: the latest record, holding the whole state, is all that stays, and the
    // thread goes on from it.
    for seq in 0..4 {
        store.append(record("p", seq, "big", big())).await.unwrap();
    }
    let base = Checkpoint {
        source: Source::Base,
        writes: vec![
            Write {
                field: "big".into(),
                value: Arc::new(big()),
            },
            Write {
                field: "n".into(),
                value: Arc::new(json!(7)),
            },
        ],
        ..record("p", 3, "n", json!(null))
    };
    store
        .put_snapshot(Snapshot {
            thread: "p".into(),
            ..snap(2, json!(2))
        })
        .await
        .unwrap();
    assert_eq!(store.prune(base.clone()).await.unwrap(), 3);
    assert_eq!(open().load("p").await.unwrap(), std::slice::from_ref(&base));
    assert_eq!(open().latest("p").await.unwrap(), Some(base.clone()));
    assert_eq!(
        open().snapshot("p").await.unwrap(),
        None,
        "its records are gone"
    );
    store.append(record("p", 4, "big", big())).await.unwrap();
    assert_eq!(seqs(&*open(), "p").await, [3, 4]);
    assert_eq!(
        open().load_from("p", 4).await.unwrap(),
        [record("p", 4, "big", big())]
    );
    let after = Snapshot {
        thread: "p".into(),
        ..snap(4, json!(4))
    };
    store.put_snapshot(after.clone()).await.unwrap();
    assert_eq!(open().snapshot("p").await.unwrap(), Some(after));
    // A base that is no longer the latest record (the thread moved on) conflicts and
    // changes nothing.
    assert!(matches!(
        store.prune(base.clone()).await,
        Err(StoreError::Conflict { seq: 3, .. })
    ));
    assert_eq!(seqs(&*open(), "p").await, [3, 4]);
    store.delete_thread("p").await.unwrap();

    // Threads that ended before a time: their latest record finished or failed then.
    let ended = |thread: &str, seq: u64, status: Status| Checkpoint {
        status,
        ..record(thread, seq, "n", json!(seq))
    };
    store
        .append(ended("done", 0, Status::Finished))
        .await
        .unwrap();
    store
        .append(ended("broke", 0, Status::Running))
        .await
        .unwrap();
    store
        .append(ended("broke", 1, Status::Failed))
        .await
        .unwrap();
    store
        .append(ended("went-on", 0, Status::Finished))
        .await
        .unwrap();
    store
        .append(ended("went-on", 1, Status::Running))
        .await
        .unwrap();
    assert_eq!(
        store.ended_before(1_000).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(store.ended_before(1_001).await.unwrap(), ["done"]);
    assert_eq!(store.ended_before(5_000).await.unwrap(), ["done", "broke"]);
    // Threads left by a version: those whose latest record it wrote and that go on.
    store
        .append(Checkpoint {
            graph_hash: "v1".into(),
            ..ended("went-on", 2, Status::Interrupted)
        })
        .await
        .unwrap();
    assert_eq!(store.waiting_on("v1").await.unwrap(), ["went-on"]);
    store
        .append(Checkpoint {
            graph_hash: "v2".into(),
            ..ended("went-on", 3, Status::Finished)
        })
        .await
        .unwrap();
    assert_eq!(store.waiting_on("v1").await.unwrap(), Vec::<String>::new());
    assert_eq!(store.waiting_on("v2").await.unwrap(), Vec::<String>::new());
    for t in ["done", "broke", "went-on"] {
        store.delete_thread(t).await.unwrap();
    }

    // The LLM cache: a hit until it expires.
    store
        .cache_put("k", &json!({ "v": 1 }), 2_000)
        .await
        .unwrap();
    assert_eq!(
        store.cache_get("k", 1_999).await.unwrap(),
        Some(json!({ "v": 1 }))
    );
    assert_eq!(store.cache_get("k", 2_000).await.unwrap(), None);
    assert_eq!(store.cache_get("missing", 0).await.unwrap(), None);

    // The catalog: threads and runs in creation order, replaced by id.
    let thread = |id: &str, at: u64| ThreadRecord {
        id: id.into(),
        created_ms: at,
        updated_ms: at,
        metadata: json!({ "name": id }),
    };
    store.put_thread(&thread("t1", 1)).await.unwrap();
    store.put_thread(&thread("t2", 2)).await.unwrap();
    let mut t1 = thread("t1", 1);
    t1.updated_ms = 5;
    store.put_thread(&t1).await.unwrap();
    assert_eq!(store.get_thread("t1").await.unwrap(), Some(t1.clone()));
    assert_eq!(store.get_thread("t3").await.unwrap(), None);
    assert_eq!(
        store.threads().await.unwrap(),
        [t1.clone(), thread("t2", 2)]
    );

    let r1 = run_record("r1", "t1", RunStatus::Success, 10);
    let r2 = run_record("r2", "t1", RunStatus::Pending, 11);
    let r3 = run_record("r3", "t2", RunStatus::Running, 12);
    for r in [&r1, &r2, &r3] {
        store.put_run(r).await.unwrap();
    }
    let mut r2_done = r2.clone();
    r2_done.status = RunStatus::Error;
    r2_done.error = Some("it broke".into());
    store.put_run(&r2_done).await.unwrap();
    assert_eq!(store.get_run("r2").await.unwrap(), Some(r2_done.clone()));
    assert_eq!(store.runs("t1").await.unwrap(), [r1.clone(), r2_done]);
    assert_eq!(
        store.runs_in_flight().await.unwrap(),
        std::slice::from_ref(&r3)
    );
    store.delete_run("r1").await.unwrap();
    assert_eq!(store.get_run("r1").await.unwrap(), None);

    // A run refused on a busy thread (`reject`) names the runs in its way, writes nothing.
    let r4 = run_record("r4", "t2", RunStatus::Pending, 13);
    assert_eq!(
        store.put_run_unless_busy(&r4, None).await.unwrap(),
        Err(Refusal::Busy(vec!["r3".to_string()]))
    );
    assert_eq!(store.get_run("r4").await.unwrap(), None);
    let r5 = run_record("r5", "t5", RunStatus::Pending, 14);
    assert_eq!(store.put_run_unless_busy(&r5, None).await.unwrap(), Ok(()));
    assert_eq!(store.get_run("r5").await.unwrap(), Some(r5));
    store.delete_run("r5").await.unwrap();

    // A run checked against the thread as it stood is refused once the thread moved
    // past that checkpoint, by a store several processes share (one process's own
    // queue orders its runs, and its store takes the run).
    store.append(record("t6", 0, "n", json!(1))).await.unwrap();
    let r6 = run_record("r6", "t6", RunStatus::Pending, 15);
    let stale = store
        .put_run_unless_busy(&r6, Some(Checked(None)))
        .await
        .unwrap();
    if store.shares_runs() {
        assert_eq!(stale, Err(Refusal::Moved));
        assert_eq!(store.get_run("r6").await.unwrap(), None);
    } else {
        assert_eq!(stale, Ok(()));
        store.delete_run("r6").await.unwrap();
    }
    let r7 = run_record("r7", "t6", RunStatus::Pending, 16);
    assert_eq!(
        store
            .put_run_unless_busy(&r7, Some(Checked(Some(0))))
            .await
            .unwrap(),
        Ok(())
    );
    store.delete_run("r7").await.unwrap();
    store.delete_thread("t6").await.unwrap();

    // Deleting a thread removes its records, its entry and its runs, nothing else.
    store.append(record("t1", 0, "n", json!(1))).await.unwrap();
    store.delete_thread("t1").await.unwrap();
    assert_eq!(store.load("t1").await.unwrap(), []);
    assert_eq!(store.get_thread("t1").await.unwrap(), None);
    assert_eq!(store.runs("t1").await.unwrap(), []);
    assert_eq!(store.threads().await.unwrap(), [thread("t2", 2)]);
    assert_eq!(store.runs("t2").await.unwrap(), [r3]);
    assert_eq!(store.load("a").await.unwrap(), written);
}

/// The long-term store's items, as every store keeps them: what one connection wrote,
/// another reads; a put keeps the first put's time; the rows under a prefix are those
/// of its namespace and below, not of a namespace that only starts with its text.
async fn items_suite(open: &dyn Fn() -> Arc<dyn Store>) {
    use switchyard::store::{Item, Namespace, Page};
    let item = |ns: &[&str], key: &str, value: Json, at: u64, expires: Option<u64>| Item {
        namespace: Namespace::new(ns.iter().map(|s| s.to_string()).collect()).unwrap(),
        key: key.into(),
        value: value.as_object().unwrap().clone(),
        created_ms: at,
        updated_ms: at,
        expires_ms: expires,
        ttl_ms: expires.map(|e| e - at),
        vectors: Vec::new(),
    };
    let (a, b) = (open(), open());
    a.put_item(&item(
        &["users", "u1"],
        "prefs",
        json!({"theme": "dark"}),
        10,
        None,
    ))
    .await
    .unwrap();
    a.put_item(&item(
        &["users", "u1", "notes"],
        "n1",
        json!({"text": "hi"}),
        11,
        Some(100),
    ))
    .await
    .unwrap();
    a.put_item(&item(&["users", "u10"], "prefs", json!({}), 12, None))
        .await
        .unwrap();
    a.put_item(&item(&["usersx"], "k", json!({}), 13, None))
        .await
        .unwrap();
    // Put again: the value and the times of the last put, the first put's creation.
    a.put_item(&item(
        &["users", "u1"],
        "prefs",
        json!({"theme": "light", "n": [1, 2.5]}),
        20,
        None,
    ))
    .await
    .unwrap();
    assert_eq!(
        b.get_item("users.u1", "prefs").await.unwrap(),
        Some(Item {
            created_ms: 10,
            ..item(
                &["users", "u1"],
                "prefs",
                json!({"theme": "light", "n": [1, 2.5]}),
                20,
                None
            )
        })
    );
    assert_eq!(b.get_item("users.u1", "nope").await.unwrap(), None);
    let under = |prefix: &'static str| {
        let b = b.clone();
        async move {
            let mut keys: Vec<String> = b
                .items_under(prefix, 0, None)
                .await
                .unwrap()
                .into_iter()
                .map(|i| format!("{}/{}", i.namespace.joined(), i.key))
                .collect();
            keys.sort();
            keys
        }
    };
    assert_eq!(
        under("users.u1").await,
        ["users.u1.notes/n1", "users.u1/prefs"]
    );
    assert_eq!(
        under("users").await,
        ["users.u1.notes/n1", "users.u1/prefs", "users.u10/prefs"]
    );
    assert_eq!(under("").await.len(), 4);
    // In the order they were first put: the one put again keeps its place.
    let in_order = |now: u64, page: Option<Page>| {
        let b = b.clone();
        async move {
            b.items_under("users", now, page)
                .await
                .unwrap()
                .into_iter()
                .map(|i| format!("{}/{}", i.namespace.joined(), i.key))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        in_order(0, None).await,
        ["users.u1/prefs", "users.u1.notes/n1", "users.u10/prefs"]
    );
    // A page of them; and not those expired at the time asked about.
    assert_eq!(
        in_order(
            0,
            Some(Page {
                offset: 1,
                limit: 1
            })
        )
        .await,
        ["users.u1.notes/n1"]
    );
    assert_eq!(
        in_order(
            0,
            Some(Page {
                offset: 2,
                limit: 10
            })
        )
        .await,
        ["users.u10/prefs"]
    );
    assert_eq!(
        in_order(100, None).await,
        ["users.u1/prefs", "users.u10/prefs"]
    );
    let mut namespaces = b.item_namespaces("users", 0).await.unwrap();
    namespaces.sort();
    assert_eq!(namespaces, ["users.u1", "users.u1.notes", "users.u10"]);
    let mut namespaces = b.item_namespaces("", 100).await.unwrap();
    namespaces.sort();
    assert_eq!(namespaces, ["users.u1", "users.u10", "usersx"]);
    // An item put without a TTL gets no expiry from a refresh (one put again without a
    // TTL while a read refreshed the old one).
    b.refresh_item("users.u1", "prefs", 500).await.unwrap();
    assert_eq!(
        a.get_item("users.u1", "prefs")
            .await
            .unwrap()
            .unwrap()
            .expires_ms,
        None
    );
    // Expiry put off, and expired rows removed (only them).
    b.refresh_item("users.u1.notes", "n1", 500).await.unwrap();
    assert_eq!(
        a.get_item("users.u1.notes", "n1")
            .await
            .unwrap()
            .unwrap()
            .expires_ms,
        Some(500)
    );
    assert_eq!(a.delete_expired_items(499).await.unwrap(), 0);
    assert_eq!(a.delete_expired_items(500).await.unwrap(), 1);
    assert_eq!(under("users.u1").await, ["users.u1/prefs"]);
    a.delete_item("users.u1", "prefs").await.unwrap();
    a.delete_item("users.u1", "prefs").await.unwrap();
    assert_eq!(under("users").await, ["users.u10/prefs"]);
    // An item's vectors (semantic search) read back as written, and replaced by a put.
    let mut indexed = item(&["docs"], "v", json!({"text": "aaa"}), 30, None);
    indexed.vectors = vec![vec![3.0, 0.0, 0.5, 1e-7], vec![-1.25, 2.5]];
    a.put_item(&indexed).await.unwrap();
    assert_eq!(
        b.get_item("docs", "v").await.unwrap(),
        Some(indexed.clone())
    );
    assert_eq!(
        b.items_under("docs", 0, None).await.unwrap()[0].vectors,
        indexed.vectors
    );
    indexed.vectors.clear();
    a.put_item(&indexed).await.unwrap();
    assert_eq!(b.get_item("docs", "v").await.unwrap(), Some(indexed));
    a.delete_item("docs", "v").await.unwrap();
}

/// A TTL too long for a clock (`1e300` minutes) keeps the item rather than overflowing
/// into the past; a TTL of 0 or less, or not a number, is refused saying why.
#[tokio::test]
async fn a_huge_ttl_keeps_the_item_and_a_bad_one_is_refused() {
    use switchyard::store::{Put, item_ops};
    let store = MemoryStore::new();
    let put = |ttl: f64| Put {
        namespace: vec!["n".into()],
        key: "k".into(),
        value: serde_json::Map::new(),
        ttl_minutes: Some(ttl),
        index: Default::default(),
    };
    item_ops::put(&store, put(1e300), None, 1_000)
        .await
        .unwrap();
    let kept = item_ops::get(&store, vec!["n".into()], "k", true, u64::MAX / 4)
        .await
        .unwrap()
        .unwrap();
    assert!(kept.expires_ms.unwrap() > u64::MAX / 4);
    for bad in [0.0, -1.0, f64::NAN] {
        assert_eq!(
            item_ops::put(&store, put(bad), None, 1_000)
                .await
                .unwrap_err()
                .to_string(),
            format!("ttl is minutes to keep the item, more than 0; {bad} is not")
        );
    }
}

#[tokio::test]
async fn the_memory_store_passes_the_store_suite() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    suite(&|| store.clone()).await;
    items_suite(&|| store.clone()).await;
    crons::crons_suite(&|| store.clone()).await;
    assistants::assistants_suite(&|| store.clone()).await;
}

#[tokio::test]
async fn the_postgres_store_passes_the_store_suite() {
    let url = crate::postgres::database();
    // Each `open` is a new connection: what one wrote, another reads.
    suite(&|| Arc::new(PostgresStore::open(&url).unwrap())).await;
    items_suite(&|| Arc::new(PostgresStore::open(&url).unwrap())).await;
    crons::crons_suite(&|| Arc::new(PostgresStore::open(&url).unwrap())).await;
    assistants::assistants_suite(&|| Arc::new(PostgresStore::open(&url).unwrap())).await;
}

#[tokio::test]
async fn the_sqlite_store_passes_the_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/dir/store.db");
    // Each `open` is a new connection: what one wrote, another reads.
    suite(&|| Arc::new(SqliteStore::open(&db).unwrap())).await;
    items_suite(&|| Arc::new(SqliteStore::open(&db).unwrap())).await;
    crons::crons_suite(&|| Arc::new(SqliteStore::open(&db).unwrap())).await;
    assistants::assistants_suite(&|| Arc::new(SqliteStore::open(&db).unwrap())).await;
}

#[tokio::test]
async fn paused_threads_kept_as_bytes_read_back_the_same() {
    // Past 64 paused threads the memory store keeps the older ones as compact bytes:
    // what they read back must be what was written.
    let store = MemoryStore::new();
    let paused = |thread: &str| -> (Vec<Checkpoint>, Snapshot) {
        let mut records: Vec<Checkpoint> = (0..4)
            .map(|seq| {
                record(
                    thread,
                    seq,
                    "big",
                    if seq == 2 { json!(seq) } else { big() },
                )
            })
            .collect();
        // One record writes a field twice, a large value and then a small one.
        records[1].writes.push(Write {
            field: "big".into(),
            value: Arc::new(json!("small")),
        });
        records[3].status = Status::Interrupted;
        let snapshot = Snapshot {
            thread: thread.into(),
            seq: 3,
            graph: "/g.toml".into(),
            graph_hash: "h".into(),
            values: vec![
                ("big".into(), Arc::new(big())),
                ("n".into(), Arc::new(json!(3))),
            ],
        };
        (records, snapshot)
    };
    for i in 0..100 {
        let (records, snapshot) = paused(&format!("p{i}"));
        store.append_all(records).await.unwrap();
        store.put_snapshot(snapshot).await.unwrap();
    }
    for i in [0, 35, 99] {
        let thread = format!("p{i}");
        let (records, snapshot) = paused(&thread);
        assert_eq!(
            store.latest(&thread).await.unwrap().as_ref(),
            records.last()
        );
        assert_eq!(store.snapshot(&thread).await.unwrap(), Some(snapshot));
        assert_eq!(store.load(&thread).await.unwrap(), records);
        for from in 0..4 {
            assert_eq!(
                store.load_from(&thread, from).await.unwrap(),
                records[from as usize..]
            );
        }
        // Read again, it goes on as any thread.
        store
            .append(record(&thread, 4, "n", json!(4)))
            .await
            .unwrap();
        assert_eq!(store.load_from(&thread, 4).await.unwrap().len(), 1);
    }
}

/// `--store none`: records go nowhere and its cache never hits (a runner that keeps
/// no records is given another store's cache instead: `Runner::with_cache`).
#[tokio::test]
async fn a_store_that_keeps_nothing_keeps_no_cache_either() {
    let none = NoStore::new();
    none.append(record("t", 0, "n", json!(1))).await.unwrap();
    assert_eq!(none.load("t").await.unwrap(), Vec::<Checkpoint>::new());
    none.cache_put("k", &json!("answer"), 2_000).await.unwrap();
    assert_eq!(none.cache_get("k", 1_000).await.unwrap(), None);
    // Nor items: it says so rather than losing them.
    assert_eq!(
        none.items_under("", 0, None).await.unwrap_err().to_string(),
        "the store `none` keeps no items: use `--store memory`, `sqlite:PATH` or `postgres://...` to keep them"
    );
}

/// Postgres checks that a snapshot stands on every record before it by counting them; a
/// process counts the records it wrote in order or found whole only once, so a resume
/// costs the same however long the history, in that process (SQLite marks a thread
/// whose record was removed instead, for every process: above). `remove` deletes a
/// thread's record by hand, as another program would.
async fn counts_records_once(open: &dyn Fn() -> Arc<dyn Store>, remove: &dyn Fn(&str, u64)) {
    let store = open();
    for seq in 0..6 {
        store
            .append(record("t", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    store.put_snapshot(snap("t", 5)).await.unwrap();
    let (found, records) = store.resume_point("t").await.unwrap();
    assert_eq!(found.map(Snapshot::parsed), Some(snap("t", 5)));
    assert_eq!(records, [record("t", 5, "n", json!(5))]);
    // A record removed from the middle of the history: the next process finds the gap
    // (and reads the thread whole, which reports it); this one, which knows the records
    // were whole, resumes from the snapshot, which holds the whole state.
    remove("t", 2);
    assert_eq!(store.snapshot("t").await.unwrap(), Some(snap("t", 5)));
    let other = open();
    assert_eq!(other.snapshot("t").await.unwrap(), None);
    assert_eq!(
        other.load("t").await.unwrap_err().to_string(),
        "checkpoint store: a record of thread `t` is corrupt: record 2 is missing"
    );
    // Another process goes on with the thread: this one counts the records it did not
    // know of, and finds one of them gone.
    for seq in 6..8 {
        other
            .append(record("t", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    other.put_snapshot(snap("t", 7)).await.unwrap();
    assert_eq!(store.snapshot("t").await.unwrap(), Some(snap("t", 7)));
    for seq in 8..10 {
        other
            .append(record("t", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    other.put_snapshot(snap("t", 9)).await.unwrap();
    remove("t", 8);
    assert_eq!(store.snapshot("t").await.unwrap(), None, "record 8 is gone");
    // After a rollback all of them are counted again.
    store.truncate("t", 8).await.unwrap();
    store.put_snapshot(snap("t", 6)).await.unwrap();
    assert_eq!(store.snapshot("t").await.unwrap(), None, "record 2 is gone");
    // The first record is read every time.
    for seq in 0..3 {
        store
            .append(record("f", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    store.put_snapshot(snap("f", 2)).await.unwrap();
    assert_eq!(store.snapshot("f").await.unwrap(), Some(snap("f", 2)));
    remove("f", 0);
    assert_eq!(store.snapshot("f").await.unwrap(), None, "record 0 is gone");
    store.delete_thread("t").await.unwrap();
    store.delete_thread("f").await.unwrap();
}

#[tokio::test]
async fn postgres_counts_a_threads_records_once_per_process_not_at_every_resume() {
    let url = crate::postgres::database();
    let remove = |thread: &str, seq: u64| {
        crate::postgres::connect(&url)
            .query(
                "DELETE FROM switchyard.checkpoints WHERE thread = $1 AND seq = $2",
                &[&thread, &(seq as i64)],
            )
            .unwrap();
    };
    counts_records_once(&|| Arc::new(PostgresStore::open(&url).unwrap()), &remove).await;
}
