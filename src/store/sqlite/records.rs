//! Checkpoint records and snapshots as rows (their writes' text is `rows.rs`'s, which
//! the Postgres store shares), LZ4-compressed when the store compresses. A resume's
//! read of them is `resume.rs`.

use super::{Inner, SqliteStore, patiently};
use crate::store::rows::{
    Fresh, Raw, check_next, corrupt, count, first_seq, full_value, int, missing, parse_column,
    parse_pending, parse_writes, pending_and_error, resolve,
};
use crate::store::{Checkpoint, Snapshot, Source, Status, StoreError};
use crate::store::{Checkpoints, Claim, Stored};
use async_trait::async_trait;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value as Json;
use std::sync::Arc;

pub(super) const COLUMNS: &str = "seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent, usage";

/// Text at least this long is compressed when the store compresses.
const COMPRESS_BYTES: usize = 1024;
/// The most a compressed value may unpack to: a corrupt length is an error, not an
/// allocation of gigabytes.
const MAX_UNPACKED: usize = 1 << 30;

/// `text` as it is stored: LZ4-compressed (a blob) when asked, long enough, and smaller
/// for it; as text otherwise.
fn pack(text: String, compress: bool) -> rusqlite::types::Value {
    if compress && text.len() >= COMPRESS_BYTES {
        let packed = lz4_flex::compress_prepend_size(text.as_bytes());
        if packed.len() < text.len() {
            return rusqlite::types::Value::Blob(packed);
        }
    }
    rusqlite::types::Value::Text(text)
}

/// The text of a column [`pack`] wrote.
pub(super) fn unpack(thread: &str, value: ValueRef<'_>, what: &str) -> Result<String, StoreError> {
    let bytes = match value {
        ValueRef::Text(t) => t.to_vec(),
        ValueRef::Blob(b) => {
            let size = b
                .get(..4)
                .map(|n| u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize);
            if size.is_none_or(|n| n > MAX_UNPACKED) {
                return Err(corrupt(
                    thread,
                    format!("`{what}` is not a compressed value"),
                ));
            }
            lz4_flex::decompress_size_prepended(b)
                .map_err(|e| corrupt(thread, format!("`{what}`: {e}")))?
        }
        _ => return Err(corrupt(thread, format!("`{what}` is not text"))),
    };
    String::from_utf8(bytes).map_err(|_| corrupt(thread, format!("`{what}` is not UTF-8")))
}

/// A row read: the record without its writes, its writes, its graph's id.
pub(super) type Row = (Checkpoint, Vec<(Arc<str>, Raw)>, i64);

impl Inner {
    /// The id of a graph file at a hash, added to `graphs` when new.
    fn graph_id(&mut self, path: &Arc<str>, hash: &Arc<str>) -> Result<i64, StoreError> {
        if let Some(id) = self.graph_ids.get(&(path.clone(), hash.clone())) {
            return Ok(*id);
        }
        self.conn.execute(
            "INSERT OR IGNORE INTO graphs (path, hash) VALUES (?1, ?2)",
            params![&**path, &**hash],
        )?;
        let id: i64 = self.conn.query_row(
            "SELECT id FROM graphs WHERE path = ?1 AND hash = ?2",
            params![&**path, &**hash],
            |r| r.get(0),
        )?;
        self.graph_ids.insert((path.clone(), hash.clone()), id);
        self.graphs.insert(id, (path.clone(), hash.clone()));
        Ok(id)
    }

    /// The graph file and hash of an id.
    pub(super) fn graph(
        &mut self,
        thread: &str,
        id: i64,
    ) -> Result<(Arc<str>, Arc<str>), StoreError> {
        if let Some(g) = self.graphs.get(&id) {
            return Ok(g.clone());
        }
        let g = graph_on(&self.conn, thread, id)?;
        self.graph_ids.insert(g.clone(), id);
        self.graphs.insert(id, g.clone());
        Ok(g)
    }

    /// Forgets what the thread wrote: its records may change under another process or
    /// a rollback, and a reference must name a record that holds its value.
    pub(super) fn forget(&mut self, thread: &str) {
        self.written.forget(thread);
    }

