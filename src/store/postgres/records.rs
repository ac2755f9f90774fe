//! Checkpoint records and snapshots as rows; their writes' text is `rows.rs`'s, as in
//! the SQLite store.

use super::PostgresStore;
use super::{Session, col};
use crate::store::rows::{
    Raw, check_next, corrupt, count, first_seq, full_value, int, missing, parse_column,
    parse_pending, parse_writes, pending_and_error, resolve, snapshot_whole, snapshot_whole_after,
};
use crate::store::{Checkpoint, Snapshot, Source, Status, StoreError};
use crate::store::{Checkpoints, Claim};
use async_trait::async_trait;
use postgres::error::SqlState;
use serde_json::Value as Json;
use std::sync::Arc;

/// A row read: the record without its writes, its writes, its graph's id.
type Row = (Checkpoint, Vec<(Arc<str>, Raw)>, i64);

macro_rules! insert {
    ($before:literal) => {
        concat!(
            $before,
            "INSERT INTO switchyard.checkpoints (thread, seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
        )
    };
}

const INSERT: &str = insert!("");
/// [`INSERT`] for a thread's first record: a snapshot left by a thread of the same name
/// whose records were removed by hand is not this one's, and goes in the same statement
/// (kept should the insert fail).
const INSERT_FIRST: &str =
    insert!("WITH gone AS (DELETE FROM switchyard.snapshots WHERE thread = $1) ");

const SELECT_ALL: &str = "SELECT seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent
     FROM switchyard.checkpoints WHERE thread = $1 AND $2::BIGINT = $2::BIGINT ORDER BY seq";
const SELECT_FROM: &str = "SELECT seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent
     FROM switchyard.checkpoints WHERE thread = $1 AND seq >= $2 ORDER BY seq";
const SELECT_LAST: &str = "SELECT seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent
     FROM switchyard.checkpoints WHERE thread = $1 AND $2::BIGINT = $2::BIGINT ORDER BY seq DESC LIMIT 1";

impl Session {
    /// The id of a graph file at a hash, added to `graphs` when new.
    fn graph_id(&mut self, path: &Arc<str>, hash: &Arc<str>) -> Result<i64, StoreError> {
        if let Some(id) = self.graph_ids.get(&(path.clone(), hash.clone())) {
            return Ok(*id);
        }
        let add = self.prepared(
            "INSERT INTO switchyard.graphs (path, hash) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )?;
        let find =
            self.prepared("SELECT id FROM switchyard.graphs WHERE path = $1 AND hash = $2")?;
        let client = self.client()?;
        let found = client
            .execute(&add, &[&&**path, &&**hash])
            .and_then(|_| client.query_one(&find, &[&&**path, &&**hash]));
        let id: i64 = col(&found.map_err(|e| self.pg(e))?, 0, &self.url)?;
        self.graph_ids.insert((path.clone(), hash.clone()), id);
        self.graphs.insert(id, (path.clone(), hash.clone()));
        Ok(id)
    }

    /// The graph file and hash of an id.
    fn graph(&mut self, thread: &str, id: i64) -> Result<(Arc<str>, Arc<str>), StoreError> {
        if let Some(g) = self.graphs.get(&id) {
            return Ok(g.clone());
        }
        let find = self.prepared("SELECT path, hash FROM switchyard.graphs WHERE id = $1")?;
        let row = self
            .client()?
            .query_opt(&find, &[&id])
            .map_err(|e| self.pg(e))?
            .ok_or_else(|| corrupt(thread, format!("graph {id} is not in `graphs`")))?;
        let g: GraphPair = (
            Arc::from(col::<&str>(&row, 0, &self.url)?),
            Arc::from(col::<&str>(&row, 1, &self.url)?),
        );
        self.graph_ids.insert(g.clone(), id);
        self.graphs.insert(id, g.clone());
        Ok(g)
    }

    /// Inserts one record, sharing large values the thread wrote before when `share`.
    pub(super) fn insert(&mut self, r: &Checkpoint, share: bool) -> Result<(), StoreError> {
        if self.unclaimed.contains(&*r.thread) {
            // Its claim went with a lost connection and another process has it now.
            return Err(StoreError::Claimed {
                thread: r.thread.to_string(),
                pid: 0,
            });
        }
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
        let insert = self.prepared(if r.seq == 0 { INSERT_FIRST } else { INSERT })?;
        let done = self.client()?.execute(
            &insert,
            &[
                &&*r.thread,
                &int(r.seq),
                &int(r.run),
                &int(r.step),
                &r.node.as_deref(),
                &r.next.as_deref(),
                &writes,
                &r.status.name(),
                &pending,
                &r.outcome,
                &graph,
                &int(r.tokens),
                &int(r.elapsed_ms),
                &int(r.at_ms),
                &r.limited,
                &error,
                &r.source.name(),
                &r.parent.map(int),
            ],
        );
        match done {
            Ok(_) => {
                if share {
                    self.written.remember(&r.thread, fresh);
                }
                // Inside a transaction the record may yet be rolled back.
                if !self.in_transaction {
                    self.whole_to.appended(&r.thread, r.seq);
                }
                Ok(())
            }
            // Another process appended this thread's next record first: two runs of
            // one thread at once. The later one stops rather than interleave.
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                if self.retrying && !self.in_transaction && self.wrote_already(r)? {
                    return Ok(());
                }
                Err(StoreError::Conflict {
                    thread: r.thread.to_string(),
                    seq: r.seq,
                })
            }
            Err(e) => Err(self.pg(e)),
        }
    }

