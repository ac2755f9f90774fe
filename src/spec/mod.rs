//! The graph as written: every name, target, type and path keeps its position in the file
//! (`Sp<T>`), so the checker can point at it. Nothing here is resolved or validated beyond
//! the shape of the TOML; that is the checker's job.

mod contract;
mod cost;
mod duration;
mod field_type;
mod llm;

pub use contract::{Bounds, model_ref};
pub use cost::{Budget, Price, Prices, parse_prices, price_of};
pub use duration::parse_duration;
pub use field_type::{FieldType, TYPE_NAMES, is_message, parse_field_type};
pub use llm::{Provider, Sampling, parse_provider};

/// Operators an expression, or one tag of a template, may hold: minijinja parses by
/// recursion, and a deeper expression would overflow the stack (`jinja/limits.rs`
/// measures every source first).
pub const MAX_OPERATORS: usize = 1_000;
/// How deep a template's blocks (`{% if %}`, `{% for %}`, ...) may nest.
pub const MAX_BLOCK_DEPTH: usize = 100;

use crate::source::FileId;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

/// A value with the byte span it came from.
pub type Sp<T> = toml::Spanned<T>;

/// Name of the end of the graph, usable as an edge target.
pub const END: &str = "END";

/// One graph file, as written.
#[derive(Debug)]
pub struct GraphSpec {
    pub file: FileId,
    /// The graph file's path as given.
    pub path: PathBuf,
    /// Directory that relative prompt, schema and cwd paths resolve against.
    pub root: PathBuf,
    pub graph: GraphHeader,
    pub llm: LlmDefaults,
    pub servers: Vec<ServerSpec>,
    pub state: Vec<FieldSpec>,
    pub nodes: Vec<NodeSpec>,
    /// `[budget]`: none declared when empty.
    pub budget: Budget,
    /// Where each name is first declared, so that looking one up does not scan the
    /// file's nodes (a check looks up every edge: quadratic on a long graph).
    names: Names,
}

#[derive(Debug, Default)]
struct Names {
    nodes: std::collections::HashMap<String, usize>,
    fields: std::collections::HashMap<String, usize>,
    servers: std::collections::HashMap<String, usize>,
}

impl GraphSpec {
    /// A spec of these parts, its names indexed (the first of a name declared twice is
    /// the one found, as a scan in file order finds it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        file: FileId,
        path: PathBuf,
        root: PathBuf,
        graph: GraphHeader,
        llm: LlmDefaults,
        servers: Vec<ServerSpec>,
        state: Vec<FieldSpec>,
        nodes: Vec<NodeSpec>,
        budget: Budget,
    ) -> Self {
        fn index<'a>(
            names: impl Iterator<Item = &'a String>,
        ) -> std::collections::HashMap<String, usize> {
            let mut map = std::collections::HashMap::new();
            for (i, n) in names.enumerate() {
                map.entry(n.clone()).or_insert(i);
            }
            map
        }
        let names = Names {
            nodes: index(nodes.iter().map(|n| n.name.get_ref())),
            fields: index(state.iter().map(|f| f.name.get_ref())),
            servers: index(servers.iter().map(|s| s.name.get_ref())),
        };
        GraphSpec {
            file,
            path,
            root,
            graph,
            llm,
            servers,
            state,
            nodes,
            budget,
            names,
        }
    }

    /// The position in `nodes` of the node named `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.names.nodes.get(name).copied()
    }

    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.names.nodes.get(name).map(|&i| &self.nodes[i])
    }

    pub fn field(&self, name: &str) -> Option<&FieldSpec> {
        self.names.fields.get(name).map(|&i| &self.state[i])
    }

    pub fn server(&self, name: &str) -> Option<&ServerSpec> {
        self.names.servers.get(name).map(|&i| &self.servers[i])
    }

    pub fn has_limits(&self) -> bool {
        self.graph.max_steps.is_some()
            || self.graph.max_wall_time.is_some()
            || self.graph.max_tokens.is_some()
            || !self.budget.is_empty()
    }

    /// Every file the graph names (prompts, schemas, subgraphs, a price file), as
    /// written: what a server watches for besides the graph file.
    pub fn named_files(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for f in &self.state {
            out.extend(f.schema.iter().map(|s| s.get_ref().as_str()));
        }
        if let Some(Prices::File(p)) = &self.llm.prices {
            out.push(p.get_ref());
        }
        for n in &self.nodes {
            match &n.body {
                KindSpec::Llm(l) => {
                    out.extend(
                        [&l.prompt, &l.system, &l.schema]
                            .into_iter()
                            .flatten()
                            .map(|s| s.get_ref().as_str()),
                    );
                    out.extend(
                        l.pseudo_tools
                            .iter()
                            .filter_map(|p| p.schema.as_ref())
                            .map(|s| s.get_ref().as_str()),
                    );
                }
                KindSpec::Interrupt(i) => {
                    out.extend(i.resume_schema.iter().map(|s| s.get_ref().as_str()))
                }
                KindSpec::Graph(g) => out.extend(g.graph.iter().map(|s| s.get_ref().as_str())),
                _ => {}
            }
        }
        out
    }

    /// Resolves a path written in the graph against its root.
    pub fn resolve(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }
}

