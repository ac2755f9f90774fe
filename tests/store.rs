//! The one test suite every store passes: the memory, SQLite and Postgres stores are
//! run through the same checks, so a runner or a server behaves the same on either.
//! What only a file can do (other processes, foreign files, read-only mounts) is in
//! `hardening.rs`.

use serde_json::{Value as Json, json};
use std::sync::Arc;
use switchyard::run::{Checkpoint, Checkpointer, MemoryStore, NoStore, SqliteStore, Status};
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
        elapsed_ms: 0,
        at_ms: 1_000 + seq,
        source: if seq == 0 {
            Source::Input
        } else {
            Source::Loop
        },
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

    // Records from a position on.
    assert_eq!(store.load_from("a", 1).unwrap(), written[1..]);
    assert_eq!(store.load_from("a", 3).unwrap(), []);

    // A snapshot of the latest state: kept, replaced, gone with the records it is of.
    assert_eq!(store.snapshot("a").unwrap(), None);
    let snap = |seq: u64, n: Json| Snapshot {
        thread: "a".into(),
        seq,
        graph: "/g.toml".into(),
        graph_hash: "h".into(),
        values: vec![("n".into(), Arc::new(n)), ("big".into(), Arc::new(big()))],
    };
    store.put_snapshot(snap(1, json!(1))).unwrap();
    store.put_snapshot(snap(2, json!(2))).unwrap();
    assert_eq!(open().snapshot("a").unwrap(), Some(snap(2, json!(2))));
    store.append(record("a", 3, "n", json!(3))).unwrap();
    store.truncate("a", 3).unwrap();
    assert_eq!(store.snapshot("a").unwrap(), Some(snap(2, json!(2))));
    store.append(record("s", 0, "n", json!(0))).unwrap();
    store.append(record("s", 1, "n", json!(1))).unwrap();
    store
        .put_snapshot(Snapshot {
            thread: "s".into(),
            ..snap(1, json!(1))
        })
        .unwrap();
    store.truncate("s", 1).unwrap();
    assert_eq!(store.snapshot("s").unwrap(), None, "its record is gone");
    store.delete_thread("s").unwrap();

    // A large value written again unchanged reads back the same, however it is kept.
    for seq in 0..4 {
        let value = if seq == 2 { json!("small") } else { big() };
        store.append(record("l", seq, "big", value)).unwrap();
    }
    let values: Vec<Json> = open()
        .load("l")
        .unwrap()
        .iter()
        .map(|r| (*r.writes[0].value).clone())
        .collect();
    assert_eq!(values, [big(), big(), json!("small"), big()]);
    assert_eq!(
        open().load_from("l", 3).unwrap()[0].writes[0]
            .value
            .as_ref(),
        &big()
    );

    // Pruning: the latest record, holding the whole state, is all that stays, and the
    // thread goes on from it.
    for seq in 0..4 {
        store.append(record("p", seq, "big", big())).unwrap();
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
        .unwrap();
    assert_eq!(store.prune(base.clone()).unwrap(), 3);
    assert_eq!(open().load("p").unwrap(), std::slice::from_ref(&base));
    assert_eq!(open().latest("p").unwrap(), Some(base.clone()));
    assert_eq!(open().snapshot("p").unwrap(), None, "its records are gone");
    store.append(record("p", 4, "big", big())).unwrap();
    assert_eq!(seqs(&*open(), "p"), [3, 4]);
    assert_eq!(
        open().load_from("p", 4).unwrap(),
        [record("p", 4, "big", big())]
    );
    let after = Snapshot {
        thread: "p".into(),
        ..snap(4, json!(4))
    };
    store.put_snapshot(after.clone()).unwrap();
    assert_eq!(open().snapshot("p").unwrap(), Some(after));
    // A base that is no longer the latest record (the thread moved on) conflicts and
    // changes nothing.
    assert!(matches!(
        store.prune(base.clone()),
        Err(StoreError::Conflict { seq: 3, .. })
    ));
    assert_eq!(seqs(&*open(), "p"), [3, 4]);
    store.delete_thread("p").unwrap();

    // Threads that ended before a time: their latest record finished or failed then.
    let ended = |thread: &str, seq: u64, status: Status| Checkpoint {
        status,
        ..record(thread, seq, "n", json!(seq))
    };
    store.append(ended("done", 0, Status::Finished)).unwrap();
    store.append(ended("broke", 0, Status::Running)).unwrap();
    store.append(ended("broke", 1, Status::Failed)).unwrap();
    store.append(ended("went-on", 0, Status::Finished)).unwrap();
    store.append(ended("went-on", 1, Status::Running)).unwrap();
    assert_eq!(store.ended_before(1_000).unwrap(), Vec::<String>::new());
    assert_eq!(store.ended_before(1_001).unwrap(), ["done"]);
    assert_eq!(store.ended_before(5_000).unwrap(), ["done", "broke"]);
    for t in ["done", "broke", "went-on"] {
        store.delete_thread(t).unwrap();
    }

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

    // A run refused on a busy thread (`reject`) names the runs in its way, writes nothing.
    let r4 = run_record("r4", "t2", RunStatus::Pending, 13);
    assert_eq!(
        store.put_run_unless_busy(&r4).unwrap(),
        Err(vec!["r3".to_string()])
    );
    assert_eq!(store.get_run("r4").unwrap(), None);
    let r5 = run_record("r5", "t5", RunStatus::Pending, 14);
    assert_eq!(store.put_run_unless_busy(&r5).unwrap(), Ok(()));
    assert_eq!(store.get_run("r5").unwrap(), Some(r5));
    store.delete_run("r5").unwrap();

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
fn the_postgres_store_passes_the_store_suite() {
    let url = crate::postgres::database();
    // Each `open` is a new connection: what one wrote, another reads.
    suite(&|| Arc::new(PostgresStore::open(&url).unwrap()));
}

#[test]
fn the_sqlite_store_passes_the_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/dir/store.db");
    // Each `open` is a new connection: what one wrote, another reads.
    suite(&|| Arc::new(SqliteStore::open(&db).unwrap()));
}