    /// Whether the record in `r`'s place is `r` itself: written by an attempt whose
    /// connection was lost after the commit and before the answer, so the call was
    /// made again. (The same run, step, node and instant: no other writer makes that
    /// one, and a thread's claim keeps other writers out anyway.)
    fn wrote_already(&mut self, r: &Checkpoint) -> Result<bool, StoreError> {
        let there = self.prepared(
            "SELECT run, step, at_ms, node, next FROM switchyard.checkpoints WHERE thread = $1 AND seq = $2",
        )?;
        let row = self
            .client()?
            .query_opt(&there, &[&&*r.thread, &int(r.seq)])
            .map_err(|e| self.pg(e))?;
        let Some(row) = row else { return Ok(false) };
        let found: (i64, i64, i64, Option<&str>, Option<&str>) = (
            col(&row, 0, &self.url)?,
            col(&row, 1, &self.url)?,
            col(&row, 2, &self.url)?,
            col(&row, 3, &self.url)?,
            col(&row, 4, &self.url)?,
        );
        Ok(found
            == (
                int(r.run),
                int(r.step),
                int(r.at_ms),
                r.node.as_deref(),
                r.next.as_deref(),
            ))
    }

    /// Inserts records together, all or none (a fork or a copy). Values are written
    /// whole: references would be to records of this copy.
    pub(super) fn insert_all(&mut self, records: &[Checkpoint]) -> Result<(), StoreError> {
        // Tried again after a lost connection: a COMMIT whose answer was lost wrote
        // them all (all or none), as its last record in place says.
        if self.retrying
            && let Some(last) = records.last()
            && self.wrote_already(last)?
        {
            return Ok(());
        }
        // Statements of a transaction run on the same connection; BEGIN and COMMIT as
        // statements keep the prepared ones usable inside it.
        self.begin()?;
        let done = records.iter().try_for_each(|r| self.insert(r, false));
        let ended = self.end(done.is_ok());
        for r in records {
            self.written.forget(&r.thread);
        }
        done?;
        ended
    }

