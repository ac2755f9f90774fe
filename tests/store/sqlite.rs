//! The SQLite store's own behaviour, beyond the suite every store passes: its layout
//! and older layouts, what it writes once, durability, claims, compression, records
//! removed by hand.

use super::*;
use switchyard::store::{Catalog, Checkpoints};

#[tokio::test]
async fn sqlite_keeps_a_large_value_written_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = SqliteStore::open(&db).unwrap();
    for seq in 0..3 {
        store.append(record("t", seq, "big", big())).await.unwrap();
    }
    store
        .put_snapshot(Snapshot {
            thread: "t".into(),
            seq: 2,
            graph: "/g.toml".into(),
            graph_hash: "h".into(),
            values: vec![("big".into(), Arc::new(big()))],
        })
        .await
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
            .await
            .unwrap()
            .iter()
            .all(|r| *r.writes[0].value == big())
    );
    assert_eq!(
        other.snapshot("t").await.unwrap().unwrap().values[0]
            .1
            .as_ref(),
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

#[tokio::test]
async fn stores_of_versions_2_and_3_are_brought_forward_whole() {
    let dir = tempfile::tempdir().unwrap();
    // Stores of those layouts kept no usage.
    let records: Vec<Checkpoint> = (0..3)
        .map(|seq| Checkpoint {
            usage: Default::default(),
            ..record("t", seq, "n", if seq == 1 { big() } else { json!(seq) })
        })
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
        assert_eq!(store.load("t").await.unwrap(), records, "version {version}");
        let version_now: i64 = rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version_now, 6);
        // It goes on like a new one.
        store.append(record("t", 3, "n", big())).await.unwrap();
        assert_eq!(*store.load("t").await.unwrap()[3].writes[0].value, big());
    }
}

#[tokio::test]
async fn a_store_of_version_4_is_brought_forward_with_every_record_following_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v4.db");
    let records: Vec<Checkpoint> = (0..3)
        .map(|seq| record("t", seq, "n", json!(seq)))
        .collect();
    let pruned = Checkpoint {
        source: Source::Base,
        parent: None,
        ..record("p", 2, "n", json!(2))
    };
    {
        let store = SqliteStore::open(&db).unwrap();
        store.append_all(records.clone()).await.unwrap();
        for seq in 0..3 {
            store
                .append(record("p", seq, "n", json!(seq)))
                .await
                .unwrap();
        }
        store.prune(pruned.clone()).await.unwrap();
    }
    // Version 4 as it was: no `parent`, no `usage`.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "ALTER TABLE checkpoints DROP COLUMN parent; ALTER TABLE checkpoints DROP COLUMN usage; PRAGMA user_version = 4;",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&db).unwrap();
    let unused = |r: &Checkpoint| Checkpoint {
        usage: Default::default(),
        ..r.clone()
    };
    assert_eq!(
        store.load("t").await.unwrap(),
        records.iter().map(unused).collect::<Vec<_>>()
    );
    assert_eq!(store.load("p").await.unwrap(), [unused(&pruned)]);
    let version_now: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version_now, 6);
}

#[tokio::test]
async fn a_store_of_version_5_is_brought_forward_and_keeps_usage_from_then_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v5.db");
    let records: Vec<Checkpoint> = (0..3)
        .map(|seq| Checkpoint {
            usage: Default::default(),
            ..record("t", seq, "n", json!(seq))
        })
        .collect();
    SqliteStore::open(&db)
        .unwrap()
        .append_all(records.clone())
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("ALTER TABLE checkpoints DROP COLUMN usage; PRAGMA user_version = 5;")
        .unwrap();
    drop(conn);
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(store.load("t").await.unwrap(), records);
    // A record with usage after the migration keeps it.
    let used = Checkpoint {
        usage: switchyard::store::Usage {
            model_calls: 3,
            tool_calls: 1,
            usd: 0.5,
        },
        ..record("t", 3, "n", json!(3))
    };
    store.append(used.clone()).await.unwrap();
    assert_eq!(store.load("t").await.unwrap()[3], used);
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

#[tokio::test]
async fn claims_share_one_lock_file_and_end_with_their_holder() {
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
        claims.push(store.claim(&format!("t{i}")).await.unwrap());
    }
    // One file however many threads are claimed or have ever been.
    assert_eq!(files(), ["claims"]);
    // Another process (here: connection) is refused while one is held, and so is the
    // same store asked twice; both name this process.
    let other = SqliteStore::open(&db).unwrap();
    let pid = std::process::id();
    for (who, store) in [("other", &other), ("same", &store)] {
        match store.claim("t7").await {
            Err(StoreError::Claimed { thread, pid: p }) => {
                assert_eq!((thread.as_str(), p), ("t7", pid), "{who}")
            }
            r => panic!("{who}: {r:?}"),
        }
    }
    // The others stay claimed when one ends.
    claims.remove(7);
    let again = other.claim("t7").await.unwrap();
    assert!(matches!(
        other.claim("t8").await,
        Err(StoreError::Claimed { ref thread, pid }) if thread == "t8" && pid == std::process::id()
    ));
    drop(claims);
    drop(again);
    assert_eq!(files(), ["claims"]);
    // Every claim ended: every thread can be claimed again, by either store.
    for i in 0..100 {
        drop(other.claim(&format!("t{i}")).await.unwrap());
        drop(store.claim(&format!("t{i}")).await.unwrap());
    }
}

