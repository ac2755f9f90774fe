//! [`ToolPool`]: each thread's MCP client, kept across its pauses.
//!
//! The command line starts a thread's servers at each run and stops them when it ends
//! or pauses, so a browser loses its page (and a form's unsent text) at every
//! confirmation. Here the servers belong to the thread: a paused thread keeps them,
//! and the next run of the thread (its resume) finds them as they were. They stop when
//! the thread finishes, when it has been idle for `idle`, when the live sessions of
//! all threads pass `max_servers` (the thread unused longest goes first), or when the
//! host shuts down. A stopped server starts again, fresh, on the thread's next use.

use super::lock;
use crate::graph::Graph;
use crate::mcp::{BlobStore, McpClient};
use crate::tool::ToolClient;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

#[derive(Clone)]
pub(super) struct ToolPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    blob_dir: PathBuf,
    idle: Duration,
    max_servers: usize,
    threads: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    client: Arc<McpClient>,
    /// The graph version the client was made for: its servers as that version
    /// declares them.
    graph_hash: String,
    last_used: Instant,
    /// Runs using the client now.
    busy: usize,
}

impl ToolPool {
    pub(super) fn new(blob_dir: PathBuf, idle: Duration, max_servers: usize) -> Self {
        ToolPool {
            inner: Arc::new(PoolInner {
                blob_dir,
                idle,
                max_servers: max_servers.max(1),
                threads: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A blob MCP servers' results were stored as (a screenshot), by its reference.
    pub(super) fn blob(&self, reference: &str) -> Option<(Vec<u8>, &'static str)> {
        BlobStore::new(self.inner.blob_dir.clone()).get(reference)
    }

    /// The client of `thread` for a run of `graph`, made when the thread has none (or
    /// had one for another graph version, which is stopped). Servers over the cap are
    /// stopped first, the idle thread unused longest first.
    pub(super) async fn checkout(&self, thread: &str, graph: &Graph) -> Arc<McpClient> {
        self.make_room(thread).await;
        let stale = {
            let mut threads = lock(&self.inner.threads);
            match threads.get_mut(thread) {
                Some(e) if e.graph_hash == graph.hash => {
                    e.busy += 1;
                    e.last_used = Instant::now();
                    return e.client.clone();
                }
                _ => {
                    let client = Arc::new(McpClient::new(
                        &graph.root,
                        BlobStore::new(self.inner.blob_dir.clone()),
                    ));
                    let old = threads.insert(
                        thread.to_string(),
                        Entry {
                            client: client.clone(),
                            graph_hash: graph.hash.clone(),
                            last_used: Instant::now(),
                            busy: 1,
                        },
                    );
                    (client, old)
                }
            }
        };
        let (client, old) = stale;
        if let Some(old) = old {
            old.client.shutdown().await;
        }
        client
    }

    /// A run of `thread` is over; a finished thread's servers stop now, a paused one's
    /// stay.
    pub(super) async fn checkin(&self, thread: &str, finished: bool) {
        let stop = {
            let mut threads = lock(&self.inner.threads);
            let Some(e) = threads.get_mut(thread) else {
                return;
            };
            e.busy = e.busy.saturating_sub(1);
            e.last_used = Instant::now();
            if finished && e.busy == 0 {
                threads.remove(thread).map(|e| e.client)
            } else {
                None
            }
        };
        if let Some(client) = stop {
            client.set_events(None);
            client.shutdown().await;
        }
    }

    /// Stops the servers of idle threads until there is room for one more session.
    async fn make_room(&self, keep: &str) {
        loop {
            let clients: Vec<(String, Arc<McpClient>, Instant, usize)> = lock(&self.inner.threads)
                .iter()
                .map(|(t, e)| (t.clone(), e.client.clone(), e.last_used, e.busy))
                .collect();
            let mut live = 0;
            for (_, c, _, _) in &clients {
                live += c.live_servers().await;
            }
            if live < self.inner.max_servers {
                return;
            }
            let victim = clients
                .iter()
                .filter(|(t, _, _, busy)| *busy == 0 && t != keep)
                .min_by_key(|(_, _, used, _)| *used)
                .map(|(t, _, _, _)| t.clone());
            // Every server belongs to a running thread: go over the cap rather than
            // stop a server in the middle of a call.
            let Some(victim) = victim else { return };
            // Taken by a run meanwhile: look again.
            self.stop_if(&victim, |e| e.busy == 0).await;
        }
    }

    /// Stops a thread's servers unless a run uses them (a run's own stop is its end).
    pub(super) async fn stop_thread(&self, thread: &str) {
        self.stop_if(thread, |e| e.busy == 0).await;
    }

    /// Stops a thread's servers whoever uses them: after a run that cannot check them
    /// in (it panicked).
    pub(super) async fn stop_now(&self, thread: &str) {
        self.stop_if(thread, |_| true).await;
    }

    /// Stops a thread's servers if `when` holds of its entry now, under the lock: an
    /// entry a run checked out since it was chosen is left alone. Whether it stopped.
    async fn stop_if(&self, thread: &str, when: impl Fn(&Entry) -> bool) -> bool {
        let client = {
            let mut threads = lock(&self.inner.threads);
            match threads.get(thread) {
                Some(e) if when(e) => threads.remove(thread).map(|e| e.client),
                _ => None,
            }
        };
        let Some(client) = client else {
            return false;
        };
        client.set_events(None);
        client.shutdown().await;
        true
    }

    /// Stops the servers of threads idle longer than the pool's `idle`, now and then,
    /// for as long as the pool exists.
    pub(super) fn spawn_reaper(&self) {
        let weak: Weak<PoolInner> = Arc::downgrade(&self.inner);
        let every = (self.inner.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(inner) = weak.upgrade() else { return };
                let idle: Vec<String> = lock(&inner.threads)
                    .iter()
                    .filter(|(_, e)| e.busy == 0 && e.last_used.elapsed() >= inner.idle)
                    .map(|(t, _)| t.clone())
                    .collect();
                let idle_for = inner.idle;
                let pool = ToolPool { inner };
                for thread in idle {
                    pool.stop_if(&thread, |e| {
                        e.busy == 0 && e.last_used.elapsed() >= idle_for
                    })
                    .await;
                }
            }
        });
    }

    /// Stops every server of every thread.
    pub(super) async fn shutdown_all(&self) {
        let all: Vec<Arc<McpClient>> = lock(&self.inner.threads)
            .drain()
            .map(|(_, e)| e.client)
            .collect();
        for client in all {
            client.set_events(None);
            client.shutdown().await;
        }
    }
}