    /// Inserts one record, sharing large values the thread wrote before when `share`.
    pub(super) fn insert(&mut self, r: &Checkpoint, share: bool) -> Result<(), StoreError> {
        let fresh = if r.seq == 0 {
            // A thread's first record: a mark or a snapshot left by a thread of the same
            // name removed by hand is not this one's. Taken away in the insert's
            // transaction, so that a retry after a failure finds no record of its own.
            let outermost = self.conn.is_autocommit();
            self.conn.execute_batch("SAVEPOINT first_record")?;
            let done = (|| {
                if self.marks {
                    self.conn
                        .prepare_cached("DELETE FROM recount WHERE thread = ?1")?
                        .execute([&*r.thread])?;
                }
                self.conn
                    .prepare_cached("DELETE FROM snapshots WHERE thread = ?1")?
                    .execute([&*r.thread])?;
                self.insert_row(r, share)
            })();
            let done = done.and_then(|fresh| {
                self.conn.execute_batch("RELEASE first_record")?;
                Ok(fresh)
            });
            if done.is_err() {
                let _ = self
                    .conn
                    .execute_batch("ROLLBACK TO first_record; RELEASE first_record");
                // A graph this insert added to `graphs` is gone with it.
                self.forget_graphs();
                // The savepoint began the transaction and could not end it (its commit
                // failed): ended here, or a retry's savepoint would nest inside it and
                // its release commit nothing.
                if outermost && !self.conn.is_autocommit() {
                    self.roll_back();
                }
            }
            done?
        } else {
            self.insert_row(r, share)?
        };
        if share {
            self.written.remember(&r.thread, fresh);
        }
        Ok(())
    }

