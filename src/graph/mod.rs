//! The checked graph: names resolved to indices, expressions compiled, templates
//! registered, schemas loaded. Only a [`Graph`] can run; it is made from a spec that
//! passed every check (see [`crate::compile`]).

mod compile;
mod contract;
mod exprs;
mod fast;
mod fast_template;
mod shape;

pub use compile::CompileError;
pub(crate) use compile::compile;
pub use exprs::ExprId;
pub(crate) use fast::Root;
pub use shape::{Change, Shape, diff};

use crate::spec::{Breakpoint, Decision, FieldType, NodeKind, Reducer};
use exprs::Exprs;
use minijinja::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldId(pub u32);

/// Where an edge goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Node(NodeId),
    End,
}

pub struct Graph {
    pub name: String,
    pub path: PathBuf,
    pub root: PathBuf,
    /// SHA-256 of the graph file and every prompt and schema file it names.
    pub hash: String,
    pub entry: NodeId,
    /// `[graph] require_policy`: side-effecting tool calls only after a policy node.
    pub require_policy: bool,
    pub limits: Limits,
    pub fields: Vec<Field>,
    /// `[graph] output` names some fields, not all: a result and the `values` stream
    /// show those alone (read per checkpoint of a stream, so kept, not worked out).
    pub output_declared: bool,
    /// `[graph] input` leaves some state field out.
    pub input_declared: bool,
    pub nodes: Vec<Node>,
    pub servers: Vec<Server>,
    pub llm: LlmDefaults,
    /// The version as written, to compare it with another ([`diff`]).
    pub shape: Arc<Shape>,
    pub(crate) exprs: Exprs,
    /// The fast form of each expression that has one (see `fast.rs`).
    fast: Vec<Option<fast::Fast>>,
    /// The fast form of each template that has one, by name (see `fast_template.rs`),
    /// read back from the environment that holds the templates.
    fast_templates: crate::fxhash::FxHashMap<String, fast_template::FastTemplate>,
    pub(crate) expr_sources: Vec<String>,
    field_ids: crate::fxhash::FxHashMap<String, FieldId>,
    node_ids: crate::fxhash::FxHashMap<String, NodeId>,
}

impl Graph {
    /// Where `command.goto` sends a run: a node, or END (`END` or LangGraph's
    /// `__end__`); why not, when the name is no node or the graph requires a policy
    /// before side effects and the node could reach one without it.
    pub fn goto_target(&self, name: &str) -> Result<Target, String> {
        if name == crate::spec::END || name == "__end__" {
            return Ok(Target::End);
        }
        let id = self.node_id(name).ok_or_else(|| {
            let hint = crate::suggestion::help_for(name, self.nodes.iter().map(|n| &*n.name))
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            format!("`{name}` is not a node of the graph{hint}")
        })?;
        if self.require_policy
            && let Some(x) = self.unguarded_side_effect_from(Target::Node(id))
        {
            return Err(format!(
                "from `{name}` the run could reach side-effecting `{}` without passing a policy node, and the graph sets `require_policy`",
                self.node(x).name
            ));
        }
        Ok(Target::Node(id))
    }

