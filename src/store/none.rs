//! `--store none`: runs that need no history. Nothing is kept, so the runner does not
//! build checkpoint records at all (see [`Checkpointer::keeps_records`]), and a thread
//! that pauses cannot be resumed.

use super::{Checkpoint, Checkpointer, RunRecord, StoreError, ThreadRecord};
use serde_json::Value as Json;
use std::sync::Arc;

/// A store that keeps nothing: every thread is new, every read finds nothing. Its LLM
/// cache is another store's when it is given one.
#[derive(Default, Clone)]
pub struct NoStore {
    cache: Option<Arc<dyn Checkpointer>>,
}

impl NoStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps no records, but an llm node's cache is `store`'s: a server's stateless
    /// runs share the cache of the server's store.
    pub fn with_cache_of(store: Arc<dyn Checkpointer>) -> Self {
        NoStore { cache: Some(store) }
    }
}

impl Checkpointer for NoStore {
    fn keeps_records(&self) -> bool {
        false
    }

    fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError> {
        match &self.cache {
            Some(store) => store.cache_get(key, now_ms),
            None => Ok(None),
        }
    }

    fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        match &self.cache {
            Some(store) => store.cache_put(key, value, expires_ms),
            None => Ok(()),
        }
    }

    fn append(&self, _record: Checkpoint) -> Result<(), StoreError> {
        Ok(())
    }

    fn load(&self, _thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(Vec::new())
    }

    fn truncate(&self, _thread: &str, _seq: u64) -> Result<(), StoreError> {
        Ok(())
    }

    fn prune(&self, _base: Checkpoint) -> Result<u64, StoreError> {
        Ok(0)
    }

    fn ended_before(&self, _before_ms: u64) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    fn delete_thread(&self, _thread: &str) -> Result<(), StoreError> {
        Ok(())
    }

    fn put_thread(&self, _thread: &ThreadRecord) -> Result<(), StoreError> {
        Ok(())
    }

    fn get_thread(&self, _thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(None)
    }

    fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        Ok(Vec::new())
    }

    fn put_run(&self, _run: &RunRecord) -> Result<(), StoreError> {
        Ok(())
    }

    fn get_run(&self, _run: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(None)
    }

    fn runs(&self, _thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }

    fn delete_run(&self, _run: &str) -> Result<(), StoreError> {
        Ok(())
    }

    fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }
}