    /// The `INSERT` of [`Inner::insert`]: the values it wrote whole, for a later
    /// record to name.
    fn insert_row(&mut self, r: &Checkpoint, share: bool) -> Result<Fresh, StoreError> {
        let graph = self.graph_id(&r.graph, &r.graph_hash)?;
        let mut fresh = Vec::new();
        let writes = self.written.encode(
            &r.thread,
            share,
            r.writes.iter().map(|w| (&*w.field, &*w.value)),
            r.seq,
            &mut fresh,
        );
        let (pending, error) = pending_and_error(r)?;
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO checkpoints (thread, seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent, usage)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
        )?;
        let done = stmt.execute(params![
            &*r.thread,
            int(r.seq),
            int(r.run),
            int(r.step),
            r.node.as_deref(),
            r.next.as_deref(),
            pack(writes, self.compress),
            r.status.name(),
            pending,
            r.outcome,
            graph,
            int(r.tokens),
            int(r.elapsed_ms),
            int(r.at_ms),
            r.limited,
            error,
            r.source.name(),
            r.parent.map(int),
            r.usage.column(),
        ]);
        match done {
            Ok(_) => Ok(fresh),
            // Another process appended this thread's next record first: two runs of
            // one thread at once. The later one stops rather than interleave.
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(StoreError::Conflict {
                    thread: r.thread.to_string(),
                    seq: r.seq,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The records of `thread` with `seq` from `from` on (all of them from 0, the
    /// latest only with `last_only`), checked for gaps, references resolved.
    pub(super) fn select(
        &mut self,
        thread: &str,
        from: u64,
        last_only: bool,
    ) -> Result<Vec<Checkpoint>, StoreError> {
        let Inner {
            conn,
            graphs,
            graph_ids,
            ..
        } = self;
        select(conn, thread, from, last_only, &mut |id| {
            if let Some(g) = graphs.get(&id) {
                return Ok(g.clone());
            }
            let g = graph_on(conn, thread, id)?;
            graph_ids.insert(g.clone(), id);
            graphs.insert(id, g.clone());
            Ok(g)
        })
    }

    /// The value `field` got in record `seq` of `thread`, read from that row.
    pub(super) fn value_at(
        &mut self,
        thread: &str,
        seq: u64,
        field: &str,
    ) -> Result<Arc<Json>, StoreError> {
        value_at(&self.conn, thread, seq, field)
    }

    pub(super) fn put_snapshot(&mut self, s: &Snapshot) -> Result<(), StoreError> {
        let graph = self.graph_id(&s.graph, &s.graph_hash)?;
        // Shared with the records: a snapshot names the record of a large value
        // rather than holding it again. Nothing is remembered from it.
        let state = self.written.encode(
            &s.thread,
            true,
            s.values.iter().map(|(f, v)| (&**f, &**v)),
            s.seq,
            &mut Vec::new(),
        );
        self.conn.execute(
            "INSERT OR REPLACE INTO snapshots (thread, seq, graph, state) VALUES (?1, ?2, ?3, ?4)",
            params![&*s.thread, int(s.seq), graph, pack(state, self.compress)],
        )?;
        Ok(())
    }
}

/// The graph file and hash of an id, read from `graphs`.
pub(super) fn graph_on(
    conn: &Connection,
    thread: &str,
    id: i64,
) -> Result<(Arc<str>, Arc<str>), StoreError> {
    let (path, hash): (String, String) = conn
        .query_row("SELECT path, hash FROM graphs WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?
        .ok_or_else(|| corrupt(thread, format!("graph {id} is not in `graphs`")))?;
    Ok((Arc::from(path), Arc::from(hash)))
}

/// The records of `thread` with `seq` from `from` on (all of them from 0, the latest
/// only with `last_only`), checked for gaps, references resolved, read on `conn` (the
/// writer's or a reader's); `graph` names a graph id's file and hash.
pub(super) fn select(
    conn: &Connection,
    thread: &str,
    from: u64,
    last_only: bool,
    graph: &mut dyn FnMut(i64) -> Result<(Arc<str>, Arc<str>), StoreError>,
) -> Result<Vec<Checkpoint>, StoreError> {
    let thread_arc: Arc<str> = Arc::from(thread);
    // From 0 every row is read, a negative `seq` included, so that it is reported.
    let sql = match (last_only, from) {
        (true, _) => format!(
            "SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 AND ?2 = ?2 ORDER BY seq DESC LIMIT 1"
        ),
        (false, 0) => {
            format!("SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 AND ?2 = ?2 ORDER BY seq")
        }
        (false, _) => format!(
            "SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 AND seq >= ?2 ORDER BY seq"
        ),
    };
    let rows: Vec<Row> = {
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![thread, int(from)], |row| {
            Ok(decode(&thread_arc, row, 0))
        })?;
        rows.map(|r| r?).collect::<Result<_, _>>()?
    };
    let mut out: Vec<Checkpoint> = Vec::with_capacity(rows.len());
    let mut from = from;
    for (mut record, raw, id) in rows {
        if !last_only {
            from = first_seq(&record, from, out.len());
            check_next(thread, record.seq, from, out.len())?;
        }
        (record.graph, record.graph_hash) = graph(id)?;
        record.writes = resolve(raw, &out, from, |seq, field| {
            value_at(conn, thread, seq, field)
        })?;
        out.push(record);
    }
    Ok(out)
}

/// The value `field` got in record `seq` of `thread`, read from that row.
fn value_at(
    conn: &Connection,
    thread: &str,
    seq: u64,
    field: &str,
) -> Result<Arc<Json>, StoreError> {
    let text = writes_of(conn, thread, seq, field)?;
    full_value(thread, &text, seq, field)
}

/// The writes of record `seq` of `thread`, which holds the value of `field`.
pub(super) fn writes_of(
    conn: &Connection,
    thread: &str,
    seq: u64,
    field: &str,
) -> Result<String, StoreError> {
    conn.prepare_cached("SELECT writes FROM checkpoints WHERE thread = ?1 AND seq = ?2")?
        .query_row(params![thread, int(seq)], |r| {
            Ok(unpack(thread, r.get_ref(0)?, "writes"))
        })
        .optional()?
        .ok_or_else(|| missing(thread, seq, field))?
}

/// One row of `COLUMNS` as a checkpoint (its graph and writes to be filled in); a value
/// that cannot be one (a negative count, a status or JSON this version does not read)
/// makes the record corrupt.
pub(super) fn decode(
    thread: &Arc<str>,
    row: &rusqlite::Row<'_>,
    at: usize,
) -> Result<Row, StoreError> {
    let count =
        |i: usize, name: &str| -> Result<u64, StoreError> { count(thread, row.get(at + i)?, name) };
    let writes = unpack(thread, row.get_ref(at + 5)?, "writes")?;
    let writes = parse_writes(thread, &writes, "writes")?;
    let pending = parse_pending(thread, row.get(at + 7)?)?;
    let error: Option<Json> = parse_column(thread, row.get(at + 14)?, "error")?;
    let status: String = row.get(at + 6)?;
    let source: String = row.get(at + 15)?;
    let record = Checkpoint {
        thread: thread.clone(),
        seq: count(0, "seq")?,
        run: count(1, "run")?,
        step: count(2, "step")?,
        node: row.get::<_, Option<String>>(at + 3)?.map(Arc::from),
        next: row.get::<_, Option<String>>(at + 4)?.map(Arc::from),
        writes: Vec::new(),
        status: Status::parse(&status)
            .ok_or_else(|| corrupt(thread, format!("unknown status `{status}`")))?,
        pending: pending.map(Box::new),
        outcome: row.get(at + 8)?,
        graph: Arc::from(""),
        graph_hash: Arc::from(""),
        tokens: count(10, "tokens")?,
        usage: crate::store::Usage::from_column(
            thread,
            row.get::<_, Option<String>>(at + 17)?.as_deref(),
        )?,
        elapsed_ms: count(11, "elapsed_ms")?,
        at_ms: count(12, "at_ms")?,
        limited: row.get(at + 13)?,
        error: error.map(Box::new),
        source: Source::parse(&source)
            .ok_or_else(|| corrupt(thread, format!("unknown source `{source}`")))?,
        parent: match row.get::<_, Option<i64>>(at + 16)? {
            Some(p) => Some(crate::store::rows::count(thread, p, "parent")?),
            None => None,
        },
    };
    Ok((record, writes, row.get(at + 9)?))
}

/// Removes a thread's records from `seq` on, and its snapshot if it is of one of them.
pub(super) fn truncate(conn: &Connection, thread: &str, seq: u64) -> Result<(), StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    own_removal(&tx, thread, || {
        tx.execute(
            "DELETE FROM checkpoints WHERE thread = ?1 AND seq >= ?2",
            params![thread, int(seq)],
        )
    })?;
    tx.execute(
        "DELETE FROM snapshots WHERE thread = ?1 AND seq >= ?2",
        params![thread, int(seq)],
    )?;
    tx.commit()?;
    Ok(())
}

/// Runs `remove`, Switchyard's own removal of some of a thread's records (from its
/// end, or up to a pruned thread's base), inside a transaction, taking back the mark
/// its deletes leave (`layout::RECOUNT`): unless the thread was marked before, a
/// record removed by hand being no less missing after.
fn own_removal<T>(
    conn: &Connection,
    thread: &str,
    remove: impl FnOnce() -> Result<T, rusqlite::Error>,
) -> Result<T, StoreError> {
    let marked: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM recount WHERE thread = ?1)")?
        .query_row([thread], |r| r.get(0))?;
    let done = remove()?;
    if !marked {
        conn.prepare_cached("DELETE FROM recount WHERE thread = ?1")?
            .execute([thread])?;
    }
    Ok(done)
}

impl Inner {
    /// See [`crate::store::Checkpoints::prune`].
    pub(super) fn prune(&mut self, base: &Checkpoint) -> Result<u64, StoreError> {
        self.forget(&base.thread);
        let thread = &*base.thread;
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let done = (|| {
            let latest: Option<i64> = self.conn.query_row(
                "SELECT max(seq) FROM checkpoints WHERE thread = ?1",
                [thread],
                |r| r.get(0),
            )?;
            if latest != Some(int(base.seq)) {
                return Err(StoreError::Conflict {
                    thread: thread.to_string(),
                    seq: base.seq,
                });
            }
            let gone = own_removal(&self.conn, thread, || {
                self.conn.execute(
                    "DELETE FROM checkpoints WHERE thread = ?1 AND seq <= ?2",
                    params![thread, int(base.seq)],
                )
            })?;
            self.conn
                .execute("DELETE FROM snapshots WHERE thread = ?1", [thread])?;
            // Whole values: the rows a reference would name are gone.
            self.insert(base, false)?;
            Ok(gone as u64 - 1)
        })();
        let done = done.and_then(|n| {
            self.conn.execute_batch("COMMIT")?;
            Ok(n)
        });
        if done.is_err() {
            self.roll_back();
        }
        done
    }

    /// Ends the open transaction, taking back what it wrote.
    pub(super) fn roll_back(&mut self) {
        let _ = self.conn.execute_batch("ROLLBACK");
        self.forget_graphs();
    }

    /// Forgets the graph ids this connection knows: one it added in a transaction
    /// rolled back names no row, or another graph's, once the id is used again.
    fn forget_graphs(&mut self) {
        self.graph_ids.clear();
        self.graphs.clear();
    }
}

/// See [`crate::store::Catalog::ended_before`].
pub(super) fn ended_before(conn: &Connection, before_ms: u64) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.thread FROM checkpoints c
         JOIN (SELECT thread, max(seq) AS seq FROM checkpoints GROUP BY thread) l
           ON l.thread = c.thread AND l.seq = c.seq
         WHERE c.status IN ('finished', 'failed') AND c.at_ms < ?1
         ORDER BY c.at_ms, c.thread",
    )?;
    let rows = stmt.query_map([int(before_ms)], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn waiting_on(conn: &Connection, graph_hash: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.thread FROM checkpoints c
         JOIN (SELECT thread, max(seq) AS seq FROM checkpoints GROUP BY thread) l
           ON l.thread = c.thread AND l.seq = c.seq
         JOIN graphs g ON g.id = c.graph
         WHERE g.hash = ?1 AND c.status NOT IN ('finished', 'failed')
         ORDER BY c.thread",
    )?;
    let rows = stmt.query_map([graph_hash], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[async_trait]
impl Checkpoints for SqliteStore {
    async fn append(&self, r: Checkpoint) -> Result<(), StoreError> {
        self.blocking(|s| {
            let mut inner = s.conn();
            patiently(|| inner.insert(&r, true))
        })
        .await
    }

    async fn append_all(&self, records: Vec<Checkpoint>) -> Result<(), StoreError> {
        self.blocking(|s| {
            let mut inner = s.conn();
            // One transaction: a copy killed part-way leaves nothing, not a partial
            // thread. Values are written whole: references would be to records of
            // this copy.
            patiently(|| {
                inner.conn.execute_batch("BEGIN IMMEDIATE")?;
                let done = records
                    .iter()
                    .try_for_each(|r| inner.insert(r, false))
                    .and_then(|()| Ok(inner.conn.execute_batch("COMMIT")?));
                if done.is_err() {
                    inner.roll_back();
                }
                done
            })?;
            for r in &records {
                inner.forget(&r.thread);
            }
            Ok(())
        })
        .await
    }

    async fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        self.blocking(|s| s.records(thread, 0, false)).await
    }

    async fn load_from(&self, thread: &str, seq: u64) -> Result<Vec<Checkpoint>, StoreError> {
        self.blocking(|s| s.records(thread, seq, false)).await
    }

    async fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.blocking(|s| Ok(s.records(thread, 0, true)?.pop()))
            .await
    }

    async fn put_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.blocking(|s| {
            let mut inner = s.conn();
            patiently(|| inner.put_snapshot(&snapshot))
        })
        .await
    }

    async fn snapshot(&self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        self.blocking(|s| Ok(s.conn().resume_point(thread)?.0.map(Snapshot::parsed)))
            .await
    }

    async fn resume_point(
        &self,
        thread: &str,
    ) -> Result<(Option<Snapshot<Stored>>, Vec<Checkpoint>), StoreError> {
        self.blocking(|s| s.conn().resume_point(thread)).await
    }

    async fn claim(&self, thread: &str) -> Result<Claim, StoreError> {
        self.blocking(|s| {
            let claim = s.claims.claim(thread)?;
            // What this process remembers of the thread may be stale: another process
            // may have run it since.
            s.conn().forget(thread);
            Ok(claim)
        })
        .await
    }

    async fn truncate(&self, thread: &str, seq: u64) -> Result<(), StoreError> {
        self.blocking(|s| {
            let mut inner = s.conn();
            inner.forget(thread);
            patiently(|| truncate(&inner.conn, thread, seq))
        })
        .await
    }

    async fn prune(&self, base: Checkpoint) -> Result<u64, StoreError> {
        self.blocking(|s| {
            let mut inner = s.conn();
            patiently(|| inner.prune(&base))
        })
        .await
    }
}