#[test]
fn sqlite_keeps_a_large_value_written_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = SqliteStore::open(&db).unwrap();
    for seq in 0..3 {
        store.append(record("t", seq, "big", big())).unwrap();
    }
    store
        .put_snapshot(Snapshot {
            thread: "t".into(),
            seq: 2,
            graph: "/g.toml".into(),
            graph_hash: "h".into(),
            values: vec![("big".into(), Arc::new(big()))],
        })
        .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<String> = conn
        .prepare("SELECT writes FROM checkpoints ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(rows[0].len() > 2_000);
    assert_eq!(
        rows[1..],
        [
            r#"[{"field":"big","same":0}]"#,
            r#"[{"field":"big","same":0}]"#
        ]
    );
    let state: String = conn
        .query_row("SELECT state FROM snapshots", [], |r| r.get(0))
        .unwrap();
    assert_eq!(state, r#"[{"field":"big","same":0}]"#);
    // One graph row, not a path and a hash per record.
    let graphs: i64 = conn
        .query_row("SELECT count(*) FROM graphs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(graphs, 1);
    // Another process reads the values whole.
    let other = SqliteStore::open(&db).unwrap();
    assert!(
        other
            .load("t")
            .unwrap()
            .iter()
            .all(|r| *r.writes[0].value == big())
    );
    assert_eq!(
        other.snapshot("t").unwrap().unwrap().values[0].1.as_ref(),
        &big()
    );
}

/// The version 3 layout, as that version made it.
const V3: &str = "
CREATE TABLE checkpoints (
    thread TEXT NOT NULL, seq INTEGER NOT NULL, run INTEGER NOT NULL, step INTEGER NOT NULL,
    node TEXT, next TEXT, writes TEXT NOT NULL, status TEXT NOT NULL, pending TEXT,
    outcome TEXT, graph TEXT NOT NULL, graph_hash TEXT NOT NULL, tokens INTEGER NOT NULL,
    elapsed_ms INTEGER NOT NULL, at_ms INTEGER NOT NULL, limited INTEGER NOT NULL,
    error TEXT, source TEXT NOT NULL DEFAULT 'loop',
    PRIMARY KEY (thread, seq)
) WITHOUT ROWID;
CREATE TABLE llm_cache (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL, expires_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE threads (id TEXT NOT NULL PRIMARY KEY, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, metadata TEXT NOT NULL);
CREATE TABLE runs (id TEXT NOT NULL PRIMARY KEY, thread TEXT NOT NULL, assistant TEXT NOT NULL, status TEXT NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, metadata TEXT NOT NULL, kwargs TEXT NOT NULL, multitask TEXT NOT NULL, error TEXT, first_seq INTEGER);
PRAGMA user_version = 3;
";

/// Inserts `record` as version 3 (or, without `source`, version 2) kept it.
fn insert_old(conn: &rusqlite::Connection, r: &Checkpoint, with_source: bool) {
    let writes = serde_json::to_string(&r.writes).unwrap();
    let (columns, source) = if with_source {
        (", source", format!(", '{}'", r.source.name()))
    } else {
        ("", String::new())
    };
    conn.execute(
        &format!(
            "INSERT INTO checkpoints (thread, seq, run, step, node, next, writes, status, graph, graph_hash, tokens, elapsed_ms, at_ms, limited{columns})
             VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6, 'running', ?7, ?8, 0, 0, ?9, 0{source})"
        ),
        rusqlite::params![
            &*r.thread,
            r.seq as i64,
            r.step as i64,
            r.node.as_deref(),
            r.next.as_deref(),
            writes,
            &*r.graph,
            &*r.graph_hash,
            r.at_ms as i64
        ],
    )
    .unwrap();
}

#[test]
fn stores_of_versions_2_and_3_are_brought_forward_whole() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Checkpoint> = (0..3)
        .map(|seq| record("t", seq, "n", if seq == 1 { big() } else { json!(seq) }))
        .collect();
    for version in [2, 3] {
        let db = dir.path().join(format!("v{version}.db"));
        let conn = rusqlite::Connection::open(&db).unwrap();
        if version == 3 {
            conn.execute_batch(V3).unwrap();
        } else {
            conn.execute_batch(
                "CREATE TABLE checkpoints (thread TEXT NOT NULL, seq INTEGER NOT NULL, run INTEGER NOT NULL, step INTEGER NOT NULL, node TEXT, next TEXT, writes TEXT NOT NULL, status TEXT NOT NULL, pending TEXT, outcome TEXT, graph TEXT NOT NULL, graph_hash TEXT NOT NULL, tokens INTEGER NOT NULL, elapsed_ms INTEGER NOT NULL, at_ms INTEGER NOT NULL, limited INTEGER NOT NULL, error TEXT, PRIMARY KEY (thread, seq)) WITHOUT ROWID;
                 CREATE TABLE llm_cache (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL, expires_ms INTEGER NOT NULL) WITHOUT ROWID;
                 PRAGMA user_version = 2;",
            )
            .unwrap();
        }
        for r in &records {
            insert_old(&conn, r, version == 3);
        }
        drop(conn);
        let store = SqliteStore::open(&db).unwrap();
        // Version 2 knew no `source`: a run's first record is its input's.
        assert_eq!(store.load("t").unwrap(), records, "version {version}");
        let version_now: i64 = rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version_now, 4);
        // It goes on like a new one.
        store.append(record("t", 3, "n", big())).unwrap();
        assert_eq!(*store.load("t").unwrap()[3].writes[0].value, big());
    }
}

