//! Claims of threads as lease rows with fencing tokens (`switchyard.claims`).
//!
//! A claim is a row naming its holder, with a lease on the database's clock and a
//! token no claim had before (one sequence for every thread). The holder renews the
//! lease while it holds the claim. Another process takes the thread over only once the
//! lease has run out and the holder's presence is gone: an advisory lock that a
//! connection of the holder's own keeps for as long as the process lives (a process
//! that is stopped or slow keeps it, so it is never doubled; one that dies loses it
//! with its connection). A holder of this machine that is gone is taken over at once.
//! A Postgres restart ends every presence: a holder that is running takes its
//! presence again and renews its leases at once, while one stopped through the restart
//! and past its lease is taken over. A holder that was stopped past its lease, or cut off from the database,
//! may wake to find its thread taken: every checkpoint it appends names its token and
//! is written only while the row still holds that token (the row is locked for the
//! insert, so a takeover waits for it or it for the takeover), and before a tool call
//! the runner asks [`Checkpoints::fence`], which renews the lease under the same token
//! or says the claim is lost, and the call is sent only while the lease it renewed
//! surely holds on this process's clock (else the claim is asked again). So the
//! process that lost its thread neither writes nor calls a tool after it learns so.
//! What no check before a call can rule out: a process stopped in the instant
//! between that last look at the clock and the call leaving it sends the call when it
//! wakes, and a call it had sent when it stopped cannot be taken back. Such a call
//! carries the idempotency key of the takeover's, and the claim's fencing token
//! (lower than the takeover's), for a tool that can refuse it.
//!
//! Unlike the advisory locks of layout 2, a claim survives a Postgres restart: the
//! row is still there, and the holder goes on renewing it once the database is back.