#[tokio::test]
async fn the_compressing_sqlite_store_passes_the_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("z.db");
    let compress = SqliteOptions {
        compress: true,
        ..SqliteOptions::default()
    };
    suite(&|| Arc::new(SqliteStore::open_with(&db, compress).unwrap())).await;
}

#[tokio::test]
async fn sqlite_compresses_large_values_when_asked_and_reads_either_kind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("z.db");
    let compress = SqliteOptions {
        compress: true,
        ..SqliteOptions::default()
    };
    let zipped = SqliteStore::open_with(&db, compress).unwrap();
    let page = |n: u64| json!({ "text": format!("page {n} ").repeat(300) });
    zipped
        .append(record("t", 0, "page", page(0)))
        .await
        .unwrap();
    zipped
        .append(record("t", 1, "small", json!("hi")))
        .await
        .unwrap();
    // A process that does not compress appends to the same thread, and the other
    // way round.
    let plain = SqliteStore::open(&db).unwrap();
    plain.append(record("t", 2, "page", page(2))).await.unwrap();
    zipped
        .append(record("t", 3, "page", page(3)))
        .await
        .unwrap();
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
        .await
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
            .await
            .unwrap()
            .iter()
            .map(|r| (*r.writes[0].value).clone())
            .collect();
        assert_eq!(values, [page(0), json!("hi"), page(2), page(3)]);
        assert_eq!(
            store.snapshot("t").await.unwrap().unwrap().values[0]
                .1
                .as_ref(),
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
        plain.load("t").await.unwrap_err().to_string(),
        "checkpoint store: a record of thread `t` is corrupt: `writes` is not a compressed value"
    );
}

