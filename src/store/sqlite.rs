use super::{
    Checkpoint, Checkpointer, Claim, Pending, RunRecord, RunStatus, Source, Status, StoreError,
    ThreadRecord, Write,
};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Checkpoints in one SQLite file: WAL journal, `synchronous = NORMAL`. A record is
/// durable once `append` returns as far as the process is concerned (a crash or
/// SIGKILL loses nothing); a power loss may lose the last few records.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// Where the per-thread lock files of claims go: `<file>.locks/`.
    locks: PathBuf,
}

/// Layout version, kept in SQLite's `user_version`.
const VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS checkpoints (
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
    graph       TEXT    NOT NULL,
    graph_hash  TEXT    NOT NULL,
    tokens      INTEGER NOT NULL,
    elapsed_ms  INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    limited     INTEGER NOT NULL,
    error       TEXT,
    source      TEXT    NOT NULL DEFAULT 'loop',
    PRIMARY KEY (thread, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS llm_cache (
    key         TEXT    NOT NULL PRIMARY KEY,
    value       TEXT    NOT NULL,
    expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
";

/// The server's catalog (version 3).
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

/// Every table a store has.
const OUR_TABLES: [&str; 4] = ["checkpoints", "llm_cache", "runs", "threads"];

/// What a file is, as a store: read before anything is written to it.
enum Layout {
    /// Nothing in it yet (a new or empty file).
    Empty,
    /// A store of this layout.
    Current,
    /// A store of layout 2, which this version brings forward.
    Two,
    /// Only some of our tables, all empty, and no version: a store whose creation an
    /// earlier Switchyard did not finish (killed part-way). Made again from scratch.
    Unfinished,
    /// Another program's database, or a store of a layout this version does not read.
    Other { version: i64, tables: Vec<String> },
}

fn layout(conn: &Connection) -> Result<Layout, rusqlite::Error> {
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
        (2, _, true) => Layout::Two,
        _ => Layout::Other { version, tables },
    })
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, and its parent directory. A
    /// file that is not a store of this layout (another program's database, a store of
    /// another version) is refused unchanged; an empty file becomes a store in one
    /// transaction, so a process killed meanwhile leaves an empty file, not half a store.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        match Self::open_writable(path) {
            Err(e) if e.is_read_only() => Err(StoreError::ReadOnly {
                path: path.to_path_buf(),
            }),
            other => other,
        }
    }

    fn open_writable(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Create {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let refuse = |layout: Layout| match layout {
            Layout::Other { version, tables }
                if version == 0 || !tables.iter().any(|t| t == "checkpoints") =>
            {
                StoreError::Foreign {
                    path: path.to_path_buf(),
                    tables,
                }
            }
            Layout::Other { version, .. } => StoreError::Version {
                path: path.to_path_buf(),
                found: version,
                expected: VERSION,
            },
            _ => unreachable!("only Other is refused"),
        };
        match retry_busy(|| layout(&conn))? {
            Layout::Current => {}
            l @ Layout::Other { .. } => return Err(refuse(l)),
            Layout::Empty | Layout::Two | Layout::Unfinished => {
                // Under the write lock, looked at again: a concurrent first open may
                // have made the store meanwhile.
                retry_busy(|| {
                    let tx = rusqlite::Transaction::new_unchecked(
                        &conn,
                        rusqlite::TransactionBehavior::Immediate,
                    )?;
                    match layout(&tx)? {
                        Layout::Empty | Layout::Unfinished => {
                            for t in OUR_TABLES {
                                tx.execute_batch(&format!("DROP TABLE IF EXISTS {t}"))?;
                            }
                            tx.execute_batch(SCHEMA)?;
                            tx.execute_batch(CATALOG)?;
                            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
                            tx.pragma_update(None, "user_version", VERSION)?;
                        }
                        Layout::Two => {
                            tx.execute_batch(MIGRATE_2_TO_3)?;
                            tx.execute_batch(CATALOG)?;
                            tx.pragma_update(None, "user_version", VERSION)?;
                        }
                        _ => {}
                    }
                    tx.commit()
                })?;
                if let l @ Layout::Other { .. } = retry_busy(|| layout(&conn))? {
                    return Err(refuse(l));
                }
            }
        }
        // Only a store of ours is switched to WAL.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let mut locks = path.as_os_str().to_owned();
        locks.push(".locks");
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            locks: PathBuf::from(locks),
        })
    }

    /// Opens an existing store to read it only (a read-only file or mount): `state`
    /// and `history` work, anything that writes fails.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(format!("`{}` does not exist", path.display())),
            )));
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let uri = |extra: &str| format!("file:{}?mode=ro{extra}", path.display());
        // A WAL store needs its shared-memory file; on a read-only mount that cannot be
        // made, the file is read as it is (`immutable`).
        let conn = Connection::open_with_flags(uri(""), flags)
            .and_then(|c| layout(&c).map(|_| c))
            .or_else(|_| Connection::open_with_flags(uri("&immutable=1"), flags))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        match layout(&conn)? {
            Layout::Current => {}
            Layout::Two => {
                return Err(StoreError::Version {
                    path: path.to_path_buf(),
                    found: 2,
                    expected: VERSION,
                });
            }
            Layout::Empty | Layout::Unfinished => {
                return Err(StoreError::Foreign {
                    path: path.to_path_buf(),
                    tables: Vec::new(),
                });
            }
            Layout::Other { version, tables } => {
                return Err(if tables.iter().any(|t| t == "checkpoints") {
                    StoreError::Version {
                        path: path.to_path_buf(),
                        found: version,
                        expected: VERSION,
                    }
                } else {
                    StoreError::Foreign {
                        path: path.to_path_buf(),
                        tables,
                    }
                });
            }
        }
        let mut locks = path.as_os_str().to_owned();
        locks.push(".locks");
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            locks: PathBuf::from(locks),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How long one statement waits for another process's write lock.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a write keeps trying, with backoff, while other processes hold the store:
/// contention alone does not fail a step.
const BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(600);
/// Marks a SQLite file as Switchyard's (`PRAGMA application_id`): "SWYD".
const APPLICATION_ID: i64 = 0x5357_5944;

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Runs `f` again, with a growing pause, while it fails because another process holds
/// the store, for up to [`BUSY_PATIENCE`].
fn retry_busy<T>(mut f: impl FnMut() -> Result<T, rusqlite::Error>) -> Result<T, rusqlite::Error> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match f() {
            Err(e) if is_busy(&e) && start.elapsed() < BUSY_PATIENCE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

const COLUMNS: &str = "seq, run, step, node, next, writes, status, pending, outcome, graph, graph_hash, tokens, elapsed_ms, at_ms, limited, error, source";

/// Counts are stored as SQLite integers (i64); none comes near the limit.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// One row of `COLUMNS` as a checkpoint; a value that cannot be one (a negative count,
/// a status or JSON this version does not read) makes the record corrupt.
fn decode(thread: &Arc<str>, row: &rusqlite::Row<'_>) -> Result<Checkpoint, StoreError> {
    let count = |i: usize, name: &str| -> Result<u64, StoreError> {
        let n: i64 = row.get(i)?;
        u64::try_from(n).map_err(|_| corrupt(thread, format!("`{name}` is {n}")))
    };
    let json = |text: Option<String>, name: &str| -> Result<Option<Json>, StoreError> {
        text.map(|t| parse_deep(&t))
            .transpose()
            .map_err(|e| corrupt(thread, format!("`{name}`: {e}")))
    };
    let writes: String = row.get(5)?;
    let writes: Vec<Write> =
        parse_deep(&writes).map_err(|e| corrupt(thread, format!("`writes`: {e}")))?;
    let pending: Option<String> = row.get(7)?;
    let pending: Option<Pending> = pending
        .map(|p| parse_deep(&p))
        .transpose()
        .map_err(|e| corrupt(thread, format!("`pending`: {e}")))?;
    let status: String = row.get(6)?;
    let source: String = row.get(16)?;
    Ok(Checkpoint {
        thread: thread.clone(),
        seq: count(0, "seq")?,
        run: count(1, "run")?,
        step: count(2, "step")?,
        node: row.get::<_, Option<String>>(3)?.map(Arc::from),
        next: row.get::<_, Option<String>>(4)?.map(Arc::from),
        writes,
        status: Status::parse(&status)
            .ok_or_else(|| corrupt(thread, format!("unknown status `{status}`")))?,
        pending,
        outcome: row.get(8)?,
        graph: Arc::from(row.get::<_, String>(9)?),
        graph_hash: Arc::from(row.get::<_, String>(10)?),
        tokens: count(11, "tokens")?,
        elapsed_ms: count(12, "elapsed_ms")?,
        at_ms: count(13, "at_ms")?,
        limited: row.get(14)?,
        error: json(row.get(15)?, "error")?,
        source: Source::parse(&source)
            .ok_or_else(|| corrupt(thread, format!("unknown source `{source}`")))?,
    })
}

/// Reads a record's JSON however deep it is: values deeper than serde_json's default
/// limit (128) were accepted before the depth of values was bounded, and their threads
/// must still read.
fn parse_deep<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

fn corrupt(thread: &str, message: impl ToString) -> StoreError {
    StoreError::Corrupt {
        thread: thread.to_string(),
        message: message.to_string(),
    }
}

/// Inserts one record; a conflict is another process's record of the same position.
fn insert(conn: &Connection, r: &Checkpoint) -> Result<(), StoreError> {
    let writes = serde_json::to_string(&r.writes).map_err(|e| corrupt(&r.thread, e))?;
    let pending = r
        .pending
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| corrupt(&r.thread, e))?;
    let error = r.error.as_ref().map(Json::to_string);
    let mut stmt = conn.prepare_cached(
        "INSERT INTO checkpoints (thread, seq, run, step, node, next, writes, status, pending, outcome, graph, graph_hash, tokens, elapsed_ms, at_ms, limited, error, source)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    )?;
    let done = stmt.execute(params![
        &*r.thread,
        int(r.seq),
        int(r.run),
        int(r.step),
        r.node.as_deref(),
        r.next.as_deref(),
        writes,
        r.status.name(),
        pending,
        r.outcome,
        &*r.graph,
        &*r.graph_hash,
        int(r.tokens),
        int(r.elapsed_ms),
        int(r.at_ms),
        r.limited,
        error,
        r.source.name(),
    ]);
    match done {
        Ok(_) => Ok(()),
        // Another process appended this thread's next record first: two runs of
        // one thread at once. The later one stops rather than interleave.
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            Err(StoreError::Conflict {
                thread: r.thread.to_string(),
                seq: r.seq,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// [`retry_busy`] for store operations.
fn patiently<T>(mut f: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match f() {
            Err(StoreError::Sqlite(e)) if is_busy(&e) && start.elapsed() < BUSY_PATIENCE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

impl Checkpointer for SqliteStore {
    fn append(&self, r: Checkpoint) -> Result<(), StoreError> {
        let conn = self.conn();
        patiently(|| insert(&conn, &r))
    }

    fn append_all(&self, records: Vec<Checkpoint>) -> Result<(), StoreError> {
        let conn = self.conn();
        // One transaction: a copy killed part-way leaves nothing, not a partial thread.
        patiently(|| {
            let tx = rusqlite::Transaction::new_unchecked(
                &conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            for r in &records {
                insert(&tx, r)?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 ORDER BY seq"
        ))?;
        let thread_arc: Arc<str> = Arc::from(thread);
        let rows = stmt.query_map([thread], |row| Ok(decode(&thread_arc, row)))?;
        let mut out: Vec<Checkpoint> = Vec::new();
        for row in rows {
            let r = row??;
            // Records are numbered from 0 without a gap; a missing one would make the
            // replay skip its writes and resume from the wrong step.
            let want = out.len() as u64;
            if r.seq != want {
                return Err(corrupt(
                    thread,
                    if r.seq > want + 1 {
                        format!("records {want} to {} are missing", r.seq - 1)
                    } else {
                        format!("record {want} is missing")
                    },
                ));
            }
            out.push(r);
        }
        Ok(out)
    }

    fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 ORDER BY seq DESC LIMIT 1"
        ))?;
        let thread_arc: Arc<str> = Arc::from(thread);
        stmt.query_row([thread], |row| Ok(decode(&thread_arc, row)))
            .optional()?
            .transpose()
    }

    fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError> {
        let value: Option<String> = self
            .conn()
            .query_row(
                "SELECT value FROM llm_cache WHERE key = ?1 AND expires_ms > ?2",
                params![key, int(now_ms)],
                |r| r.get(0),
            )
            .optional()?;
        // An entry that does not parse is a miss; the next put replaces it.
        Ok(value.and_then(|v| serde_json::from_str(&v).ok()))
    }

    fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        let conn = self.conn();
        patiently(|| {
            // Expired entries go when new ones come, so the table holds what can still hit.
            conn.execute(
                "DELETE FROM llm_cache WHERE expires_ms <= ?1",
                [std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64)],
            )?;
            conn.execute(
                "INSERT OR REPLACE INTO llm_cache (key, value, expires_ms) VALUES (?1, ?2, ?3)",
                params![key, value.to_string(), int(expires_ms)],
            )?;
            Ok(())
        })
    }

    fn claim(&self, thread: &str) -> Result<Claim, StoreError> {
        // A lock file per thread beside the database, locked with flock: the kernel
        // releases it when its holder exits, however it exits (SIGKILL, a crash), and
        // it works across PID namespaces, unlike a recorded process id.
        let dir = self.locks.clone();
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Create {
            path: dir.clone(),
            source,
        })?;
        let name: String = Sha256::digest(thread.as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        let path = dir.join(format!("{name}.lock"));
        let lock_error = |source| StoreError::Lock {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(lock_error)?;
        match file.try_lock() {
            Ok(()) => {
                // Who holds it, for the message another process shows.
                file.set_len(0).map_err(lock_error)?;
                write!(file, "{}", std::process::id()).map_err(lock_error)?;
                Ok(Claim::holding(file))
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                // The owner writes its pid just after it locks: a loser that reads in
                // between looks again, briefly, so it names the real owner.
                let mut pid = 0;
                for _ in 0..50 {
                    let mut text = String::new();
                    let _ =
                        std::fs::File::open(&path).and_then(|mut f| f.read_to_string(&mut text));
                    if let Ok(p) = text.trim().parse::<u32>() {
                        pid = p;
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(StoreError::Claimed {
                    thread: thread.to_string(),
                    pid,
                })
            }
            Err(std::fs::TryLockError::Error(source)) => Err(lock_error(source)),
        }
    }

    fn truncate(&self, thread: &str, seq: u64) -> Result<(), StoreError> {
        let conn = self.conn();
        patiently(|| {
            conn.execute(
                "DELETE FROM checkpoints WHERE thread = ?1 AND seq >= ?2",
                params![thread, int(seq)],
            )?;
            Ok(())
        })
    }

    fn delete_thread(&self, thread: &str) -> Result<(), StoreError> {
        let conn = self.conn();
        // All of it or none of it: a half-deleted thread would be unreadable.
        patiently(|| {
            let tx = rusqlite::Transaction::new_unchecked(
                &conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            tx.execute("DELETE FROM checkpoints WHERE thread = ?1", [thread])?;
            tx.execute("DELETE FROM runs WHERE thread = ?1", [thread])?;
            tx.execute("DELETE FROM threads WHERE id = ?1", [thread])?;
            tx.commit()?;
            Ok(())
        })
    }

    fn put_thread(&self, t: &ThreadRecord) -> Result<(), StoreError> {
        let conn = self.conn();
        patiently(|| {
            conn.execute(
                "INSERT OR REPLACE INTO threads (id, created_ms, updated_ms, metadata) VALUES (?1, ?2, ?3, ?4)",
                params![t.id, int(t.created_ms), int(t.updated_ms), t.metadata.to_string()],
            )?;
            Ok(())
        })
    }

    fn get_thread(&self, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, created_ms, updated_ms, metadata FROM threads WHERE id = ?1",
        )?;
        stmt.query_row([thread], |row| Ok(decode_thread(row)))
            .optional()?
            .transpose()
    }

    fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, created_ms, updated_ms, metadata FROM threads ORDER BY created_ms, rowid",
        )?;
        let rows = stmt.query_map([], |row| Ok(decode_thread(row)))?;
        rows.map(|r| r?).collect()
    }

    fn put_run(&self, r: &RunRecord) -> Result<(), StoreError> {
        let conn = self.conn();
        patiently(|| {
            conn.execute(
            "INSERT OR REPLACE INTO runs (id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                r.id,
                r.thread,
                r.assistant,
                r.status.name(),
                int(r.created_ms),
                int(r.updated_ms),
                r.metadata.to_string(),
                r.kwargs.to_string(),
                r.multitask_strategy,
                r.error,
                r.first_seq.map(int),
            ],
        )?;
            Ok(())
        })
    }

    fn get_run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?;
        stmt.query_row([run], |row| Ok(decode_run(row)))
            .optional()?
            .transpose()
    }

    fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE thread = ?1 ORDER BY created_ms, rowid"
        ))?;
        let rows = stmt.query_map([thread], |row| Ok(decode_run(row)))?;
        rows.map(|r| r?).collect()
    }

    fn delete_run(&self, run: &str) -> Result<(), StoreError> {
        let conn = self.conn();
        patiently(|| {
            conn.execute("DELETE FROM runs WHERE id = ?1", [run])?;
            Ok(())
        })
    }

    fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE status IN ('pending', 'running') ORDER BY created_ms, rowid"
        ))?;
        let rows = stmt.query_map([], |row| Ok(decode_run(row)))?;
        rows.map(|r| r?).collect()
    }
}

