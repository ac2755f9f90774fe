//! The long-term store as a host offers it: items put, read, searched and listed with
//! their namespaces checked, TTLs counted and refreshed, expired items gone.

use super::{Host, HostError, now_ms};
use crate::store::{Item, Listing, Namespace, Search, StoreError};
use serde_json::{Map, Value as Json};

/// A put: the value under `key` in `namespace`, kept for `ttl_minutes` after its last
/// put or refreshing read when given.
pub(crate) struct Put {
    pub(crate) namespace: Vec<String>,
    pub(crate) key: String,
    pub(crate) value: Map<String, Json>,
    pub(crate) ttl_minutes: Option<f64>,
}

fn namespace(labels: Vec<String>) -> Result<Namespace, HostError> {
    Namespace::new(labels).map_err(HostError::Invalid)
}

fn store_error(e: StoreError) -> HostError {
    match e {
        StoreError::NoItems => HostError::Unsupported(e.to_string()),
        e => HostError::Store(e),
    }
}

impl Host {
    pub(crate) async fn put_item(&self, put: Put) -> Result<(), HostError> {
        let namespace = namespace(put.namespace)?;
        let ttl_ms = match put.ttl_minutes {
            None => None,
            Some(m) if m.is_finite() && m > 0.0 => Some((m * 60_000.0).round().max(1.0) as u64),
            Some(m) => {
                return Err(HostError::Invalid(format!(
                    "ttl is minutes to keep the item, more than 0; {m} is not"
                )));
            }
        };
        let now = now_ms();
        let store = &self.inner.store;
        // Expired items go when new ones come, so the table holds what can still be read.
        store.delete_expired_items(now).await.map_err(store_error)?;
        store
            .put_item(&Item {
                namespace,
                key: put.key,
                value: put.value,
                created_ms: now,
                updated_ms: now,
                expires_ms: ttl_ms.map(|t| now + t),
                ttl_ms,
            })
            .await
            .map_err(store_error)
    }

    /// The item, none when there is none or it expired; its TTL put off when `refresh`.
    pub(crate) async fn get_item(
        &self,
        labels: Vec<String>,
        key: &str,
        refresh: bool,
    ) -> Result<Option<Item>, HostError> {
        let joined = namespace(labels)?.joined();
        let now = now_ms();
        let store = &self.inner.store;
        let Some(mut item) = store.get_item(&joined, key).await.map_err(store_error)? else {
            return Ok(None);
        };
        if item.expired(now) {
            store.delete_item(&joined, key).await.map_err(store_error)?;
            return Ok(None);
        }
        if refresh {
            self.refresh(&mut item, now).await?;
        }
        Ok(Some(item))
    }

    pub(crate) async fn delete_item(
        &self,
        labels: Vec<String>,
        key: &str,
    ) -> Result<(), HostError> {
        let joined = namespace(labels)?.joined();
        self.inner
            .store
            .delete_item(&joined, key)
            .await
            .map_err(store_error)
    }

    /// A page of items; their TTLs put off when `refresh`.
    pub(crate) async fn search_items(
        &self,
        search: Search,
        refresh: bool,
    ) -> Result<Vec<Item>, HostError> {
        Namespace::prefix(search.prefix.clone()).map_err(HostError::Invalid)?;
        search.check().map_err(HostError::Invalid)?;
        let now = now_ms();
        let rows = self
            .inner
            .store
            .items_under(&search.fixed_prefix())
            .await
            .map_err(store_error)?;
        let mut page = search.page(rows, now);
        if refresh {
            for item in &mut page {
                self.refresh(item, now).await?;
            }
        }
        Ok(page)
    }

    pub(crate) async fn item_namespaces(
        &self,
        listing: Listing,
    ) -> Result<Vec<Namespace>, HostError> {
        for labels in [&listing.prefix, &listing.suffix] {
            Namespace::prefix(labels.clone()).map_err(HostError::Invalid)?;
        }
        let rows = self
            .inner
            .store
            .items_under(&listing.fixed_prefix())
            .await
            .map_err(store_error)?;
        Ok(listing.page(&rows, now_ms()))
    }

    async fn refresh(&self, item: &mut Item, now: u64) -> Result<(), HostError> {
        if let Some(ttl) = item.ttl_ms {
            let expires = now + ttl;
            self.inner
                .store
                .refresh_item(&item.namespace.joined(), &item.key, expires)
                .await
                .map_err(store_error)?;
            item.expires_ms = Some(expires);
        }
        Ok(())
    }
}
