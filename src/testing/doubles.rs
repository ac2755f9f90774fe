//! The model and the tools as a case scripts them: each node's replies and each tool's
//! results handed out in order, what was left unused told at the end.

use super::file::{CaseSpec, ReplySpec, ToolSpec};
use crate::graph::Server;
use crate::llm::{DeltaSink, LlmClient, LlmError, LlmReply, LlmRequest, ToolCall};
use crate::tool::{ToolClient, ToolError, ToolInfo, ToolReply, ToolRequest};
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// What a case scripts under each name (a node's replies, a tool's results), each
/// handed out once, in order; and where the run went past the script, for the case to
/// fail on even when the graph took the error in its stride (an `on_error` route).
struct Script<T> {
    queues: Mutex<BTreeMap<String, Queue<T>>>,
    overruns: Mutex<Vec<String>>,
    /// How the left-over report names an item and its use: `["reply", "replies"]`,
    /// `node`, `asked for`.
    what: [&'static str; 2],
    under: &'static str,
    done: &'static str,
}

struct Queue<T> {
    items: Vec<T>,
    used: usize,
}

impl<T: Clone> Script<T> {
    fn new(
        items: impl IntoIterator<Item = (String, T)>,
        what: [&'static str; 2],
        under: &'static str,
        done: &'static str,
    ) -> Self {
        let mut queues: BTreeMap<String, Queue<T>> = BTreeMap::new();
        for (name, item) in items {
            queues
                .entry(name)
                .or_insert(Queue {
                    items: Vec::new(),
                    used: 0,
                })
                .items
                .push(item);
        }
        Script {
            queues: Mutex::new(queues),
            overruns: Mutex::new(Vec::new()),
            what,
            under,
            done,
        }
    }

    /// The next item scripted under `name`, or how many there were (none: no queue).
    fn next(&self, name: &str) -> Result<T, Option<usize>> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        match queues.get_mut(name) {
            Some(q) if q.used < q.items.len() => {
                q.used += 1;
                Ok(q.items[q.used - 1].clone())
            }
            Some(q) => Err(Some(q.items.len())),
            None => Err(None),
        }
    }

    /// Keeps `message`, where the run went past the script, and gives it back.
    fn overrun(&self, message: String) -> String {
        self.overruns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message.clone());
        message
    }

    fn overruns(&self) -> Vec<String> {
        self.overruns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What the run left unused (`1 of the 2 replies scripted for node ...`).
    fn unused(&self) -> Vec<String> {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .iter()
            .filter(|(_, q)| q.used < q.items.len())
            .map(|(name, q)| {
                left_over(
                    q.items.len() - q.used,
                    q.items.len(),
                    self.what,
                    &format!("scripted for {} `{name}`", self.under),
                    self.done,
                )
            })
            .collect()
    }
}

/// Replies per node.
pub(crate) struct ScriptedLlm(Script<LlmReply>);

impl ScriptedLlm {
    pub(crate) fn new(case: &CaseSpec) -> Self {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        let replies = case.reply.iter().map(|r| {
            let n = counts.entry(r.node.get_ref()).or_default();
            *n += 1;
            (r.node.get_ref().clone(), reply_of(r, *n))
        });
        ScriptedLlm(Script::new(
            replies,
            ["reply", "replies"],
            "node",
            "asked for",
        ))
    }

    /// The requests the script had no reply for.
    pub(crate) fn overruns(&self) -> Vec<String> {
        self.0.overruns()
    }

    pub(crate) fn unused(&self) -> Vec<String> {
        self.0.unused()
    }
}

fn reply_of(r: &ReplySpec, n: usize) -> LlmReply {
    let content = match (&r.json, &r.text) {
        (Some(j), _) => Some(j.to_string()),
        (None, Some(t)) => Some(t.clone()),
        (None, None) => None,
    };
    let tool_calls: Vec<ToolCall> = r
        .tool_calls
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: format!("call_{}_{n}_{}", r.node.get_ref(), i + 1),
            name: c.name.clone(),
            arguments: c.arguments.to_string(),
        })
        .collect();
    let finish_reason = if !tool_calls.is_empty() {
        "tool_calls"
    } else if r.refusal.is_some() {
        "content_filter"
    } else {
        "stop"
    };
    LlmReply {
        content,
        tool_calls,
        refusal: r.refusal.clone(),
        finish_reason: Some(finish_reason.into()),
        tokens_in: 0,
        tokens_out: 0,
        id: None,
        model: None,
    }
}

