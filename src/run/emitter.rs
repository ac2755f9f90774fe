//! [`Emitter`]: where a run's events go. With nobody listening no event is made (each
//! is built by a closure only when there is a channel); the run's last event can be
//! held back while the run's MCP servers shut down, so whoever reads the events sees
//! them stopped before the run ends.

use super::event::Event;
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

#[derive(Default)]
pub(super) struct Emitter {
    tx: Option<UnboundedSender<Event>>,
    /// The run's last event, held while its MCP servers are shut down.
    held: Mutex<Option<Event>>,
}

impl Emitter {
    pub(super) fn to(tx: UnboundedSender<Event>) -> Self {
        Emitter {
            tx: Some(tx),
            held: Mutex::new(None),
        }
    }

    /// Whether anyone listens.
    #[inline]
    pub(super) fn is_on(&self) -> bool {
        self.tx.is_some()
    }

    /// The channel, for the parts of a run that send events of their own (a node's
    /// kind, a client).
    #[inline]
    pub(super) fn sender(&self) -> &Option<UnboundedSender<Event>> {
        &self.tx
    }

    // Inlined, so that with nobody listening the event's closure is never even made.
    #[inline(always)]
    pub(super) fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(make());
        }
    }

    /// Keeps `event` to send at [`Emitter::release`].
    pub(super) fn hold(&self, event: Event) {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(event);
    }

    /// Sends the event held back, if any.
    pub(super) fn release(&self) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let (Some(e), Some(tx)) = (held, &self.tx) {
            let _ = tx.send(e);
        }
    }
}