use super::pool::Failure;
use super::{PostgresStore, col};
use crate::store::{Claim, Held as HeldClaim, StoreError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Whether the presence lock whose key is the column `$col` is held (the key split as
/// `pg_advisory_lock(bigint)` splits it). The run queue's takeover asks it too.
macro_rules! present {
    ($col:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND l.classid = ((",
            $col,
            " >> 32) & 4294967295)::oid AND l.objid = (",
            $col,
            " & 4294967295)::oid)"
        )
    };
}
pub(super) use present;

/// The database's clock in Unix milliseconds: every lease is on it, so the machines'
/// clocks need not agree.
macro_rules! db_now {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// Takes the claim of `$1` for `$2` (this machine), `$3` (pid) for `$4` ms, present
/// as `$5`: a new row, or the row of a claim whose lease ran out and whose holder's
/// presence is gone. Returns the new token, or no row.
const CLAIM: &str = concat!(
    "INSERT INTO switchyard.claims (thread, holder, pid, since_ms, token, until_ms, presence)
     SELECT $1, $2, $3, t.now, nextval('switchyard.claim_tokens'), t.now + $4, $5
     FROM (SELECT ",
    db_now!(),
    " AS now) t
     ON CONFLICT (thread) DO UPDATE SET holder = excluded.holder, pid = excluded.pid,
         since_ms = excluded.since_ms, token = excluded.token, until_ms = excluded.until_ms,
         presence = excluded.presence
     WHERE switchyard.claims.until_ms < excluded.since_ms
       AND NOT ",
    present!("switchyard.claims.presence"),
    " RETURNING token"
);

/// Takes the claim of `$1` from the holder whose token is `$6` (a process of this
/// machine that is gone), whatever its lease.
const TAKE_FROM: &str = concat!(
    "UPDATE switchyard.claims SET holder = $2, pid = $3, since_ms = ",
    db_now!(),
    ", token = nextval('switchyard.claim_tokens'), until_ms = ",
    db_now!(),
    " + $4, presence = $5 WHERE thread = $1 AND token = $6 RETURNING token"
);

/// Extends the lease of `$1` held under token `$2` to `$3` ms from now (never
/// shortening it); no row when the token is not the claim's any more.
const RENEW: &str = concat!(
    "UPDATE switchyard.claims SET until_ms = greatest(until_ms, ",
    db_now!(),
    " + $3) WHERE thread = $1 AND token = $2 RETURNING token"
);

const HOLDER: &str = "SELECT holder, pid, token FROM switchyard.claims WHERE thread = $1";

const RELEASE: &str = "DELETE FROM switchyard.claims WHERE thread = $1 AND token = $2";

/// The claims this process holds, by thread.
#[derive(Default)]
pub(super) struct Held(Mutex<HashMap<String, Arc<Lease>>>);

/// A claim held: its token, and whether this process learnt it lost it.
pub(super) struct Lease {
    pub(super) token: i64,
    lost: AtomicBool,
}

impl Lease {
    pub(super) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(super) fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
    }
}

impl Held {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Lease>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The claim this process holds of `thread`, if any.
    pub(super) fn of(&self, thread: &str) -> Option<Arc<Lease>> {
        self.map().get(thread).cloned()
    }
}

/// This machine, as a claim's holder names it: the host name and the pid namespace,
/// so that a pid in a claim is looked up only where it means the same process.
fn this_machine() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default();
    let pids = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{host} {pids}")
}

/// Whether process `pid` of this machine is gone. Unknown (no `/proc`): not gone, and
/// its claim waits for its lease.
fn gone(pid: i64) -> bool {
    std::path::Path::new("/proc/self").exists()
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

impl PostgresStore {
    /// Claims `thread` (see [`crate::store::Checkpoints::claim`]).
    pub(super) async fn claim_thread(&self, thread: &str) -> Result<Claim, StoreError> {
        let pid = i64::from(std::process::id());
        let refused = |pid: i64| StoreError::Claimed {
            thread: thread.to_string(),
            pid: u32::try_from(pid).unwrap_or(0),
        };
        // Held here already (another run of this process): refused without asking.
        if self.claims.of(thread).is_some() {
            return Err(refused(pid));
        }
        let me = this_machine();
        let lease_ms = self.claim_lease.as_millis() as i64;
        let present = self.present().await?;
        // Released between the two statements of an attempt (no row to name a holder
        // by): tried again.
        let mut attempts = 0;
        let token = loop {
            attempts += 1;
            match self.try_claim(thread, &me, pid, lease_ms, present).await? {
                Some(Ok(token)) => break token,
                Some(Err(holder)) => return Err(refused(holder)),
                None if attempts < 3 => {}
                None => return Err(refused(0)),
            }
        };
        let lease = Arc::new(Lease {
            token,
            lost: AtomicBool::new(false),
        });
        {
            let mut held = self.claims.map();
            if held.contains_key(thread) {
                // Another run of this process claimed it at the same moment and got
                // there first: this row is its (the token in it is the later one).
                return Err(refused(pid));
            }
            held.insert(thread.to_string(), lease.clone());
        }
        // What this process remembers of the thread's values may be stale: another
        // process may have run it since. (What it knows of its records being whole
        // stays true: see `WholeTo`.)
        self.memory().written.forget(thread);
        let renewal = tokio::spawn(renew(
            self.leases.clone(),
            thread.to_string(),
            lease.clone(),
            self.claim_lease,
        ));
        Ok(Claim::holding(PgClaim {
            pool: self.pool.clone(),
            held: self.claims.clone(),
            thread: thread.to_string(),
            lease,
            renewal,
        }))
    }

    /// One attempt at a claim: its token, or the pid of the process holding it, or
    /// none when the claim was released between the statements.
    async fn try_claim(
        &self,
        thread: &str,
        me: &str,
        pid: i64,
        lease_ms: i64,
        present: i64,
    ) -> Result<Option<Result<i64, i64>>, StoreError> {
        let url = &*self.url;
        self.pool
            .run(|c| async move {
                let claim = c.prepare_cached(CLAIM).await?;
                if let Some(row) = c
                    .query_opt(&claim, &[&thread, &me, &pid, &lease_ms, &present])
                    .await?
                {
                    return Ok(Some(Ok(col(&row, 0, url)?)));
                }
                let holder = c.prepare_cached(HOLDER).await?;
                let Some(row) = c.query_opt(&holder, &[&thread]).await? else {
                    return Ok(None);
                };
                let (machine, their_pid, token): (String, i64, i64) =
                    (col(&row, 0, url)?, col(&row, 1, url)?, col(&row, 2, url)?);
                if machine == me && their_pid != pid && gone(their_pid) {
                    let take = c.prepare_cached(TAKE_FROM).await?;
                    if let Some(row) = c
                        .query_opt(&take, &[&thread, &me, &pid, &lease_ms, &present, &token])
                        .await?
                    {
                        return Ok(Some(Ok(col(&row, 0, url)?)));
                    }
                }
                Ok::<_, Failure>(Some(Err(their_pid)))
            })
            .await
    }

    /// The token `thread`'s checkpoints are written under: this process's claim's, or
    /// none when it holds none; a claim already known lost refuses the write.
    pub(super) fn writing_token(&self, thread: &str) -> Result<Option<i64>, StoreError> {
        match self.claims.of(thread) {
            Some(l) if l.lost() => Err(StoreError::ClaimLost {
                thread: thread.to_string(),
            }),
            Some(l) => Ok(Some(l.token)),
            None => Ok(None),
        }
    }

    /// A write under `thread`'s claim found its token gone: the claim is lost, and
    /// every later write and call of this process on the thread is refused.
    pub(super) fn fenced_out(&self, thread: &str) -> StoreError {
        if let Some(l) = self.claims.of(thread) {
            l.mark_lost();
        }
        StoreError::ClaimLost {
            thread: thread.to_string(),
        }
    }

    /// See [`crate::store::Checkpoints::fence`]: the lease renewed for a call, or the
    /// claim found lost.
    pub(super) async fn fence_thread(
        &self,
        thread: &str,
    ) -> Result<crate::store::Fence, StoreError> {
        let Some(lease) = self.claims.of(thread) else {
            return Ok(crate::store::Fence::default());
        };
        let lost = || StoreError::ClaimLost {
            thread: thread.to_string(),
        };
        if lease.lost() {
            return Err(lost());
        }
        let lease_ms = self.claim_lease.as_millis() as i64;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let asked = std::time::Instant::now();
            let renewed = renew_once(&self.leases, thread, lease.token, lease_ms).await?;
            if !renewed {
                lease.mark_lost();
                return Err(lost());
            }
            // The lease runs a whole lease from when the database renewed it, which
            // was after `asked`. An answer that took half of that to arrive (this
            // process was stopped while it waited, through a restart that let another
            // take the thread) may be stale: asked again, so a process that wakes
            // never calls on an answer from before it stopped.
            let took = asked.elapsed();
            if took < self.claim_lease / 2 {
                // The lease runs from the renewal, after `asked`: it holds at least
                // until `asked` plus a lease, less a tenth for clocks that run apart.
                return Ok(crate::store::Fence {
                    token: Some(lease.token),
                    until: Some(asked + self.claim_lease * 9 / 10),
                });
            }
            // A database that answers this slowly every time leaves no lease to count
            // on: the call is not made.
            if attempts == 3 {
                return Err(StoreError::Postgres {
                    url: self.url.to_string(),
                    message: format!(
                        "the check of thread `{thread}`'s claim took {} ms, half its lease or more, three times: too slow to call a tool on",
                        took.as_millis()
                    ),
                });
            }
        }
    }
}

/// This process's presence: the key of an advisory lock that a connection of its own
/// holds while the process lives, taken again whenever the connection is made again
/// (a Postgres restart). The task ends with the store.
pub(super) struct Presence {
    key: i64,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Presence {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PostgresStore {
    /// The key of this process's presence, held before the first claim is.
    async fn present(&self) -> Result<i64, StoreError> {
        let presence = self
            .presence
            .get_or_try_init(|| async {
                let key = self
                    .pool
                    .run(|c| async move {
                        let row = c
                            .query_one("SELECT nextval('switchyard.claim_tokens')", &[])
                            .await?;
                        Ok(col::<i64>(&row, 0, &self.url)?)
                    })
                    .await?;
                let (held, mut first) = tokio::sync::watch::channel(false);
                let task = tokio::spawn(keep_presence(self.config.clone(), key, held));
                let started = tokio::time::timeout(
                    super::RECONNECT_PATIENCE,
                    first.wait_for(|held| *held),
                )
                .await;
                if !matches!(started, Ok(Ok(_))) {
                    task.abort();
                    return Err(StoreError::Postgres {
                        url: self.url.to_string(),
                        message: "cannot hold this process's presence (an advisory lock on a connection of its own)".into(),
                    });
                }
                Ok::<_, StoreError>(Presence { key, task })
            })
            .await?;
        Ok(presence.key)
    }
}

/// Holds the presence lock `key` on a connection of its own, made again when lost.
async fn keep_presence(
    config: tokio_postgres::Config,
    key: i64,
    held: tokio::sync::watch::Sender<bool>,
) {
    loop {
        if let Ok((client, connection)) = config.connect(tokio_postgres::NoTls).await {
            let connection = tokio::spawn(connection);
            if client
                .execute("SELECT pg_advisory_lock($1)", &[&key])
                .await
                .is_ok()
            {
                held.send_replace(true);
            }
            // Kept until the connection ends (the client is held meanwhile).
            let _ = connection.await;
            drop(client);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Extends the lease of `thread`'s claim under `token` by `lease_ms` from now: false
/// when the token is not the claim's any more.
async fn renew_once(
    pool: &super::pool::Pool,
    thread: &str,
    token: i64,
    lease_ms: i64,
) -> Result<bool, StoreError> {
    pool.run(|c| async move {
        let renew = c.prepare_cached(RENEW).await?;
        Ok(c.query_opt(&renew, &[&thread, &token, &lease_ms])
            .await?
            .is_some())
    })
    .await
}

/// Renews a claim's lease every quarter of it until the claim ends (the task is
/// aborted) or is found lost. A renewal that fails (the database restarting) is tried
/// again at the next beat.
async fn renew(pool: super::pool::Pool, thread: String, lease: Arc<Lease>, length: Duration) {
    let lease_ms = length.as_millis() as i64;
    loop {
        tokio::time::sleep(length / 4).await;
        let renewed = renew_once(&pool, &thread, lease.token, lease_ms).await;
        if let Ok(false) = renewed {
            lease.mark_lost();
            return;
        }
    }
}

/// A claim held: released when dropped.
struct PgClaim {
    pool: super::pool::Pool,
    held: Arc<Held>,
    thread: String,
    lease: Arc<Lease>,
    renewal: tokio::task::JoinHandle<()>,
}

impl PgClaim {
    /// Stops renewing, forgets the claim here, and gives back the one to delete the row
    /// with (its token: a claim taken over meanwhile is the taker's, and stays).
    fn end(&mut self) -> Option<(String, i64)> {
        self.renewal.abort();
        let thread = std::mem::take(&mut self.thread);
        if thread.is_empty() {
            return None;
        }
        let mut held = self.held.map();
        if held
            .get(&thread)
            .is_some_and(|l| Arc::ptr_eq(l, &self.lease))
        {
            held.remove(&thread);
        }
        Some((thread, self.lease.token))
    }
}

/// Deletes a claim's row; tried again every second while it fails (the database
/// away): a row left behind would keep the thread from others while this process
/// lives, its presence held.
async fn release(pool: super::pool::Pool, thread: String, token: i64) {
    let once = move |pool: super::pool::Pool, thread: String| async move {
        pool.run(|c| {
            let thread = &thread;
            async move {
                let release = c.prepare_cached(RELEASE).await?;
                c.execute(&release, &[thread, &token]).await?;
                Ok(())
            }
        })
        .await
    };
    if once(pool.clone(), thread.clone()).await.is_ok() {
        return;
    }
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if once(pool.clone(), thread.clone()).await.is_ok() {
                return;
            }
        }
    });
}

#[async_trait]
impl HeldClaim for PgClaim {
    /// Waited for, so that another process may claim the thread as soon as this
    /// returns.
    async fn release(mut self: Box<Self>) {
        if let Some((thread, token)) = self.end() {
            release(self.pool.clone(), thread, token).await;
        }
    }
}

impl Drop for PgClaim {
    /// A claim dropped unreleased (a run's task cancelled) is released without being
    /// waited for; outside a runtime, its lease runs out instead.
    fn drop(&mut self) {
        if let Some((thread, token)) = self.end()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(release(self.pool.clone(), thread, token));
        }
    }
}