#[derive(Debug, Default)]
pub struct GraphHeader {
    /// Span of the `[graph]` table, or of the file's start when it is missing.
    pub span: Range<usize>,
    pub name: Option<Sp<String>>,
    pub description: String,
    pub entry: Option<Sp<String>>,
    pub root: Option<Sp<String>>,
    pub max_steps: Option<Sp<u64>>,
    pub max_wall_time: Option<Sp<Duration>>,
    pub max_tokens: Option<Sp<u64>>,
    pub on_limit: Option<Sp<String>>,
    pub require_policy: bool,
    /// Prompt and schema paths may lead outside the root (a shared folder).
    pub allow_outside_root: bool,
    /// The fields a run's input may set; none declared: every state field.
    pub input: Option<Sp<Vec<Sp<String>>>>,
    /// The fields a run's result has; none declared: every field.
    pub output: Option<Sp<Vec<Sp<String>>>>,
}

#[derive(Debug, Default)]
pub struct LlmDefaults {
    pub model: Option<Sp<String>>,
    pub base_url_env: Option<String>,
    pub api_key_env: Option<String>,
    pub temperature: Option<f64>,
    pub timeout: Option<Sp<Duration>>,
    /// Whether llm nodes send their schemas strict (default true).
    pub strict: Option<bool>,
    /// Which server the endpoint is, for what its requests may carry.
    pub provider: Option<Sp<String>>,
    /// Defaults of every llm node's sampling settings.
    pub sampling: SamplingSpec,
    /// What each model costs (`[llm.prices]`, or a file).
    pub prices: Option<Prices>,
}

#[derive(Debug)]
pub struct ServerSpec {
    pub name: Sp<String>,
    pub transport: Transport,
    pub description: String,
    /// Directories the server is told it may work in (MCP roots), relative to the
    /// graph's root.
    pub roots: Vec<Sp<String>>,
    /// `sampling = true`: the server may ask the graph's model for completions (MCP
    /// sampling), which it then declares.
    pub sampling: bool,
    /// `protocol`: how a session with the server begins.
    pub protocol: Protocol,
}

/// How a session with an MCP server begins (`[servers.x] protocol`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// `"2025-11-25"` (the default): the `initialize` handshake, which today's
    /// servers speak.
    #[default]
    Initialize,
    /// `"2026-07-28"`: `server/discover`, then every request carries its protocol
    /// version and the client's metadata; a server that does not speak it is an error.
    Discover,
    /// `"auto"`: `server/discover`, and `initialize` after all when the server
    /// answers that it does not know the method (or says nothing for 10 s). A server
    /// that answers any method it does not know with an empty result is taken as
    /// speaking the newer protocol, and then fails.
    Auto,
}

/// The tools of the builtin `store` server (`crate::run::StoreTools`).
pub const STORE_TOOLS: [&str; 5] = ["put", "get", "search", "delete", "list_namespaces"];

