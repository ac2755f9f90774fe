//! The LLM cache and the server's catalog (threads and runs) as rows, through the pool
//! (`pool.rs`).

use super::pool::Failure;
use super::{PostgresStore, col, now_ms};
use crate::store::rows::int;
use crate::store::{Catalog, Checked, LlmCache, Refusal};
use crate::store::{RunRecord, RunStatus, StoreError, ThreadRecord};
use async_trait::async_trait;
use serde_json::Value as Json;
use tokio_postgres::GenericClient;

/// The columns [`decode_thread`] reads.
macro_rules! thread_columns {
    ($rest:literal) => {
        concat!(
            "SELECT id, created_ms, updated_ms, metadata FROM switchyard.threads ",
            $rest
        )
    };
}

/// The columns [`decode_run`] reads.
macro_rules! run_columns {
    ($rest:literal) => {
        concat!(
            "SELECT id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq
             FROM switchyard.runs ",
            $rest
        )
    };
}

const PUT_RUN: &str = "INSERT INTO switchyard.runs (id, thread, assistant, status, created_ms, updated_ms, metadata, kwargs, multitask, error, first_seq)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (id) DO UPDATE SET thread = excluded.thread, assistant = excluded.assistant, status = excluded.status,
         created_ms = excluded.created_ms, updated_ms = excluded.updated_ms, metadata = excluded.metadata,
         kwargs = excluded.kwargs, multitask = excluded.multitask, error = excluded.error, first_seq = excluded.first_seq";

/// Wakes the processes waiting for runs (`wait_for_runs`); sent at commit.
const NOTIFY: &str = "SELECT pg_notify('switchyard_runs', $1)";

/// Writes a run on `c` (a connection or a transaction) with the statements of
/// [`PUT_RUN`] and [`NOTIFY`] prepared on its connection; a pending run wakes the
/// processes waiting for runs unless `quiet` (it is claimed in the same transaction).
async fn put_run_on(
    c: &impl GenericClient,
    put: &tokio_postgres::Statement,
    notify: &tokio_postgres::Statement,
    r: &RunRecord,
    quiet: bool,
) -> Result<(), Failure> {
    let (metadata, kwargs) = (r.metadata.to_string(), r.kwargs.to_string());
    c.execute(
        put,
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
    .await?;
    if r.status == RunStatus::Pending && !quiet {
        // After the row is in, so that those woken find it.
        c.execute(notify, &[&r.id]).await?;
    }
    Ok(())
}

fn decode_thread(row: &tokio_postgres::Row, url: &str) -> Result<ThreadRecord, StoreError> {
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

pub(super) fn decode_run(row: &tokio_postgres::Row, url: &str) -> Result<RunRecord, StoreError> {
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
                u64::try_from(n).map_err(|_| catalog_error(what(), format!("`first_seq` is {n}")))
            })
            .transpose()?,
        id,
    })
}

fn catalog_error(what: String, message: impl ToString) -> StoreError {
    StoreError::CorruptCatalog {
        what,
        message: message.to_string(),
    }
}

