//! A paused thread of the memory store as compact bytes: its records and snapshot as
//! JSON, the graph file and hash once rather than per record, a large value written
//! again unchanged as a reference to the record that holds it, the whole compressed
//! with LZ4. A paused thread's value trees take many times the size of their JSON;
//! thousands of threads waiting for a person should cost what their data does.

use super::{Checkpoint, Pending, Snapshot, Source, Status, StoreError, Stored, Usage, Write};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

/// Values this long as JSON or longer are kept once while they stay the same.
const SHARED_BYTES: usize = 256;

#[derive(Serialize, Deserialize)]
struct Frozen {
    graph: Arc<str>,
    graph_hash: Arc<str>,
    records: Vec<Record>,
}

#[derive(Serialize, Deserialize)]
struct Record {
    seq: u64,
    run: u64,
    step: u64,
    node: Option<Arc<str>>,
    next: Option<Arc<str>>,
    writes: Vec<Value>,
    status: Status,
    pending: Option<Pending>,
    outcome: Option<String>,
    /// The graph when it is not the thread's (a thread resumed on an edited file).
    graph: Option<(Arc<str>, Arc<str>)>,
    limited: bool,
    error: Option<Json>,
    tokens: u64,
    #[serde(default)]
    usage: Usage,
    elapsed_ms: u64,
    at_ms: u64,
    source: Source,
    parent: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct FrozenSnapshot {
    seq: u64,
    graph: Arc<str>,
    graph_hash: Arc<str>,
    values: Vec<Value>,
}

/// A field's value, or the record whose last write of the field holds it.
#[derive(Serialize, Deserialize)]
enum Value {
    V(Arc<str>, Json),
    S(Arc<str>, u64),
}

/// Records of a thread, in order, as bytes.
pub(super) fn freeze_records(records: &[Checkpoint]) -> Vec<u8> {
    let (graph, graph_hash) = records
        .last()
        .map(|r| (r.graph.clone(), r.graph_hash.clone()))
        .unwrap_or_default();
    // Per field, the last large value written and its record.
    let mut last: HashMap<Arc<str>, (u64, String)> = HashMap::new();
    let mut value = |field: &Arc<str>, v: &Json, seq: u64| -> Value {
        let text = v.to_string();
        if text.len() < SHARED_BYTES {
            last.remove(field);
            return Value::V(field.clone(), v.clone());
        }
        if let Some((at, _)) = last.get(field).filter(|(_, t)| *t == text) {
            return Value::S(field.clone(), *at);
        }
        last.insert(field.clone(), (seq, text));
        Value::V(field.clone(), v.clone())
    };
    let records: Vec<Record> = records
        .iter()
        .map(|r| Record {
            seq: r.seq,
            run: r.run,
            step: r.step,
            node: r.node.clone(),
            next: r.next.clone(),
            writes: r
                .writes
                .iter()
                .map(|w| value(&w.field, &w.value, r.seq))
                .collect(),
            status: r.status,
            pending: r.pending.as_deref().cloned(),
            outcome: r.outcome.clone(),
            graph: (r.graph != graph || r.graph_hash != graph_hash)
                .then(|| (r.graph.clone(), r.graph_hash.clone())),
            limited: r.limited,
            error: r.error.as_deref().cloned(),
            tokens: r.tokens,
            usage: r.usage,
            elapsed_ms: r.elapsed_ms,
            at_ms: r.at_ms,
            source: r.source,
            parent: r.parent,
        })
        .collect();
    compress(&Frozen {
        graph,
        graph_hash,
        records,
    })
}

/// A snapshot as bytes, whole: resuming a thread reads its snapshot and nothing else.
pub(super) fn freeze_snapshot(s: &Snapshot) -> Vec<u8> {
    compress(&FrozenSnapshot {
        seq: s.seq,
        graph: s.graph.clone(),
        graph_hash: s.graph_hash.clone(),
        values: s
            .values
            .iter()
            .map(|(f, v)| Value::V(f.clone(), (**v).clone()))
            .collect(),
    })
}

fn compress(value: &impl Serialize) -> Vec<u8> {
    // Serializing values of bounded depth to bytes cannot fail.
    let json = serde_json::to_vec(value).unwrap_or_default();
    lz4_flex::compress_prepend_size(&json)
}

fn decompress<T: serde::de::DeserializeOwned>(thread: &str, bytes: &[u8]) -> Result<T, StoreError> {
    let text = unpacked(thread, bytes)?;
    let mut de = serde_json::Deserializer::from_str(&text);
    de.disable_recursion_limit();
    T::deserialize(&mut de).map_err(|e| corrupt_bytes(thread, e))
}

/// The JSON text `bytes` hold.
fn unpacked(thread: &str, bytes: &[u8]) -> Result<String, StoreError> {
    let json = lz4_flex::decompress_size_prepended(bytes).map_err(|e| corrupt_bytes(thread, e))?;
    String::from_utf8(json).map_err(|e| corrupt_bytes(thread, e))
}

fn corrupt_bytes(thread: &str, e: impl std::fmt::Display) -> StoreError {
    super::rows::corrupt(thread, format!("a paused thread's bytes: {e}"))
}

/// [`FrozenSnapshot`] as a resume reads it: values checked, not parsed.
#[derive(Deserialize)]
struct ThawedSnapshot<'a> {
    seq: u64,
    graph: Arc<str>,
    graph_hash: Arc<str>,
    #[serde(borrow)]
    values: Vec<RawValue<'a>>,
}

