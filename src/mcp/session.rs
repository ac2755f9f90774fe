//! One live connection to one MCP server: the child process (stdio) or the HTTP
//! session, the handshake, the tool list and its validators.

use super::error::McpError;
use super::event_sink::EventSink;
use super::handler::Handler;
use super::tool_schema::ToolSchema;
use crate::graph::{Server, ServerTransport};
use crate::run::Event;
use crate::spec::Protocol;
use crate::tool::ToolInfo;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::CallToolRequestParams;
use rmcp::model::ProtocolVersion;
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::{ClientLifecycleMode, ClientServiceExt};

mod requests;

/// The `_meta` key of a call's idempotency key (see `ToolRequest::idempotency_key`).
pub(crate) const IDEMPOTENCY_KEY: &str = "switchyard/idempotencyKey";
/// The `_meta` key of the fencing token of the thread's claim a call is made under (see
/// `ToolRequest::fencing_token`).
pub(crate) const FENCING_TOKEN: &str = "switchyard/fencingToken";
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value as Json;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

/// How many of a child's last stderr lines an error about it quotes.
const STDERR_TAIL: usize = 3;
/// A stderr line longer than this is cut, so a server cannot flood the events.
const MAX_STDERR_LINE: usize = 2000;

/// The tools a server offers, in its order, and by name.
pub(crate) struct Tools {
    pub(crate) list: Vec<Arc<ToolSchema>>,
    by_name: HashMap<String, Arc<ToolSchema>>,
}

impl Tools {
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<ToolSchema>> {
        self.by_name.get(name)
    }
}