    /// The records of `thread` with `seq` from `from` on (all of them from 0, the
    /// latest only with `last_only`), checked for gaps, references resolved.
    pub(super) fn select(
        &mut self,
        thread: &str,
        from: u64,
        last_only: bool,
    ) -> Result<Vec<Checkpoint>, StoreError> {
        let thread_arc: Arc<str> = Arc::from(thread);
        // From 0 every row is read, a negative `seq` included, so that it is reported.
        let sql = match (last_only, from) {
            (true, _) => SELECT_LAST,
            (false, 0) => SELECT_ALL,
            (false, _) => SELECT_FROM,
        };
        let statement = self.prepared(sql)?;
        let rows = self
            .client()?
            .query(&statement, &[&thread, &int(from)])
            .map_err(|e| self.pg(e))?;
        let rows: Vec<Row> = rows
            .iter()
            .map(|row| decode(&thread_arc, row, &self.url))
            .collect::<Result<_, _>>()?;
        let mut out: Vec<Checkpoint> = Vec::with_capacity(rows.len());
        let mut from = from;
        for (mut record, raw, graph) in rows {
            if !last_only {
                from = first_seq(&record, from, out.len());
                check_next(thread, record.seq, from, out.len())?;
            }
            (record.graph, record.graph_hash) = self.graph(thread, graph)?;
            record.writes = resolve(raw, &out, from, |seq, field| {
                self.value_at(thread, seq, field)
            })?;
            out.push(record);
        }
        Ok(out)
    }

    /// The value `field` got in record `seq` of `thread`, read from that row.
    fn value_at(&mut self, thread: &str, seq: u64, field: &str) -> Result<Arc<Json>, StoreError> {
        let find = self
            .prepared("SELECT writes FROM switchyard.checkpoints WHERE thread = $1 AND seq = $2")?;
        let text: String = self
            .client()?
            .query_opt(&find, &[&thread, &int(seq)])
            .map_err(|e| self.pg(e))?
            .map(|row| col(&row, 0, &self.url))
            .ok_or_else(|| missing(thread, seq, field))??;
        full_value(thread, &text, seq, field)
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
        let put = self.prepared(
            "INSERT INTO switchyard.snapshots (thread, seq, graph, state) VALUES ($1, $2, $3, $4)
             ON CONFLICT (thread) DO UPDATE SET seq = excluded.seq, graph = excluded.graph, state = excluded.state",
        )?;
        self.client()?
            .execute(&put, &[&&*s.thread, &int(s.seq), &graph, &state])
            .map_err(|e| self.pg(e))?;
        Ok(())
    }

    pub(super) fn snapshot(&mut self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        let find =
            self.prepared("SELECT seq, graph, state FROM switchyard.snapshots WHERE thread = $1")?;
        let Some(row) = self
            .client()?
            .query_opt(&find, &[&thread])
            .map_err(|e| self.pg(e))?
        else {
            return Ok(None);
        };
        let url = &self.url;
        let (seq, graph, state): (i64, i64, String) =
            (col(&row, 0, url)?, col(&row, 1, url)?, col(&row, 2, url)?);
        let seq =
            u64::try_from(seq).map_err(|_| corrupt(thread, "a snapshot's `seq` is negative"))?;
        // The records up to it must all be there, numbered from 0: a thread whose
        // history has a gap or an odd record is read whole, which reports it. Those
        // this process already knows are there are not counted again (`WholeTo`).
        let whole_to = self.whole_to.get(thread);
        let counted = self.prepared(
            "SELECT (SELECT count(*) FROM switchyard.checkpoints WHERE thread = $1 AND seq > $3 AND seq <= $2),
                    (SELECT min(seq) FROM switchyard.checkpoints WHERE thread = $1),
                    (SELECT source FROM switchyard.checkpoints WHERE thread = $1 ORDER BY seq LIMIT 1),
                    EXISTS (SELECT 1 FROM switchyard.checkpoints WHERE thread = $1 AND seq = $2)",
        )?;
        let row = self
            .client()?
            .query_one(&counted, &[&thread, &int(seq), &whole_to.map_or(-1, int)])
            .map_err(|e| self.pg(e))?;
        let url = &self.url;
        let (n, first, first_source, own): (i64, Option<i64>, Option<String>, bool) = (
            col(&row, 0, url)?,
            col(&row, 1, url)?,
            col(&row, 2, url)?,
            col(&row, 3, url)?,
        );
        let whole = match whole_to {
            None => snapshot_whole(seq, n, first, first_source.as_deref()),
            Some(w) => snapshot_whole_after(seq, n, first, first_source.as_deref(), w, own),
        };
        if !whole {
            return Ok(None);
        }
        self.whole_to.found(thread, seq);
        let (graph, graph_hash) = self.graph(thread, graph)?;
        let raw = parse_writes(thread, &state, "snapshot")?;
        let values = resolve(raw, &[], u64::MAX, |seq, field| {
            self.value_at(thread, seq, field)
        })?
        .into_iter()
        .map(|w| (w.field, w.value))
        .collect();
        Ok(Some(Snapshot {
            thread: Arc::from(thread),
            seq,
            graph,
            graph_hash,
            values,
        }))
    }

