//! What the SQLite and the Postgres store share: a record's writes as one JSON text,
//! large unchanged values as references, and reading that text back.
//!
//! A record's writes are a JSON array of `{"field", "value"}`. A large value (at least
//! [`SHARED_BYTES`] of JSON) that a thread writes again unchanged (the agent's page
//! snapshot when the page did not change, a tool's same answer) is stored as
//! `{"field", "same": SEQ}` instead: the value is the one that field got in record SEQ
//! of the thread. Snapshots keep their values the same way. Reading resolves the
//! references, so nothing above the store sees them.

use crate::fxhash::FxHashMap;
use crate::store::{Checkpoint, Pending, StoreError, Write};
use serde::Deserialize;
use serde_json::Value as Json;
use std::sync::Arc;

/// JSON this long or longer is written once per thread and field while it stays the
/// same; shorter values cost less than the reference would save.
pub(super) const SHARED_BYTES: usize = 256;

/// Threads whose last large values are remembered, for [`SHARED_BYTES`]; past this
/// the memory is cleared and starts again (references are only a saving).
const REMEMBERED_THREADS: usize = 1024;

/// A catalog row's body (a cron's, an assistant version's): a JSON object as text,
/// else the row is corrupt. `what` names the row for the message.
pub(super) fn body(
    text: &str,
    what: impl FnOnce() -> String,
) -> Result<serde_json::Map<String, Json>, StoreError> {
    match serde_json::from_str(text) {
        Ok(Json::Object(body)) => Ok(body),
        _ => Err(StoreError::CorruptCatalog {
            what: what(),
            message: "its body is not a JSON object".into(),
        }),
    }
}

/// Counts are stored as signed 64-bit integers; none comes near the limit.
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

/// A column's JSON, or the record is corrupt, naming the column.
pub(super) fn parse_column<T: serde::de::DeserializeOwned>(
    thread: &str,
    text: Option<String>,
    what: &str,
) -> Result<Option<T>, StoreError> {
    text.map(|t| parse_deep(&t))
        .transpose()
        .map_err(|e| corrupt(thread, format!("`{what}`: {e}")))
}

/// A record's pending interrupt and error as stored.
pub(super) fn pending_and_error(
    r: &Checkpoint,
) -> Result<(Option<String>, Option<String>), StoreError> {
    let pending = r
        .pending
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| corrupt(&r.thread, e))?;
    Ok((pending, r.error.as_deref().map(Json::to_string)))
}

/// A count read back: a negative one makes the record corrupt.
pub(super) fn count(thread: &str, n: i64, name: &str) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| corrupt(thread, format!("`{name}` is {n}")))
}

/// Checks that `seq` is the next record after `read` records from `from`: records are
/// numbered from 0 without a gap, and a missing one would make the replay skip its
/// writes and resume from the wrong step.
pub(super) fn check_next(thread: &str, seq: u64, from: u64, read: usize) -> Result<(), StoreError> {
    let want = from + read as u64;
    if seq == want {
        return Ok(());
    }
    Err(corrupt(
        thread,
        if seq > want + 1 {
            format!("records {want} to {} are missing", seq - 1)
        } else {
            format!("record {want} is missing")
        },
    ))
}

/// Where a read of a thread's records from `from` starts counting: at `from`, or at
/// the first record when it is a pruned thread's base (the records before it are gone
/// on purpose).
pub(super) fn first_seq(r: &Checkpoint, from: u64, read: usize) -> u64 {
    if read == 0 && r.source == crate::store::Source::Base && r.seq >= from {
        r.seq
    } else {
        from
    }
}

/// Whether a snapshot at `seq` stands on every record up to it: `count` records at or
/// before it, the first at `first`, which is 0 or a pruned thread's base.
pub(super) fn snapshot_whole(
    seq: u64,
    count: i64,
    first: Option<i64>,
    first_source: Option<&str>,
) -> bool {
    let Some(first) = first.and_then(|f| u64::try_from(f).ok()) else {
        return false;
    };
    (first == 0 || first_source == Some("base"))
        && first <= seq
        && u64::try_from(count).ok() == Some(seq - first + 1)
}

/// [`snapshot_whole`] when this process found the thread's records whole up to
/// `whole_to` before: `count` is of the records after it only, and `own` says whether
/// the snapshot's own record is there.
pub(super) fn snapshot_whole_after(
    seq: u64,
    count: i64,
    first: Option<i64>,
    first_source: Option<&str>,
    whole_to: u64,
    own: bool,
) -> bool {
    // The records from the first to `whole_to` (or to the snapshot's, if earlier) are
    // there, as found before; a prune may have moved the first past `whole_to`.
    let known = first
        .and_then(|f| u64::try_from(f).ok())
        .filter(|f| *f <= whole_to)
        .map_or(0, |f| seq.min(whole_to) + 1 - f.min(seq + 1));
    own && snapshot_whole(seq, count.saturating_add(int(known)), first, first_source)
}

/// Per thread, the record up to which this process knows its records are all there
/// (it wrote them in order, or counted them), so that a resume counts only the ones
/// after: its cost does not grow with the history. Kept across claims: Switchyard
/// removes records only from a thread's end (a rollback, which forgets this), its
/// start (a prune: the first record is read every time) or all of them, never from
/// the middle; a gap made by hand after this process looked is found by the next
/// process and by any whole read (`history`). The resume needs only the snapshot.
#[derive(Default)]
pub(super) struct WholeTo(FxHashMap<Arc<str>, u64>);

