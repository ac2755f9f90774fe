//! Checkpoint records and snapshots as rows; their writes' text is `rows.rs`'s, as in
//! the SQLite store. Every call takes a pooled connection; a thread this process
//! claimed is written under its claim's token (see `claims.rs`).

use super::PostgresStore;
use super::col;
use super::pool::Failure;
use crate::store::rows::{
    Raw, check_next, corrupt, count, first_seq, full_value, int, missing, parse_column,
    parse_pending, parse_writes, pending_and_error, resolve, snapshot_whole, snapshot_whole_after,
};
use crate::store::{Checkpoint, Snapshot, Source, Status, StoreError};
use crate::store::{Checkpoints, Claim};
use async_trait::async_trait;
use serde_json::Value as Json;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Statement};

/// A row read: the record without its writes, its writes, its graph's id.
type Row = (Checkpoint, Vec<(Arc<str>, Raw)>, i64);

macro_rules! insert {
    ($before:literal) => {
        concat!(
            $before,
            "INSERT INTO switchyard.checkpoints (thread, seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent, usage)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
        )
    };
}

/// A record written under a claim: only while the claim's row holds the token (`$20`),
/// which the insert locks, so that a takeover waits for it to commit, or it finds the
/// token gone and writes nothing.
macro_rules! fenced {
    ($before:literal) => {
        concat!(
            "WITH fence AS (SELECT 1 FROM switchyard.claims WHERE thread = $1 AND token = $20 FOR SHARE)",
            $before,
            " INSERT INTO switchyard.checkpoints (thread, seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent, usage)
     SELECT $1::TEXT, $2::BIGINT, $3::BIGINT, $4::BIGINT, $5::TEXT, $6::TEXT, $7::TEXT, $8::TEXT, $9::TEXT, $10::TEXT, $11::BIGINT, $12::BIGINT, $13::BIGINT, $14::BIGINT, $15::BOOLEAN, $16::TEXT, $17::TEXT, $18::BIGINT, $19::TEXT FROM fence"
        )
    };
}

const INSERT: &str = insert!("");
/// [`INSERT`] for a thread's first record: a snapshot left by a thread of the same name
/// whose records were removed by hand is not this one's, and goes in the same statement
/// (kept should the insert fail).
const INSERT_FIRST: &str =
    insert!("WITH gone AS (DELETE FROM switchyard.snapshots WHERE thread = $1) ");
const FENCED: &str = fenced!("");
const FENCED_FIRST: &str = fenced!(
    ", gone AS (DELETE FROM switchyard.snapshots WHERE thread = $1 AND EXISTS (SELECT 1 FROM fence))"
);

const SELECT_ALL: &str = "SELECT seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent, usage
     FROM switchyard.checkpoints WHERE thread = $1 AND $2::BIGINT = $2::BIGINT ORDER BY seq";
const SELECT_FROM: &str = "SELECT seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent, usage
     FROM switchyard.checkpoints WHERE thread = $1 AND seq >= $2 ORDER BY seq";
const SELECT_LAST: &str = "SELECT seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source, parent, usage
     FROM switchyard.checkpoints WHERE thread = $1 AND $2::BIGINT = $2::BIGINT ORDER BY seq DESC LIMIT 1";

/// A record's columns as the insert statements take them.
struct Columns<'a> {
    r: &'a Checkpoint,
    seq: i64,
    run: i64,
    step: i64,
    writes: &'a str,
    pending: Option<String>,
    error: Option<String>,
    graph: i64,
    tokens: i64,
    elapsed_ms: i64,
    at_ms: i64,
    parent: Option<i64>,
    usage: Option<String>,
}

impl<'a> Columns<'a> {
    fn of(r: &'a Checkpoint, writes: &'a str, graph: i64) -> Result<Self, StoreError> {
        let (pending, error) = pending_and_error(r)?;
        Ok(Columns {
            r,
            seq: int(r.seq),
            run: int(r.run),
            step: int(r.step),
            writes,
            pending,
            error,
            graph,
            tokens: int(r.tokens),
            elapsed_ms: int(r.elapsed_ms),
            at_ms: int(r.at_ms),
            parent: r.parent.map(int),
            usage: r.usage.column(),
        })
    }