pub(crate) struct Session {
    server: String,
    service: RunningService<RoleClient, Handler>,
    /// Set by the server's `notifications/tools/list_changed`.
    tools_changed: Arc<AtomicBool>,
    /// The server's elicitations (see `Handler`).
    asking: Arc<std::sync::Mutex<super::handler::Asking>>,
    pub(crate) pid: Option<u32>,
    /// Set when a call found the connection closed.
    dead: AtomicBool,
    tools: tokio::sync::Mutex<Option<Arc<Tools>>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

impl Session {
    /// Starts (stdio) or reaches (HTTP) the server and completes the MCP handshake.
    pub(crate) async fn connect(
        server: &Server,
        root: &Path,
        events: &EventSink,
        handshake_timeout: Duration,
        sampler: Option<super::sampling::SamplerSlot>,
    ) -> Result<Session, McpError> {
        let written = server;
        let server = &super::env_vars::expand_server(server, &|k| std::env::var(k).ok())?;
        let name = server.name.clone();
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let handler = Handler::new(&name, &server.roots, events, sampler);
        let tools_changed = handler.tools_changed.clone();
        let asking = handler.asking.clone();
        // Set while a person signs in to the server (OAuth): the handshake's time limit
        // waits for them.
        let signing_in = Arc::new(AtomicBool::new(false));
        let (pid, connecting) = match &server.transport {
            // Served in process by the tool client in front of this one.
            ServerTransport::Store => {
                return Err(McpError::Spawn {
                    server: name,
                    message: "it is Switchyard's builtin store, served in process, and this tool client has no store".into(),
                });
            }
            ServerTransport::Stdio {
                command,
                args,
                env,
                env_remove,
                cwd,
            } => {
                // Messages show the command as the file writes it: a `${...}` it expands
                // (a token in an argument, a secret path) stays out of errors, events
                // and checkpoints.
                let (shown, shown_cwd) = match &written.transport {
                    ServerTransport::Stdio { command, cwd, .. } => {
                        (command.clone(), cwd.display().to_string())
                    }
                    ServerTransport::Http { .. } | ServerTransport::Store => {
                        (String::new(), String::new())
                    }
                };
                let program = resolve_command(command, root, env).ok_or_else(|| McpError::Spawn {
                    server: name.clone(),
                    message: format!(
                        "`{shown}` is not a program on PATH nor a file relative to the graph root `{}`",
                        root.display()
                    ),
                })?;
                let mut cmd = tokio::process::Command::new(&program);
                for name in env_remove {
                    cmd.env_remove(name);
                }
                cmd.args(args)
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .current_dir(cwd)
                    // A safety net: whatever happens to the client, the child does not
                    // outlive it.
                    .kill_on_drop(true)
                    // Its own process group: a Ctrl-C at the terminal asks the run to
                    // stop at the next node boundary; it must not kill the server in
                    // the middle of the node's call.
                    .process_group(0);
                let (child, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| McpError::Spawn {
                        server: name.clone(),
                        message: if shown == *command {
                            format!("`{}` in `{shown_cwd}`: {e}", program.display())
                        } else {
                            format!("`{shown}` in `{shown_cwd}`: {e}")
                        },
                    })?;
                let pid = child.id();
                if let Some(stderr) = stderr {
                    tokio::spawn(forward_stderr(
                        name.clone(),
                        stderr,
                        events.clone(),
                        stderr_tail.clone(),
                    ));
                }
                let fut = handler.serve_with_lifecycle(child, lifecycle(server.protocol));
                let serve: std::pin::Pin<Box<dyn Future<Output = _> + Send>> =
                    Box::pin(async move { fut.await.map_err(|e| ConnectError::Rmcp(Box::new(e))) });
                (pid, serve)
            }
            ServerTransport::Http {
                url,
                headers,
                oauth,
            } => {
                // reqwest is built with rustls but no crypto provider (for the LLM
                // client's sake); building any client without one installed panics.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                for (key, value) in headers {
                    let bad = |what: &str| McpError::Connect {
                        server: name.clone(),
                        url: written_url(written).to_string(),
                        message: format!("header `{key}`: not a valid header {what}"),
                    };
                    let header = HeaderName::from_bytes(key.as_bytes()).map_err(|_| bad("name"))?;
                    let mut value = HeaderValue::from_str(value).map_err(|_| bad("value"))?;
                    // A token in a header stays out of logs that print requests.
                    value.set_sensitive(true);
                    config.custom_headers.insert(header, value);
                }
                // A server that answers 401 gets OAuth, in the middle of whichever
                // request it refused (the handshake or a later call); unless the graph
                // gives it a token of its own, which the 401 then refused.
                let oauth_wanted = !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
                let (server_name, events, signing_in) =
                    (name.clone(), events.clone(), signing_in.clone());
                let protocol = server.protocol;
                let connecting = async move {
                    let served = if oauth_wanted {
                        let client = super::oauth::Authorizing::new(
                            url,
                            &server_name,
                            oauth.clone(),
                            events,
                            signing_in,
                        )
                        .map_err(ConnectError::OAuth)?;
                        handler
                            .serve_with_lifecycle(
                                StreamableHttpClientTransport::with_client(client, config),
                                lifecycle(protocol),
                            )
                            .await
                    } else {
                        handler
                            .serve_with_lifecycle(
                                StreamableHttpClientTransport::from_config(config),
                                lifecycle(protocol),
                            )
                            .await
                    };
                    served.map_err(|e| ConnectError::Rmcp(Box::new(e)))
                };
                (None, Box::pin(connecting) as _)
            }
        };
        let service = match within(connecting, handshake_timeout, &signing_in).await {
            Err(_) => {
                return Err(McpError::HandshakeTimeout {
                    server: name,
                    timeout: handshake_timeout,
                });
            }
            Ok(Err(e)) => {
                let message = format!("{}{}", handshake_failure(&e), tail_note(&stderr_tail));
                return Err(match (&server.transport, &written.transport) {
                    // The URL as the file writes it: its `${...}` values (a token in the
                    // query) stay out of errors, events and checkpoints.
                    (
                        ServerTransport::Http {
                            url,
                            headers,
                            oauth,
                        },
                        ServerTransport::Http {
                            url: as_written,
                            headers: written_headers,
                            oauth: written_oauth,
                        },
                    ) => {
                        // The URL, headers and OAuth secrets as the file writes them:
                        // their `${...}` values (a token, a client secret, a key) stay
                        // out of errors, events and checkpoints.
                        let mut message = message.replace(url.as_str(), as_written);
                        let workload = |o: &crate::spec::OAuth| match &o.workload {
                            Some(crate::spec::WorkloadToken::Value(v)) => Some(v.clone()),
                            _ => None,
                        };
                        let id_token = |o: &crate::spec::OAuth| {
                            o.identity.as_ref().map(|i| i.id_token.clone())
                        };
                        let secrets = [
                            (
                                oauth.client_secret.clone(),
                                written_oauth.client_secret.clone(),
                            ),
                            (oauth.private_key.clone(), written_oauth.private_key.clone()),
                            (workload(oauth), workload(written_oauth)),
                            (id_token(oauth), id_token(written_oauth)),
                        ];
                        let secrets = secrets
                            .iter()
                            .filter_map(|(v, w)| Some((v.as_deref()?, w.as_deref()?)));
                        let headers = headers
                            .iter()
                            .zip(written_headers)
                            .map(|((_, v), (_, w))| (v.as_str(), w.as_str()));
                        for (value, written) in headers.chain(secrets) {
                            if value != written && value.len() >= 4 {
                                message = message.replace(value, written);
                            }
                        }
                        McpError::Connect {
                            server: name,
                            url: as_written.clone(),
                            message,
                        }
                    }
                    _ => McpError::Handshake {
                        server: name,
                        message,
                    },
                });
            }
            Ok(Ok(service)) => service,
        };
        Ok(Session {
            server: name,
            service,
            tools_changed,
            asking,
            pid,
            dead: AtomicBool::new(false),
            tools: tokio::sync::Mutex::new(None),
            stderr_tail,
        })
    }

