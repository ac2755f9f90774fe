//! What the client does with what a server sends it unasked: progress of a call
//! becomes a `tool_progress` event, and a changed tool list is listed again before
//! the next call (so a node offers, and calls, what the server offers now). A request
//! for a person's input (an elicitation) is answered with what the run was resumed
//! with, or, without one, noted (the call then pauses the run for it) and cancelled.

use super::event_sink::EventSink;
use crate::run::Event;
use rmcp::ClientHandler;
use rmcp::ErrorData;
// Roots are deprecated in the protocol after the one Switchyard speaks
// (`LATEST_WITH_INITIALIZE`), which still has them.
#[allow(deprecated)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, ListRootsResult,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, Root, RootsCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone)]
pub(crate) struct Handler {
    server: String,
    events: EventSink,
    /// What `roots/list` answers; the client declares roots only when there are any.
    roots: Vec<std::path::PathBuf>,
    /// Set when the server said its tool list changed.
    pub(crate) tools_changed: Arc<AtomicBool>,
    /// Elicitations: the answer the next one gets, and what one asked without one.
    pub(crate) asking: Arc<std::sync::Mutex<Asking>>,
    /// Who answers the server's sampling requests, when the graph lets it ask.
    sampler: Option<super::sampling::SamplerSlot>,
}

/// A session's elicitations (see [`Handler`]).
#[derive(Default)]
pub(crate) struct Asking {
    /// `{"action": "accept", "content": {...}}`, `{"action": "decline" | "cancel"}`, or
    /// the content alone (accepted).
    pub(crate) answer: Option<Json>,
    /// `{message, requested_schema}` (or `{message, url}`) of a request no answer met.
    pub(crate) asked: Option<Json>,
    /// Calls to the server in flight: a question asked while several are cannot be told
    /// apart from the calls (the protocol does not say which asked).
    pub(crate) in_flight: usize,
    /// A question came while several calls were in flight.
    pub(crate) ambiguous: bool,
    /// The calls in flight by the progress token each was sent with: the node that
    /// made it and the tool, which its progress notifications are told by.
    pub(crate) calls: HashMap<ProgressToken, (Option<Arc<str>>, String)>,
}

impl Handler {
    pub(crate) fn new(
        server: &str,
        roots: &[std::path::PathBuf],
        events: &EventSink,
        sampler: Option<super::sampling::SamplerSlot>,
    ) -> Self {
        Handler {
            server: server.to_string(),
            events: events.clone(),
            roots: roots.to_vec(),
            tools_changed: Arc::new(AtomicBool::new(false)),
            asking: Arc::default(),
            sampler,
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut info = client_info();
        if !self.roots.is_empty() {
            info.capabilities.roots = Some(RootsCapabilities::default());
        }
        // Forms a person answers: the run pauses for them (URLs are not opened).
        info.capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        // Sampling with the tools a server offers the model (`tools`, `toolChoice`);
        // not `includeContext`, as nothing of other servers' is the model's to read.
        if self.sampler.is_some() {
            let mut sampling = rmcp::model::SamplingCapability::default();
            sampling.tools = Some(Default::default());
            info.capabilities.sampling = Some(sampling);
        }
        info
    }

    // Sampling is deprecated in the protocol's newest draft (SEP-2577), but servers of
    // today's versions still ask for it (server-everything's `trigger-sampling-request`).
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        let Some(sampler) = &self.sampler else {
            return Err(ErrorData::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >());
        };
        let params = serde_json::to_value(&params)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let answer = sampler
            .answer(&self.server, params)
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        serde_json::from_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + Send + '_ {
        let mut asking = self.asking.lock().unwrap_or_else(|e| e.into_inner());
        let result = match asking.answer.take() {
            Some(answer) => {
                use crate::tool::elicitation::{Action, fill_defaults, parse};
                // Checked when the run resumed; an answer given some other way (the
                // conformance client's) is read the same, an unreadable one declined.
                match parse(&answer) {
                    Ok((Action::Accept, Some(mut content))) => {
                        if let ElicitRequestParams::FormElicitationParams {
                            requested_schema, ..
                        } = &request
                            && let Ok(schema) = serde_json::to_value(requested_schema)
                        {
                            fill_defaults(&mut content, &schema);
                        }
                        ElicitResult::new(ElicitationAction::Accept).with_content(content)
                    }
                    Ok((Action::Cancel, _)) => ElicitResult::new(ElicitationAction::Cancel),
                    _ => ElicitResult::new(ElicitationAction::Decline),
                }
            }
            None => {
                if asking.in_flight > 1 {
                    asking.ambiguous = true;
                }
                asking.asked = Some(match request {
                    ElicitRequestParams::FormElicitationParams {
                        message,
                        requested_schema,
                        ..
                    } => json!({
                        "message": message,
                        "requested_schema": serde_json::to_value(requested_schema).unwrap_or_default(),
                    }),
                    ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                        json!({ "message": message, "url": url })
                    }
                    other => serde_json::to_value(other).unwrap_or_default(),
                });
                ElicitResult::new(ElicitationAction::Cancel)
            }
        };
        std::future::ready(Ok(result))
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
        let (node, tool) = self
            .asking
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .calls
            .get(&params.progress_token)
            .cloned()
            .map_or((None, None), |(node, tool)| (node, Some(tool)));
        self.events.emit(Event::ToolProgress {
            server: self.server.clone(),
            node,
            tool,
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

/// What Switchyard tells servers about itself in the handshake. It asks for the newest
/// protocol version that still has the `initialize` handshake: rmcp's default names a
/// later version that has none, which the conformance suite's `initialize` scenario
/// (and any server that only knows the 2025 protocol) does not expect.
pub(crate) fn client_info() -> ClientConfig {
    let mut config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("switchyard", env!("CARGO_PKG_VERSION")),
    );
    config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
    config
}