    /// Writes the record with `statement` (one of the inserts: `token` given to a
    /// fenced one); the rows written (none: fenced out).
    async fn insert(
        &self,
        c: &impl GenericClient,
        statement: &Statement,
        token: Option<i64>,
    ) -> Result<u64, tokio_postgres::Error> {
        let r = self.r;
        let (thread, node, next) = (&*r.thread, r.node.as_deref(), r.next.as_deref());
        let (status, source) = (r.status.name(), r.source.name());
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &thread,
            &self.seq,
            &self.run,
            &self.step,
            &node,
            &next,
            &self.writes,
            &status,
            &self.pending,
            &r.outcome,
            &self.graph,
            &self.tokens,
            &self.elapsed_ms,
            &self.at_ms,
            &r.limited,
            &self.error,
            &source,
            &self.parent,
            &self.usage,
        ];
        if let Some(t) = &token {
            params.push(t);
        }
        c.execute(statement, &params).await
    }
}

/// The insert for `r`: fenced under a claim, the first record's own.
fn insert_sql(r: &Checkpoint, fenced: bool) -> &'static str {
    match (fenced, r.seq == 0) {
        (false, false) => INSERT,
        (false, true) => INSERT_FIRST,
        (true, false) => FENCED,
        (true, true) => FENCED_FIRST,
    }
}

/// How an append went.
enum Appended {
    Yes,
    /// The claim's token is not the row's any more: another process took the thread.
    Fenced,
}

type GraphPair = (Arc<str>, Arc<str>);

impl PostgresStore {
    /// The id of a graph file at a hash, added to `graphs` when new. Outside any
    /// transaction: an id a rolled-back transaction added would name no row.
    async fn graph_id(
        &self,
        c: &deadpool_postgres::Object,
        path: &Arc<str>,
        hash: &Arc<str>,
    ) -> Result<i64, Failure> {
        let key = (path.clone(), hash.clone());
        if let Some(id) = self.memory().graph_ids.get(&key) {
            return Ok(*id);
        }
        let add = c
            .prepare_cached(
                "INSERT INTO switchyard.graphs (path, hash) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            )
            .await?;
        let find = c
            .prepare_cached("SELECT id FROM switchyard.graphs WHERE path = $1 AND hash = $2")
            .await?;
        c.execute(&add, &[&&**path, &&**hash]).await?;
        let row = c.query_one(&find, &[&&**path, &&**hash]).await?;
        let id: i64 = col(&row, 0, &self.url)?;
        let mut memory = self.memory();
        memory.graph_ids.insert(key.clone(), id);
        memory.graphs.insert(id, key);
        Ok(id)
    }

    /// The graph files and hashes of `ids`, read from `graphs` when not known here.
    async fn graphs(
        &self,
        thread: &str,
        ids: impl Iterator<Item = i64>,
    ) -> Result<HashMap<i64, GraphPair>, StoreError> {
        let mut found = HashMap::new();
        let mut unknown = BTreeSet::new();
        {
            let memory = self.memory();
            for id in ids {
                match memory.graphs.get(&id) {
                    Some(g) => {
                        found.insert(id, g.clone());
                    }
                    None => {
                        unknown.insert(id);
                    }
                }
            }
        }
        if unknown.is_empty() {
            return Ok(found);
        }
        let unknown: Vec<i64> = unknown.into_iter().collect();
        let url = &*self.url;
        let rows = self
            .pool
            .run(|c| {
                let unknown = &unknown;
                async move {
                    let find = c
                        .prepare_cached(
                            "SELECT id, path, hash FROM switchyard.graphs WHERE id = ANY($1)",
                        )
                        .await?;
                    let rows = c.query(&find, &[unknown]).await?;
                    rows.iter()
                        .map(|row| {
                            Ok((
                                col::<i64>(row, 0, url)?,
                                Arc::<str>::from(col::<&str>(row, 1, url)?),
                                Arc::<str>::from(col::<&str>(row, 2, url)?),
                            ))
                        })
                        .collect::<Result<Vec<_>, Failure>>()
                }
            })
            .await?;
        let mut memory = self.memory();
        for (id, path, hash) in rows {
            memory.graph_ids.insert((path.clone(), hash.clone()), id);
            memory.graphs.insert(id, (path.clone(), hash.clone()));
            found.insert(id, (path, hash));
        }
        for id in &unknown {
            if !found.contains_key(id) {
                return Err(corrupt(thread, format!("graph {id} is not in `graphs`")));
            }
        }
        Ok(found)
    }

    /// The writes' text of records `seqs` of `thread`: what references to them mean.
    async fn texts(
        &self,
        thread: &str,
        seqs: BTreeSet<u64>,
    ) -> Result<HashMap<u64, String>, StoreError> {
        if seqs.is_empty() {
            return Ok(HashMap::new());
        }
        let seqs: Vec<i64> = seqs.into_iter().map(int).collect();
        let url = &*self.url;
        self.pool
            .run(|c| {
                let seqs = &seqs;
                async move {
                    let find = c
                        .prepare_cached(
                            "SELECT seq, writes FROM switchyard.checkpoints WHERE thread = $1 AND seq = ANY($2)",
                        )
                        .await?;
                    let rows = c.query(&find, &[&thread, seqs]).await?;
                    rows.iter()
                        .map(|row| {
                            Ok((
                                count(thread, col(row, 0, url)?, "seq")?,
                                col::<String>(row, 1, url)?,
                            ))
                        })
                        .collect::<Result<HashMap<_, _>, Failure>>()
                }
            })
            .await
    }

    /// Appends a record, under the thread's claim when this process holds it, sharing
    /// large values the thread wrote before.
    async fn append_record(&self, r: &Checkpoint) -> Result<(), StoreError> {
        let token = self.writing_token(&r.thread)?;
        let mut fresh = Vec::new();
        let writes = self.memory().written.encode(
            &r.thread,
            true,
            r.writes.iter().map(|w| (&*w.field, &*w.value)),
            r.seq,
            &mut fresh,
        );
        let tried = AtomicBool::new(false);
        let appended = self
            .pool
            .run(|c| {
                let (writes, tried) = (&writes, &tried);
                async move {
                    // The call is being made again, its first attempt's connection
                    // lost: what that attempt wrote may have been committed before the
                    // answer was lost.
                    let retrying = tried.swap(true, Ordering::SeqCst);
                    let graph = self.graph_id(&c, &r.graph, &r.graph_hash).await?;
                    let columns = Columns::of(r, writes, graph)?;
                    let insert = c.prepare_cached(insert_sql(r, token.is_some())).await?;
                    match columns.insert(&**c, &insert, token).await {
                        Ok(0) => Ok(Appended::Fenced),
                        Ok(_) => Ok(Appended::Yes),
                        // Another process appended this thread's next record first: two
                        // runs of one thread at once. The later one stops rather than
                        // interleave.
                        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                            if retrying && self.wrote_already(&c, r).await? {
                                return Ok(Appended::Yes);
                            }
                            Err(Failure::Store(StoreError::Conflict {
                                thread: r.thread.to_string(),
                                seq: r.seq,
                            }))
                        }
                        Err(e) => Err(e.into()),
                    }
                }
            })
            .await?;
        match appended {
            Appended::Yes => {
                let mut memory = self.memory();
                memory.written.remember(&r.thread, fresh);
                memory.whole_to.appended(&r.thread, r.seq);
                Ok(())
            }
            Appended::Fenced => Err(self.fenced_out(&r.thread)),
        }
    }

