//! The command line as clap reads it: every command, argument and its help.

use super::StoreArg;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Run agent graphs declared in TOML"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// When to colour diagnostics and errors: on a terminal (`auto`, unless `NO_COLOR`
    /// is set), `always` or `never`.
    #[arg(long, global = true, value_enum, default_value_t = super::color::ColorChoice::Auto)]
    pub(crate) color: super::color::ColorChoice,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Check graph files and report every problem.
    #[command(
        after_help = "Examples:\n  switchyard validate graphs/*.toml\n  switchyard validate graphs/browser_agent.toml --format json\n  switchyard validate graphs/tool_agent.toml --online"
    )]
    Validate {
        /// Graph files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// How to print the diagnostics.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Also start the graph's MCP servers and check tool names and literal arguments.
        #[arg(long)]
        online: bool,
    },
    /// List the tools of a graph's MCP servers, with their input schemas.
    #[command(
        after_help = "Examples:\n  switchyard tools graphs/tool_agent.toml\n  switchyard tools graphs/browser_agent.toml --server browser --format json"
    )]
    Tools {
        /// The graph file whose servers to start.
        file: PathBuf,
        /// Only this server.
        #[arg(long)]
        server: Option<String>,
        /// How to print the tools.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// An MCP client for the conformance suite: connects to URL, lists the tools and
    /// calls each one, with the credentials the scenario hands out.
    #[command(hide = true)]
    McpConformanceClient { url: String },
    /// Draw a graph as Graphviz DOT, a Mermaid flowchart, or an SVG picture.
    #[command(
        after_help = "Examples:\n  switchyard render graphs/browser_agent.toml | dot -Tsvg > agent.svg\n  switchyard render graphs/tool_agent.toml --format mermaid -o agent.mmd\n  switchyard render graphs/tool_agent.toml --format svg -o agent.svg"
    )]
    Render {
        /// The graph file to draw.
        file: PathBuf,
        /// The drawing's language.
        #[arg(long, value_enum, default_value_t = RenderFormat::Dot)]
        format: RenderFormat,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run a graph on a thread, from its entry node.
    #[command(
        after_help = "Examples:\n  switchyard run graphs/tool_agent.toml --input '{\"user_message\": \"Write a haiku to haiku.txt\"}'\n  switchyard run graphs/reason_act_observe.toml --input @input.json --thread t1 --json\n  switchyard run graph.toml --store none --max-steps 20"
    )]
    Run {
        /// The graph file to run.
        file: PathBuf,
        /// The input: a JSON object of state fields, or @FILE holding one.
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
        /// The thread to run on (default: a new one). A thread keeps its state across
        /// runs, like a chat session.
        #[arg(long)]
        thread: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Continue a paused thread: answer its interrupt, or go on after a stop.
    #[command(
        after_help = "Examples:\n  switchyard resume --thread t1 --payload '{\"reference\": \"a1\", \"confirmed\": true}'\n  switchyard resume --thread t1\n  switchyard resume --thread t1 --at 12 --payload @answer.json"
    )]
    Resume {
        /// The graph file (default: the one that wrote the thread).
        file: Option<PathBuf>,
        /// The paused thread.
        #[arg(long)]
        thread: String,
        /// The answer to the pending interrupt: JSON, or @FILE holding it.
        #[arg(long, value_name = "JSON|@FILE")]
        payload: Option<String>,
        /// Go on from checkpoint SEQ instead of the latest, in a forked thread
        /// `THREAD@SEQ`; the original thread is left as it was.
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// Resume even though the graph file changed where the thread stands.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Print a thread's state and where it stands, as JSON; `state set` writes to it.
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        after_help = "Examples:\n  switchyard state --thread t1\n  switchyard state --thread t1 --at 4\n  switchyard state set --thread t1 --values '{\"goal\": \"Find the opening hours\"}'"
    )]
    State {
        #[command(subcommand)]
        action: Option<StateAction>,
        /// The thread.
        #[arg(long, required = true)]
        thread: Option<String>,
        /// The state at checkpoint SEQ instead of the latest.
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// The graph file (default: the one that wrote the thread).
        #[arg(long)]
        graph: Option<PathBuf>,
        /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
        #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
    /// List a thread's checkpoints.
    #[command(
        after_help = "Examples:\n  switchyard history --thread t1\n  switchyard history --thread t1 --json"
    )]
    History {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// Every record as JSON.
        #[arg(long)]
        json: bool,
        /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
        #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
    /// Serve graphs over HTTP: the LangGraph Agent Server API (docs/server.md), for
    /// LangGraph's client SDKs and front ends.
    #[command(
        after_help = "Examples:\n  switchyard serve graphs/\n  switchyard serve graphs/ --listen 0.0.0.0:2024 --api-key-env SWITCHYARD_API_KEY\n  switchyard serve graphs/tool_agent.toml --store memory --cors http://localhost:5173\n  switchyard serve graphs/ --store 'postgresql://switchyard@db.internal/agents'"
    )]
    Serve {
        /// Graph files, or directories whose `*.toml` files are graphs.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The address and port to listen on (`:0` picks a free port).
        #[arg(long, default_value = "127.0.0.1:2024")]
        listen: std::net::SocketAddr,
        /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
        #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
        /// How durable each SQLite checkpoint is: `normal` survives the process being
        /// killed, `full` a power loss too, at the cost of waiting for the disk.
        #[arg(long, value_name = "normal|full", default_value = "normal", env = "SWITCHYARD_DURABILITY", value_parser = parse_durability)]
        durability: switchyard::store::Durability,
        /// Keep large SQLite checkpoint values LZ4-compressed: smaller files for a
        /// little more work per step.
        #[arg(long, env = "SWITCHYARD_COMPRESS", value_parser = clap::builder::BoolishValueParser::new())]
        compress: bool,
        /// Require the API key held by this environment variable (`x-api-key` or
        /// `Authorization: Bearer`).
        #[arg(long, value_name = "NAME", conflicts_with = "api_key_file")]
        api_key_env: Option<String>,
        /// Require the API key held in this file.
        #[arg(long, value_name = "PATH")]
        api_key_file: Option<PathBuf>,
        /// Listen on a non-loopback address without an API key.
        #[arg(long)]
        insecure: bool,
        /// Let a browser page from this origin call the API (`*` for any); repeat for more.
        #[arg(long, value_name = "ORIGIN")]
        cors: Vec<String>,
        /// The largest request body taken: bytes, or with kB / MB.
        #[arg(long, value_name = "SIZE", default_value = "10MB", value_parser = parse_size)]
        max_body: usize,
        /// Runs driven at once; more wait as pending.
        #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
        max_runs: u64,
        /// Stop a paused thread's MCP servers after this long unused.
        #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
        mcp_idle: std::time::Duration,
        /// Live MCP servers allowed at once; past it, those of the thread unused longest stop.
        #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
        mcp_max_servers: u64,
        /// How often to look for edited graph files.
        #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_duration)]
        watch: std::time::Duration,
        /// Do not look for edited graph files.
        #[arg(long)]
        no_watch: bool,
        /// How long a finished run's events stay for streams that join late.
        #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
        log_retention: std::time::Duration,
        /// Delete threads that finished or failed longer ago than this (their
        /// checkpoints, entry and runs); kept for ever without it.
        #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
        thread_ttl: Option<std::time::Duration>,
        /// With a Postgres store several servers share: how long a run stays this
        /// server's without its heartbeat (renewed four times as often) before another
        /// server takes it over from its last checkpoint.
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_positive_duration)]
        run_lease: std::time::Duration,
        /// Leave model calls' messages and replies out of run events (and so out of
        /// streams, the page and the store's event log); only their sizes and timings stay.
        /// (Not with `--otlp-content`: spans would have no content to carry.)
        #[arg(long, conflicts_with = "otlp_content")]
        no_llm_content: bool,
        #[command(flatten)]
        trace: TraceArgs,
        /// Send a heartbeat down a stream quiet for this long.
        #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_positive_duration)]
        heartbeat: std::time::Duration,
        /// Answer LLM requests from recordings, with no network; repeat for more.
        #[arg(long, value_name = "FILE", conflicts_with = "record")]
        replay: Vec<PathBuf>,
        /// Append every LLM request and reply to FILE (JSON lines).
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Print no access or notice lines.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Print a shell's completion script for `switchyard`.
    #[command(
        after_help = "Examples:\n  switchyard completions bash > ~/.local/share/bash-completion/completions/switchyard\n  switchyard completions zsh > ~/.zfunc/_switchyard\n  switchyard completions fish > ~/.config/fish/completions/switchyard.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one page per command into a directory.
    #[command(
        after_help = "Examples:\n  switchyard man | man -l -\n  switchyard man --dir /usr/local/share/man/man1"
    )]
    Man {
        /// Write `switchyard.1` and a page per command (`switchyard-run.1`, ...) here.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Keep a store bounded: prune a thread's history to its latest checkpoint, or
    /// delete threads that ended long ago.
    #[command(
        after_help = "Examples:\n  switchyard prune --thread t1\n  switchyard prune --ended-before 30d --store sqlite:agents.db"
    )]
    Prune {
        /// The thread whose checkpoints go but its latest, which then holds the whole
        /// state (its earlier states and forks from them go too).
        #[arg(
            long,
            required_unless_present = "ended_before",
            conflicts_with = "ended_before"
        )]
        thread: Option<String>,
        /// Delete every thread that finished or failed longer ago than this (`30d`,
        /// `12h`), but those being run.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        ended_before: Option<std::time::Duration>,
        /// The graph file (default: the one that wrote the thread).
        #[arg(long)]
        graph: Option<PathBuf>,
        /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
        #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
    /// Copy a thread up to a checkpoint into a new thread, to go on from there.
    #[command(
        after_help = "Examples:\n  switchyard fork --thread t1 --at 4\n  switchyard fork --thread t1 --at 4 --into t1-retry && switchyard resume --thread t1-retry"
    )]
    Fork {
        /// The thread to copy.
        #[arg(long)]
        thread: String,
        /// The last checkpoint the copy keeps.
        #[arg(long, value_name = "SEQ")]
        at: u64,
        /// The new thread's id (default: `THREAD@SEQ`).
        #[arg(long)]
        into: Option<String>,
        /// The graph file (default: the one that wrote the thread).
        #[arg(long)]
        graph: Option<PathBuf>,
        /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
        #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
}

