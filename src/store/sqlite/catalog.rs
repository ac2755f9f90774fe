//! The LLM cache and the server's catalog (threads and runs) as rows.

use super::{Sqlite, SqliteStore, patiently, records};
use crate::store::rows::int;
use crate::store::{Catalog, LlmCache};
use crate::store::{RunRecord, RunStatus, StoreError, ThreadRecord};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use serde_json::Value as Json;

pub(super) fn cache_get(
    store: &Sqlite,
    key: &str,
    now_ms: u64,
) -> Result<Option<Json>, StoreError> {
    let value: Option<String> = store.read(|conn| {
        Ok(conn
            .query_row(
                "SELECT value FROM llm_cache WHERE key = ?1 AND expires_ms > ?2",
                params![key, int(now_ms)],
                |r| r.get(0),
            )
            .optional()?)
    })?;
    // An entry that does not parse is a miss; the next put replaces it.
    Ok(value.and_then(|v| serde_json::from_str(&v).ok()))
}

pub(super) fn cache_put(
    store: &Sqlite,
    key: &str,
    value: &Json,
    expires_ms: u64,
) -> Result<(), StoreError> {
    let inner = store.conn();
    let conn = &inner.conn;
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

pub(super) fn put_thread(store: &Sqlite, t: &ThreadRecord) -> Result<(), StoreError> {
    let inner = store.conn();
    let conn = &inner.conn;
    patiently(|| {
        conn.execute(
            "INSERT OR REPLACE INTO threads (id, created_ms, updated_ms, metadata) VALUES (?1, ?2, ?3, ?4)",
            params![t.id, int(t.created_ms), int(t.updated_ms), t.metadata.to_string()],
        )?;
        Ok(())
    })
}

pub(super) fn get_thread(store: &Sqlite, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(
            "SELECT id, created_ms, updated_ms, metadata FROM threads WHERE id = ?1",
        )?;
        stmt.query_row([thread], |row| Ok(decode_thread(row)))
            .optional()?
            .transpose()
    })
}

pub(super) fn threads(store: &Sqlite) -> Result<Vec<ThreadRecord>, StoreError> {
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(
            "SELECT id, created_ms, updated_ms, metadata FROM threads ORDER BY created_ms, rowid",
        )?;
        let rows = stmt.query_map([], |row| Ok(decode_thread(row)))?;
        rows.map(|r| r?).collect()
    })
}

pub(super) fn put_run(store: &Sqlite, r: &RunRecord) -> Result<(), StoreError> {
    let inner = store.conn();
    let conn = &inner.conn;
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

pub(super) fn get_run(store: &Sqlite, run: &str) -> Result<Option<RunRecord>, StoreError> {
    store.read(|conn| {
        let mut stmt =
            conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?;
        stmt.query_row([run], |row| Ok(decode_run(row)))
            .optional()?
            .transpose()
    })
}

pub(super) fn runs(store: &Sqlite, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE thread = ?1 ORDER BY created_ms, rowid"
        ))?;
        let rows = stmt.query_map([thread], |row| Ok(decode_run(row)))?;
        rows.map(|r| r?).collect()
    })
}

pub(super) fn delete_run(store: &Sqlite, run: &str) -> Result<(), StoreError> {
    let inner = store.conn();
    let conn = &inner.conn;
    patiently(|| {
        conn.execute("DELETE FROM runs WHERE id = ?1", [run])?;
        Ok(())
    })
}

pub(super) fn runs_in_flight(store: &Sqlite) -> Result<Vec<RunRecord>, StoreError> {
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE status IN ('pending', 'running') ORDER BY created_ms, rowid"
        ))?;
        let rows = stmt.query_map([], |row| Ok(decode_run(row)))?;
        rows.map(|r| r?).collect()
    })
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

#[async_trait]
impl LlmCache for SqliteStore {
    async fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError> {
        self.blocking(|s| cache_get(s, key, now_ms)).await
    }

    async fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        self.blocking(|s| cache_put(s, key, value, expires_ms))
            .await
    }
}

#[async_trait]
impl Catalog for SqliteStore {
    async fn delete_thread(&self, thread: &str) -> Result<(), StoreError> {
        self.blocking(|s| {
            let mut inner = s.conn();
            inner.forget(thread);
            // All of it or none of it: a half-deleted thread would be unreadable.
            patiently(|| {
                let tx = rusqlite::Transaction::new_unchecked(
                    &inner.conn,
                    rusqlite::TransactionBehavior::Immediate,
                )?;
                tx.execute("DELETE FROM checkpoints WHERE thread = ?1", [thread])?;
                tx.execute("DELETE FROM snapshots WHERE thread = ?1", [thread])?;
                tx.execute("DELETE FROM runs WHERE thread = ?1", [thread])?;
                tx.execute("DELETE FROM threads WHERE id = ?1", [thread])?;
                tx.execute("DELETE FROM crons WHERE thread = ?1", [thread])?;
                // Gone whole, as it was meant to: its name may be used again.
                tx.execute("DELETE FROM recount WHERE thread = ?1", [thread])?;
                tx.commit()?;
                Ok(())
            })
        })
        .await
    }

    async fn ended_before(&self, before_ms: u64) -> Result<Vec<String>, StoreError> {
        self.blocking(|s| s.read(|conn| records::ended_before(conn, before_ms)))
            .await
    }

    async fn waiting_on(&self, graph_hash: &str) -> Result<Vec<String>, StoreError> {
        let hash = graph_hash.to_string();
        self.blocking(move |s| s.read(|conn| records::waiting_on(conn, &hash)))
            .await
    }

    async fn put_thread(&self, thread: &ThreadRecord) -> Result<(), StoreError> {
        self.blocking(|s| put_thread(s, thread)).await
    }

    async fn get_thread(&self, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        self.blocking(|s| get_thread(s, thread)).await
    }

    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        self.blocking(threads).await
    }

    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.blocking(|s| put_run(s, run)).await
    }

    async fn get_run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        self.blocking(|s| get_run(s, run)).await
    }

    async fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.blocking(|s| runs(s, thread)).await
    }

    async fn delete_run(&self, run: &str) -> Result<(), StoreError> {
        self.blocking(|s| delete_run(s, run)).await
    }

    async fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.blocking(runs_in_flight).await
    }
}

/// A store only one process serves: the default run queue (each process its own).
#[async_trait]
impl crate::store::RunQueue for SqliteStore {}