    /// False once the connection is known to be closed: the child exited, the HTTP
    /// session dropped, or a call found it so.
    pub(crate) fn is_alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst) && !self.service.peer().is_transport_closed()
    }

    /// Why the session is gone, for the event that says so.
    pub(crate) fn death_note(&self) -> String {
        format!("its connection closed{}", tail_note(&self.stderr_tail))
    }

    /// The tools the server offers, listed once per session (`refresh` lists again,
    /// for a name the cached list does not have).
    pub(crate) async fn tools(
        &self,
        refresh: bool,
        timeout: Duration,
    ) -> Result<Arc<Tools>, McpError> {
        let mut cached = self.tools.lock().await;
        // A server that said its list changed is listed again.
        let changed = self.tools_changed.swap(false, Ordering::SeqCst);
        if let Some(t) = cached.as_ref()
            && !refresh
            && !changed
        {
            return Ok(t.clone());
        }
        let listed = match tokio::time::timeout(timeout, self.service.peer().list_all_tools()).await
        {
            Ok(r) => r.map_err(|e| self.service_error(e, "`tools/list`", None))?,
            Err(_) => {
                return Err(McpError::Timeout {
                    server: self.server.clone(),
                    tool: "tools/list".into(),
                    timeout,
                });
            }
        };
        let list: Vec<Arc<ToolSchema>> = listed
            .into_iter()
            .map(|t| {
                Arc::new(ToolSchema::new(ToolInfo {
                    name: t.name.to_string(),
                    description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                    input_schema: Json::Object((*t.input_schema).clone()),
                    output_schema: t.output_schema.map(|s| Json::Object((*s).clone())),
                }))
            })
            .collect();
        let by_name = list
            .iter()
            .map(|t| (t.info.name.clone(), t.clone()))
            .collect();
        let tools = Arc::new(Tools { list, by_name });
        *cached = Some(tools.clone());
        Ok(tools)
    }

    /// One `tools/call` of `request` with `arguments`, its idempotency key and fencing
    /// token in `_meta`; the result as the server sent it, in JSON.
    pub(crate) async fn call(
        &self,
        request: &crate::tool::ToolRequest,
        arguments: serde_json::Map<String, Json>,
        timeout: Duration,
    ) -> Result<Json, McpError> {
        let (tool, answer) = (request.tool.as_str(), request.answer.as_deref());
        {
            let mut asking = self.asking.lock().unwrap_or_else(|e| e.into_inner());
            asking.in_flight += 1;
            if asking.in_flight == 1 {
                asking.asked = None;
                asking.ambiguous = false;
                asking.answer = answer.cloned();
            } else if answer.is_some() {
                asking.answer = answer.cloned();
            }
        }
        // However the call ends (a timeout, a stop dropping it), it is no longer in flight.
        struct InFlight<'a>(&'a std::sync::Mutex<super::handler::Asking>);
        impl Drop for InFlight<'_> {
            fn drop(&mut self) {
                let mut asking = self.0.lock().unwrap_or_else(|e| e.into_inner());
                asking.in_flight = asking.in_flight.saturating_sub(1);
            }
        }
        let in_flight = InFlight(&self.asking);
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.0.0.insert(
            IDEMPOTENCY_KEY.to_string(),
            Json::String(request.idempotency_key.clone()),
        );
        if let Some(token) = request.fencing_token {
            meta.0
                .0
                .insert(FENCING_TOKEN.to_string(), Json::from(token));
        }
        let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        params.meta = Some(meta);
        // The last look at the clock before the call leaves: the later, the smaller the
        // moment in which a process stopped past its claim's lease still sends it.
        if request
            .send_by
            .is_some_and(|by| std::time::Instant::now() >= by)
        {
            return Err(McpError::Unsent {
                server: self.server.clone(),
                tool: tool.to_string(),
            });
        }
        let result = match tokio::time::timeout(timeout, self.send_call(request, params)).await {
            Err(_) => {
                return Err(McpError::Timeout {
                    server: self.server.clone(),
                    tool: tool.to_string(),
                    timeout,
                });
            }
            Ok(r) => r.map_err(|e| match e {
                requests::CallError::Service(e) => {
                    self.service_error(e, &format!("`{tool}`"), Some(timeout))
                }
                requests::CallError::Mcp(e) => e,
            })?,
        };
        drop(in_flight);
        let (asked, ambiguous) = {
            let mut asking = self.asking.lock().unwrap_or_else(|e| e.into_inner());
            let ambiguous = asking.ambiguous && asking.asked.is_some();
            if asking.in_flight == 0 {
                asking.answer = None;
                asking.ambiguous = false;
            }
            (asking.asked.take(), ambiguous)
        };
        if ambiguous {
            return Err(McpError::BadReply {
                server: self.server.clone(),
                message: format!(
                    "it asked for a person's input during `{tool}` while other calls to it were in flight, so which call asked cannot be told; a node whose server asks must call it one at a time"
                ),
            });
        }
        if let Some(asked) = asked {
            // What the tool answered without the input is not its result: the run
            // pauses for a person, and the call is made again with the answer.
            return Err(McpError::InputRequired {
                server: self.server.clone(),
                tool: tool.to_string(),
                asked,
            });
        }
        // The structured content is moved into the value, not copied through the
        // serializer with the rest: a page snapshot is most of a browser's reply.
        let mut result = result;
        let structured = result.structured_content.take();
        let mut value = serde_json::to_value(&result).map_err(|e| McpError::BadReply {
            server: self.server.clone(),
            message: e.to_string(),
        })?;
        if let (Some(structured), Json::Object(o)) = (structured, &mut value) {
            o.insert("structuredContent".into(), structured);
        }
        Ok(value)
    }

    /// Ends the session: closes the connection; a child gets its stdin closed, then
    /// SIGTERM, then SIGKILL (rmcp's stdio shutdown sequence).
    pub(crate) async fn close(mut self) {
        let _ = self
            .service
            .close_with_timeout(Duration::from_secs(10))
            .await;
    }

    fn service_error(&self, e: ServiceError, what: &str, timeout: Option<Duration>) -> McpError {
        let server = self.server.clone();
        match e {
            ServiceError::McpError(data) => McpError::Refused {
                server,
                what: what.to_string(),
                message: data.message.to_string(),
            },
            // Authorization that failed in the middle of a request (a refused grant,
            // a scope the server will not take): the server is alive and said no, so
            // it is not restarted for it.
            ServiceError::TransportSend(_) if let Some(why) = oauth_refusal(&e) => {
                McpError::Refused {
                    server,
                    what: what.to_string(),
                    message: format!("OAuth: {why}"),
                }
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.dead.store(true, Ordering::SeqCst);
                McpError::Gone {
                    message: format!(
                        "the connection closed during {what} ({e}){}",
                        tail_note(&self.stderr_tail)
                    ),
                    server,
                }
            }
            ServiceError::Cancelled { .. } => McpError::Gone {
                server,
                message: format!("{what} was cancelled"),
            },
            ServiceError::Timeout { timeout: t } => McpError::Timeout {
                server,
                tool: what.trim_matches('`').to_string(),
                timeout: timeout.unwrap_or(t),
            },
            other => McpError::BadReply {
                server,
                message: other.to_string(),
            },
        }
    }
}