    /// A side-effecting tool node that a run going to `from` could reach without
    /// passing a policy node (the checker proves none is reachable so from the entry
    /// under `require_policy`; a run sent elsewhere, by `command.goto`, needs asking).
    pub fn unguarded_side_effect_from(&self, from: Target) -> Option<NodeId> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = Vec::new();
        if let Target::Node(n) = from {
            stack.push(n);
        }
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut seen[id.0 as usize], true) {
                continue;
            }
            let node = self.node(id);
            match &node.body {
                Body::Policy(_) => continue,
                Body::Mcp(m) if m.side_effects => return Some(id),
                _ => {}
            }
            let mut targets: Vec<Target> = node.on_error.into_iter().collect();
            match &node.next {
                Next::Goto(t) => targets.push(*t),
                Next::Switch {
                    cases,
                    default,
                    forks,
                    ..
                } => {
                    targets.extend(cases.iter().map(|(_, t)| *t));
                    targets.extend(*default);
                    for (_, branches, join) in forks {
                        targets.extend(branches.iter().copied());
                        targets.push(Target::Node(*join));
                    }
                }
                Next::When { cases, default } => {
                    targets.extend(cases.iter().map(|c| c.to));
                    targets.extend(*default);
                }
                Next::Finish => {}
                Next::Fork { branches, join } => {
                    targets.extend(branches.iter().copied());
                    targets.push(Target::Node(*join));
                }
            }
            match &node.body {
                Body::Interrupt(i) => targets.extend(i.on_timeout),
                Body::Llm(l) => targets.extend(l.pseudo_tools.iter().map(|p| p.to)),
                _ => {}
            }
            targets.extend(self.limits.on_limit);
            stack.extend(targets.into_iter().filter_map(|t| match t {
                Target::Node(n) => Some(n),
                Target::End => None,
            }));
        }
        None
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    pub fn field(&self, id: FieldId) -> &Field {
        &self.fields[id.0 as usize]
    }

    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_ids.get(name).copied()
    }

    pub fn field_id(&self, name: &str) -> Option<FieldId> {
        self.field_ids.get(name).copied()
    }

    /// The MCP server the graph declares as `name`; without one, the help that names
    /// the nearest declared one (`did you mean ...?`), if any is near.
    pub fn server(&self, name: &str) -> Result<&Server, Option<String>> {
        self.servers.iter().find(|s| s.name == name).ok_or_else(|| {
            crate::suggestion::help_for(name, self.servers.iter().map(|s| s.name.as_str()))
        })
    }

    pub fn target_name(&self, t: Target) -> &str {
        match t {
            Target::Node(n) => &self.node(n).name,
            Target::End => crate::spec::END,
        }
    }

    /// Evaluates a compiled expression in a context: by its fast form when it has one
    /// that can, else by minijinja.
    /// Evaluates expression `id` with its names looked up in `root`; `ctx` makes the
    /// same root as a minijinja value, only when minijinja has to evaluate it.
    pub(crate) fn eval_in(
        &self,
        id: ExprId,
        root: &dyn Root,
        ctx: impl FnOnce() -> Value,
    ) -> Result<Value, minijinja::Error> {
        if let Some(Some(fast)) = self.fast.get(id.0 as usize)
            && let Some(v) = fast.eval(root)
        {
            return Ok(v);
        }
        self.exprs.eval(id, ctx())
    }

    pub fn expr_source(&self, id: ExprId) -> &str {
        &self.expr_sources[id.0 as usize]
    }

    /// Renders a registered template (a prompt file or an inline template) with its
    /// names looked up in `root`: by its fast form when it has one that can, else by
    /// minijinja in the context `ctx` makes.
    pub(crate) fn render_in(
        &self,
        name: &str,
        root: &dyn Root,
        ctx: impl FnOnce() -> Value,
    ) -> Result<String, minijinja::Error> {
        if let Some(fast) = self.fast_templates.get(name)
            && let Some(text) = fast.render(root)
        {
            return Ok(text);
        }
        self.exprs.env().get_template(name)?.render(ctx())
    }
}

#[derive(Clone, Debug, Default)]
pub struct Limits {
    pub max_steps: Option<u64>,
    pub max_wall_time: Option<Duration>,
    pub max_tokens: Option<u64>,
    pub on_limit: Option<Target>,
    /// `[budget]`, checked between nodes as the limits are.
    pub budget: Budget,
}

/// `[budget]` as the runner holds a run to it: a run that has gone past one ends as
/// at a limit (through `on_limit`). `prices` turn each reply's tokens into dollars.
#[derive(Clone, Debug, Default)]
pub struct Budget {
    pub tokens: Option<u64>,
    pub model_calls: Option<u64>,
    pub tool_calls: Option<u64>,
    pub usd: Option<f64>,
    pub prices: Arc<std::collections::HashMap<String, crate::spec::Price>>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none()
            && self.model_calls.is_none()
            && self.tool_calls.is_none()
            && self.usd.is_none()
    }

    /// The budget a run that used `tokens`, `model_calls`, `tool_calls` and `usd` has
    /// gone past, if any.
    pub fn passed(
        &self,
        tokens: u64,
        model_calls: u64,
        tool_calls: u64,
        usd: f64,
    ) -> Option<&'static str> {
        if self.tokens.is_some_and(|b| tokens > b) {
            Some("budget.tokens")
        } else if self.model_calls.is_some_and(|b| model_calls > b) {
            Some("budget.model_calls")
        } else if self.tool_calls.is_some_and(|b| tool_calls > b) {
            Some("budget.tool_calls")
        } else if self.usd.is_some_and(|b| usd > b) {
            Some("budget.usd")
        } else {
            None
        }
    }
}