pub(crate) fn cli_default_store() -> &'static str {
    super::DEFAULT_STORE
}

pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    switchyard::spec::parse_duration(s)
}

pub(crate) fn parse_durability(s: &str) -> Result<switchyard::store::Durability, String> {
    switchyard::store::Durability::parse(s)
        .ok_or_else(|| format!("`{s}` is not `normal` or `full`"))
}

pub(crate) fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
    parse_duration(s).and_then(|d| {
        if d.is_zero() {
            Err(format!(
                "`{s}` is no time at all; give a duration above zero"
            ))
        } else {
            Ok(d)
        }
    })
}

/// `1048576`, `512kB`, `10MB`.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = if let Some(n) = t.strip_suffix("MB") {
        (n, 1 << 20)
    } else if let Some(n) = t.strip_suffix("kB").or_else(|| t.strip_suffix("KB")) {
        (n, 1 << 10)
    } else {
        (t.strip_suffix('B').unwrap_or(t), 1)
    };
    num.trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{s}` is not a size (bytes, or a number with kB or MB)"))
}

#[derive(Args)]
pub(crate) struct CommonArgs {
    /// Where checkpoints go.
    #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
    pub(crate) store: StoreArg,
    /// How durable each SQLite checkpoint is: `normal` survives the process being
    /// killed, `full` a power loss too, at the cost of waiting for the disk.
    #[arg(long, value_name = "normal|full", default_value = "normal", env = "SWITCHYARD_DURABILITY", value_parser = parse_durability)]
    pub(crate) durability: switchyard::store::Durability,
    /// Keep large SQLite checkpoint values LZ4-compressed: smaller files for a little
    /// more work per step.
    #[arg(long, env = "SWITCHYARD_COMPRESS", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) compress: bool,
    /// Node executions allowed in this run, instead of the graph's `max_steps`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_steps: Option<u64>,
    /// Print events as NDJSON on standard output.
    #[arg(long)]
    pub(crate) json: bool,
    /// Stream LLM replies: text deltas become events as they arrive.
    #[arg(long)]
    pub(crate) stream: bool,
    /// Save every LLM request and reply of the run to FILE (JSON lines).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub(crate) record: Option<PathBuf>,
    /// Answer LLM requests from a recording, with no network.
    #[arg(long, value_name = "FILE")]
    pub(crate) replay: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) trace: TraceArgs,
}

/// Where traces go, for `run`, `resume` and `serve` alike.
#[derive(clap::Args, Debug)]
pub(crate) struct TraceArgs {
    /// Export OpenTelemetry traces over OTLP/HTTP to this collector (a base URL, or
    /// one ending in `/v1/traces`); without it, `OTEL_EXPORTER_OTLP_ENDPOINT` when set.
    #[arg(long, value_name = "URL")]
    pub(crate) otlp: Option<String>,
    /// Put prompts, replies and tool arguments into the spans (and the model events).
    #[arg(long)]
    pub(crate) otlp_content: bool,
}

impl TraceArgs {
    pub(crate) fn resolve(&self) -> Option<switchyard::telemetry::TraceOptions> {
        switchyard::telemetry::TraceOptions::resolve(self.otlp.as_deref(), self.otlp_content)
    }
}

impl From<CommonArgs> for super::run::Common {
    fn from(c: CommonArgs) -> Self {
        super::run::Common {
            store: c.store.with_options(switchyard::store::SqliteOptions {
                durability: c.durability,
                compress: c.compress,
            }),
            max_steps: c.max_steps,
            json: c.json,
            trace: c.trace.resolve(),
            llm: switchyard::llm::LlmOptions {
                record: c.record,
                replay: c.replay,
                stream: c.stream,
            },
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum StateAction {
    /// Write fields of a paused or finished thread's state, each through its reducer
    /// and type check, as a checkpoint of its own (the server's `update_state`); print
    /// the state after it.
    #[command(
        after_help = "Examples:\n  switchyard state set --thread t1 --values '{\"goal\": \"Find the opening hours\"}'\n  switchyard state set --thread t1 --values @fix.json --as-node validate"
    )]
    Set {
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The fields to write: a JSON object, or @FILE holding one.
        #[arg(long, value_name = "JSON|@FILE")]
        values: String,
        /// Count the write as this node's: the thread then stands stopped before the
        /// node that node's edges pick, to be resumed from there.
        #[arg(long, value_name = "NODE")]
        as_node: Option<String>,
        /// The graph file (default: the one that wrote the thread).
        #[arg(long)]
        graph: Option<PathBuf>,
        /// Where the checkpoints are: `sqlite:PATH`, `postgres://URL`, `memory` or `none`.
        #[arg(long, value_name = "sqlite:PATH|postgres://URL|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ReportFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum RenderFormat {
    Dot,
    Mermaid,
    /// Laid out by Switchyard itself: no Graphviz needed.
    Svg,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every visible argument has a description and every visible command one and
    /// examples; what misses one, by path.
    fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if a.is_hide_set() || id == "help" || id == "version" {
                continue;
            }
            if a.get_help().is_none() {
                out.push(format!("{path} --{id}: no description"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let name = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                out.push(format!("{name}: no description"));
            }
            let examples = sub.get_after_help().map(|h| h.to_string());
            if !examples.is_some_and(|e| e.starts_with("Examples:\n  switchyard ")) {
                out.push(format!("{name}: no examples"));
            }
            undocumented(sub, &name, out);
        }
    }

    #[test]
    fn every_command_and_argument_is_described_and_every_command_has_examples() {
        Cli::command().debug_assert();
        let mut out = Vec::new();
        undocumented(&Cli::command(), "switchyard", &mut out);
        assert_eq!(out, Vec::<String>::new());
    }
}
