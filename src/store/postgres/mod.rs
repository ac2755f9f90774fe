//! Checkpoints in a Postgres database, shared by every process that opens it: the same
//! records, snapshots, LLM cache and catalog as the SQLite store (`layout.rs` has the
//! tables, `records.rs` checkpoint and snapshot rows, `catalog.rs` the cache and the
//! server's catalog), and claims that hold across machines (advisory locks).
//!
//! Two kinds of connection. The catalog, the run queue and the LLM cache need nothing a
//! connection remembers: they go through a pool of async connections (`pool.rs`). A
//! thread's checkpoints and its claim go to one connection, always the same, which
//! holds the claim's advisory lock and remembers what the thread wrote (to share large
//! values): those connections use the synchronous `postgres` client, which blocks on a
//! runtime of its own that cannot run inside another, so each lives on a thread of its
//! own and each call is a job sent to it, whose answer the async caller awaits (a
//! oneshot): a commit's wait holds no runtime thread. They move to async connections
//! with the claims, when a claim is a lease row with a fencing token rather than a lock
//! held by a connection.

mod catalog;
mod layout;
mod pool;
mod queue;
mod records;

use super::rows::{WholeTo, Written};
use super::{Claim, StoreError};
use async_trait::async_trait;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A job for the connection's thread.
type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// A graph file and its hash.
type GraphKey = (Arc<str>, Arc<str>);

/// Checkpoints in Postgres (`postgres://...` or `postgresql://...`, any form
/// libpq-style URLs take, a Unix socket directory as `?host=/path`).
pub struct PostgresStore {
    /// Each connection's queue of jobs (see [`PostgresStore::session_of`]).
    jobs: Vec<mpsc::Sender<Job>>,
    /// The URL without its password, for messages.
    url: Arc<str>,
    /// Threads this process has claimed: an advisory lock is held per session, so
    /// a second claim from this process would be granted again without this.
    held: Arc<Mutex<HashSet<String>>>,
    /// The catalog's, the run queue's and the cache's connections.
    pool: pool::Pool,
    /// A connection for lease renewals alone: a heartbeat waits behind no other call,
    /// so a busy process keeps its leases.
    leases: pool::Pool,
    /// For `wait_for_runs`: the listening connection's news, made on first use.
    heard: Mutex<Option<Arc<queue::Heard>>>,
    config: tokio_postgres::Config,
}

/// The connection and what this process remembers of the database.
struct Session {
    config: postgres::Config,
    url: Arc<str>,
    client: Option<postgres::Client>,
    statements: HashMap<&'static str, postgres::Statement>,
    graph_ids: HashMap<GraphKey, i64>,
    graphs: HashMap<i64, GraphKey>,
    written: Written,
    /// See [`WholeTo`].
    whole_to: WholeTo,
    /// Advisory locks held for claims, by key: taken again after a reconnection (the
    /// server released them when the old connection went).
    locks: HashMap<i64, String>,
    /// The last failure said the connection is gone (the server ended it, or it
    /// broke), though the client may not know yet.
    broken: std::cell::Cell<bool>,
    /// Inside a transaction begun with `begin`: a lost connection then fails the call
    /// (which is tried again whole) rather than go on, outside it, on a new one.
    in_transaction: bool,
    /// The call is being made again, its first attempt's connection lost: what that
    /// attempt wrote may have been committed before the answer was lost.
    retrying: bool,
    /// Threads whose claim was lost with a connection and taken by another process
    /// before this one could take it again: their appends are refused.
    unclaimed: HashSet<String>,
}

/// Connections a process opens for threads' checkpoints: calls of different threads go
/// on at once, each commit waiting for the disk with the others (Postgres groups them).
const CONNECTIONS: usize = 4;

/// Connections, at most, in the pool of the catalog, the run queue and the cache.
const POOLED: usize = 8;

/// How long a lost connection is tried again before a call fails: long enough for a
/// Postgres restart.
const RECONNECT_PATIENCE: Duration = Duration::from_secs(30);

/// `url` with its password replaced, for messages: in the user part
/// (`scheme://user:password@host`) or as a `password=` option.
fn redact(url: &str) -> String {
    let mut shown = url.to_string();
    if let Some(start) = url.find("://").map(|i| i + 3) {
        let authority_end = url[start..]
            .find(['/', '?'])
            .map_or(url.len(), |i| start + i);
        if let Some(at) = url[start..authority_end].rfind('@').map(|i| start + i)
            && let Some(colon) = url[start..at].find(':').map(|i| start + i)
        {
            shown = format!("{}:***{}", &url[..colon], &url[at..]);
        }
    }
    if let Some(q) = shown.find('?') {
        let (base, query) = shown.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some(("password", _)) => "password=***".to_string(),
                _ => kv.to_string(),
            })
            .collect();
        shown = format!("{base}{}", query.join("&"));
    }
    shown
}

