//! [`Shared`]: the frames of one run's stream in one set of modes, made by the first
//! reader to reach each event and sent as they are by every other reader of those
//! modes, while any of them follows the run. A thousand readers of a run serialise
//! each part once, not a thousand times. What is kept is bounded: past
//! [`BUDGET`] bytes a run, each reader makes its own frames again; and it is dropped
//! with the run's last reader.

use super::modes::Modes;
use axum::body::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// How many bytes of frames are kept for one run and set of modes.
const BUDGET: usize = 8 << 20;

/// One part of a log event, framed: its number among the event's parts (for a
/// reader that resumes after it), and the bytes to send.
pub(super) struct Framed {
    pub(super) part: usize,
    pub(super) chunks: Vec<Bytes>,
}

/// The frames of every log event of a run that a reader made, by the event's index.
#[derive(Default)]
pub(super) struct Shared {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    events: Vec<Option<Arc<[Framed]>>>,
    bytes: usize,
}

impl Shared {
    pub(super) fn get(&self, index: u64) -> Option<Arc<[Framed]>> {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        kept.events.get(index as usize).cloned().flatten()
    }

    /// Keeps the frames of event `index` for the other readers, within the budget.
    pub(super) fn put(&self, index: u64, frames: &Arc<[Framed]>) {
        let size: usize = frames.iter().flat_map(|f| &f.chunks).map(Bytes::len).sum();
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if kept.bytes + size > BUDGET {
            return;
        }
        let i = index as usize;
        if kept.events.len() <= i {
            kept.events.resize_with(i + 1, || None);
        }
        if kept.events[i].is_none() {
            kept.events[i] = Some(frames.clone());
            kept.bytes += size;
        }
    }
}

/// The frames shared by the readers following each run in each set of modes.
#[derive(Default)]
pub(super) struct Readers {
    runs: Mutex<HashMap<(String, Modes), Weak<Shared>>>,
}

impl Readers {
    /// The frames of `run` in `modes`, shared with the readers following it now.
    pub(super) fn join(&self, run: &str, modes: Modes) -> Arc<Shared> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = runs.get(&(run.to_string(), modes)).and_then(Weak::upgrade) {
            return shared;
        }
        // The runs nobody follows any more are forgotten as new ones are followed.
        runs.retain(|_, w| w.strong_count() > 0);
        let shared = Arc::new(Shared::default());
        runs.insert((run.to_string(), modes), Arc::downgrade(&shared));
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(text: &'static str) -> Arc<[Framed]> {
        Arc::from(vec![Framed {
            part: 0,
            chunks: vec![Bytes::from_static(text.as_bytes())],
        }])
    }

    #[test]
    fn readers_of_a_run_in_the_same_modes_share_its_frames_while_one_follows() {
        let readers = Readers::default();
        let values = Modes::default();
        let updates = Modes {
            updates: true,
            ..Modes::default()
        };
        let a = readers.join("r1", values);
        a.put(3, &framed("event: values"));
        let b = readers.join("r1", values);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&b.get(3).unwrap()[0].chunks[0][..], b"event: values");
        assert!(b.get(2).is_none() && b.get(4).is_none());
        // Another set of modes, or another run, has frames of its own.
        assert!(readers.join("r1", updates).get(3).is_none());
        assert!(readers.join("r2", values).get(3).is_none());
        // With its last reader gone, a run's frames are dropped.
        drop((a, b));
        assert!(readers.join("r1", values).get(3).is_none());
    }

    #[test]
    fn frames_past_the_budget_are_not_kept() {
        let shared = Shared::default();
        let big: &'static str = "x".repeat(BUDGET - 10).leak();
        shared.put(0, &framed(big));
        shared.put(1, &framed("0123456789abc"));
        shared.put(2, &framed("0123456789"));
        assert!(shared.get(0).is_some());
        assert!(shared.get(1).is_none(), "over the budget");
        assert!(shared.get(2).is_some(), "exactly at it");
    }
}
