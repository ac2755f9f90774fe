//! `--store none`: runs that need no history. Nothing is kept, so the runner does not
//! build checkpoint records at all (see [`Checkpoints::keeps_records`]), and a thread
//! that pauses cannot be resumed.

use super::{
    Catalog, Checkpoint, Checkpoints, LlmCache, RunQueue, RunRecord, StoreError, ThreadRecord,
};
use async_trait::async_trait;
use serde_json::Value as Json;

/// A store that keeps nothing: every thread is new, every read finds nothing, its LLM
/// cache never hits.
#[derive(Default, Clone)]
pub struct NoStore;

impl NoStore {
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Checkpoints for NoStore {
    fn keeps_records(&self) -> bool {
        false
    }

    async fn append(&self, _record: Checkpoint) -> Result<(), StoreError> {
        Ok(())
    }

    async fn load(&self, _thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(Vec::new())
    }

    async fn truncate(&self, _thread: &str, _seq: u64) -> Result<(), StoreError> {
        Ok(())
    }

    async fn prune(&self, _base: Checkpoint) -> Result<u64, StoreError> {
        Ok(0)
    }
}

#[async_trait]
impl Catalog for NoStore {
    async fn ended_before(&self, _before_ms: u64) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    async fn waiting_on(&self, _graph_hash: &str) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    async fn delete_thread(&self, _thread: &str) -> Result<(), StoreError> {
        Ok(())
    }

    async fn put_thread(&self, _thread: &ThreadRecord) -> Result<(), StoreError> {
        Ok(())
    }

    async fn get_thread(&self, _thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(None)
    }

    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        Ok(Vec::new())
    }

    async fn put_run(&self, _run: &RunRecord) -> Result<(), StoreError> {
        Ok(())
    }

    async fn get_run(&self, _run: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(None)
    }

    async fn runs(&self, _thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }

    async fn delete_run(&self, _run: &str) -> Result<(), StoreError> {
        Ok(())
    }

    async fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait]
impl RunQueue for NoStore {}

#[async_trait]
impl LlmCache for NoStore {
    async fn cache_get(&self, _key: &str, _now_ms: u64) -> Result<Option<Json>, StoreError> {
        Ok(None)
    }

    async fn cache_put(&self, _key: &str, _value: &Json, _expires: u64) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Keeps no items: every call says so.
#[async_trait]
impl super::Items for NoStore {
    async fn put_item(&self, _: &super::Item) -> Result<(), StoreError> {
        Err(StoreError::NoItems)
    }

    async fn get_item(&self, _: &str, _: &str) -> Result<Option<super::Item>, StoreError> {
        Err(StoreError::NoItems)
    }

    async fn delete_item(&self, _: &str, _: &str) -> Result<(), StoreError> {
        Err(StoreError::NoItems)
    }

    async fn items_under(
        &self,
        _: &str,
        _: u64,
        _: Option<super::Page>,
    ) -> Result<Vec<super::Item>, StoreError> {
        Err(StoreError::NoItems)
    }

    async fn item_namespaces(&self, _: &str, _: u64) -> Result<Vec<String>, StoreError> {
        Err(StoreError::NoItems)
    }

    async fn refresh_item(&self, _: &str, _: &str, _: u64) -> Result<(), StoreError> {
        Err(StoreError::NoItems)
    }

    async fn delete_expired_items(&self, _: u64) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// Keeps no crons: every call but a listing says so.
#[async_trait]
impl super::Crons for NoStore {
    async fn put_cron(&self, _: &super::Cron) -> Result<(), StoreError> {
        Err(StoreError::NoCrons)
    }

    async fn get_cron(&self, _: &str) -> Result<Option<super::Cron>, StoreError> {
        Ok(None)
    }

    async fn replace_cron(&self, _: &super::Cron, _: &super::Cron) -> Result<bool, StoreError> {
        Err(StoreError::NoCrons)
    }

    async fn delete_cron(&self, _: &str) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn crons(&self) -> Result<Vec<super::Cron>, StoreError> {
        Ok(Vec::new())
    }

    async fn due_crons(&self, _: u64, _: usize) -> Result<Vec<super::Cron>, StoreError> {
        Ok(Vec::new())
    }

    async fn take_occurrences(&self, _: &[super::Take]) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }
}

/// Keeps no assistants: every write says so; every read finds none.
#[async_trait]
impl super::Assistants for NoStore {
    async fn add_assistant_version(&self, _: &super::Assistant) -> Result<bool, StoreError> {
        Err(StoreError::NoAssistants)
    }

    async fn set_assistant_version(&self, _: &str, _: u32, _: u64) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn get_assistant(&self, _: &str) -> Result<Option<super::Assistant>, StoreError> {
        Ok(None)
    }

    async fn assistants(&self) -> Result<Vec<super::Assistant>, StoreError> {
        Ok(Vec::new())
    }

    async fn assistant_versions(&self, _: &str) -> Result<Vec<super::Assistant>, StoreError> {
        Ok(Vec::new())
    }

    async fn delete_assistant(&self, _: &str) -> Result<bool, StoreError> {
        Ok(false)
    }
}
