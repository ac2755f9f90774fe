//! The `switchyard` command: parses the command line, calls the library, prints.

mod cli;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use cli::{StoreArg, exit};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use switchyard::mcp::{BlobStore, McpClient};
use switchyard::render::{self, Format};
use switchyard::run::ToolClient;
use switchyard::{Sources, Validation, validate_file};

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Run agent graphs declared in TOML"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check graph files and report every problem.
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
    Tools {
        file: PathBuf,
        /// Only this server.
        #[arg(long)]
        server: Option<String>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// An MCP client for the conformance suite: connects to URL, lists the tools and, in
    /// the `tools_call` scenario, calls each one.
    #[command(hide = true)]
    McpConformanceClient { url: String },
    /// Draw a graph as Graphviz DOT or a Mermaid flowchart.
    Render {
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = RenderFormat::Dot)]
        format: RenderFormat,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run a graph on a thread, from its entry node.
    Run {
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
    Resume {
        /// The graph file (default: the one that wrote the thread).
        file: Option<PathBuf>,
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
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
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
        #[arg(long, value_name = "sqlite:PATH|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
    /// List a thread's checkpoints.
    History {
        #[arg(long)]
        thread: String,
        /// Every record as JSON.
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "sqlite:PATH|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
    /// Serve graphs over HTTP: the LangGraph Agent Server API (docs/server.md), for
    /// LangGraph's client SDKs and front ends.
    Serve {
        /// Graph files, or directories whose `*.toml` files are graphs.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, default_value = "127.0.0.1:2024")]
        listen: std::net::SocketAddr,
        #[arg(long, value_name = "sqlite:PATH|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
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
    /// Copy a thread up to a checkpoint into a new thread, to go on from there.
    Fork {
        #[arg(long)]
        thread: String,
        #[arg(long, value_name = "SEQ")]
        at: u64,
        /// The new thread's id (default: `THREAD@SEQ`).
        #[arg(long)]
        into: Option<String>,
        /// The graph file (default: the one that wrote the thread).
        #[arg(long)]
        graph: Option<PathBuf>,
        #[arg(long, value_name = "sqlite:PATH|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
}

fn cli_default_store() -> &'static str {
    cli::DEFAULT_STORE
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    switchyard::spec::parse_duration(s)
}

fn parse_durability(s: &str) -> Result<switchyard::store::Durability, String> {
    switchyard::store::Durability::parse(s)
        .ok_or_else(|| format!("`{s}` is not `normal` or `full`"))
}

fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
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
fn parse_size(s: &str) -> Result<usize, String> {
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
struct CommonArgs {
    /// Where checkpoints go.
    #[arg(long, value_name = "sqlite:PATH|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
    store: StoreArg,
    /// How durable each SQLite checkpoint is: `normal` survives the process being
    /// killed, `full` a power loss too, at the cost of waiting for the disk.
    #[arg(long, value_name = "normal|full", default_value = "normal", env = "SWITCHYARD_DURABILITY", value_parser = parse_durability)]
    durability: switchyard::store::Durability,
    /// Keep large SQLite checkpoint values LZ4-compressed: smaller files for a little
    /// more work per step.
    #[arg(long, env = "SWITCHYARD_COMPRESS", value_parser = clap::builder::BoolishValueParser::new())]
    compress: bool,
    /// Node executions allowed in this run, instead of the graph's `max_steps`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_steps: Option<u64>,
    /// Print events as NDJSON on standard output.
    #[arg(long)]
    json: bool,
    /// Stream LLM replies: text deltas become events as they arrive.
    #[arg(long)]
    stream: bool,
    /// Save every LLM request and reply of the run to FILE (JSON lines).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer LLM requests from a recording, with no network.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
}

impl From<CommonArgs> for cli::run::Common {
    fn from(c: CommonArgs) -> Self {
        cli::run::Common {
            store: c.store.with_options(switchyard::store::SqliteOptions {
                durability: c.durability,
                compress: c.compress,
            }),
            max_steps: c.max_steps,
            json: c.json,
            llm: switchyard::llm::LlmOptions {
                record: c.record,
                replay: c.replay,
                stream: c.stream,
            },
        }
    }
}

#[derive(Subcommand)]
enum StateAction {
    /// Write fields of a paused or finished thread's state, each through its reducer
    /// and type check, as a checkpoint of its own (the server's `update_state`); print
    /// the state after it.
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
        #[arg(long, value_name = "sqlite:PATH|memory|none", default_value = cli_default_store(), env = "SWITCHYARD_STORE")]
        store: StoreArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum RenderFormat {
    Dot,
    Mermaid,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate {
            files,
            format,
            online,
        } => validate(&files, format, online),
        Command::Tools {
            file,
            server,
            format,
        } => tools(&file, server.as_deref(), format),
        Command::McpConformanceClient { url } => mcp_conformance_client(&url),
        Command::Render {
            file,
            format,
            output,
        } => render(&file, format, output),
        Command::Run {
            file,
            input,
            thread,
            common,
        } => cli::run::run(cli::run::RunArgs {
            file,
            input,
            thread,
            common: common.into(),
        }),
        Command::Resume {
            file,
            thread,
            payload,
            at,
            force,
            common,
        } => cli::run::resume(cli::run::ResumeArgs {
            file,
            thread,
            payload,
            at,
            force,
            common: common.into(),
        }),
        Command::State {
            action:
                Some(StateAction::Set {
                    thread,
                    values,
                    as_node,
                    graph,
                    store,
                }),
            ..
        } => cli::inspect::set(&store, graph, &thread, &values, as_node.as_deref()),
        Command::State {
            action: None,
            thread,
            at,
            graph,
            store,
        } => cli::inspect::state(&store, graph, thread.as_deref().unwrap_or_default(), at),
        Command::History {
            thread,
            json,
            store,
        } => cli::inspect::history(&store, &thread, json),
        Command::Fork {
            thread,
            at,
            into,
            graph,
            store,
        } => cli::inspect::fork(&store, graph, &thread, at, into),
        Command::Serve {
            paths,
            listen,
            store,
            durability,
            compress,
            api_key_env,
            api_key_file,
            insecure,
            cors,
            max_body,
            max_runs,
            mcp_idle,
            mcp_max_servers,
            watch,
            no_watch,
            log_retention,
            heartbeat,
            replay,
            record,
            quiet,
        } => cli::serve::serve(cli::serve::ServeArgs {
            paths,
            listen,
            store: store.with_options(switchyard::store::SqliteOptions {
                durability,
                compress,
            }),
            api_key_env,
            api_key_file,
            insecure,
            cors,
            max_body,
            max_runs: max_runs as usize,
            mcp_idle,
            mcp_max_servers: mcp_max_servers as usize,
            watch: (!no_watch).then_some(watch),
            log_retention,
            heartbeat,
            replay,
            record,
            quiet,
        }),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) if is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("caused by: {cause}");
            }
            ExitCode::from(exit::FAILED)
        }
    }
}

/// `switchyard render ... | head` closes the pipe early; that is not a failure.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn validate(files: &[PathBuf], format: ReportFormat, online: bool) -> anyhow::Result<u8> {
    let mut invalid = false;
    let mut reports = Vec::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut unreadable = false;
    for path in files {
        let mut sources = Sources::new();
        // A file that cannot be read is reported, and the others are still checked.
        let mut v = match validate_file(path, &mut sources) {
            Ok(v) => v,
            Err(e) => {
                unreadable = true;
                let chain: Vec<String> = anyhow::Error::from(e)
                    .chain()
                    .map(ToString::to_string)
                    .collect();
                let message = chain.join(": ");
                match format {
                    ReportFormat::Text => {
                        eprintln!("error: {}", chain[0]);
                        for cause in &chain[1..] {
                            eprintln!("caused by: {cause}");
                        }
                    }
                    ReportFormat::Json => reports.push(serde_json::json!({
                        "file": path.display().to_string(),
                        "valid": false,
                        "error": message,
                        "diagnostics": [],
                    })),
                }
                continue;
            }
        };
        if online {
            check_online(&mut v, &sources)?;
        }
        invalid |= !v.is_valid();
        match format {
            ReportFormat::Text => {
                let errors = v.diagnostics.iter().filter(|d| d.is_error()).count();
                let mut err = std::io::stderr().lock();
                for d in &v.diagnostics {
                    writeln!(err, "{}", d.render(&sources))?;
                }
                if v.is_valid() {
                    let spec = v.spec.as_ref().expect("valid means loaded");
                    writeln!(out, "{}: ok ({} nodes, {} state fields)", path.display(), spec.nodes.len(), spec.state.len())?;
                } else {
                    let s = if errors == 1 { "" } else { "s" };
                    writeln!(err, "{}: {errors} error{s}", path.display())?;
                }
            }
            ReportFormat::Json => reports.push(serde_json::json!({
                "file": path.display().to_string(),
                "valid": v.is_valid(),
                "diagnostics": v.diagnostics.iter().map(|d| d.to_json(&sources)).collect::<Vec<_>>(),
            })),
        }
    }
    if let ReportFormat::Json = format {
        serde_json::to_writer_pretty(&mut out, &reports)?;
        writeln!(out)?;
    }
    out.flush()?;
    Ok(if unreadable {
        exit::FAILED
    } else if invalid {
        exit::INVALID
    } else {
        exit::OK
    })
}

