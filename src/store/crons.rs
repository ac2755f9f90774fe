//! Crons: run requests made again on a schedule, kept beside the threads ([`Crons`])
//! so that a restarted server goes on firing them and servers sharing a store fire
//! each occurrence once. What a schedule means and what a cron holds is the host's
//! (`host/crons.rs`); a store keeps the rows and takes occurrences.

use super::StoreError;
use async_trait::async_trait;
use serde_json::{Map, Value as Json};

/// A cron as a store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cron {
    pub id: String,
    /// The graph (assistant) its runs run.
    pub assistant: String,
    /// The thread its runs go on; none: each run on a thread of its own.
    pub thread: Option<String>,
    /// Whatever else the host keeps of it (its schedule, the run's request, metadata,
    /// when it ends): a JSON object the store does not look into.
    pub body: Map<String, Json>,
    /// A disabled cron keeps its place and fires nothing.
    pub enabled: bool,
    /// Its next occurrence (Unix milliseconds); none when no occurrence is left.
    pub next_ms: Option<u64>,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// An occurrence to take (see [`Crons::take_occurrences`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Take {
    pub id: String,
    pub due_ms: u64,
    pub next_ms: Option<u64>,
}

/// The crons a store keeps.
#[async_trait]
pub trait Crons: Send + Sync {
    /// Writes `cron` in place of any with its id.
    async fn put_cron(&self, cron: &Cron) -> Result<(), StoreError>;
    async fn get_cron(&self, id: &str) -> Result<Option<Cron>, StoreError>;
    /// Writes `cron` (changed) in place of `seen`, the cron as it was read, unless the
    /// one with its id is no longer as read (a server took an occurrence meanwhile:
    /// its next occurrence moved; another change was written: its `updated_ms`) or it
    /// is gone: whether it was written. A change is read, made and written again until
    /// it is, so that it never puts back an occurrence that was taken (which would fire
    /// it twice), never undoes another change, never brings back a deleted cron.
    async fn replace_cron(&self, cron: &Cron, seen: &Cron) -> Result<bool, StoreError>;
    /// Removes it: whether it was there. (A thread's crons go with the thread:
    /// `Catalog::delete_thread`.)
    async fn delete_cron(&self, id: &str) -> Result<bool, StoreError>;
    /// Every cron, oldest first.
    async fn crons(&self) -> Result<Vec<Cron>, StoreError>;
    /// The enabled crons whose next occurrence is at or before `now_ms`, the earliest
    /// first, at most `limit`.
    async fn due_crons(&self, now_ms: u64, limit: usize) -> Result<Vec<Cron>, StoreError>;
    /// Takes for this caller each occurrence `take` names (a cron's id, the
    /// occurrence, the cron's next one after it), moving the cron's next occurrence
    /// on, unless another caller took it first (the cron's next occurrence is no
    /// longer the one named, or the cron is gone or disabled): the ids of those this
    /// caller took, all in one write. Several servers on one store each try; one wins
    /// each occurrence.
    async fn take_occurrences(&self, take: &[Take]) -> Result<Vec<String>, StoreError>;
}

/// The crons of a store in memory (`MemoryStore`'s), in the order they were made.
#[derive(Default)]
pub(super) struct CronTable(std::sync::Mutex<indexmap::IndexMap<String, Cron>>);

impl CronTable {
    /// Removes the crons of `thread` (the thread is being deleted, and its crons go
    /// with it, as `Catalog::delete_thread` says).
    pub(super) fn delete_of(&self, thread: &str) {
        self.lock()
            .retain(|_, c| c.thread.as_deref() != Some(thread));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, indexmap::IndexMap<String, Cron>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Crons for CronTable {
    async fn put_cron(&self, cron: &Cron) -> Result<(), StoreError> {
        self.lock().insert(cron.id.clone(), cron.clone());
        Ok(())
    }

    async fn get_cron(&self, id: &str) -> Result<Option<Cron>, StoreError> {
        Ok(self.lock().get(id).cloned())
    }

    async fn replace_cron(&self, cron: &Cron, seen: &Cron) -> Result<bool, StoreError> {
        let mut crons = self.lock();
        match crons.get_mut(&cron.id) {
            Some(c) if c.next_ms == seen.next_ms && c.updated_ms == seen.updated_ms => {
                *c = cron.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn delete_cron(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.lock().shift_remove(id).is_some())
    }

    async fn crons(&self) -> Result<Vec<Cron>, StoreError> {
        Ok(self.lock().values().cloned().collect())
    }

    async fn due_crons(&self, now_ms: u64, limit: usize) -> Result<Vec<Cron>, StoreError> {
        let crons = self.lock();
        let mut due: Vec<&Cron> = crons
            .values()
            .filter(|c| c.enabled && c.next_ms.is_some_and(|n| n <= now_ms))
            .collect();
        due.sort_by_key(|c| c.next_ms);
        Ok(due.into_iter().take(limit).cloned().collect())
    }

    async fn take_occurrences(&self, take: &[Take]) -> Result<Vec<String>, StoreError> {
        let mut crons = self.lock();
        let mut taken = Vec::new();
        for t in take {
            if let Some(c) = crons.get_mut(&t.id)
                && c.enabled
                && c.next_ms == Some(t.due_ms)
            {
                c.next_ms = t.next_ms;
                taken.push(t.id.clone());
            }
        }
        Ok(taken)
    }
}
