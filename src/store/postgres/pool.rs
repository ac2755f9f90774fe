//! The store's connections: a pool of async connections (tokio-postgres, pooled by
//! deadpool-postgres). No call needs a connection of its own (a claim is a row, not a
//! lock a connection holds), so any free connection serves any call, and a commit's
//! wait holds a connection, never a runtime thread.

use super::{RECONNECT_PATIENCE, connection_lost, is_transient, pg_error};
use crate::store::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Object, PoolError, RecyclingMethod, Runtime};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a call waits for a free connection when all are busy before it fails: the
/// pool's back-pressure.
const WAIT: Duration = Duration::from_secs(10);

/// How long making a connection may take.
const CONNECT: Duration = Duration::from_secs(10);

/// Why a pooled call failed: what Postgres said (a lost connection is tried again), or
/// what the store made of its answer.
pub(super) enum Failure {
    Pg(tokio_postgres::Error),
    Store(StoreError),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Pg(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

#[derive(Clone)]
pub(super) struct Pool {
    pool: deadpool_postgres::Pool,
    url: Arc<str>,
    size: usize,
}

impl Pool {
    /// Up to `size` connections, made when first needed (so none is made in a process
    /// that never calls).
    pub(super) fn new(
        config: tokio_postgres::Config,
        url: Arc<str>,
        size: usize,
    ) -> Result<Self, StoreError> {
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                // A connection whose socket closed (a restart, a cut) is not handed out.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(WAIT))
            .create_timeout(Some(CONNECT))
            .build()
            .map_err(|e| StoreError::Postgres {
                url: url.to_string(),
                message: format!("cannot make the connection pool: {e}"),
            })?;
        Ok(Pool { pool, url, size })
    }

    /// A connection: a free one, or a new one while fewer than `size` are open; else the
    /// call waits its turn, up to [`WAIT`]. A server that is not there (restarting) is
    /// tried again for [`RECONNECT_PATIENCE`].
    async fn get(&self) -> Result<Object, StoreError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(50);
        let fail = |message: String| StoreError::Postgres {
            url: self.url.to_string(),
            message,
        };
        loop {
            let again = match self.pool.get().await {
                Ok(c) => return Ok(c),
                Err(PoolError::Backend(e)) if is_transient(&e) => pg_error(&self.url, e),
                Err(PoolError::Backend(e)) => return Err(pg_error(&self.url, e)),
                Err(PoolError::Timeout(deadpool_postgres::TimeoutType::Wait)) => {
                    return Err(fail(format!(
                        "all {} connections of the pool were busy for {} s: the database answers more slowly than calls come",
                        self.size,
                        WAIT.as_secs()
                    )));
                }
                Err(PoolError::Timeout(_)) => fail(format!(
                    "no connection was made within {} s",
                    CONNECT.as_secs()
                )),
                Err(e) => return Err(fail(e.to_string())),
            };
            if start.elapsed() >= RECONNECT_PATIENCE {
                return Err(again);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// What `call` gives on a pooled connection; a call whose connection was lost (a
    /// restart, a cut) is made again on another. Every idle connection may have been
    /// lost with it (a cut ends them all, and the pool learns so only by using them),
    /// so it is tried on up to one more than the pool holds.
    pub(super) async fn run<T, F, Fut>(&self, call: F) -> Result<T, StoreError>
    where
        F: Fn(Object) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut attempts = 0;
        loop {
            attempts += 1;
            match call(self.get().await?).await {
                Ok(t) => return Ok(t),
                Err(Failure::Store(e)) => return Err(e),
                Err(Failure::Pg(e)) if attempts <= self.size && connection_lost(&e) => {}
                Err(Failure::Pg(e)) => return Err(pg_error(&self.url, e)),
            }
        }
    }
}