/// The program to run: a bare name is looked up on `PATH` (the child's, when its `env`
/// sets one), then in the root; a path with a separator is relative to the root.
fn resolve_command(command: &str, root: &Path, env: &[(String, String)]) -> Option<PathBuf> {
    let path = Path::new(command);
    if path.is_absolute() {
        return Some(path.to_path_buf());
    }
    if path.components().count() > 1 {
        // Absolute: the child starts in the graph's root, where a path relative to the
        // working directory (a graph given as `main/graphs/x.toml`) would miss.
        let p = root.join(path);
        return p.exists().then(|| std::path::absolute(&p).unwrap_or(p));
    }
    let search = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| std::ffi::OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    std::env::split_paths(&search)
        .map(|dir| dir.join(command))
        .find(|p| p.is_file())
        .or_else(|| Some(root.join(command)).filter(|p| p.is_file()))
}

/// Turns each stderr line of a child into an event, keeping the last few for errors.
async fn forward_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    events: EventSink,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut reader = tokio::io::BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf);
        let mut line = text.trim_end_matches(['\n', '\r']).to_string();
        if line.len() > MAX_STDERR_LINE {
            let cut = line
                .char_indices()
                .map(|(i, _)| i)
                .take_while(|i| *i <= MAX_STDERR_LINE)
                .last()
                .unwrap_or(0);
            line.truncate(cut);
            line.push_str("...");
        }
        if let Ok(mut t) = tail.lock() {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(line.clone());
        }
        events.emit(Event::ServerStderr {
            server: server.clone(),
            line,
        });
    }
}

