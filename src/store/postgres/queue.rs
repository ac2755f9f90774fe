//! Runs shared by several server processes: claimed from `runs` with leases
//! (`FOR UPDATE SKIP LOCKED`), renewed by heartbeat, cancelled through any process,
//! their events kept in `run_events`; `NOTIFY switchyard_runs` wakes idle processes.

use super::PostgresStore;
use super::{Session, col, pg_error};
use crate::store::RunQueue;
use crate::store::rows::int;
use crate::store::{RunRecord, StoreError};
use async_trait::async_trait;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The columns `decode_run` reads, as the claim returns them. A run whose lease ran out
/// is taken over only when no process holds its thread's claim: the advisory lock whose
/// key is the first 8 bytes of the thread's SHA-256, as `lock_key` makes it (worked
/// out here for those runs only, rather than kept in a column of its own).
const CLAIM: &str = "WITH next AS (
    SELECT r.id, r.status AS was FROM switchyard.runs r
    CROSS JOIN LATERAL (SELECT ('x' || left(encode(sha256(convert_to(r.thread, 'UTF8')), 'hex'), 16))::bit(64)::bigint AS key) k
    WHERE r.assistant = ANY($4) AND ((r.status = 'pending'
           AND NOT EXISTS (SELECT 1 FROM switchyard.runs o WHERE o.thread = r.thread AND o.status = 'running')
           AND NOT EXISTS (SELECT 1 FROM switchyard.runs o WHERE o.thread = r.thread AND o.status = 'pending' AND o.ord < r.ord))
       OR (r.status = 'running' AND COALESCE(r.lease_ms, 0) < $2
           AND NOT EXISTS (SELECT 1 FROM pg_locks l
               WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND l.classid = ((k.key >> 32) & 4294967295)::oid
                 AND l.objid = (k.key & 4294967295)::oid)))
    ORDER BY r.ord
    LIMIT 1
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE switchyard.runs u SET status = 'running', worker = $1, lease_ms = $3
FROM next WHERE u.id = next.id
RETURNING u.id, u.thread, u.assistant, u.status, u.created_ms, u.updated_ms, u.metadata, u.kwargs, u.multitask, u.error, u.first_seq, next.was";

impl Session {
    pub(super) fn claim_run(
        &mut self,
        worker: &str,
        graphs: &[String],
        now: u64,
        until: u64,
    ) -> Result<Option<(RunRecord, bool)>, StoreError> {
        let claim = self.prepared(CLAIM)?;
        let row = match self
            .client()?
            .query_opt(&claim, &[&worker, &int(now), &int(until), &graphs])
        {
            Ok(row) => row,
            // Another process claimed a run of the same thread at the same moment:
            // the index that allows one running run per thread refused this one.
            Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
                return Ok(None);
            }
            Err(e) => return Err(self.pg(e)),
        };
        let Some(row) = row else {
            return Ok(None);
        };
        let record = self.decode_run(&row)?;
        let was: String = col(&row, 11, &self.url)?;
        Ok(Some((record, was == "running")))
    }

    pub(super) fn renew_leases(
        &mut self,
        worker: &str,
        runs: &[String],
        until: u64,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let renew = self.prepared(
            "UPDATE switchyard.runs SET lease_ms = $3
             WHERE worker = $1 AND id = ANY($2) AND status = 'running'
             RETURNING id, cancel",
        )?;
        let rows = self
            .client()?
            .query(&renew, &[&worker, &runs, &int(until)])
            .map_err(|e| self.pg(e))?;
        rows.iter()
            .map(|r| Ok((col(r, 0, &self.url)?, col(r, 1, &self.url)?)))
            .collect()
    }

    pub(super) fn release_run(&mut self, run: &str, worker: &str) -> Result<(), StoreError> {
        // Left running with a lease already run out: the next claim takes it over,
        // as it would a dead worker's.
        let release = self.prepared(
            "UPDATE switchyard.runs SET lease_ms = 0 WHERE id = $1 AND worker = $2 AND status = 'running'",
        )?;
        self.client()?
            .execute(&release, &[&run, &worker])
            .map(drop)
            .map_err(|e| self.pg(e))
    }

    pub(super) fn cancel_run(&mut self, run: &str, action: &str) -> Result<bool, StoreError> {
        let pending = self.prepared(
            "UPDATE switchyard.runs SET status = 'interrupted', cancel = $2, updated_ms = $3
             WHERE id = $1 AND status = 'pending'",
        )?;
        let now = super::now_ms();
        let ended = self
            .client()?
            .execute(&pending, &[&run, &action, &now])
            .map_err(|e| self.pg(e))?;
        if ended > 0 {
            return Ok(true);
        }
        // A rollback asked after an interrupt still rolls back.
        let running = self.prepared(
            "UPDATE switchyard.runs SET cancel = CASE WHEN cancel = 'rollback' THEN cancel ELSE $2 END
             WHERE id = $1 AND status = 'running'",
        )?;
        self.client()?
            .execute(&running, &[&run, &action])
            .map_err(|e| self.pg(e))?;
        Ok(false)
    }

    pub(super) fn append_events(
        &mut self,
        run: &str,
        first: u64,
        events: &[String],
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let seqs: Vec<i64> = (0..events.len() as u64).map(|i| int(first + i)).collect();
        let append = self.prepared(
            "INSERT INTO switchyard.run_events (run, seq, event)
             SELECT $1, s, e FROM unnest($2::BIGINT[], $3::TEXT[]) AS t(s, e)
             ON CONFLICT DO NOTHING",
        )?;
        self.client()?
            .execute(&append, &[&run, &seqs, &events])
            .map(drop)
            .map_err(|e| self.pg(e))
    }

    pub(super) fn events(&mut self, run: &str, from: u64) -> Result<Vec<String>, StoreError> {
        let read = self.prepared(
            "SELECT seq, event FROM switchyard.run_events WHERE run = $1 AND seq >= $2 ORDER BY seq",
        )?;
        let rows = self
            .client()?
            .query(&read, &[&run, &int(from)])
            .map_err(|e| self.pg(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            // Only the events without a gap: a later one waits for those before it.
            let seq: i64 = col(r, 0, &self.url)?;
            if seq != int(from + out.len() as u64) {
                break;
            }
            out.push(col(r, 1, &self.url)?);
        }
        Ok(out)
    }
}