impl WholeTo {
    pub(super) fn get(&self, thread: &str) -> Option<u64> {
        self.0.get(thread).copied()
    }

    /// The records of `thread` up to `seq` were found all there.
    pub(super) fn found(&mut self, thread: &str, seq: u64) {
        if let Some(w) = self.0.get_mut(thread) {
            *w = (*w).max(seq);
            return;
        }
        if self.0.len() >= REMEMBERED_THREADS {
            self.0.clear();
        }
        self.0.insert(Arc::from(thread), seq);
    }

    /// Record `seq` of `thread` was just written: the next after those known whole, or
    /// the first of a new thread.
    pub(super) fn appended(&mut self, thread: &str, seq: u64) {
        match self.0.get_mut(thread) {
            Some(w) if *w + 1 == seq => *w = seq,
            None if seq == 0 => self.found(thread, 0),
            _ => {}
        }
    }

    pub(super) fn forget(&mut self, thread: &str) {
        self.0.remove(thread);
    }
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
pub(super) enum Raw {
    Value(Arc<Json>),
    Same(u64),
}

pub(super) fn parse_writes(
    thread: &str,
    text: &str,
    what: &str,
) -> Result<Vec<(Arc<str>, Raw)>, StoreError> {
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

/// The value `field` was last written in full in a row's writes `text` (a row may refer
/// to itself when it writes one value twice): what a later reference to that row means.
pub(super) fn full_value(
    thread: &str,
    text: &str,
    seq: u64,
    field: &str,
) -> Result<Arc<Json>, StoreError> {
    parse_writes(thread, text, "writes")?
        .into_iter()
        .rev()
        .find_map(|(f, raw)| match raw {
            Raw::Value(v) if &*f == field => Some(v),
            _ => None,
        })
        .ok_or_else(|| missing(thread, seq, field))
}

/// A reference to a record that holds no such value.
pub(super) fn missing(thread: &str, seq: u64, field: &str) -> StoreError {
    corrupt(
        thread,
        format!("record {seq} holds no value of `{field}`, which a later record refers to"),
    )
}

/// Values for the writes of a row: references looked up in `earlier` (the records from
/// `from` on, already read) or read from their record by `value_at`.
pub(super) fn resolve(
    raw: Vec<(Arc<str>, Raw)>,
    earlier: &[Checkpoint],
    from: u64,
    mut value_at: impl FnMut(u64, &str) -> Result<Arc<Json>, StoreError>,
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
                        None => value_at(seq, &field)?,
                    }
                }
            };
            Ok(Write { field, value })
        })
        .collect()
}

/// Per field of a thread, the last large value written in full: its record and text.
type Remembered = FxHashMap<Arc<str>, (u64, String)>;

/// What a row changes in what the thread's fields last held: a large value written in
/// full (its record and text), or a small one (none: nothing to refer to).
pub(super) type Fresh = Vec<(Arc<str>, Option<(u64, String)>)>;

/// What this process remembers of the large values threads wrote, so that the same
/// value written again is stored as a reference.
#[derive(Default)]
pub(super) struct Written(FxHashMap<Arc<str>, Remembered>);

impl Written {
    /// Writes as stored, sharing large values the thread wrote before (when `share`);
    /// `fresh` collects how the row changes what is remembered, applied by
    /// [`Written::remember`] once the row is in.
    pub(super) fn encode<'w>(
        &self,
        thread: &str,
        share: bool,
        writes: impl Iterator<Item = (&'w str, &'w Json)>,
        seq: u64,
        fresh: &mut Fresh,
    ) -> String {
        let remembered = if share { self.0.get(thread) } else { None };
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

    /// Notes the large values a row that is now in holds.
    pub(super) fn remember(&mut self, thread: &Arc<str>, fresh: Fresh) {
        if fresh.iter().all(|(_, f)| f.is_none()) && !self.0.contains_key(thread) {
            return;
        }
        if self.0.len() >= REMEMBERED_THREADS && !self.0.contains_key(thread) {
            self.0.clear();
        }
        let fields = self.0.entry(thread.clone()).or_default();
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
        self.0.remove(thread);
    }
}

/// A pending interrupt read back.
pub(super) fn parse_pending(
    thread: &str,
    text: Option<String>,
) -> Result<Option<Pending>, StoreError> {
    parse_column(thread, text, "pending")
}

/// An item's vectors as a store keeps them: JSON, none when there are none.
pub(super) fn vectors_text(vectors: &[Vec<f32>]) -> Option<String> {
    (!vectors.is_empty()).then(|| serde_json::to_string(vectors).unwrap_or_default())
}

/// An item's vectors as a store kept them (see [`vectors_text`]).
pub(super) fn vectors(text: &str, key: &str, namespace: &str) -> Result<Vec<Vec<f32>>, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::CorruptCatalog {
        what: format!("item `{key}` of namespace `{namespace}`"),
        message: format!("its vectors are not lists of numbers: {e}"),
    })
}