fn tail_note(tail: &Mutex<VecDeque<String>>) -> String {
    let lines: Vec<String> = tail
        .lock()
        .map(|t| t.iter().filter(|l| !l.trim().is_empty()).cloned().collect())
        .unwrap_or_default();
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with: {}", lines.join(" | "))
    }
}

/// A server's URL as the graph file writes it.
fn written_url(server: &Server) -> &str {
    match &server.transport {
        ServerTransport::Http { url, .. } => url,
        ServerTransport::Stdio { .. } | ServerTransport::Store => "",
    }
}

/// `fut`'s outcome within `limit`, or `Err(())`; the limit starts again while
/// `waiting` is set (a person signing in, who has a limit of their own).
async fn within<T>(
    fut: impl Future<Output = T>,
    limit: Duration,
    waiting: &AtomicBool,
) -> Result<T, ()> {
    let mut fut = std::pin::pin!(fut);
    loop {
        match tokio::time::timeout(limit, &mut fut).await {
            Ok(done) => return Ok(done),
            Err(_) if waiting.load(Ordering::SeqCst) => continue,
            Err(_) => return Err(()),
        }
    }
}

/// Why a connection could not be made: the handshake (rmcp's words), or the OAuth flow
/// a server that answered 401 asked for.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("{0}")]
    Rmcp(Box<rmcp::service::ClientInitializeError>),
    #[error("{0}")]
    OAuth(String),
}

/// Why authorization failed, when that is why a request could not be sent: the
/// transport's `AuthError::AuthorizationFailed`, found along the error's sources (as
/// rmcp's own `ServiceError::auth_challenge` finds a challenge), not in its text.
fn oauth_refusal(e: &ServiceError) -> Option<&str> {
    match e {
        ServiceError::TransportSend(error) => auth_failure(error),
        _ => None,
    }
}

/// The same, for a transport error of rmcp's: a request's, or the handshake's.
fn auth_failure(error: &rmcp::transport::DynamicTransportError) -> Option<&str> {
    use rmcp::transport::auth::AuthError;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error.error.as_ref());
    while let Some(current) = source {
        if let Some(AuthError::AuthorizationFailed(why)) = current.downcast_ref::<AuthError>() {
            return Some(why);
        }
        source = current.source();
    }
    None
}

/// What a failed handshake says: an OAuth failure as its reason (rmcp's own text
/// names its generic types), anything else as rmcp says it.
fn handshake_failure(e: &ConnectError) -> String {
    use rmcp::service::ClientInitializeError;
    if let ConnectError::Rmcp(init) = e
        && let ClientInitializeError::TransportError { error, .. } = &**init
        && let Some(why) = auth_failure(error)
    {
        return format!("OAuth: {why}");
    }
    e.to_string()
}

/// How rmcp begins a session in the server's `protocol`.
fn lifecycle(protocol: Protocol) -> ClientLifecycleMode {
    let newer = || vec![ProtocolVersion::V_2026_07_28];
    match protocol {
        Protocol::Initialize => ClientLifecycleMode::Initialize,
        Protocol::Discover => ClientLifecycleMode::Discover {
            preferred_versions: newer(),
        },
        Protocol::Auto => ClientLifecycleMode::Auto {
            preferred_versions: newer(),
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}
