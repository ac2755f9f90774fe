//! The tables of a Postgres store, in the schema `switchyard`, and how a database is
//! told apart from others and brought to this version.

use super::{PostgresStore, pg_error};
use crate::store::StoreError;

/// Layout version, kept in `switchyard.layout`.
pub(super) const VERSION: i32 = 7;

/// Held while a process looks at the layout and makes or migrates it, so that many
/// workers opening a new database at once make it once. Any fixed key: "SWYD" again.
const LAYOUT_LOCK: i64 = 0x5357_5944;

/// `MIGRATIONS[v]` brings a store of version `v` to `v + 1`; version 0 is an empty
/// schema. Each runs in the transaction that records the new version.
///
/// Version 1: as SQLite's version 4 (checkpoints name their graph by id, large values
/// written again are references, one snapshot per thread), with the server's catalog.
/// JSON is kept as text, not `jsonb`: `jsonb` reorders object keys, and a state's key
/// order is part of what a run wrote. Postgres compresses long text itself (TOAST).
///
/// Version 2: a checkpoint names its parent, so that a thread's history can branch;
/// every record of version 1 follows the one before it (a pruned thread's base none).
///
/// Version 3: a claim is a lease (`until_ms`, on the database's clock) with a fencing
/// token from one sequence (a token is never given twice, whatever the thread), rather
/// than an advisory lock of the holder's connection; claims left by version 2 are
/// lapsed. A claim names its holder's presence (an advisory lock a connection of the
/// holder's keeps while the process lives): a lapsed lease is taken over only once that
/// is gone too. Runs in flight get an index of their own, in the order they are claimed
/// (the table keeps every run ever made).
///
/// Version 4: the long-term store's items (`items.rs`), their namespaces compared byte
/// by byte (`COLLATE "C"`), so that the namespaces under a prefix are one range, and
/// numbered in the order they were first put (`ord`, kept by an upsert).
///
/// Version 5: crons (`crons.rs`), in the order they were made (`ord`), the due ones
/// found by their next occurrence; an item's vectors for semantic search.
///
/// Version 7: what a run used of its `[budget]` (`checkpoints.usage`).
/// Version 6: assistants made through the API (`assistants.rs`), in the order they
/// were made (`ord`), and their versions.
const MIGRATIONS: [&str; 7] = [
    "
CREATE TABLE switchyard.layout (
    version     INTEGER NOT NULL
);
CREATE TABLE switchyard.graphs (
    id          BIGSERIAL PRIMARY KEY,
    path        TEXT    NOT NULL,
    hash        TEXT    NOT NULL,
    UNIQUE (path, hash)
);
CREATE TABLE switchyard.checkpoints (
    thread      TEXT    NOT NULL,
    seq         BIGINT  NOT NULL,
    run         BIGINT  NOT NULL,
    step        BIGINT  NOT NULL,
    node        TEXT,
    next        TEXT,
    writes      TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    pending     TEXT,
    outcome     TEXT,
    graph       BIGINT  NOT NULL,
    tokens      BIGINT  NOT NULL,
    elapsed_ms  BIGINT  NOT NULL,
    at_ms       BIGINT  NOT NULL,
    limited     BOOLEAN NOT NULL,
    error       TEXT,
    source      TEXT    NOT NULL,
    PRIMARY KEY (thread, seq)
);
CREATE TABLE switchyard.snapshots (
    thread      TEXT    NOT NULL PRIMARY KEY,
    seq         BIGINT  NOT NULL,
    graph       BIGINT  NOT NULL,
    state       TEXT    NOT NULL
);
CREATE TABLE switchyard.llm_cache (
    key         TEXT    NOT NULL PRIMARY KEY,
    value       TEXT    NOT NULL,
    expires_ms  BIGINT  NOT NULL
);
CREATE TABLE switchyard.threads (
    id          TEXT    NOT NULL PRIMARY KEY,
    created_ms  BIGINT  NOT NULL,
    updated_ms  BIGINT  NOT NULL,
    metadata    TEXT    NOT NULL,
    ord         BIGSERIAL
);
CREATE TABLE switchyard.runs (
    id          TEXT    NOT NULL PRIMARY KEY,
    thread      TEXT    NOT NULL,
    assistant   TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    created_ms  BIGINT  NOT NULL,
    updated_ms  BIGINT  NOT NULL,
    metadata    TEXT    NOT NULL,
    kwargs      TEXT    NOT NULL,
    multitask   TEXT    NOT NULL,
    error       TEXT,
    first_seq   BIGINT,
    ord         BIGSERIAL,
    -- Which server process drives it, until when (Unix ms), and a cancel asked of it
    -- through another process.
    worker      TEXT,
    lease_ms    BIGINT,
    cancel      TEXT
);
CREATE INDEX runs_by_thread ON switchyard.runs (thread, created_ms);
CREATE INDEX runs_by_status ON switchyard.runs (status, ord);
-- At most one run of a thread running, whichever process drives it.
CREATE UNIQUE INDEX one_running_run_per_thread ON switchyard.runs (thread) WHERE status = 'running';
-- A run's events, for streams followed through another process than the one driving it.
CREATE TABLE switchyard.run_events (
    run         TEXT    NOT NULL,
    seq         BIGINT  NOT NULL,
    event       TEXT    NOT NULL,
    PRIMARY KEY (run, seq)
);
-- Who holds a thread's claim, to name it to a process refused.
CREATE TABLE switchyard.claims (
    thread      TEXT    NOT NULL PRIMARY KEY,
    holder      TEXT    NOT NULL,
    pid         BIGINT  NOT NULL,
    since_ms    BIGINT  NOT NULL
);
",
    "
ALTER TABLE switchyard.checkpoints ADD COLUMN parent BIGINT;
UPDATE switchyard.checkpoints SET parent = seq - 1 WHERE seq > 0 AND source <> 'base';
",
    "
ALTER TABLE switchyard.claims ADD COLUMN token BIGINT NOT NULL DEFAULT 0;
ALTER TABLE switchyard.claims ADD COLUMN until_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE switchyard.claims ADD COLUMN presence BIGINT NOT NULL DEFAULT 0;
CREATE SEQUENCE switchyard.claim_tokens;
CREATE INDEX runs_in_flight ON switchyard.runs (ord) WHERE status IN ('pending', 'running');
CREATE INDEX runs_pending_by_thread ON switchyard.runs (thread, ord) WHERE status = 'pending';
",
    "
CREATE TABLE switchyard.items (
    namespace   TEXT COLLATE \"C\" NOT NULL,
    key         TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    created_ms  BIGINT  NOT NULL,
    updated_ms  BIGINT  NOT NULL,
    expires_ms  BIGINT,
    ttl_ms      BIGINT,
    ord         BIGSERIAL,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX items_expiring ON switchyard.items (expires_ms) WHERE expires_ms IS NOT NULL;
",
    "
CREATE TABLE switchyard.crons (
    id          TEXT    PRIMARY KEY,
    assistant   TEXT    NOT NULL,
    thread      TEXT,
    body        TEXT    NOT NULL,
    enabled     BOOLEAN NOT NULL,
    next_ms     BIGINT,
    created_ms  BIGINT  NOT NULL,
    updated_ms  BIGINT  NOT NULL,
    ord         BIGSERIAL
);
CREATE INDEX crons_due ON switchyard.crons (next_ms) WHERE enabled AND next_ms IS NOT NULL;
CREATE INDEX crons_of_thread ON switchyard.crons (thread) WHERE thread IS NOT NULL;
ALTER TABLE switchyard.items ADD COLUMN vectors TEXT;
",
    "
CREATE TABLE switchyard.assistants (
    id          TEXT    PRIMARY KEY,
    current     INTEGER NOT NULL,
    latest      INTEGER NOT NULL,
    created_ms  BIGINT  NOT NULL,
    updated_ms  BIGINT  NOT NULL,
    ord         BIGSERIAL
);
CREATE TABLE switchyard.assistant_versions (
    id          TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    graph       TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    created_ms  BIGINT  NOT NULL,
    PRIMARY KEY (id, version)
);
",
    "
ALTER TABLE switchyard.checkpoints ADD COLUMN usage TEXT;
",
];

/// Makes the schema `switchyard` a store of this version: created when the database
/// has none, migrated when it is older; a schema that is not a store, or a store of a
/// newer version, is refused and left as it is. On a thread of its own, with a runtime
/// of its own: `open` is called from plain and from async code alike.
pub(super) fn prepare(config: &tokio_postgres::Config, url: &str) -> Result<(), StoreError> {
    let (config, url) = (config.clone(), url.to_string());
    let failed = |message: String, url: &str| StoreError::Postgres {
        url: url.to_string(),
        message,
    };
    let shown = url.clone();
    std::thread::Builder::new()
        .name("switchyard-postgres-layout".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| failed(format!("cannot start a runtime: {e}"), &url))?;
            runtime.block_on(async {
                let (mut client, connection) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| pg_error(&url, e))?;
                let driver = tokio::spawn(connection);
                let pg = |e| pg_error(&url, e);
                client
                    .execute("SELECT pg_advisory_lock($1)", &[&LAYOUT_LOCK])
                    .await
                    .map_err(pg)?;
                let done = bring_forward(&mut client, &url).await;
                let unlocked = client
                    .execute("SELECT pg_advisory_unlock($1)", &[&LAYOUT_LOCK])
                    .await;
                drop(client);
                let _ = driver.await;
                done?;
                unlocked.map_err(pg)?;
                Ok(())
            })
        })
        .map_err(|e| failed(format!("cannot start a thread: {e}"), &shown))?
        .join()
        .map_err(|_| failed("the layout's thread panicked".into(), &shown))?
}

