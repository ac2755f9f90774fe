//! The long-term store as a host offers it (see `crate::store::item_ops`).

use super::{Host, HostError, now_ms};
use crate::store::{Item, ItemError, Listing, Namespace, Put, Search, StoreError, item_ops};

impl From<ItemError> for HostError {
    fn from(e: ItemError) -> Self {
        match e {
            ItemError::Invalid(m) => HostError::Invalid(m),
            ItemError::Store(e @ StoreError::NoItems) => HostError::Unsupported(e.to_string()),
            ItemError::Store(e) => HostError::Store(e),
            ItemError::Embed(m) => {
                HostError::Upstream(format!("cannot embed for semantic search: {m}"))
            }
        }
    }
}

impl Host {
    pub(crate) async fn put_item(&self, put: Put) -> Result<(), HostError> {
        let index = self.inner.index.as_ref();
        Ok(item_ops::put(&*self.inner.store, put, index, now_ms()).await?)
    }

    pub(crate) async fn get_item(
        &self,
        labels: Vec<String>,
        key: &str,
        refresh: bool,
    ) -> Result<Option<Item>, HostError> {
        Ok(item_ops::get(&*self.inner.store, labels, key, refresh, now_ms()).await?)
    }

    pub(crate) async fn delete_item(
        &self,
        labels: Vec<String>,
        key: &str,
    ) -> Result<(), HostError> {
        Ok(item_ops::delete(&*self.inner.store, labels, key).await?)
    }

    pub(crate) async fn search_items(
        &self,
        search: Search,
        refresh: bool,
    ) -> Result<Vec<(Item, Option<f64>)>, HostError> {
        let index = self.inner.index.as_ref();
        Ok(item_ops::search(&*self.inner.store, &search, index, refresh, now_ms()).await?)
    }

    pub(crate) async fn item_namespaces(
        &self,
        listing: Listing,
    ) -> Result<Vec<Namespace>, HostError> {
        Ok(item_ops::namespaces(&*self.inner.store, &listing, now_ms()).await?)
    }
}
