//! Connections that only read, so that the catalog's and the cache's reads go on beside
//! each other and beside a write: under WAL a reader sees the last commit and waits for
//! no writer. Writes stay on the one writing connection (`Inner`), as SQLite allows one
//! writer at a time anyway.

use super::{BUSY_TIMEOUT, GraphKey, records};
use crate::store::StoreError;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Idle readers kept open; more are opened while more reads go on at once.
const KEPT: usize = 4;

pub(super) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// Graph ids read, with their file and hash: an id in a committed row never
    /// changes meaning, so the readers share what they learnt.
    graphs: Mutex<HashMap<i64, GraphKey>>,
}

impl Readers {
    pub(super) fn new(path: &Path) -> Self {
        Readers {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
            graphs: Mutex::new(HashMap::new()),
        }
    }

    /// The graph file and hash of an id, read on `conn` the first time.
    pub(super) fn graph(
        &self,
        conn: &Connection,
        thread: &str,
        id: i64,
    ) -> Result<GraphKey, StoreError> {
        if let Some(g) = self
            .graphs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
        {
            return Ok(g.clone());
        }
        let g = records::graph_on(conn, thread, id)?;
        self.graphs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, g.clone());
        Ok(g)
    }

    /// What `f` reads on an idle reader, or on a new one; `None` when none can be
    /// opened (the caller then reads on the writing connection).
    pub(super) fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Option<Result<T, StoreError>> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => open(&self.path).ok()?,
        };
        let read = f(&conn);
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < KEPT {
            idle.push(conn);
        }
        Some(read)
    }
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use crate::store::{Catalog, SqliteStore, ThreadRecord};
    use std::time::Duration;

    /// The writing connection held (as by a long write) while the catalog is read on
    /// other threads at once: they answer, with what was last committed.
    #[test]
    fn reads_go_on_while_the_writer_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let thread = ThreadRecord {
            id: "t".into(),
            created_ms: 1,
            updated_ms: 2,
            metadata: serde_json::json!({"who": "me"}),
        };
        runtime.block_on(store.put_thread(&thread)).unwrap();
        let writer = store.shared.inner.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            for _ in 0..3 {
                let (store, tx) = (&store, tx.clone());
                s.spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    let _ = tx.send(runtime.block_on(store.get_thread("t")).unwrap());
                });
            }
            let reads: Vec<_> = (0..3)
                .map(|_| rx.recv_timeout(Duration::from_secs(10)).ok().flatten())
                .collect();
            // Let go before asserting: the scope waits for its threads.
            drop(writer);
            assert_eq!(
                reads,
                [Some(thread.clone()), Some(thread.clone()), Some(thread)]
            );
        });
        // The readers close before the writer, which ends the WAL: nothing is left
        // beside the file (a read-only connection closing last would leave both).
        drop(store);
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["store.db"]);
    }
}
