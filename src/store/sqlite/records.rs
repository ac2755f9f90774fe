//! Checkpoint records and snapshots as rows.
//!
//! A record's writes are a JSON array of `{"field", "value"}`. A large value (at least
//! [`SHARED_BYTES`] of JSON) that a thread writes again unchanged (the agent's page
//! snapshot when the page did not change, a tool's same answer) is stored as
//! `{"field", "same": SEQ}` instead: the value is the one that field got in record SEQ
//! of the thread. Snapshots keep their values the same way. Reading resolves the
//! references, so nothing above the store sees them.

use super::Inner;
use crate::fxhash::FxHashMap;
use crate::store::{Checkpoint, Pending, Snapshot, Source, Status, StoreError, Write};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use serde_json::Value as Json;
use std::sync::Arc;

/// JSON this long or longer is written once per thread and field while it stays the
/// same; shorter values cost less than the reference would save.
pub(super) const SHARED_BYTES: usize = 256;

/// Threads whose last large values are remembered, for [`SHARED_BYTES`]; past this
/// the memory is cleared and starts again (references are only a saving).
const REMEMBERED_THREADS: usize = 1024;

pub(super) const COLUMNS: &str = "seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source";

/// Counts are stored as SQLite integers (i64); none comes near the limit.
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
fn unpack(thread: &str, value: ValueRef<'_>, what: &str) -> Result<String, StoreError> {
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

pub(super) fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn corrupt(thread: &str, message: impl ToString) -> StoreError {
    StoreError::Corrupt {
        thread: thread.to_string(),
        message: message.to_string(),
    }
}

/// Reads a record's JSON however deep it is: values deeper than serde_json's default
/// limit (128) were accepted before the depth of values was bounded, and their threads
/// must still read.
pub(super) fn parse_deep<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// One write as stored: a value, or the record that holds it.
#[derive(Deserialize)]
struct StoredWrite {
    field: Arc<str>,
    #[serde(default)]
    value: Option<Json>,
    #[serde(default)]
    same: Option<u64>,
}

/// A write read from a row, before references are resolved.
enum Raw {
    Value(Arc<Json>),
    Same(u64),
}

/// A row read: the record without its writes, its writes, its graph's id.
type Row = (Checkpoint, Vec<(Arc<str>, Raw)>, i64);

fn parse_writes(thread: &str, text: &str, what: &str) -> Result<Vec<(Arc<str>, Raw)>, StoreError> {
    let stored: Vec<StoredWrite> =
        parse_deep(text).map_err(|e| corrupt(thread, format!("`{what}`: {e}")))?;
    Ok(stored
        .into_iter()
        .map(|w| {
            let raw = match (w.value, w.same) {
                (_, Some(seq)) => Raw::Same(seq),
                (v, None) => Raw::Value(Arc::new(v.unwrap_or(Json::Null))),
            };
            (w.field, raw)
        })
        .collect())
}

/// Per field of a thread, the last large value written in full: its record and text.
pub(super) type Remembered = FxHashMap<Arc<str>, (u64, String)>;

/// What a row changes in what the thread's fields last held: a large value written in
/// full (its record and text), or a small one (none: nothing to refer to).
type Fresh = Vec<(Arc<str>, Option<(u64, String)>)>;

/// Writes as stored, sharing large values the thread wrote before: `remembered` holds,
/// per field, the last large value written and its record; `fresh` collects how the
/// row changes that, applied once the row is in (see [`Inner::remember`]).
fn encode_writes<'w>(
    writes: impl Iterator<Item = (&'w str, &'w Json)>,
    remembered: Option<&Remembered>,
    seq: u64,
    fresh: &mut Fresh,
) -> String {
    let mut out = String::from("[");
    for (i, (field, value)) in writes.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let text = value.to_string();
        out.push_str("{\"field\":");
        out.push_str(&Json::from(field).to_string());
        if text.len() >= SHARED_BYTES {
            if let Some((at, _)) = remembered
                .and_then(|m| m.get(field))
                .filter(|(_, t)| *t == text)
            {
                out.push_str(&format!(",\"same\":{at}}}"));
                // The field now holds what record `at` holds: a later write of the
                // same value refers to that record too, never to this row (whose
                // last write of the field is this reference).
                fresh.push((Arc::from(field), Some((*at, text))));
                continue;
            }
            out.push_str(",\"value\":");
            out.push_str(&text);
            out.push('}');
            fresh.push((Arc::from(field), Some((seq, text))));
        } else {
            out.push_str(",\"value\":");
            out.push_str(&text);
            out.push('}');
            fresh.push((Arc::from(field), None));
        }
    }
    out.push(']');
    out
}

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
    fn graph(&mut self, thread: &str, id: i64) -> Result<(Arc<str>, Arc<str>), StoreError> {
        if let Some(g) = self.graphs.get(&id) {
            return Ok(g.clone());
        }
        let (path, hash): (String, String) = self
            .conn
            .query_row("SELECT path, hash FROM graphs WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?
            .ok_or_else(|| corrupt(thread, format!("graph {id} is not in `graphs`")))?;
        let g: (Arc<str>, Arc<str>) = (Arc::from(path), Arc::from(hash));
        self.graph_ids.insert(g.clone(), id);
        self.graphs.insert(id, g.clone());
        Ok(g)
    }

    /// Notes the large values a row that is now in holds.
    fn remember(&mut self, thread: &Arc<str>, fresh: Fresh) {
        if fresh.iter().all(|(_, f)| f.is_none()) && !self.written.contains_key(thread) {
            return;
        }
        if self.written.len() >= REMEMBERED_THREADS && !self.written.contains_key(thread) {
            self.written.clear();
        }
        let fields = self.written.entry(thread.clone()).or_default();
        for (field, written) in fresh {
            match written {
                Some(w) => fields.insert(field, w),
                // The field's last write in this row is small: a reference to this
                // row would find that one.
                None => fields.remove(&field),
            };
        }
    }

    /// Forgets what the thread wrote: its records may change under another process or
    /// a rollback, and a reference must name a record that holds its value.
    pub(super) fn forget(&mut self, thread: &str) {
        self.written.remove(thread);
    }

    /// Inserts one record, sharing large values the thread wrote before when `share`.
    pub(super) fn insert(&mut self, r: &Checkpoint, share: bool) -> Result<(), StoreError> {
        let graph = self.graph_id(&r.graph, &r.graph_hash)?;
        let mut fresh = Vec::new();
        let writes = encode_writes(
            r.writes.iter().map(|w| (&*w.field, &*w.value)),
            if share {
                self.written.get(&*r.thread)
            } else {
                None
            },
            r.seq,
            &mut fresh,
        );
        let pending = r
            .pending
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| corrupt(&r.thread, e))?;
        let error = r.error.as_ref().map(Json::to_string);
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO checkpoints (thread, seq, run, step, node, next, writes, status, pending, outcome, graph, tokens, elapsed_ms, at_ms, limited, error, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
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
        ]);
        drop(stmt);
        match done {
            Ok(_) => {
                if share {
                    self.remember(&r.thread, fresh);
                }
                Ok(())
            }
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
        let thread_arc: Arc<str> = Arc::from(thread);
        // From 0 every row is read, a negative `seq` included, so that it is reported.
        let sql = match (last_only, from) {
            (true, _) => format!(
                "SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 AND ?2 = ?2 ORDER BY seq DESC LIMIT 1"
            ),
            (false, 0) => format!(
                "SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 AND ?2 = ?2 ORDER BY seq"
            ),
            (false, _) => format!(
                "SELECT {COLUMNS} FROM checkpoints WHERE thread = ?1 AND seq >= ?2 ORDER BY seq"
            ),
        };
        let rows: Vec<Row> = {
            let mut stmt = self.conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params![thread, int(from)], |row| {
                Ok(decode(&thread_arc, row))
            })?;
            rows.map(|r| r?).collect::<Result<_, _>>()?
        };
        let mut out: Vec<Checkpoint> = Vec::with_capacity(rows.len());
        for (mut record, raw, graph) in rows {
            // Records are numbered from 0 without a gap; a missing one would make the
            // replay skip its writes and resume from the wrong step.
            if !last_only {
                let want = from + out.len() as u64;
                if record.seq != want {
                    return Err(corrupt(
                        thread,
                        if record.seq > want + 1 {
                            format!("records {want} to {} are missing", record.seq - 1)
                        } else {
                            format!("record {want} is missing")
                        },
                    ));
                }
            }
            (record.graph, record.graph_hash) = self.graph(thread, graph)?;
            record.writes = self.resolve(thread, raw, &out, from)?;
            out.push(record);
        }
        Ok(out)
    }

    /// Values for the writes of a row: references looked up in `earlier` (the records
    /// from `from` on, already read) or read from their record.
    fn resolve(
        &mut self,
        thread: &str,
        raw: Vec<(Arc<str>, Raw)>,
        earlier: &[Checkpoint],
        from: u64,
    ) -> Result<Vec<Write>, StoreError> {
        raw.into_iter()
            .map(|(field, raw)| {
                let value = match raw {
                    Raw::Value(v) => v,
                    Raw::Same(seq) => {
                        let loaded = seq
                            .checked_sub(from)
                            .and_then(|i| earlier.get(usize::try_from(i).ok()?))
                            .and_then(|r| r.writes.iter().rev().find(|w| w.field == field))
                            .map(|w| w.value.clone());
                        match loaded {
                            Some(v) => v,
                            None => self.value_at(thread, seq, &field)?,
                        }
                    }
                };
                Ok(Write { field, value })
            })
            .collect()
    }

    /// The value `field` got in record `seq` of `thread`, read from that row.
    fn value_at(&mut self, thread: &str, seq: u64, field: &str) -> Result<Arc<Json>, StoreError> {
        let missing = || {
            corrupt(
                thread,
                format!("record {seq} holds no value of `{field}`, which a later record refers to"),
            )
        };
        let text = self
            .conn
            .prepare_cached("SELECT writes FROM checkpoints WHERE thread = ?1 AND seq = ?2")?
            .query_row(params![thread, int(seq)], |r| {
                Ok(unpack(thread, r.get_ref(0)?, "writes"))
            })
            .optional()?
            .ok_or_else(missing)??;
        // The field's last value written in full in that row (a row may refer to
        // itself when it writes one value twice).
        parse_writes(thread, &text, "writes")?
            .into_iter()
            .rev()
            .find_map(|(f, raw)| match raw {
                Raw::Value(v) if &*f == field => Some(v),
                _ => None,
            })
            .ok_or_else(missing)
    }

    pub(super) fn put_snapshot(&mut self, s: &Snapshot) -> Result<(), StoreError> {
        let graph = self.graph_id(&s.graph, &s.graph_hash)?;
        // Shared with the records: a snapshot names the record of a large value
        // rather than holding it again. Nothing is remembered from it.
        let state = encode_writes(
            s.values.iter().map(|(f, v)| (&**f, &**v)),
            self.written.get(&*s.thread),
            s.seq,
            &mut Vec::new(),
        );
        self.conn.execute(
            "INSERT OR REPLACE INTO snapshots (thread, seq, graph, state) VALUES (?1, ?2, ?3, ?4)",
            params![&*s.thread, int(s.seq), graph, pack(state, self.compress)],
        )?;
        Ok(())
    }

    pub(super) fn snapshot(&mut self, thread: &str) -> Result<Option<Snapshot>, StoreError> {
        let row = self
            .conn
            .prepare_cached("SELECT seq, graph, state FROM snapshots WHERE thread = ?1")?
            .query_row([thread], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    unpack(thread, r.get_ref(2)?, "snapshot"),
                ))
            })
            .optional()?;
        let Some((seq, graph, state)) = row else {
            return Ok(None);
        };
        let state = state?;
        let seq =
            u64::try_from(seq).map_err(|_| corrupt(thread, "a snapshot's `seq` is negative"))?;
        // The records up to it must all be there, numbered from 0: a thread whose
        // history has a gap or an odd record is read whole, which reports it.
        let (count, first): (i64, Option<i64>) = self
            .conn
            .prepare_cached(
                "SELECT count(*), min(seq) FROM checkpoints WHERE thread = ?1 AND seq <= ?2",
            )?
            .query_row(params![thread, int(seq)], |r| Ok((r.get(0)?, r.get(1)?)))?;
        if first != Some(0) || u64::try_from(count).ok() != Some(seq + 1) {
            return Ok(None);
        }
        let (graph, graph_hash) = self.graph(thread, graph)?;
        let raw = parse_writes(thread, &state, "snapshot")?;
        let values = self
            .resolve(thread, raw, &[], u64::MAX)?
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
}

