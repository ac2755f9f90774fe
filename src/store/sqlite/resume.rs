//! A resume's read: a paused thread's snapshot, the checks that it stands on every
//! record before it, and the records after it, in one read transaction.

use super::Inner;
use super::records::{Row, decode, unpack, writes_of};
use crate::store::rows::{corrupt, int, missing, resolve, snapshot_whole};
use crate::store::stored::{Stored, raw_writes};
use crate::store::{Checkpoint, Snapshot, StoreError};
use rusqlite::types::ValueRef;
use rusqlite::{OptionalExtension, params};
use serde_json::Value as Json;
use std::sync::Arc;

impl Inner {
    /// The thread's snapshot, its values as [`Stored`], with its records from the
    /// snapshot's on: none when it has no snapshot, or one that does not stand on
    /// every record before it (numbered from 0 or from a pruned thread's base), and then
    /// the caller reads the thread whole, which reports the gap.
    ///
    /// One statement in the common case, a paused thread (its snapshot's record its
    /// last): the snapshot, its record, and the checks (the first record; a mark left
    /// by a record removed by hand, see `layout::RECOUNT`; records after the
    /// snapshot's). Only a marked thread has its records counted, so a resume costs
    /// the same however long the history, in a process that never read the thread too.
    pub(super) fn resume_point(
        &mut self,
        thread: &str,
    ) -> Result<(Option<Snapshot<Stored>>, Vec<Checkpoint>), StoreError> {
        // One read transaction: the snapshot, the records its references name and those
        // after it agree, whatever another process removes or appends meanwhile.
        self.conn.prepare_cached("BEGIN")?.execute([])?;
        let read = self.read_resume_point(thread);
        let end = self.conn.prepare_cached("COMMIT")?.execute([]);
        if end.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        let read = read?;
        end?;
        Ok(read)
    }

    /// [`Inner::resume_point`] inside its transaction.
    fn read_resume_point(
        &mut self,
        thread: &str,
    ) -> Result<(Option<Snapshot<Stored>>, Vec<Checkpoint>), StoreError> {
        let Some(found) = self.find_snapshot(thread)? else {
            return Ok((None, Vec::new()));
        };
        let seq = found.head.seq;
        let snapshot = self.snapshot_values(thread, found.head)?;
        let records = match found.own {
            Some(own) => vec![self.resolved(thread, own)?],
            // Records after the snapshot's: a person's updates while it was paused.
            None => self.select(thread, seq, false)?,
        };
        Ok((Some(snapshot), records))
    }