pub struct Field {
    pub name: Arc<str>,
    pub ty: FieldType,
    pub default: serde_json::Value,
    pub reducer: Reducer,
    pub schema: Option<Arc<jsonschema::Validator>>,
    /// A named constant: no node writes it, no input or update sets it.
    pub constant: bool,
    /// A `[configurable]` constant: a run's configuration may give it another value
    /// within these bounds.
    pub configurable: Option<crate::spec::Bounds>,
    /// A run's input may set it (`[graph] input`; every state field without one).
    pub input: bool,
    /// A run's result gives it (`[graph] output`; every field without one).
    pub output: bool,
    /// Every run's input must give it.
    pub required: bool,
}

pub struct Node {
    pub name: Arc<str>,
    pub kind: NodeKind,
    pub body: Body,
    pub set: Vec<(FieldId, ExprId)>,
    pub only_if: Option<ExprId>,
    pub next: Next,
    pub on_error: Option<Target>,
    pub breakpoint: Option<Breakpoint>,
    pub timeout: Option<Duration>,
    pub retry: Option<Retry>,
    /// The node's work is done once per item of a list.
    pub map: Option<MapPlan>,
    /// SHA-256 of the node's text in the graph file and of the files it names: a resume
    /// after an edit is allowed when the pending node's fingerprint is unchanged.
    pub fingerprint: String,
}

/// How a mapped node goes over its list.
pub struct MapPlan {
    /// The list.
    pub over: ExprId,
    /// The name an item is read by.
    pub var: Arc<str>,
    /// Items at work at once.
    pub concurrency: usize,
    /// A failed item is kept as `{ error }` instead of failing the node.
    pub collect_errors: bool,
}

#[derive(Clone, Debug)]
pub struct Retry {
    pub attempts: u32,
    pub backoff: Duration,
    pub max_backoff: Duration,
    pub jitter: bool,
}

/// How a node picks its successor.
pub enum Next {
    Goto(Target),
    Switch {
        on: ExprId,
        cases: Vec<(String, Target)>,
        default: Option<Target>,
        /// Cases that start parallel branches: the case, its branches and their join
        /// (`cases` holds the case too, with its first branch).
        forks: Vec<(String, Vec<Target>, NodeId)>,
    },
    When {
        cases: Vec<WhenCase>,
        default: Option<Target>,
    },
    /// A finalize or fail node: the run ends.
    Finish,
    /// `next = [...]`: the branches run as supersteps until every one reaches `join`.
    Fork {
        branches: Vec<Target>,
        join: NodeId,
    },
}

pub struct WhenCase {
    pub label: String,
    pub cond: ExprId,
    pub to: Target,
}

/// A value template: strings are expressions, the rest literals.
#[derive(Debug)]
pub enum ValueTpl {
    Expr(ExprId),
    Literal(serde_json::Value),
    Array(Vec<ValueTpl>),
    Object(Vec<(String, ValueTpl)>),
}

pub enum Body {
    Set,
    Policy(PolicyBody),
    Interrupt(InterruptBody),
    Finalize(FinalizeBody),
    Fail(FailBody),
    Graph(GraphBody),
    Llm(Box<LlmBody>),
    Mcp(McpBody),
}

pub struct PolicyBody {
    pub rules: Vec<PolicyRule>,
    pub default: Decision,
    pub default_reason: String,
    pub output: FieldId,
}

pub struct PolicyRule {
    pub name: Option<String>,
    pub when: ExprId,
    pub decision: Decision,
    /// Name of the registered reason template.
    pub reason: Option<String>,
}

pub struct InterruptBody {
    pub payload: Option<ValueTpl>,
    pub resume_schema: Option<Arc<jsonschema::Validator>>,
    /// The resume schema as written, so a prompt can tell a person what to answer.
    pub resume_schema_json: Option<Arc<serde_json::Value>>,
    pub output: Option<FieldId>,
    pub timeout: Option<Duration>,
    pub on_timeout: Option<Target>,
}

