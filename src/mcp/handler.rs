//! What the client does with what a server sends it unasked: progress of a call
//! becomes a `tool_progress` event, and a changed tool list is listed again before
//! the next call (so a node offers, and calls, what the server offers now).

use super::event_sink::EventSink;
use super::session::client_info;
use crate::run::Event;
use rmcp::ClientHandler;
use rmcp::ErrorData;
// Roots are deprecated in the protocol after the one Switchyard speaks
// (`LATEST_WITH_INITIALIZE`), which still has them.
#[allow(deprecated)]
use rmcp::model::{
    ClientConfig, ListRootsResult, ProgressNotificationParam, Root, RootsCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct Handler {
    server: String,
    events: EventSink,
    /// What `roots/list` answers; the client declares roots only when there are any.
    roots: Vec<std::path::PathBuf>,
    /// Set when the server said its tool list changed.
    pub(crate) tools_changed: Arc<AtomicBool>,
}

impl Handler {
    pub(crate) fn new(server: &str, roots: &[std::path::PathBuf], events: &EventSink) -> Self {
        Handler {
            server: server.to_string(),
            events: events.clone(),
            roots: roots.to_vec(),
            tools_changed: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut info = client_info();
        if !self.roots.is_empty() {
            info.capabilities.roots = Some(RootsCapabilities::default());
        }
        info
    }

    #[allow(deprecated)]
    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorData>> + Send + '_ {
        let roots = self
            .roots
            .iter()
            .map(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                let mut root = Root::new(format!("file://{}", p.display()));
                root.name = name;
                root
            })
            .collect();
        std::future::ready(Ok(ListRootsResult::new(roots)))
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