#[derive(Debug)]
pub enum Transport {
    Stdio {
        command: Sp<String>,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<Sp<String>>,
    },
    Http {
        url: Sp<String>,
        /// Sent with every request (`Authorization = "Bearer ${TOKEN}"`); values may
        /// read the environment.
        headers: Vec<(String, String)>,
        /// How to authorize when the server asks for OAuth (`[servers.x.oauth]`);
        /// none: the authorization-code flow with dynamic registration. Boxed: it
        /// is most of the variant's size, and most servers leave it at its default.
        oauth: Box<OAuth>,
    },
    /// `builtin = "store"`: the long-term store of the store the run is kept in, as
    /// tools, served in process (`crate::run::StoreTools`).
    Store,
}

/// How Switchyard authorizes itself with an HTTP server that answers 401. Every string
/// may read the environment (`${SECRET}`), expanded when the server starts; secrets
/// never reach events, checkpoints or messages.
#[derive(Clone, Default, PartialEq)]
pub struct OAuth {
    /// `client_credentials`: a machine's own grant (no person, no redirect), with
    /// `client_secret` or `private_key`; otherwise the authorization-code flow.
    pub client_credentials: bool,
    /// A client registered with the authorization server beforehand; none: a
    /// client-ID metadata document when `client_metadata_url` is given and the
    /// server takes one, else dynamic registration.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// A PKCS#8 PEM key for `private_key_jwt` client authentication (RFC 7523).
    pub private_key: Option<String>,
    /// `ES256` (the default), `ES384` or `RS256`.
    pub signing_algorithm: Option<String>,
    /// The scopes asked for; none: chosen from the server's challenge and metadata.
    pub scopes: Vec<String>,
    /// An HTTPS URL naming this client (SEP-991), used as its client ID where the
    /// authorization server accepts one.
    pub client_metadata_url: Option<String>,
    /// `identity_assertion` (cross-app access, SEP-990): a person's ID token from
    /// their identity provider, exchanged there for an identity assertion (ID-JAG,
    /// RFC 8693) that the authorization server takes as a JWT bearer grant (RFC 7523)
    /// from this client (`client_id`, `client_secret`); no browser, no sign-in.
    pub identity: Option<IdentityAssertion>,
    /// `jwt_bearer` (workload identity federation, SEP-1933): a JWT the platform
    /// issued this workload (a Kubernetes service account token, a cloud's workload
    /// identity), sent as a JWT bearer grant (RFC 7523); no browser, no secret.
    pub workload: Option<WorkloadToken>,
}

/// Where a workload's own JWT comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum WorkloadToken {
    /// `assertion`: the token itself (`${VAR}`: from the environment).
    Value(String),
    /// `assertion_file`: a file the platform keeps the current token in, read at
    /// each grant (such tokens are short-lived and replaced in place); `path` as
    /// written, relative to `root`, the graph's root (`[graph] root`).
    File {
        path: String,
        root: std::path::PathBuf,
    },
}

/// Where a person's ID token is exchanged for an identity assertion.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct IdentityAssertion {
    /// The identity provider's token endpoint.
    pub token_endpoint: String,
    /// This client at the identity provider.
    pub client_id: Option<String>,
    /// The person's ID token (`${VAR}`: from the environment).
    pub id_token: String,
}

/// The secret and the key shown as set or not, never as they are: a `Debug` print of a
/// graph (a log line, a panic message) must not carry them.
impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "<hidden>");
        f.debug_struct("OAuth")
            .field("client_credentials", &self.client_credentials)
            .field("client_id", &self.client_id)
            .field("client_secret", &hidden(&self.client_secret))
            .field("private_key", &hidden(&self.private_key))
            .field("signing_algorithm", &self.signing_algorithm)
            .field("scopes", &self.scopes)
            .field("client_metadata_url", &self.client_metadata_url)
            .field(
                "identity",
                &self
                    .identity
                    .as_ref()
                    .map(|i| (&i.token_endpoint, &i.client_id, "<hidden>")),
            )
            .field(
                "workload",
                &self.workload.as_ref().map(|w| match w {
                    WorkloadToken::Value(_) => "<hidden>".to_string(),
                    WorkloadToken::File { path, .. } => format!("file {path}"),
                }),
            )
            .finish()
    }
}