#[test]
fn paused_threads_kept_as_bytes_read_back_the_same() {
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
        store.append_all(records).unwrap();
        store.put_snapshot(snapshot).unwrap();
    }
    for i in [0, 35, 99] {
        let thread = format!("p{i}");
        let (records, snapshot) = paused(&thread);
        assert_eq!(store.latest(&thread).unwrap().as_ref(), records.last());
        assert_eq!(store.snapshot(&thread).unwrap(), Some(snapshot));
        assert_eq!(store.load(&thread).unwrap(), records);
        for from in 0..4 {
            assert_eq!(
                store.load_from(&thread, from).unwrap(),
                records[from as usize..]
            );
        }
        // Read again, it goes on as any thread.
        store.append(record(&thread, 4, "n", json!(4))).unwrap();
        assert_eq!(store.load_from(&thread, 4).unwrap().len(), 1);
    }
}

#[test]
fn sqlite_durability_is_normal_unless_asked_full() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    assert_eq!(
        SqliteStore::open(&db).unwrap().durability().unwrap(),
        Durability::Normal
    );
    assert_eq!(
        SqliteStore::open_with(&db, Durability::Full)
            .unwrap()
            .durability()
            .unwrap(),
        Durability::Full
    );
}

#[test]
fn claims_share_one_lock_file_and_end_with_their_holder() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let store = SqliteStore::open(&db).unwrap();
    let locks = dir.path().join("c.db.locks");
    let files = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&locks)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let mut claims = Vec::new();
    for i in 0..100 {
        claims.push(store.claim(&format!("t{i}")).unwrap());
    }
    // One file however many threads are claimed or have ever been.
    assert_eq!(files(), ["claims"]);
    // Another process (here: connection) is refused while one is held, and so is the
    // same store asked twice; both name this process.
    let other = SqliteStore::open(&db).unwrap();
    let pid = std::process::id();
    for (who, store) in [("other", &other), ("same", &store)] {
        match store.claim("t7") {
            Err(StoreError::Claimed { thread, pid: p }) => {
                assert_eq!((thread.as_str(), p), ("t7", pid), "{who}")
            }
            r => panic!("{who}: {r:?}"),
        }
    }
    // The others stay claimed when one ends.
    claims.remove(7);
    let again = other.claim("t7").unwrap();
    assert!(matches!(
        other.claim("t8"),
        Err(StoreError::Claimed { ref thread, pid }) if thread == "t8" && pid == std::process::id()
    ));
    drop(claims);
    drop(again);
    assert_eq!(files(), ["claims"]);
    // Every claim ended: every thread can be claimed again, by either store.
    for i in 0..100 {
        drop(other.claim(&format!("t{i}")).unwrap());
        drop(store.claim(&format!("t{i}")).unwrap());
    }
}

