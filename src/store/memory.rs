use super::frozen::{freeze_records, freeze_snapshot, thaw_records, thaw_snapshot, thaw_stored};
use super::{
    Catalog, Checkpoint, Checkpoints, LlmCache, RunQueue, RunRecord, Snapshot, Status, StoreError,
    Stored, ThreadRecord,
};
use crate::fxhash::FxHashMap;
use async_trait::async_trait;
use serde_json::Value as Json;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Threads paused at an interrupt kept as value trees, the most recently paused; older
/// ones are kept as compact bytes (see `frozen.rs`).
const HOT_PAUSED: usize = 64;

/// Checkpoints in process memory: fast, gone when the process ends.
#[derive(Default)]
pub struct MemoryStore {
    threads: Mutex<Threads>,
    /// LLM cache entries: key -> (value, expiry in Unix milliseconds).
    cache: Mutex<HashMap<String, (Json, u64)>>,
    catalog: Mutex<Entries>,
    /// The long-term store's items, by joined namespace and key, each with its place
    /// in the order items were first put.
    items: Mutex<HashMap<(String, String), (u64, super::Item)>>,
    items_put: std::sync::atomic::AtomicU64,
    crons: super::crons::CronTable,
    pub(super) assistants: super::assistants::AssistantTable,
}

#[derive(Default)]
struct Threads {
    by_name: FxHashMap<String, Thread>,
    /// Threads that paused, oldest first, with the record they paused at.
    paused: VecDeque<(Arc<str>, u64)>,
}

/// A thread: its older records as bytes (once it has paused a while), the records
/// after them, its latest snapshot.
#[derive(Default)]
struct Thread {
    frozen: Vec<Chunk>,
    records: Vec<Checkpoint>,
    /// The last frozen record, for when `records` is empty.
    last_frozen: Option<Checkpoint>,
    snapshot: Option<Snap>,
}

/// Records `first..first + len` as bytes.
struct Chunk {
    first: u64,
    len: u64,
    bytes: Vec<u8>,
}

enum Snap {
    Hot(Snapshot),
    Cold(Vec<u8>),
}

impl Thread {
    fn last(&self) -> Option<&Checkpoint> {
        self.records.last().or(self.last_frozen.as_ref())
    }

    /// Every record from `from` on.
    fn from(&self, thread: &str, from: u64) -> Result<Vec<Checkpoint>, StoreError> {
        let name: Arc<str> = Arc::from(thread);
        let mut out = Vec::new();
        for c in self.frozen.iter().filter(|c| c.first + c.len > from) {
            // Resuming a paused thread reads from its last record on, which is kept
            // as it is: nothing to thaw.
            match &self.last_frozen {
                Some(last) if last.seq == from && c.first + c.len == from + 1 => {
                    out.push(last.clone());
                }
                _ => out.extend(thaw_records(&name, &c.bytes, from)?),
            }
        }
        // Records are in `seq` order: found by halving, not by looking at every one (a
        // resume reads the last few of a long thread).
        let start = self.records.partition_point(|r| r.seq < from);
        out.extend(self.records[start..].iter().cloned());
        Ok(out)
    }

    /// All of it as value trees again (before a rollback).
    fn thaw(&mut self, thread: &str) -> Result<(), StoreError> {
        if !self.frozen.is_empty() {
            let all = self.from(thread, 0)?;
            self.frozen.clear();
            self.last_frozen = None;
            self.records = all;
        }
        if let Some(Snap::Cold(bytes)) = &self.snapshot {
            self.snapshot = Some(Snap::Hot(thaw_snapshot(&Arc::from(thread), bytes)?));
        }
        Ok(())
    }

    /// Its records so far, and its snapshot, as bytes.
    fn freeze(&mut self) {
        if let Some(last) = self.records.last().cloned() {
            self.frozen.push(Chunk {
                first: self.records[0].seq,
                len: self.records.len() as u64,
                bytes: freeze_records(&self.records),
            });
            self.records = Vec::new();
            self.last_frozen = Some(last);
        }
        if let Some(Snap::Hot(s)) = &self.snapshot {
            self.snapshot = Some(Snap::Cold(freeze_snapshot(s)));
        }
    }
}

