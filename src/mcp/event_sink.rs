//! Where the MCP client sends its events (server started, died, stopped, stderr lines).

use crate::run::Event;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// An optional event channel; sending never fails the caller. Clones share one
/// channel, which can be replaced: a server's sessions outlive one run of a thread, and
/// their events (a stderr line while paused) go to whichever run follows the thread now.
#[derive(Clone, Default)]
pub(crate) struct EventSink(Arc<Mutex<Option<UnboundedSender<Event>>>>);

impl EventSink {
    pub(crate) fn new(tx: UnboundedSender<Event>) -> Self {
        EventSink(Arc::new(Mutex::new(Some(tx))))
    }

    pub(crate) fn set(&self, tx: Option<UnboundedSender<Event>>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = tx;
    }

    pub(crate) fn emit(&self, event: Event) {
        if let Some(tx) = &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = tx.send(event);
        }
    }
}