/// A node that runs another graph on a thread of its own (`<thread>/<node>`).
pub struct GraphBody {
    pub child: Arc<Graph>,
    /// The child's input: its field's name and the value from this graph's state.
    pub input: Vec<(String, ValueTpl)>,
    /// This graph's field, and the child's field whose final value it gets.
    pub output: Vec<(FieldId, String)>,
}

/// A node that fails the run on purpose, with its own outcome.
pub struct FailBody {
    pub outcome: String,
    /// Name of the registered message template.
    pub message: String,
}

pub struct FinalizeBody {
    pub outcome: String,
    /// Name of the registered response template.
    pub response: Option<String>,
    pub output: Option<FieldId>,
}

pub struct LlmBody {
    /// Names of the registered prompt templates (an `llm_chat` node may have no
    /// prompt: it answers the conversation).
    pub prompt: Option<String>,
    pub system: Option<String>,
    pub schema: Option<Arc<serde_json::Value>>,
    pub validator: Option<Arc<jsonschema::Validator>>,
    pub schema_hash: String,
    pub output: FieldId,
    pub history: Option<FieldId>,
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub retries: u32,
    pub fallback: Option<ExprId>,
    pub cache: Option<(ExprId, Duration)>,
    pub tools: Option<(usize, Vec<String>)>,
    pub pseudo_tools: Vec<PseudoTool>,
    pub stream: bool,
    /// Only this top-level string property of the reply streams.
    pub stream_field: Option<String>,
    /// The output schema goes as a strict `response_format`.
    pub strict: bool,
    /// `parallel_tool_calls` as the node sets it: `Some(true)` takes several calls in
    /// one reply (the output is then `{ calls, text }`).
    pub parallel_tool_calls: Option<bool>,
    /// Its sampling settings, `[llm]`'s where it sets none.
    pub sampling: crate::spec::Sampling,
    /// `llm_chat`: the reply is text, appended to `output` as an AI message.
    pub chat: bool,
}

pub struct PseudoTool {
    pub name: String,
    pub description: String,
    pub schema: Option<Arc<serde_json::Value>>,
    pub to: Target,
}

pub struct McpBody {
    /// Index into `Graph::servers`.
    pub server: usize,
    /// The `messages` field whose last AI message's tool calls the node runs (then
    /// `calls` is empty).
    pub tool_calls: Option<FieldId>,
    pub calls: Vec<Call>,
    pub multi: bool,
    pub side_effects: bool,
    pub audit: Option<FieldId>,
}

pub struct Call {
    pub tool: ToolName,
    pub args: Option<ValueTpl>,
    pub output: Option<FieldId>,
}

pub enum ToolName {
    Fixed(String),
    /// Name of the registered template that renders the tool name.
    Template(String),
}

#[derive(Clone, Debug)]
pub struct Server {
    pub name: String,
    pub transport: ServerTransport,
    /// The directories given to the server as its MCP roots (absolute); none: the
    /// client declares no roots.
    pub roots: Vec<std::path::PathBuf>,
    /// The server may ask the graph's model for completions (MCP sampling).
    pub sampling: bool,
    /// How a session with the server begins (`protocol`).
    pub protocol: crate::spec::Protocol,
}

#[derive(Clone, Debug)]
pub enum ServerTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        /// Variables of Switchyard's own environment the child does not get: the
        /// LLM key (`[llm] api_key_env`), unless `env` hands it over on purpose.
        env_remove: Vec<String>,
        cwd: PathBuf,
    },
    Http {
        url: String,
        /// Sent with every request, as written (`${...}` expanded when it starts).
        headers: Vec<(String, String)>,
        /// How to authorize when the server answers 401 (as written, `${...}`
        /// expanded when it starts).
        oauth: crate::spec::OAuth,
    },
    /// The long-term store, as tools served in process (`crate::run::StoreTools`);
    /// never started as an MCP server.
    Store,
}

#[derive(Clone, Debug, Default)]
pub struct LlmDefaults {
    pub model: Option<String>,
    pub base_url_env: String,
    pub api_key_env: String,
    pub temperature: Option<f64>,
    pub timeout: Duration,
    /// Which server the endpoint is (`[llm] provider`).
    pub provider: crate::spec::Provider,
}
