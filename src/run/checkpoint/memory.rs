use super::{Checkpoint, Checkpointer, StoreError};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Mutex;

/// Checkpoints in process memory: fast, gone when the process ends.
#[derive(Default)]
pub struct MemoryStore {
    threads: Mutex<HashMap<String, Vec<Checkpoint>>>,
    /// LLM cache entries: key -> (value, expiry in Unix milliseconds).
    cache: Mutex<HashMap<String, (Json, u64)>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Checkpoint>>> {
        // A panic while holding the lock leaves whole records; keep serving them.
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Checkpointer for MemoryStore {
    fn append(&self, record: Checkpoint) -> Result<(), StoreError> {
        let mut threads = self.lock();
        match threads.get_mut(&*record.thread) {
            Some(records) => records.push(record),
            None => {
                threads.insert(record.thread.to_string(), vec![record]);
            }
        }
        Ok(())
    }

    fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(self.lock().get(thread).cloned().unwrap_or_default())
    }

    fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self.lock().get(thread).and_then(|r| r.last().cloned()))
    }

    fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(key) {
            Some((value, expires)) if *expires > now_ms => Ok(Some(value.clone())),
            Some(_) => {
                cache.remove(key);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), (value.clone(), expires_ms));
        Ok(())
    }
}
