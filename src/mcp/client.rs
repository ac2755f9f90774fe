//! [`McpClient`]: the real [`ToolClient`], talking MCP to the servers a graph declares.

use super::blob_store::BlobStore;
use super::error::McpError;
use super::event_sink::EventSink;
use super::reply::reply_value;
use super::session::{Session, Tools};
use crate::graph::Server;
use crate::run::Event;
use crate::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Time allowed for one call when the node sets no `timeout`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Time allowed for a server to start and finish the handshake.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Restarts allowed per server after it died, until [`ToolClient::shutdown`].
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// Calls MCP tools over stdio or streamable HTTP, using rmcp.
///
/// A server starts on its first use and is then shared by every node of the run. When
/// it dies (its process exits, its connection drops) the call in flight fails with a
/// transient error, so the node's `retry` may try again, and the next use starts it
/// anew: at most `max_restarts` times, each an [`Event::ServerStarted`] with its restart
/// number. Before each call the arguments are checked against the tool's `inputSchema`
/// (validators are compiled once per tool and session). [`ToolClient::shutdown`] closes
/// every session and resets the restart budget.
pub struct McpClient {
    root: PathBuf,
    blobs: BlobStore,
    events: EventSink,
    max_restarts: u32,
    call_timeout: Duration,
    handshake_timeout: Duration,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    sampler: super::sampling::SamplerSlot,
}

/// One server's place in the client: its live session, if any, and its restarts.
#[derive(Default)]
struct Slot {
    state: tokio::sync::Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    session: Option<Arc<Session>>,
    /// A session was up since the last shutdown, so the next start is a restart.
    started: bool,
    restarts: u32,
}

impl McpClient {
    /// A client for a graph whose relative server commands resolve against `root`
    /// (the graph's root), storing binary results in `blobs`.
    pub fn new(root: impl Into<PathBuf>, blobs: BlobStore) -> Self {
        McpClient {
            root: root.into(),
            blobs,
            events: EventSink::default(),
            max_restarts: DEFAULT_MAX_RESTARTS,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            slots: Mutex::new(HashMap::new()),
            sampler: Default::default(),
        }
    }

    /// Sends server events (started, died, stopped, stderr lines) to `tx`.
    #[must_use]
    pub fn with_events(mut self, tx: UnboundedSender<Event>) -> Self {
        self.events = EventSink::new(tx);
        self
    }

    #[must_use]
    pub fn with_max_restarts(mut self, n: u32) -> Self {
        self.max_restarts = n;
        self
    }

    /// Time allowed for a call whose request has no timeout of its own.
    #[must_use]
    pub fn with_call_timeout(mut self, t: Duration) -> Self {
        self.call_timeout = t;
        self
    }

    #[must_use]
    pub fn with_handshake_timeout(mut self, t: Duration) -> Self {
        self.handshake_timeout = t;
        self
    }

    /// Sends server events to `tx` from now on (or nowhere), also from sessions
    /// already running.
    pub fn set_events(&self, tx: Option<UnboundedSender<Event>>) {
        self.events.set(tx);
    }

    /// Who answers the sampling requests of the servers a graph lets ask
    /// (`sampling = true`): the run's model. Changed for each run, like the events.
    pub fn set_sampler(&self, sampler: Option<super::sampling::Sampler>) {
        self.sampler.set(sampler);
    }

    /// How many servers have a live session now.
    pub async fn live_servers(&self) -> usize {
        let slots: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default();
        let mut live = 0;
        for slot in slots {
            if slot
                .state
                .lock()
                .await
                .session
                .as_ref()
                .is_some_and(|s| s.is_alive())
            {
                live += 1;
            }
        }
        live
    }

    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// The process id of a running stdio server.
    pub async fn pid(&self, server: &str) -> Option<u32> {
        let slot = self.slots.lock().ok()?.get(server).cloned()?;
        let state = slot.state.lock().await;
        state.session.as_ref().and_then(|s| s.pid)
    }

    fn slot(&self, server: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(server.to_string()).or_default().clone()
    }

    /// The server's live session: started on first use, restarted when it died.
    async fn session(&self, server: &Server) -> Result<Arc<Session>, McpError> {
        let slot = self.slot(&server.name);
        let mut state = slot.state.lock().await;
        if let Some(s) = &state.session {
            if s.is_alive() {
                return Ok(s.clone());
            }
            let dead = state.session.take().expect("checked above");
            self.events.emit(Event::ServerDied {
                server: server.name.clone(),
                message: dead.death_note(),
            });
            close(dead).await;
        }
        if state.started {
            if state.restarts >= self.max_restarts {
                return Err(McpError::RestartsExhausted {
                    server: server.name.clone(),
                    restarts: state.restarts,
                });
            }
            state.restarts += 1;
        }
        let started = std::time::Instant::now();
        let session = Arc::new(
            Session::connect(
                server,
                &self.root,
                &self.events,
                self.handshake_timeout,
                server.sampling.then(|| self.sampler.clone()),
            )
            .await?,
        );
        state.started = true;
        state.session = Some(session.clone());
        self.events.emit(Event::ServerStarted {
            server: server.name.clone(),
            pid: session.pid,
            restart: state.restarts,
            duration_ms: started.elapsed().as_millis() as u64,
        });
        Ok(session)
    }

