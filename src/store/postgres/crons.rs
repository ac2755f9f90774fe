//! Crons as rows of `switchyard.crons` (see `crate::store::Crons`), through the pool.
//! Servers sharing the database each try to take a due occurrence; the one `UPDATE`
//! that still finds the occurrence it read takes it.

use super::pool::Failure;
use super::{PostgresStore, col};
use crate::store::rows::int;
use crate::store::{Cron, Crons, StoreError, Take};
use async_trait::async_trait;
use tokio_postgres::types::ToSql;

/// The columns a cron is read from, then `$rest` (a `WHERE`, an order).
macro_rules! cron_columns {
    ($rest:literal) => {
        concat!(
            "SELECT id, assistant, thread, body, enabled, next_ms, created_ms, updated_ms FROM switchyard.crons ",
            $rest
        )
    };
}

fn decode(row: &tokio_postgres::Row, url: &str) -> Result<Cron, StoreError> {
    let id: String = col(row, 0, url)?;
    let body: String = col(row, 3, url)?;
    let ms = |i: usize| -> Result<Option<u64>, StoreError> {
        Ok(col::<Option<i64>>(row, i, url)?.map(|v| v.max(0) as u64))
    };
    let body = crate::store::rows::body(&body, || format!("cron `{id}`"))?;
    Ok(Cron {
        assistant: col(row, 1, url)?,
        thread: col(row, 2, url)?,
        body,
        enabled: col(row, 4, url)?,
        next_ms: ms(5)?,
        created_ms: ms(6)?.unwrap_or(0),
        updated_ms: ms(7)?.unwrap_or(0),
        id,
    })
}

impl PostgresStore {
    async fn cron_write(
        &self,
        sql: &str,
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
impl Crons for PostgresStore {
    async fn put_cron(&self, cron: &Cron) -> Result<(), StoreError> {
        let body = serde_json::Value::Object(cron.body.clone()).to_string();
        self.cron_write(
            "INSERT INTO switchyard.crons (id, assistant, thread, body, enabled, next_ms, created_ms, updated_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (id) DO UPDATE SET assistant = excluded.assistant,
                 thread = excluded.thread, body = excluded.body, enabled = excluded.enabled,
                 next_ms = excluded.next_ms, created_ms = excluded.created_ms,
                 updated_ms = excluded.updated_ms",
            &[
                &cron.id,
                &cron.assistant,
                &cron.thread,
                &body,
                &cron.enabled,
                &cron.next_ms.map(int),
                &int(cron.created_ms),
                &int(cron.updated_ms),
            ],
        )
        .await
        .map(drop)
    }

    async fn get_cron(&self, id: &str) -> Result<Option<Cron>, StoreError> {
        let found = self
            .decoded(cron_columns!("WHERE id = $1"), &[&id], decode)
            .await?;
        Ok(found.into_iter().next())
    }

    async fn replace_cron(&self, cron: &Cron, seen: &Cron) -> Result<bool, StoreError> {
        let body = serde_json::Value::Object(cron.body.clone()).to_string();
        self.cron_write(
            "UPDATE switchyard.crons SET assistant = $2, thread = $3, body = $4, enabled = $5,
                 next_ms = $6, updated_ms = $7
             WHERE id = $1 AND next_ms IS NOT DISTINCT FROM $8 AND updated_ms = $9",
            &[
                &cron.id,
                &cron.assistant,
                &cron.thread,
                &body,
                &cron.enabled,
                &cron.next_ms.map(int),
                &int(cron.updated_ms),
                &seen.next_ms.map(int),
                &int(seen.updated_ms),
            ],
        )
        .await
        .map(|n| n == 1)
    }

    async fn delete_cron(&self, id: &str) -> Result<bool, StoreError> {
        self.cron_write("DELETE FROM switchyard.crons WHERE id = $1", &[&id])
            .await
            .map(|n| n > 0)
    }

    async fn crons(&self) -> Result<Vec<Cron>, StoreError> {
        self.decoded(cron_columns!("ORDER BY ord"), &[], decode)
            .await
    }

    async fn due_crons(&self, now_ms: u64, limit: usize) -> Result<Vec<Cron>, StoreError> {
        self.decoded(
            cron_columns!(
                "WHERE enabled AND next_ms IS NOT NULL AND next_ms <= $1 ORDER BY next_ms LIMIT $2"
            ),
            &[&int(now_ms), &int(limit as u64)],
            decode,
        )
        .await
    }

    async fn take_occurrences(&self, take: &[Take]) -> Result<Vec<String>, StoreError> {
        if take.is_empty() {
            return Ok(Vec::new());
        }
        let ids = &take.iter().map(|t| t.id.as_str()).collect::<Vec<_>>();
        let due = &take.iter().map(|t| int(t.due_ms)).collect::<Vec<_>>();
        let next = &take.iter().map(|t| t.next_ms.map(int)).collect::<Vec<_>>();
        let url = &*self.url;
        // One statement: one round trip and one commit for the whole tick.
        self.pool
            .run(|c| async move {
                let update = c
                    .prepare_cached(
                        "UPDATE switchyard.crons c SET next_ms = t.next
                         FROM unnest($1::TEXT[], $2::BIGINT[], $3::BIGINT[]) AS t(id, due, next)
                         WHERE c.id = t.id AND c.enabled AND c.next_ms = t.due
                         RETURNING c.id",
                    )
                    .await?;
                let rows = c.query(&update, &[ids, due, next]).await?;
                Ok::<_, Failure>(
                    rows.iter()
                        .map(|r| col::<String>(r, 0, url))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            })
            .await
    }
}