impl Threads {
    /// Freezes the threads that paused longest ago, past the [`HOT_PAUSED`] latest,
    /// when they have not moved since.
    fn cool(&mut self) {
        while self.paused.len() > HOT_PAUSED {
            let Some((name, seq)) = self.paused.pop_front() else {
                break;
            };
            if let Some(t) = self.by_name.get_mut(&*name)
                && t.records
                    .last()
                    .is_some_and(|r| r.seq == seq && r.status == Status::Interrupted)
            {
                t.freeze();
            }
        }
    }
}

#[derive(Default)]
struct Entries {
    /// In creation order, so listings need no sort.
    threads: indexmap::IndexMap<String, ThreadRecord>,
    runs: indexmap::IndexMap<String, RunRecord>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Threads> {
        // A panic while holding the lock leaves whole records; keep serving them.
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn catalog(&self) -> MutexGuard<'_, Entries> {
        self.catalog.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Checkpoints for MemoryStore {
    async fn append(&self, record: Checkpoint) -> Result<(), StoreError> {
        let mut threads = self.lock();
        let thread = match threads.by_name.get_mut(&*record.thread) {
            Some(t) => t,
            None => threads
                .by_name
                .entry(record.thread.to_string())
                .or_insert_with(|| Thread {
                    // Room for a short run's records without growing the list twice.
                    records: Vec::with_capacity(16),
                    ..Thread::default()
                }),
        };
        // A seq already taken is a conflict, as in SQLite.
        if thread.last().is_some_and(|last| record.seq <= last.seq) {
            return Err(StoreError::Conflict {
                thread: record.thread.to_string(),
                seq: record.seq,
            });
        }
        thread.records.push(record);
        Ok(())
    }

    async fn append_all(&self, records: Vec<Checkpoint>) -> Result<(), StoreError> {
        let mut threads = self.lock();
        // Checked before anything is written: all of the records or none, and a seq
        // already taken is a conflict, as in SQLite.
        let mut next: HashMap<&str, u64> = HashMap::new();
        for r in &records {
            let taken = match next.get(&*r.thread) {
                Some(t) => *t,
                None => threads
                    .by_name
                    .get(&*r.thread)
                    .and_then(Thread::last)
                    .map_or(0, |last| last.seq + 1),
            };
            if r.seq < taken {
                return Err(StoreError::Conflict {
                    thread: r.thread.to_string(),
                    seq: r.seq,
                });
            }
            next.insert(&r.thread, r.seq + 1);
        }
        for record in records {
            threads
                .by_name
                .entry(record.thread.to_string())
                .or_default()
                .records
                .push(record);
        }
        Ok(())
    }

    async fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        match self.lock().by_name.get(thread) {
            Some(t) => t.from(thread, 0),
            None => Ok(Vec::new()),
        }
    }

    async fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self
            .lock()
            .by_name
            .get(thread)
            .and_then(Thread::last)
            .cloned())
    }

    async fn load_from(&self, thread: &str, seq: u64) -> Result<Vec<Checkpoint>, StoreError> {
        match self.lock().by_name.get(thread) {
            Some(t) => t.from(thread, seq),
            None => Ok(Vec::new()),
        }
    }

    async fn put_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        let mut threads = self.lock();
        let Some(t) = threads.by_name.get_mut(&*snapshot.thread) else {
            return Ok(());
        };
        // Only a snapshot of one of the thread's records.
        let Some(last) = t.last() else {
            return Ok(());
        };
        if snapshot.seq > last.seq {
            return Ok(());
        }
        // Waiting for a person: it may wait long, and there may be many. (A finished
        // thread stays as it is: compacting every run would cost each run its time.)
        let paused = last.seq == snapshot.seq && last.status == Status::Interrupted;
        let name = snapshot.thread.clone();
        let seq = snapshot.seq;
        t.snapshot = Some(Snap::Hot(snapshot));
        if paused {
            threads.paused.push_back((name, seq));
            threads.cool();
        }
        Ok(())
    }

    async fn snapshot(&self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        let threads = self.lock();
        match threads
            .by_name
            .get(thread)
            .and_then(|t| t.snapshot.as_ref())
        {
            None => Ok(None),
            Some(Snap::Hot(s)) => Ok(Some(s.clone())),
            Some(Snap::Cold(bytes)) => thaw_snapshot(&Arc::from(thread), bytes).map(Some),
        }
    }

    async fn resume_point(
        &self,
        thread: &str,
    ) -> Result<(Option<Snapshot<Stored>>, Vec<Checkpoint>), StoreError> {
        let threads = self.lock();
        let Some(t) = threads.by_name.get(thread) else {
            return Ok((None, Vec::new()));
        };
        // A paused thread's bytes thawed with their large values left as text: a
        // resume that replaces them before reading them never builds them.
        let snapshot = match &t.snapshot {
            None => return Ok((None, Vec::new())),
            Some(Snap::Hot(s)) => s.clone().stored(),
            Some(Snap::Cold(bytes)) => thaw_stored(&Arc::from(thread), bytes)?,
        };
        let records = t.from(thread, snapshot.seq)?;
        Ok((Some(snapshot), records))
    }

    async fn truncate(&self, thread: &str, seq: u64) -> Result<(), StoreError> {
        let mut threads = self.lock();
        if let Some(t) = threads.by_name.get_mut(thread) {
            t.thaw(thread)?;
            t.records.retain(|r| r.seq < seq);
            if matches!(&t.snapshot, Some(Snap::Hot(s)) if s.seq >= seq) {
                t.snapshot = None;
            }
            if t.records.is_empty() {
                threads.by_name.remove(thread);
            }
        }
        Ok(())
    }

    async fn prune(&self, base: Checkpoint) -> Result<u64, StoreError> {
        let mut threads = self.lock();
        let thread = &*base.thread;
        let Some(t) = threads
            .by_name
            .get_mut(thread)
            .filter(|t| t.last().is_some_and(|l| l.seq == base.seq))
        else {
            return Err(StoreError::Conflict {
                thread: thread.to_string(),
                seq: base.seq,
            });
        };
        let gone = t.frozen.iter().map(|c| c.len).sum::<u64>() + t.records.len() as u64 - 1;
        *t = Thread {
            records: vec![base],
            ..Thread::default()
        };
        Ok(gone)
    }
}