/// A Postgres error as the store reports it: what the server said, when it said
/// something, and which store.
pub(super) fn pg_error(url: &str, e: postgres::Error) -> StoreError {
    let message = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    };
    StoreError::Postgres {
        url: url.to_string(),
        message,
    }
}

/// Column `i` of a row: a column of another type is an error, never a panic.
pub(super) fn col<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
    url: &str,
) -> Result<T, StoreError> {
    row.try_get(i).map_err(|e| pg_error(url, e))
}

impl Session {
    /// The connection, made again if it was lost.
    fn client(&mut self) -> Result<&mut postgres::Client, StoreError> {
        if self.broken.get() || self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.reconnect()?;
        }
        Ok(self.client.as_mut().expect("connected above"))
    }

    fn reconnect(&mut self) -> Result<(), StoreError> {
        if std::mem::take(&mut self.in_transaction) {
            self.client = None;
            return Err(StoreError::Postgres {
                url: self.url.to_string(),
                message: "the connection was lost in a transaction".into(),
            });
        }
        self.client = None;
        self.broken.set(false);
        self.statements.clear();
        // Another process may have written since: references must be to rows we know.
        self.written.clear();
        self.whole_to.clear();
        let start = std::time::Instant::now();
        let mut pause = Duration::from_millis(50);
        let mut client = loop {
            match self.config.connect(postgres::NoTls) {
                Ok(c) => break c,
                Err(e) if start.elapsed() < RECONNECT_PATIENCE && is_transient(&e) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(pg_error(&self.url, e)),
            }
        };
        // The claims held, taken again. The old connection's server process may still
        // be ending (and holding them) for a moment: two seconds for all of them, not
        // each, since every thread of this connection waits meanwhile. One another
        // process took meanwhile is not held any more: this process's appends of the
        // thread are refused from now on, and a claim asks Postgres again.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        let mut left: Vec<i64> = self.locks.keys().copied().collect();
        loop {
            left.retain(|key| {
                client
                    .query_one("SELECT pg_try_advisory_lock($1)", &[key])
                    .ok()
                    .and_then(|r| r.try_get::<_, bool>(0).ok())
                    != Some(true)
            });
            if left.is_empty() || std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for key in left {
            if let Some(thread) = self.locks.remove(&key) {
                self.unclaimed.insert(thread);
            }
        }
        self.client = Some(client);
        Ok(())
    }

    /// Begins a transaction of several calls (see `in_transaction`).
    fn begin(&mut self) -> Result<(), StoreError> {
        self.client()?
            .batch_execute("BEGIN")
            .map_err(|e| self.pg(e))?;
        self.in_transaction = true;
        Ok(())
    }

    /// Commits (or rolls back) what `begin` began.
    fn end(&mut self, commit: bool) -> Result<(), StoreError> {
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        // A COMMIT whose connection went is marked lost (`pg`), so the call is tried
        // again on a new one.
        let ended = self.client().map(|c| c.batch_execute(sql));
        self.in_transaction = false;
        let ended = match ended {
            Ok(done) => done.map_err(|e| self.pg(e)),
            Err(e) => Err(e),
        };
        if !commit || ended.is_err() {
            // A graph id the transaction added names no row once it is rolled back.
            self.graph_ids.clear();
            self.graphs.clear();
        }
        ended
    }

    /// A prepared statement, kept for the connection's life.
    fn prepared(&mut self, sql: &'static str) -> Result<postgres::Statement, StoreError> {
        // Connected first: a statement of a lost connection means nothing on the next.
        self.client()?;
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let statement = self.client()?.prepare(sql).map_err(|e| self.pg(e))?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    fn pg(&self, e: postgres::Error) -> StoreError {
        if connection_lost(&e) {
            self.broken.set(true);
        }
        pg_error(&self.url, e)
    }

    /// Whether the last failure lost the connection (a call is then tried again once,
    /// on a new one).
    fn lost(&self) -> bool {
        self.broken.get() || self.client.as_ref().is_some_and(|c| c.is_closed())
    }
}

/// An error that ends the connection: it broke, or the server ended it (an
/// administrator's command, a shutdown: SQLSTATE classes 08 and 57).
fn connection_lost(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => {
            let c = code.code();
            c.starts_with("08") || c.starts_with("57P")
        }
        // Not from the server: the connection's I/O failed.
        None => e.as_db_error().is_none() && std::error::Error::source(e).is_some(),
    }
}

