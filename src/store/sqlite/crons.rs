//! Crons as rows of `crons` (see `crate::store::Crons`).

use super::{Sqlite, SqliteStore, patiently};
use crate::store::rows::int;
use crate::store::{Cron, Crons, StoreError, Take};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

/// The table, made when a store opens without it, as `items` is (added to layout 5
/// without a new version: a build that does not know it leaves it alone). A rowid
/// table: the rowid is the order crons were made in.
pub(super) const CRONS: &str = "
CREATE TABLE IF NOT EXISTS crons (
    id          TEXT    NOT NULL UNIQUE,
    assistant   TEXT    NOT NULL,
    thread      TEXT,
    body        TEXT    NOT NULL,
    enabled     INTEGER NOT NULL,
    next_ms     INTEGER,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS crons_due ON crons (next_ms) WHERE enabled AND next_ms IS NOT NULL;
CREATE INDEX IF NOT EXISTS crons_of_thread ON crons (thread) WHERE thread IS NOT NULL;
";

const COLUMNS: &str =
    "SELECT id, assistant, thread, body, enabled, next_ms, created_ms, updated_ms FROM crons";

fn decode(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Cron, StoreError>> {
    let (id, assistant, thread, body): (String, String, Option<String>, String) =
        (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
    let ms = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|v| v.max(0) as u64))
    };
    let (enabled, next_ms) = (r.get::<_, bool>(4)?, ms(5)?);
    let (created_ms, updated_ms) = (ms(6)?.unwrap_or(0), ms(7)?.unwrap_or(0));
    Ok(
        crate::store::rows::body(&body, || format!("cron `{id}`")).map(|body| Cron {
            id,
            assistant,
            thread,
            body,
            enabled,
            next_ms,
            created_ms,
            updated_ms,
        }),
    )
}

fn select(
    store: &Sqlite,
    then: &str,
    args: impl rusqlite::Params + Copy,
) -> Result<Vec<Cron>, StoreError> {
    let sql = format!("{COLUMNS} {then}");
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows: Vec<Result<Cron, StoreError>> =
            stmt.query_map(args, decode)?.collect::<Result<_, _>>()?;
        rows.into_iter().collect()
    })
}

fn write(store: &Sqlite, sql: &str, args: impl rusqlite::Params + Copy) -> Result<u64, StoreError> {
    let inner = store.conn();
    patiently(|| Ok(inner.conn.execute(sql, args)? as u64))
}

#[async_trait]
impl Crons for SqliteStore {
    async fn put_cron(&self, cron: &Cron) -> Result<(), StoreError> {
        let body = serde_json::Value::Object(cron.body.clone()).to_string();
        self.blocking(|s| {
            write(
                s,
                "INSERT INTO crons (id, assistant, thread, body, enabled, next_ms, created_ms, updated_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET assistant = excluded.assistant,
                     thread = excluded.thread, body = excluded.body, enabled = excluded.enabled,
                     next_ms = excluded.next_ms, created_ms = excluded.created_ms,
                     updated_ms = excluded.updated_ms",
                params![
                    cron.id,
                    cron.assistant,
                    cron.thread,
                    body,
                    cron.enabled,
                    cron.next_ms.map(int),
                    int(cron.created_ms),
                    int(cron.updated_ms)
                ],
            )
            .map(drop)
        })
        .await
    }

    async fn get_cron(&self, id: &str) -> Result<Option<Cron>, StoreError> {
        self.blocking(|s| {
            s.read(|conn| {
                conn.prepare_cached(&format!("{COLUMNS} WHERE id = ?1"))?
                    .query_row([id], decode)
                    .optional()?
                    .transpose()
            })
        })
        .await
    }

    async fn replace_cron(&self, cron: &Cron, seen: &Cron) -> Result<bool, StoreError> {
        let body = serde_json::Value::Object(cron.body.clone()).to_string();
        self.blocking(|s| {
            write(
                s,
                "UPDATE crons SET assistant = ?2, thread = ?3, body = ?4, enabled = ?5,
                     next_ms = ?6, updated_ms = ?7
                 WHERE id = ?1 AND next_ms IS ?8 AND updated_ms = ?9",
                params![
                    cron.id,
                    cron.assistant,
                    cron.thread,
                    body,
                    cron.enabled,
                    cron.next_ms.map(int),
                    int(cron.updated_ms),
                    seen.next_ms.map(int),
                    int(seen.updated_ms)
                ],
            )
            .map(|n| n == 1)
        })
        .await
    }

    async fn delete_cron(&self, id: &str) -> Result<bool, StoreError> {
        self.blocking(|s| write(s, "DELETE FROM crons WHERE id = ?1", [id]).map(|n| n > 0))
            .await
    }

    async fn crons(&self) -> Result<Vec<Cron>, StoreError> {
        self.blocking(|s| select(s, "ORDER BY rowid", [])).await
    }

    async fn due_crons(&self, now_ms: u64, limit: usize) -> Result<Vec<Cron>, StoreError> {
        self.blocking(|s| {
            select(
                s,
                "WHERE enabled AND next_ms IS NOT NULL AND next_ms <= ?1 ORDER BY next_ms LIMIT ?2",
                params![int(now_ms), int(limit as u64)],
            )
        })
        .await
    }

    async fn take_occurrences(&self, take: &[Take]) -> Result<Vec<String>, StoreError> {
        if take.is_empty() {
            return Ok(Vec::new());
        }
        self.blocking(|s| {
            let inner = s.conn();
            // One transaction: one commit for the whole tick.
            patiently(|| {
                let tx = rusqlite::Transaction::new_unchecked(
                    &inner.conn,
                    rusqlite::TransactionBehavior::Immediate,
                )?;
                let mut taken = Vec::new();
                {
                    let mut update = tx.prepare_cached(
                        "UPDATE crons SET next_ms = ?3 WHERE id = ?1 AND enabled AND next_ms = ?2",
                    )?;
                    for t in take {
                        if update.execute(params![t.id, int(t.due_ms), t.next_ms.map(int)])? == 1 {
                            taken.push(t.id.clone());
                        }
                    }
                }
                tx.commit()?;
                Ok(taken)
            })
        })
        .await
    }
}