#[test]
fn the_compressing_sqlite_store_passes_the_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("z.db");
    let compress = SqliteOptions {
        compress: true,
        ..SqliteOptions::default()
    };
    suite(&|| Arc::new(SqliteStore::open_with(&db, compress).unwrap()));
}

#[test]
fn sqlite_compresses_large_values_when_asked_and_reads_either_kind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("z.db");
    let compress = SqliteOptions {
        compress: true,
        ..SqliteOptions::default()
    };
    let zipped = SqliteStore::open_with(&db, compress).unwrap();
    let page = |n: u64| json!({ "text": format!("page {n} ").repeat(300) });
    zipped.append(record("t", 0, "page", page(0))).unwrap();
    zipped.append(record("t", 1, "small", json!("hi"))).unwrap();
    // A process that does not compress appends to the same thread, and the other
    // way round.
    let plain = SqliteStore::open(&db).unwrap();
    plain.append(record("t", 2, "page", page(2))).unwrap();
    zipped.append(record("t", 3, "page", page(3))).unwrap();
    zipped
        .put_snapshot(Snapshot {
            thread: "t".into(),
            seq: 3,
            graph: "/g.toml".into(),
            graph_hash: "h".into(),
            values: vec![
                ("page".into(), Arc::new(page(3))),
                ("small".into(), Arc::new(json!("hi"))),
            ],
        })
        .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let kinds: Vec<(String, i64)> = conn
        .prepare("SELECT typeof(writes), length(writes) FROM checkpoints ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let kinds: Vec<&str> = kinds
        .iter()
        .map(|(k, len)| {
            // 2,700 bytes of text, compressed to a tenth of it or less.
            assert!(k == "text" || *len < 300, "{k}: {len} bytes");
            k.as_str()
        })
        .collect();
    assert_eq!(kinds, ["blob", "text", "text", "blob"]);
    // The snapshot names the record that holds the page: short text.
    let snapshot: String = conn
        .query_row("SELECT typeof(state) FROM snapshots", [], |r| r.get(0))
        .unwrap();
    assert_eq!(snapshot, "text");
    for store in [&plain, &zipped] {
        let values: Vec<Json> = store
            .load("t")
            .unwrap()
            .iter()
            .map(|r| (*r.writes[0].value).clone())
            .collect();
        assert_eq!(values, [page(0), json!("hi"), page(2), page(3)]);
        assert_eq!(
            store.snapshot("t").unwrap().unwrap().values[0].1.as_ref(),
            &page(3)
        );
    }
    // A compressed value that does not unpack is a corrupt record, named.
    conn.execute(
        "UPDATE checkpoints SET writes = x'ffffff7f0011' WHERE seq = 3",
        [],
    )
    .unwrap();
    assert_eq!(
        plain.load("t").unwrap_err().to_string(),
        "checkpoint store: a record of thread `t` is corrupt: `writes` is not a compressed value"
    );
}

