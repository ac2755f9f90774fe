//! The long-term store's items as rows of `switchyard.items` (see
//! `crate::store::Items`), through the pool.

use super::pool::Failure;
use super::{PostgresStore, col};
use crate::store::items::range_of;
use crate::store::rows::int;
use crate::store::{Item, Items, Namespace, Page, StoreError};
use async_trait::async_trait;

const COLUMNS: &str = "SELECT namespace, key, value, created_ms, updated_ms, expires_ms, ttl_ms, vectors FROM switchyard.items";

const PUT: &str = "INSERT INTO switchyard.items (namespace, key, value, created_ms, updated_ms, expires_ms, ttl_ms, vectors)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value,
         updated_ms = excluded.updated_ms, expires_ms = excluded.expires_ms, ttl_ms = excluded.ttl_ms,
         vectors = excluded.vectors";

fn decode(row: &tokio_postgres::Row, url: &str) -> Result<Item, StoreError> {
    let (namespace, key, value): (String, String, String) =
        (col(row, 0, url)?, col(row, 1, url)?, col(row, 2, url)?);
    let ms = |i: usize| -> Result<Option<u64>, StoreError> {
        Ok(col::<Option<i64>>(row, i, url)?.map(|v| v.max(0) as u64))
    };
    let Ok(serde_json::Value::Object(value)) = serde_json::from_str(&value) else {
        return Err(StoreError::CorruptCatalog {
            what: format!("item `{key}` of namespace `{namespace}`"),
            message: "its value is not a JSON object".into(),
        });
    };
    let vectors = match col::<Option<String>>(row, 7, url)? {
        None => Vec::new(),
        Some(v) => crate::store::rows::vectors(&v, &key, &namespace)?,
    };
    Ok(Item {
        namespace: Namespace::from_joined(&namespace),
        key,
        value,
        created_ms: ms(3)?.unwrap_or(0),
        updated_ms: ms(4)?.unwrap_or(0),
        expires_ms: ms(5)?,
        ttl_ms: ms(6)?,
        vectors,
    })
}

/// The rows under `$2` (none: every row) alive at `$1` (see `Items::items_under`),
/// `$3` and `$4` bounding the namespaces below it; `then` follows (an order, a page).
fn under_sql(select: &str, prefix: &str, then: &str) -> String {
    // The parameters are always bound, so that one statement shape serves both.
    let which = if prefix.is_empty() {
        "$2::TEXT = '' AND $3::TEXT IS NOT NULL AND $4::TEXT IS NOT NULL"
    } else {
        "(namespace = $2 OR (namespace >= $3 AND namespace < $4))"
    };
    format!("{select} WHERE {which} AND (expires_ms IS NULL OR expires_ms > $1) {then}")
}

#[async_trait]
impl Items for PostgresStore {
    async fn put_item(&self, item: &Item) -> Result<(), StoreError> {
        let (namespace, value) = (
            &item.namespace.joined(),
            &serde_json::Value::Object(item.value.clone()).to_string(),
        );
        let vectors = &crate::store::rows::vectors_text(&item.vectors);
        self.pool
            .run(|c| async move {
                let put = c.prepare_cached(PUT).await?;
                c.execute(
                    &put,
                    &[
                        namespace,
                        &item.key,
                        value,
                        &int(item.created_ms),
                        &int(item.updated_ms),
                        &item.expires_ms.map(int),
                        &item.ttl_ms.map(int),
                        vectors,
                    ],
                )
                .await?;
                Ok(())
            })
            .await
    }

    async fn get_item(&self, namespace: &str, key: &str) -> Result<Option<Item>, StoreError> {
        let url = &*self.url;
        self.pool
            .run(|c| async move {
                let get = c
                    .prepare_cached(&format!("{COLUMNS} WHERE namespace = $1 AND key = $2"))
                    .await?;
                let row = c.query_opt(&get, &[&namespace, &key]).await?;
                Ok::<_, Failure>(row.map(|r| decode(&r, url)).transpose()?)
            })
            .await
    }

    async fn delete_item(&self, namespace: &str, key: &str) -> Result<(), StoreError> {
        self.pool
            .run(|c| async move {
                let delete = c
                    .prepare_cached(
                        "DELETE FROM switchyard.items WHERE namespace = $1 AND key = $2",
                    )
                    .await?;
                c.execute(&delete, &[&namespace, &key]).await?;
                Ok(())
            })
            .await
    }

    async fn items_under(
        &self,
        prefix: &str,
        now_ms: u64,
        page: Option<Page>,
    ) -> Result<Vec<Item>, StoreError> {
        let url = &*self.url;
        let (from, to) = range_of(prefix);
        let (from, to) = (&from, &to);
        // No page: every row (`LIMIT ALL` is `LIMIT NULL`).
        let (offset, limit) = page.map_or((0, None), |p| {
            (int(p.offset as u64), Some(int(p.limit as u64)))
        });
        let sql = &under_sql(COLUMNS, prefix, "ORDER BY ord LIMIT $5 OFFSET $6");
        let now = int(now_ms);
        self.pool
            .run(|c| async move {
                let under = c.prepare_cached(sql).await?;
                let rows = c
                    .query(&under, &[&now, &prefix, from, to, &limit, &offset])
                    .await?;
                Ok::<_, Failure>(
                    rows.iter()
                        .map(|r| decode(r, url))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            })
            .await
    }

    async fn item_namespaces(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        let url = &*self.url;
        let (from, to) = range_of(prefix);
        let (from, to) = (&from, &to);
        let sql = &under_sql(
            "SELECT DISTINCT namespace FROM switchyard.items",
            prefix,
            "",
        );
        let now = int(now_ms);
        self.pool
            .run(|c| async move {
                let namespaces = c.prepare_cached(sql).await?;
                let rows = c.query(&namespaces, &[&now, &prefix, from, to]).await?;
                Ok::<_, Failure>(
                    rows.iter()
                        .map(|r| col::<String>(r, 0, url))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            })
            .await
    }

    async fn refresh_item(
        &self,
        namespace: &str,
        key: &str,
        expires_ms: u64,
    ) -> Result<(), StoreError> {
        self.pool
            .run(|c| async move {
                let refresh = c
                    .prepare_cached(
                        "UPDATE switchyard.items SET expires_ms = $3 WHERE namespace = $1 AND key = $2 AND ttl_ms IS NOT NULL",
                    )
                    .await?;
                c.execute(&refresh, &[&namespace, &key, &int(expires_ms)])
                    .await?;
                Ok(())
            })
            .await
    }

    async fn delete_expired_items(&self, now_ms: u64) -> Result<u64, StoreError> {
        self.pool
            .run(|c| async move {
                let expire = c
                    .prepare_cached("DELETE FROM switchyard.items WHERE expires_ms <= $1")
                    .await?;
                Ok(c.execute(&expire, &[&int(now_ms)]).await?)
            })
            .await
    }
}