type Params<'a> = &'a [&'a (dyn tokio_postgres::types::ToSql + Sync)];

impl PostgresStore {
    /// The rows `sql` selects, each decoded by `decode`.
    pub(super) async fn decoded<T>(
        &self,
        sql: &'static str,
        params: Params<'_>,
        decode: fn(&tokio_postgres::Row, &str) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let url = &*self.url;
        self.pool
            .run(|c| async move {
                let select = c.prepare_cached(sql).await?;
                let rows = c.query(&select, params).await?;
                Ok(rows
                    .iter()
                    .map(|r| decode(r, url))
                    .collect::<Result<_, _>>()?)
            })
            .await
    }
}

impl PostgresStore {
    /// Writes a new run as its thread allows, in one transaction under a lock of the
    /// thread's (in a key space of its own, apart from the claims'), so that two
    /// processes writing runs for one thread at once cannot both find it idle. A
    /// thread with runs in flight refuses it (`reject`: [`Refusal::Busy`]) or queues it
    /// (pending); an idle thread that moved past the checkpoint the run was `checked`
    /// against refuses it ([`Refusal::Moved`]); else it is queued, or, with `here`
    /// (a worker and its lease), written as running, claimed by that worker: whether it
    /// was.
    async fn place(
        &self,
        r: &RunRecord,
        checked: Option<Checked>,
        reject: bool,
        here: Option<(&str, u64)>,
    ) -> Result<Result<bool, Refusal>, StoreError> {
        let url = &*self.url;
        self.pool
            .run(|mut c| async move {
                let lock = c
                    .prepare_cached("SELECT pg_advisory_xact_lock(1398362692, $1)")
                    .await?;
                let busy = c
                    .prepare_cached(
                        "SELECT id, status, worker FROM switchyard.runs WHERE thread = $1 AND status IN ('pending', 'running') ORDER BY created_ms, id",
                    )
                    .await?;
                let head = c
                    .prepare_cached("SELECT max(seq) FROM switchyard.checkpoints WHERE thread = $1")
                    .await?;
                let put = c.prepare_cached(PUT_RUN).await?;
                let notify = c.prepare_cached(NOTIFY).await?;
                let claim = c
                    .prepare_cached(
                        "UPDATE switchyard.runs SET status = 'running', worker = $2, lease_ms = $3 WHERE id = $1",
                    )
                    .await?;
                let tx = c.transaction().await?;
                tx.execute(&lock, &[&thread_key(&r.thread)]).await?;
                let rows = tx.query(&busy, &[&r.thread]).await?;
                let mut in_flight = Vec::with_capacity(rows.len());
                for row in &rows {
                    let (id, status, worker): (String, String, Option<String>) =
                        (col(row, 0, url)?, col(row, 1, url)?, col(row, 2, url)?);
                    // This run itself: written by an attempt whose answer was lost.
                    if id == r.id {
                        return Ok(Ok(status == "running"
                            && here.is_some_and(|(w, _)| worker.as_deref() == Some(w))));
                    }
                    in_flight.push(id);
                }
                let (refusal, running) = if !in_flight.is_empty() {
                    (reject.then_some(Refusal::Busy(in_flight)), false)
                } else if let Some(Checked(seen)) = checked {
                    // Under the thread's lock, with no run in flight: every checkpoint
                    // of the runs before is committed (a run ends after its last one),
                    // so a thread that moved since the run was checked shows it here.
                    let row = tx.query_one(&head, &[&r.thread]).await?;
                    let now: Option<i64> = col(&row, 0, url)?;
                    (
                        (now != seen.map(|s| s as i64)).then_some(Refusal::Moved),
                        here.is_some(),
                    )
                } else {
                    (None, here.is_some())
                };
                if let Some(refusal) = refusal {
                    tx.rollback().await?;
                    return Ok(Err(refusal));
                }
                put_run_on(&*tx, &put, &notify, r, running).await?;
                if let (true, Some((worker, until))) = (running, here) {
                    tx.execute(&claim, &[&r.id, &worker, &int(until)]).await?;
                }
                tx.commit().await?;
                Ok(Ok(running))
            })
            .await
    }
}

#[async_trait]
impl Catalog for PostgresStore {
    async fn delete_thread(&self, thread: &str) -> Result<(), StoreError> {
        self.delete_thread_rows(thread).await
    }

    async fn ended_before(&self, before_ms: u64) -> Result<Vec<String>, StoreError> {
        self.decoded(
            "SELECT c.thread FROM switchyard.checkpoints c
             JOIN (SELECT thread, max(seq) AS seq FROM switchyard.checkpoints GROUP BY thread) l
               ON l.thread = c.thread AND l.seq = c.seq
             WHERE c.status IN ('finished', 'failed') AND c.at_ms < $1
             ORDER BY c.at_ms, c.thread",
            &[&int(before_ms)],
            |r, url| col(r, 0, url),
        )
        .await
    }

    async fn waiting_on(&self, graph_hash: &str) -> Result<Vec<String>, StoreError> {
        self.decoded(
            "SELECT c.thread FROM switchyard.checkpoints c
             JOIN (SELECT thread, max(seq) AS seq FROM switchyard.checkpoints GROUP BY thread) l
               ON l.thread = c.thread AND l.seq = c.seq
             JOIN switchyard.graphs g ON g.id = c.graph
             WHERE g.hash = $1 AND c.status NOT IN ('finished', 'failed')
             ORDER BY c.thread",
            &[&graph_hash],
            |r, url| col(r, 0, url),
        )
        .await
    }

    async fn put_thread(&self, t: &ThreadRecord) -> Result<(), StoreError> {
        let metadata = &t.metadata.to_string();
        self.pool
            .run(|c| async move {
                let put = c.prepare_cached(
                    "INSERT INTO switchyard.threads (id, created_ms, updated_ms, metadata) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (id) DO UPDATE SET created_ms = excluded.created_ms, updated_ms = excluded.updated_ms, metadata = excluded.metadata",
                )
                .await?;
                c.execute(
                    &put,
                    &[&t.id, &int(t.created_ms), &int(t.updated_ms), metadata],
                )
                .await?;
                Ok(())
            })
            .await
    }

    async fn get_thread(&self, thread: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let found = self
            .decoded(thread_columns!("WHERE id = $1"), &[&thread], decode_thread)
            .await?;
        Ok(found.into_iter().next())
    }

    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        self.decoded(
            thread_columns!("ORDER BY created_ms, ord"),
            &[],
            decode_thread,
        )
        .await
    }

    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.pool
            .run(|c| async move {
                let put = c.prepare_cached(PUT_RUN).await?;
                let notify = c.prepare_cached(NOTIFY).await?;
                put_run_on(&**c, &put, &notify, run, false).await
            })
            .await
    }

    /// Stores a new run unless its thread has one pending or running: those runs' ids
    /// then, and nothing written. One transaction under a lock of the thread's (in a
    /// key space of its own, apart from the claims'), so two processes taking runs for
    /// one thread at once cannot both find it idle.
    async fn put_run_unless_busy(
        &self,
        r: &RunRecord,
        checked: Option<Checked>,
    ) -> Result<Result<(), Refusal>, StoreError> {
        Ok(self.place(r, checked, true, None).await?.map(drop))
    }

    async fn put_run_here(
        &self,
        r: &RunRecord,
        checked: Option<Checked>,
        reject: bool,
        here: Option<(&str, u64)>,
    ) -> Result<Result<bool, Refusal>, StoreError> {
        self.place(r, checked, reject, here).await
    }

    async fn get_run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let found = self
            .decoded(run_columns!("WHERE id = $1"), &[&run], decode_run)
            .await?;
        Ok(found.into_iter().next())
    }

    async fn runs(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.decoded(
            run_columns!("WHERE thread = $1 ORDER BY created_ms, ord"),
            &[&thread],
            decode_run,
        )
        .await
    }

    async fn runs_in_flight_of(&self, thread: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.decoded(
            run_columns!(
                "WHERE thread = $1 AND status IN ('pending', 'running') ORDER BY created_ms, ord"
            ),
            &[&thread],
            decode_run,
        )
        .await
    }

    async fn delete_run(&self, run: &str) -> Result<(), StoreError> {
        self.pool
            .run(|c| async move {
                let events = c
                    .prepare_cached("DELETE FROM switchyard.run_events WHERE run = $1")
                    .await?;
                let delete = c
                    .prepare_cached("DELETE FROM switchyard.runs WHERE id = $1")
                    .await?;
                c.execute(&events, &[&run]).await?;
                c.execute(&delete, &[&run]).await?;
                Ok(())
            })
            .await
    }

    async fn runs_in_flight(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.decoded(
            run_columns!("WHERE status IN ('pending', 'running') ORDER BY created_ms, ord"),
            &[],
            decode_run,
        )
        .await
    }
}