#[test]
fn sqlite_refers_a_value_written_again_to_the_record_that_holds_it() {
    // Row 1 writes `page` twice: a new value, then the one row 0 holds (stored as a
    // reference to row 0). Row 2 writes row 1's first value again: it must not be
    // referred to row 1, whose last write of `page` is the other value.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = SqliteStore::open(&db).unwrap();
    let a = json!({ "page": "a".repeat(400) });
    let b = json!({ "page": "b".repeat(400) });
    store.append(record("t", 0, "page", b.clone())).unwrap();
    let mut twice = record("t", 1, "page", a.clone());
    twice.writes.push(Write {
        field: "page".into(),
        value: Arc::new(b.clone()),
    });
    store.append(twice).unwrap();
    store.append(record("t", 2, "page", a.clone())).unwrap();
    store.append(record("t", 3, "page", b.clone())).unwrap();
    let want = [
        vec![b.clone()],
        vec![a.clone(), b.clone()],
        vec![a.clone()],
        vec![b],
    ];
    // Read whole, from a record on, and by another connection: the same values.
    let other = SqliteStore::open(&db).unwrap();
    for records in [
        store.load("t").unwrap(),
        other.load("t").unwrap(),
        [
            other.load("t").unwrap()[..2].to_vec(),
            other.load_from("t", 2).unwrap(),
        ]
        .concat(),
    ] {
        let got: Vec<Vec<Json>> = records
            .iter()
            .map(|r| r.writes.iter().map(|w| (*w.value).clone()).collect())
            .collect();
        assert_eq!(got, want);
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<String> = conn
        .prepare("SELECT writes FROM checkpoints WHERE seq >= 1 ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // Row 1's second write refers to row 0; rows 2 and 3 differ from the value before
    // them and are written in full.
    assert!(
        rows[0].ends_with(r#"{"field":"page","same":0}]"#),
        "{}",
        rows[0]
    );
    assert_eq!(rows[1], format!(r#"[{{"field":"page","value":{a}}}]"#));
    assert_eq!(
        rows[2],
        format!(r#"[{{"field":"page","value":{}}}]"#, want[3][0])
    );
}

#[test]
fn a_store_that_keeps_nothing_can_share_another_stores_llm_cache() {
    let shared: Arc<dyn Checkpointer> = Arc::new(MemoryStore::new());
    let none = NoStore::with_cache_of(shared.clone());
    none.cache_put("k", &json!("answer"), 2_000).unwrap();
    assert_eq!(shared.cache_get("k", 1_000).unwrap(), Some(json!("answer")));
    assert_eq!(none.cache_get("k", 1_000).unwrap(), Some(json!("answer")));
    // Records go nowhere, and a store of its own keeps no cache either.
    none.append(record("t", 0, "n", json!(1))).unwrap();
    assert_eq!(none.load("t").unwrap(), Vec::<Checkpoint>::new());
    assert_eq!(shared.load("t").unwrap(), Vec::<Checkpoint>::new());
    let alone = NoStore::new();
    alone.cache_put("k", &json!("answer"), 2_000).unwrap();
    assert_eq!(alone.cache_get("k", 1_000).unwrap(), None);
}

/// Postgres checks that a snapshot stands on every record before it by counting them; a
/// process counts the records it wrote in order or found whole only once, so a resume
/// costs the same however long the history, in that process (SQLite marks a thread
/// whose record was removed instead, for every process: above). `remove` deletes a
/// thread's record by hand, as another program would.
fn counts_records_once(open: &dyn Fn() -> Arc<dyn Checkpointer>, remove: &dyn Fn(&str, u64)) {
    let store = open();
    for seq in 0..6 {
        store.append(record("t", seq, "n", json!(seq))).unwrap();
    }
    let snap = |thread: &str, seq: u64| Snapshot {
        thread: thread.into(),
        seq,
        graph: "/g.toml".into(),
        graph_hash: "h".into(),
        values: vec![("n".into(), Arc::new(json!(seq)))],
    };
    store.put_snapshot(snap("t", 5)).unwrap();
    let (found, records) = store.resume_point("t").unwrap();
    assert_eq!(found.map(Snapshot::parsed), Some(snap("t", 5)));
    assert_eq!(records, [record("t", 5, "n", json!(5))]);
    // A record removed from the middle of the history: the next process finds the gap
    // (and reads the thread whole, which reports it); this one, which knows the records
    // were whole, resumes from the snapshot, which holds the whole state.
    remove("t", 2);
    assert_eq!(store.snapshot("t").unwrap(), Some(snap("t", 5)));
    let other = open();
    assert_eq!(other.snapshot("t").unwrap(), None);
    assert_eq!(
        other.load("t").unwrap_err().to_string(),
        "checkpoint store: a record of thread `t` is corrupt: record 2 is missing"
    );
    // Another process goes on with the thread: this one counts the records it did not
    // know of, and finds one of them gone.
    for seq in 6..8 {
        other.append(record("t", seq, "n", json!(seq))).unwrap();
    }
    other.put_snapshot(snap("t", 7)).unwrap();
    assert_eq!(store.snapshot("t").unwrap(), Some(snap("t", 7)));
    for seq in 8..10 {
        other.append(record("t", seq, "n", json!(seq))).unwrap();
    }
    other.put_snapshot(snap("t", 9)).unwrap();
    remove("t", 8);
    assert_eq!(store.snapshot("t").unwrap(), None, "record 8 is gone");
    // After a rollback all of them are counted again.
    store.truncate("t", 8).unwrap();
    store.put_snapshot(snap("t", 6)).unwrap();
    assert_eq!(store.snapshot("t").unwrap(), None, "record 2 is gone");
    // The first record is read every time.
    for seq in 0..3 {
        store.append(record("f", seq, "n", json!(seq))).unwrap();
    }
    store.put_snapshot(snap("f", 2)).unwrap();
    assert_eq!(store.snapshot("f").unwrap(), Some(snap("f", 2)));
    remove("f", 0);
    assert_eq!(store.snapshot("f").unwrap(), None, "record 0 is gone");
    store.delete_thread("t").unwrap();
    store.delete_thread("f").unwrap();
}

/// SQLite marks a thread whose record something other than Switchyard removed (a
/// trigger, `recount`), so that a resume finds a gap without counting the records
/// before the snapshot, in any process: its cost does not grow with the history
/// (`cargo bench --bench interpreter -- c`, a store opened anew).
#[test]
fn sqlite_finds_a_record_removed_by_hand_at_once_without_counting() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let sql = |statement: &str| {
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute_batch(statement)
            .unwrap();
    };
    let marked = || -> Vec<String> {
        rusqlite::Connection::open(&db)
            .unwrap()
            .prepare("SELECT thread FROM recount ORDER BY thread")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let snap = |thread: &str, seq: u64| Snapshot {
        thread: thread.into(),
        seq,
        graph: "/g.toml".into(),
        graph_hash: "h".into(),
        values: vec![("n".into(), Arc::new(json!(seq)))],
    };
    let store = SqliteStore::open(&db).unwrap();
    for seq in 0..6 {
        store.append(record("t", seq, "n", json!(seq))).unwrap();
    }
    store.put_snapshot(snap("t", 5)).unwrap();
    // Switchyard's own removals leave no mark: a rollback, a prune, a delete.
    store.truncate("t", 4).unwrap();
    store.append(record("t", 4, "n", json!(4))).unwrap();
    store.put_snapshot(snap("t", 4)).unwrap();
    let base = Checkpoint {
        source: Source::Base,
        ..record("p", 2, "n", json!(2))
    };
    for seq in 0..3 {
        store.append(record("p", seq, "n", json!(seq))).unwrap();
    }
    assert_eq!(store.prune(base).unwrap(), 2);
    store.put_snapshot(snap("p", 2)).unwrap();
    assert_eq!(marked(), Vec::<String>::new());
    assert_eq!(store.snapshot("t").unwrap(), Some(snap("t", 4)));
    assert_eq!(store.snapshot("p").unwrap(), Some(snap("p", 2)));
    // A record removed by hand: this process finds it as any other does.
    sql("DELETE FROM checkpoints WHERE thread = 't' AND seq = 2");
    assert_eq!(marked(), ["t"]);
    assert_eq!(store.snapshot("t").unwrap(), None);
    assert_eq!(SqliteStore::open(&db).unwrap().snapshot("t").unwrap(), None);
    assert_eq!(
        store.load("t").unwrap_err().to_string(),
        "checkpoint store: a record of thread `t` is corrupt: record 2 is missing"
    );
    // A rollback after it keeps the mark: the record is no less missing.
    store.truncate("t", 4).unwrap();
    store.put_snapshot(snap("t", 3)).unwrap();
    assert_eq!(store.snapshot("t").unwrap(), None);
    assert_eq!(marked(), ["t"]);
    // Renumbered by hand: marked too.
    sql("UPDATE checkpoints SET seq = 7 WHERE thread = 'p' AND seq = 2");
    assert_eq!(marked(), ["p", "t"]);
    assert_eq!(store.snapshot("p").unwrap(), None);
    // Deleted whole, a thread's name starts again unmarked; so does a new thread of
    // a name whose records were all removed by hand.
    store.delete_thread("t").unwrap();
    sql("DELETE FROM checkpoints WHERE thread = 'p'");
    assert_eq!(marked(), ["p"]);
    for thread in ["t", "p"] {
        for seq in 0..2 {
            store.append(record(thread, seq, "n", json!(seq))).unwrap();
        }
        store.put_snapshot(snap(thread, 1)).unwrap();
        assert_eq!(store.snapshot(thread).unwrap(), Some(snap(thread, 1)));
    }
    assert_eq!(marked(), Vec::<String>::new());
    // Nor does it stand on the snapshot the removed records left.
    for seq in 0..3 {
        store.append(record("q", seq, "n", json!(seq))).unwrap();
    }
    store.put_snapshot(snap("q", 2)).unwrap();
    sql("DELETE FROM checkpoints WHERE thread = 'q'");
    for seq in 0..3 {
        store
            .append(record("q", seq, "n", json!(seq + 10)))
            .unwrap();
    }
    assert_eq!(marked(), Vec::<String>::new());
    assert_eq!(store.snapshot("q").unwrap(), None);
    // A file made before the marks: its threads with a gap are marked when it opens.
    for seq in 2..4 {
        store.append(record("t", seq, "n", json!(seq))).unwrap();
    }
    store.put_snapshot(snap("t", 3)).unwrap();
    drop(store);
    sql(
        "DROP TRIGGER checkpoint_removed; DROP TRIGGER checkpoint_moved; DROP TABLE recount;
         DELETE FROM checkpoints WHERE thread = 't' AND seq = 1;",
    );
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(marked(), ["t"]);
    assert_eq!(store.snapshot("t").unwrap(), None);
    assert_eq!(store.snapshot("p").unwrap(), Some(snap("p", 1)));
}

#[test]
fn postgres_counts_a_threads_records_once_per_process_not_at_every_resume() {
    let url = crate::postgres::database();
    let remove = |thread: &str, seq: u64| {
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .execute(
                "DELETE FROM switchyard.checkpoints WHERE thread = $1 AND seq = $2",
                &[&thread, &(seq as i64)],
            )
            .unwrap();
    };
    counts_records_once(&|| Arc::new(PostgresStore::open(&url).unwrap()), &remove);
}

#[test]
fn sqlite_forgets_a_graph_whose_first_write_was_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = SqliteStore::open(&db).unwrap();
    let other = |r: Checkpoint| Checkpoint {
        graph: "/other.toml".into(),
        graph_hash: "h2".into(),
        ..r
    };
    store.append(record("t", 0, "n", json!(0))).unwrap();
    // A copy whose second record meets one already there: nothing of it stays, the
    // graph it named first included.
    let err = store
        .append_all(vec![
            other(record("u", 0, "n", json!(1))),
            other(record("t", 0, "n", json!(2))),
        ])
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    // A thread's first record that fails: the same.
    let err = store
        .append(other(record("t", 0, "n", json!(3))))
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    store.append(other(record("v", 0, "n", json!(4)))).unwrap();
    let read = SqliteStore::open(&db).unwrap().load("v").unwrap();
    assert_eq!(
        (&*read[0].graph, &*read[0].graph_hash),
        ("/other.toml", "h2")
    );
    assert_eq!(store.load("u").unwrap(), Vec::new());
}
