//! Where the MCP client sends its events (server started, died, stopped, stderr lines).

use crate::run::Event;
use tokio::sync::mpsc::UnboundedSender;

/// An optional event channel; sending never fails the caller.
#[derive(Clone, Default)]
pub(crate) struct EventSink(Option<UnboundedSender<Event>>);

impl EventSink {
    pub(crate) fn new(tx: UnboundedSender<Event>) -> Self {
        EventSink(Some(tx))
    }

    pub(crate) fn emit(&self, event: Event) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(event);
        }
    }
}