#[tokio::test]
async fn sqlite_refers_a_value_written_again_to_the_record_that_holds_it() {
    // Row 1 writes `page` twice: a new value, then the one row 0 holds (stored as a
    // reference to row 0). Row 2 writes row 1's first value again: it must not be
    // referred to row 1, whose last write of `page` is the other value.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = SqliteStore::open(&db).unwrap();
    let a = json!({ "page": "a".repeat(400) });
    let b = json!({ "page": "b".repeat(400) });
    store
        .append(record("t", 0, "page", b.clone()))
        .await
        .unwrap();
    let mut twice = record("t", 1, "page", a.clone());
    twice.writes.push(Write {
        field: "page".into(),
        value: Arc::new(b.clone()),
    });
    store.append(twice).await.unwrap();
    store
        .append(record("t", 2, "page", a.clone()))
        .await
        .unwrap();
    store
        .append(record("t", 3, "page", b.clone()))
        .await
        .unwrap();
    let want = [
        vec![b.clone()],
        vec![a.clone(), b.clone()],
        vec![a.clone()],
        vec![b],
    ];
    // Read whole, from a record on, and by another connection: the same values.
    let other = SqliteStore::open(&db).unwrap();
    for records in [
        store.load("t").await.unwrap(),
        other.load("t").await.unwrap(),
        [
            other.load("t").await.unwrap()[..2].to_vec(),
            other.load_from("t", 2).await.unwrap(),
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

/// SQLite marks a thread whose record something other than Switchyard removed (a
/// trigger, `recount`), so that a resume finds a gap without counting the records
/// before the snapshot, in any process: its cost does not grow with the history
/// (`cargo bench --bench interpreter -- c`, a store opened anew).
#[tokio::test]
async fn sqlite_finds_a_record_removed_by_hand_at_once_without_counting() {
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
    let store = SqliteStore::open(&db).unwrap();
    for seq in 0..6 {
        store
            .append(record("t", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    store.put_snapshot(snap("t", 5)).await.unwrap();
    // Switchyard's own removals leave no mark: a rollback, a prune, a delete.
    store.truncate("t", 4).await.unwrap();
    store.append(record("t", 4, "n", json!(4))).await.unwrap();
    store.put_snapshot(snap("t", 4)).await.unwrap();
    let base = Checkpoint {
        source: Source::Base,
        ..record("p", 2, "n", json!(2))
    };
    for seq in 0..3 {
        store
            .append(record("p", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    assert_eq!(store.prune(base).await.unwrap(), 2);
    store.put_snapshot(snap("p", 2)).await.unwrap();
    assert_eq!(marked(), Vec::<String>::new());
    assert_eq!(store.snapshot("t").await.unwrap(), Some(snap("t", 4)));
    assert_eq!(store.snapshot("p").await.unwrap(), Some(snap("p", 2)));
    // A record removed by hand: this process finds it as any other does.
    sql("DELETE FROM checkpoints WHERE thread = 't' AND seq = 2");
    assert_eq!(marked(), ["t"]);
    assert_eq!(store.snapshot("t").await.unwrap(), None);
    assert_eq!(
        SqliteStore::open(&db).unwrap().snapshot("t").await.unwrap(),
        None
    );
    assert_eq!(
        store.load("t").await.unwrap_err().to_string(),
        "checkpoint store: a record of thread `t` is corrupt: record 2 is missing"
    );
    // A rollback after it keeps the mark: the record is no less missing.
    store.truncate("t", 4).await.unwrap();
    store.put_snapshot(snap("t", 3)).await.unwrap();
    assert_eq!(store.snapshot("t").await.unwrap(), None);
    assert_eq!(marked(), ["t"]);
    // Renumbered by hand: marked too.
    sql("UPDATE checkpoints SET seq = 7 WHERE thread = 'p' AND seq = 2");
    assert_eq!(marked(), ["p", "t"]);
    assert_eq!(store.snapshot("p").await.unwrap(), None);
    // Deleted whole, a thread's name starts again unmarked; so does a new thread of
    // a name whose records were all removed by hand.
    store.delete_thread("t").await.unwrap();
    sql("DELETE FROM checkpoints WHERE thread = 'p'");
    assert_eq!(marked(), ["p"]);
    for thread in ["t", "p"] {
        for seq in 0..2 {
            store
                .append(record(thread, seq, "n", json!(seq)))
                .await
                .unwrap();
        }
        store.put_snapshot(snap(thread, 1)).await.unwrap();
        assert_eq!(store.snapshot(thread).await.unwrap(), Some(snap(thread, 1)));
    }
    assert_eq!(marked(), Vec::<String>::new());
    // Nor does it stand on the snapshot the removed records left.
    for seq in 0..3 {
        store
            .append(record("q", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    store.put_snapshot(snap("q", 2)).await.unwrap();
    sql("DELETE FROM checkpoints WHERE thread = 'q'");
    for seq in 0..3 {
        store
            .append(record("q", seq, "n", json!(seq + 10)))
            .await
            .unwrap();
    }
    assert_eq!(marked(), Vec::<String>::new());
    assert_eq!(store.snapshot("q").await.unwrap(), None);
    // A file made before the marks: its threads with a gap are marked when it opens.
    for seq in 2..4 {
        store
            .append(record("t", seq, "n", json!(seq)))
            .await
            .unwrap();
    }
    store.put_snapshot(snap("t", 3)).await.unwrap();
    drop(store);
    sql(
        "DROP TRIGGER checkpoint_removed; DROP TRIGGER checkpoint_moved; DROP TABLE recount;
         DELETE FROM checkpoints WHERE thread = 't' AND seq = 1;",
    );
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(marked(), ["t"]);
    assert_eq!(store.snapshot("t").await.unwrap(), None);
    assert_eq!(store.snapshot("p").await.unwrap(), Some(snap("p", 1)));
}

/// A store whose `items` table was made before semantic search (no `vectors`) and
/// that has no `crons` table gains both when opened, keeping its items.
#[tokio::test]
async fn a_store_made_before_crons_and_vectors_gains_them_keeping_its_items() {
    use switchyard::store::{Cron, Crons, Item, Items, Namespace};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let item = Item {
        namespace: Namespace::new(vec!["n".into()]).unwrap(),
        key: "k".into(),
        value: json!({"a": 1}).as_object().unwrap().clone(),
        created_ms: 1,
        updated_ms: 1,
        expires_ms: None,
        ttl_ms: None,
        vectors: Vec::new(),
    };
    SqliteStore::open(&db)
        .unwrap()
        .put_item(&item)
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("ALTER TABLE items DROP COLUMN vectors; DROP TABLE crons;")
        .unwrap();
    drop(conn);
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(store.get_item("n", "k").await.unwrap(), Some(item.clone()));
    let indexed = Item {
        vectors: vec![vec![1.0, 2.0]],
        ..item
    };
    store.put_item(&indexed).await.unwrap();
    assert_eq!(store.get_item("n", "k").await.unwrap(), Some(indexed));
    let cron = Cron {
        id: "c".into(),
        assistant: "g".into(),
        thread: None,
        body: serde_json::Map::new(),
        enabled: true,
        next_ms: Some(5),
        created_ms: 1,
        updated_ms: 1,
    };
    store.put_cron(&cron).await.unwrap();
    assert_eq!(store.crons().await.unwrap(), [cron]);
}