#[async_trait]
impl Catalog for MemoryStore {
    async fn ended_before(&self, before_ms: u64) -> Result<Vec<String>, StoreError> {
        let threads = self.lock();
        let mut ended: Vec<(u64, &String)> = threads
            .by_name
            .iter()
            .filter_map(|(name, t)| {
                let last = t.last()?;
                (matches!(last.status, Status::Finished | Status::Failed) && last.at_ms < before_ms)
                    .then_some((last.at_ms, name))
            })
            .collect();
        ended.sort();
        Ok(ended.into_iter().map(|(_, n)| n.clone()).collect())
    }

    async fn waiting_on(&self, graph_hash: &str) -> Result<Vec<String>, StoreError> {
        let threads = self.lock();
        let mut found: Vec<String> = threads
            .by_name
            .iter()
            .filter(|(_, t)| {
                t.last().is_some_and(|l| {
                    *l.graph_hash == *graph_hash
                        && !matches!(l.status, Status::Finished | Status::Failed)
                })
            })
            .map(|(n, _)| n.clone())
            .collect();
        found.sort();
        Ok(found)
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), StoreError> {
        self.lock().by_name.remove(thread);
        let mut catalog = self.catalog();
        catalog.threads.shift_remove(thread);
        catalog.runs.retain(|_, r| r.thread != thread);
        self.crons.delete_of(thread);
        Ok(())
    }

    async fn put_thread(&self, thread: &ThreadRecord) -> Result<(), StoreError> {
        self.catalog()
            .threads
            .insert(thread.id.clone(), thread.clone());
        Ok(())
    }

    async fn get_thread(&self, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(self.catalog().threads.get(thread).cloned())
    }

    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        Ok(self.catalog().threads.values().cloned().collect())
    }

    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.catalog().runs.insert(run.id.clone(), run.clone());
        Ok(())
    }

    async fn get_run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.catalog().runs.get(run).cloned())
    }

    async fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self
            .catalog()
            .runs
            .values()
            .filter(|r| r.thread == thread)
            .cloned()
            .collect())
    }

    async fn delete_run(&self, run: &str) -> Result<(), StoreError> {
        self.catalog().runs.shift_remove(run);
        Ok(())
    }

    async fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self
            .catalog()
            .runs
            .values()
            .filter(|r| r.status.in_flight())
            .cloned()
            .collect())
    }
}

