//! The long-term store's items as rows of `items` (see `crate::store::Items`).

use super::{Sqlite, SqliteStore, patiently};
use crate::store::items::range_of;
use crate::store::rows::int;
use crate::store::{Item, Items, Namespace, Page, StoreError};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

/// The table, made when a store opens without it: added to layout 5 without a new
/// version, as `recount` was (a build that does not know it leaves it alone). A rowid
/// table: the rowid is the order items were first put in (an upsert keeps it).
pub(super) const ITEMS: &str = "
CREATE TABLE IF NOT EXISTS items (
    namespace   TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    expires_ms  INTEGER,
    ttl_ms      INTEGER,
    vectors     TEXT,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX IF NOT EXISTS items_expiring ON items (expires_ms) WHERE expires_ms IS NOT NULL;
";

/// A table made by the build before semantic search lacks `vectors`: added at open.
pub(super) const VECTORS: &str = "ALTER TABLE items ADD COLUMN vectors TEXT";

const COLUMNS: &str =
    "SELECT namespace, key, value, created_ms, updated_ms, expires_ms, ttl_ms, vectors FROM items";

fn decode(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Item, StoreError>> {
    let (namespace, key, value): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
    let ms = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|v| v.max(0) as u64))
    };
    let (created_ms, updated_ms) = (ms(3)?.unwrap_or(0), ms(4)?.unwrap_or(0));
    let (expires_ms, ttl_ms) = (ms(5)?, ms(6)?);
    let vectors = match r.get::<_, Option<String>>(7)? {
        None => Ok(Vec::new()),
        Some(v) => crate::store::rows::vectors(&v, &key, &namespace),
    };
    let vectors = match vectors {
        Ok(v) => v,
        Err(e) => return Ok(Err(e)),
    };
    Ok(match serde_json::from_str(&value) {
        Ok(serde_json::Value::Object(value)) => Ok(Item {
            namespace: Namespace::from_joined(&namespace),
            key,
            value,
            created_ms,
            updated_ms,
            expires_ms,
            ttl_ms,
            vectors,
        }),
        _ => Err(StoreError::CorruptCatalog {
            what: format!("item `{key}` of namespace `{namespace}`"),
            message: "its value is not a JSON object".into(),
        }),
    })
}

fn put(store: &Sqlite, item: &Item) -> Result<(), StoreError> {
    let inner = store.conn();
    let value = serde_json::Value::Object(item.value.clone()).to_string();
    let vectors = crate::store::rows::vectors_text(&item.vectors);
    patiently(|| {
        inner.conn.execute(
            "INSERT INTO items (namespace, key, value, created_ms, updated_ms, expires_ms, ttl_ms, vectors)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value,
                 updated_ms = excluded.updated_ms, expires_ms = excluded.expires_ms,
                 ttl_ms = excluded.ttl_ms, vectors = excluded.vectors",
            params![
                item.namespace.joined(),
                item.key,
                value,
                int(item.created_ms),
                int(item.updated_ms),
                item.expires_ms.map(int),
                item.ttl_ms.map(int),
                vectors
            ],
        )?;
        Ok(())
    })
}

fn get(store: &Sqlite, namespace: &str, key: &str) -> Result<Option<Item>, StoreError> {
    store.read(|conn| {
        conn.prepare_cached(&format!("{COLUMNS} WHERE namespace = ?1 AND key = ?2"))?
            .query_row(params![namespace, key], decode)
            .optional()?
            .transpose()
    })
}

/// The rows under `prefix` alive at `now_ms` (see `Items::items_under`): `where`
/// picks them, `then` follows (an order, a page).
fn under_sql(select: &str, prefix: &str, then: &str) -> String {
    let which = if prefix.is_empty() {
        ""
    } else {
        "(namespace = ?2 OR (namespace >= ?3 AND namespace < ?4)) AND "
    };
    format!("{select} WHERE {which}(expires_ms IS NULL OR expires_ms > ?1) {then}")
}

fn under(
    store: &Sqlite,
    prefix: &str,
    now_ms: u64,
    page: Option<Page>,
) -> Result<Vec<Item>, StoreError> {
    let (from, to) = range_of(prefix);
    let (offset, limit) = page.map_or((0, -1), |p| (int(p.offset as u64), int(p.limit as u64)));
    // The page's parameters follow the prefix's, when there are any.
    let (l, o) = if prefix.is_empty() { (2, 3) } else { (5, 6) };
    let then = format!("ORDER BY rowid LIMIT ?{l} OFFSET ?{o}");
    let sql = under_sql(COLUMNS, prefix, &then);
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows: Vec<Result<Item, StoreError>> = if prefix.is_empty() {
            stmt.query_map(params![int(now_ms), limit, offset], decode)?
                .collect::<Result<_, _>>()?
        } else {
            stmt.query_map(
                params![int(now_ms), prefix, from, to, limit, offset],
                decode,
            )?
            .collect::<Result<_, _>>()?
        };
        rows.into_iter().collect()
    })
}

fn namespaces(store: &Sqlite, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
    let (from, to) = range_of(prefix);
    let sql = under_sql("SELECT DISTINCT namespace FROM items", prefix, "");
    store.read(|conn| {
        let mut stmt = conn.prepare_cached(&sql)?;
        let found: Vec<String> = if prefix.is_empty() {
            stmt.query_map(params![int(now_ms)], |r| r.get(0))?
                .collect::<Result<_, _>>()?
        } else {
            stmt.query_map(params![int(now_ms), prefix, from, to], |r| r.get(0))?
                .collect::<Result<_, _>>()?
        };
        Ok(found)
    })
}

fn write(store: &Sqlite, sql: &str, args: impl rusqlite::Params + Copy) -> Result<u64, StoreError> {
    let inner = store.conn();
    patiently(|| Ok(inner.conn.execute(sql, args)? as u64))
}

#[async_trait]
impl Items for SqliteStore {
    async fn put_item(&self, item: &Item) -> Result<(), StoreError> {
        self.blocking(|s| put(s, item)).await
    }

    async fn get_item(&self, namespace: &str, key: &str) -> Result<Option<Item>, StoreError> {
        self.blocking(|s| get(s, namespace, key)).await
    }

    async fn delete_item(&self, namespace: &str, key: &str) -> Result<(), StoreError> {
        self.blocking(|s| {
            write(
                s,
                "DELETE FROM items WHERE namespace = ?1 AND key = ?2",
                params![namespace, key],
            )
            .map(drop)
        })
        .await
    }

    async fn items_under(
        &self,
        prefix: &str,
        now_ms: u64,
        page: Option<Page>,
    ) -> Result<Vec<Item>, StoreError> {
        self.blocking(|s| under(s, prefix, now_ms, page)).await
    }

    async fn item_namespaces(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.blocking(|s| namespaces(s, prefix, now_ms)).await
    }

    async fn refresh_item(
        &self,
        namespace: &str,
        key: &str,
        expires_ms: u64,
    ) -> Result<(), StoreError> {
        self.blocking(|s| {
            write(
                s,
                "UPDATE items SET expires_ms = ?3 WHERE namespace = ?1 AND key = ?2 AND ttl_ms IS NOT NULL",
                params![namespace, key, int(expires_ms)],
            )
            .map(drop)
        })
        .await
    }

    async fn delete_expired_items(&self, now_ms: u64) -> Result<u64, StoreError> {
        self.blocking(|s| {
            write(
                s,
                "DELETE FROM items WHERE expires_ms <= ?1",
                params![int(now_ms)],
            )
        })
        .await
    }
}