const RUN_COLUMNS: &str = "id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq";

fn catalog_error(what: String, message: impl ToString) -> StoreError {
    StoreError::CorruptCatalog {
        what,
        message: message.to_string(),
    }
}

fn decode_thread(row: &rusqlite::Row<'_>) -> Result<ThreadRecord, StoreError> {
    let id: String = row.get(0)?;
    let what = || format!("thread `{id}`");
    let ms = |i: usize| -> Result<u64, StoreError> {
        let n: i64 = row.get(i)?;
        u64::try_from(n).map_err(|_| catalog_error(what(), format!("a time is {n}")))
    };
    let metadata: String = row.get(3)?;
    Ok(ThreadRecord {
        created_ms: ms(1)?,
        updated_ms: ms(2)?,
        metadata: serde_json::from_str(&metadata).map_err(|e| catalog_error(what(), e))?,
        id,
    })
}

fn decode_run(row: &rusqlite::Row<'_>) -> Result<RunRecord, StoreError> {
    let id: String = row.get(0)?;
    let what = || format!("run `{id}`");
    let count = |i: usize| -> Result<u64, StoreError> {
        let n: i64 = row.get(i)?;
        u64::try_from(n).map_err(|_| catalog_error(what(), format!("a count is {n}")))
    };
    let json = |i: usize| -> Result<Json, StoreError> {
        let text: String = row.get(i)?;
        serde_json::from_str(&text).map_err(|e| catalog_error(what(), e))
    };
    let status: String = row.get(3)?;
    let first_seq: Option<i64> = row.get(10)?;
    Ok(RunRecord {
        thread: row.get(1)?,
        assistant: row.get(2)?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| catalog_error(what(), format!("unknown status `{status}`")))?,
        created_ms: count(4)?,
        updated_ms: count(5)?,
        metadata: json(6)?,
        kwargs: json(7)?,
        multitask_strategy: row.get(8)?,
        error: row.get(9)?,
        first_seq: first_seq
            .map(|n| {
                u64::try_from(n).map_err(|_| catalog_error(what(), format!("`first_seq` is {n}")))
            })
            .transpose()?,
        id,
    })
}
