//! Runs shared by several server processes: claimed from `runs` with leases
//! (`FOR UPDATE SKIP LOCKED`), renewed by heartbeat, cancelled through any process,
//! their events kept in `run_events`; `NOTIFY switchyard_runs` wakes idle processes.
//! All through the pool (`pool.rs`), lease renewals through a pool of their own.

use super::catalog::decode_run;
use super::{PostgresStore, col};
use crate::store::RunQueue;
use crate::store::rows::int;
use crate::store::{RunRecord, StoreError};
use async_trait::async_trait;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio_postgres::AsyncMessage;

/// The columns `decode_run` reads, as the claim returns them. A run whose lease ran out
/// is taken over only when no process holds its thread's claim: no claim row whose
/// lease (on the database's clock) still runs or whose holder is present (see
/// `claims.rs`).
const CLAIM: &str = concat!(
    "WITH next AS (
    SELECT r.id, r.status AS was FROM switchyard.runs r
    WHERE r.status IN ('pending', 'running') AND r.assistant = ANY($4) AND ((r.status = 'pending'
           AND NOT EXISTS (SELECT 1 FROM switchyard.runs o WHERE o.thread = r.thread AND o.status = 'running')
           AND NOT EXISTS (SELECT 1 FROM switchyard.runs o WHERE o.thread = r.thread AND o.status = 'pending' AND o.ord < r.ord))
       OR (r.status = 'running' AND COALESCE(r.lease_ms, 0) < $2
           AND NOT EXISTS (SELECT 1 FROM switchyard.claims c WHERE c.thread = r.thread
               AND (c.until_ms >= (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT OR ",
    super::claims::present!("c.presence"),
    "))))
    ORDER BY r.ord
    LIMIT 1
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE switchyard.runs u SET status = 'running', worker = $1, lease_ms = $3
FROM next WHERE u.id = next.id
RETURNING u.id, u.thread, u.assistant, u.status, u.created_ms, u.updated_ms, u.metadata, u.kwargs, u.multitask, u.error, u.first_seq, next.was"
);

/// What `LISTEN switchyard_runs` heard: a count that grows with each notification.
pub(super) struct Heard {
    count: tokio::sync::watch::Sender<u64>,
}

impl Default for Heard {
    fn default() -> Self {
        Heard {
            count: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Heard {
    /// Waits up to `timeout` for a notification after the call.
    async fn wait(&self, timeout: Duration) {
        let mut news = self.count.subscribe();
        let _ = tokio::time::timeout(timeout, news.changed()).await;
    }

    fn bump(&self) {
        self.count.send_modify(|c| *c += 1);
    }
}

/// A connection of its own that listens for queued runs, made again when lost; its
/// task ends when nobody holds `heard` any more.
fn listen(config: tokio_postgres::Config, heard: Weak<Heard>) {
    tokio::spawn(async move {
        while heard.strong_count() > 0 {
            let Ok((client, mut connection)) = config.connect(tokio_postgres::NoTls).await else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            // The connection's messages, read on a task of their own (which also makes
            // the client's calls go); it ends, and `news` closes, when the connection does.
            let (tx, mut news) = tokio::sync::mpsc::unbounded_channel();
            let driver = tokio::spawn(async move {
                while let Some(Ok(m)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    if matches!(m, AsyncMessage::Notification(_)) && tx.send(()).is_err() {
                        return;
                    }
                }
            });
            if client.batch_execute("LISTEN switchyard_runs").await.is_ok() {
                // Whatever was queued while no one listened is looked for now.
                match heard.upgrade() {
                    Some(h) => h.bump(),
                    None => break,
                }
                loop {
                    match tokio::time::timeout(Duration::from_millis(500), news.recv()).await {
                        Ok(Some(())) => match heard.upgrade() {
                            Some(h) => h.bump(),
                            None => break,
                        },
                        Ok(None) => break,
                        Err(_) if heard.strong_count() == 0 => break,
                        Err(_) => {}
                    }
                }
            }
            driver.abort();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

#[async_trait]
impl RunQueue for PostgresStore {
    fn shares_runs(&self) -> bool {
        true
    }

    async fn claim_run(
        &self,
        worker: &str,
        graphs: &[String],
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<Option<(RunRecord, bool)>, StoreError> {
        let url = &*self.url;
        self.pool
            .run(|c| async move {
                let claim = c.prepare_cached(CLAIM).await?;
                let row = match c
                    .query_opt(
                        &claim,
                        &[&worker, &int(now_ms), &int(lease_until_ms), &graphs],
                    )
                    .await
                {
                    Ok(row) => row,
                    // Another process claimed a run of the same thread at the same
                    // moment: the index that allows one running run per thread refused
                    // this one.
                    Err(e)
                        if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) =>
                    {
                        return Ok(None);
                    }
                    Err(e) => return Err(e.into()),
                };
                let Some(row) = row else {
                    return Ok(None);
                };
                let record = decode_run(&row, url)?;
                let was: String = col(&row, 11, url)?;
                Ok(Some((record, was == "running")))
            })
            .await
    }

    async fn renew_leases(
        &self,
        worker: &str,
        runs: &[String],
        until_ms: u64,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let url = &*self.url;
        // A pool of its own: a heartbeat waits behind no claim, sweep or page of
        // history, so a busy process keeps its leases.
        self.leases
            .run(|c| async move {
                let renew = c
                    .prepare_cached(
                        "UPDATE switchyard.runs SET lease_ms = $3
                         WHERE worker = $1 AND id = ANY($2) AND status = 'running'
                         RETURNING id, cancel",
                    )
                    .await?;
                let rows = c.query(&renew, &[&worker, &runs, &int(until_ms)]).await?;
                Ok(rows
                    .iter()
                    .map(|r| Ok((col(r, 0, url)?, col(r, 1, url)?)))
                    .collect::<Result<_, StoreError>>()?)
            })
            .await
    }

    async fn release_run(&self, run: &str, worker: &str) -> Result<(), StoreError> {
        self.pool
            .run(|c| async move {
                // Left running with a lease already run out: the next claim takes it
                // over, as it would a dead worker's.
                let release = c
                    .prepare_cached(
                        "UPDATE switchyard.runs SET lease_ms = 0 WHERE id = $1 AND worker = $2 AND status = 'running'",
                    )
                    .await?;
                c.execute(&release, &[&run, &worker]).await?;
                Ok(())
            })
            .await
    }

    async fn cancel_run(&self, run: &str, action: &str) -> Result<bool, StoreError> {
        self.pool
            .run(|c| async move {
                let pending = c
                    .prepare_cached(
                        "UPDATE switchyard.runs SET status = 'interrupted', cancel = $2, updated_ms = $3
                         WHERE id = $1 AND status = 'pending'",
                    )
                    .await?;
                if c.execute(&pending, &[&run, &action, &super::now_ms()]).await? > 0 {
                    return Ok(true);
                }
                // A rollback asked after an interrupt still rolls back.
                let running = c
                    .prepare_cached(
                        "UPDATE switchyard.runs SET cancel = CASE WHEN cancel = 'rollback' THEN cancel ELSE $2 END
                         WHERE id = $1 AND status = 'running'",
                    )
                    .await?;
                c.execute(&running, &[&run, &action]).await?;
                Ok(false)
            })
            .await
    }

    async fn append_events(
        &self,
        run: &str,
        first: u64,
        events: &[String],
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let seqs = &(0..events.len() as u64)
            .map(|i| int(first + i))
            .collect::<Vec<i64>>();
        self.pool
            .run(|c| async move {
                let append = c
                    .prepare_cached(
                        "INSERT INTO switchyard.run_events (run, seq, event)
                         SELECT $1, s, e FROM unnest($2::BIGINT[], $3::TEXT[]) AS t(s, e)
                         ON CONFLICT DO NOTHING",
                    )
                    .await?;
                c.execute(&append, &[&run, seqs, &events]).await?;
                Ok(())
            })
            .await
    }

    async fn events(&self, run: &str, from: u64) -> Result<Vec<String>, StoreError> {
        let url = &*self.url;
        self.pool
            .run(|c| async move {
                let read = c
                    .prepare_cached(
                        "SELECT seq, event FROM switchyard.run_events WHERE run = $1 AND seq >= $2 ORDER BY seq",
                    )
                    .await?;
                let rows = c.query(&read, &[&run, &int(from)]).await?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    // Only the events without a gap: a later one waits for those before.
                    let seq: i64 = col(r, 0, url)?;
                    if seq != int(from + out.len() as u64) {
                        break;
                    }
                    out.push(col(r, 1, url)?);
                }
                Ok(out)
            })
            .await
    }

    async fn wait_for_runs(&self, timeout: Duration) {
        let heard = {
            let mut slot = self.heard.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Some(h) => h.clone(),
                None => {
                    let h = Arc::new(Heard::default());
                    listen(self.config.clone(), Arc::downgrade(&h));
                    *slot = Some(h.clone());
                    h
                }
            }
        };
        heard.wait(timeout).await;
    }
}