/// A connection that failed because the server is not (yet, or again) there.
fn is_transient(e: &postgres::Error) -> bool {
    e.as_db_error().is_none_or(|db| {
        // The server is starting up or shutting down.
        db.code() == &postgres::error::SqlState::CANNOT_CONNECT_NOW
    }) && !matches!(e.code(), Some(c) if c == &postgres::error::SqlState::INVALID_PASSWORD)
        && !e.to_string().contains("authentication")
        && !e.to_string().contains("invalid connection string")
        && !e.to_string().contains("invalid configuration")
}

impl PostgresStore {
    /// `url` as messages show it: without its password.
    pub fn shown(url: &str) -> String {
        redact(url)
    }

    /// Connects to the database at `url` and makes its schema `switchyard` a store of
    /// this version (see `layout.rs`); a schema of another layout is refused unchanged.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let shown: Arc<str> = Arc::from(redact(url));
        let config: tokio_postgres::Config = url.parse().map_err(|e| pg_error(&shown, e))?;
        let sessions = postgres::Config::from(config.clone());
        let mut jobs = Vec::with_capacity(CONNECTIONS);
        for i in 0..CONNECTIONS {
            // The first connection makes or checks the layout before the others open.
            jobs.push(Self::connection(&sessions, &shown, i == 0)?);
        }
        Ok(PostgresStore {
            jobs,
            url: shown.clone(),
            held: Arc::default(),
            pool: pool::Pool::new(config.clone(), shown.clone(), POOLED)?,
            leases: pool::Pool::new(config.clone(), shown, 1)?,
            heard: Mutex::new(None),
            config,
        })
    }

    /// A connection on a thread of its own, and where to send it jobs. It is made on
    /// its thread too: `open` may be called from async code, where the client's own
    /// runtime cannot block.
    fn connection(
        config: &postgres::Config,
        shown: &Arc<str>,
        prepare: bool,
    ) -> Result<mpsc::Sender<Job>, StoreError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (opened, open_result) = mpsc::sync_channel(1);
        let (config, url) = (config.clone(), shown.clone());
        std::thread::Builder::new()
            .name("switchyard-postgres".into())
            .spawn(move || {
                let connected = config
                    .connect(postgres::NoTls)
                    .map_err(|e| pg_error(&url, e))
                    .and_then(|mut client| {
                        if prepare {
                            layout::prepare(&mut client, &url)?;
                        }
                        Ok(client)
                    });
                let client = match connected {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                let _ = opened.send(Ok(()));
                let mut session = Session {
                    config,
                    url,
                    client: Some(client),
                    statements: HashMap::new(),
                    graph_ids: HashMap::new(),
                    graphs: HashMap::new(),
                    written: Written::default(),
                    whole_to: WholeTo::default(),
                    locks: HashMap::new(),
                    broken: std::cell::Cell::new(false),
                    in_transaction: false,
                    retrying: false,
                    unclaimed: HashSet::new(),
                };
                // Ends when the store and its claims are dropped (the senders with them).
                for job in queue {
                    job(&mut session);
                }
            })
            .map_err(|e| StoreError::Postgres {
                url: shown.to_string(),
                message: format!("cannot start the connection's thread: {e}"),
            })?;
        open_result.recv().map_err(|_| StoreError::Postgres {
            url: shown.to_string(),
            message: "the connection's thread ended".into(),
        })??;
        Ok(jobs)
    }

    /// The connection a thread's (or a run's) calls go to: always the same one, so a
    /// thread's records are written in order, its claim is released where it was taken,
    /// and what a connection remembers of the thread's values stays true.
    fn session_of(&self, key: &str) -> &mpsc::Sender<Job> {
        // Any stable spread will do: the digest the claims use.
        let n = lock_key(key).unsigned_abs() % self.jobs.len() as u64;
        &self.jobs[n as usize]
    }

    /// Runs `f` on the first connection; see [`PostgresStore::call_on`].
    async fn call<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Session) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.call_on(&self.jobs[0], f).await
    }

    /// Runs `f` on the connection of `key` (see [`PostgresStore::session_of`]).
    async fn call_for<T: Send + 'static>(
        &self,
        key: &str,
        f: impl Fn(&mut Session) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.call_on(self.session_of(key), f).await
    }

    /// Runs `f` on a connection's thread and waits for its answer without holding a
    /// runtime thread; a call that lost the connection is made once more on a new one.
    async fn call_on<T: Send + 'static>(
        &self,
        jobs: &mpsc::Sender<Job>,
        f: impl Fn(&mut Session) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |s| {
            let mut result = f(s);
            if result.is_err() && s.lost() {
                s.retrying = true;
                result = f(s);
                s.retrying = false;
            }
            let _ = tx.send(result);
        });
        let gone = || StoreError::Postgres {
            url: self.url.to_string(),
            message: "the connection's thread is gone".into(),
        };
        jobs.send(job).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

