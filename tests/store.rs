//! The one test suite every store passes: the memory store and the SQLite store are
//! run through the same checks, so a runner or a server behaves the same on either.
//! What only a file can do (other processes, foreign files, read-only mounts) is in
//! `hardening.rs`.

use serde_json::{Value as Json, json};
use std::sync::Arc;
use switchyard::run::{Checkpoint, Checkpointer, MemoryStore, SqliteStore, Status};
use switchyard::store::{RunRecord, RunStatus, Source, StoreError, ThreadRecord, Write};

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
        elapsed_ms: 0,
        at_ms: 1_000 + seq,
        source: if seq == 0 {
            Source::Input
        } else {
            Source::Loop
        },
    }
}

/// `[[[...]]]`, `depth` arrays deep.
pub(crate) fn nested(depth: usize) -> Json {
    let mut v = json!([]);
    for _ in 1..depth {
        v = json!([v]);
    }
    v
}

fn seqs(store: &dyn Checkpointer, thread: &str) -> Vec<u64> {
    store.load(thread).unwrap().iter().map(|r| r.seq).collect()
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
fn suite(open: &dyn Fn() -> Arc<dyn Checkpointer>) {
    let store = open();

    // Records come back exactly as written, in order.
    let written: Vec<Checkpoint> = (0..3)
        .map(|seq| record("a", seq, "n", json!(seq)))
        .collect();
    for r in &written {
        store.append(r.clone()).unwrap();
    }
    assert_eq!(store.load("a").unwrap(), written);
    assert_eq!(store.latest("a").unwrap().as_ref(), written.last());
    assert_eq!(store.load("nobody").unwrap(), []);
    assert_eq!(store.latest("nobody").unwrap(), None);

    // A seq already taken is a conflict (two drivers of one thread), and changes nothing.
    match store.append(record("a", 2, "n", json!("other"))) {
        Err(StoreError::Conflict { thread, seq }) => assert_eq!((&*thread, seq), ("a", 2)),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.load("a").unwrap(), written);

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
        store.append_all(broken),
        Err(StoreError::Conflict { seq: 1, .. })
    ));
    assert_eq!(
        store.load("fork").unwrap(),
        [],
        "a failed fork left records"
    );
    store.append_all(copy("fork")).unwrap();
    assert_eq!(store.load("fork").unwrap(), copy("fork"));
    // A fork onto a thread that has records already conflicts and leaves them be.
    assert!(matches!(
        store.append_all(copy("a")),
        Err(StoreError::Conflict { seq: 0, .. })
    ));
    assert_eq!(store.load("a").unwrap(), written);

    // Truncate keeps what came before; the thread then goes on from there.
    store.truncate("fork", 1).unwrap();
    assert_eq!(seqs(&*store, "fork"), [0]);
    store.append(record("fork", 1, "n", json!("b"))).unwrap();
    assert_eq!(seqs(&*store, "fork"), [0, 1]);
    store.truncate("fork", 0).unwrap();
    assert_eq!(seqs(&*store, "fork"), Vec::<u64>::new());

    // Values nested deeper than a run accepts today (older versions accepted them)
    // still read back, so such a thread stays readable.
    let deep = record("deep", 0, "data", nested(300));
    store.append(deep.clone()).unwrap();
    assert_eq!(open().load("deep").unwrap(), [deep]);

    // The LLM cache: a hit until it expires.
    store.cache_put("k", &json!({ "v": 1 }), 2_000).unwrap();
    assert_eq!(
        store.cache_get("k", 1_999).unwrap(),
        Some(json!({ "v": 1 }))
    );
    assert_eq!(store.cache_get("k", 2_000).unwrap(), None);
    assert_eq!(store.cache_get("missing", 0).unwrap(), None);

    // The catalog: threads and runs in creation order, replaced by id.
    let thread = |id: &str, at: u64| ThreadRecord {
        id: id.into(),
        created_ms: at,
        updated_ms: at,
        metadata: json!({ "name": id }),
    };
    store.put_thread(&thread("t1", 1)).unwrap();
    store.put_thread(&thread("t2", 2)).unwrap();
    let mut t1 = thread("t1", 1);
    t1.updated_ms = 5;
    store.put_thread(&t1).unwrap();
    assert_eq!(store.get_thread("t1").unwrap(), Some(t1.clone()));
    assert_eq!(store.get_thread("t3").unwrap(), None);
    assert_eq!(store.threads().unwrap(), [t1.clone(), thread("t2", 2)]);

    let r1 = run_record("r1", "t1", RunStatus::Success, 10);
    let r2 = run_record("r2", "t1", RunStatus::Pending, 11);
    let r3 = run_record("r3", "t2", RunStatus::Running, 12);
    for r in [&r1, &r2, &r3] {
        store.put_run(r).unwrap();
    }
    let mut r2_done = r2.clone();
    r2_done.status = RunStatus::Error;
    r2_done.error = Some("it broke".into());
    store.put_run(&r2_done).unwrap();
    assert_eq!(store.get_run("r2").unwrap(), Some(r2_done.clone()));
    assert_eq!(store.runs("t1").unwrap(), [r1.clone(), r2_done]);
    assert_eq!(store.runs_in_flight().unwrap(), std::slice::from_ref(&r3));
    store.delete_run("r1").unwrap();
    assert_eq!(store.get_run("r1").unwrap(), None);

    // Deleting a thread removes its records, its entry and its runs, nothing else.
    store.append(record("t1", 0, "n", json!(1))).unwrap();
    store.delete_thread("t1").unwrap();
    assert_eq!(store.load("t1").unwrap(), []);
    assert_eq!(store.get_thread("t1").unwrap(), None);
    assert_eq!(store.runs("t1").unwrap(), []);
    assert_eq!(store.threads().unwrap(), [thread("t2", 2)]);
    assert_eq!(store.runs("t2").unwrap(), [r3]);
    assert_eq!(store.load("a").unwrap(), written);
}

#[test]
fn the_memory_store_passes_the_store_suite() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryStore::new());
    suite(&|| store.clone());
}

#[test]
fn the_sqlite_store_passes_the_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/dir/store.db");
    // Each `open` is a new connection: what one wrote, another reads.
    suite(&|| Arc::new(SqliteStore::open(&db).unwrap()));
}