    /// A call found the session dead: drop it now, so the event comes at once and the
    /// next use restarts it.
    async fn forget(&self, server: &str, session: &Arc<Session>, message: &str) {
        let slot = self.slot(server);
        let mut state = slot.state.lock().await;
        if state
            .session
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, session))
        {
            let dead = state.session.take().expect("checked above");
            self.events.emit(Event::ServerDied {
                server: server.to_string(),
                message: message.to_string(),
            });
            drop(state);
            close(dead).await;
        }
    }

    /// The tools of `server`, with their compiled schemas.
    async fn tools(&self, server: &Server, timeout: Duration) -> Result<Arc<Tools>, McpError> {
        let session = self.session(server).await?;
        match session.tools(false, timeout).await {
            Err(e @ McpError::Gone { .. }) => {
                self.forget(&server.name, &session, &e.to_string()).await;
                Err(e)
            }
            other => other,
        }
    }

    async fn call_inner(&self, request: &ToolRequest) -> Result<ToolReply, McpError> {
        let server = &request.server;
        let timeout = request.timeout.unwrap_or(self.call_timeout);
        let session = self.session(server).await?;
        // A resource or a prompt, read as a tool is called (names MCP tools do not
        // have: they take no `/`).
        if matches!(request.tool.as_str(), "resources/read" | "prompts/get") {
            let read = match session
                .read(&request.tool, &request.arguments, timeout)
                .await
            {
                Err(e @ McpError::Gone { .. }) => {
                    self.forget(&server.name, &session, &e.to_string()).await;
                    return Err(e);
                }
                other => other?,
            };
            let content = super::reply::read_value(&server.name, &request.tool, read, &self.blobs)?;
            return Ok(ToolReply {
                structured: false,
                content,
                is_error: false,
                text: None,
            });
        }
        let mut tools = session.tools(false, timeout).await?;
        if tools.get(&request.tool).is_none() {
            // The server may have added tools since it was listed.
            tools = session.tools(true, timeout).await?;
        }
        let Some(schema) = tools.get(&request.tool) else {
            let names = tools.list.iter().map(|t| t.info.name.as_str());
            let help = crate::suggestion::offers(&request.tool, names);
            return Err(McpError::UnknownTool {
                server: server.name.clone(),
                tool: request.tool.clone(),
                help,
            });
        };
        let filled = schema.as_sent(&request.arguments);
        let arguments = filled.as_ref().unwrap_or(&request.arguments);
        schema.check(&server.name, arguments)?;
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        let result = match session.call(request, arguments, timeout).await {
            Err(e @ McpError::Gone { .. }) => {
                self.forget(&server.name, &session, &e.to_string()).await;
                return Err(e);
            }
            other => other?,
        };
        if result.get("isError") != Some(&serde_json::Value::Bool(true))
            && let Some(structured) = result.get("structuredContent")
        {
            schema.check_result(&server.name, structured)?;
        }
        let text = super::reply::text_of(&result);
        let structured = result.get("structuredContent").is_some();
        let (content, is_error) = reply_value(&server.name, result, &self.blobs)?;
        Ok(ToolReply {
            structured: structured && !is_error,
            content,
            is_error,
            text,
        })
    }
}

async fn close(session: Arc<Session>) {
    if let Ok(session) = Arc::try_unwrap(session) {
        session.close().await;
    }
}

#[async_trait::async_trait]
impl ToolClient for McpClient {
    async fn list_tools(&self, server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        let tools = self.tools(server, self.call_timeout).await?;
        Ok(tools.list.iter().map(|t| t.info.clone()).collect())
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        Ok(self.call_inner(request).await?)
    }

    async fn shutdown(&self) {
        let mut slots: Vec<(String, Arc<Slot>)> = self
            .slots
            .lock()
            .map(|s| s.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        slots.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, slot) in slots {
            let mut state = slot.state.lock().await;
            let session = state.session.take();
            *state = SlotState::default();
            drop(state);
            if let Some(session) = session {
                close(session).await;
                self.events.emit(Event::ServerStopped { server: name });
            }
        }
    }
}