    /// Removes a thread's records from `seq` on, and its snapshot if it is of one of
    /// them.
    pub(super) fn truncate(&mut self, thread: &str, seq: u64) -> Result<(), StoreError> {
        self.written.forget(thread);
        self.whole_to.forget(thread);
        let url = self.url.clone();
        let pg = |e| super::pg_error(&url, e);
        let mut tx = self.client()?.transaction().map_err(pg)?;
        tx.execute(
            "DELETE FROM switchyard.checkpoints WHERE thread = $1 AND seq >= $2",
            &[&thread, &int(seq)],
        )
        .map_err(pg)?;
        tx.execute(
            "DELETE FROM switchyard.snapshots WHERE thread = $1 AND seq >= $2",
            &[&thread, &int(seq)],
        )
        .map_err(pg)?;
        tx.commit().map_err(pg)
    }

    /// Removes everything of a thread, all of it or none of it: a half-deleted thread
    /// would be unreadable.
    pub(super) fn delete_thread(&mut self, thread: &str) -> Result<(), StoreError> {
        self.written.forget(thread);
        self.whole_to.forget(thread);
        let url = self.url.clone();
        let pg = |e| super::pg_error(&url, e);
        let mut tx = self.client()?.transaction().map_err(pg)?;
        for sql in [
            "DELETE FROM switchyard.checkpoints WHERE thread = $1",
            "DELETE FROM switchyard.snapshots WHERE thread = $1",
            "DELETE FROM switchyard.run_events WHERE run IN (SELECT id FROM switchyard.runs WHERE thread = $1)",
            "DELETE FROM switchyard.runs WHERE thread = $1",
            "DELETE FROM switchyard.threads WHERE id = $1",
        ] {
            tx.execute(sql, &[&thread]).map_err(pg)?;
        }
        tx.commit().map_err(pg)
    }
}

type GraphPair = (Arc<str>, Arc<str>);

impl Session {
    /// See [`crate::store::Checkpoints::prune`].
    pub(super) fn prune(&mut self, base: &Checkpoint) -> Result<u64, StoreError> {
        self.written.forget(&base.thread);
        self.whole_to.forget(&base.thread);
        let thread = &*base.thread;
        self.begin()?;
        let done = (|| {
            // Locks the thread's latest row: an append racing this waits, then
            // conflicts with the base.
            let latest = self.prepared(
                "SELECT seq FROM switchyard.checkpoints WHERE thread = $1 ORDER BY seq DESC LIMIT 1 FOR UPDATE",
            )?;
            let row = self
                .client()?
                .query_opt(&latest, &[&thread])
                .map_err(|e| self.pg(e))?;
            let latest: Option<i64> = row.map(|r| col(&r, 0, &self.url)).transpose()?;
            if latest != Some(int(base.seq)) {
                return Err(StoreError::Conflict {
                    thread: thread.to_string(),
                    seq: base.seq,
                });
            }
            let delete = self
                .prepared("DELETE FROM switchyard.checkpoints WHERE thread = $1 AND seq <= $2")?;
            let gone = self
                .client()?
                .execute(&delete, &[&thread, &int(base.seq)])
                .map_err(|e| self.pg(e))?;
            let snapshot = self.prepared("DELETE FROM switchyard.snapshots WHERE thread = $1")?;
            self.client()?
                .execute(&snapshot, &[&thread])
                .map_err(|e| self.pg(e))?;
            // Whole values: the rows a reference would name are gone.
            self.insert(base, false)?;
            Ok(gone - 1)
        })();
        let ended = self.end(done.is_ok());
        let gone = done?;
        ended?;
        Ok(gone)
    }
}