#[async_trait::async_trait]
impl LlmClient for ScriptedLlm {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<LlmReply, LlmError> {
        let node = &*request.node;
        let reply = self.0.next(node).map_err(|had| {
            let message = match had {
                Some(n) => format!(
                    "node `{node}` asked the model a {} time{}, and the case scripts {n} {} for it",
                    ordinal(n + 1),
                    refused_because(request)
                        .map(|why| format!(" (its last reply was refused: {why})"))
                        .unwrap_or_default(),
                    if n == 1 { "reply" } else { "replies" }
                ),
                None => format!(
                    "node `{node}` asked the model, and the case scripts no reply for it (add a `[[case.reply]]` with `node = \"{node}\"`)"
                ),
            };
            LlmError::Scripted(self.0.overrun(message))
        })?;
        if request.stream
            && let Some(text) = &reply.content
        {
            deltas(text);
        }
        Ok(reply)
    }
}

/// `the reply WHERE was never DONE`, `the 2 replies ... were ...`, `1 of the 2
/// replies ... was ...`: what a case scripted and its run left unused.
pub(crate) fn left_over(
    left: usize,
    of: usize,
    what: [&str; 2],
    place: &str,
    done: &str,
) -> String {
    let verb = if left == 1 { "was" } else { "were" };
    let place = if place.is_empty() {
        String::new()
    } else {
        format!(" {place}")
    };
    match (left, of) {
        (1, 1) => format!("the {}{place} {verb} never {done}", what[0]),
        (l, o) if l == o => format!("the {l} {}{place} {verb} never {done}", what[1]),
        (l, o) => format!("{l} of the {o} {}{place} {verb} never {done}", what[1]),
    }
}

