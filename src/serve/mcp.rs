//! `/mcp`: every served graph as an MCP tool (streamable HTTP, through rmcp's server
//! side), as LangGraph's server offers its assistants, so that an MCP client (Claude
//! Desktop, Cursor, another agent) can call a graph: the tool's input schema is the
//! graph's input schema, a call is a run on a thread of its own, and its result the
//! state at the run's end. Stateless: no session, each answer one JSON body.
//!
//! Where LangGraph's answer to a run that pauses at an interrupt cannot be answered,
//! here the run's thread is kept and named in the result, and the tool
//! `answer_interrupt` answers it.

use super::AppState;
use super::run_create::RunCreate;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value as Json, json};

/// The tool that answers a paused call.
const ANSWER: &str = "answer_interrupt";

/// What the threads of calls here are named with: `answer_interrupt` answers those
/// alone, and deletes each once its call is done.
const THREAD_PREFIX: &str = "mcp-";

/// The `/mcp` service; `open` lets any `Host` header in (the server is reached on
/// an address that is not loopback, behind its API key), else only loopback names,
/// against DNS rebinding.
pub(super) fn service(
    state: AppState,
    open: bool,
) -> StreamableHttpService<Graphs, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    if open {
        config.allowed_hosts.clear();
    }
    StreamableHttpService::new(
        move || Ok(Graphs(state.clone())),
        LocalSessionManager::default().into(),
        config,
    )
}

/// The served graphs, as an MCP server.
#[derive(Clone)]
pub(super) struct Graphs(AppState);

impl ServerHandler for Graphs {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("Switchyard", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let annotations = ToolAnnotations::default()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(true);
        let mut tools: Vec<Tool> = Vec::new();
        for served in self.0.host.graphs().list() {
            // A graph that never validated has no schema and cannot run.
            let Some(drawing) = served.drawing.as_ref().filter(|_| served.current.is_some()) else {
                continue;
            };
            let description = if served.description.is_empty() {
                format!("Tool based on the {} assistant", served.id)
            } else {
                served.description.clone()
            };
            let mut tool = Tool::new(
                served.id.clone(),
                description,
                object(&drawing.input_schema),
            );
            tool.title = Some(served.id.clone());
            tool.annotations = Some(annotations.clone());
            tools.push(tool);
        }
        // Assistants made through the API: named by their id (their names need not be
        // unique), titled by their name, with their graph's input.
        let made = self.0.host.assistants().await.unwrap_or_default();
        for a in made {
            let crate::host::AssistantView::Made(m) = &a else {
                continue;
            };
            let Some(drawing) = self
                .0
                .host
                .graphs()
                .get(&m.graph)
                .filter(|s| s.current.is_some())
                .and_then(|s| s.drawing)
            else {
                continue;
            };
            let description = match m.body.get("description").and_then(Json::as_str) {
                Some(d) if !d.is_empty() => d.to_string(),
                _ => format!("Tool based on the {} assistant", a.name()),
            };
            let mut tool = Tool::new(m.id.clone(), description, object(&drawing.input_schema));
            tool.title = Some(a.name().to_string());
            tool.annotations = Some(annotations.clone());
            tools.push(tool);
        }
        let mut answer = Tool::new(
            ANSWER,
            "Answers a call that paused at an interrupt: `thread_id` as its result named it, `resume` the answer its interrupt asks for. The run goes on, and this answers as the call would have.",
            object(&json!({
                "type": "object",
                "properties": {
                    "thread_id": {"type": "string", "description": "The paused call's thread."},
                    "resume": {"description": "The answer."}
                },
                "required": ["thread_id", "resume"],
                "additionalProperties": false
            })),
        );
        answer.annotations = Some(annotations);
        tools.push(answer);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let s = &self.0;
        let arguments = request.arguments.unwrap_or_default();
        let (thread, body) = if request.name == ANSWER {
            let Some(Json::String(thread)) = arguments.get("thread_id") else {
                return Err(ErrorData::invalid_params(
                    "`thread_id` is required: the paused call's thread, as its result named it",
                    None,
                ));
            };
            let Some(resume) = arguments.get("resume") else {
                return Err(ErrorData::invalid_params(
                    "`resume` is required: the answer the interrupt asks for",
                    None,
                ));
            };
            // Only a thread a call here made and kept: this is no way into others.
            if !thread.starts_with(THREAD_PREFIX) {
                return Ok(failed(&format!(
                    "thread `{thread}` is not one a call of this server's tools paused"
                )));
            }
            let view = match s.host.thread(thread).await {
                Ok(v) => v,
                Err(e) => return Ok(failed(&e.to_string())),
            };
            let assistant = view.record.metadata["assistant_id"].clone();
            (
                Some(thread.clone()),
                json!({ "assistant_id": assistant, "command": { "resume": resume } }),
            )
        } else {
            if s.host.assistant(&request.name).await.is_err() {
                return Err(ErrorData::invalid_params(
                    format!("Unknown tool: {}", request.name),
                    None,
                ));
            }
            // A thread of the call's own, kept while its run pauses to be answered.
            (
                Some(format!("{THREAD_PREFIX}{}", crate::host::new_id())),
                json!({ "assistant_id": &*request.name, "input": arguments, "if_not_exists": "create" }),
            )
        };
        let body: RunCreate = match serde_json::from_value(body) {
            Ok(b) => b,
            Err(e) => return Ok(failed(&e.to_string())),
        };
        let created = match super::runs::created(s, thread.as_deref(), body).await {
            Ok(c) => c,
            Err(e) => return Ok(failed(&e.detail)),
        };
        let run = created.run;
        run.finished().await;
        let result = super::stream::result(&s.host, &run).await;
        if let Some(error) = result.get("__error__") {
            let _ = s.host.delete_thread(&run.thread).await;
            return Ok(failed(
                error["message"].as_str().unwrap_or("the run failed"),
            ));
        }
        let mut structured = match result {
            Json::Object(o) => o,
            other => Map::from_iter([("value".to_string(), other)]),
        };
        if structured.contains_key("__interrupt__") {
            structured.insert("thread_id".into(), json!(run.thread));
        } else {
            // Done: nobody will answer it, and the caller has its result.
            let _ = s.host.delete_thread(&run.thread).await;
        }
        let structured = Json::Object(structured);
        let mut answer = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
        answer.structured_content = Some(structured);
        Ok(answer.into())
    }
}

/// A failed call: the run's or the request's words, as the tool's error.
fn failed(message: &str) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message.to_string())]).into()
}

fn object(schema: &Json) -> Map<String, Json> {
    match schema {
        Json::Object(o) => o.clone(),
        _ => Map::from_iter([("type".to_string(), json!("object"))]),
    }
}