/// One row as a checkpoint (its graph and writes to be filled in); a value that cannot
/// be one (a negative count, a status or JSON this version does not read) makes the
/// record corrupt.
fn decode(thread: &Arc<str>, row: &postgres::Row, url: &str) -> Result<Row, StoreError> {
    let n = |i: usize, name: &str| count(thread, col(row, i, url)?, name);
    let writes = parse_writes(thread, col(row, 5, url)?, "writes")?;
    let pending = parse_pending(thread, col(row, 7, url)?)?;
    let error: Option<Json> = parse_column(thread, col(row, 14, url)?, "error")?;
    let status: &str = col(row, 6, url)?;
    let source: &str = col(row, 15, url)?;
    let record = Checkpoint {
        thread: thread.clone(),
        seq: n(0, "seq")?,
        run: n(1, "run")?,
        step: n(2, "step")?,
        node: col::<Option<&str>>(row, 3, url)?.map(Arc::from),
        next: col::<Option<&str>>(row, 4, url)?.map(Arc::from),
        writes: Vec::new(),
        status: Status::parse(status)
            .ok_or_else(|| corrupt(thread, format!("unknown status `{status}`")))?,
        pending: pending.map(Box::new),
        outcome: col(row, 8, url)?,
        graph: Arc::from(""),
        graph_hash: Arc::from(""),
        tokens: n(10, "tokens")?,
        elapsed_ms: n(11, "elapsed_ms")?,
        at_ms: n(12, "at_ms")?,
        limited: col(row, 13, url)?,
        error: error.map(Box::new),
        source: Source::parse(source)
            .ok_or_else(|| corrupt(thread, format!("unknown source `{source}`")))?,
        parent: match col::<Option<i64>>(row, 16, url)? {
            Some(p) => Some(count(thread, p, "parent")?),
            None => None,
        },
    };
    Ok((record, writes, col(row, 9, url)?))
}

#[async_trait]
impl Checkpoints for PostgresStore {
    async fn append(&self, r: Checkpoint) -> Result<(), StoreError> {
        self.call_for(&r.thread.clone(), move |s| s.insert(&r, true))
            .await
    }

    async fn append_all(&self, records: Vec<Checkpoint>) -> Result<(), StoreError> {
        let Some(first) = records.first().map(|r| r.thread.to_string()) else {
            return Ok(());
        };
        self.call_for(&first, move |s| s.insert_all(&records)).await
    }

    async fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        let thread = thread.to_string();
        self.call_for(&thread.clone(), move |s| s.select(&thread, 0, false))
            .await
    }

    async fn load_from(&self, thread: &str, seq: u64) -> Result<Vec<Checkpoint>, StoreError> {
        let thread = thread.to_string();
        self.call_for(&thread.clone(), move |s| s.select(&thread, seq, false))
            .await
    }

    async fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        let thread = thread.to_string();
        Ok(self
            .call_for(&thread.clone(), move |s| s.select(&thread, 0, true))
            .await?
            .pop())
    }

    async fn put_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.call_for(&snapshot.thread.clone(), move |s| s.put_snapshot(&snapshot))
            .await
    }

    async fn snapshot(&self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        let thread = thread.to_string();
        self.call_for(&thread.clone(), move |s| s.snapshot(&thread))
            .await
    }

    async fn claim(&self, thread: &str) -> Result<Claim, StoreError> {
        self.claim_thread(thread).await
    }

    async fn truncate(&self, thread: &str, seq: u64) -> Result<(), StoreError> {
        let thread = thread.to_string();
        self.call_for(&thread.clone(), move |s| s.truncate(&thread, seq))
            .await
    }

    async fn prune(&self, base: Checkpoint) -> Result<u64, StoreError> {
        self.call_for(&base.thread.clone(), move |s| s.prune(&base))
            .await
    }
}
