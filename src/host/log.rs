//! [`RunLog`]: the events of one run, kept in order, that any number of readers follow
//! from any point: the stream that started the run, a page that reloads and joins from
//! the last event it saw, a `join` that only waits for the end.

use super::lock;
use crate::run::Event;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// One event of a run, numbered from 0 in the order the run emitted them.
#[derive(Debug)]
pub(crate) struct LogEntry {
    pub index: u64,
    pub event: Event,
    /// Unix milliseconds when the host received it.
    pub at_ms: u64,
}

/// The events of one run. Appending never blocks on readers; readers wait for new
/// events or the end.
pub(crate) struct RunLog {
    entries: Mutex<Vec<Arc<LogEntry>>>,
    /// How many entries there are, and whether the log is closed (the run ended).
    tick: watch::Sender<(u64, bool)>,
}

impl Default for RunLog {
    fn default() -> Self {
        RunLog {
            entries: Mutex::new(Vec::new()),
            tick: watch::channel((0, false)).0,
        }
    }
}

impl RunLog {
    /// Appends an event; its index.
    pub(super) fn push(&self, event: Event) -> u64 {
        let mut entries = lock(&self.entries);
        let index = entries.len() as u64;
        entries.push(Arc::new(LogEntry {
            index,
            event,
            at_ms: super::now_ms(),
        }));
        drop(entries);
        self.tick.send_modify(|(n, _)| *n = index + 1);
        index
    }

    /// No more events: readers that reached the end stop waiting.
    pub(super) fn close(&self) {
        self.tick.send_modify(|(_, closed)| *closed = true);
    }
    /// The entries from `index` on, as they are now, and whether the log is closed.
    pub(crate) fn read_from(&self, index: u64) -> (Vec<Arc<LogEntry>>, bool) {
        let closed = self.tick.borrow().1;
        let entries = lock(&self.entries);
        let from = (index as usize).min(entries.len());
        (entries[from..].to_vec(), closed)
    }

    /// Waits until there are entries from `index` on, or the log is closed.
    pub(crate) async fn wait_past(&self, index: u64) {
        let mut rx = self.tick.subscribe();
        let _ = rx.wait_for(|(n, closed)| *n > index || *closed).await;
    }

    pub(crate) fn len(&self) -> u64 {
        self.tick.borrow().0
    }
}