    /// The thread's snapshot row and its record, if the snapshot stands on every
    /// record before it; the record only when it is the thread's last.
    fn find_snapshot(&mut self, thread: &str) -> Result<Option<Found>, StoreError> {
        let sql = if self.marks {
            FIND_SNAPSHOT
        } else {
            FIND_SNAPSHOT_UNMARKED
        };
        let thread_arc: Arc<str> = Arc::from(thread);
        let row = self
            .conn
            .prepare_cached(sql)?
            .query_row([thread], |r| {
                let own = match r.get_ref(7)? {
                    ValueRef::Null => None,
                    _ => Some(decode(&thread_arc, r, 7)),
                };
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    unpack(thread, r.get_ref(2)?, "snapshot"),
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, bool>(5)?,
                    r.get::<_, bool>(6)?,
                    own,
                ))
            })
            .optional()?;
        let Some((seq, graph, state, first, first_source, marked, more, own)) = row else {
            return Ok(None);
        };
        let seq =
            u64::try_from(seq).map_err(|_| corrupt(thread, "a snapshot's `seq` is negative"))?;
        // Unmarked, the records from the first to the snapshot's are all there when
        // both ends are; marked, they are counted.
        let count = if marked {
            self.conn
                .prepare_cached("SELECT count(*) FROM checkpoints WHERE thread = ?1 AND seq <= ?2")?
                .query_row(params![thread, int(seq)], |r| r.get::<_, i64>(0))?
        } else if own.is_some() {
            first
                .filter(|f| (0..=int(seq)).contains(f))
                .map_or(0, |f| int(seq) - f + 1)
        } else {
            0
        };
        if !snapshot_whole(seq, count, first, first_source.as_deref()) {
            return Ok(None);
        }
        let head = Head {
            seq,
            graph,
            state: state?,
        };
        let own = if more { None } else { own.transpose()? };
        Ok(Some(Found { head, own }))
    }

    /// A snapshot row's values, large ones left as text, references read from the
    /// records that hold them.
    fn snapshot_values(
        &mut self,
        thread: &str,
        head: Head,
    ) -> Result<Snapshot<Stored>, StoreError> {
        let (graph, graph_hash) = self.graph(thread, head.graph)?;
        let mut values = Vec::new();
        for w in raw_writes(thread, &head.state, "snapshot")? {
            let value = match (w.same, w.value) {
                (Some(seq), _) => self.stored_at(thread, seq, &w.field)?,
                (None, Some(v)) => Stored::from_raw(thread, v, "snapshot")?,
                (None, None) => Stored::Json(Arc::new(Json::Null)),
            };
            values.push((w.field, value));
        }
        Ok(Snapshot {
            thread: Arc::from(thread),
            seq: head.seq,
            graph,
            graph_hash,
            values,
        })
    }

    /// A record decoded by [`decode`] with its graph and its references resolved.
    fn resolved(&mut self, thread: &str, row: Row) -> Result<Checkpoint, StoreError> {
        let (mut record, raw, graph) = row;
        (record.graph, record.graph_hash) = self.graph(thread, graph)?;
        let seq = record.seq;
        record.writes = resolve(raw, &[], seq, |seq, field| {
            self.value_at(thread, seq, field)
        })?;
        Ok(record)
    }

    /// The value `field` got in record `seq` of `thread`, as [`Stored`].
    fn stored_at(&mut self, thread: &str, seq: u64, field: &str) -> Result<Stored, StoreError> {
        let text = writes_of(&self.conn, thread, seq, field)?;
        let writes = raw_writes(thread, &text, "writes")?;
        let value = writes
            .iter()
            .rev()
            .find(|w| &*w.field == field && w.same.is_none())
            .ok_or_else(|| missing(thread, seq, field))?;
        match value.value {
            Some(v) => Stored::from_raw(thread, v, "writes"),
            None => Ok(Stored::Json(Arc::new(Json::Null))),
        }
    }
}

/// A snapshot row.
struct Head {
    seq: u64,
    graph: i64,
    state: String,
}

/// What [`Inner::find_snapshot`] found.
struct Found {
    head: Head,
    /// The snapshot's record, when it is the thread's last.
    own: Option<Row>,
}

/// The snapshot, the checks, and the snapshot's record (`COLUMNS` from column 7), with
/// `$marked` for whether the thread's records are to be counted.
macro_rules! find_snapshot {
    ($marked:literal) => {
        concat!(
            "SELECT s.seq, s.graph, s.state, f.first,
                    CASE WHEN f.first <> 0 THEN
                        (SELECT source FROM checkpoints WHERE thread = ?1 ORDER BY seq LIMIT 1)
                    END, ",
            $marked,
            ", EXISTS (SELECT 1 FROM checkpoints WHERE thread = ?1 AND seq > s.seq),
                    c.seq, c.run, c.step, c.node, c.next, c.writes, c.status, c.pending,
                    c.outcome, c.graph, c.tokens, c.elapsed_ms, c.at_ms, c.limited, c.error,
                    c.source, c.parent, c.usage
             FROM snapshots s
             JOIN (SELECT min(seq) AS first FROM checkpoints WHERE thread = ?1) f
             LEFT JOIN checkpoints c ON c.thread = ?1 AND c.seq = s.seq
             WHERE s.thread = ?1"
        )
    };
}

/// A marked thread's records are counted (see `layout::RECOUNT`).
const FIND_SNAPSHOT: &str = find_snapshot!("EXISTS (SELECT 1 FROM recount WHERE thread = ?1)");

/// [`FIND_SNAPSHOT`] for a file without marks (opened read-only, made by an older
/// build): every thread counted.
const FIND_SNAPSHOT_UNMARKED: &str = find_snapshot!("1");
