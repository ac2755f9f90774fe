//! The LLM cache and the server's catalog (threads and runs) as rows.

use super::PostgresStore;
use super::{Session, col, now_ms};
use crate::store::rows::int;
use crate::store::{Catalog, Checked, LlmCache, Refusal};
use crate::store::{RunRecord, RunStatus, StoreError, ThreadRecord};
use async_trait::async_trait;
use serde_json::Value as Json;

impl Session {
    pub(super) fn cache_get(&mut self, key: &str, now: u64) -> Result<Option<Json>, StoreError> {
        let get = self.prepared(
            "SELECT value FROM switchyard.llm_cache WHERE key = $1 AND expires_ms > $2",
        )?;
        let row = self
            .client()?
            .query_opt(&get, &[&key, &int(now)])
            .map_err(|e| self.pg(e))?;
        // An entry that does not parse is a miss; the next put replaces it.
        Ok(row
            .and_then(|r| r.try_get::<_, String>(0).ok())
            .and_then(|v| serde_json::from_str(&v).ok()))
    }

    pub(super) fn cache_put(
        &mut self,
        key: &str,
        value: &str,
        expires_ms: u64,
    ) -> Result<(), StoreError> {
        // Expired entries go when new ones come, so the table holds what can still hit.
        let expire = self.prepared("DELETE FROM switchyard.llm_cache WHERE expires_ms <= $1")?;
        let put = self.prepared(
            "INSERT INTO switchyard.llm_cache (key, value, expires_ms) VALUES ($1, $2, $3)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms",
        )?;
        let client = self.client()?;
        let done = client
            .execute(&expire, &[&now_ms()])
            .and_then(|_| client.execute(&put, &[&key, &value, &int(expires_ms)]));
        done.map(drop).map_err(|e| self.pg(e))
    }

    pub(super) fn put_thread(&mut self, t: &ThreadRecord) -> Result<(), StoreError> {
        let put = self.prepared(
            "INSERT INTO switchyard.threads (id, created_ms, updated_ms, metadata) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET created_ms = excluded.created_ms, updated_ms = excluded.updated_ms, metadata = excluded.metadata",
        )?;
        let metadata = t.metadata.to_string();
        self.client()?
            .execute(
                &put,
                &[&t.id, &int(t.created_ms), &int(t.updated_ms), &metadata],
            )
            .map(drop)
            .map_err(|e| self.pg(e))
    }

    pub(super) fn get_thread(&mut self, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let get = self.prepared(
            "SELECT id, created_ms, updated_ms, metadata FROM switchyard.threads WHERE id = $1",
        )?;
        let row = self
            .client()?
            .query_opt(&get, &[&thread])
            .map_err(|e| self.pg(e))?;
        row.map(|r| self.decode_thread(&r)).transpose()
    }

    pub(super) fn threads(&mut self) -> Result<Vec<ThreadRecord>, StoreError> {
        let all = self.prepared(
            "SELECT id, created_ms, updated_ms, metadata FROM switchyard.threads ORDER BY created_ms, ord",
        )?;
        let rows = self.client()?.query(&all, &[]).map_err(|e| self.pg(e))?;
        rows.iter().map(|r| self.decode_thread(r)).collect()
    }

    pub(super) fn put_run(&mut self, r: &RunRecord) -> Result<(), StoreError> {
        let put = self.prepared(
            "INSERT INTO switchyard.runs (id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (id) DO UPDATE SET thread = excluded.thread, assistant = excluded.assistant, status = excluded.status,
                 created_ms = excluded.created_ms, updated_ms = excluded.updated_ms, metadata = excluded.metadata,
                 kwargs = excluded.kwargs, multitask = excluded.multitask, error = excluded.error, first_seq = excluded.first_seq",
        )?;
        let (metadata, kwargs) = (r.metadata.to_string(), r.kwargs.to_string());
        self.client()?
            .execute(
                &put,
                &[
                    &r.id,
                    &r.thread,
                    &r.assistant,
                    &r.status.name(),
                    &int(r.created_ms),
                    &int(r.updated_ms),
                    &metadata,
                    &kwargs,
                    &r.multitask_strategy,
                    &r.error,
                    &r.first_seq.map(int),
                ],
            )
            .map_err(|e| self.pg(e))?;
        if r.status == RunStatus::Pending {
            // Wakes the processes waiting for runs (`wait_for_runs`): after the row
            // is in, so that they find it.
            let notify = self.prepared("SELECT pg_notify('switchyard_runs', $1)")?;
            self.client()?
                .execute(&notify, &[&r.id])
                .map_err(|e| self.pg(e))?;
        }
        Ok(())
    }

