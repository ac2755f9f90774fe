use super::{Checkpoint, Checkpointer, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;

/// Checkpoints in process memory: fast, gone when the process ends.
#[derive(Default)]
pub struct MemoryStore {
    threads: Mutex<HashMap<String, Vec<Checkpoint>>>,
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
}
