//! Scripted stand-ins for the LLM and tool clients, for interpreter tests that need
//! neither a model nor an MCP server.

use serde_json::{Value as Json, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use switchyard::graph::Server;
use switchyard::llm::DeltaSink;
use switchyard::llm::reply_json;
use switchyard::llm::{LlmClient, LlmError, LlmReply, LlmRequest};
use switchyard::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};

/// Answers each node from its own queue of replies, in order; records every request.
#[derive(Default)]
pub(crate) struct ScriptedLlm {
    replies: Mutex<HashMap<String, VecDeque<LlmReply>>>,
    pub(crate) requests: Mutex<Vec<LlmRequest>>,
}

impl ScriptedLlm {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Queues JSON replies for `node`.
    pub(crate) fn script(
        self: &Arc<Self>,
        node: &str,
        replies: impl IntoIterator<Item = Json>,
    ) -> Arc<Self> {
        self.replies
            .lock()
            .unwrap()
            .entry(node.to_string())
            .or_default()
            .extend(replies.into_iter().map(reply_json));
        self.clone()
    }
}

#[async_trait::async_trait]
impl LlmClient for ScriptedLlm {
    async fn complete(
        &self,
        request: &LlmRequest,
        _deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        self.replies
            .lock()
            .unwrap()
            .get_mut(&*request.node)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| {
                LlmError::Replay(format!(
                    "the script has no more replies for `{}`",
                    request.node
                ))
            })
    }
}

type Handler = Box<dyn Fn(&Json) -> Result<ToolReply, ToolError> + Send + Sync>;

/// Tools answered by closures; records every call as `tool(arguments)`.
#[derive(Default)]
pub(crate) struct ScriptedTools {
    handlers: HashMap<String, Handler>,
    pub(crate) calls: Mutex<Vec<String>>,
}

impl ScriptedTools {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn tool(
        mut self,
        name: &str,
        f: impl Fn(&Json) -> Result<ToolReply, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.handlers.insert(name.to_string(), Box::new(f));
        self
    }
}

pub(crate) fn ok(content: Json) -> Result<ToolReply, ToolError> {
    Ok(ToolReply {
        content,
        is_error: false,
        ..Default::default()
    })
}

#[async_trait::async_trait]
impl ToolClient for ScriptedTools {
    async fn list_tools(&self, _server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        let mut names: Vec<&String> = self.handlers.keys().collect();
        names.sort();
        Ok(names
            .into_iter()
            .map(|n| ToolInfo {
                name: n.clone(),
                description: String::new(),
                input_schema: json!({ "type": "object" }),
                output_schema: None,
            })
            .collect())
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("{}({})", request.tool, request.arguments));
        match self.handlers.get(&request.tool) {
            Some(f) => f(&request.arguments),
            None => Err(ToolError {
                message: format!("no tool `{}`", request.tool),
                transient: false,
                asked: None,
                unsent: false,
            }),
        }
    }
}