/// What `LISTEN switchyard_runs` heard: a count that grows with each notification.
#[derive(Default)]
pub(super) struct Heard {
    count: Mutex<u64>,
    changed: Condvar,
}

impl Heard {
    /// Waits up to `timeout` for a notification after the call.
    pub(super) fn wait(&self, timeout: Duration) {
        let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let seen = *count;
        let _ = self
            .changed
            .wait_timeout_while(count, timeout, |c| *c == seen);
    }

    fn bump(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.changed.notify_all();
    }
}

/// A connection of its own that listens for queued runs, on a thread of its own, made
/// again when lost; ends when nobody holds `heard` any more.
pub(super) fn listen(config: postgres::Config, url: Arc<str>, heard: std::sync::Weak<Heard>) {
    let _ = std::thread::Builder::new()
        .name("switchyard-listen".into())
        .spawn(move || {
            loop {
                let Some(h) = heard.upgrade() else { return };
                let mut client = match config.connect(postgres::NoTls) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = pg_error(&url, e);
                        drop(h);
                        std::thread::sleep(Duration::from_millis(500));
                        continue;
                    }
                };
                if client.batch_execute("LISTEN switchyard_runs").is_err() {
                    continue;
                }
                // Whatever was queued while no one listened is looked for now.
                h.bump();
                drop(h);
                loop {
                    let got = {
                        let mut notes = client.notifications();
                        let mut iter = notes.timeout_iter(Duration::from_millis(500));
                        postgres::fallible_iterator::FallibleIterator::next(&mut iter)
                    };
                    let Some(h) = heard.upgrade() else { return };
                    match got {
                        Ok(Some(_)) => h.bump(),
                        Ok(None) => {}
                        Err(_) => break,
                    }
                    if client.is_closed() {
                        break;
                    }
                }
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
        let (worker, graphs) = (worker.to_string(), graphs.to_vec());
        self.call(move |s| s.claim_run(&worker, &graphs, now_ms, lease_until_ms))
            .await
    }

    async fn renew_leases(
        &self,
        worker: &str,
        runs: &[String],
        until_ms: u64,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let (worker, runs) = (worker.to_string(), runs.to_vec());
        let jobs = {
            let mut slot = self.leases.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Some(j) => j.clone(),
                None => {
                    let j = Self::connection(&self.config, &self.url, false)?;
                    *slot = Some(j.clone());
                    j
                }
            }
        };
        self.call_on(&jobs, move |s| s.renew_leases(&worker, &runs, until_ms))
            .await
    }

    async fn release_run(&self, run: &str, worker: &str) -> Result<(), StoreError> {
        let (run, worker) = (run.to_string(), worker.to_string());
        self.call_for(&run.clone(), move |s| s.release_run(&run, &worker))
            .await
    }

    async fn cancel_run(&self, run: &str, action: &str) -> Result<bool, StoreError> {
        let (run, action) = (run.to_string(), action.to_string());
        self.call_for(&run.clone(), move |s| s.cancel_run(&run, &action))
            .await
    }

    async fn append_events(
        &self,
        run: &str,
        first: u64,
        events: &[String],
    ) -> Result<(), StoreError> {
        let (run, events) = (run.to_string(), events.to_vec());
        self.call_for(&run.clone(), move |s| s.append_events(&run, first, &events))
            .await
    }

    async fn events(&self, run: &str, from: u64) -> Result<Vec<String>, StoreError> {
        let run = run.to_string();
        self.call_for(&run.clone(), move |s| s.events(&run, from))
            .await
    }

    async fn wait_for_runs(&self, timeout: Duration) {
        let heard = {
            let mut slot = self.heard.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Some(h) => h.clone(),
                None => {
                    let h = Arc::new(Heard::default());
                    listen(self.config.clone(), self.url.clone(), Arc::downgrade(&h));
                    *slot = Some(h.clone());
                    h
                }
            }
        };
        // The listening connection's news come through a condition variable.
        let _ = tokio::task::spawn_blocking(move || heard.wait(timeout)).await;
    }
}