/// [`Value`], checked but not parsed.
#[derive(Deserialize)]
enum RawValue<'a> {
    V(Arc<str>, #[serde(borrow)] &'a serde_json::value::RawValue),
    S(Arc<str>, serde::de::IgnoredAny),
}

/// The snapshot [`freeze_snapshot`] made `bytes` of.
pub(super) fn thaw_snapshot(thread: &Arc<str>, bytes: &[u8]) -> Result<Snapshot, StoreError> {
    thaw_stored(thread, bytes).map(Snapshot::parsed)
}

/// The snapshot [`freeze_snapshot`] made `bytes` of, its large values left as text.
pub(super) fn thaw_stored(thread: &Arc<str>, bytes: &[u8]) -> Result<Snapshot<Stored>, StoreError> {
    let text = unpacked(thread, bytes)?;
    let mut de = serde_json::Deserializer::from_str(&text);
    de.disable_recursion_limit();
    let s = ThawedSnapshot::deserialize(&mut de).map_err(|e| corrupt_bytes(thread, e))?;
    let values = s
        .values
        .into_iter()
        .map(|v| match v {
            RawValue::V(f, v) => Ok((f, Stored::from_raw(thread, v, "snapshot")?)),
            RawValue::S(f, _) => Err(super::rows::corrupt(
                thread,
                format!("a paused thread's snapshot refers to a record for `{f}`"),
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok(Snapshot {
        thread: thread.clone(),
        seq: s.seq,
        graph: s.graph,
        graph_hash: s.graph_hash,
        values,
    })
}

/// The records [`freeze_records`] made `bytes` of, those from `from` on.
pub(super) fn thaw_records(
    thread: &Arc<str>,
    bytes: &[u8],
    from: u64,
) -> Result<Vec<Checkpoint>, StoreError> {
    let frozen: Frozen = decompress(thread, bytes)?;
    let corrupt = |message: String| StoreError::Corrupt {
        thread: thread.to_string(),
        message,
    };
    let first = frozen.records.first().map_or(0, |r| r.seq);
    let mut out: Vec<Checkpoint> = Vec::with_capacity(frozen.records.len());
    // The value a reference names: the last write of the field in that record (which
    // may be the record being read, when it writes one value twice).
    let shared = |out: &[Checkpoint],
                  current: (u64, &[Write]),
                  field: &str,
                  seq: u64|
     -> Result<Arc<Json>, StoreError> {
        let writes = if current.0 == seq {
            Some(current.1)
        } else {
            seq.checked_sub(first)
                .and_then(|i| out.get(usize::try_from(i).ok()?))
                .filter(|r| r.seq == seq)
                .map(|r| r.writes.as_slice())
        };
        writes
            .and_then(|w| w.iter().rev().find(|w| &*w.field == field))
            .map(|w| w.value.clone())
            .ok_or_else(|| corrupt(format!("record {seq} holds no value of `{field}`")))
    };
    for r in frozen.records {
        let mut writes: Vec<Write> = Vec::with_capacity(r.writes.len());
        for w in r.writes {
            let write = match w {
                Value::V(field, v) => Write {
                    field,
                    value: Arc::new(v),
                },
                Value::S(field, seq) => Write {
                    value: shared(&out, (r.seq, &writes), &field, seq)?,
                    field,
                },
            };
            writes.push(write);
        }
        let (graph, graph_hash) = r
            .graph
            .unwrap_or_else(|| (frozen.graph.clone(), frozen.graph_hash.clone()));
        out.push(Checkpoint {
            thread: thread.clone(),
            seq: r.seq,
            run: r.run,
            step: r.step,
            node: r.node,
            next: r.next,
            writes,
            status: r.status,
            pending: r.pending.map(Box::new),
            outcome: r.outcome,
            graph,
            graph_hash,
            limited: r.limited,
            error: r.error.map(Box::new),
            tokens: r.tokens,
            usage: r.usage,
            elapsed_ms: r.elapsed_ms,
            at_ms: r.at_ms,
            source: r.source,
            parent: r.parent,
        });
    }
    // Earlier ones were read for the references of later ones.
    out.retain(|r| r.seq >= from);
    Ok(out)
}
