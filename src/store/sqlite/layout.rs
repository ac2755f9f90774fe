//! The tables of a store file, how a file is told apart from other files, and how an
//! older layout is brought forward.

use rusqlite::Connection;

/// Layout version, kept in SQLite's `user_version`.
pub(super) const VERSION: i64 = 6;
/// Marks a SQLite file as Switchyard's (`PRAGMA application_id`): "SWYD".
pub(super) const APPLICATION_ID: i64 = 0x5357_5944;

/// Version 6: version 5 and a checkpoint's `usage` (of its run's `[budget]`).
/// Version 5: version 4 and a checkpoint's `parent`. Version 4: a checkpoint names
/// its graph by an id into `graphs` rather than repeating the file's path and hash on
/// every row; a large value a step writes again unchanged is stored as a reference to the record that holds it (see `records.rs`);
/// `snapshots` keeps each thread's latest whole state. `checkpoints` is a rowid table:
/// its rows (a record's writes) are too large for `WITHOUT ROWID` to pack well.
const SCHEMA: &str = "
CREATE TABLE graphs (
    id          INTEGER PRIMARY KEY,
    path        TEXT    NOT NULL,
    hash        TEXT    NOT NULL,
    UNIQUE (path, hash)
);
CREATE TABLE checkpoints (
    thread      TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    run         INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    node        TEXT,
    next        TEXT,
    writes      TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    pending     TEXT,
    outcome     TEXT,
    graph       INTEGER NOT NULL,
    tokens      INTEGER NOT NULL,
    elapsed_ms  INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    limited     INTEGER NOT NULL,
    error       TEXT,
    source      TEXT    NOT NULL,
    parent      INTEGER,
    usage       TEXT,
    PRIMARY KEY (thread, seq)
);
CREATE TABLE snapshots (
    thread      TEXT    NOT NULL PRIMARY KEY,
    seq         INTEGER NOT NULL,
    graph       INTEGER NOT NULL,
    state       TEXT    NOT NULL
);
CREATE TABLE llm_cache (
    key         TEXT    NOT NULL PRIMARY KEY,
    value       TEXT    NOT NULL,
    expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Threads whose records must be counted before a snapshot of theirs is trusted: a
/// record of theirs was removed (or renumbered) by something other than Switchyard's
/// own rollback, prune or delete, which take back the mark they make. A resume checks
/// for a mark (one lookup) instead of counting the records before the snapshot, so
/// its cost does not grow with the history, in a process that has never read the
/// thread too. Added to layout 4 without a new version: a build that does not know it
/// reads and writes the file as before (its own removals leave marks, which only cost
/// a count). Added to a file that lacks it, the threads with a gap already are marked.
pub(super) const RECOUNT: &str = "
CREATE TABLE IF NOT EXISTS recount (
    thread      TEXT    NOT NULL PRIMARY KEY
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS checkpoint_removed AFTER DELETE ON checkpoints
BEGIN
    INSERT OR IGNORE INTO recount (thread) VALUES (old.thread);
END;
CREATE TRIGGER IF NOT EXISTS checkpoint_moved AFTER UPDATE OF thread, seq ON checkpoints
BEGIN
    INSERT OR IGNORE INTO recount (thread) VALUES (old.thread);
    INSERT OR IGNORE INTO recount (thread) VALUES (new.thread);
END;
INSERT OR IGNORE INTO recount (thread)
    SELECT thread FROM checkpoints GROUP BY thread HAVING count(*) <> max(seq) - min(seq) + 1;
";

/// Whether the file has [`RECOUNT`]'s triggers.
pub(super) fn has_recount(conn: &Connection) -> Result<bool, rusqlite::Error> {
    conn.query_row(
        "SELECT count(*) = 2 FROM sqlite_master WHERE type = 'trigger' AND name IN ('checkpoint_removed', 'checkpoint_moved')",
        [],
        |r| r.get(0),
    )
}

/// Whether the table `name` is there: the long-term store's (`items.rs`) and the
/// crons' (`crons.rs`) and the assistants' (`assistants.rs`) are made when missing.
pub(super) fn has_table(conn: &Connection, name: &str) -> Result<bool, rusqlite::Error> {
    conn.query_row(
        "SELECT count(*) = 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get(0),
    )
}

/// Whether `table` has the column `column` (`items.vectors` is added when missing).
pub(super) fn has_column(
    conn: &Connection,
    table: &str,
    column: &str,
) -> Result<bool, rusqlite::Error> {
    conn.query_row(
        "SELECT count(*) = 1 FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get(0),
    )
}

/// The server's catalog (from version 3).
const CATALOG: &str = "
CREATE TABLE IF NOT EXISTS threads (
    id          TEXT    NOT NULL PRIMARY KEY,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    metadata    TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id          TEXT    NOT NULL PRIMARY KEY,
    thread      TEXT    NOT NULL,
    assistant   TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    metadata    TEXT    NOT NULL,
    kwargs      TEXT    NOT NULL,
    multitask   TEXT    NOT NULL,
    error       TEXT,
    first_seq   INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_thread ON runs (thread, created_ms);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status);
";

/// From version 2: checkpoints gain `source` (a run's input record is the first of its
/// run that no node wrote), and the catalog tables are new.
const MIGRATE_2_TO_3: &str = "
ALTER TABLE checkpoints ADD COLUMN source TEXT NOT NULL DEFAULT 'loop';
UPDATE checkpoints SET source = 'input' WHERE node IS NULL AND status = 'running'
    AND seq = (SELECT min(c.seq) FROM checkpoints c WHERE c.thread = checkpoints.thread AND c.run = checkpoints.run);
";

/// From version 3: graphs get ids, checkpoints move to a rowid table that names them
/// by id, and snapshots are new (threads get theirs at their next pause).
const MIGRATE_3_TO_4: &str = "
CREATE TABLE graphs (
    id          INTEGER PRIMARY KEY,
    path        TEXT    NOT NULL,
    hash        TEXT    NOT NULL,
    UNIQUE (path, hash)
);
INSERT INTO graphs (path, hash) SELECT DISTINCT graph, graph_hash FROM checkpoints;
ALTER TABLE checkpoints RENAME TO checkpoints_v3;
CREATE TABLE checkpoints (
    thread      TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    run         INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    node        TEXT,
    next        TEXT,
    writes      TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    pending     TEXT,
    outcome     TEXT,
    graph       INTEGER NOT NULL,
    tokens      INTEGER NOT NULL,
    elapsed_ms  INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    limited     INTEGER NOT NULL,
    error       TEXT,
    source      TEXT    NOT NULL,
    PRIMARY KEY (thread, seq)
);
INSERT INTO checkpoints
    SELECT c.thread, c.seq, c.run, c.step, c.node, c.next, c.writes, c.status, c.pending,
           c.outcome, g.id, c.tokens, c.elapsed_ms, c.at_ms, c.limited, c.error, c.source
    FROM checkpoints_v3 c JOIN graphs g ON g.path = c.graph AND g.hash = c.graph_hash;
DROP TABLE checkpoints_v3;
CREATE TABLE snapshots (
    thread      TEXT    NOT NULL PRIMARY KEY,
    seq         INTEGER NOT NULL,
    graph       INTEGER NOT NULL,
    state       TEXT    NOT NULL
);
";

/// From version 4: a checkpoint names its parent, so that a thread's history can
/// branch. Every record of an older store follows the one before it (a pruned
/// thread's base, its first, follows none).
const MIGRATE_4_TO_5: &str = "
ALTER TABLE checkpoints ADD COLUMN parent INTEGER;
UPDATE checkpoints SET parent = seq - 1 WHERE seq > 0 AND source <> 'base';
";

/// From version 5: what a run used of its budget, beside its tokens (none: nothing).
const MIGRATE_5_TO_6: &str = "ALTER TABLE checkpoints ADD COLUMN usage TEXT;";

/// Every table a store has.
pub(super) const OUR_TABLES: [&str; 11] = [
    "assistant_versions",
    "assistants",
    "checkpoints",
    "crons",
    "graphs",
    "items",
    "llm_cache",
    "recount",
    "runs",
    "snapshots",
    "threads",
];

/// What a file is, as a store: read before anything is written to it.
pub(super) enum Layout {
    /// Nothing in it yet (a new or empty file).
    Empty,
    /// A store of this layout.
    Current,
    /// A store of layout 2 to 5, which this version brings forward.
    Older(i64),
    /// Only some of our tables, all empty, and no version: a store whose creation an
    /// earlier Switchyard did not finish (killed part-way). Made again from scratch.
    Unfinished,
    /// Another program's database, or a store of a layout this version does not read.
    Other { version: i64, tables: Vec<String> },
}

pub(super) fn layout(conn: &Connection) -> Result<Layout, rusqlite::Error> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let mut stmt =
        conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let ours = tables.iter().any(|t| t == "checkpoints");
    let only_ours = tables.iter().all(|t| OUR_TABLES.contains(&t.as_str()));
    if version == 0 && !tables.is_empty() && only_ours {
        let mut rows = 0i64;
        for t in &tables {
            rows += conn.query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| {
                r.get::<_, i64>(0)
            })?;
        }
        if rows == 0 {
            return Ok(Layout::Unfinished);
        }
    }
    Ok(match (version, tables.is_empty(), ours) {
        (0, true, _) => Layout::Empty,
        (VERSION, _, true) => Layout::Current,
        (2..=5, _, true) => Layout::Older(version),
        _ => Layout::Other { version, tables },
    })
}

