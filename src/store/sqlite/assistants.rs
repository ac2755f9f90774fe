//! Assistants as rows of `assistants` (which version is current) and
//! `assistant_versions` (see `crate::store::Assistants`).

use super::{Sqlite, SqliteStore, patiently};
use crate::store::rows::int;
use crate::store::{Assistant, Assistants, StoreError};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

/// The tables, made when a store opens without them, as `crons` is. `assistants` is a
/// rowid table: the rowid is the order they were made in. `latest` is the highest
/// version: a new one is written only as the one after it.
pub(super) const ASSISTANTS: &str = "
CREATE TABLE IF NOT EXISTS assistants (
    id          TEXT    NOT NULL UNIQUE,
    current     INTEGER NOT NULL,
    latest      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS assistant_versions (
    id          TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    graph       TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (id, version)
);
";

/// An assistant at its current version, then `$rest`.
const CURRENT: &str = "SELECT a.id, v.graph, v.version, v.body, a.created_ms, a.updated_ms
     FROM assistants a JOIN assistant_versions v ON v.id = a.id AND v.version = a.current";

fn decode(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Assistant, StoreError>> {
    let (id, graph, version, body): (String, String, i64, String) =
        (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
    let ms = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
    let (created_ms, updated_ms) = (ms(4)?, ms(5)?);
    Ok(
        crate::store::rows::body(&body, || format!("assistant `{id}` version {version}")).map(
            |body| Assistant {
                id,
                graph,
                version: u32::try_from(version).unwrap_or(0),
                body,
                created_ms,
                updated_ms,
            },
        ),
    )
}

fn select(
    store: &Sqlite,
    sql: &str,
    args: impl rusqlite::Params + Copy,
) -> Result<Vec<Assistant>, StoreError> {
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(sql)?;
        let rows: Vec<Result<Assistant, StoreError>> =
            stmt.query_map(args, decode)?.collect::<Result<_, _>>()?;
        rows.into_iter().collect()
    })
}

#[async_trait]
impl Assistants for SqliteStore {
    async fn add_assistant_version(&self, a: &Assistant) -> Result<bool, StoreError> {
        let body = serde_json::Value::Object(a.body.clone()).to_string();
        self.blocking(|s| {
            let inner = s.conn();
            patiently(|| {
                let tx = rusqlite::Transaction::new_unchecked(
                    &inner.conn,
                    rusqlite::TransactionBehavior::Immediate,
                )?;
                let version = i64::from(a.version);
                let claimed = if a.version == 1 {
                    tx.execute(
                        "INSERT INTO assistants (id, current, latest, created_ms, updated_ms)
                         VALUES (?1, 1, 1, ?2, ?2) ON CONFLICT (id) DO NOTHING",
                        params![a.id, int(a.created_ms)],
                    )?
                } else {
                    tx.execute(
                        "UPDATE assistants SET current = ?2, latest = ?2, updated_ms = ?3
                         WHERE id = ?1 AND latest = ?2 - 1",
                        params![a.id, version, int(a.created_ms)],
                    )?
                };
                if claimed == 0 {
                    return Ok(false);
                }
                tx.execute(
                    "INSERT INTO assistant_versions (id, version, graph, body, created_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![a.id, version, a.graph, body, int(a.created_ms)],
                )?;
                tx.commit()?;
                Ok(true)
            })
        })
        .await
    }

    async fn set_assistant_version(
        &self,
        id: &str,
        version: u32,
        updated_ms: u64,
    ) -> Result<bool, StoreError> {
        self.blocking(|s| {
            let inner = s.conn();
            patiently(|| {
                Ok(inner.conn.execute(
                    "UPDATE assistants SET current = ?2, updated_ms = ?3
                     WHERE id = ?1 AND EXISTS
                         (SELECT 1 FROM assistant_versions WHERE id = ?1 AND version = ?2)",
                    params![id, i64::from(version), int(updated_ms)],
                )? == 1)
            })
        })
        .await
    }

    async fn get_assistant(&self, id: &str) -> Result<Option<Assistant>, StoreError> {
        self.blocking(|s| {
            s.read(|conn| {
                conn.prepare_cached(&format!("{CURRENT} WHERE a.id = ?1"))?
                    .query_row([id], decode)
                    .optional()?
                    .transpose()
            })
        })
        .await
    }

    async fn assistants(&self) -> Result<Vec<Assistant>, StoreError> {
        self.blocking(|s| select(s, &format!("{CURRENT} ORDER BY a.rowid"), []))
            .await
    }

    async fn assistant_versions(&self, id: &str) -> Result<Vec<Assistant>, StoreError> {
        self.blocking(|s| {
            select(
                s,
                "SELECT id, graph, version, body, created_ms, created_ms FROM assistant_versions
                 WHERE id = ?1 ORDER BY version DESC",
                [id],
            )
        })
        .await
    }

    async fn delete_assistant(&self, id: &str) -> Result<bool, StoreError> {
        self.blocking(|s| {
            let inner = s.conn();
            patiently(|| {
                let tx = rusqlite::Transaction::new_unchecked(
                    &inner.conn,
                    rusqlite::TransactionBehavior::Immediate,
                )?;
                let gone = tx.execute("DELETE FROM assistants WHERE id = ?1", [id])?;
                tx.execute("DELETE FROM assistant_versions WHERE id = ?1", [id])?;
                tx.commit()?;
                Ok(gone > 0)
            })
        })
        .await
    }
}
