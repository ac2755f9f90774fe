use super::{Checkpoint, Checkpointer, Pending, Status, StoreError, Write};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Checkpoints in one SQLite file: WAL journal, `synchronous = NORMAL`. A record is
/// durable once `append` returns as far as the process is concerned (a crash or
/// SIGKILL loses nothing); a power loss may lose the last few records.
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

/// Layout version, kept in SQLite's `user_version`.
const VERSION: i64 = 1;

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
    PRIMARY KEY (thread, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS llm_cache (
    key         TEXT    NOT NULL PRIMARY KEY,
    value       TEXT    NOT NULL,
    expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
";

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, and its parent directory.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Create {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // A store written by another layout is refused rather than half-read or altered.
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let tables: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'",
            [],
            |r| r.get(0),
        )?;
        match (version, tables) {
            (VERSION, _) => conn.execute_batch(SCHEMA)?,
            (0, 0) => {
                conn.execute_batch(SCHEMA)?;
                conn.pragma_update(None, "user_version", VERSION)?;
            }
            (found, _) => {
                return Err(StoreError::Version {
                    path: path.to_path_buf(),
                    found,
                    expected: VERSION,
                });
            }
        }
        Ok(SqliteStore {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn corrupt(thread: &str, message: impl ToString) -> StoreError {
    StoreError::Corrupt {
        thread: thread.to_string(),
        message: message.to_string(),
    }
}

impl Checkpointer for SqliteStore {
    fn append(&self, r: Checkpoint) -> Result<(), StoreError> {
        let writes = serde_json::to_string(&r.writes).map_err(|e| corrupt(&r.thread, e))?;
        let pending = r
            .pending
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| corrupt(&r.thread, e))?;
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "INSERT INTO checkpoints (thread, seq, run, step, node, next, writes, status, pending, outcome, graph, graph_hash, tokens, elapsed_ms, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )?;
        stmt.execute(params![
            &*r.thread,
            r.seq as i64,
            r.run as i64,
            r.step as i64,
            r.node.as_deref(),
            r.next.as_deref(),
            writes,
            r.status.name(),
            pending,
            r.outcome,
            &*r.graph,
            &*r.graph_hash,
            r.tokens as i64,
            r.elapsed_ms as i64,
            r.at_ms as i64,
        ])?;
        Ok(())
    }

    fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, run, step, node, next, writes, status, pending, outcome, graph, graph_hash, tokens, elapsed_ms, at_ms
             FROM checkpoints WHERE thread = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([thread], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, Option<String>>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, String>(6)?,
                row.get::<_, Option<String>>(7)?,
                row.get::<_, Option<String>>(8)?,
                row.get::<_, String>(9)?,
                row.get::<_, String>(10)?,
                row.get::<_, i64>(11)?,
                row.get::<_, i64>(12)?,
                row.get::<_, i64>(13)?,
            ))
        })?;
        let thread_arc: Arc<str> = Arc::from(thread);
        let mut out = Vec::new();
        for row in rows {
            let (
                seq,
                run,
                step,
                node,
                next,
                writes,
                status,
                pending,
                outcome,
                graph,
                graph_hash,
                tokens,
                elapsed_ms,
                at_ms,
            ) = row?;
            let writes: Vec<Write> =
                serde_json::from_str(&writes).map_err(|e| corrupt(thread, e))?;
            let pending: Option<Pending> = pending
                .map(|p| serde_json::from_str(&p))
                .transpose()
                .map_err(|e| corrupt(thread, e))?;
            out.push(Checkpoint {
                thread: thread_arc.clone(),
                seq: seq as u64,
                run: run as u64,
                step: step as u64,
                node: node.map(Arc::from),
                next: next.map(Arc::from),
                writes,
                status: Status::parse(&status)
                    .ok_or_else(|| corrupt(thread, format!("unknown status `{status}`")))?,
                pending,
                outcome,
                graph: Arc::from(graph),
                graph_hash: Arc::from(graph_hash),
                tokens: tokens as u64,
                elapsed_ms: elapsed_ms as u64,
                at_ms: at_ms as u64,
            });
        }
        Ok(out)
    }

    fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        let seq: Option<i64> = self
            .conn()
            .query_row(
                "SELECT max(seq) FROM checkpoints WHERE thread = ?1",
                [thread],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        match seq {
            None => Ok(None),
            // Loading only the last row would need the same decoding; one thread's rows
            // are few enough that reusing `load` keeps one decoder.
            Some(_) => Ok(self.load(thread)?.pop()),
        }
    }

    fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError> {
        let value: Option<String> = self
            .conn()
            .query_row(
                "SELECT value FROM llm_cache WHERE key = ?1 AND expires_ms > ?2",
                params![key, now_ms as i64],
                |r| r.get(0),
            )
            .optional()?;
        // An entry that does not parse is a miss; the next put replaces it.
        Ok(value.and_then(|v| serde_json::from_str(&v).ok()))
    }

    fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        let conn = self.conn();
        // Expired entries go when new ones come, so the table holds what can still hit.
        conn.execute(
            "DELETE FROM llm_cache WHERE expires_ms <= ?1",
            [std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)],
        )?;
        conn.execute(
            "INSERT OR REPLACE INTO llm_cache (key, value, expires_ms) VALUES (?1, ?2, ?3)",
            params![key, value.to_string(), expires_ms as i64],
        )?;
        Ok(())
    }
}