fn render(
    path: &std::path::Path,
    format: RenderFormat,
    output: Option<PathBuf>,
) -> anyhow::Result<u8> {
    let mut sources = Sources::new();
    let v = validate_file(path, &mut sources)?;
    let Some(spec) = &v.spec else {
        for d in &v.diagnostics {
            eprint!("{}", d.render(&sources));
        }
        return Ok(exit::INVALID);
    };
    let errors = v.diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        eprintln!(
            "warning: `{}` has {errors} problem{}; `switchyard validate {}` lists them",
            path.display(),
            if errors == 1 { "" } else { "s" },
            path.display()
        );
    }
    let format = match format {
        RenderFormat::Dot => Format::Dot,
        RenderFormat::Mermaid => Format::Mermaid,
    };
    let text = render::render(spec, format);
    match output {
        Some(file) => std::fs::write(&file, text)
            .with_context(|| format!("cannot write `{}`", file.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(exit::OK)
}

/// An MCP client for a graph's servers; binary results are not kept.
fn mcp_client(root: &std::path::Path) -> McpClient {
    McpClient::new(
        root,
        BlobStore::new(
            std::env::temp_dir().join(format!("switchyard-blobs-{}", std::process::id())),
        ),
    )
}

/// `validate --online`: adds the diagnostics that need the servers to a valid graph.
fn check_online(v: &mut Validation, sources: &Sources) -> anyhow::Result<()> {
    let Some(spec) = v.spec.as_ref().filter(|_| v.is_valid()) else {
        return Ok(());
    };
    let graph = switchyard::graph::compile(spec, sources)?;
    let client = mcp_client(&graph.root);
    let found = cli::runtime()?.block_on(async {
        let found = switchyard::mcp::online::check(spec, &graph, &client).await;
        client.shutdown().await;
        found
    });
    v.diagnostics.extend(found);
    switchyard::diagnostic::sort(&mut v.diagnostics);
    Ok(())
}

fn tools(path: &std::path::Path, only: Option<&str>, format: ReportFormat) -> anyhow::Result<u8> {
    let graph = match cli::load_graph(path)? {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let servers: Vec<_> = graph
        .servers
        .iter()
        .filter(|s| only.is_none_or(|o| o == s.name))
        .collect();
    if let Some(name) = only
        && servers.is_empty()
    {
        let names = graph.servers.iter().map(|s| s.name.as_str());
        let help = switchyard::suggestion::help_for(name, names)
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
        anyhow::bail!("`{}` has no server `{name}`{help}", path.display());
    }
    let client = mcp_client(&graph.root);
    let listed = cli::runtime()?.block_on(async {
        let mut listed = Vec::new();
        for server in &servers {
            match client.list_tools(server).await {
                Ok(tools) => listed.push((server.name.clone(), tools)),
                Err(e) => {
                    client.shutdown().await;
                    return Err(anyhow::anyhow!(e));
                }
            }
        }
        client.shutdown().await;
        Ok(listed)
    })?;
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Text => {
            for (server, tools) in &listed {
                let s = if tools.len() == 1 { "" } else { "s" };
                writeln!(out, "{server}: {} tool{s}", tools.len())?;
                for t in tools {
                    writeln!(out, "  {}", t.name)?;
                    if !t.description.is_empty() {
                        writeln!(out, "    {}", t.description.replace('\n', "\n    "))?;
                    }
                    writeln!(out, "    input: {}", t.input_schema)?;
                }
            }
        }
        ReportFormat::Json => {
            let json: Vec<_> = listed
                .iter()
                .map(|(server, tools)| {
                    serde_json::json!({
                        "server": server,
                        "tools": tools.iter().map(|t| serde_json::json!({
                            "name": t.name,
                            "description": t.description,
                            "input_schema": t.input_schema,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            serde_json::to_writer_pretty(&mut out, &json)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(exit::OK)
}

/// The client side of the MCP conformance suite (`npx @modelcontextprotocol/conformance
/// client --command "switchyard mcp-conformance-client"`): the suite appends the URL and
/// names the scenario in `MCP_CONFORMANCE_SCENARIO`.
fn mcp_conformance_client(url: &str) -> anyhow::Result<u8> {
    use switchyard::graph::{Server, ServerTransport};
    use switchyard::run::ToolRequest;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let server = Server {
        name: "conformance".into(),
        transport: ServerTransport::Http { url: url.into() },
    };
    let client = mcp_client(&std::env::current_dir()?);
    let result = cli::runtime()?.block_on(async {
        let result = async {
            let tools = client.list_tools(&server).await?;
            println!("{} tools", tools.len());
            if scenario == "tools_call" {
                for t in tools {
                    let request = ToolRequest {
                        server: server.clone(),
                        tool: t.name.clone(),
                        arguments: switchyard::mcp::example_arguments(&t.input_schema),
                        timeout: None,
                    };
                    let reply = client.call(&request).await?;
                    println!("{}: {}", t.name, reply.content);
                }
            }
            Ok::<_, switchyard::run::ToolError>(())
        }
        .await;
        client.shutdown().await;
        result
    });
    result?;
    Ok(exit::OK)
}