async fn bring_forward(client: &mut tokio_postgres::Client, url: &str) -> Result<(), StoreError> {
    let pg = |e| pg_error(url, e);
    let tables: Vec<String> = client
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'switchyard' ORDER BY 1",
            &[],
        )
        .await
        .map_err(pg)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let found = if tables.is_empty() {
        0
    } else if !tables.iter().any(|t| t == "layout") {
        return Err(StoreError::PostgresForeign {
            url: url.to_string(),
            tables,
        });
    } else {
        let rows = client
            .query("SELECT version FROM switchyard.layout", &[])
            .await
            .map_err(pg)?;
        match rows.as_slice() {
            [row] if row.try_get::<_, i32>(0).is_ok() => row.get::<_, i32>(0),
            _ => {
                return Err(StoreError::PostgresForeign {
                    url: url.to_string(),
                    tables,
                });
            }
        }
    };
    if found == VERSION {
        return Ok(());
    }
    if !(0..VERSION).contains(&found) {
        return Err(StoreError::PostgresVersion {
            url: url.to_string(),
            found: i64::from(found),
            expected: i64::from(VERSION),
        });
    }
    // All in one transaction: a process killed part-way leaves the schema as it was.
    let tx = client.transaction().await.map_err(pg)?;
    tx.batch_execute("CREATE SCHEMA IF NOT EXISTS switchyard")
        .await
        .map_err(pg)?;
    for step in &MIGRATIONS[found as usize..] {
        tx.batch_execute(step).await.map_err(pg)?;
    }
    tx.execute("DELETE FROM switchyard.layout", &[])
        .await
        .map_err(pg)?;
    tx.execute(
        "INSERT INTO switchyard.layout (version) VALUES ($1)",
        &[&VERSION],
    )
    .await
    .map_err(pg)?;
    tx.commit().await.map_err(pg)?;
    Ok(())
}

impl PostgresStore {
    /// The layout version of the store this connects to.
    pub async fn layout_version(&self) -> Result<i64, StoreError> {
        let url = &*self.url;
        self.pool
            .run(|c| async move {
                let row = c
                    .query_one("SELECT version FROM switchyard.layout", &[])
                    .await?;
                Ok(i64::from(super::col::<i32>(&row, 0, url)?))
            })
            .await
    }
}