#[async_trait]
impl RunQueue for MemoryStore {}

#[async_trait]
impl LlmCache for MemoryStore {
    async fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError> {
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

    async fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), (value.clone(), expires_ms));
        Ok(())
    }
}

#[async_trait]
impl super::Items for MemoryStore {
    async fn put_item(&self, item: &super::Item) -> Result<(), StoreError> {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let id = (item.namespace.joined(), item.key.clone());
        let (place, created_ms) = match items.get(&id) {
            Some((place, old)) => (*place, old.created_ms),
            None => (
                self.items_put
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                item.created_ms,
            ),
        };
        let item = super::Item {
            created_ms,
            ..item.clone()
        };
        items.insert(id, (place, item));
        Ok(())
    }

    async fn get_item(
        &self,
        namespace: &str,
        key: &str,
    ) -> Result<Option<super::Item>, StoreError> {
        let items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        Ok(items
            .get(&(namespace.to_string(), key.to_string()))
            .map(|(_, i)| i.clone()))
    }

    async fn delete_item(&self, namespace: &str, key: &str) -> Result<(), StoreError> {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        items.remove(&(namespace.to_string(), key.to_string()));
        Ok(())
    }

    async fn items_under(
        &self,
        prefix: &str,
        now_ms: u64,
        page: Option<super::Page>,
    ) -> Result<Vec<super::Item>, StoreError> {
        let items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let mut found: Vec<&(u64, super::Item)> = items
            .iter()
            .filter(|((ns, _), (_, i))| super::items::under(ns, prefix) && !i.expired(now_ms))
            .map(|(_, i)| i)
            .collect();
        found.sort_by_key(|(place, _)| *place);
        let (skip, take) = page.map_or((0, usize::MAX), |p| (p.offset, p.limit));
        // Only the page is copied out.
        Ok(found
            .into_iter()
            .skip(skip)
            .take(take)
            .map(|(_, i)| i.clone())
            .collect())
    }

    async fn item_namespaces(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        let items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let found: std::collections::BTreeSet<&str> = items
            .iter()
            .filter(|((ns, _), (_, i))| super::items::under(ns, prefix) && !i.expired(now_ms))
            .map(|((ns, _), _)| ns.as_str())
            .collect();
        Ok(found.into_iter().map(str::to_string).collect())
    }

    async fn refresh_item(
        &self,
        namespace: &str,
        key: &str,
        expires_ms: u64,
    ) -> Result<(), StoreError> {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, i)) = items.get_mut(&(namespace.to_string(), key.to_string()))
            && i.ttl_ms.is_some()
        {
            i.expires_ms = Some(expires_ms);
        }
        Ok(())
    }

    async fn delete_expired_items(&self, now_ms: u64) -> Result<u64, StoreError> {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let before = items.len();
        items.retain(|_, (_, i)| !i.expired(now_ms));
        Ok((before - items.len()) as u64)
    }
}

#[async_trait]
impl super::Crons for MemoryStore {
    async fn put_cron(&self, cron: &super::Cron) -> Result<(), StoreError> {
        self.crons.put_cron(cron).await
    }

    async fn get_cron(&self, id: &str) -> Result<Option<super::Cron>, StoreError> {
        self.crons.get_cron(id).await
    }

    async fn replace_cron(
        &self,
        cron: &super::Cron,
        seen: &super::Cron,
    ) -> Result<bool, StoreError> {
        self.crons.replace_cron(cron, seen).await
    }

    async fn delete_cron(&self, id: &str) -> Result<bool, StoreError> {
        self.crons.delete_cron(id).await
    }

    async fn crons(&self) -> Result<Vec<super::Cron>, StoreError> {
        self.crons.crons().await
    }

    async fn due_crons(&self, now_ms: u64, limit: usize) -> Result<Vec<super::Cron>, StoreError> {
        self.crons.due_crons(now_ms, limit).await
    }

    async fn take_occurrences(
        &self,
        take: &[super::crons::Take],
    ) -> Result<Vec<String>, StoreError> {
        self.crons.take_occurrences(take).await
    }
}
