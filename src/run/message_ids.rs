//! Ids of the messages written to `messages` fields. LangChain's front ends tell
//! messages apart by id (which message an interrupt card or a branch switch belongs
//! to), so every message a thread holds has one: kept when given, else made when it
//! is written, before the write is recorded, so a replay of the records reads the same
//! ids.
//!
//! A made id is a UUID (version 8, its bits from SHA-256) of where the message was
//! written: the thread, and the run and step of the node that wrote it (or the record,
//! for an input or a person's update), and its place among that write's messages. The
//! same run makes the same ids, so a recording replayed gives the same state, and a
//! reader of the run's events knows a streamed reply's id before the message is
//! written: the first assistant message a step writes without an id is its reply
//! ([`reply_id`]), the id its streamed text carried.

use crate::graph::{FieldId, Graph};
use crate::spec::{Reducer, is_message};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Where messages are being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WrittenAt {
    /// By the node at `step` of run `run` (a run's input is its step 0).
    Step { run: u64, step: u64 },
    /// By a person's update, recorded as checkpoint `seq`.
    Record { seq: u64 },
}

/// The id of the reply a step streamed: the id its first assistant message without an
/// id of its own is given.
pub fn reply_id(thread: &str, run: u64, step: u64) -> String {
    made_id(thread, WrittenAt::Step { run, step }, None)
}

fn made_id(thread: &str, at: WrittenAt, index: Option<usize>) -> String {
    let mut h = Sha256::new();
    h.update(thread.as_bytes());
    // A separator no thread name holds (names are text), then the place.
    h.update([0]);
    match at {
        WrittenAt::Step { run, step } => {
            h.update(b"s");
            h.update(run.to_le_bytes());
            h.update(step.to_le_bytes());
        }
        WrittenAt::Record { seq } => {
            h.update(b"r");
            h.update(seq.to_le_bytes());
        }
    }
    match index {
        None => h.update(b"reply"),
        Some(i) => {
            h.update(b"i");
            h.update((i as u64).to_le_bytes());
        }
    }
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // Version 8 (custom), RFC 9562 variant.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

/// Gives ids to the messages of one step's (or input's, or update's) writes, counting
/// across its writes so that no two get the same.
pub(crate) struct MessageIds<'a> {
    thread: &'a str,
    at: WrittenAt,
    next: usize,
    replied: bool,
}

impl<'a> MessageIds<'a> {
    pub(crate) fn new(thread: &'a str, at: WrittenAt) -> Self {
        MessageIds {
            thread,
            at,
            next: 0,
            replied: false,
        }
    }

    /// `value` as written to `field`: when the field's reducer is `messages`, each
    /// message without an id given one. Copied only when one lacks an id.
    pub(crate) fn give(
        &mut self,
        graph: &Graph,
        field: FieldId,
        mut value: Arc<Json>,
    ) -> Arc<Json> {
        if graph.field(field).reducer != Reducer::Messages || !lacks_id(&value) {
            return value;
        }
        match Arc::make_mut(&mut value) {
            Json::Array(items) => items.iter_mut().for_each(|m| self.give_one(m)),
            one => self.give_one(one),
        }
        value
    }

    fn give_one(&mut self, m: &mut Json) {
        // What is not a message is refused by the reducer as it was written.
        if !is_message(m) {
            return;
        }
        let Json::Object(o) = m else { return };
        if o.get("id").is_some_and(|id| !id.is_null()) {
            return;
        }
        let reply = !self.replied
            && matches!(self.at, WrittenAt::Step { step, .. } if step > 0)
            && o.get("role").and_then(Json::as_str) == Some("assistant");
        let id = if reply {
            self.replied = true;
            made_id(self.thread, self.at, None)
        } else {
            self.next += 1;
            made_id(self.thread, self.at, Some(self.next - 1))
        };
        o.insert("id".into(), Json::String(id));
    }
}

fn lacks_id(value: &Json) -> bool {
    let lacks = |m: &Json| {
        is_message(m)
            && m.as_object()
                .is_some_and(|o| o.get("id").is_none_or(Json::is_null))
    };
    match value {
        Json::Array(items) => items.iter().any(lacks),
        one => lacks(one),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_ids_are_uuids_of_where_the_message_was_written() {
        let a = made_id("t1", WrittenAt::Step { run: 1, step: 2 }, Some(0));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8", "version 8: {a}");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "variant: {a}");
        // The same place, the same id; any other place, another.
        assert_eq!(
            a,
            made_id("t1", WrittenAt::Step { run: 1, step: 2 }, Some(0))
        );
        let others = [
            made_id("t2", WrittenAt::Step { run: 1, step: 2 }, Some(0)),
            made_id("t1", WrittenAt::Step { run: 2, step: 2 }, Some(0)),
            made_id("t1", WrittenAt::Step { run: 1, step: 3 }, Some(0)),
            made_id("t1", WrittenAt::Step { run: 1, step: 2 }, Some(1)),
            made_id("t1", WrittenAt::Step { run: 1, step: 2 }, None),
            made_id("t1", WrittenAt::Record { seq: 2 }, Some(0)),
        ];
        for o in &others {
            assert_ne!(&a, o);
        }
    }
}