/// Why the node's previous reply was refused, when the request asks again after one
/// (the node's correction, the request's last message): a script that runs short
/// because a reply did not fit says which reply and why.
fn refused_because(request: &LlmRequest) -> Option<String> {
    let said = request.messages.last()?.get("content")?.as_str()?;
    let (problem, _) = said
        .strip_prefix("That reply is not valid: ")
        .and_then(|p| p.rsplit_once(". Reply again"))
        .or_else(|| {
            said.strip_prefix("Not called: ")
                .and_then(|p| p.rsplit_once(". Call again"))
        })?;
    Some(problem.to_string())
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Results per tool; the tools each server lists.
pub(crate) struct ScriptedTools {
    listed: HashMap<String, Vec<ToolInfo>>,
    results: Script<ToolSpec>,
}

impl ScriptedTools {
    pub(crate) fn new(case: &CaseSpec, listed: HashMap<String, Vec<ToolInfo>>) -> Self {
        let results = case
            .tool
            .iter()
            .map(|t| (t.tool.get_ref().clone(), t.clone()));
        ScriptedTools {
            listed,
            results: Script::new(results, ["result", "results"], "tool", "called for"),
        }
    }

    /// Calls the script had no result for, or whose arguments or server differ from
    /// its.
    pub(crate) fn overruns(&self) -> Vec<String> {
        self.results.overruns()
    }

    pub(crate) fn unused(&self) -> Vec<String> {
        self.results.unused()
    }
}

fn refused(message: String) -> ToolError {
    ToolError {
        message,
        transient: false,
        asked: None,
        unsent: false,
    }
}

#[async_trait::async_trait]
impl ToolClient for ScriptedTools {
    async fn list_tools(&self, server: &Server) -> Result<Vec<ToolInfo>, ToolError> {
        self.listed.get(&server.name).cloned().ok_or_else(|| {
            refused(format!(
                "the test file lists no tools for server `{0}`: add `[servers.{0}] tools = ...`",
                server.name
            ))
        })
    }

    async fn call(&self, request: &ToolRequest) -> Result<ToolReply, ToolError> {
        self.answer(request)
            .map_err(|message| refused(self.results.overrun(message)))?
    }
}

impl ScriptedTools {
    /// The scripted answer to a call (itself a tool's error or success), or what is
    /// wrong with the call as the script sees it.
    fn answer(&self, request: &ToolRequest) -> Result<Result<ToolReply, ToolError>, String> {
        let tool = &request.tool;
        // What the real client refuses before the server hears of it (a tool the
        // listing lacks, arguments its schema does not take) is refused here too, as
        // the node's error, with no scripted result spent on it.
        if let Some(listed) = self.listed.get(&request.server.name) {
            let refused = |e: crate::mcp::McpError| Ok(Err(ToolError::from(e)));
            let Some(info) = listed.iter().find(|t| &t.name == tool) else {
                return refused(crate::mcp::McpError::UnknownTool {
                    server: request.server.name.clone(),
                    tool: tool.clone(),
                    help: crate::suggestion::offers(tool, listed.iter().map(|t| t.name.as_str())),
                });
            };
            let schema = crate::mcp::ToolSchema::new(info.clone());
            let sent = schema.as_sent(&request.arguments);
            if let Err(e) = schema.check(
                &request.server.name,
                sent.as_ref().unwrap_or(&request.arguments),
            ) {
                return refused(e);
            }
        }
        let scripted = self.results.next(tool).map_err(|had| match had {
            Some(n) => format!(
                "tool `{tool}` was called a {} time, and the case scripts {n} {} for it",
                ordinal(n + 1),
                if n == 1 { "result" } else { "results" }
            ),
            None => format!(
                "tool `{tool}` was called, and the case scripts no result for it (add a `[[case.tool]]` with `tool = \"{tool}\"`)"
            ),
        })?;
        if let Some(s) = &scripted.server
            && s.get_ref() != &request.server.name
        {
            return Err(format!(
                "tool `{tool}` was called on server `{}`, and the case scripts its result for server `{}`",
                request.server.name,
                s.get_ref()
            ));
        }
        if let Some(expected) = &scripted.arguments
            && expected != &request.arguments
        {
            return Err(format!(
                "tool `{tool}` was called with {}, and the case expects {expected}",
                request.arguments
            ));
        }
        if let (Some(error), true) = (&scripted.error, scripted.transient) {
            return Ok(Err(ToolError {
                message: error.clone(),
                transient: true,
                asked: None,
                unsent: false,
            }));
        }
        Ok(Ok(match (scripted.result, scripted.error) {
            (_, Some(error)) => ToolReply {
                content: Json::String(error.clone()),
                is_error: true,
                text: Some(error),
                structured: false,
            },
            (result, None) => {
                let result = result.unwrap_or(Json::Null);
                let text = match &result {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                // A text result reads as a real server's text part does: JSON text is
                // its value.
                let result = match &result {
                    Json::String(s) => crate::value::text_value(s),
                    _ => result,
                };
                ToolReply {
                    structured: !result.is_string(),
                    content: result,
                    is_error: false,
                    text: Some(text),
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asking(last: &str) -> LlmRequest {
        LlmRequest::new(
            "plan",
            "m",
            vec![json!({ "role": "user", "content": last })],
        )
    }

    #[test]
    fn a_request_after_a_refused_reply_says_why_it_was_refused() {
        assert_eq!(
            refused_because(&asking(
                "That reply is not valid: `kind` is missing. Reply again, with the problem fixed."
            )),
            Some("`kind` is missing".into())
        );
        assert_eq!(
            refused_because(&asking(
                "Not called: no tool `x`. Call again, with the problem fixed."
            )),
            Some("no tool `x`".into())
        );
        assert_eq!(refused_because(&asking("Plan the trip.")), None);
    }
}