    /// Stores a new run unless its thread has one pending or running: those runs' ids
    /// then, and nothing written. One transaction under a lock of the thread's (in a
    /// key space of its own, apart from the claims'), so two processes taking runs for
    /// one thread at once cannot both find it idle.
    pub(super) fn put_run_unless_busy(
        &mut self,
        r: &RunRecord,
        checked: Option<Checked>,
    ) -> Result<Result<(), Refusal>, StoreError> {
        self.begin()?;
        let done = (|| {
            let lock = self.prepared("SELECT pg_advisory_xact_lock(1398362692, $1)")?;
            let key = super::lock_key(&r.thread) as i32;
            self.client()?
                .execute(&lock, &[&key])
                .map_err(|e| self.pg(e))?;
            let busy = self.prepared(
                "SELECT id FROM switchyard.runs WHERE thread = $1 AND status IN ('pending', 'running') ORDER BY created_ms, id",
            )?;
            let rows = self
                .client()?
                .query(&busy, &[&r.thread])
                .map_err(|e| self.pg(e))?;
            if !rows.is_empty() {
                let busy = rows
                    .iter()
                    .map(|row| col(row, 0, &self.url))
                    .collect::<Result<Vec<String>, _>>()?;
                // This run itself: written by an attempt whose answer was lost.
                if busy.contains(&r.id) {
                    return Ok(Ok(()));
                }
                return Ok(Err(Refusal::Busy(busy)));
            }
            // Under the thread's lock, with no run in flight: every checkpoint of the
            // runs before is committed (a run ends after its last one), so a thread
            // that moved since the run was checked shows it here.
            if let Some(Checked(seen)) = checked {
                let head =
                    self.prepared("SELECT max(seq) FROM switchyard.checkpoints WHERE thread = $1")?;
                let row = self
                    .client()?
                    .query_one(&head, &[&r.thread])
                    .map_err(|e| self.pg(e))?;
                let now: Option<i64> = col(&row, 0, &self.url)?;
                if now != seen.map(|s| s as i64) {
                    return Ok(Err(Refusal::Moved));
                }
            }
            self.put_run(r).map(Ok)
        })();
        let ended = self.end(matches!(done, Ok(Ok(()))));
        let done = done?;
        ended?;
        Ok(done)
    }

    pub(super) fn get_run(&mut self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let get = self.prepared(
            "SELECT id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq
             FROM switchyard.runs WHERE id = $1",
        )?;
        let row = self
            .client()?
            .query_opt(&get, &[&run])
            .map_err(|e| self.pg(e))?;
        row.map(|r| self.decode_run(&r)).transpose()
    }

    pub(super) fn runs(&mut self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        let all = self.prepared(
            "SELECT id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq
             FROM switchyard.runs WHERE thread = $1 ORDER BY created_ms, ord",
        )?;
        let rows = self
            .client()?
            .query(&all, &[&thread])
            .map_err(|e| self.pg(e))?;
        rows.iter().map(|r| self.decode_run(r)).collect()
    }

    pub(super) fn delete_run(&mut self, run: &str) -> Result<(), StoreError> {
        let delete = self.prepared("DELETE FROM switchyard.runs WHERE id = $1")?;
        let events = self.prepared("DELETE FROM switchyard.run_events WHERE run = $1")?;
        let client = self.client()?;
        let done = client
            .execute(&events, &[&run])
            .and_then(|_| client.execute(&delete, &[&run]));
        done.map(drop).map_err(|e| self.pg(e))
    }

    pub(super) fn runs_in_flight(&mut self) -> Result<Vec<RunRecord>, StoreError> {
        let all = self.prepared(
            "SELECT id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq
             FROM switchyard.runs WHERE status IN ('pending', 'running') ORDER BY created_ms, ord",
        )?;
        let rows = self.client()?.query(&all, &[]).map_err(|e| self.pg(e))?;
        rows.iter().map(|r| self.decode_run(r)).collect()
    }

