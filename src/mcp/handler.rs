//! What the client does with what a server sends it unasked: progress of a call
//! becomes a `tool_progress` event, and a changed tool list is listed again before
//! the next call (so a node offers, and calls, what the server offers now).

use super::event_sink::EventSink;
use super::session::client_info;
use crate::run::Event;
use rmcp::ClientHandler;
use rmcp::model::{ClientConfig, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct Handler {
    server: String,
    events: EventSink,
    /// Set when the server said its tool list changed.
    pub(crate) tools_changed: Arc<AtomicBool>,
}

impl Handler {
    pub(crate) fn new(server: &str, events: &EventSink) -> Self {
        Handler {
            server: server.to_string(),
            events: events.clone(),
            tools_changed: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        client_info()
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.events.emit(Event::ToolProgress {
            server: self.server.clone(),
            progress: params.progress,
            total: params.total,
            message: params.message,
        });
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }
}