/// One row of `COLUMNS` as a checkpoint (its graph and writes to be filled in); a value
/// that cannot be one (a negative count, a status or JSON this version does not read)
/// makes the record corrupt.
fn decode(thread: &Arc<str>, row: &rusqlite::Row<'_>) -> Result<Row, StoreError> {
    let count = |i: usize, name: &str| -> Result<u64, StoreError> {
        let n: i64 = row.get(i)?;
        u64::try_from(n).map_err(|_| corrupt(thread, format!("`{name}` is {n}")))
    };
    let writes = unpack(thread, row.get_ref(5)?, "writes")?;
    let writes = parse_writes(thread, &writes, "writes")?;
    let pending: Option<String> = row.get(7)?;
    let pending: Option<Pending> = pending
        .map(|p| parse_deep(&p))
        .transpose()
        .map_err(|e| corrupt(thread, format!("`pending`: {e}")))?;
    let error: Option<String> = row.get(14)?;
    let error: Option<Json> = error
        .map(|t| parse_deep(&t))
        .transpose()
        .map_err(|e| corrupt(thread, format!("`error`: {e}")))?;
    let status: String = row.get(6)?;
    let source: String = row.get(15)?;
    let record = Checkpoint {
        thread: thread.clone(),
        seq: count(0, "seq")?,
        run: count(1, "run")?,
        step: count(2, "step")?,
        node: row.get::<_, Option<String>>(3)?.map(Arc::from),
        next: row.get::<_, Option<String>>(4)?.map(Arc::from),
        writes: Vec::new(),
        status: Status::parse(&status)
            .ok_or_else(|| corrupt(thread, format!("unknown status `{status}`")))?,
        pending,
        outcome: row.get(8)?,
        graph: Arc::from(""),
        graph_hash: Arc::from(""),
        tokens: count(10, "tokens")?,
        elapsed_ms: count(11, "elapsed_ms")?,
        at_ms: count(12, "at_ms")?,
        limited: row.get(13)?,
        error,
        source: Source::parse(&source)
            .ok_or_else(|| corrupt(thread, format!("unknown source `{source}`")))?,
    };
    Ok((record, writes, row.get(9)?))
}

/// Removes a thread's records from `seq` on, and its snapshot if it is of one of them.
pub(super) fn truncate(conn: &Connection, thread: &str, seq: u64) -> Result<(), StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    tx.execute(
        "DELETE FROM checkpoints WHERE thread = ?1 AND seq >= ?2",
        params![thread, int(seq)],
    )?;
    tx.execute(
        "DELETE FROM snapshots WHERE thread = ?1 AND seq >= ?2",
        params![thread, int(seq)],
    )?;
    tx.commit()?;
    Ok(())
}
