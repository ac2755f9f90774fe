//! Ids of the messages written to `messages` fields. LangChain's front ends tell
//! messages apart by id (which message an interrupt card or a branch switch belongs
//! to), so every message a thread holds has one: kept when given, else made when it
//! is written, before the write is recorded, so a replay of the records reads the same
//! ids.
//!
//! A made id is a UUID (version 8, its bits from SHA-256) of where the message was
//! written: the thread, the checkpoint that records it (unique in the thread, whatever
//! wrote it: a node, an input, a person's update) and its place among that
//! checkpoint's messages. The first assistant message a node's step writes without an
//! id is its reply: its id is made of the thread, run and step instead ([`reply_id`]),
//! so a reader of the run's events knows it before the message is written, and gives
//! it to the streamed text. The same run makes the same ids, so a recording replayed
//! gives the same state.

use crate::graph::{FieldId, Graph};
use crate::spec::{FieldType, is_message};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Where messages are being written: the checkpoint that will record them (`seq`,
/// unique in the thread whatever writes there), and for a node's step its run and
/// step, which name its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WrittenAt {
    pub(crate) seq: u64,
    pub(crate) step: Option<(u64, u64)>,
}

/// The id of the reply a step streamed: the id its first assistant message without an
/// id of its own is given.
pub fn reply_id(thread: &str, run: u64, step: u64) -> String {
    made_id(thread, Place::Reply { run, step })
}

/// The id of the interrupt the checkpoint `seq` of `thread` paused at: unique across
/// threads, as LangGraph's interrupt ids are, and the same however often it is read.
pub fn interrupt_id(thread: &str, seq: u64) -> String {
    made_id(thread, Place::Interrupt { seq })
}

enum Place {
    Reply { run: u64, step: u64 },
    Interrupt { seq: u64 },
    Indexed { seq: u64, index: usize },
}

fn made_id(thread: &str, place: Place) -> String {
    let mut h = Sha256::new();
    h.update(thread.as_bytes());
    // A separator no thread name holds (names are text), then the place.
    h.update([0]);
    match place {
        Place::Reply { run, step } => {
            h.update(b"reply");
            h.update(run.to_le_bytes());
            h.update(step.to_le_bytes());
        }
        Place::Interrupt { seq } => {
            h.update(b"interrupt");
            h.update(seq.to_le_bytes());
        }
        Place::Indexed { seq, index } => {
            h.update(b"at");
            h.update(seq.to_le_bytes());
            h.update((index as u64).to_le_bytes());
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

/// Gives ids to the messages of one checkpoint's writes (a step's, an input's, an
/// update's), counting across its writes so that no two get the same.
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

    /// `value` as written to `field`: when the field holds messages, each message
    /// without an id given one. Copied only when one lacks an id.
    pub(crate) fn give(
        &mut self,
        graph: &Graph,
        field: FieldId,
        mut value: Arc<Json>,
    ) -> Arc<Json> {
        if !matches!(graph.field(field).ty.base(), FieldType::Messages) || !lacks_id(&value) {
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
        let reply = match self.at.step {
            Some((run, step))
                if !self.replied
                    && step > 0
                    && o.get("role").and_then(Json::as_str) == Some("assistant") =>
            {
                Some(Place::Reply { run, step })
            }
            _ => None,
        };
        let place = match reply {
            Some(p) => {
                self.replied = true;
                p
            }
            None => {
                self.next += 1;
                Place::Indexed {
                    seq: self.at.seq,
                    index: self.next - 1,
                }
            }
        };
        o.insert("id".into(), Json::String(made_id(self.thread, place)));
    }
}

/// An AI message, in either shape a `messages` field holds: the chat API's
/// (`role: "assistant"`) or LangChain's (`type: "ai"`).
pub(crate) fn is_ai(m: &Json) -> bool {
    m.get("role").and_then(Json::as_str) == Some("assistant")
        || m.get("type").and_then(Json::as_str) == Some("ai")
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
        let a = made_id("t1", Place::Indexed { seq: 2, index: 0 });
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8", "version 8: {a}");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "variant: {a}");
        // The same place, the same id; any other place, another.
        assert_eq!(a, made_id("t1", Place::Indexed { seq: 2, index: 0 }));
        let others = [
            made_id("t2", Place::Indexed { seq: 2, index: 0 }),
            made_id("t1", Place::Indexed { seq: 3, index: 0 }),
            made_id("t1", Place::Indexed { seq: 2, index: 1 }),
            made_id("t1", Place::Reply { run: 0, step: 2 }),
        ];
        for o in &others {
            assert_ne!(&a, o);
        }
        assert_ne!(reply_id("t1", 0, 2), reply_id("t1", 1, 2));
        assert_ne!(reply_id("t1", 0, 2), reply_id("t1", 0, 3));
        // An interrupt's id is its thread's and checkpoint's: another thread paused at
        // the same checkpoint number has another.
        assert_eq!(interrupt_id("t1", 4), interrupt_id("t1", 4));
        assert_ne!(interrupt_id("t1", 4), interrupt_id("t2", 4));
        assert_ne!(interrupt_id("t1", 4), interrupt_id("t1", 5));
    }
}