/// Makes `conn` (in a transaction that holds the write lock) a store of this layout,
/// from what [`layout`] found; a layout this version neither makes nor reads is left
/// alone.
pub(super) fn bring_forward(conn: &Connection, found: &Layout) -> Result<(), rusqlite::Error> {
    match found {
        Layout::Empty | Layout::Unfinished => {
            for t in OUR_TABLES {
                conn.execute_batch(&format!("DROP TABLE IF EXISTS {t}"))?;
            }
            conn.execute_batch(SCHEMA)?;
            conn.execute_batch(CATALOG)?;
            conn.pragma_update(None, "application_id", APPLICATION_ID)?;
        }
        Layout::Older(2) => {
            conn.execute_batch(MIGRATE_2_TO_3)?;
            conn.execute_batch(CATALOG)?;
            conn.execute_batch(MIGRATE_3_TO_4)?;
            conn.execute_batch(MIGRATE_4_TO_5)?;
            conn.execute_batch(MIGRATE_5_TO_6)?;
        }
        Layout::Older(3) => {
            conn.execute_batch(MIGRATE_3_TO_4)?;
            conn.execute_batch(MIGRATE_4_TO_5)?;
            conn.execute_batch(MIGRATE_5_TO_6)?;
        }
        Layout::Older(4) => {
            conn.execute_batch(MIGRATE_4_TO_5)?;
            conn.execute_batch(MIGRATE_5_TO_6)?;
        }
        Layout::Older(_) => conn.execute_batch(MIGRATE_5_TO_6)?,
        Layout::Current | Layout::Other { .. } => return Ok(()),
    }
    conn.execute_batch(RECOUNT)?;
    conn.pragma_update(None, "user_version", VERSION)
}
