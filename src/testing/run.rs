//! One case run: the graph on a thread of a memory store, the model and tools scripted,
//! each interrupt answered in turn, and what the run did gathered from its events.

use super::check::Route;
use super::doubles::{ScriptedLlm, ScriptedTools};
use super::file::CaseSpec;
use crate::graph::Graph;
use crate::llm::{LlmClient, ReplayClient};
use crate::run::{Event, Go, Outcome, Runner};
use crate::store::MemoryStore;
use crate::tool::ToolInfo;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// What a case's run did.
#[derive(Debug, Clone, Default)]
pub struct Actual {
    /// The nodes in the order they started (across the runs its answers resumed).
    pub path: Vec<String>,
    pub routes: Vec<Route>,
    /// A finalize node's outcome (`end` at END), `interrupted`, `stopped`, or `error`
    /// when the run failed.
    pub outcome: String,
    pub response: Option<String>,
    /// The run's error, when it failed.
    pub error: Option<String>,
    /// The thread's state when it ended (none when it has no checkpoint).
    pub state: Json,
    /// Every event, as `--json` prints it.
    pub events: Vec<Json>,
    /// Scripted replies, results and answers the run never asked for.
    pub unused: Vec<String>,
    /// Where the script ran short or did not expect the call: a request it had no
    /// reply for, a call it had no result for or whose arguments differ. Always a
    /// failure: the script, not the graph, is at fault.
    pub overruns: Vec<String>,
}

/// Runs `case` on `graph`; `dir` is the test file's folder (a recording's path is
/// relative to it); `listed` the tools each server lists.
pub(crate) async fn run_case(
    graph: &Arc<Graph>,
    case: &CaseSpec,
    dir: &Path,
    listed: HashMap<String, Vec<ToolInfo>>,
) -> Actual {
    let mut actual = Actual::default();
    let scripted = Arc::new(ScriptedLlm::new(case));
    let llm: Arc<dyn LlmClient> = match &case.recording {
        Some(r) => match ReplayClient::open(&dir.join(r.get_ref())) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                actual.outcome = "error".into();
                actual.error = Some(e.to_string());
                return actual;
            }
        },
        None => scripted.clone(),
    };
    let tools = Arc::new(ScriptedTools::new(case, listed));
    let store = Arc::new(MemoryStore::new());
    let mut runner = Runner::new(graph.clone(), store)
        .with_llm(llm)
        .with_tools(tools.clone())
        .with_max_steps(case.max_steps)
        .with_llm_content(true);
    if let Some(Json::Object(values)) = case.context.as_ref().map(|c| c.get_ref()) {
        runner = runner.with_configuration(values.clone());
    }
    let mut events = runner.events();
    let thread = "test";
    let input = case
        .input
        .as_ref()
        .map_or_else(|| Json::Object(Default::default()), |i| i.get_ref().clone());
    let mut answers = case.answer.iter();
    // Later turns: each a new run on the thread once the one before has ended or
    // waits with no answer left (a chat's next message, which drops a pending question
    // as LangGraph's server does).
    let mut turns = case.turns.iter();
    let mut go = Go::Start(input);
    loop {
        let result = runner.run(thread, go).await;
        while let Ok(e) = events.try_recv() {
            note(&mut actual, &e);
        }
        match result {
            Ok(Outcome::Finished {
                outcome, response, ..
            }) => {
                actual.outcome = outcome;
                actual.response = response;
            }
            Ok(Outcome::Stopped { .. }) => {
                actual.outcome = "stopped".into();
                actual.response = None;
            }
            Ok(Outcome::Interrupted { node, .. }) => match answers.next() {
                None => {
                    actual.outcome = "interrupted".into();
                    actual.response = None;
                }
                Some(a) => {
                    if let Some(n) = &a.node
                        && n.get_ref() != &node
                    {
                        // The script, not the graph, is wrong: a run against it, which
                        // `--update` does not pin.
                        let message = format!(
                            "the run waits at `{node}`, and the next answer is for `{}`",
                            n.get_ref()
                        );
                        actual.outcome = "error".into();
                        actual.error = Some(message.clone());
                        actual.overruns.push(message);
                        break;
                    }
                    go = if a.timeout {
                        Go::Expire
                    } else {
                        Go::resume(a.payload.clone())
                    };
                    continue;
                }
            },
            Err(e) => {
                actual.outcome = "error".into();
                actual.error = Some(e.to_string());
                break;
            }
        }
        match turns.next() {
            Some(turn) => go = Go::Restart(turn.get_ref().clone()),
            None => break,
        }
    }
    if let Ok((state, _)) = runner.threads().state(thread, None).await {
        actual.state = state;
    }
    actual.overruns.extend(scripted.overruns());
    actual.overruns.extend(tools.overruns());
    actual.unused.extend(scripted.unused());
    actual.unused.extend(tools.unused());
    let left = answers.count();
    if left > 0 && actual.error.is_none() {
        actual.unused.push(super::doubles::left_over(
            left,
            case.answer.len(),
            ["answer", "answers"],
            "",
            "asked for",
        ));
    }
    actual
}

fn note(actual: &mut Actual, e: &Event) {
    match e {
        Event::NodeStarted { node, .. } => actual.path.push(node.to_string()),
        Event::RouteTaken { from, to, case } => actual.routes.push(Route {
            from: from.to_string(),
            to: to.to_string(),
            case: case.clone(),
        }),
        _ => {}
    }
    if let Ok(j) = serde_json::to_value(e) {
        actual.events.push(j);
    }
}
