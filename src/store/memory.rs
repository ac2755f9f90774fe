use super::{Checkpoint, Checkpointer, RunRecord, Snapshot, StoreError, ThreadRecord};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Checkpoints in process memory: fast, gone when the process ends.
#[derive(Default)]
pub struct MemoryStore {
    threads: Mutex<crate::fxhash::FxHashMap<String, Thread>>,
    /// LLM cache entries: key -> (value, expiry in Unix milliseconds).
    cache: Mutex<HashMap<String, (Json, u64)>>,
    catalog: Mutex<Catalog>,
}

/// A thread's records and its latest snapshot.
#[derive(Default)]
struct Thread {
    records: Vec<Checkpoint>,
    snapshot: Option<Snapshot>,
}

#[derive(Default)]
struct Catalog {
    /// In creation order, so listings need no sort.
    threads: indexmap::IndexMap<String, ThreadRecord>,
    runs: indexmap::IndexMap<String, RunRecord>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, crate::fxhash::FxHashMap<String, Thread>> {
        // A panic while holding the lock leaves whole records; keep serving them.
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn catalog(&self) -> MutexGuard<'_, Catalog> {
        self.catalog.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Checkpointer for MemoryStore {
    fn append(&self, record: Checkpoint) -> Result<(), StoreError> {
        let mut threads = self.lock();
        let thread = match threads.get_mut(&*record.thread) {
            Some(t) => t,
            None => threads.entry(record.thread.to_string()).or_default(),
        };
        // A seq already taken is a conflict, as in SQLite.
        if thread
            .records
            .last()
            .is_some_and(|last| record.seq <= last.seq)
        {
            return Err(StoreError::Conflict {
                thread: record.thread.to_string(),
                seq: record.seq,
            });
        }
        thread.records.push(record);
        Ok(())
    }

    fn append_all(&self, records: Vec<Checkpoint>) -> Result<(), StoreError> {
        let mut threads = self.lock();
        // Checked before anything is written: all of the records or none, and a seq
        // already taken is a conflict, as in SQLite.
        let mut next: HashMap<&str, u64> = HashMap::new();
        for r in &records {
            let taken = next.entry(&r.thread).or_insert_with(|| {
                threads
                    .get(&*r.thread)
                    .and_then(|t| t.records.last())
                    .map_or(0, |last| last.seq + 1)
            });
            if r.seq < *taken {
                return Err(StoreError::Conflict {
                    thread: r.thread.to_string(),
                    seq: r.seq,
                });
            }
            *taken = r.seq + 1;
        }
        for record in records {
            threads
                .entry(record.thread.to_string())
                .or_default()
                .records
                .push(record);
        }
        Ok(())
    }

    fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(self
            .lock()
            .get(thread)
            .map(|t| t.records.clone())
            .unwrap_or_default())
    }

    fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self
            .lock()
            .get(thread)
            .and_then(|t| t.records.last().cloned()))
    }

    fn load_from(&self, thread: &str, seq: u64) -> Result<Vec<Checkpoint>, StoreError> {
        let threads = self.lock();
        let Some(t) = threads.get(thread) else {
            return Ok(Vec::new());
        };
        // Records are numbered from 0, so `seq` is a position.
        let from = usize::try_from(seq)
            .unwrap_or(usize::MAX)
            .min(t.records.len());
        Ok(t.records[from..].to_vec())
    }

    fn put_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        if let Some(t) = self.lock().get_mut(&*snapshot.thread)
            && t.records.iter().any(|r| r.seq == snapshot.seq)
        {
            t.snapshot = Some(snapshot);
        }
        Ok(())
    }

    fn snapshot(&self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        Ok(self.lock().get(thread).and_then(|t| t.snapshot.clone()))
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

    fn truncate(&self, thread: &str, seq: u64) -> Result<(), StoreError> {
        let mut threads = self.lock();
        if let Some(t) = threads.get_mut(thread) {
            t.records.retain(|r| r.seq < seq);
            if t.snapshot.as_ref().is_some_and(|s| s.seq >= seq) {
                t.snapshot = None;
            }
            if t.records.is_empty() {
                threads.remove(thread);
            }
        }
        Ok(())
    }

    fn delete_thread(&self, thread: &str) -> Result<(), StoreError> {
        self.lock().remove(thread);
        let mut catalog = self.catalog();
        catalog.threads.shift_remove(thread);
        catalog.runs.retain(|_, r| r.thread != thread);
        Ok(())
    }

    fn put_thread(&self, thread: &ThreadRecord) -> Result<(), StoreError> {
        self.catalog()
            .threads
            .insert(thread.id.clone(), thread.clone());
        Ok(())
    }

    fn get_thread(&self, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(self.catalog().threads.get(thread).cloned())
    }

    fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        Ok(self.catalog().threads.values().cloned().collect())
    }

    fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.catalog().runs.insert(run.id.clone(), run.clone());
        Ok(())
    }

    fn get_run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.catalog().runs.get(run).cloned())
    }

    fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self
            .catalog()
            .runs
            .values()
            .filter(|r| r.thread == thread)
            .cloned()
            .collect())
    }

    fn delete_run(&self, run: &str) -> Result<(), StoreError> {
        self.catalog().runs.shift_remove(run);
        Ok(())
    }

    fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self
            .catalog()
            .runs
            .values()
            .filter(|r| r.status.in_flight())
            .cloned()
            .collect())
    }
}