impl PostgresStore {
    /// Claims `thread` with an advisory lock on its connection (see
    /// [`Checkpoints::claim`]).
    async fn claim_thread(&self, thread: &str) -> Result<Claim, StoreError> {
        let refused = |pid| StoreError::Claimed {
            thread: thread.to_string(),
            pid,
        };
        if !self
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(thread.to_string())
        {
            return Err(refused(std::process::id()));
        }
        let name = thread.to_string();
        let taken = self.call_for(thread, move |s| {
            let key = lock_key(&name);
            // A lost connection is made again first, taking its claims again: what
            // `locks` says after that is what this connection holds.
            s.client()?;
            // Held already when a lost connection made this call run again.
            let got = if s.locks.contains_key(&key) {
                true
            } else {
                let lock = s.prepared("SELECT pg_try_advisory_lock($1)")?;
                let row = s.client()?.query_one(&lock, &[&key]).map_err(|e| s.pg(e))?;
                col::<bool>(&row, 0, &s.url)?
            };
            if !got {
                let holder = s.prepared("SELECT pid FROM switchyard.claims WHERE thread = $1")?;
                let pid = s
                    .client()?
                    .query_opt(&holder, &[&name])
                    .map_err(|e| s.pg(e))?
                    .map_or(0, |r| r.get::<_, i64>(0));
                return Ok(Some(u32::try_from(pid).unwrap_or(0)));
            }
            s.locks.insert(key, name.clone());
            s.unclaimed.remove(&name);
            // What this process remembers of the thread may be stale: another process
            // may have run it since.
            s.written.forget(&name);
            let note = s.prepared(
                "INSERT INTO switchyard.claims (thread, holder, pid, since_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (thread) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, since_ms = excluded.since_ms",
            )?;
            let holder = format!(
                "{}:{}",
                std::env::var("HOSTNAME").unwrap_or_default(),
                std::process::id()
            );
            s.client()?
                .execute(
                    &note,
                    &[&name, &holder, &i64::from(std::process::id()), &now_ms()],
                )
                .map_err(|e| s.pg(e))?;
            Ok(None)
        })
        .await;
        let unheld = || {
            self.held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(thread);
        };
        match taken {
            Ok(None) => Ok(Claim::holding(PgClaim {
                jobs: self.session_of(thread).clone(),
                held: self.held.clone(),
                thread: thread.to_string(),
            })),
            Ok(Some(pid)) => {
                unheld();
                Err(refused(pid))
            }
            Err(e) => {
                unheld();
                Err(e)
            }
        }
    }
}

/// The advisory lock key of a thread's claim.
fn lock_key(thread: &str) -> i64 {
    let digest = Sha256::digest(thread.as_bytes());
    i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// A claim: the advisory lock, released when dropped (or when the connection goes, if
/// the process dies).
struct PgClaim {
    jobs: mpsc::Sender<Job>,
    held: Arc<Mutex<HashSet<String>>>,
    thread: String,
}

impl PgClaim {
    /// Sends the release to the claim's connection: `done` hears when it is made.
    fn send_release(&mut self, done: Option<tokio::sync::oneshot::Sender<()>>) -> bool {
        let thread = std::mem::take(&mut self.thread);
        if thread.is_empty() {
            return false;
        }
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&thread);
        self.jobs
            .send(Box::new(move |s: &mut Session| {
                let key = lock_key(&thread);
                s.locks.remove(&key);
                s.unclaimed.remove(&thread);
                if let Ok(client) = s.client() {
                    let _ = client.execute(
                        "DELETE FROM switchyard.claims WHERE thread = $1 AND pid = $2",
                        &[&thread, &i64::from(std::process::id())],
                    );
                    let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&key]);
                }
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }))
            .is_ok()
    }
}

#[async_trait]
impl super::Held for PgClaim {
    /// Waited for, so that another process may claim the thread as soon as this
    /// returns, as with SQLite's locks.
    async fn release(mut self: Box<Self>) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.send_release(Some(done)) {
            let _ = wait.await;
        }
    }
}

impl Drop for PgClaim {
    /// A claim dropped unreleased (a run's task cancelled) is released without being
    /// waited for: the thread's later calls go to the same connection, after it.
    fn drop(&mut self) {
        self.send_release(None);
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            redact("postgres://me:secret@db:5432/x"),
            "postgres://me:***@db:5432/x"
        );
        assert_eq!(redact("postgres://me@db/x"), "postgres://me@db/x");
        assert_eq!(
            redact("postgresql:///x?host=/tmp/s"),
            "postgresql:///x?host=/tmp/s"
        );
        assert_eq!(
            redact("postgresql://me@/x?password=p%40ss&host=/tmp/s"),
            "postgresql://me@/x?password=***&host=/tmp/s"
        );
        assert_eq!(redact("postgres://[bad"), "postgres://[bad");
    }
}