#[derive(Debug)]
pub struct FieldSpec {
    pub name: Sp<String>,
    pub ty: Sp<FieldType>,
    pub default: Option<Sp<serde_json::Value>>,
    pub reducer: Option<Sp<Reducer>>,
    pub schema: Option<Sp<String>>,
    pub description: String,
    /// A named constant of `[consts]` or `[configurable]`: no node writes it, no input
    /// or update sets it.
    pub constant: bool,
    /// Declared under `[configurable]`: a run's configuration may give it another
    /// value, within these bounds.
    pub configurable: Option<Bounds>,
    /// A required input: a run that starts a thread must give it.
    pub required: bool,
}

impl FieldSpec {
    /// The reducer in force: the declared one, else `messages` for message fields and
    /// `replace` for the rest.
    pub fn reducer(&self) -> Reducer {
        match &self.reducer {
            Some(r) => *r.get_ref(),
            None if matches!(self.ty.get_ref().base(), FieldType::Messages) => Reducer::Messages,
            None => Reducer::Replace,
        }
    }
}

/// Keys of the `run` built-in, as expressions and templates read it: the checker
/// refuses any other, and the runner provides exactly these.
pub const RUN_KEYS: [&str; 6] = [
    "thread_id",
    "step",
    "max_steps",
    "tokens",
    "elapsed_ms",
    "error",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reducer {
    Replace,
    Append,
    Add,
    Merge,
    Messages,
}

impl Reducer {
    pub const NAMES: [&'static str; 5] = ["replace", "append", "add", "merge", "messages"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "replace" => Self::Replace,
            "append" => Self::Append,
            "add" => Self::Add,
            "merge" => Self::Merge,
            "messages" => Self::Messages,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

#[derive(Debug)]
pub struct NodeSpec {
    pub name: Sp<String>,
    /// Span of the node's table (its header, for a `[nodes.x]` table).
    pub span: Range<usize>,
    pub kind: Sp<NodeKind>,
    /// The written kind was missing or unknown: only the common keys were read.
    pub kind_unknown: bool,
    pub description: String,
    pub next: Option<Sp<String>>,
    /// `next = ["a", "b"]`: the branches that run in parallel from here, in the order
    /// their writes merge (and `next` is none).
    pub fork: Vec<Sp<String>>,
    pub route: Option<RouteSpec>,
    /// `field = expression`, in the order written.
    pub set: Vec<(Sp<String>, Sp<String>)>,
    pub only_if: Option<Sp<String>>,
    pub on_error: Option<Sp<String>>,
    pub breakpoint: Option<Sp<Breakpoint>>,
    pub timeout: Option<Sp<Duration>>,
    pub retry: Option<RetrySpec>,
    /// Run the node's kind once per item of a list.
    pub map: Option<MapSpec>,
    pub body: KindSpec,
}

/// `map = { over = "<expression>", as = "item", concurrency = 4, errors = "fail" }`:
/// an `llm_structured` or `mcp_call` node's work done once per item of a list, at most
/// `concurrency` at a time; its `output` gets the list of the results, in item order.
#[derive(Debug)]
pub struct MapSpec {
    pub span: Range<usize>,
    pub over: Option<Sp<String>>,
    /// The name an item is read by in the node's own expressions and templates.
    pub var: Sp<String>,
    pub concurrency: Option<Sp<u64>>,
    /// A failed item fails the node (`false`, the default) or is kept in its place as
    /// `{ error }` (`true`, `errors = "collect"`).
    pub collect_errors: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    LlmStructured,
    McpCall,
    Policy,
    Interrupt,
    Finalize,
    Set,
    Fail,
    Graph,
    /// A model's plain-text reply, appended to a `messages` field as an AI message.
    LlmChat,
}

impl NodeKind {
    pub const NAMES: [&'static str; 9] = [
        "llm_structured",
        "mcp_call",
        "policy",
        "interrupt",
        "finalize",
        "set",
        "fail",
        "graph",
        "llm_chat",
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "llm_structured" => Self::LlmStructured,
            "mcp_call" => Self::McpCall,
            "policy" => Self::Policy,
            "interrupt" => Self::Interrupt,
            "finalize" => Self::Finalize,
            "set" => Self::Set,
            "fail" => Self::Fail,
            "graph" => Self::Graph,
            "llm_chat" => Self::LlmChat,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether a node of this kind ends the run: it has no way on.
    pub fn ends_run(self) -> bool {
        matches!(self, Self::Finalize | Self::Fail)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breakpoint {
    Before,
    After,
}

#[derive(Debug)]
pub struct RetrySpec {
    pub span: Range<usize>,
    pub attempts: u64,
    pub backoff: Option<Duration>,
    pub max_backoff: Option<Duration>,
    pub jitter: bool,
}

/// A conditional edge.
#[derive(Debug)]
pub struct RouteSpec {
    pub span: Range<usize>,
    pub on: Option<Sp<String>>,
    /// With `on`: case value -> target (for a case that forks, its first branch).
    pub cases: Vec<(Sp<String>, Sp<String>)>,
    /// With `on`: a case that names several nodes starts parallel branches.
    pub case_forks: Vec<(Sp<String>, Vec<Sp<String>>)>,
    /// Ordered conditions.
    pub when: Vec<WhenCase>,
    pub default: Option<Sp<String>>,
}

#[derive(Debug)]
pub struct WhenCase {
    pub case: Option<Sp<String>>,
    pub cond: Sp<String>,
    pub to: Sp<String>,
}

impl WhenCase {
    /// The label `render` shows: the case name, else the condition.
    pub fn label(&self) -> &str {
        self.case
            .as_ref()
            .map_or(self.cond.get_ref(), |c| c.get_ref())
    }
}

/// The keys specific to each node kind.
#[derive(Debug)]
pub enum KindSpec {
    Llm(Box<LlmNode>),
    Mcp(McpNode),
    Policy(PolicyNode),
    Interrupt(InterruptNode),
    Finalize(FinalizeNode),
    Set,
    Fail(FailNode),
    Graph(GraphNode),
}

#[derive(Debug, Default)]
pub struct LlmNode {
    pub prompt: Option<Sp<String>>,
    pub system: Option<Sp<String>>,
    pub schema: Option<Sp<String>>,
    pub output: Option<Sp<String>>,
    pub history: Option<Sp<String>>,
    pub model: Option<Sp<String>>,
    pub temperature: Option<f64>,
    pub retries: Option<u64>,
    pub fallback: Option<Sp<String>>,
    pub cache: Option<CacheSpec>,
    pub tools: Option<ToolsSpec>,
    pub pseudo_tools: Vec<PseudoTool>,
    pub stream: bool,
    /// `stream = "<property>"`: only that top-level string property of the reply's
    /// JSON streams (its text, not the JSON around it).
    pub stream_field: Option<Sp<String>>,
    /// Whether the output schema is sent strict; `None` takes `[llm] strict`.
    pub strict: Option<bool>,
    /// With `tools`: whether the model may call several in one reply (sent as
    /// `parallel_tool_calls`; not sent when unset).
    pub parallel_tool_calls: Option<bool>,
    pub sampling: SamplingSpec,
    /// `llm_chat`: the reply is plain text, appended to `output` (a `messages` field,
    /// also the history sent) as an AI message; no schema, tools or fallback.
    pub chat: bool,
}

/// What a node asks of the model's sampling, each sent only when set (and as far as
/// the provider takes it).
#[derive(Debug, Default, Clone)]
pub struct SamplingSpec {
    /// The most tokens the reply may use (`max_tokens`, or its other name
    /// `max_completion_tokens`).
    pub max_tokens: Option<Sp<u64>>,
    pub reasoning_effort: Option<Sp<String>>,
    pub seed: Option<Sp<u64>>,
    pub top_p: Option<f64>,
    pub stop: Vec<Sp<String>>,
}

impl SamplingSpec {
    /// This node's settings, each falling back to `defaults`'.
    pub fn or(&self, defaults: &SamplingSpec) -> SamplingSpec {
        SamplingSpec {
            max_tokens: self.max_tokens.clone().or(defaults.max_tokens.clone()),
            reasoning_effort: self
                .reasoning_effort
                .clone()
                .or(defaults.reasoning_effort.clone()),
            seed: self.seed.clone().or(defaults.seed.clone()),
            top_p: self.top_p.or(defaults.top_p),
            stop: if self.stop.is_empty() {
                defaults.stop.clone()
            } else {
                self.stop.clone()
            },
        }
    }
}

#[derive(Debug)]
pub struct CacheSpec {
    pub key: Sp<String>,
    pub ttl: Sp<Duration>,
}

#[derive(Debug)]
pub struct ToolsSpec {
    pub server: Sp<String>,
    pub only: Vec<Sp<String>>,
}

#[derive(Debug)]
pub struct PseudoTool {
    pub name: Sp<String>,
    pub description: String,
    pub schema: Option<Sp<String>>,
    pub to: Sp<String>,
}

#[derive(Debug, Default)]
pub struct McpNode {
    pub server: Option<Sp<String>>,
    /// A `messages` field: the node calls the tools its last AI message asks for, and
    /// their results join the field as tool messages (LangGraph's `ToolNode`), instead
    /// of `calls`.
    pub tool_calls: Option<Sp<String>>,
    pub calls: Vec<ToolCall>,
    /// True when the calls came from `calls = [...]` rather than `tool`.
    pub multi: bool,
    pub side_effects: bool,
    pub audit: Option<Sp<String>>,
}

#[derive(Debug)]
pub struct ToolCall {
    /// A template: a fixed name or one rendered from state.
    pub tool: Sp<String>,
    pub args: Option<ValueTable>,
    pub output: Option<Sp<String>>,
}

/// A table whose strings are expressions and whose other values are literals.
#[derive(Debug)]
pub enum ValueTable {
    Expr(Sp<String>),
    Literal(Sp<serde_json::Value>),
    Array(Vec<ValueTable>),
    Table(Vec<(Sp<String>, ValueTable)>),
}

impl ValueTable {
    /// Every expression inside, depth first.
    pub fn exprs(&self) -> Vec<&Sp<String>> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a Sp<String>>) {
        match self {
            ValueTable::Expr(e) => out.push(e),
            ValueTable::Literal(_) => {}
            ValueTable::Array(items) => items.iter().for_each(|i| i.collect(out)),
            ValueTable::Table(entries) => entries.iter().for_each(|(_, v)| v.collect(out)),
        }
    }
}

#[derive(Debug, Default)]
pub struct PolicyNode {
    pub rules: Vec<PolicyRule>,
    pub default: Option<Sp<Decision>>,
    pub default_reason: Option<Sp<String>>,
    pub output: Option<Sp<String>>,
}

#[derive(Debug)]
pub struct PolicyRule {
    pub name: Option<Sp<String>>,
    pub when: Sp<String>,
    pub decision: Sp<Decision>,
    pub reason: Option<Sp<String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Confirm,
    Deny,
}

impl Decision {
    pub const NAMES: [&'static str; 3] = ["allow", "confirm", "deny"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "allow" => Self::Allow,
            "confirm" => Self::Confirm,
            "deny" => Self::Deny,
            _ => return None,
        })
    }
}

#[derive(Debug, Default)]
pub struct InterruptNode {
    pub payload: Option<ValueTable>,
    pub resume_schema: Option<Sp<String>>,
    /// Takes any JSON answer: said on purpose, since without a schema an answer the
    /// graph cannot use would be taken all the same.
    pub accept_any: bool,
    pub output: Option<Sp<String>>,
    pub timeout: Option<Sp<Duration>>,
    pub on_timeout: Option<Sp<String>>,
}

/// A node that runs another graph file to its end, on a thread of its own.
#[derive(Debug, Default)]
pub struct GraphNode {
    /// The child graph's file, relative to the root.
    pub graph: Option<Sp<String>>,
    /// The child's input: its field -> an expression of this graph's state.
    pub input: Vec<(Sp<String>, Sp<String>)>,
    /// What comes back: this graph's field -> the child's field.
    pub output: Vec<(Sp<String>, Sp<String>)>,
}

/// A node that fails the run on purpose: a check the graph makes itself.
#[derive(Debug, Default)]
pub struct FailNode {
    pub message: Option<Sp<String>>,
    pub outcome: Option<Sp<String>>,
}

#[derive(Debug, Default)]
pub struct FinalizeNode {
    pub outcome: Option<Sp<String>>,
    pub response: Option<Sp<String>>,
    pub output: Option<Sp<String>>,
}

impl NodeSpec {
    /// Every field this node's kind writes directly (not counting `set`).
    pub fn output_fields(&self) -> Vec<&Sp<String>> {
        match &self.body {
            KindSpec::Llm(l) => l.output.iter().collect(),
            KindSpec::Mcp(m) => m
                .calls
                .iter()
                .filter_map(|c| c.output.as_ref())
                .chain(m.tool_calls.iter())
                .chain(m.audit.iter())
                .collect(),
            KindSpec::Policy(p) => p.output.iter().collect(),
            KindSpec::Interrupt(i) => i.output.iter().collect(),
            KindSpec::Finalize(f) => f.output.iter().collect(),
            KindSpec::Set | KindSpec::Fail(_) => Vec::new(),
            KindSpec::Graph(g) => g.output.iter().map(|(f, _)| f).collect(),
        }
    }

    /// Every outgoing edge as (label, target, kind), in a stable order.
    pub fn edges(&self) -> Vec<Edge<'_>> {
        let mut out = Vec::new();
        if let Some(next) = &self.next {
            out.push(Edge {
                label: None,
                target: next,
                kind: EdgeKind::Next,
            });
        }
        for target in &self.fork {
            out.push(Edge {
                label: None,
                target,
                kind: EdgeKind::Branch,
            });
        }
        if let Some(route) = &self.route {
            for (case, target) in &route.cases {
                out.push(Edge {
                    label: Some(case.get_ref().clone()),
                    target,
                    kind: EdgeKind::Case,
                });
            }
            // A case that forks: its other branches (the first is in `cases`).
            for (case, targets) in &route.case_forks {
                for target in targets.iter().skip(1) {
                    out.push(Edge {
                        label: Some(case.get_ref().clone()),
                        target,
                        kind: EdgeKind::Branch,
                    });
                }
            }
            for w in &route.when {
                out.push(Edge {
                    label: Some(w.label().to_string()),
                    target: &w.to,
                    kind: EdgeKind::Case,
                });
            }
            if let Some(d) = &route.default {
                out.push(Edge {
                    label: Some("default".into()),
                    target: d,
                    kind: EdgeKind::Default,
                });
            }
        }
        if let KindSpec::Llm(l) = &self.body {
            for p in &l.pseudo_tools {
                out.push(Edge {
                    label: Some(p.name.get_ref().clone()),
                    target: &p.to,
                    kind: EdgeKind::PseudoTool,
                });
            }
        }
        if let KindSpec::Interrupt(i) = &self.body
            && let Some(t) = &i.on_timeout
        {
            out.push(Edge {
                label: Some("timeout".into()),
                target: t,
                kind: EdgeKind::Timeout,
            });
        }
        if let Some(e) = &self.on_error {
            out.push(Edge {
                label: Some("error".into()),
                target: e,
                kind: EdgeKind::Error,
            });
        }
        out
    }
}

/// An outgoing edge of a node as written.
#[derive(Debug)]
pub struct Edge<'a> {
    pub label: Option<String>,
    pub target: &'a Sp<String>,
    pub kind: EdgeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    Next,
    /// One of the branches a `next = [...]` starts.
    Branch,
    Case,
    Default,
    PseudoTool,
    Timeout,
    Error,
}