    fn decode_thread(&self, row: &postgres::Row) -> Result<ThreadRecord, StoreError> {
        let url = &self.url;
        let id: String = col(row, 0, url)?;
        let what = || format!("thread `{id}`");
        let ms = |i: usize| -> Result<u64, StoreError> {
            let n: i64 = col(row, i, url)?;
            u64::try_from(n).map_err(|_| catalog_error(what(), format!("a time is {n}")))
        };
        let metadata: String = col(row, 3, url)?;
        Ok(ThreadRecord {
            created_ms: ms(1)?,
            updated_ms: ms(2)?,
            metadata: serde_json::from_str(&metadata).map_err(|e| catalog_error(what(), e))?,
            id,
        })
    }

    pub(super) fn decode_run(&self, row: &postgres::Row) -> Result<RunRecord, StoreError> {
        let url = &self.url;
        let id: String = col(row, 0, url)?;
        let what = || format!("run `{id}`");
        let count = |i: usize| -> Result<u64, StoreError> {
            let n: i64 = col(row, i, url)?;
            u64::try_from(n).map_err(|_| catalog_error(what(), format!("a count is {n}")))
        };
        let json = |i: usize| -> Result<Json, StoreError> {
            let text: String = col(row, i, url)?;
            serde_json::from_str(&text).map_err(|e| catalog_error(what(), e))
        };
        let status: String = col(row, 3, url)?;
        let first_seq: Option<i64> = col(row, 10, url)?;
        Ok(RunRecord {
            thread: col(row, 1, url)?,
            assistant: col(row, 2, url)?,
            status: RunStatus::parse(&status)
                .ok_or_else(|| catalog_error(what(), format!("unknown status `{status}`")))?,
            created_ms: count(4)?,
            updated_ms: count(5)?,
            metadata: json(6)?,
            kwargs: json(7)?,
            multitask_strategy: col(row, 8, url)?,
            error: col(row, 9, url)?,
            first_seq: first_seq
                .map(|n| {
                    u64::try_from(n)
                        .map_err(|_| catalog_error(what(), format!("`first_seq` is {n}")))
                })
                .transpose()?,
            id,
        })
    }
}

fn catalog_error(what: String, message: impl ToString) -> StoreError {
    StoreError::CorruptCatalog {
        what,
        message: message.to_string(),
    }
}

#[async_trait]
impl Catalog for PostgresStore {
    async fn delete_thread(&self, thread: &str) -> Result<(), StoreError> {
        let thread = thread.to_string();
        self.call_for(&thread.clone(), move |s| s.delete_thread(&thread))
            .await
    }

    async fn ended_before(&self, before_ms: u64) -> Result<Vec<String>, StoreError> {
        self.call(move |s| s.ended_before(before_ms)).await
    }

    async fn put_thread(&self, thread: &ThreadRecord) -> Result<(), StoreError> {
        let thread = thread.clone();
        self.call(move |s| s.put_thread(&thread)).await
    }

    async fn get_thread(&self, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let thread = thread.to_string();
        self.call(move |s| s.get_thread(&thread)).await
    }

    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        self.call(|s| s.threads()).await
    }

    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let run = run.clone();
        self.call_for(&run.id.clone(), move |s| s.put_run(&run))
            .await
    }

    async fn put_run_unless_busy(
        &self,
        run: &RunRecord,
        checked: Option<Checked>,
    ) -> Result<Result<(), Refusal>, StoreError> {
        let run = run.clone();
        self.call_for(&run.id.clone(), move |s| {
            s.put_run_unless_busy(&run, checked)
        })
        .await
    }

    async fn get_run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let run = run.to_string();
        self.call_for(&run.clone(), move |s| s.get_run(&run)).await
    }

    async fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        let thread = thread.to_string();
        self.call(move |s| s.runs(&thread)).await
    }

    async fn delete_run(&self, run: &str) -> Result<(), StoreError> {
        let run = run.to_string();
        self.call_for(&run.clone(), move |s| s.delete_run(&run))
            .await
    }

    async fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.call(|s| s.runs_in_flight()).await
    }
}

#[async_trait]
impl LlmCache for PostgresStore {
    async fn cache_get(&self, key: &str, now_ms: u64) -> Result<Option<Json>, StoreError> {
        let key = key.to_string();
        self.call(move |s| s.cache_get(&key, now_ms)).await
    }

    async fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        self.call(move |s| s.cache_put(&key, &value, expires_ms))
            .await
    }
}
