//! Assistants as rows of `switchyard.assistants` (which version is current) and
//! `switchyard.assistant_versions` (see `crate::store::Assistants`), through the pool.
//! A version is written by one statement that first claims its number on the
//! assistant's row, so that of two servers adding a version at once one wins.

use super::{PostgresStore, col};
use crate::store::{Assistant, Assistants, StoreError};
use async_trait::async_trait;
use tokio_postgres::types::ToSql;

/// An assistant at its current version, then `$rest`.
macro_rules! current {
    ($rest:literal) => {
        concat!(
            "SELECT a.id, v.graph, v.version, v.body, a.created_ms, a.updated_ms
             FROM switchyard.assistants a
             JOIN switchyard.assistant_versions v ON v.id = a.id AND v.version = a.current ",
            $rest
        )
    };
}

fn decode(row: &tokio_postgres::Row, url: &str) -> Result<Assistant, StoreError> {
    let id: String = col(row, 0, url)?;
    let version: i32 = col(row, 2, url)?;
    let body: String = col(row, 3, url)?;
    let ms = |i: usize| -> Result<u64, StoreError> { Ok(col::<i64>(row, i, url)?.max(0) as u64) };
    let body = crate::store::rows::body(&body, || format!("assistant `{id}` version {version}"))?;
    Ok(Assistant {
        graph: col(row, 1, url)?,
        version: u32::try_from(version).unwrap_or(0),
        body,
        created_ms: ms(4)?,
        updated_ms: ms(5)?,
        id,
    })
}

fn version_number(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

impl PostgresStore {
    async fn assistant_write(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        self.pool
            .run(|c| async move {
                let write = c.prepare_cached(sql).await?;
                Ok(c.execute(&write, params).await?)
            })
            .await
    }
}

#[async_trait]
impl Assistants for PostgresStore {
    async fn add_assistant_version(&self, a: &Assistant) -> Result<bool, StoreError> {
        let body = serde_json::Value::Object(a.body.clone()).to_string();
        let at = crate::store::rows::int(a.created_ms);
        let version = version_number(a.version);
        // The version row is written only when its number was claimed on the
        // assistant's row (made for version 1; moved on from the one before for any
        // other), both in one statement.
        let sql = if a.version == 1 {
            "WITH a AS (
                 INSERT INTO switchyard.assistants (id, current, latest, created_ms, updated_ms)
                 VALUES ($1, 1, 1, $5, $5) ON CONFLICT (id) DO NOTHING RETURNING id)
             INSERT INTO switchyard.assistant_versions (id, version, graph, body, created_ms)
             SELECT id, $2, $3, $4, $5 FROM a"
        } else {
            "WITH a AS (
                 UPDATE switchyard.assistants SET current = $2, latest = $2, updated_ms = $5
                 WHERE id = $1 AND latest = $2 - 1 RETURNING id)
             INSERT INTO switchyard.assistant_versions (id, version, graph, body, created_ms)
             SELECT id, $2, $3, $4, $5 FROM a"
        };
        self.assistant_write(sql, &[&a.id, &version, &a.graph, &body, &at])
            .await
            .map(|n| n == 1)
    }

    async fn set_assistant_version(
        &self,
        id: &str,
        version: u32,
        updated_ms: u64,
    ) -> Result<bool, StoreError> {
        self.assistant_write(
            "UPDATE switchyard.assistants SET current = $2, updated_ms = $3
             WHERE id = $1 AND EXISTS
                 (SELECT 1 FROM switchyard.assistant_versions WHERE id = $1 AND version = $2)",
            &[
                &id,
                &version_number(version),
                &crate::store::rows::int(updated_ms),
            ],
        )
        .await
        .map(|n| n == 1)
    }

    async fn get_assistant(&self, id: &str) -> Result<Option<Assistant>, StoreError> {
        let found = self
            .decoded(current!("WHERE a.id = $1"), &[&id], decode)
            .await?;
        Ok(found.into_iter().next())
    }

    async fn assistants(&self) -> Result<Vec<Assistant>, StoreError> {
        self.decoded(current!("ORDER BY a.ord"), &[], decode).await
    }

    async fn assistant_versions(&self, id: &str) -> Result<Vec<Assistant>, StoreError> {
        self.decoded(
            "SELECT id, graph, version, body, created_ms, created_ms
             FROM switchyard.assistant_versions WHERE id = $1 ORDER BY version DESC",
            &[&id],
            decode,
        )
        .await
    }

    async fn delete_assistant(&self, id: &str) -> Result<bool, StoreError> {
        // The assistant's row first: a version being added waits on it, and is then
        // refused (its row is gone) or committed before this goes on; the versions
        // after, by a statement that sees every committed one, so none is left.
        self.pool
            .run(|mut c| async move {
                let tx = c.transaction().await?;
                let gone = tx
                    .execute("DELETE FROM switchyard.assistants WHERE id = $1", &[&id])
                    .await?;
                tx.execute(
                    "DELETE FROM switchyard.assistant_versions WHERE id = $1",
                    &[&id],
                )
                .await?;
                tx.commit().await?;
                Ok(gone > 0)
            })
            .await
    }
}
