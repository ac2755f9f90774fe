//! Checkpoints in a Postgres database, shared by every process that opens it: the same
//! records, snapshots, LLM cache and catalog as the SQLite store (`layout.rs` has the
//! tables, `records.rs` checkpoint and snapshot rows, `catalog.rs` the cache and the
//! server's catalog, `queue.rs` the runs shared by servers), and claims that hold
//! across machines (`claims.rs`: lease rows with fencing tokens).
//!
//! Every call goes through a pool of async connections (`pool.rs`): none needs a
//! connection of its own, since a claim is a row rather than a lock a connection
//! holds, and what this process remembers of the threads it writes (to share large
//! values, to count a resume's records once) is kept here, not per connection.

mod assistants;
mod catalog;
mod claims;
mod crons;
mod items;
mod layout;
mod pool;
mod queue;
mod records;

use super::StoreError;
use super::rows::{WholeTo, Written};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A graph file and its hash.
type GraphKey = (Arc<str>, Arc<str>);

/// Checkpoints in Postgres (`postgres://...` or `postgresql://...`, any form
/// libpq-style URLs take, a Unix socket directory as `?host=/path`).
pub struct PostgresStore {
    /// The URL without its password, for messages.
    url: Arc<str>,
    /// The connections of every call but the heartbeats'.
    pool: pool::Pool,
    /// Connections for lease renewals (runs' and claims') alone: a heartbeat waits
    /// behind no other call, so a busy process keeps its leases.
    leases: pool::Pool,
    /// For `wait_for_runs`: the listening connection's news, made on first use.
    heard: Mutex<Option<Arc<queue::Heard>>>,
    config: tokio_postgres::Config,
    /// What this process remembers of the database.
    memory: Arc<Mutex<Memory>>,
    /// The threads this process holds the claim of.
    claims: Arc<claims::Held>,
    /// This process's presence in the database (see `claims.rs`), made on first claim.
    presence: tokio::sync::OnceCell<claims::Presence>,
    /// How long a claim lasts unless renewed (see `claims.rs`).
    claim_lease: Duration,
}

/// What this process remembers of the database, to spare reads and bytes: kept only
/// while true (forgotten for a thread another process may write meanwhile).
#[derive(Default)]
struct Memory {
    graph_ids: HashMap<GraphKey, i64>,
    graphs: HashMap<i64, GraphKey>,
    written: Written,
    /// See [`WholeTo`].
    whole_to: WholeTo,
}

/// Connections, at most, in the pool of every call but the heartbeats'.
const POOLED: usize = 8;

/// How long a lost connection is tried again before a call fails: long enough for a
/// Postgres restart.
const RECONNECT_PATIENCE: Duration = Duration::from_secs(30);

/// How long a thread's claim lasts without renewal, unless `--run-lease` says
/// otherwise (see [`PostgresStore::with_claim_lease`]).
const CLAIM_LEASE: Duration = Duration::from_secs(10);

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
pub(super) fn pg_error(url: &str, e: tokio_postgres::Error) -> StoreError {
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
pub(super) fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    i: usize,
    url: &str,
) -> Result<T, StoreError> {
    row.try_get(i).map_err(|e| pg_error(url, e))
}

/// An error that ends the connection: it broke, or the server ended it (an
/// administrator's command, a shutdown: SQLSTATE classes 08 and 57).
fn connection_lost(e: &tokio_postgres::Error) -> bool {
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
fn is_transient(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_none_or(|db| {
        // The server is starting up or shutting down.
        db.code() == &tokio_postgres::error::SqlState::CANNOT_CONNECT_NOW
    }) && !matches!(e.code(), Some(c) if c == &tokio_postgres::error::SqlState::INVALID_PASSWORD)
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
        layout::prepare(&config, &shown)?;
        Ok(PostgresStore {
            url: shown.clone(),
            pool: pool::Pool::new(config.clone(), shown.clone(), POOLED)?,
            leases: pool::Pool::new(config.clone(), shown, 2)?,
            heard: Mutex::new(None),
            config,
            memory: Arc::default(),
            claims: Arc::default(),
            presence: tokio::sync::OnceCell::new(),
            claim_lease: CLAIM_LEASE,
        })
    }

    /// Claims of threads last `lease` unless renewed: a process stopped (or cut off
    /// from the database) for longer loses them to any process that claims the thread
    /// after. The server passes its `--run-lease`, so a run and its thread are taken
    /// over together.
    #[must_use]
    pub fn with_claim_lease(mut self, lease: Duration) -> Self {
        self.claim_lease = lease.max(Duration::from_millis(100));
        self
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
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