#[async_trait]
impl LlmCache for PostgresStore {
    async fn cache_get(&self, key: &str, now: u64) -> Result<Option<Json>, StoreError> {
        self.pool
            .run(|c| async move {
                let get = c
                    .prepare_cached(
                        "SELECT value FROM switchyard.llm_cache WHERE key = $1 AND expires_ms > $2",
                    )
                    .await?;
                let row = c.query_opt(&get, &[&key, &int(now)]).await?;
                // An entry that does not parse is a miss; the next put replaces it.
                Ok(row
                    .and_then(|r| r.try_get::<_, String>(0).ok())
                    .and_then(|v| serde_json::from_str(&v).ok()))
            })
            .await
    }

    async fn cache_put(&self, key: &str, value: &Json, expires_ms: u64) -> Result<(), StoreError> {
        let value = &value.to_string();
        self.pool
            .run(|c| async move {
                // Expired entries go when new ones come, so the table holds what can
                // still hit.
                let expire = c
                    .prepare_cached("DELETE FROM switchyard.llm_cache WHERE expires_ms <= $1")
                    .await?;
                let put = c
                    .prepare_cached(
                        "INSERT INTO switchyard.llm_cache (key, value, expires_ms) VALUES ($1, $2, $3)
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms",
                    )
                    .await?;
                c.execute(&expire, &[&now_ms()]).await?;
                c.execute(&put, &[&key, value, &int(expires_ms)]).await?;
                Ok(())
            })
            .await
    }
}

/// A thread's key in the key space of `put_run_unless_busy`'s lock: the first 4 bytes of
/// its name's SHA-256.
fn thread_key(thread: &str) -> i32 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(thread.as_bytes());
    i32::from_be_bytes(digest[..4].try_into().expect("4 bytes"))
}