    /// Whether the record in `r`'s place is `r` itself: written by an attempt whose
    /// connection was lost after the commit and before the answer, so the call was
    /// made again. (The same run, step, node and instant: no other writer makes that
    /// one, and a thread's claim keeps other writers out anyway.)
    async fn wrote_already(
        &self,
        c: &deadpool_postgres::Object,
        r: &Checkpoint,
    ) -> Result<bool, Failure> {
        let there = c
            .prepare_cached(
                "SELECT run, step, at_ms, node, next FROM switchyard.checkpoints WHERE thread = $1 AND seq = $2",
            )
            .await?;
        let Some(row) = c.query_opt(&there, &[&&*r.thread, &int(r.seq)]).await? else {
            return Ok(false);
        };
        let url = &*self.url;
        let found: (i64, i64, i64, Option<&str>, Option<&str>) = (
            col(&row, 0, url)?,
            col(&row, 1, url)?,
            col(&row, 2, url)?,
            col(&row, 3, url)?,
            col(&row, 4, url)?,
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
    async fn append_records(&self, records: &[Checkpoint]) -> Result<(), StoreError> {
        let Some(last) = records.last() else {
            return Ok(());
        };
        let token = self.writing_token(&last.thread)?;
        let writes: Vec<String> = {
            let memory = self.memory();
            records
                .iter()
                .map(|r| {
                    memory.written.encode(
                        &r.thread,
                        false,
                        r.writes.iter().map(|w| (&*w.field, &*w.value)),
                        r.seq,
                        &mut Vec::new(),
                    )
                })
                .collect()
        };
        let tried = AtomicBool::new(false);
        let appended = self
            .pool
            .run(|mut c| {
                let (writes, tried) = (&writes, &tried);
                async move {
                    // Tried again after a lost connection: a COMMIT whose answer was
                    // lost wrote them all (all or none), as its last record in place
                    // says.
                    if tried.swap(true, Ordering::SeqCst) && self.wrote_already(&c, last).await? {
                        return Ok(Appended::Yes);
                    }
                    let mut columns = Vec::with_capacity(records.len());
                    for (r, w) in records.iter().zip(writes) {
                        let graph = self.graph_id(&c, &r.graph, &r.graph_hash).await?;
                        columns.push(Columns::of(r, w, graph)?);
                    }
                    let mut statements = Vec::with_capacity(records.len());
                    for r in records {
                        statements.push(c.prepare_cached(insert_sql(r, token.is_some())).await?);
                    }
                    let tx = c.transaction().await?;
                    for (k, statement) in columns.iter().zip(&statements) {
                        match k.insert(&*tx, statement, token).await {
                            Ok(0) => return Ok(Appended::Fenced),
                            Ok(_) => {}
                            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                                return Err(Failure::Store(StoreError::Conflict {
                                    thread: k.r.thread.to_string(),
                                    seq: k.r.seq,
                                }));
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    tx.commit().await?;
                    Ok(Appended::Yes)
                }
            })
            .await?;
        let mut memory = self.memory();
        for r in records {
            memory.written.forget(&r.thread);
        }
        match appended {
            Appended::Yes => Ok(()),
            Appended::Fenced => Err(self.fenced_out(&last.thread)),
        }
    }

    /// The records of `thread` with `seq` from `from` on (all of them from 0, the
    /// latest only with `last_only`), checked for gaps, references resolved.
    async fn select(
        &self,
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
        let url = &*self.url;
        let rows: Vec<Row> = self
            .pool
            .run(|c| {
                let thread_arc = &thread_arc;
                async move {
                    let statement = c.prepare_cached(sql).await?;
                    let rows = c.query(&statement, &[&thread, &int(from)]).await?;
                    Ok(rows
                        .iter()
                        .map(|row| decode(thread_arc, row, url))
                        .collect::<Result<_, _>>()?)
                }
            })
            .await?;
        let graphs = self.graphs(thread, rows.iter().map(|r| r.2)).await?;
        // The rows references name that this read does not resolve from the records
        // before them: rows before the first read, and a row's own (a value written
        // twice in one step).
        let first = rows.first().map_or(from, |r| r.0.seq);
        let wanted: BTreeSet<u64> = rows
            .iter()
            .flat_map(|(record, raw, _)| {
                raw.iter().filter_map(move |(_, w)| match w {
                    Raw::Same(seq) if *seq < first || *seq >= record.seq || last_only => Some(*seq),
                    _ => None,
                })
            })
            .collect();
        let texts = self.texts(thread, wanted).await?;
        let mut out: Vec<Checkpoint> = Vec::with_capacity(rows.len());
        let mut from = from;
        for (mut record, raw, graph) in rows {
            if !last_only {
                from = first_seq(&record, from, out.len());
                check_next(thread, record.seq, from, out.len())?;
            }
            (record.graph, record.graph_hash) = graphs[&graph].clone();
            record.writes = resolve(raw, &out, from, |seq, field| {
                value_in(&texts, thread, seq, field)
            })?;
            out.push(record);
        }
        Ok(out)
    }

    async fn put_snapshot_row(&self, s: &Snapshot) -> Result<(), StoreError> {
        // Shared with the records: a snapshot names the record of a large value
        // rather than holding it again. Nothing is remembered from it.
        let state = self.memory().written.encode(
            &s.thread,
            true,
            s.values.iter().map(|(f, v)| (&**f, &**v)),
            s.seq,
            &mut Vec::new(),
        );
        self.pool
            .run(|c| {
                let state = &state;
                async move {
                    let graph = self.graph_id(&c, &s.graph, &s.graph_hash).await?;
                    let put = c
                        .prepare_cached(
                            "INSERT INTO switchyard.snapshots (thread, seq, graph, state) VALUES ($1, $2, $3, $4)
                             ON CONFLICT (thread) DO UPDATE SET seq = excluded.seq, graph = excluded.graph, state = excluded.state",
                        )
                        .await?;
                    c.execute(&put, &[&&*s.thread, &int(s.seq), &graph, state])
                        .await?;
                    Ok(())
                }
            })
            .await
    }

    async fn snapshot_row(&self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        let url = &*self.url;
        // The records up to it must all be there, numbered from 0: a thread whose
        // history has a gap or an odd record is read whole, which reports it. Those
        // this process already knows are there are not counted again (`WholeTo`).
        let whole_to = self.memory().whole_to.get(thread);
        let found = self
            .pool
            .run(|c| async move {
                let find = c
                    .prepare_cached(
                        "SELECT seq, graph, state FROM switchyard.snapshots WHERE thread = $1",
                    )
                    .await?;
                let Some(row) = c.query_opt(&find, &[&thread]).await? else {
                    return Ok(None);
                };
                let (seq, graph, state): (i64, i64, String) =
                    (col(&row, 0, url)?, col(&row, 1, url)?, col(&row, 2, url)?);
                let seq = u64::try_from(seq)
                    .map_err(|_| corrupt(thread, "a snapshot's `seq` is negative"))?;
                let counted = c.prepare_cached(
                    "SELECT (SELECT count(*) FROM switchyard.checkpoints WHERE thread = $1 AND seq > $3 AND seq <= $2),
                            (SELECT min(seq) FROM switchyard.checkpoints WHERE thread = $1),
                            (SELECT source FROM switchyard.checkpoints WHERE thread = $1 ORDER BY seq LIMIT 1),
                            EXISTS (SELECT 1 FROM switchyard.checkpoints WHERE thread = $1 AND seq = $2)",
                ).await?;
                let row = c
                    .query_one(&counted, &[&thread, &int(seq), &whole_to.map_or(-1, int)])
                    .await?;
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
                Ok(whole.then_some((seq, graph, state)))
            })
            .await?;
        let Some((seq, graph, state)) = found else {
            return Ok(None);
        };
        self.memory().whole_to.found(thread, seq);
        let (graph, graph_hash) = self.graphs(thread, [graph].into_iter()).await?[&graph].clone();
        let raw = parse_writes(thread, &state, "snapshot")?;
        let wanted = raw
            .iter()
            .filter_map(|(_, w)| match w {
                Raw::Same(seq) => Some(*seq),
                Raw::Value(_) => None,
            })
            .collect();
        let texts = self.texts(thread, wanted).await?;
        let values = resolve(raw, &[], u64::MAX, |seq, field| {
            value_in(&texts, thread, seq, field)
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

    /// Runs `statements` (each with the thread as `$1` and, when it has `$2`, `seq`)
    /// in one transaction: all of them or none.
    async fn in_one_transaction(
        &self,
        thread: &str,
        seq: Option<i64>,
        statements: &[&'static str],
    ) -> Result<(), StoreError> {
        {
            let mut memory = self.memory();
            memory.written.forget(thread);
            memory.whole_to.forget(thread);
        }
        self.pool
            .run(|mut c| async move {
                let mut prepared = Vec::with_capacity(statements.len());
                for sql in statements {
                    prepared.push(c.prepare_cached(sql).await?);
                }
                let tx = c.transaction().await?;
                for statement in &prepared {
                    match seq {
                        Some(seq) => tx.execute(statement, &[&thread, &seq]).await?,
                        None => tx.execute(statement, &[&thread]).await?,
                    };
                }
                tx.commit().await?;
                Ok(())
            })
            .await
    }

    /// Removes everything of a thread, all of it or none of it: a half-deleted thread
    /// would be unreadable.
    pub(super) async fn delete_thread_rows(&self, thread: &str) -> Result<(), StoreError> {
        self.in_one_transaction(
            thread,
            None,
            &[
                "DELETE FROM switchyard.checkpoints WHERE thread = $1",
                "DELETE FROM switchyard.snapshots WHERE thread = $1",
                "DELETE FROM switchyard.run_events WHERE run IN (SELECT id FROM switchyard.runs WHERE thread = $1)",
                "DELETE FROM switchyard.runs WHERE thread = $1",
                "DELETE FROM switchyard.threads WHERE id = $1",
                "DELETE FROM switchyard.crons WHERE thread = $1",
            ],
        )
        .await
    }

    /// See [`crate::store::Checkpoints::prune`].
    async fn prune_to(&self, base: &Checkpoint) -> Result<u64, StoreError> {
        {
            let mut memory = self.memory();
            memory.written.forget(&base.thread);
            memory.whole_to.forget(&base.thread);
        }
        let thread = &*base.thread;
        // Whole values: the rows a reference would name are gone.
        let writes = self.memory().written.encode(
            thread,
            false,
            base.writes.iter().map(|w| (&*w.field, &*w.value)),
            base.seq,
            &mut Vec::new(),
        );
        let url = &*self.url;
        self.pool
            .run(|mut c| {
                let writes = &writes;
                async move {
                    let graph = self.graph_id(&c, &base.graph, &base.graph_hash).await?;
                    let columns = Columns::of(base, writes, graph)?;
                    // Locks the thread's latest row: an append racing this waits, then
                    // conflicts with the base.
                    let latest = c.prepare_cached(
                        "SELECT seq FROM switchyard.checkpoints WHERE thread = $1 ORDER BY seq DESC LIMIT 1 FOR UPDATE",
                    ).await?;
                    let delete = c
                        .prepare_cached(
                            "DELETE FROM switchyard.checkpoints WHERE thread = $1 AND seq <= $2",
                        )
                        .await?;
                    let snapshot = c
                        .prepare_cached("DELETE FROM switchyard.snapshots WHERE thread = $1")
                        .await?;
                    let insert = c.prepare_cached(insert_sql(base, false)).await?;
                    let tx = c.transaction().await?;
                    let row = tx.query_opt(&latest, &[&thread]).await?;
                    let latest: Option<i64> = row.map(|r| col(&r, 0, url)).transpose()?;
                    if latest != Some(int(base.seq)) {
                        return Err(Failure::Store(StoreError::Conflict {
                            thread: thread.to_string(),
                            seq: base.seq,
                        }));
                    }
                    let gone = tx.execute(&delete, &[&thread, &int(base.seq)]).await?;
                    tx.execute(&snapshot, &[&thread]).await?;
                    columns.insert(&*tx, &insert, None).await?;
                    tx.commit().await?;
                    Ok(gone - 1)
                }
            })
            .await
    }
}

/// The value `field` got in record `seq`, from the rows' text read for references.
fn value_in(
    texts: &HashMap<u64, String>,
    thread: &str,
    seq: u64,
    field: &str,
) -> Result<Arc<Json>, StoreError> {
    match texts.get(&seq) {
        Some(text) => full_value(thread, text, seq, field),
        None => Err(missing(thread, seq, field)),
    }
}

/// One row as a checkpoint (its graph and writes to be filled in); a value that cannot
/// be one (a negative count, a status or JSON this version does not read) makes the
/// record corrupt.
fn decode(thread: &Arc<str>, row: &tokio_postgres::Row, url: &str) -> Result<Row, StoreError> {
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
        usage: crate::store::Usage::from_column(thread, col::<Option<&str>>(row, 17, url)?)?,
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
        self.append_record(&r).await
    }

    async fn append_all(&self, records: Vec<Checkpoint>) -> Result<(), StoreError> {
        self.append_records(&records).await
    }

    async fn load(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        self.select(thread, 0, false).await
    }

    async fn load_from(&self, thread: &str, seq: u64) -> Result<Vec<Checkpoint>, StoreError> {
        self.select(thread, seq, false).await
    }

    async fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self.select(thread, 0, true).await?.pop())
    }

    async fn put_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.put_snapshot_row(&snapshot).await
    }

    async fn snapshot(&self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        self.snapshot_row(thread).await
    }

    async fn claim(&self, thread: &str) -> Result<Claim, StoreError> {
        self.claim_thread(thread).await
    }

    async fn fence(&self, thread: &str) -> Result<crate::store::Fence, StoreError> {
        self.fence_thread(thread).await
    }

    async fn truncate(&self, thread: &str, seq: u64) -> Result<(), StoreError> {
        self.in_one_transaction(
            thread,
            Some(int(seq)),
            &[
                "DELETE FROM switchyard.checkpoints WHERE thread = $1 AND seq >= $2",
                "DELETE FROM switchyard.snapshots WHERE thread = $1 AND seq >= $2",
            ],
        )
        .await
    }

    async fn prune(&self, base: Checkpoint) -> Result<u64, StoreError> {
        self.prune_to(&base).await
    }
}
